/**
 * Content vectors of a benchmark catalog for the shop model's hybrid item vectors: the raw
 * USE-lite output of each item's text (`itemText`), read from the bench's embedding cache
 * (`.bench-cache/`, written by the atomem method) when it holds every item, else embedded
 * through `benchItemVectors` (which loads the model and fills the cache).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cacheKey, itemText } from 'atomem/engine';
import type { ContentInput } from 'atomem/shop';
import type { Dataset, MethodContext } from './types.js';

const IDS: Record<string, string> = { 'use-lite': 'use-lite@0.2.0/float32' };
const loaded = new WeakMap<Dataset, Map<string, Promise<ContentInput>>>();

function fromCache(ds: Dataset, embedder: string): Map<string, Float32Array> | undefined {
  const file = join(process.env.ATOMEM_BENCH_CACHE ?? '.bench-cache', `${ds.name}-${embedder.replace(/[^a-z0-9.-]+/gi, '_')}.json`);
  if (!existsSync(file)) return undefined;
  try {
    const entries = new Map(JSON.parse(readFileSync(file, 'utf8')) as [string, number[]][]);
    const out = new Map<string, Float32Array>();
    for (const [id, item] of ds.items) {
      const v = entries.get(cacheKey(embedder, itemText(item)));
      if (!v) return undefined;
      out.set(id, Float32Array.from(v));
    }
    return out;
  } catch {
    return undefined;
  }
}

/** Raw content vectors of every catalog item (memoised per dataset and kind). */
export function contentVectorsFor(ds: Dataset, kind: string, ctx: Pick<MethodContext, 'progress'>): Promise<ContentInput> {
  const embedder = IDS[kind];
  if (!embedder) throw new Error(`shop.content must be use-lite or none, got ${kind}`);
  let byKind = loaded.get(ds);
  if (!byKind) loaded.set(ds, (byKind = new Map()));
  let p = byKind.get(kind);
  if (!p) {
    p = (async () => {
      const cached = fromCache(ds, embedder);
      if (cached) return { embedder, vectors: cached };
      const { benchItemVectors } = await import('./atomem-method.js');
      ctx.progress(0, 1, 'embedding catalog');
      return { embedder, vectors: await benchItemVectors(ds, { 'atomem.embedder': kind }, [...ds.items.keys()]) };
    })();
    byKind.set(kind, p);
  }
  return p;
}
