import { describe, expect, it } from 'vitest';
import { choleskyInPlace, invertSpd, jacobiEigen, ridge, topEigen, topK } from '../src/shop/linalg.js';
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
