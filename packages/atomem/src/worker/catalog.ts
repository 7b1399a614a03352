/**
 * The catalog's item vectors before the engine's first answer: from the IndexedDB cache (same
 * embedder, same item text), then from the shop's precomputed file (`catalogVectors`, format v1
 * or v2: `src/protocol/catalog-vectors-v1.ts`, `catalog-vectors-v2.ts`) for the items still
 * missing, then by embedding the rest on the device. Everything embedded or taken from the file
 * goes into the cache, so a returning shopper embeds only new or edited products.
 *
 * A v2 file may also carry the shop's published models (shop model, SASRec): they are returned
 * to the engine (which moves the item space to them, `ItemVectors.useShop`) and kept in the
 * origin's file cache (`shop-file-cache.ts`) with the file's HTTP validators. When to fetch:
 * - some item is not cached, or the URL was never downloaded: the whole file (as v1);
 * - everything cached and the file was served with `ETag` / `Last-Modified`: a conditional
 *   request (`If-None-Match` / `If-Modified-Since`); 304 → the cached models, 200 → the new file;
 * - everything cached and no validators (e.g. a `blob:` URL): no request at all (as v1); a shop
 *   that republishes such a file gives it a new URL.
 * A failed download falls back to the cached models (if any); a malformed or mismatched file is
 * an `error` event and is not used.
 *
 * Format v3 (`catalog-vectors-v3.ts`): the URL names a small head (fetched, cached and
 * revalidated as above, whatever the item cache holds) and the worker fetches only the shards
 * the ids of the catalog the page gave it hash to — fixed sets of the shop's public items, found
 * from the ids alone — and keeps them in the origin's cache; the content vectors, the shop model's rows and
 * the sequence model's rows of those items come from them. Shards of the shopper's earlier
 * items (stored events) are added when cached, never requested: a request depends only on
 * the page's products.
 */
import type { ItemVectors } from '../agent/items.js';
import type { LoadProgress } from '../models/types.js';
import { CatalogVectorsError, itemTextHash } from '../protocol/catalog-vectors-v1.js';
import { catalogFileVersion, decodeCatalogFile, decodeShopPart, type CatalogFile, type CatalogShopPart } from '../protocol/catalog-vectors-v2.js';
import { assembleCatalogFile, decodeCatalogHead, decodeCatalogShard, shardsFor, type CatalogHead, type CatalogShard } from '../protocol/catalog-vectors-v3.js';
import type { MemoryStore } from '../store/index.js';
import { deleteCachedFile, getCachedFile, getCachedShard, pruneShards, putCachedFile, putCachedShard, type CachedCatalogFile } from './shop-file-cache.js';
import { InvalidCatalogError } from '../errors.js';

/**
 * Check the shop's catalog before anything starts: an array of `{ id, title, categories?,
 * description? }` with non-empty string ids, string titles, `categories` an array of strings and
 * `description` a string when given, and no id twice. Throws {@link InvalidCatalogError} naming
 * the first offending item (its position and id).
 */
export function validateCatalog(catalog: unknown): void {
  if (!Array.isArray(catalog))
    throw new InvalidCatalogError(
      'not-array',
      -1,
      '',
      `catalog must be an array of items { id, title, categories?, description? }, got ${catalog === null ? 'null' : typeof catalog}`,
    );
  const seen = new Map<string, number>();
  for (let i = 0; i < catalog.length; i++) {
    const it: unknown = catalog[i];
    const at = `catalog[${i}]`;
    if (typeof it !== 'object' || it === null || Array.isArray(it))
      throw new InvalidCatalogError(
        'item',
        i,
        '',
        `${at} must be an object { id, title, categories?, description? }, got ${it === null ? 'null' : Array.isArray(it) ? 'an array' : typeof it}`,
      );
    const { id, title, categories, description } = it as Record<string, unknown>;
    if (typeof id !== 'string' || id === '')
      throw new InvalidCatalogError(
        'id',
        i,
        '',
        `${at}${typeof title === 'string' ? ` ("${title}")` : ''} needs a non-empty string id, got ${id === '' ? 'an empty string' : typeof id}`,
      );
    // why: the engine's keys join an id and a text hash with NUL, and a v3 file names the items of shards not loaded with one
    if (id.includes('\u0000')) throw new InvalidCatalogError('id', i, id, `${at}: its id holds a NUL character (\\u0000), which item ids may not`);
    const name = `${at} (id "${id}")`;
    if (typeof title !== 'string') throw new InvalidCatalogError('title', i, id, `${name} needs a string title, got ${title === null ? 'null' : typeof title}`);
    if (categories !== undefined && !(Array.isArray(categories) && categories.every((c) => typeof c === 'string')))
      throw new InvalidCatalogError('categories', i, id, `${name}: categories must be an array of strings`);
    if (description !== undefined && typeof description !== 'string')
      throw new InvalidCatalogError('description', i, id, `${name}: description must be a string, got ${description === null ? 'null' : typeof description}`);
    const first = seen.get(id);
    if (first !== undefined) throw new InvalidCatalogError('duplicate', i, id, `${name} repeats the id of catalog[${first}]: catalog ids must be unique`);
    seen.set(id, i);
  }
}

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

/** What the warm-up found besides the vectors. */
export interface WarmCatalogResult {
  /** The shop's published models (v2 files with a shop model), decoded. */
  shop?: CatalogShopPart;
  /** Where the file's content came from this time: downloaded, revalidated (304) or cached without a request; null without a file. */
  file: { version: number; source: 'download' | 'revalidated' | 'cache'; bytes: number } | null;
}

/** Fill `items` with a vector for every catalog item (see the module comment). */
export async function warmCatalog({ store, items, progress, fileUrl, write, onError }: WarmCatalogOptions): Promise<WarmCatalogResult> {
  const key = (id: string): string => `${id}\u0000${itemTextHash(items.item(id))}`;
  const cached = await store.itemVectorsOf(items.embedder.id).catch(() => new Map<string, Float32Array>());
  let fresh: string[] = [];
  for (const it of items.all()) {
    const v = cached.get(key(it.id));
    if (v && v.length === items.embedder.dim) items.seed(it.id, v);
    else fresh.push(it.id);
  }
  const fromFile: string[] = [];
  const result: WarmCatalogResult = { file: null };
  if (fileUrl) {
    const report = (e: unknown): void =>
      onError(e instanceof CatalogVectorsError ? e : new CatalogVectorsError(`${fileUrl}: ${e instanceof Error ? e.message : String(e)}`));
    const entry = await getCachedFile(fileUrl);
    const validators = entry && (entry.etag || entry.lastModified) ? { etag: entry.etag, lastModified: entry.lastModified } : undefined;
    // why v3 apart: its head holds no content rows, so items missing here do not make it a full download
    const mode = !entry || (entry.version !== 3 && fresh.length > 0) ? 'full' : validators ? 'conditional' : 'none';
    let got: Downloaded | 'not modified' | null = mode === 'none' ? 'not modified' : null;
    if (mode !== 'none') {
      got = await fetchCatalogFile(fileUrl, progress, mode === 'conditional' ? validators : undefined).catch((e: unknown) => {
        // why: offline with everything cached is normal (nothing to report); anything else is
        if (!(mode === 'conditional' && e instanceof TypeError)) report(e);
        return null;
      });
    }
    const downloaded = got !== null && got !== 'not modified' ? got : null;
    let headBytes: Uint8Array | undefined;
    let headSource: 'download' | 'revalidated' | 'cache' = 'download';
    if (downloaded) {
      try {
        if (catalogFileVersion(downloaded.bytes) === 3) headBytes = downloaded.bytes;
      } catch {
        // not ATMV: decodeCatalogFile below says so
      }
    } else if (entry?.version === 3 && entry.head) {
      headBytes = entry.head;
      headSource = got === 'not modified' && mode === 'conditional' ? 'revalidated' : 'cache';
    }
    if (headBytes) {
      // the shopper's history items (rows of their lists score the candidates): their shards only from the cache
      const history = await store
        .load()
        .then((st) => st.events.map((e) => e.item))
        .catch(() => [] as string[]);
      const v3 = await loadSharded({ url: fileUrl, headBytes, source: headSource, downloaded, entry, items, history, progress, report });
      if (v3) {
        fresh = fresh.filter((id) => {
          const row = v3.file.vectors.get(id);
          if (!row || row.hash !== itemTextHash(items.item(id))) return true;
          items.seed(id, row.vector);
          fromFile.push(id);
          return false;
        });
        result.shop = v3.file.shop;
        result.file = { version: 3, source: headSource, bytes: v3.bytes };
      }
    } else if (got === 'not modified' || (got === null && entry)) {
      if (entry?.shop) result.shop = await fromCache(entry, fileUrl, report);
      if (entry)
        result.file = { version: entry.version, source: got === 'not modified' && mode === 'conditional' ? 'revalidated' : 'cache', bytes: entry.bytes };
    } else if (downloaded) {
      try {
        const file = decodeCatalogFile(downloaded.bytes);
        if (file.embedder !== items.embedder.id || file.dim !== items.embedder.dim) {
          throw new CatalogVectorsError(
            `${fileUrl} holds ${file.embedder} vectors (${file.dim}-d); this engine embeds with ${items.embedder.id} (${items.embedder.dim}-d)`,
          );
        }
        fresh = fresh.filter((id) => {
          const row = file.vectors.get(id);
          if (!row || row.hash !== itemTextHash(items.item(id))) return true;
          items.seed(id, row.vector);
          fromFile.push(id);
          return false;
        });
        result.shop = file.shop;
        result.file = { version: file.version, source: 'download', bytes: downloaded.bytes.length };
        const rec: CachedCatalogFile = {
          url: fileUrl,
          version: file.version,
          etag: downloaded.etag,
          lastModified: downloaded.lastModified,
          bytes: downloaded.bytes.length,
          savedAt: Date.now(),
        };
        if (file.shop)
          rec.shop = {
            id: file.shop.id,
            model: file.shop.modelBytes,
            ...(file.shop.sasrec ? { sasrec: { bytes: file.shop.sasrec.bytes, items: file.shop.sasrec.items } } : {}),
          };
        await putCachedFile(rec);
      } catch (e) {
        report(e);
      }
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
  return result;
}

/** The cached shop part, decoded; a record that no longer decodes is dropped (the next visit downloads the file). */
async function fromCache(entry: CachedCatalogFile, url: string, report: (e: unknown) => void): Promise<CatalogShopPart | undefined> {
  const s = entry.shop!;
  try {
    return decodeShopPart(s.model, s.sasrec, s.id);
  } catch (e) {
    await deleteCachedFile(url);
    report(new CatalogVectorsError(`the cached copy of ${url} is unusable and was dropped: ${(e as Error).message}`));
    return undefined;
  }
}

/** Shard downloads at once (a browser opens about six connections per host). */
const SHARD_CONCURRENCY = 6;

/**
 * Format v3: decode the head (downloaded, revalidated or cached), then the shards holding the
 * catalog's items — from the origin's cache, else fetched (a shard's name carries its checksum,
 * so a cached one is never revalidated) — and assemble them. A bad head is reported and not
 * used (a cached one is dropped); a shard that fails is reported and its items are embedded
 * here. Returns the assembled file and the bytes of the head and shards used, or null.
 */
async function loadSharded(o: {
  url: string;
  headBytes: Uint8Array;
  source: 'download' | 'revalidated' | 'cache';
  downloaded: Downloaded | null;
  entry: CachedCatalogFile | undefined;
  items: ItemVectors;
  /** Items of the shopper's stored events: their shards are used when cached, never fetched. */
  history: readonly string[];
  progress: (p: LoadProgress) => void;
  report: (e: unknown) => void;
}): Promise<{ file: CatalogFile; bytes: number } | null> {
  const { url, items, report } = o;
  let head: CatalogHead;
  try {
    head = decodeCatalogHead(o.headBytes);
    if (head.header.embedder !== items.embedder.id || head.header.dim !== items.embedder.dim) {
      throw new CatalogVectorsError(
        `${url} holds ${head.header.embedder} vectors (${head.header.dim}-d); this engine embeds with ${items.embedder.id} (${items.embedder.dim}-d)`,
      );
    }
  } catch (e) {
    if (!o.downloaded) await deleteCachedFile(url);
    report(o.downloaded ? e : new CatalogVectorsError(`the cached copy of ${url} is unusable and was dropped: ${(e as Error).message}`));
    return null;
  }
  let base: URL;
  try {
    base = new URL('./', url);
    if (base.protocol === 'blob:' || base.protocol === 'data:') throw new TypeError(`a ${base.protocol} URL has no folder`);
  } catch (e) {
    // why: shard names are relative to the head; a blob: or data: head has nothing they resolve against
    report(
      new CatalogVectorsError(
        `${url} is a format v3 head, and its shards cannot be found relative to it (${(e as Error).message}): serve the head and its .shards/ folder over HTTP`,
      ),
    );
    return null;
  }
  const shardUrl = (k: number): string => new URL(head.header.shards[k].name, base).href;
  if (o.downloaded) {
    await putCachedFile({
      url,
      version: 3,
      etag: o.downloaded.etag,
      lastModified: o.downloaded.lastModified,
      head: o.headBytes,
      bytes: o.headBytes.length,
      savedAt: Date.now(),
    });
    if (o.entry?.version === 3) await pruneShards(url, new Set(head.header.shards.map((_, k) => shardUrl(k))));
  }
  // why every catalog item, not only the fresh ones: the shop model's rows of the page's items are in the same shards
  const wanted = shardsFor(
    head,
    [...items.all()].map((it) => it.id),
  );
  // why history shards only from the cache: a request must depend on the page's products alone (docs/PRIVACY.md)
  const fromHistory = shardsFor(head, o.history).filter((k) => !wanted.includes(k));
  const shards: CatalogShard[] = [];
  const toFetch: number[] = [];
  for (const k of [...wanted, ...fromHistory]) {
    const cached = await getCachedShard(shardUrl(k));
    if (cached) {
      try {
        shards.push(decodeCatalogShard(head, k, cached));
        continue;
      } catch {
        // a damaged cached shard: fetched again below (a page's), or left out (a history item's)
      }
    }
    if (wanted.includes(k)) toFetch.push(k);
  }
  const total = toFetch.reduce((s, k) => s + head.header.shards[k].bytes, 0);
  let loaded = 0;
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < toFetch.length) {
      const k = toFetch[next++];
      const where = shardUrl(k);
      try {
        const response = await fetch(where);
        if (!response.ok) throw new CatalogVectorsError(`${where} answered HTTP ${response.status}`);
        const bytes = new Uint8Array(await response.arrayBuffer());
        shards.push(decodeCatalogShard(head, k, bytes));
        await putCachedShard({ url: where, head: url, bytes, savedAt: Date.now() });
        loaded += bytes.length;
        o.progress({ stage: 'catalog', phase: 'download', loaded, total, unit: 'bytes' });
      } catch (e) {
        report(e instanceof CatalogVectorsError ? e : new CatalogVectorsError(`${where}: ${e instanceof Error ? e.message : String(e)}`));
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(SHARD_CONCURRENCY, toFetch.length) }, worker));
  const bytes = o.headBytes.length + shards.reduce((s, sh) => s + head.header.shards[sh.index].bytes, 0);
  return { file: assembleCatalogFile(head, shards), bytes };
}

interface Downloaded {
  bytes: Uint8Array;
  etag: string | null;
  lastModified: string | null;
}

/** Fetch (with byte progress) the shop's catalog vector file; `'not modified'` for a 304 of a conditional request. */
async function fetchCatalogFile(
  url: string,
  progress: (p: LoadProgress) => void,
  validators?: { etag: string | null; lastModified: string | null },
): Promise<Downloaded | 'not modified'> {
  const headers: Record<string, string> = {};
  if (validators?.etag) headers['if-none-match'] = validators.etag;
  if (validators?.lastModified) headers['if-modified-since'] = validators.lastModified;
  const response = await fetch(url, validators ? { headers } : undefined);
  if (validators && response.status === 304) return 'not modified';
  if (!response.ok) throw new CatalogVectorsError(`${url} answered HTTP ${response.status}`);
  // why: with a content-encoding (gzip, br) the length is the compressed one, the body is decoded
  const coding = response.headers.get('content-encoding');
  const total = coding && coding !== 'identity' ? 0 : Number(response.headers.get('content-length') ?? 0);
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
  return { bytes, etag: response.headers.get('etag'), lastModified: response.headers.get('last-modified') };
}
