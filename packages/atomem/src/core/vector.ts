/** Small, pure vector helpers. Vectors are Float32Array; similarity assumes unit norm. */

/** Throw a clear error when two vectors' dimensions differ. */
export function assertSameDim(a: ArrayLike<number>, b: ArrayLike<number>): void {
  if (a.length !== b.length) throw new RangeError(`vector dimension mismatch: ${a.length} vs ${b.length}`);
}

/** Dot product. */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assertSameDim(a, b);
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Euclidean norm. */
export function norm(a: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * a[i];
  return Math.sqrt(s);
}

/** Return a new unit-norm copy; throws on a zero, NaN or infinite vector. */
export function normalize(a: ArrayLike<number>): Float32Array {
  const n = norm(a);
  if (!Number.isFinite(n)) throw new RangeError('vector contains NaN or Infinity');
  if (n === 0) throw new RangeError('cannot normalise a zero vector');
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] / n;
  return out;
}

/** Cosine similarity (safe for non-unit vectors; 0 when either is zero). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const na = norm(a);
  const nb = norm(b);
  if (na === 0 || nb === 0) return 0;
  return dot(a, b) / (na * nb);
}

/** `acc += w * v` in place. */
export function addScaled(acc: Float32Array, v: ArrayLike<number>, w = 1): Float32Array {
  assertSameDim(acc, v);
  for (let i = 0; i < acc.length; i++) acc[i] += w * v[i];
  return acc;
}

/** Normalised (weighted) mean of vectors; throws on an empty list. */
export function meanNormalized(vectors: readonly ArrayLike<number>[], weights?: readonly number[]): Float32Array {
  if (vectors.length === 0) throw new RangeError('mean of zero vectors');
  const acc = new Float32Array(vectors[0].length);
  vectors.forEach((v, i) => addScaled(acc, v, weights ? weights[i] : 1));
  return normalize(acc);
}

/** True when every component is finite. */
export function isFiniteVector(a: ArrayLike<number>): boolean {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) return false;
  return true;
}
