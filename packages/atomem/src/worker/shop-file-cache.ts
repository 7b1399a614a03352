/**
 * IndexedDB cache of the shop part of catalog vector files (format v2: the shop model and the
 * SASRec model), so a returning shopper does not download the file again. The content rows go
 * to the profile's item-vector cache as with v1; this cache holds what is not per item.
 *
 * One database per origin, `atomem-files` (not per profile: the file is the shop's public
 * data, identical for every shopper, and holds nothing of the shopper's), one record per file
 * URL with the HTTP validators it was served with (`ETag`, `Last-Modified`), so the engine can
 * revalidate it with a conditional request (a 304 costs no body). Every failure (no IndexedDB,
 * private mode, quota) makes the cache a no-op: the file is then downloaded as on a first visit.
 *
 * Format v3 files (a head and shards, `protocol/catalog-vectors-v3.ts`): the record of the head's
 * URL holds the head's bytes (revalidated like a v2 file), and the `shards` store holds each
 * shard fetched so far under its absolute URL. A shard's name carries its CRC-32, so a cached
 * shard never needs revalidation: a changed shard has a new name in the new head. Shards the new
 * head no longer names are dropped when the head changes.
 */
import { openDB, type DBSchema, type IDBPDatabase } from 'idb';

/** Database name (one per origin). */
export const FILE_CACHE_DB = 'atomem-files';

/** One cached file. */
export interface CachedCatalogFile {
  url: string;
  /** Format version of the file at that URL when last downloaded. */
  version: number;
  etag: string | null;
  lastModified: string | null;
  /** The shop part (v2 files with a shop model only). */
  shop?: { id: string; model: Uint8Array; sasrec?: { bytes: Uint8Array; items: string[] } };
  /** Format v3: the head's bytes. */
  head?: Uint8Array;
  /** Byte length of the whole file (v3: of the head) (informational). */
  bytes: number;
  savedAt: number;
}

/** One cached shard of a v3 file. */
export interface CachedShard {
  /** Absolute URL of the shard. */
  url: string;
  /** Absolute URL of its head. */
  head: string;
  bytes: Uint8Array;
  savedAt: number;
}

interface FilesDB extends DBSchema {
  files: { key: string; value: CachedCatalogFile };
  shards: { key: string; value: CachedShard; indexes: { head: string } };
}

let db: Promise<IDBPDatabase<FilesDB> | null> | undefined;

function open(): Promise<IDBPDatabase<FilesDB> | null> {
  db ??= (async () => {
    if (typeof (globalThis as { indexedDB?: unknown }).indexedDB === 'undefined') return null;
    try {
      return await openDB<FilesDB>(FILE_CACHE_DB, 2, {
        upgrade(d, oldVersion) {
          if (oldVersion < 1) d.createObjectStore('files', { keyPath: 'url' });
          if (oldVersion < 2) d.createObjectStore('shards', { keyPath: 'url' }).createIndex('head', 'head');
        },
        // why: another tab upgrading (a newer atomem) must not be blocked by this connection
        blocking() {
          void db?.then((x) => x?.close());
          db = undefined;
        },
      });
    } catch {
      return null;
    }
  })();
  return db;
}

/** The cached record of `url`, or undefined (also when the cache is unavailable). */
export async function getCachedFile(url: string): Promise<CachedCatalogFile | undefined> {
  try {
    return (await (await open())?.get('files', url)) ?? undefined;
  } catch {
    return undefined;
  }
}

/** Store (replace) the record of `rec.url`; false when it could not be stored. */
export async function putCachedFile(rec: CachedCatalogFile): Promise<boolean> {
  try {
    const d = await open();
    if (!d) return false;
    await d.put('files', rec);
    return true;
  } catch {
    return false;
  }
}

/** Drop the record of `url` (a corrupt cache entry). */
export async function deleteCachedFile(url: string): Promise<void> {
  try {
    await (await open())?.delete('files', url);
  } catch {
    // ignore: the next download replaces it
  }
}

/** The cached bytes of the shard at `url`, or undefined. */
export async function getCachedShard(url: string): Promise<Uint8Array | undefined> {
  try {
    return (await (await open())?.get('shards', url))?.bytes;
  } catch {
    return undefined;
  }
}

/** Store a shard; false when it could not be stored. */
export async function putCachedShard(rec: CachedShard): Promise<boolean> {
  try {
    const d = await open();
    if (!d) return false;
    await d.put('shards', rec);
    return true;
  } catch {
    return false;
  }
}

/** Drop the cached shards of `head` whose URL is not in `keep` (a new release of the file). */
export async function pruneShards(head: string, keep: ReadonlySet<string>): Promise<void> {
  try {
    const d = await open();
    if (!d) return;
    const tx = d.transaction('shards', 'readwrite');
    for (const key of await tx.store.index('head').getAllKeys(head)) if (!keep.has(key)) await tx.store.delete(key);
    await tx.done;
  } catch {
    // ignore: stale shards only take space
  }
}
