import { describe, expect, it } from 'vitest';
import { addRowGram, choleskyInPlace, invertSpd, jacobiEigen, orthonormalizeColumns, ridge, topEigen, topK } from '../src/shop/linalg.js';
import { Rng } from '@atomem/bench/rng';

/** A random SPD matrix BᵀB + nI (row-major). */
function spd(n: number, seed: number): Float64Array {
  const rng = new Rng(seed);
  const B = Float64Array.from({ length: n * n }, () => rng.normal());
  const A = new Float64Array(n * n);
  for (let i = 0; i < n; i++)
    for (let j = 0; j < n; j++) {
      let s = i === j ? n : 0;
      for (let k = 0; k < n; k++) s += B[k * n + i] * B[k * n + j];
      A[i * n + j] = s;
    }
  return A;
}

describe('linear algebra of the trainer', () => {
  it.each([1, 5, 16, 17, 40, 75])('invertSpd gives A·A⁻¹ = I (n = %i, across block edges)', (n) => {
    const A = spd(n, n);
    const P = invertSpd(Float64Array.from(A), n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let k = 0; k < n; k++) s += A[i * n + k] * P[k * n + j];
        expect(s).toBeCloseTo(i === j ? 1 : 0, 9);
        expect(P[i * n + j]).toBe(P[j * n + i]);
      }
  });

  it('choleskyInPlace gives L with L·Lᵀ = A, and refuses an indefinite matrix', () => {
    const n = 33;
    const A = spd(n, 3);
    const L = Float64Array.from(A);
    choleskyInPlace(L, n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        if (j > i) expect(L[i * n + j]).toBe(0);
        let s = 0;
        for (let k = 0; k < n; k++) s += L[i * n + k] * L[j * n + k];
        expect(s).toBeCloseTo(A[i * n + j], 8);
      }
    expect(() => choleskyInPlace(Float64Array.from([1, 2, 2, 1]), 2)).toThrow(RangeError);
  });

  it('topEigen finds the leading eigenpairs of a symmetric PSD operator', () => {
    const n = 30;
    const A = spd(n, 7);
    const full = jacobiEigen(A, n);
    const rng = new Rng(1);
    const apply = (Q: Float64Array, d: number) => {
      const Y = new Float64Array(n * d);
      for (let i = 0; i < n; i++) for (let k = 0; k < n; k++) for (let c = 0; c < d; c++) Y[i * d + c] += A[i * n + k] * Q[k * d + c];
      return Y;
    };
    const top = topEigen(apply, n, 3, () => rng.normal(), 200, 6);
    for (let c = 0; c < 3; c++) expect(top.values[c] / full.values[c]).toBeCloseTo(1, 6);
  });

  it("topEigen on the operator's support rows with a fused Gram gives the same bits as on every row", () => {
    // A PSD operator that is zero outside rows 2, 3, 7, 11.. (items nobody met).
    const n = 40;
    const support = Int32Array.from([2, 3, 7, 11, 12, 19, 23, 30, 31, 38]);
    const m = support.length;
    const B = spd(m, 5);
    const A = new Float64Array(n * n);
    for (let a = 0; a < m; a++) for (let b = 0; b < m; b++) A[support[a] * n + support[b]] = B[a * m + b];
    const full = (Q: Float64Array, d: number) => {
      const Y = new Float64Array(n * d);
      for (let i = 0; i < n; i++) for (let k = 0; k < n; k++) for (let c = 0; c < d; c++) Y[i * d + c] += A[i * n + k] * Q[k * d + c];
      return Y;
    };
    const onSupport = (Q: Float64Array, d: number, gram?: Float64Array) => {
      const Y = new Float64Array(m * d);
      for (let r = 0; r < m; r++) {
        for (let k = 0; k < m; k++) for (let c = 0; c < d; c++) Y[r * d + c] += B[r * m + k] * Q[k * d + c];
        if (gram) addRowGram(gram, Y, r * d, d);
      }
      return Y;
    };
    const r1 = new Rng(9);
    const r2 = new Rng(9);
    const a = topEigen(full, n, 4, () => r1.normal(), 12, 3);
    const b = topEigen(onSupport, n, 4, () => r2.normal(), 12, { over: 3, rows: support, fusedGram: true });
    expect(b.values).toEqual(a.values);
    const rowsOfA = new Float64Array(m * 4);
    support.forEach((i, r) => rowsOfA.set(a.vectors.subarray(i * 4, i * 4 + 4), r * 4));
    expect(b.vectors).toEqual(rowsOfA);
  });

  it('orthonormalizeColumns keeps each column in the span of the earlier ones, and zeroes a collapsed column', () => {
    const n = 3000;
    const d = 12;
    const rng = new Rng(4);
    const A = Float64Array.from({ length: n * d }, () => rng.normal());
    for (let r = 0; r < n; r++) A[r * d + 1] = 3 * A[r * d] + 1e-3 * A[r * d + 1]; // nearly dependent
    const Q = A.slice();
    orthonormalizeColumns(Q, n, d);
    const dot = (X: Float64Array, i: number, Y: Float64Array, j: number) => {
      let s = 0;
      for (let r = 0; r < n; r++) s += X[r * d + i] * Y[r * d + j];
      return s;
    };
    for (let i = 0; i < d; i++) for (let j = 0; j <= i; j++) expect(Math.abs(dot(Q, i, Q, j) - (i === j ? 1 : 0))).toBeLessThan(1e-10);
    // R = QᵀA is upper triangular with a positive diagonal (the QR with R's diagonal > 0)
    for (let i = 0; i < d; i++) {
      expect(dot(Q, i, A, i)).toBeGreaterThan(0);
      for (let j = 0; j < i; j++) expect(Math.abs(dot(Q, i, A, j))).toBeLessThan(1e-8);
    }
    // a dependent column (Cholesky's pivot vanishes): the Gram–Schmidt fallback, finite, the others intact
    const B = Float64Array.from({ length: 100 * 3 }, () => rng.normal());
    for (let r = 0; r < 100; r++) B[r * 3 + 2] = B[r * 3] - 2 * B[r * 3 + 1];
    const B0 = B.slice();
    orthonormalizeColumns(B, 100, 3);
    expect(B.every(Number.isFinite)).toBe(true);
    let s01 = 0;
    let s0 = 0;
    for (let r = 0; r < 100; r++) {
      s01 += B[r * 3] * B[r * 3 + 1];
      s0 += B[r * 3] * B0[r * 3];
    }
    expect(Math.abs(s01)).toBeLessThan(1e-12);
    expect(s0).toBeGreaterThan(0);
    // an exactly zero column stays zero
    const Z = Float64Array.from({ length: 50 * 2 }, (_, k) => (k % 2 === 0 ? rng.normal() : 0));
    orthonormalizeColumns(Z, 50, 2);
    for (let r = 0; r < 50; r++) expect(Z[r * 2 + 1]).toBe(0);
  });

  it('ridge solves the regularised least squares', () => {
    // y = 2·x0 − x1 exactly, tiny α: recovers the coefficients
    const rng = new Rng(2);
    const rows = 50;
    const X = Float64Array.from({ length: rows * 2 }, () => rng.normal());
    const Y = Float64Array.from({ length: rows }, (_, r) => 2 * X[2 * r] - X[2 * r + 1]);
    const W = ridge(X, Y, rows, 2, 1, 1e-9);
    expect(W[0]).toBeCloseTo(2, 6);
    expect(W[1]).toBeCloseTo(-1, 6);
  });

  it('topK keeps the k largest (ties by lower index), skipping what it is told to', () => {
    const v = [3, 9, 1, 9, 7, NaN, 5];
    expect(topK(v.length, 3, (i) => v[i])).toEqual([1, 3, 4]);
    expect(
      topK(
        v.length,
        2,
        (i) => v[i],
        (i) => i === 1,
      ),
    ).toEqual([3, 4]);
    expect(topK(v.length, 0, (i) => v[i])).toEqual([]);
  });
});
