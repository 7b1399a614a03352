/**
 * Dense kernels for SASRec training: plain loops over typed arrays (float32 for training,
 * float64 for the finite-difference gradient check), arguments as (array, offset, stride).
 *
 * One product shape does all the work: C (+)= A·Bᵀ, i.e. C[i, j] = Σ_k A[i, k]·B[j, k], both
 * operands read along their rows (V8 does not vectorise; two rows × four columns per inner
 * loop keep eight accumulators in registers). Other shapes are reached by transposing the
 * small operand (d × d weights) or by {@link transpose} into scratch.
 */
export type F = Float32Array | Float64Array;

/** C[i·ldc + j] (+)= Σ_{k<K} A[ao + i·lda + k] · B[bo + j·ldb + k] for i < M, j < N. */
export function mmNT(
  M: number,
  N: number,
  K: number,
  A: F,
  ao: number,
  lda: number,
  B: F,
  bo: number,
  ldb: number,
  C: F,
  co: number,
  ldc: number,
  acc: boolean,
): void {
  let i = 0;
  for (; i + 1 < M; i += 2) {
    const a0 = ao + i * lda;
    const a1 = a0 + lda;
    const c0 = co + i * ldc;
    const c1 = c0 + ldc;
    let j = 0;
    for (; j + 3 < N; j += 4) {
      const b0 = bo + j * ldb;
      const b1 = b0 + ldb;
      const b2 = b1 + ldb;
      const b3 = b2 + ldb;
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0,
        t0 = 0,
        t1 = 0,
        t2 = 0,
        t3 = 0;
      for (let k = 0; k < K; k++) {
        const u = A[a0 + k];
        const v = A[a1 + k];
        const x0 = B[b0 + k],
          x1 = B[b1 + k],
          x2 = B[b2 + k],
          x3 = B[b3 + k];
        s0 += u * x0;
        s1 += u * x1;
        s2 += u * x2;
        s3 += u * x3;
        t0 += v * x0;
        t1 += v * x1;
        t2 += v * x2;
        t3 += v * x3;
      }
      if (acc) {
        C[c0 + j] += s0;
        C[c0 + j + 1] += s1;
        C[c0 + j + 2] += s2;
        C[c0 + j + 3] += s3;
        C[c1 + j] += t0;
        C[c1 + j + 1] += t1;
        C[c1 + j + 2] += t2;
        C[c1 + j + 3] += t3;
      } else {
        C[c0 + j] = s0;
        C[c0 + j + 1] = s1;
        C[c0 + j + 2] = s2;
        C[c0 + j + 3] = s3;
        C[c1 + j] = t0;
        C[c1 + j + 1] = t1;
        C[c1 + j + 2] = t2;
        C[c1 + j + 3] = t3;
      }
    }
    for (; j < N; j++) {
      const b0 = bo + j * ldb;
      let s = 0,
        t = 0;
      for (let k = 0; k < K; k++) {
        s += A[a0 + k] * B[b0 + k];
        t += A[a1 + k] * B[b0 + k];
      }
      if (acc) {
        C[c0 + j] += s;
        C[c1 + j] += t;
      } else {
        C[c0 + j] = s;
        C[c1 + j] = t;
      }
    }
  }
  if (i < M) {
    const a0 = ao + i * lda;
    const c0 = co + i * ldc;
    for (let j = 0; j < N; j++) {
      const b0 = bo + j * ldb;
      let s = 0;
      for (let k = 0; k < K; k++) s += A[a0 + k] * B[b0 + k];
      if (acc) C[c0 + j] += s;
      else C[c0 + j] = s;
    }
  }
}

/** B[bo + j·ldb + i] = A[ao + i·lda + j] for i < M, j < N (B is N × M). */
export function transpose(M: number, N: number, A: F, ao: number, lda: number, B: F, bo: number, ldb: number): void {
  // why: 8×8 tiles keep both sides in cache for the long (rows × 64) activations.
  for (let i0 = 0; i0 < M; i0 += 8) {
    const i1 = Math.min(i0 + 8, M);
    for (let j0 = 0; j0 < N; j0 += 8) {
      const j1 = Math.min(j0 + 8, N);
      for (let i = i0; i < i1; i++) {
        const a = ao + i * lda;
        for (let j = j0; j < j1; j++) B[bo + j * ldb + i] = A[a + j];
      }
    }
  }
}
