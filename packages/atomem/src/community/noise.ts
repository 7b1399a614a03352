/**
 * Seeded Laplace noise for released item counts. Pure and deterministic: the noise of one
 * count is a hash of (seed, key, item), so asking the same question twice gives the same
 * answer — repeated queries cannot be averaged to strip the noise. Callers put the community's
 * version into `key`, so a changed community gets fresh noise.
 */

/** cyrb53 (public domain): a fast 53-bit string hash with good avalanche. */
function hash53(str: string, seed: number): number {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < str.length; i++) {
    const ch = str.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507);
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** A uniform number in the open interval (0, 1), determined by (seed, key). */
export function hashUniform(seed: number, key: string): number {
  return (hash53(key, seed | 0) + 0.5) / 9007199254740992; // 2^53
}

/** A Laplace(0, scale) sample determined by (seed, key); 0 when scale ≤ 0. */
export function laplace(seed: number, key: string, scale: number): number {
  if (!(scale > 0)) return 0;
  const u = hashUniform(seed, key);
  // inverse CDF of the Laplace distribution
  return u < 0.5 ? scale * Math.log(2 * u) : -scale * Math.log(2 * (1 - u));
}

/**
 * Release counts with Laplace noise of scale `scale`: each count gets its own deterministic
 * sample keyed by `key` and the item id, is clipped at 0, and entries ≤ 0 after noise are
 * dropped. With `scale` 0 the counts are returned unchanged (entries ≤ 0 still dropped).
 * Keys are visited in sorted order so the output does not depend on insertion order.
 */
export function noisyCounts(counts: ReadonlyMap<string, number>, scale: number, seed: number, key: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of [...counts.keys()].sort()) {
    const v = counts.get(item)! + laplace(seed, `${key}\u0000${item}`, scale);
    if (v > 0) out[item] = v;
  }
  return out;
}
