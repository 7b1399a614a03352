/**
 * Dense linear algebra the shop's trainer needs, on row-major Float64Arrays: an SPD inverse by
 * Cholesky (n³/2 multiply-adds, every inner loop a contiguous dot product), a ridge solve, the
 * Jacobi eigen-decomposition of small symmetric matrices, and subspace iteration for the top
 * eigenpairs of a large symmetric operator given only as a block product. Pure (no Node APIs).
 */

/** A seeded source of standard normal deviates (the caller owns the stream). */
export type Normal = () => number;

/** Rows processed together: each streamed row is reused this many times from cache. */
const BLOCK = 16;

/**
 * s − A[a]·A[b] − A[a+1]·A[b+1] − … (len terms), subtracted one by one in order (the bits of
 * `for (k) s -= A[a + k] * A[b + k]`), unrolled by 4: V8 does not unroll.
 */
function subDots(s: number, A: Float64Array, a: number, b: number, len: number): number {
  let k = 0;
  for (; k + 4 <= len; k += 4) s = s - A[a + k] * A[b + k] - A[a + k + 1] * A[b + k + 1] - A[a + k + 2] * A[b + k + 2] - A[a + k + 3] * A[b + k + 3];
  for (; k < len; k++) s -= A[a + k] * A[b + k];
  return s;
}

/**
 * Lower Cholesky factor of the SPD n×n matrix `A` (row-major), in place: on return the lower
 * triangle (with the diagonal) holds L, the strict upper triangle is zeroed. Throws a RangeError
 * when a pivot is not positive (A not positive definite). Rows are factored in blocks of 16 so
 * that each earlier row, streamed from memory once per block, serves 16 dot products (the
 * unblocked loop is memory-bound: it streams all of L for every row).
 */
export function choleskyInPlace(A: Float64Array, n: number): void {
  for (let I = 0; I < n; I += BLOCK) {
    const end = Math.min(n, I + BLOCK);
    for (let j = 0; j < end; j++) {
      const rj = j * n;
      for (let i = Math.max(I, j); i < end; i++) {
        const ri = i * n;
        const s = subDots(A[ri + j], A, ri, rj, j);
        if (i === j) {
          if (!(s > 0)) throw new RangeError(`cholesky: pivot ${i} is ${s}; the matrix is not positive definite`);
          A[ri + i] = Math.sqrt(s);
        } else A[ri + j] = s / A[rj + j];
      }
    }
    for (let i = I; i < end; i++) for (let j = i + 1; j < n; j++) A[i * n + j] = 0;
  }
}

/**
 * Inverse of the SPD n×n matrix `A` (row-major; `A` is overwritten with its Cholesky factor,
 * then reused for the result). A⁻¹ = L⁻ᵀ L⁻¹: row i of U = L⁻ᵀ is column i of L⁻¹, found by
 * forward substitution; then (A⁻¹)[i][j] = Σ_{k ≥ max(i,j)} U[i][k] U[j][k]. About n³/2
 * multiply-adds and 2n² doubles; every phase works on blocks of 16 rows (see {@link choleskyInPlace}).
 */
export function invertSpd(A: Float64Array, n: number, onRow?: (done: number, total: number) => void): Float64Array {
  choleskyInPlace(A, n);
  onRow?.(n, 3 * n);
  const U = new Float64Array(n * n);
  // Columns i..i+15 of L⁻¹ at once: m_c[k] = −(Σ_{j=c}^{k−1} L[k][j] m_c[j]) / L[k][k], m_c[c] = 1/L[c][c].
  const M = new Float64Array(BLOCK * n);
  for (let I = 0; I < n; I += BLOCK) {
    const bs = Math.min(BLOCK, n - I);
    M.fill(0);
    for (let k = I; k < n; k++) {
      const rk = k * n;
      const d = A[rk + k];
      for (let c = 0; c < bs; c++) {
        const col = I + c;
        if (k < col) continue;
        const mc = c * n;
        if (k === col) {
          M[mc + k] = 1 / d;
          continue;
        }
        let s = 0;
        for (let j = col; j < k; j++) s += A[rk + j] * M[mc + j];
        M[mc + k] = -s / d;
      }
    }
    for (let c = 0; c < bs; c++) {
      const col = I + c;
      U.set(M.subarray(c * n + col, c * n + n), col * n + col);
    }
    onRow?.(n + Math.min(n, I + BLOCK), 3 * n);
  }
  const P = A; // reuse: L is no longer needed
  for (let I = 0; I < n; I += BLOCK) {
    const end = Math.min(n, I + BLOCK);
    for (let j = I; j < n; j++) {
      const uj = j * n;
      for (let i = I; i < end && i <= j; i++) {
        const ui = i * n;
        let s = 0;
        for (let k = j; k < n; k++) s += U[ui + k] * U[uj + k];
        P[ui + j] = s;
        P[uj + i] = s;
      }
    }
    onRow?.(2 * n + Math.min(n, end), 3 * n);
  }
  return P;
}

/**
 * Ridge regression W = (XᵀX + αI)⁻¹ XᵀY for X (rows × p) and Y (rows × q), row-major;
 * returns W (p × q).
 */
export function ridge(X: Float64Array, Y: Float64Array, rows: number, p: number, q: number, alpha: number): Float64Array {
  const G = new Float64Array(p * p);
  const XtY = new Float64Array(p * q);
  for (let r = 0; r < rows; r++) {
    const xr = r * p;
    const yr = r * q;
    for (let a = 0; a < p; a++) {
      const xa = X[xr + a];
      if (xa === 0) continue;
      const ga = a * p;
      for (let b = a; b < p; b++) G[ga + b] += xa * X[xr + b];
      const ta = a * q;
      for (let c = 0; c < q; c++) XtY[ta + c] += xa * Y[yr + c];
    }
  }
  for (let a = 0; a < p; a++) {
    G[a * p + a] += alpha;
    for (let b = a + 1; b < p; b++) G[b * p + a] = G[a * p + b];
  }
  const inv = invertSpd(G, p);
  return matmul(inv, XtY, p, p, q);
}

/** C = A (r × k) · B (k × c), row-major. */
function matmul(A: Float64Array, B: Float64Array, r: number, k: number, c: number): Float64Array {
  const C = new Float64Array(r * c);
  for (let i = 0; i < r; i++) {
    const ci = i * c;
    for (let t = 0; t < k; t++) {
      const a = A[i * k + t];
      if (a === 0) continue;
      const bt = t * c;
      for (let j = 0; j < c; j++) C[ci + j] += a * B[bt + j];
    }
  }
  return C;
}

/**
 * Eigen-decomposition of a small symmetric d×d matrix by cyclic Jacobi rotations. Returns the
 * eigenvalues in descending order and the eigenvectors as the columns of `vectors` (d×d,
 * row-major), in the same order.
 */
export function jacobiEigen(S: Float64Array, d: number, sweeps = 60): { values: Float64Array; vectors: Float64Array } {
  const A = Float64Array.from(S);
  const V = new Float64Array(d * d);
  for (let i = 0; i < d; i++) V[i * d + i] = 1;
  for (let sweep = 0; sweep < sweeps; sweep++) {
    let off = 0;
    let total = 0;
    for (let p = 0; p < d; p++)
      for (let q = 0; q < d; q++) {
        const x = A[p * d + q] * A[p * d + q];
        total += x;
        if (p !== q) off += x;
      }
    if (off <= 1e-22 * Math.max(total, 1e-300)) break;
    for (let p = 0; p < d - 1; p++) {
      for (let q = p + 1; q < d; q++) {
        const apq = A[p * d + q];
        if (Math.abs(apq) < 1e-300) continue;
        const theta = (A[q * d + q] - A[p * d + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < d; k++) {
          const akp = A[k * d + p];
          const akq = A[k * d + q];
          A[k * d + p] = c * akp - s * akq;
          A[k * d + q] = s * akp + c * akq;
        }
        for (let k = 0; k < d; k++) {
          const apk = A[p * d + k];
          const aqk = A[q * d + k];
          A[p * d + k] = c * apk - s * aqk;
          A[q * d + k] = s * apk + c * aqk;
        }
        for (let k = 0; k < d; k++) {
          const vkp = V[k * d + p];
          const vkq = V[k * d + q];
          V[k * d + p] = c * vkp - s * vkq;
          V[k * d + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  const order = Array.from({ length: d }, (_, i) => i).sort((a, b) => A[b * d + b] - A[a * d + a]);
  const values = Float64Array.from(order, (i) => A[i * d + i]);
  const vectors = new Float64Array(d * d);
  for (let r = 0; r < d; r++) for (let c = 0; c < d; c++) vectors[r * d + c] = V[r * d + order[c]];
  return { values, vectors };
}

/**
 * Orthonormalises the d columns of Q (n × d, row-major) in place: the Q of Q = Q'R with R upper
 * triangular and a positive diagonal (each column's span with the earlier ones is kept).
 * Cholesky QR twice (G = QᵀQ, Q ← Q·R⁻¹ with G = RᵀR; the second pass restores orthogonality to
 * rounding): four sweeps over the rows, contiguous in memory — at 100k rows × 40 columns about
 * 20× faster than Gram–Schmidt's column-strided sweeps. When G is not safely positive definite
 * (columns nearly dependent, a collapsed operator) it falls back to modified Gram–Schmidt twice.
 */
export function orthonormalizeColumns(Q: Float64Array, n: number, d: number, gram?: Float64Array): void {
  if (!(choleskyQr(Q, n, d, gram) && choleskyQr(Q, n, d))) gramSchmidt(Q, n, d);
}

/**
 * Adds row `o / d` of Q into the upper triangle of G = QᵀQ (row by row, zero entries skipped):
 * the first sweep of a Cholesky QR pass, exposed so that a product can fill G while each output
 * row is still in cache (`topEigen`'s `gram`), with the same sums in the same order.
 */
export function addRowGram(G: Float64Array, Q: Float64Array, o: number, d: number): void {
  for (let i = 0; i < d; i++) {
    const qi = Q[o + i];
    if (qi === 0) continue;
    axpy(G, i * d + i, Q, o + i, qi, d - i);
  }
}

/**
 * y[yo + c] += s · x[xo + c] for c < len: each entry its own multiply and add (no reassociation,
 * so the same bits as the plain loop), unrolled by 8 (V8 does not unroll; about 1.8× faster).
 */
export function axpy(y: Float64Array, yo: number, x: Float64Array, xo: number, s: number, len: number): void {
  let c = 0;
  for (; c + 8 <= len; c += 8) {
    y[yo + c] += s * x[xo + c];
    y[yo + c + 1] += s * x[xo + c + 1];
    y[yo + c + 2] += s * x[xo + c + 2];
    y[yo + c + 3] += s * x[xo + c + 3];
    y[yo + c + 4] += s * x[xo + c + 4];
    y[yo + c + 5] += s * x[xo + c + 5];
    y[yo + c + 6] += s * x[xo + c + 6];
    y[yo + c + 7] += s * x[xo + c + 7];
  }
  for (; c < len; c++) y[yo + c] += s * x[xo + c];
}

/**
 * One Cholesky QR pass; false (Q untouched) when QᵀQ's pivots fall below 1e-10 of its diagonal.
 * `gram`: QᵀQ's upper triangle already summed row by row ({@link addRowGram}); consumed.
 */
function choleskyQr(Q: Float64Array, n: number, d: number, gram?: Float64Array): boolean {
  let G: Float64Array;
  if (gram) G = gram;
  else {
    G = new Float64Array(d * d);
    for (let r = 0; r < n; r++) addRowGram(G, Q, r * d, d);
  }
  // G = RᵀR, R upper triangular (stored in G's upper triangle)
  for (let i = 0; i < d; i++) {
    const diag = G[i * d + i];
    let s = diag;
    for (let k = 0; k < i; k++) s -= G[k * d + i] * G[k * d + i];
    if (!(s > 1e-10 * diag) || !(diag > 0)) return false;
    const rii = Math.sqrt(s);
    G[i * d + i] = rii;
    for (let j = i + 1; j < d; j++) {
      let t = G[i * d + j];
      for (let k = 0; k < i; k++) t -= G[k * d + i] * G[k * d + j];
      G[i * d + j] = t / rii;
    }
  }
  // Q ← Q·R⁻¹, row by row (forward substitution on x·R = q)
  for (let r = 0; r < n; r++) {
    const o = r * d;
    for (let j = 0; j < d; j++) {
      let t = Q[o + j];
      for (let k = 0; k < j; k++) t -= Q[o + k] * G[k * d + j];
      Q[o + j] = t / G[j * d + j];
    }
  }
  return true;
}

/** Modified Gram–Schmidt, twice; a collapsed column becomes zero. */
function gramSchmidt(Q: Float64Array, n: number, d: number): void {
  for (let pass = 0; pass < 2; pass++) {
    for (let j = 0; j < d; j++) {
      for (let i = 0; i < j; i++) {
        let s = 0;
        for (let r = 0; r < n; r++) s += Q[r * d + i] * Q[r * d + j];
        for (let r = 0; r < n; r++) Q[r * d + j] -= s * Q[r * d + i];
      }
      let nrm = 0;
      for (let r = 0; r < n; r++) nrm += Q[r * d + j] * Q[r * d + j];
      nrm = Math.sqrt(nrm);
      // why: a column that collapsed (rank-deficient operator) becomes a zero column, not NaN.
      const inv = nrm > 1e-300 ? 1 / nrm : 0;
      for (let r = 0; r < n; r++) Q[r * d + j] *= inv;
    }
  }
}

/** Options of {@link topEigen}. */
export interface TopEigenOptions {
  /** Extra columns of the iterated block (default 8: faster convergence of the d-th pair). */
  over?: number;
  onIteration?: (done: number, total: number) => void;
  /**
   * The operator's support: the rows (ascending) outside which S is zero (rows and columns).
   * The seeded start is drawn and orthonormalised on all n rows, as without it; then only these
   * rows are iterated (`apply` gets and returns `rows.length` × d blocks) and `vectors` has one
   * row per entry. The other rows would stay exactly zero, so the result is the same, bit for bit,
   * at a cost that grows with the support instead of n.
   */
  rows?: Int32Array;
  /**
   * `apply` fills its third argument with the upper triangle of YᵀY (row by row, as
   * {@link addRowGram} does), so the orthonormalisation skips that sweep.
   */
  fusedGram?: boolean;
}

/**
 * Top-d eigenpairs of a symmetric PSD n×n operator by subspace iteration with a final
 * Rayleigh–Ritz step. `apply(Q)` must return S·Q for Q (n × d, row-major). Starts from a seeded
 * Gaussian block with `over` extra columns (faster convergence of the d-th pair).
 */
export function topEigen(
  apply: (Q: Float64Array, d: number, gram?: Float64Array) => Float64Array,
  n: number,
  d: number,
  normal: Normal,
  iterations = 30,
  overOrOptions: number | TopEigenOptions = 8,
  onIteration?: (done: number, total: number) => void,
): { values: Float64Array; vectors: Float64Array } {
  const o: TopEigenOptions = typeof overOrOptions === 'number' ? { over: overOrOptions, ...(onIteration ? { onIteration } : {}) } : overOrOptions;
  const b = Math.min(n, d + (o.over ?? 8));
  let Q: Float64Array = new Float64Array(n * b);
  for (let i = 0; i < Q.length; i++) Q[i] = normal();
  orthonormalizeColumns(Q, n, b);
  let m = n;
  if (o.rows) {
    const rows = o.rows;
    m = rows.length;
    const R = new Float64Array(m * b);
    for (let r = 0; r < m; r++) R.set(Q.subarray(rows[r] * b, rows[r] * b + b), r * b);
    Q = R;
  }
  for (let it = 0; it < iterations; it++) {
    if (o.fusedGram) {
      const G = new Float64Array(b * b);
      Q = apply(Q, b, G);
      orthonormalizeColumns(Q, m, b, G);
    } else {
      Q = apply(Q, b);
      orthonormalizeColumns(Q, m, b);
    }
    o.onIteration?.(it + 1, iterations + 1);
  }
  const SQ = apply(Q, b);
  const T = new Float64Array(b * b);
  // why row-outer: the same sums per (i, j) in the same row order as column by column, one sweep.
  for (let r = 0; r < m; r++) {
    const qr = r * b;
    for (let i = 0; i < b; i++) {
      const q = Q[qr + i];
      const ti = i * b;
      for (let j = 0; j < b; j++) T[ti + j] += q * SQ[qr + j];
    }
  }
  for (let i = 0; i < b; i++) for (let j = i + 1; j < b; j++) T[i * b + j] = T[j * b + i] = (T[i * b + j] + T[j * b + i]) / 2;
  const eig = jacobiEigen(T, b);
  const k = Math.min(d, b);
  const vectors = new Float64Array(m * k);
  for (let r = 0; r < m; r++)
    for (let c = 0; c < k; c++) {
      let s = 0;
      for (let t = 0; t < b; t++) s += Q[r * b + t] * eig.vectors[t * b + c];
      vectors[r * k + c] = s;
    }
  return { values: eig.values.slice(0, k), vectors };
}

/**
 * Indices of the k entries of `values[0..n)` with the largest `key(value)` (ties: lower index
 * first), in descending key order. O(n log k) with a binary min-heap.
 */
export function topK(n: number, k: number, key: (i: number) => number, skip?: (i: number) => boolean): number[] {
  if (k <= 0) return [];
  const heap: number[] = [];
  const keys: number[] = [];
  const less = (a: number, b: number) => keys[a] < keys[b] || (keys[a] === keys[b] && heap[a] > heap[b]);
  const swap = (a: number, b: number) => {
    [heap[a], heap[b]] = [heap[b], heap[a]];
    [keys[a], keys[b]] = [keys[b], keys[a]];
  };
  const down = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && less(l, m)) m = l;
      if (r < heap.length && less(r, m)) m = r;
      if (m === i) return;
      swap(i, m);
      i = m;
    }
  };
  for (let i = 0; i < n; i++) {
    if (skip?.(i)) continue;
    const v = key(i);
    if (Number.isNaN(v)) continue;
    if (heap.length < k) {
      heap.push(i);
      keys.push(v);
      let c = heap.length - 1;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (!less(c, p)) break;
        swap(c, p);
        c = p;
      }
    } else if (v > keys[0] || (v === keys[0] && i < heap[0])) {
      heap[0] = i;
      keys[0] = v;
      down(0);
    }
  }
  const out = heap.map((i, t) => ({ i, v: keys[t] }));
  out.sort((a, b) => b.v - a.v || a.i - b.i);
  return out.map((e) => e.i);
}
