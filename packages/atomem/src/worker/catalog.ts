/**
 * The catalog's item vectors before the engine's first answer: from the IndexedDB cache (same
 * embedder, same item text), then from the shop's precomputed file (`catalogVectors`, format in
 * `src/protocol/catalog-vectors-v1.ts`) for the items still missing, then by embedding the rest
 * on the device. Everything embedded or taken from the file goes into the cache, so a returning
 * shopper embeds only new or edited products and never fetches the file again.
 */
import type { ItemVectors } from '../agent/items.js';
import type { LoadProgress } from '../models/types.js';
import { CatalogVectorsError, decodeCatalogVectors, itemTextHash } from '../protocol/catalog-vectors-v1.js';
import type { MemoryStore } from '../store/index.js';

/** What {@link warmCatalog} needs from the engine. */
export interface WarmCatalogOptions {
  store: MemoryStore;
  items: ItemVectors;
  progress: (p: LoadProgress) => void;
  /** URL of the shop's catalog vector file, if any. */
  fileUrl?: string;
  /** The engine's store write (a full disk is reported, not thrown). */
  write: (fn: () => Promise<void>) => Promise<void>;
  /** A bad vector file (never fatal: its items are embedded here). */
  onError: (e: CatalogVectorsError) => void;
}

/** Fill `items` with a vector for every catalog item (see the module comment). */
export async function warmCatalog({ store, items, progress, fileUrl, write, onError }: WarmCatalogOptions): Promise<void> {
  const key = (id: string): string => `${id}\u0000${itemTextHash(items.item(id))}`;
  const cached = await store.itemVectorsOf(items.embedder.id).catch(() => new Map<string, Float32Array>());
  let fresh: string[] = [];
  for (const it of items.all()) {
    const v = cached.get(key(it.id));
    if (v && v.length === items.embedder.dim) items.seed(it.id, v);
    else fresh.push(it.id);
  }
  const fromFile: string[] = [];
  if (fresh.length && fileUrl) {
    const file = await fetchCatalogVectors(fileUrl, items, progress).catch((e: unknown) => {
      onError(e instanceof CatalogVectorsError ? e : new CatalogVectorsError(`${fileUrl}: ${e instanceof Error ? e.message : String(e)}`));
      return null;
    });
    if (file) {
      fresh = fresh.filter((id) => {
        const row = file.get(id);
        if (!row || row.hash !== itemTextHash(items.item(id))) return true;
        items.seed(id, row.vector);
        fromFile.push(id);
        return false;
      });
    }
  }
  const total = fresh.length;
  progress({ stage: 'catalog', phase: total === 0 ? 'ready' : 'embed', loaded: 0, total, unit: 'items' });
  await items.warm((done) => progress({ stage: 'catalog', phase: done === total ? 'ready' : 'embed', loaded: done, total, unit: 'items' }));
  const toCache = [...fromFile, ...fresh];
  if (toCache.length) {
    const vectors = toCache.map((id) => [key(id), items.raw(id)!] as [string, Float32Array]);
    await write(() => store.putItemVectors(items.embedder.id, vectors));
  }
}

/** Fetch (with byte progress) and check the shop's catalog vector file; throws on anything wrong with it. */
async function fetchCatalogVectors(url: string, items: ItemVectors, progress: (p: LoadProgress) => void): Promise<Map<string, { hash: string; vector: Float32Array }>> {
  const response = await fetch(url);
  if (!response.ok) throw new CatalogVectorsError(`${url} answered HTTP ${response.status}`);
  const total = Number(response.headers.get('content-length') ?? 0);
  let bytes: Uint8Array;
  if (response.body && total > 0) {
    bytes = new Uint8Array(total);
    let loaded = 0;
    const reader = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (loaded + value.length > total) throw new CatalogVectorsError(`${url} sent more bytes than its content-length`);
      bytes.set(value, loaded);
      loaded += value.length;
      progress({ stage: 'catalog', phase: 'download', loaded, total, unit: 'bytes' });
    }
    if (loaded !== total) throw new CatalogVectorsError(`${url} ended after ${loaded} of ${total} bytes`);
  } else {
    bytes = new Uint8Array(await response.arrayBuffer());
  }
  const file = decodeCatalogVectors(bytes);
  if (file.header.embedder !== items.embedder.id || file.header.dim !== items.embedder.dim) {
    throw new CatalogVectorsError(`${url} holds ${file.header.embedder} vectors (${file.header.dim}-d); this engine embeds with ${items.embedder.id} (${items.embedder.dim}-d)`);
  }
  return file.vectors;
}
