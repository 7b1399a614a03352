/**
 * Catalog vector file, format v2: the content rows of v1 (a shop's catalog embedded ahead of
 * time by `atomem-vectors`) plus, optionally, what the shop learned from its order log — the shop
 * model (`shop-model-v1.ts` bytes: neighbour lists, popularity, collaborative item vectors and
 * their content map) and a SASRec sequence model with the item ids of its indices. The worker
 * fetches it (`catalogVectors` option), seeds the content vectors like v1 and, when the file has
 * a shop model, moves the shopper's item space to it (`ItemVectors.useShop`); the shopper's
 * history is scored on the device and never leaves it.
 *
 * Layout (little-endian):
 * - 4 bytes magic `ATMV` (as v1);
 * - u32 format version (2);
 * - u32 byte length H of the header;
 * - u32 CRC-32 (IEEE) of the H header bytes;
 * - H bytes UTF-8 JSON {@link CatalogVectorsV2Header} (embedder, items with text hashes, and the
 *   table of sections: name, byte offset from the data area, byte length, CRC-32);
 * - zero padding to a multiple of 4, then the data area: the sections, each at a multiple of 4,
 *   in table order, zero padding between; the file ends with the last section (padded to 4).
 *
 * Sections: `vectors` (always; `items × dim` float32, one row per header item, the embedder's raw
 * output as in v1), `shop` (shop-model-v1 bytes), `sasrec` (`serializeSasrec` bytes, needs
 * `shop`) and `sasrec.items` (UTF-8 JSON array of item ids: `items[i − 1]` is SASRec index i).
 *
 * {@link decodeCatalogFile} reads v1 and v2 files (one reader entry for both) and checks
 * everything before returning: magic, version, header checksum and JSON, the section table
 * (known names, aligned, in range, not overlapping, exact file length), every section's checksum,
 * the vectors (finite), and the embedded shop and SASRec models (their own decoders). A truncated
 * or corrupt file throws a {@link CatalogVectorsError} that says what is wrong; nothing is used.
 */
import type { Item } from '../core/types.js';
import { deserializeSasrec, serializeSasrec, type ItemEmbeddingEncoding, type SasrecWeights } from './sasrec-v1.js';
import { CatalogVectorsError, decodeCatalogVectors, itemTextHash, type CatalogVectors } from './catalog-vectors-v1.js';
import { decodeShopModel, encodeShopModel, type ShopModel } from './shop-model-v1.js';

/** Format version written by {@link encodeCatalogFile}. */
export const CATALOG_VECTORS_V2 = 2;

const MAGIC = [0x41, 0x54, 0x4d, 0x56]; // "ATMV"
/** Header size cap (ids and hashes of about a million items). */
const MAX_HEADER_BYTES = 64 * 1024 * 1024;
/** Fixed bytes before the header: magic, version, header length, header CRC. */
const PREFIX = 16;

/** Section names, in the order they are written. */
export const CATALOG_V2_SECTIONS = ['vectors', 'shop', 'sasrec', 'sasrec.items'] as const;
export type CatalogV2SectionName = (typeof CATALOG_V2_SECTIONS)[number];

/** One entry of the section table. */
export interface CatalogV2Section {
  name: CatalogV2SectionName;
  /** Byte offset from the start of the data area (a multiple of 4). */
  offset: number;
  /** Byte length (unpadded). */
  bytes: number;
  /** CRC-32 (IEEE 802.3, as zlib's) of the section's bytes, unsigned. */
  crc32: number;
}

/** The JSON header of a v2 file. */
export interface CatalogVectorsV2Header {
  version: 2;
  /** Embedder id of the `vectors` rows (as v1). */
  embedder: string;
  dim: number;
  /** `[itemId, itemTextHash]` per row of `vectors`, in row order. */
  items: [string, string][];
  /** ISO time the file was made (informational). */
  createdAt?: string;
  sections: CatalogV2Section[];
  /** Informational summary of the shop part (log rows, users, DP budget, SASRec: trained or why not). */
  shop?: Record<string, unknown>;
}

/** The shop's published models, as raw bytes (what the worker caches) and decoded. */
export interface CatalogShopPart {
  /** The `shop` section (shop-model-v1 bytes). */
  modelBytes: Uint8Array;
  model: ShopModel;
  sasrec?: {
    /** The `sasrec` section (`serializeSasrec` bytes). */
    bytes: Uint8Array;
    weights: SasrecWeights;
    /** `items[i − 1]` is SASRec item index i. */
    items: string[];
  };
  /**
   * Stable id of the shop part: the CRC-32s of its sections (hex, joined). Two files with the
   * same shop model and sequence model have the same id (the item space id is `shop:<id>`).
   */
  id: string;
}

/** A decoded catalog vector file of either version. */
export interface CatalogFile {
  /** 3: assembled from a v3 head and its loaded shards (`catalog-vectors-v3.ts`). */
  version: 1 | 2 | 3;
  embedder: string;
  dim: number;
  createdAt?: string;
  /** Item id → `{ hash, vector }` (content vectors, as v1). */
  vectors: CatalogVectors['vectors'];
  /** Present in v2 files that carry a shop model. */
  shop?: CatalogShopPart;
  /** The v2 header's informational `shop` summary. */
  shopInfo?: Record<string, unknown>;
}

/** What {@link encodeCatalogFile} writes. */
export interface EncodeCatalogFileInput {
  embedder: { id: string; dim: number };
  items: readonly Item[];
  /** `vectors[i]` is the embedder's raw output for `items[i]`. */
  vectors: readonly Float32Array[];
  /** The shop model (from `trainShopModel`) and, optionally, a SASRec model with its item ids. */
  shop?: {
    model: ShopModel;
    sasrec?: { weights: SasrecWeights; items: readonly string[]; itemEmbedding?: ItemEmbeddingEncoding };
    /** Informational summary stored in the header (JSON-safe). */
    info?: Record<string, unknown>;
  };
  createdAt?: string;
}

let CRC_TABLE: Uint32Array | undefined;

/** CRC-32 (IEEE 802.3 polynomial 0xEDB88320, reflected; zlib's `crc32`) of `bytes`, unsigned. */
export function crc32(bytes: Uint8Array): number {
  if (!CRC_TABLE) {
    CRC_TABLE = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      CRC_TABLE[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

const align4 = (n: number): number => (n + 3) & ~3;

/** The id of a shop part from its sections' checksums. */
function shopPartId(sections: readonly CatalogV2Section[]): string {
  return sections
    .filter((s) => s.name !== 'vectors')
    .map((s) => s.crc32.toString(16).padStart(8, '0'))
    .join('');
}

/** Encode a v2 file (content rows and, optionally, the shop's models). */
export function encodeCatalogFile(input: EncodeCatalogFileInput): Uint8Array {
  const { embedder, items, vectors } = input;
  if (items.length !== vectors.length) throw new RangeError(`encodeCatalogFile: ${items.length} items but ${vectors.length} vectors`);
  if (!Number.isInteger(embedder.dim) || embedder.dim < 1 || embedder.dim > 65536)
    throw new RangeError(`encodeCatalogFile: dim ${embedder.dim} is not an integer in 1..65536`);
  const seen = new Set<string>();
  items.forEach((it, i) => {
    if (seen.has(it.id)) throw new RangeError(`encodeCatalogFile: item "${it.id}" appears twice`);
    seen.add(it.id);
    if (vectors[i].length !== embedder.dim)
      throw new RangeError(`encodeCatalogFile: the vector of "${it.id}" has ${vectors[i].length} dimensions, the embedder ${embedder.dim}`);
    for (let d = 0; d < embedder.dim; d++)
      if (!Number.isFinite(vectors[i][d])) throw new RangeError(`encodeCatalogFile: the vector of "${it.id}" holds ${vectors[i][d]}`);
  });
  const rows = new Uint8Array(items.length * embedder.dim * 4);
  const rv = new DataView(rows.buffer);
  vectors.forEach((v, i) => {
    for (let d = 0; d < embedder.dim; d++) rv.setFloat32((i * embedder.dim + d) * 4, v[d], true);
  });
  const parts: [CatalogV2SectionName, Uint8Array][] = [['vectors', rows]];
  if (input.shop) {
    parts.push(['shop', encodeShopModel(input.shop.model)]);
    const s = input.shop.sasrec;
    if (s) {
      if (s.items.length > s.weights.numItems)
        throw new RangeError(`encodeCatalogFile: ${s.items.length} SASRec item ids for a model of ${s.weights.numItems} items`);
      if (new Set(s.items).size !== s.items.length) throw new RangeError('encodeCatalogFile: the SASRec item ids repeat');
      parts.push(['sasrec', serializeSasrec(s.weights, { itemEmbedding: s.itemEmbedding ?? 'f16' })]);
      parts.push(['sasrec.items', new TextEncoder().encode(JSON.stringify(s.items))]);
    }
  }
  const sections: CatalogV2Section[] = [];
  let offset = 0;
  for (const [name, bytes] of parts) {
    sections.push({ name, offset, bytes: bytes.length, crc32: crc32(bytes) });
    offset = align4(offset + bytes.length);
  }
  const header: CatalogVectorsV2Header = {
    version: 2,
    embedder: embedder.id,
    dim: embedder.dim,
    items: items.map((it) => [it.id, itemTextHash(it)]),
    createdAt: input.createdAt ?? new Date().toISOString(),
    sections,
    ...(input.shop?.info ? { shop: input.shop.info } : {}),
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const start = align4(PREFIX + json.length);
  const out = new Uint8Array(start + offset);
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, CATALOG_VECTORS_V2, true);
  view.setUint32(8, json.length, true);
  view.setUint32(12, crc32(json), true);
  out.set(json, PREFIX);
  parts.forEach(([, bytes], i) => out.set(bytes, start + sections[i].offset));
  return out;
}

/** The format version of a catalog vector file (after checking its magic), without decoding it. */
export function catalogFileVersion(bytes: Uint8Array): number {
  if (bytes.length < 8 || MAGIC.some((b, i) => bytes[i] !== b)) throw new CatalogVectorsError('not a valid catalog vector file: it does not start with "ATMV"');
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(4, true);
}

/**
 * Decode and validate a catalog vector file of version 1 or 2 (see the module comment). Throws
 * {@link CatalogVectorsError} for anything malformed.
 */
export function decodeCatalogFile(bytes: ArrayBuffer | Uint8Array): CatalogFile {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const fail = (why: string): never => {
    throw new CatalogVectorsError(`not a valid catalog vector file: ${why}`);
  };
  const version = catalogFileVersion(u8);
  if (version === 1) {
    const v1 = decodeCatalogVectors(u8);
    return { version: 1, embedder: v1.header.embedder, dim: v1.header.dim, createdAt: v1.header.createdAt, vectors: v1.vectors };
  }
  if (version === 3) fail('it is a format v3 head: its items are in shards (read it with decodeCatalogHead and assembleCatalogFile)');
  if (version !== CATALOG_VECTORS_V2) fail(`format version ${version}, this atomem reads 1, 2 and 3`);
  if (u8.length < PREFIX) fail(`it is truncated (${u8.length} bytes, the fixed prefix alone is ${PREFIX})`);
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const headerBytes = view.getUint32(8, true);
  if (headerBytes > MAX_HEADER_BYTES) fail(`the header length ${headerBytes} exceeds ${MAX_HEADER_BYTES} bytes`);
  if (PREFIX + headerBytes > u8.length) fail(`it is truncated: the header needs ${headerBytes} bytes, ${u8.length - PREFIX} follow`);
  const json = u8.subarray(PREFIX, PREFIX + headerBytes);
  if (crc32(json) !== view.getUint32(12, true)) fail('the header checksum does not match (the file is corrupt)');
  let header: CatalogVectorsV2Header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json)) as CatalogVectorsV2Header;
  } catch (e) {
    return fail(`the header is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) fail('the header is not an object');
  if (header.version !== 2) fail('the header version is not 2');
  if (typeof header.embedder !== 'string' || !header.embedder) fail('the header has no embedder id');
  if (!Number.isInteger(header.dim) || header.dim < 1 || header.dim > 65536) fail(`dim ${String(header.dim)} is not an integer in 1..65536`);
  if (!Array.isArray(header.items)) fail('the header has no item list');
  if (!Array.isArray(header.sections)) fail('the header has no section table');
  const start = align4(PREFIX + headerBytes);
  const data = new Map<CatalogV2SectionName, Uint8Array>();
  let end = 0;
  for (const [k, s] of header.sections.entries()) {
    if (!s || typeof s !== 'object') fail(`section ${k} is not an object`);
    if (!(CATALOG_V2_SECTIONS as readonly string[]).includes(s.name)) fail(`section ${k} has an unknown name ${JSON.stringify(s.name)}`);
    if (data.has(s.name)) fail(`section "${s.name}" appears twice`);
    for (const f of ['offset', 'bytes', 'crc32'] as const)
      if (!Number.isInteger(s[f]) || s[f] < 0) fail(`section "${s.name}": ${f} ${String(s[f])} is not a non-negative integer`);
    if (s.offset % 4 !== 0) fail(`section "${s.name}" starts at ${s.offset}, not a multiple of 4`);
    if (s.offset < end) fail(`section "${s.name}" overlaps the one before it`);
    if (start + s.offset + s.bytes > u8.length)
      fail(`it is truncated: section "${s.name}" needs bytes ${start + s.offset}..${start + s.offset + s.bytes}, the file has ${u8.length}`);
    const body = u8.subarray(start + s.offset, start + s.offset + s.bytes);
    if (crc32(body) !== s.crc32) fail(`the checksum of section "${s.name}" does not match (the file is corrupt)`);
    data.set(s.name, body);
    end = align4(s.offset + s.bytes);
  }
  if (u8.length !== start + end) fail(`it has ${u8.length} bytes, its sections end at ${start + end}`);
  const rows = data.get('vectors');
  if (!rows) fail('it has no "vectors" section');
  if (rows!.length !== header.items.length * header.dim * 4)
    fail(
      `the "vectors" section has ${rows!.length} bytes, ${header.items.length} items × ${header.dim} dimensions need ${header.items.length * header.dim * 4}`,
    );
  const rv = new DataView(rows!.buffer, rows!.byteOffset, rows!.byteLength);
  const vectors: CatalogVectors['vectors'] = new Map();
  header.items.forEach((row, i) => {
    if (!Array.isArray(row) || typeof row[0] !== 'string' || typeof row[1] !== 'string') fail(`item row ${i} is not [id, textHash]`);
    if (vectors.has(row[0])) fail(`item "${row[0]}" appears twice`);
    const vector = new Float32Array(header.dim);
    for (let d = 0; d < header.dim; d++) {
      const x = rv.getFloat32((i * header.dim + d) * 4, true);
      if (!Number.isFinite(x)) fail(`the vector of "${row[0]}" holds ${x}`);
      vector[d] = x;
    }
    vectors.set(row[0], { hash: row[1], vector });
  });
  const out: CatalogFile = { version: 2, embedder: header.embedder, dim: header.dim, createdAt: header.createdAt, vectors };
  if (header.shop !== undefined) out.shopInfo = header.shop;
  const shopBytes = data.get('shop');
  const sasrecBytes = data.get('sasrec');
  const sasrecItems = data.get('sasrec.items');
  if (!shopBytes && (sasrecBytes || sasrecItems)) fail('it has a SASRec section but no "shop" section');
  if (!sasrecBytes !== !sasrecItems) fail('"sasrec" and "sasrec.items" must come together');
  if (shopBytes) {
    out.shop = decodeShopPart(shopBytes, sasrecBytes && sasrecItems ? { bytes: sasrecBytes, items: sasrecItems } : undefined, shopPartId(header.sections));
  }
  return out;
}

/**
 * Decode the shop part from its raw sections (as {@link decodeCatalogFile} returns them, or as
 * the worker cached them). Throws {@link CatalogVectorsError} when a model does not decode.
 * The returned byte arrays are copies (independent of `modelBytes`' buffer).
 */
export function decodeShopPart(
  modelBytes: Uint8Array,
  sasrec: { bytes: Uint8Array; items: Uint8Array | readonly string[] } | undefined,
  id: string,
): CatalogShopPart {
  const fail = (why: string): never => {
    throw new CatalogVectorsError(`not a valid catalog vector file: ${why}`);
  };
  let model: ShopModel;
  try {
    model = decodeShopModel(modelBytes);
  } catch (e) {
    return fail(`its shop model does not decode: ${(e as Error).message}`);
  }
  const part: CatalogShopPart = { modelBytes: modelBytes.slice(), model, id };
  if (sasrec) {
    let weights: SasrecWeights;
    try {
      weights = deserializeSasrec(sasrec.bytes);
    } catch (e) {
      return fail(`its SASRec model does not decode: ${(e as Error).message}`);
    }
    let items: unknown;
    if (sasrec.items instanceof Uint8Array) {
      try {
        items = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(sasrec.items));
      } catch (e) {
        return fail(`its SASRec item list is not UTF-8 JSON (${(e as Error).message})`);
      }
    } else items = [...sasrec.items];
    if (!Array.isArray(items) || !items.every((x) => typeof x === 'string' && x !== '')) fail('its SASRec item list is not an array of non-empty strings');
    const ids = items as string[];
    if (ids.length > weights.numItems) fail(`its SASRec item list has ${ids.length} ids for a model of ${weights.numItems} items`);
    if (new Set(ids).size !== ids.length) fail('its SASRec item list repeats an id');
    part.sasrec = { bytes: sasrec.bytes.slice(), weights, items: ids };
  }
  return part;
}
