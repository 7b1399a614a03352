/**
 * Seeded pseudo-random numbers for the benchmark: {@link Rng} (sfc32, from atomem's core, which
 * the shop's model training uses too) and the benchmark's own helpers. Everything random in the
 * benchmark goes through {@link Rng}: the same seed gives the same users, candidates, shuffles and models.
 *
 * Generator: sfc32 (Chris Doty-Humphrey's Small Fast Counting generator, 128-bit state,
 * passes PractRand), seeded by hashing a list of keys. {@link Rng.derive} makes an
 * independent stream per purpose, e.g. `Rng.derive(seed, 'negatives', userId)`: a user's
 * candidates then depend only on the seed and that user, never on how many other users
 * were drawn before.
 */

export { hash32, Rng } from 'atomem/engine';
import { Rng } from 'atomem/engine';

/**
 * mulberry32: a tiny seeded generator of numbers in [0, 1) (32-bit state, not cryptographic).
 * For places that need one plain stream from an integer seed (the demo's catalog and shoppers,
 * the index benchmarks and tests); the benchmark protocol itself uses {@link Rng}.
 */
export function mulberry32(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Deterministic random-looking memory ids for one simulated user (the benchmark must be reproducible). */
export function idGenerator(seed: number, user: string): () => string {
  const rng = Rng.derive(seed, 'ids', user);
  return () => rng.nextUint32().toString(16).padStart(8, '0') + rng.nextUint32().toString(16).padStart(8, '0');
}

/**
 * STEAM's training negatives for one user: each call draws a catalog item the user never
 * interacted with (up to 100 tries, else undefined), from the user's own stream.
 */
export function negativeSampler(seed: number, user: string, catalog: readonly string[], seen: ReadonlySet<string>): () => string | undefined {
  const rng = Rng.derive(seed, 'atomem-negatives', user);
  return () => {
    for (let tries = 0; tries < 100; tries++) {
      const id = catalog[rng.int(catalog.length)];
      if (!seen.has(id)) return id;
    }
    return undefined;
  };
}
