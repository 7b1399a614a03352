/**
 * Catalog vector file, format v1: a shop's catalog embedded ahead of time (by
 * `atomem-vectors`, in Node, with the same embedder the browser runs), so a shopper's first visit
 * does not embed every product on the device. The worker fetches it (`catalogVectors` option),
 * uses the vector of every item whose embedder and text still match, and embeds only the rest.
 *
 * Layout (little-endian):
 * - 4 bytes magic `ATMV`;
 * - u32 format version (1);
 * - u32 byte length H of the header;
 * - H bytes UTF-8 JSON {@link CatalogVectorsHeader};
 * - zero padding to a multiple of 4;
 * - `count × dim` float32 values, one row per item in header order (the embedder's raw output).
 *
 * Each item carries a hash of its embedding text ({@link itemTextHash}), so an item whose title,
 * categories or description changed since the file was made is embedded again instead of
 * reusing a stale vector. Float32 keeps the vectors bit-identical to what the embedder gave.
 */
import type { Item } from '../core/types.js';
import { itemText } from '../embed/cache.js';
import { CatalogVectorsError } from '../errors.js';

/** Format version, also in every file. */
export const CATALOG_VECTORS_VERSION = 1;

const MAGIC = [0x41, 0x54, 0x4d, 0x56]; // "ATMV"
/** Header size cap (ids and hashes of about a million items). */
const MAX_HEADER_BYTES = 64 * 1024 * 1024;

/** The JSON header. */
export interface CatalogVectorsHeader {
  version: 1;
  /** Embedder id, e.g. `use-lite@0.2.0/uint8` (the embedder's own id, as the worker's embedder reports it); vectors of any other embedder are useless. */
  embedder: string;
  dim: number;
  /** `[itemId, itemTextHash]` per row, in row order. */
  items: [string, string][];
  /** ISO time the file was made (informational). */
  createdAt?: string;
}

/** A decoded file: the header and one vector per item id. */
export interface CatalogVectors {
  header: CatalogVectorsHeader;
  /** Item id → `{ hash, vector }`. */
  vectors: Map<string, { hash: string; vector: Float32Array }>;
}

/** The file is not a valid catalog vector file; the message says why. Nothing was used. (Defined in `src/errors.ts`.) */
export { CatalogVectorsError };

/** FNV-1a (32-bit, hex) of a string. */
function fnv1a(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16);
}

/** Hash of the text an item is embedded from (title, categories, description): changes when that text does. */
export function itemTextHash(item: Item): string {
  return fnv1a(itemText(item));
}

/** Encode vectors of `items` (`vectors[i]` is the embedder's output for `items[i]`). */
export function encodeCatalogVectors(
  embedder: { id: string; dim: number },
  items: readonly Item[],
  vectors: readonly Float32Array[],
  createdAt = new Date().toISOString(),
): Uint8Array {
  if (items.length !== vectors.length) throw new RangeError(`encodeCatalogVectors: ${items.length} items but ${vectors.length} vectors`);
  const seen = new Set<string>();
  for (const [i, it] of items.entries()) {
    if (seen.has(it.id)) throw new RangeError(`encodeCatalogVectors: item "${it.id}" appears twice`);
    seen.add(it.id);
    if (vectors[i].length !== embedder.dim)
      throw new RangeError(`encodeCatalogVectors: the vector of "${it.id}" has ${vectors[i].length} dimensions, the embedder ${embedder.dim}`);
  }
  const header: CatalogVectorsHeader = { version: 1, embedder: embedder.id, dim: embedder.dim, items: items.map((it) => [it.id, itemTextHash(it)]), createdAt };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const start = align4(12 + json.length);
  const out = new Uint8Array(start + items.length * embedder.dim * 4);
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, CATALOG_VECTORS_VERSION, true);
  view.setUint32(8, json.length, true);
  out.set(json, 12);
  vectors.forEach((v, i) => {
    const base = start + i * embedder.dim * 4;
    for (let d = 0; d < embedder.dim; d++) view.setFloat32(base + d * 4, v[d], true);
  });
  return out;
}

const align4 = (n: number): number => (n + 3) & ~3;

/** Decode and validate a file. Throws {@link CatalogVectorsError} for anything malformed. */
export function decodeCatalogVectors(bytes: ArrayBuffer | Uint8Array): CatalogVectors {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const fail = (why: string): never => {
    throw new CatalogVectorsError(`not a valid catalog vector file: ${why}`);
  };
  if (u8.length < 12 || MAGIC.some((b, i) => u8[i] !== b)) fail('it does not start with "ATMV"');
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const version = view.getUint32(4, true);
  if (version !== CATALOG_VECTORS_VERSION) fail(`format version ${version}, this atomem reads ${CATALOG_VECTORS_VERSION}`);
  const headerBytes = view.getUint32(8, true);
  if (headerBytes > MAX_HEADER_BYTES || 12 + headerBytes > u8.length) fail('the header is truncated');
  let header: CatalogVectorsHeader;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(u8.subarray(12, 12 + headerBytes))) as CatalogVectorsHeader;
  } catch (e) {
    return fail(`the header is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object') fail('the header is not an object');
  if (header.version !== 1) fail('the header version is not 1');
  if (typeof header.embedder !== 'string' || !header.embedder) fail('the header has no embedder id');
  if (!Number.isInteger(header.dim) || header.dim < 1 || header.dim > 65536) fail(`dim ${String(header.dim)} is not an integer in 1..65536`);
  if (!Array.isArray(header.items)) fail('the header has no item list');
  const start = align4(12 + headerBytes);
  const need = start + header.items.length * header.dim * 4;
  if (u8.length !== need) fail(`it has ${u8.length} bytes, ${header.items.length} items × ${header.dim} dimensions need ${need}`);
  const vectors = new Map<string, { hash: string; vector: Float32Array }>();
  header.items.forEach((row, i) => {
    if (!Array.isArray(row) || typeof row[0] !== 'string' || typeof row[1] !== 'string') fail(`item row ${i} is not [id, textHash]`);
    if (vectors.has(row[0])) fail(`item "${row[0]}" appears twice`);
    const vector = new Float32Array(header.dim);
    const base = start + i * header.dim * 4;
    for (let d = 0; d < header.dim; d++) {
      const x = view.getFloat32(base + d * 4, true);
      if (!Number.isFinite(x)) fail(`the vector of "${row[0]}" holds ${x}`);
      vector[d] = x;
    }
    vectors.set(row[0], { hash: row[1], vector });
  });
  return { header, vectors };
}
