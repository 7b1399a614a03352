/**
 * Community prototypes (STEAM's `p_k`): the embedding `e_k` is the normalised mean of the
 * community's vectors (in a release: its catalog items' vectors). Text summaries (`c_k`) are
 * written on the device by the reasoner and are not this module's concern. Pure, no I/O.
 */

/** The normalised mean of `vectors` (summed in float64; empty input → a 0-length vector). */
export function prototypeOf(vectors: Iterable<ArrayLike<number>>): Float32Array {
  let sum: Float64Array | undefined;
  for (const v of vectors) {
    sum ??= new Float64Array(v.length);
    for (let i = 0; i < v.length; i++) sum[i] += v[i];
  }
  if (sum === undefined) return new Float32Array(0);
  let n = 0;
  for (let i = 0; i < sum.length; i++) n += sum[i] * sum[i];
  n = Math.sqrt(n);
  const out = new Float32Array(sum.length);
  if (n > 0) for (let i = 0; i < sum.length; i++) out[i] = sum[i] / n;
  return out;
}
