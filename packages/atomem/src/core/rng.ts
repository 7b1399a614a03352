/**
 * Seeded pseudo-random numbers (pure). Everything random in the benchmark and in the shop's
 * model training goes through {@link Rng}: the same seed gives the same users, candidates,
 * shuffles and models.
 *
 * Generator: sfc32 (Chris Doty-Humphrey's Small Fast Counting generator, 128-bit state,
 * passes PractRand), seeded by hashing a list of keys. {@link Rng.derive} makes an
 * independent stream per purpose, e.g. `Rng.derive(seed, 'negatives', userId)`: a user's
 * candidates then depend only on the seed and that user, never on how many other users
 * were drawn before.
 */

/** 32-bit MurmurHash3 of a string (UTF-16 code units, two bytes each), with a seed. */
export function hash32(text: string, seed = 0): number {
  let h = seed >>> 0;
  const c1 = 0xcc9e2d51;
  const c2 = 0x1b873593;
  for (let i = 0; i < text.length; i++) {
    let k = text.charCodeAt(i);
    k = Math.imul(k, c1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, c2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  h ^= text.length * 2;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const TWO_POW_32 = 4294967296;

/** A seeded PRNG (sfc32). Not cryptographic. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /**
   * @param seed a number (any integer; only its low 32 bits and sign matter) or a string.
   *   Equal seeds give equal streams.
   */
  constructor(seed: number | string) {
    const key = typeof seed === 'number' ? `n:${seed}` : `s:${seed}`;
    // why: four differently seeded hashes fill the 128-bit state; a zero state is avoided.
    this.a = hash32(key, 0x9e3779b9);
    this.b = hash32(key, 0x243f6a88);
    this.c = hash32(key, 0xb7e15162);
    this.d = hash32(key, 0x5851f42d) | 1;
    for (let i = 0; i < 15; i++) this.nextUint32();
  }

  /** An independent stream for one purpose: `Rng.derive(2026, 'negatives', 'u42')`. */
  static derive(seed: number, ...keys: Array<string | number>): Rng {
    // why: \u0000 cannot occur in ids read from text files, so key lists never collide.
    return new Rng([String(seed), ...keys.map(String)].join('\u0000'));
  }

  /** Uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform float in [0, 1) with 32 bits of randomness. */
  next(): number {
    return this.nextUint32() / TWO_POW_32;
  }

  /** Uniform integer in [0, n), exactly unbiased (rejection sampling). */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0 || n > TWO_POW_32) {
      throw new RangeError(`Rng.int: n must be an integer in [1, 2^32], got ${n}`);
    }
    const limit = TWO_POW_32 - (TWO_POW_32 % n);
    let x = this.nextUint32();
    while (x >= limit) x = this.nextUint32();
    return x % n;
  }

  /** Standard normal deviate (Box–Muller). */
  normal(): number {
    let u = this.next();
    while (u === 0) u = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  /** Shuffles `array` in place (Fisher–Yates) and returns it. */
  shuffle<T>(array: T[]): T[] {
    for (let i = array.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const tmp = array[i];
      array[i] = array[j];
      array[j] = tmp;
    }
    return array;
  }

  /**
   * `k` distinct elements of `array`, in draw order (partial forward Fisher–Yates on a copy).
   * Prefix-stable: for the same stream, the draw of `k` is the first `k` of the draw of `k + 1`.
   */
  sampleWithoutReplacement<T>(array: readonly T[], k: number): T[] {
    if (!Number.isInteger(k) || k < 0 || k > array.length) {
      throw new RangeError(`sampleWithoutReplacement: k must be in [0, ${array.length}], got ${k}`);
    }
    const copy = array.slice();
    for (let i = 0; i < k; i++) {
      const j = i + this.int(copy.length - i);
      const tmp = copy[i];
      copy[i] = copy[j];
      copy[j] = tmp;
    }
    return copy.slice(0, k);
  }
}
