/** Embedders: the {@link Embedder} contract, USE-lite (WASM), a hashing test double, and a cache. */
export type { Embedder } from './types.js';
export {
  createUseLiteEmbedder,
  USE_LITE_ID,
  USE_LITE_DIM,
  type UseLiteEmbedder,
  type UseLiteOptions,
  type UseLiteAssetSource,
} from './use-lite.js';
export { createHashingEmbedder, type HashingOptions } from './hashing.js';
export {
  itemText,
  ITEM_TEXT_MAX_CHARS,
  EmbeddingCache,
  createCachedEmbedder,
  cacheKey,
  parseCacheKey,
  type CachedEmbedder,
  type CachedEmbedderOptions,
  type CacheStats,
  type EmbeddingCacheOptions,
  type LoadResult,
} from './cache.js';
export { assertValidTexts } from './validate.js';
