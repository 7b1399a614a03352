/**
 * The benchmark's disk cache of item vectors: one binary file per (dataset, embedder) in the
 * catalog vector format v1 (`atomem/protocol`: a JSON header with each item's id and text hash,
 * then float32 rows), so it scales to 100k-item catalogs (the old JSON cache was one string of
 * every vector, beyond V8's maximum string length at 64k items). Entries whose item text changed
 * are ignored. A failed read or write is reported on stderr, never swallowed.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { decodeCatalogVectors, encodeCatalogVectors, itemTextHash } from 'atomem/protocol';
import { ItemVectors, createCachedEmbedder, createHashingEmbedder, type CachedEmbedder, type Embedder, type Item } from 'atomem/engine';
import type { Dataset } from './types.js';

/** Where the cache of `embedderId` vectors of dataset `dataset` lives (`ATOMEM_BENCH_CACHE` or `.bench-cache/`). */
export function vectorCacheFile(embedderId: string, dataset: string, root = process.env.ATOMEM_BENCH_CACHE ?? '.bench-cache'): string {
  return join(root, `${dataset}-${embedderId.replace(/[^a-z0-9.-]+/gi, '_')}.atmv`);
}

/** Read cached raw vectors for `items` (id → vector; only entries whose text hash still matches). */
export function readVectorCache(
  file: string,
  embedder: { id: string; dim: number },
  items: ReadonlyMap<string, Item>,
  warn: (message: string) => void,
): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  if (!existsSync(file)) return out;
  try {
    const { header, vectors } = decodeCatalogVectors(readFileSync(file));
    if (header.embedder !== embedder.id || header.dim !== embedder.dim) {
      warn(`vector cache ${file} holds ${header.embedder} (${header.dim}-d), not ${embedder.id}: ignored`);
      return out;
    }
    for (const [id, e] of vectors) {
      const it = items.get(id);
      if (it && itemTextHash(it) === e.hash) out.set(id, e.vector);
    }
  } catch (e) {
    warn(`vector cache ${file} could not be read (${(e as Error).message}): re-embedding`);
  }
  return out;
}

/** Write `vectors` (id → raw vector) atomically (temp file + rename). Returns false, after a warning, when it cannot. */
export function writeVectorCache(
  file: string,
  embedder: { id: string; dim: number },
  items: ReadonlyMap<string, Item>,
  vectors: ReadonlyMap<string, Float32Array>,
  warn: (message: string) => void,
): boolean {
  const ids = [...vectors.keys()].filter((id) => items.has(id)).sort();
  try {
    mkdirSync(dirname(file), { recursive: true });
    const bytes = encodeCatalogVectors(
      embedder,
      ids.map((id) => items.get(id)!),
      ids.map((id) => vectors.get(id)!),
      'bench-cache',
    );
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
    return true;
  } catch (e) {
    warn(`vector cache ${file} could not be written (${(e as Error).message}): the next run embeds again`);
    return false;
  }
}

/** Options of {@link catalogVectors}. */
export interface CatalogVectorsOptions {
  /** The public catalog (loaded from a path; never copied). */
  dataset: Dataset;
  /** Item embedder: `use-lite` (default, as the benchmark), `hashing` (256-d, tests only) or any {@link Embedder}. */
  embedder?: 'use-lite' | 'hashing' | Embedder;
  /** Centre the item space on the catalog mean, as the benchmark does. Default true. */
  centre?: boolean;
  /** Folder of the JSON embedding cache (`.bench-cache/`, or `ATOMEM_BENCH_CACHE`); `null` for none. Only used for `use-lite` / `hashing`. */
  cacheDir?: string | null;
}

function jsonCacheFile(dir: string, embedderId: string, dataset: string): string {
  return join(dir, `${dataset}-${embedderId.replace(/[^a-z0-9.-]+/gi, '_')}.json`);
}

/** The catalog's item vectors (centred by default), with the embedder's outputs cached on disk as JSON. */
export async function catalogVectors(opts: CatalogVectorsOptions, progress: (label: string, done: number, total: number) => void): Promise<ItemVectors> {
  const kind = opts.embedder ?? 'use-lite';
  let emb: Embedder;
  let cached: CachedEmbedder | undefined;
  if (typeof kind === 'string') {
    let inner: Embedder;
    if (kind === 'use-lite') inner = await (await import('atomem/engine')).createUseLiteEmbedder();
    else if (kind === 'hashing') inner = createHashingEmbedder({ dim: 256 });
    else throw new RangeError(`embedder must be use-lite, hashing or an Embedder, got ${String(kind)}`);
    emb = cached = createCachedEmbedder(inner, { maxEntries: 200_000 });
  } else {
    emb = kind;
  }
  const dir = opts.cacheDir === undefined ? (process.env.ATOMEM_BENCH_CACHE ?? '.bench-cache') : opts.cacheDir;
  const file = cached && dir ? jsonCacheFile(dir, cached.id, opts.dataset.name) : undefined;
  let loaded = 0;
  if (file && cached && existsSync(file)) {
    try {
      loaded = cached.load(JSON.parse(readFileSync(file, 'utf8')) as [string, number[]][]).loaded;
    } catch {
      /* a damaged cache is only a slower start */
    }
  }
  const items = new ItemVectors(emb, opts.dataset.items.values());
  await items.warm((done, total) => progress('embedding catalog', done, total));
  if (opts.centre !== false) await items.centre();
  if (file && cached && cached.cache.size > loaded) {
    try {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, JSON.stringify(cached.snapshot().map(([k, v]) => [k, Array.from(v)])));
    } catch {
      /* read-only checkout: fine */
    }
  }
  return items;
}
