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
  /** Byte length of the whole file (informational). */
  bytes: number;
  savedAt: number;
}

interface FilesDB extends DBSchema {
  files: { key: string; value: CachedCatalogFile };
}

let db: Promise<IDBPDatabase<FilesDB> | null> | undefined;

function open(): Promise<IDBPDatabase<FilesDB> | null> {
  db ??= (async () => {
    if (typeof (globalThis as { indexedDB?: unknown }).indexedDB === 'undefined') return null;
    try {
      return await openDB<FilesDB>(FILE_CACHE_DB, 1, {
        upgrade(d) {
          d.createObjectStore('files', { keyPath: 'url' });
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
