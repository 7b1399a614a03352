import type { Embedding } from '../core/types.js';
import type { Embedder } from './types.js';
import { assertValidTexts } from './validate.js';

/** Options of {@link createHashingEmbedder}. */
export interface HashingOptions {
  /** Output dimension (integer ≥ 2). Default 64. */
  dim?: number;
  /** Hash seed (uint32). Default 0; a non-zero seed is part of the embedder id. */
  seed?: number;
}

/**
 * A deterministic feature-hashing bag of words: NFKC + lowercased letter/digit runs, unigrams
 * and adjacent bigrams, each hashed to one of `dim` buckets with a hashed ±1 sign, then
 * L2-normalised. Texts sharing words get a positive cosine; unrelated texts are near 0.
 *
 * **For unit tests only**: synchronous, instant, no model. It knows no synonyms, so it is no
 * stand-in for a sentence encoder when judging quality.
 *
 * `id` is `hashing-<dim>@1` (plus `/seed-<seed>` for a non-zero seed).
 */
export function createHashingEmbedder(options: HashingOptions = {}): Embedder {
  const dim = options.dim ?? 64;
  const seed = options.seed ?? 0;
  if (!Number.isInteger(dim) || dim < 2) throw new RangeError(`createHashingEmbedder: dim must be an integer ≥ 2, got ${dim}`);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(`createHashingEmbedder: seed must be a uint32, got ${seed}`);
  }
  const id = seed === 0 ? `hashing-${dim}@1` : `hashing-${dim}@1/seed-${seed}`;
  return {
    id,
    dim,
    async embed(texts: readonly string[]): Promise<Embedding[]> {
      assertValidTexts(texts);
      return texts.map((t) => ({ embedderId: id, vector: hashText(t, dim, seed) }));
    },
  };
}

const WORD = /[\p{L}\p{N}]+/gu;

function hashText(text: string, dim: number, seed: number): Float32Array {
  const v = new Float32Array(dim);
  const words = text.normalize('NFKC').toLowerCase().match(WORD) ?? [];
  // why: punctuation-only text ("!!!") has no words; hash the whole text so it still gets a vector.
  const features = words.length > 0 ? words : [text.trim()];
  for (let i = 0; i < features.length; i++) {
    addFeature(v, features[i], dim, seed);
    // a space never occurs inside a word, so a bigram never collides with a unigram's string.
    if (i > 0) addFeature(v, `${features[i - 1]} ${features[i]}`, dim, seed);
  }
  // Never zero: n words give 2n−1 (odd) ±1 features, so some bucket holds an odd sum.
  let s = 0;
  for (let i = 0; i < dim; i++) s += v[i] * v[i];
  const inv = 1 / Math.sqrt(s);
  for (let i = 0; i < dim; i++) v[i] *= inv;
  return v;
}

function addFeature(v: Float32Array, feature: string, dim: number, seed: number): void {
  const h = hash32(feature, seed);
  // index from the low bits, sign from the top bit (independent after the fmix32 avalanche)
  v[h % dim] += h & 0x80000000 ? -1 : 1;
}

/** FNV-1a over UTF-16 code units, seeded, finished with murmur3's fmix32 avalanche. */
function hash32(s: string, seed: number): number {
  let h = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
