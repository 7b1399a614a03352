import type { Embedding, Item } from '../core/types.js';
import type { Embedder } from './types.js';
import { assertValidTexts } from './validate.js';

/** Default length cap of {@link itemText}, in UTF-16 code units. */
const ITEM_TEXT_MAX_CHARS = 512;

/**
 * The canonical text an item is embedded from: title, then categories, then description,
 * whitespace collapsed, e.g. `"Fargo (1996). Crime, Drama, Thriller"`. Duplicate or blank
 * categories are dropped. Longer texts are cut at a word boundary to `maxChars`. Falls back to
 * the item id when every field is blank; throws a `TypeError` if even that is empty.
 */
export function itemText(item: Item, maxChars: number = ITEM_TEXT_MAX_CHARS): string {
  const title = clean(item.title);
  const categories = [...new Set((item.categories ?? []).map(clean).filter(Boolean))].join(', ');
  const description = clean(item.description);
  let text = '';
  for (const part of [title, categories, description]) {
    if (!part) continue;
    // why: "Amélie (2001)." + "Comedy" must not read "Amélie (2001).. Comedy"
    text = text === '' ? part : /[.!?…]$/.test(text) ? `${text} ${part}` : `${text}. ${part}`;
  }
  if (text === '') text = clean(item.id);
  if (text === '') throw new TypeError('itemText: item has no title, categories, description or id');
  return truncate(text, maxChars);
}

function clean(s: unknown): string {
  return typeof s === 'string' ? s.replace(/\s+/g, ' ').trim() : '';
}

function truncate(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  let cut = text.lastIndexOf(' ', maxChars);
  if (cut < maxChars / 2) cut = maxChars; // one huge word: hard cut
  // never split a surrogate pair
  const c = text.charCodeAt(cut - 1);
  if (c >= 0xd800 && c <= 0xdbff) cut--;
  return text.slice(0, cut).trimEnd();
}

/** Key of one cache entry: `embedderId`, a NUL, then the text (ids never contain NUL). */
export function cacheKey(embedderId: string, text: string): string {
  return `${embedderId}\u0000${text}`;
}

/** Inverse of {@link cacheKey}; `null` for a malformed key. */
export function parseCacheKey(key: string): { embedderId: string; text: string } | null {
  const at = key.indexOf('\u0000');
  if (at <= 0) return null;
  return { embedderId: key.slice(0, at), text: key.slice(at + 1) };
}

/** What {@link EmbeddingCache.load} did. */
export interface LoadResult {
  /** Entries stored. */
  loaded: number;
  /** Entries of another embedder, ignored (a change of embedder means a re-embed). */
  skipped: number;
}

/** Options of {@link EmbeddingCache}. */
export interface EmbeddingCacheOptions {
  /** Most entries kept; least recently used go first. Default 50 000 (~100 MB at 512-d). */
  maxEntries?: number;
}

/**
 * A bounded LRU map `(embedderId, text) → unit vector`. May be shared by several embedders:
 * keys carry the embedder id, so their vectors never mix. Stored vectors are owned by the
 * cache: treat what `get` and `snapshot` return as read-only.
 */
export class EmbeddingCache {
  /** Capacity in entries. */
  readonly maxEntries: number;
  private readonly map = new Map<string, Float32Array>();
  private evicted = 0;

  constructor(options: EmbeddingCacheOptions = {}) {
    const max = options.maxEntries ?? 50_000;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`EmbeddingCache: maxEntries must be a positive integer, got ${max}`);
    this.maxEntries = max;
  }

  /** Entries held. */
  get size(): number {
    return this.map.size;
  }

  /** Entries dropped to stay within `maxEntries` since construction. */
  get evictions(): number {
    return this.evicted;
  }

  /** The cached vector (read-only) and mark it most recently used, or `undefined`. */
  get(embedderId: string, text: string): Float32Array | undefined {
    const key = cacheKey(embedderId, text);
    const v = this.map.get(key);
    if (v !== undefined) {
      // why: a Map iterates in insertion order; re-inserting makes this entry the newest.
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  /** True when cached; does not change recency. */
  has(embedderId: string, text: string): boolean {
    return this.map.has(cacheKey(embedderId, text));
  }

  /** Store a copy of `vector` as the most recently used entry, evicting the oldest if full. */
  set(embedderId: string, text: string, vector: ArrayLike<number>): void {
    const key = cacheKey(embedderId, text);
    this.map.delete(key);
    this.map.set(key, Float32Array.from(vector));
    while (this.map.size > this.maxEntries) {
      this.map.delete(this.map.keys().next().value as string);
      this.evicted++;
    }
  }

  /** Drop every entry, or only those of `embedderId`. */
  clear(embedderId?: string): void {
    if (embedderId === undefined) {
      this.map.clear();
      return;
    }
    const prefix = cacheKey(embedderId, '');
    for (const key of [...this.map.keys()]) if (key.startsWith(prefix)) this.map.delete(key);
  }

  /**
   * Every entry as `[key, vector]` (keys from {@link cacheKey}), least recently used first, so
   * {@link load} restores recency too. Vectors are the cache's own (not copied): do not mutate.
   */
  snapshot(): Array<[string, Float32Array]> {
    return [...this.map.entries()];
  }

  /**
   * Warm the cache from a {@link snapshot} (e.g. read back from IndexedDB or a file). Entries of
   * `expect.embedderId` must have dimension `expect.dim`, finite values and unit norm, or the
   * whole load is rejected with a `RangeError` and nothing is stored; entries of other
   * embedders are skipped. Vectors may be `Float32Array`s or plain number arrays (JSON).
   */
  load(entries: Iterable<readonly [string, ArrayLike<number>]>, expect: { embedderId: string; dim: number }): LoadResult {
    const accepted: Array<[string, string, ArrayLike<number>]> = [];
    let skipped = 0;
    let i = 0;
    for (const entry of entries) {
      const parsed = Array.isArray(entry) && typeof entry[0] === 'string' ? parseCacheKey(entry[0]) : null;
      if (parsed === null) throw new RangeError(`EmbeddingCache.load: entry ${i} has no valid "embedderId\\0text" key`);
      if (parsed.embedderId !== expect.embedderId) {
        skipped++;
      } else {
        const v = entry[1];
        const problem = vectorProblem(v, expect.dim);
        if (problem) throw new RangeError(`EmbeddingCache.load: entry ${i} (${expect.embedderId}) ${problem}`);
        accepted.push([parsed.embedderId, parsed.text, v]);
      }
      i++;
    }
    for (const [id, text, v] of accepted) this.set(id, text, v);
    return { loaded: accepted.length, skipped };
  }
}

/** Why `v` is not a unit vector of dimension `dim`, or `null` when it is. */
function vectorProblem(v: unknown, dim: number): string | null {
  if (!(v instanceof Float32Array) && !Array.isArray(v)) return 'has no vector';
  const a = v as ArrayLike<number>;
  if (a.length !== dim) return `has dimension ${a.length}, expected ${dim}`;
  let s = 0;
  for (let j = 0; j < a.length; j++) {
    const x = a[j];
    if (typeof x !== 'number' || !Number.isFinite(x)) return `has a non-finite value at ${j}`;
    s += x * x;
  }
  if (Math.abs(Math.sqrt(s) - 1) > 1e-3) return `is not unit norm (norm ${Math.sqrt(s).toFixed(4)})`;
  return null;
}

/** Counters of a {@link CachedEmbedder}. `hits + misses` = texts requested. */
interface CacheStats {
  /** Texts answered without the inner embedder (cached, repeated in a call, or already in flight). */
  hits: number;
  /** Texts sent to the inner embedder. */
  misses: number;
  /** Entries in the cache (all embedders sharing it). */
  size: number;
  /** Cache capacity. */
  maxEntries: number;
  /** Entries evicted so far. */
  evictions: number;
}

/** Options of {@link createCachedEmbedder}. */
export interface CachedEmbedderOptions extends EmbeddingCacheOptions {
  /** Use this (possibly shared) cache instead of a new one; `maxEntries` is then ignored. */
  cache?: EmbeddingCache;
}

/** An {@link Embedder} that remembers vectors; same `id` and `dim` as the one it wraps. */
export interface CachedEmbedder extends Embedder {
  /** The underlying cache. */
  readonly cache: EmbeddingCache;
  /** Hit/miss counters since creation (or the last `resetStats`). */
  stats(): CacheStats;
  /** Zero the hit/miss counters. */
  resetStats(): void;
  /** This embedder's entries as `[key, vector]`, least recently used first (read-only vectors). */
  snapshot(): Array<[string, Float32Array]>;
  /** Warm from a snapshot; rejects entries of this embedder whose dimension is not `dim`. */
  load(entries: Iterable<readonly [string, ArrayLike<number>]>): LoadResult;
}

/**
 * Wrap `inner` with an LRU {@link EmbeddingCache}: `embed()` sends only unseen texts to `inner`,
 * each once (deduplicated, first-occurrence order; texts already being embedded by a concurrent
 * call are awaited, not re-sent), and returns one fresh vector per input, in input order.
 * Vectors `inner` returns with the wrong dimension or embedder id are rejected, never cached.
 */
export function createCachedEmbedder(inner: Embedder, options: CachedEmbedderOptions = {}): CachedEmbedder {
  const cache = options.cache ?? new EmbeddingCache(options);
  const { id, dim } = inner;
  const inFlight = new Map<string, Promise<Float32Array>>();
  let hits = 0;
  let misses = 0;

  async function embed(texts: readonly string[]): Promise<Embedding[]> {
    assertValidTexts(texts);
    const found = new Array<Float32Array | undefined>(texts.length);
    const waiting = new Map<string, Promise<Float32Array>>();
    const fresh: string[] = [];
    const freshSet = new Set<string>();
    for (let i = 0; i < texts.length; i++) {
      const t = texts[i];
      // why: keep the reference now; sending misses may evict this entry before we answer.
      const v = cache.get(id, t);
      if (v !== undefined) {
        found[i] = v;
        hits++;
      } else if (freshSet.has(t) || waiting.has(t)) {
        hits++;
      } else {
        const pending = inFlight.get(cacheKey(id, t));
        if (pending !== undefined) {
          waiting.set(t, pending);
          hits++;
        } else {
          freshSet.add(t);
          fresh.push(t);
          misses++;
        }
      }
    }

    const got = new Map<string, Float32Array>();
    if (fresh.length > 0) {
      const batch = inner.embed(fresh).then((embs) => checkInner(embs, fresh));
      fresh.forEach((t, j) => {
        const p = batch.then((vs) => vs[j]);
        p.catch(() => undefined); // why: only awaited by concurrent callers, who see the error themselves
        inFlight.set(cacheKey(id, t), p);
      });
      try {
        const vectors = await batch;
        fresh.forEach((t, j) => {
          got.set(t, vectors[j]);
          cache.set(id, t, vectors[j]);
        });
      } finally {
        for (const t of fresh) inFlight.delete(cacheKey(id, t));
      }
    }
    for (const [t, p] of waiting) got.set(t, await p);

    return texts.map((t, i) => ({ embedderId: id, vector: Float32Array.from(found[i] ?? (got.get(t) as Float32Array)) }));
  }

  function checkInner(embs: Embedding[], sent: readonly string[]): Float32Array[] {
    if (!Array.isArray(embs) || embs.length !== sent.length) {
      throw new Error(`cached embedder: inner "${id}" returned ${Array.isArray(embs) ? embs.length : 'no'} embeddings for ${sent.length} texts`);
    }
    return embs.map((e, j) => {
      if (e.embedderId !== id) throw new Error(`cached embedder: inner returned embedderId "${e.embedderId}", expected "${id}"`);
      if (e.vector.length !== dim) {
        throw new RangeError(
          `cached embedder: inner "${id}" returned dimension ${e.vector.length} for ${JSON.stringify(sent[j].slice(0, 40))}, expected ${dim}`,
        );
      }
      return e.vector;
    });
  }

  const prefix = cacheKey(id, '');
  return {
    id,
    dim,
    cache,
    embed,
    dispose: inner.dispose ? () => inner.dispose!() : undefined,
    stats: () => ({ hits, misses, size: cache.size, maxEntries: cache.maxEntries, evictions: cache.evictions }),
    resetStats: () => {
      hits = 0;
      misses = 0;
    },
    snapshot: () => cache.snapshot().filter(([k]) => k.startsWith(prefix)),
    load: (entries) => cache.load(entries, { embedderId: id, dim }),
  };
}
