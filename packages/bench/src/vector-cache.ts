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
import type { Item } from 'atomem/engine';

/** Where the cache of `embedderId` vectors of dataset `dataset` lives (`ATOMEM_BENCH_CACHE` or `.bench-cache/`). */
export function vectorCacheFile(embedderId: string, dataset: string, root = process.env.ATOMEM_BENCH_CACHE ?? '.bench-cache'): string {
  return join(root, `${dataset}-${embedderId.replace(/[^a-z0-9.-]+/gi, '_')}.atmv`);
}

/** Read cached raw vectors for `items` (id → vector; only entries whose text hash still matches). */
export function readVectorCache(file: string, embedder: { id: string; dim: number }, items: ReadonlyMap<string, Item>, warn: (message: string) => void): Map<string, Float32Array> {
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
export function writeVectorCache(file: string, embedder: { id: string; dim: number }, items: ReadonlyMap<string, Item>, vectors: ReadonlyMap<string, Float32Array>, warn: (message: string) => void): boolean {
  const ids = [...vectors.keys()].filter((id) => items.has(id)).sort();
  try {
    mkdirSync(dirname(file), { recursive: true });
    const bytes = encodeCatalogVectors(embedder, ids.map((id) => items.get(id)!), ids.map((id) => vectors.get(id)!), 'bench-cache');
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, file);
    return true;
  } catch (e) {
    warn(`vector cache ${file} could not be written (${(e as Error).message}): the next run embeds again`);
    return false;
  }
}
