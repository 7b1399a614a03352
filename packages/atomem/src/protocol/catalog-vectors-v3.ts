/**
 * Catalog vector file, format v3: the content of a v2 file (content vectors, shop model, SASRec)
 * cut for a phone — a small HEAD every shopper downloads and SHARDS of items the worker fetches
 * only for the items the page gives it. Same readers' contract as v1/v2: everything is checked
 * before anything is used; a malformed head or shard throws {@link CatalogVectorsError}.
 *
 * Items: an item's shard is a hash of its id — FNV-1a (32-bit) of the id's UTF-8 bytes modulo
 * the shard count K = ⌈N / S⌉ (S = `shardSize`, the mean items per shard) — so a device finds the
 * shard of any product id without an id table: the head holds no per-item data, and its size
 * grows with K (12 bytes a shard), not with the ids. Shard k holds the ids it was given (in its
 * JSON) and their rows; the items' global indices (what list targets name) run shard by shard:
 * shard k's items are `start[k] … start[k + 1] − 1`, from the head's shard item counts. Fetching
 * shard k reveals that the shopper's page showed *some* item whose id hashes to k — never more
 * than the product pages the shop serves already tell it.
 *
 * The head's shop info also carries `pairQuantiles`: cosine quantiles over random pairs of all
 * items' collaborative vectors (`pairQuantileOf` in shop-model-v1.ts, where STEAM's tau is set), since a
 * device that loaded some shards could only estimate them from those.
 *
 * Head (little-endian): magic `ATMV`, u32 version (3), u32 JSON length H, u32 CRC-32 of the JSON,
 * H bytes UTF-8 JSON {@link CatalogHeadHeader}, zero padding to 4, then its sections (table in
 * the JSON, each at a multiple of 4, with a CRC-32): the shard table `shards.count`,
 * `shards.bytes` and `shards.crc32` (u32 × K: items, byte length and CRC-32 of each shard), and
 * with a shop model `trend.*` (rows as below, one per time bucket), `popRecent.targets|q` (the
 * recent popularity of shop-model-v1.ts, global item indices), `content.mean|matrix|bias`
 * (f32, the content → collaborative map) and `sasrec` (the sequence model's layers,
 * `serializeSasrec` bytes of the model with a one-row item table: the item rows live in the
 * shards). Shard k's file is `<shardPrefix><k, 5 digits>-<its CRC-32, 8 hex digits>.bin`,
 * relative to the head's URL: a changed shard gets a new name, an unchanged one stays cached
 * across releases.
 *
 * Shard: magic `ATMV`, u32 version (3), u32 JSON length, u32 CRC-32 of the JSON, the JSON
 * {@link CatalogShardHeader} (`kind: 'shard'`, index, first item, count, the items' ids and text
 * hashes, sections), padding, sections:
 * - `vectors.has` (bitset), `vectors.scale` (f32 per item), `vectors.q` (i8 per item × dim):
 *   content vectors as `v = scale · q / 127` (per-vector scale; a zero scale with `has` = 0 means
 *   no content vector);
 * - per neighbour list L: `list.L.len` (u8, or u16 when a row exceeds 255), `list.L.targets`
 *   (LEB128 varints: first target index absolute, then gaps − 1, ascending), `list.L.scale` (f32)
 *   and `list.L.q` (i8, square-root companded: `w = scale · sign(q) · (q/127)²`) — the shop model
 *   v1 encoding, with global item indices;
 * - `cf.scale`, `cf.q`, `cf.cold` (bitset): the collaborative vectors, i8 with a per-item scale;
 * - `sasrec.has` (bitset), `sasrec.scale` (f32), `sasrec.q` (i8 × d): the sequence model's item
 *   rows, per-row scale (`v = scale · q`, as `serializeSasrec`'s int8);
 * - `popularity` (f32 per item): the shop model's popularity prior.
 *
 * {@link assembleCatalogFile} turns a head and the shards loaded so far into the decoded
 * {@link CatalogFile} the engine uses (v3): content vectors of the loaded items, a shop model
 * over all N items whose rows of items in shards not loaded are empty (no lists, no vector, zero
 * popularity, and an id that no product id equals: {@link unloadedItemId}), and a SASRec model over
 * the loaded items that have a row.
 */
import type { Item } from '../core/types.js';
import { emptyWeights, namedTensors, serializeSasrec, deserializeSasrec, type SasrecWeights } from './sasrec-v1.js';
import { CatalogVectorsError, itemTextHash } from './catalog-vectors-v1.js';
import { crc32, type CatalogFile, type CatalogShopPart, type EncodeCatalogFileInput } from './catalog-vectors-v2.js';
import { align4, ELEMENT_BYTES, readSections, type ElementType, type SectionReader } from './sections.js';
import {
  decodeRecentPopularity,
  encodeRecentPopularity,
  PAIR_QUANTILES,
  pairQuantileOf,
  type NeighbourLists,
  type RecentPopularity,
  type ShopModel,
  type ShopPrivacy,
} from './shop-model-v1.js';

/** Format version of heads and shards. */
export const CATALOG_VECTORS_V3 = 3;
/**
 * Items per shard by default (the mean: an item's shard is a hash of its id): ≈ 15 kB per shard
 * with 512-d content vectors and the shop model. Measured (`npm run bench:shop-file --
 * --shard-size 16,32,128`): at 100k items a 20-event visit downloads 5.8 MB with 16, 10.1 MB
 * with 32 and 31.2 MB with 128 (a visit's items are scattered, so smaller shards carry fewer bytes
 * of items it never meets), for a head that grows with the shard table (0.34 MB against 0.28 MB).
 */
export const DEFAULT_SHARD_SIZE = 16;

const MAGIC = [0x41, 0x54, 0x4d, 0x56]; // "ATMV"
const PREFIX = 16;
const MAX_JSON_BYTES = 64 * 1024 * 1024;

/** The element types of format v3. */
type V3ElementType = ElementType;

/** One section of a head or a shard. */
export interface V3Section {
  name: string;
  type: V3ElementType;
  /** Byte offset from the data area (a multiple of 4). */
  offset: number;
  /** Element count. */
  count: number;
  crc32: number;
}

/** One shard as the head lists it. */
export interface V3ShardRef {
  /** File name, relative to the head's URL. */
  name: string;
  bytes: number;
  crc32: number;
}

/** The JSON of a head (`shards` is not in the file: {@link decodeCatalogHead} fills it from the shard table). */
export interface CatalogHeadHeader {
  version: 3;
  kind: 'head';
  embedder: string;
  dim: number;
  /** Number of items N. */
  items: number;
  /** Mean items per shard the writer aimed at. */
  shardSize: number;
  /** Number of shards K (an item's shard: {@link shardOfId}). */
  shardCount: number;
  /** Shard file names' prefix, relative to the head's URL. */
  shardPrefix: string;
  /** Every shard, from the `shards.*` sections. */
  shards: V3ShardRef[];
  createdAt?: string;
  sections: V3Section[];
  /** The shop part's structure, when the file has a shop model. */
  shop?: {
    lists: string[];
    weights: Record<string, number>;
    privacy?: ShopPrivacy;
    info: Record<string, unknown>;
    trend?: { bucketMs: number; firstBucket: number; window: number; buckets: number };
    popRecent?: { days: number; end: number; items: number; scale: number };
    cfDim?: number;
    contentMap?: { embedder: string; inDim: number };
    sasrec?: { dim: number };
  };
  /** Informational summary (log rows, users, …), as v2's header `shop`. */
  shopInfo?: Record<string, unknown>;
}

/** The JSON of a shard. */
export interface CatalogShardHeader {
  version: 3;
  kind: 'shard';
  index: number;
  first: number;
  count: number;
  /** The items' ids (each hashes to this shard). */
  ids: string[];
  /** Text hash per item (`itemTextHash`), `""` for an item without a content vector. */
  hashes: string[];
  sections: V3Section[];
}

/** A decoded head. */
export interface CatalogHead {
  header: CatalogHeadHeader;
  /** Global index of shard k's first item (K + 1 entries: the last is N). */
  starts: Uint32Array;
  trend?: NeighbourLists;
  /** The shop model's recent popularity (global item indices). */
  popRecent?: RecentPopularity;
  contentMap?: { mean: Float32Array; matrix: Float32Array; bias: Float32Array };
  /** The sequence model without item rows (one-row item table). */
  sasrec?: SasrecWeights;
  /** Stable id of the file: the CRC-32 of the head JSON (it names every shard's CRC-32). */
  id: string;
}

/** A decoded shard. */
export interface CatalogShard {
  index: number;
  first: number;
  count: number;
  ids: string[];
  hashes: string[];
  /** The shop model's popularity of each item (with a shop model). */
  popularity?: Float32Array;
  /** count × dim content vectors, zero rows where `hasVector` is 0. */
  vectors: Float32Array;
  hasVector: Uint8Array;
  /** Per list: count + 1 offsets into targets/weights (targets are global item indices). */
  lists: Record<string, NeighbourLists>;
  cf?: { values: Float32Array; cold: Uint8Array };
  sasrec?: { has: Uint8Array; rows: Float32Array };
}

/** What {@link encodeCatalogFileV3} writes: the head and the shards (named as the head lists them). */
export interface EncodedCatalogV3 {
  head: Uint8Array;
  shards: Array<{ name: string; bytes: Uint8Array }>;
  /** Item ids by global index (shard by shard). */
  order: string[];
}

/** FNV-1a, 32-bit, of the UTF-8 bytes of `id`. */
function fnv1a(id: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(id)) h = Math.imul(h ^ b, 0x01000193) >>> 0;
  return h >>> 0;
}

/** The shard of an item id among `shardCount` shards (the writer's and the reader's rule). */
export function shardOfId(id: string, shardCount: number): number {
  return shardCount > 0 ? fnv1a(id) % shardCount : 0;
}

/**
 * The id {@link assembleCatalogFile} gives item `index` of a shard not loaded: it starts with a
 * NUL character, which no product id the worker accepts holds.
 */
export function unloadedItemId(index: number): string {
  return `\u0000unloaded:${index}`;
}

/** Shard k's file name: the prefix, k (5 digits) and its CRC-32 (8 hex digits). */
function shardName(prefix: string, k: number, crc: number): string {
  return `${prefix}${String(k).padStart(5, '0')}-${crc.toString(16).padStart(8, '0')}.bin`;
}

/** A relative path below the head: no scheme, no leading slash, no `..` segment. */
const RELATIVE_BELOW = (name: string): boolean => !/^[a-z][a-z0-9+.-]*:|^\/|(^|\/)\.\.(\/|$)/i.test(name);

// ---------------------------------------------------------------------------------------------
// shared pieces

function writeVarint(out: number[], v: number): void {
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
}

/** Rows of (target, weight) lists as len / varint targets / scale / companded q. */
function encodeRows(
  rows: Array<{ t: number[]; w: number[] }>,
  where: string,
): Array<{ suffix: string; type: V3ElementType; data: Uint8Array | Int8Array | Uint16Array | Float32Array }> {
  let maxLen = 0;
  for (const r of rows) maxLen = Math.max(maxLen, r.t.length);
  if (maxLen > 65535) throw new RangeError(`${where}: a row holds ${maxLen} entries (at most 65535)`);
  const len = maxLen > 255 ? new Uint16Array(rows.length) : new Uint8Array(rows.length);
  const bytes: number[] = [];
  const scale = new Float32Array(rows.length);
  const q: number[] = [];
  rows.forEach((r, i) => {
    len[i] = r.t.length;
    let max = 0;
    for (const w of r.w) {
      if (!Number.isFinite(w)) throw new RangeError(`${where}: a weight is ${w}`);
      max = Math.max(max, Math.abs(w));
    }
    scale[i] = max;
    const s = scale[i];
    r.t.forEach((t, k) => {
      if (k > 0 && t <= r.t[k - 1]) throw new RangeError(`${where}: row ${i} targets are not strictly ascending`);
      writeVarint(bytes, k === 0 ? t : t - r.t[k - 1] - 1);
      q.push(s > 0 ? Math.sign(r.w[k]) * Math.min(127, Math.round(127 * Math.sqrt(Math.abs(r.w[k]) / s))) : 0);
    });
  });
  return [
    { suffix: 'len', type: len instanceof Uint16Array ? 'u16' : 'u8', data: len },
    { suffix: 'targets', type: 'u8', data: Uint8Array.from(bytes) },
    { suffix: 'scale', type: 'f32', data: scale },
    { suffix: 'q', type: 'i8', data: Int8Array.from(q) },
  ];
}

function decodeRows(
  len: Uint8Array | Uint16Array,
  bytes: Uint8Array,
  scale: Float32Array,
  q: Int8Array,
  targetCount: number,
  fail: (why: string) => never,
  where: string,
): NeighbourLists {
  const rows = len.length;
  if (scale.length !== rows) fail(`${where}: ${scale.length} row scales for ${rows} rows`);
  const offsets = new Uint32Array(rows + 1);
  for (let r = 0; r < rows; r++) offsets[r + 1] = offsets[r] + len[r];
  const total = offsets[rows];
  if (q.length !== total) fail(`${where}: ${q.length} weights for ${total} entries`);
  const targets = new Uint32Array(total);
  const weights = new Float32Array(total);
  let p = 0;
  const read = (): number => {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 5; i++) {
      if (p >= bytes.length) fail(`${where}: target varints are truncated`);
      const b = bytes[p++];
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
    return fail(`${where}: a target varint is longer than 5 bytes`);
  };
  for (let r = 0; r < rows; r++) {
    const s = scale[r];
    if (!Number.isFinite(s) || s < 0) fail(`${where}: row ${r} has scale ${s}`);
    let prev = -1;
    for (let k = offsets[r]; k < offsets[r + 1]; k++) {
      const t = k === offsets[r] ? read() : prev + 1 + read();
      if (t >= targetCount) fail(`${where}: row ${r} names item index ${t}, only ${targetCount} items`);
      targets[k] = t;
      prev = t;
      const x = q[k] / 127;
      weights[k] = s * Math.sign(x) * x * x;
    }
  }
  if (p !== bytes.length) fail(`${where}: ${bytes.length - p} trailing target bytes`);
  return { offsets, targets, weights };
}

type Part = { name: string; type: V3ElementType; data: Uint8Array | Int8Array | Uint16Array | Uint32Array | Float32Array };

function toBytes(p: Part): Uint8Array {
  const d = p.data;
  if (p.type === 'u8' || p.type === 'i8') return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  const out = new Uint8Array(d.length * ELEMENT_BYTES[p.type]);
  const v = new DataView(out.buffer);
  for (let k = 0; k < d.length; k++) {
    if (p.type === 'u16') v.setUint16(2 * k, d[k], true);
    else if (p.type === 'u32') v.setUint32(4 * k, d[k], true);
    else v.setFloat32(4 * k, d[k], true);
  }
  return out;
}

/** Magic, version, JSON (with the section table filled in), sections. */
function pack(json: Record<string, unknown>, parts: Part[]): Uint8Array {
  const sections: V3Section[] = [];
  const bodies: Uint8Array[] = [];
  let offset = 0;
  for (const p of parts) {
    const b = toBytes(p);
    sections.push({ name: p.name, type: p.type, offset, count: p.data.length, crc32: crc32(b) });
    bodies.push(b);
    offset = align4(offset + b.length);
  }
  const text = new TextEncoder().encode(JSON.stringify({ ...json, sections }));
  const start = align4(PREFIX + text.length);
  const out = new Uint8Array(start + offset);
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, CATALOG_VECTORS_V3, true);
  view.setUint32(8, text.length, true);
  view.setUint32(12, crc32(text), true);
  out.set(text, PREFIX);
  bodies.forEach((b, i) => out.set(b, start + sections[i].offset));
  return out;
}

/** Check magic, version, JSON checksum and section table; returns the JSON and a typed getter. */
function unpack<H extends { sections: V3Section[] }>(
  bytes: Uint8Array,
  what: string,
): {
  header: H;
  get: SectionReader['get'];
  has: SectionReader['has'];
  fail: (why: string) => never;
} {
  // why: a plain Uint8Array view, so `.slice(...).buffer` is the slice (Node's Buffer#slice is a view of a pooled buffer)
  const u8 = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fail = (why: string): never => {
    throw new CatalogVectorsError(`not a valid catalog vector ${what}: ${why}`);
  };
  if (u8.length < PREFIX || MAGIC.some((b, i) => u8[i] !== b)) fail('it does not start with "ATMV"');
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const version = view.getUint32(4, true);
  if (version !== CATALOG_VECTORS_V3) fail(`format version ${version}, expected ${CATALOG_VECTORS_V3}`);
  const h = view.getUint32(8, true);
  if (h > MAX_JSON_BYTES) fail(`the header length ${h} exceeds ${MAX_JSON_BYTES} bytes`);
  if (PREFIX + h > u8.length) fail(`it is truncated: the header needs ${h} bytes, ${u8.length - PREFIX} follow`);
  const json = u8.subarray(PREFIX, PREFIX + h);
  if (crc32(json) !== view.getUint32(12, true)) fail('the header checksum does not match (the file is corrupt)');
  let header: H;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(json)) as H;
  } catch (e) {
    return fail(`the header is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object' || !Array.isArray(header.sections)) fail('the header has no section table');
  return { header, ...readSections(u8, align4(PREFIX + h), header.sections, fail, crc32), fail };
}

const bitset = (n: number, on: (i: number) => boolean): Uint8Array => {
  const bits = new Uint8Array((n + 7) >> 3);
  for (let i = 0; i < n; i++) if (on(i)) bits[i >> 3] |= 1 << (i & 7);
  return bits;
};
const bit = (bits: Uint8Array, i: number): number => (bits[i >> 3] >> (i & 7)) & 1;

/** i8 rows with a per-row scale: `v = scale · q / 127` (`perUnit` false) or `v = scale · q` (SASRec's). */
function quantiseRows(rows: number, dim: number, value: (r: number, d: number) => number, perUnit: boolean): { scale: Float32Array; q: Int8Array } {
  const scale = new Float32Array(rows);
  const q = new Int8Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let max = 0;
    for (let d = 0; d < dim; d++) max = Math.max(max, Math.abs(value(r, d)));
    scale[r] = perUnit ? max / 127 : max;
    if (max === 0) continue;
    for (let d = 0; d < dim; d++) q[r * dim + d] = Math.round((127 * value(r, d)) / max);
  }
  return { scale, q };
}

// ---------------------------------------------------------------------------------------------
// encoder

/** What {@link encodeCatalogFileV3} takes: a v2 file's input plus the shard size and the shard file prefix. */
export interface EncodeCatalogV3Input extends EncodeCatalogFileInput {
  /** Items per shard (default {@link DEFAULT_SHARD_SIZE}). */
  shardSize?: number;
  /** Shard file name prefix, relative to the head (e.g. `catalog.bin.shards/`). */
  shardPrefix: string;
}

/**
 * Encode a v3 head and its shards (see the module comment). Items: the catalog `items` (with
 * content vectors) and any shop-model item not among them (without), each in the shard its id
 * hashes to; within a shard by the shop model's popularity (most popular first) when there is
 * one, else in catalog order. Throws RangeError for inconsistent input.
 */
export function encodeCatalogFileV3(input: EncodeCatalogV3Input): EncodedCatalogV3 {
  const { embedder, items, vectors } = input;
  const S = input.shardSize ?? DEFAULT_SHARD_SIZE;
  if (!Number.isInteger(S) || S < 1 || S > 65536) throw new RangeError(`encodeCatalogFileV3: shardSize ${S} is not an integer in 1..65536`);
  if (items.length !== vectors.length) throw new RangeError(`encodeCatalogFileV3: ${items.length} items but ${vectors.length} vectors`);
  if (typeof input.shardPrefix !== 'string' || !RELATIVE_BELOW(input.shardPrefix))
    throw new RangeError(`encodeCatalogFileV3: shardPrefix ${JSON.stringify(input.shardPrefix)} is not a relative path below the head`);
  if (!Number.isInteger(embedder.dim) || embedder.dim < 1 || embedder.dim > 65536)
    throw new RangeError(`encodeCatalogFileV3: dim ${embedder.dim} is not an integer in 1..65536`);
  const dim = embedder.dim;
  const content = new Map<string, { item: Item; vector: Float32Array }>();
  items.forEach((it, i) => {
    if (content.has(it.id)) throw new RangeError(`encodeCatalogFileV3: item "${it.id}" appears twice`);
    if (vectors[i].length !== dim)
      throw new RangeError(`encodeCatalogFileV3: the vector of "${it.id}" has ${vectors[i].length} dimensions, the embedder ${dim}`);
    for (let d = 0; d < dim; d++)
      if (!Number.isFinite(vectors[i][d])) throw new RangeError(`encodeCatalogFileV3: the vector of "${it.id}" holds ${vectors[i][d]}`);
    content.set(it.id, { item: it, vector: vectors[i] });
  });
  const model = input.shop?.model;
  const given = items.map((it) => it.id);
  const shopIndex = new Map<string, number>();
  if (model) {
    if (model.popularity.length !== model.items.length)
      throw new RangeError(`encodeCatalogFileV3: ${model.popularity.length} popularity values for ${model.items.length} items`);
    model.items.forEach((id, i) => {
      shopIndex.set(id, i);
      if (!content.has(id)) given.push(id);
    });
  }
  for (const id of given) if (id.includes('\u0000')) throw new RangeError(`encodeCatalogFileV3: item id ${JSON.stringify(id)} holds a NUL character`);
  const K = Math.ceil(given.length / S);
  const buckets: string[][] = Array.from({ length: K }, () => []);
  for (const id of given) buckets[shardOfId(id, K)].push(id);
  if (model) {
    const pop = (id: string): number => {
      const i = shopIndex.get(id);
      return i === undefined ? -1 : model.popularity[i];
    };
    // stable: equal popularity keeps the catalog order
    for (const b of buckets) b.sort((a, c) => pop(c) - pop(a));
  }
  const ids = buckets.flat();
  const starts = new Uint32Array(K + 1);
  buckets.forEach((b, k) => (starts[k + 1] = starts[k] + b.length));
  const N = ids.length;
  const index = new Map(ids.map((id, k) => [id, k]));
  const toGlobal = model ? Int32Array.from(model.items, (id) => index.get(id)!) : new Int32Array(0);
  const shopRowOf = (g: number): number | undefined => shopIndex.get(ids[g]);
  const sasrec = input.shop?.sasrec;
  const sasrecRow = new Map<string, number>();
  if (sasrec) {
    if (!model) throw new RangeError('encodeCatalogFileV3: a SASRec model needs a shop model');
    if (sasrec.items.length > sasrec.weights.numItems)
      throw new RangeError(`encodeCatalogFileV3: ${sasrec.items.length} SASRec item ids for a model of ${sasrec.weights.numItems} items`);
    sasrec.items.forEach((id, i) => {
      if (sasrecRow.has(id)) throw new RangeError('encodeCatalogFileV3: the SASRec item ids repeat');
      if (index.has(id)) sasrecRow.set(id, i + 1);
    });
  }
  const listNames = model ? Object.keys(model.lists) : [];
  const cf = model?.vectors;
  const shards: Array<{ name: string; bytes: Uint8Array }> = [];
  const shardBytes = new Uint32Array(K);
  const shardCrc = new Uint32Array(K);
  for (let k = 0; k < K; k++) {
    const first = starts[k];
    const n = starts[k + 1] - first;
    const parts: Part[] = [];
    const row = (r: number) => content.get(ids[first + r]);
    parts.push({ name: 'vectors.has', type: 'u8', data: bitset(n, (r) => row(r) !== undefined) });
    const cv = quantiseRows(n, dim, (r, d) => row(r)?.vector[d] ?? 0, false);
    parts.push({ name: 'vectors.scale', type: 'f32', data: cv.scale }, { name: 'vectors.q', type: 'i8', data: cv.q });
    for (const L of listNames) {
      const lists = model!.lists[L];
      const rows = Array.from({ length: n }, (_, r) => {
        const i = shopRowOf(first + r);
        if (i === undefined) return { t: [], w: [] };
        const pairs: Array<[number, number]> = [];
        for (let e = lists.offsets[i]; e < lists.offsets[i + 1]; e++) pairs.push([toGlobal[lists.targets[e]], lists.weights[e]]);
        pairs.sort((a, b) => a[0] - b[0]);
        return { t: pairs.map((p) => p[0]), w: pairs.map((p) => p[1]) };
      });
      for (const e of encodeRows(rows, `list ${L}`)) parts.push({ name: `list.${L}.${e.suffix}`, type: e.type, data: e.data });
    }
    if (cf) {
      const q = quantiseRows(
        n,
        cf.dim,
        (r, d) => {
          const i = shopRowOf(first + r);
          return i === undefined ? 0 : cf.values[i * cf.dim + d];
        },
        false,
      );
      parts.push({ name: 'cf.scale', type: 'f32', data: q.scale }, { name: 'cf.q', type: 'i8', data: q.q });
      parts.push({
        name: 'cf.cold',
        type: 'u8',
        data: bitset(n, (r) => {
          const i = shopRowOf(first + r);
          return i !== undefined && cf.cold[i] === 1;
        }),
      });
    }
    if (sasrec) {
      const d = sasrec.weights.config.dim;
      const emb = sasrec.weights.itemEmb;
      parts.push({ name: 'sasrec.has', type: 'u8', data: bitset(n, (r) => sasrecRow.has(ids[first + r])) });
      const q = quantiseRows(
        n,
        d,
        (r, c) => {
          const s = sasrecRow.get(ids[first + r]);
          return s === undefined ? 0 : emb[s * d + c];
        },
        true,
      );
      parts.push({ name: 'sasrec.scale', type: 'f32', data: q.scale }, { name: 'sasrec.q', type: 'i8', data: q.q });
    }
    if (model)
      parts.push({
        name: 'popularity',
        type: 'f32',
        data: Float32Array.from({ length: n }, (_, r) => {
          const i = shopRowOf(first + r);
          return i === undefined ? 0 : model.popularity[i];
        }),
      });
    const hashes = Array.from({ length: n }, (_, r) => {
      const c = row(r);
      return c ? itemTextHash(c.item) : '';
    });
    const bytes = pack({ version: 3, kind: 'shard', index: k, first, count: n, ids: ids.slice(first, first + n), hashes }, parts);
    const c = crc32(bytes);
    shards.push({ name: shardName(input.shardPrefix, k, c), bytes });
    shardBytes[k] = bytes.length;
    shardCrc[k] = c;
  }
  const parts: Part[] = [
    { name: 'shards.count', type: 'u32', data: Uint32Array.from({ length: K }, (_, k) => starts[k + 1] - starts[k]) },
    { name: 'shards.bytes', type: 'u32', data: shardBytes },
    { name: 'shards.crc32', type: 'u32', data: shardCrc },
  ];
  let shopHeader: CatalogHeadHeader['shop'];
  if (model) {
    // why: the device holds only some items' vectors; STEAM's tau comes from pair quantiles over all of them
    const pairQuantiles = Object.fromEntries(PAIR_QUANTILES.map((q) => [String(q), pairQuantileOf(model, q)]));
    shopHeader = { lists: listNames, weights: model.weights, info: { ...model.info, pairQuantiles }, ...(model.privacy ? { privacy: model.privacy } : {}) };
    if (model.trend) {
      const t = model.trend;
      const buckets = t.counts.offsets.length - 1;
      const rows = Array.from({ length: buckets }, (_, b) => {
        const pairs: Array<[number, number]> = [];
        for (let e = t.counts.offsets[b]; e < t.counts.offsets[b + 1]; e++) pairs.push([toGlobal[t.counts.targets[e]], t.counts.weights[e]]);
        pairs.sort((a, c) => a[0] - c[0]);
        return { t: pairs.map((p) => p[0]), w: pairs.map((p) => p[1]) };
      });
      for (const e of encodeRows(rows, 'trend')) parts.push({ name: `trend.${e.suffix}`, type: e.type, data: e.data });
      shopHeader.trend = { bucketMs: t.bucketMs, firstBucket: t.firstBucket, window: t.window, buckets };
    }
    if (model.popRecent) {
      const r = model.popRecent;
      const pairs = Array.from(r.items, (i, k): [number, number] => [toGlobal[i], r.counts[k]]).sort((a, c) => a[0] - c[0]);
      const e = encodeRecentPopularity(
        { days: r.days, end: r.end, items: Uint32Array.from(pairs, (x) => x[0]), counts: Float32Array.from(pairs, (x) => x[1]) },
        N,
        'encodeCatalogFileV3: popRecent',
      );
      parts.push({ name: 'popRecent.targets', type: 'u8', data: e.targets }, { name: 'popRecent.q', type: 'u8', data: e.q });
      shopHeader.popRecent = { days: r.days, end: r.end, items: e.q.length, scale: e.scale };
    }
    if (cf) shopHeader.cfDim = cf.dim;
    if (model.contentMap) {
      const c = model.contentMap;
      if (!cf) throw new RangeError('encodeCatalogFileV3: a content map needs item vectors');
      parts.push(
        { name: 'content.mean', type: 'f32', data: c.mean },
        { name: 'content.matrix', type: 'f32', data: c.matrix },
        { name: 'content.bias', type: 'f32', data: c.bias },
      );
      shopHeader.contentMap = { embedder: c.embedder, inDim: c.inDim };
    }
    if (sasrec) {
      // the layers without the item table (its rows are in the shards)
      const w = sasrec.weights;
      const layers: SasrecWeights = { ...w, numItems: 1, itemEmb: new Float32Array(2 * w.config.dim) };
      parts.push({ name: 'sasrec', type: 'u8', data: serializeSasrec(layers, { itemEmbedding: 'f32' }) });
      shopHeader.sasrec = { dim: w.config.dim };
    }
  }
  const json: Omit<CatalogHeadHeader, 'sections' | 'shards'> = {
    version: 3,
    kind: 'head',
    embedder: embedder.id,
    dim,
    items: N,
    shardSize: S,
    shardCount: K,
    shardPrefix: input.shardPrefix,
    createdAt: input.createdAt ?? new Date().toISOString(),
    ...(shopHeader ? { shop: shopHeader } : {}),
    ...(input.shop?.info ? { shopInfo: input.shop.info } : {}),
  };
  return { head: pack(json as unknown as Record<string, unknown>, parts), shards, order: ids };
}

// ---------------------------------------------------------------------------------------------
// decoder

/** Decode and check a v3 head. Throws {@link CatalogVectorsError} for anything malformed. */
export function decodeCatalogHead(bytes: ArrayBuffer | Uint8Array): CatalogHead {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const { header, get, has, fail } = unpack<CatalogHeadHeader>(u8, 'head');
  if (header.version !== 3 || header.kind !== 'head') fail('the header is not a v3 head (a shard was given where the head was expected?)');
  if (typeof header.embedder !== 'string' || !header.embedder) fail('the header has no embedder id');
  if (!Number.isInteger(header.dim) || header.dim < 1 || header.dim > 65536) fail(`dim ${String(header.dim)} is not an integer in 1..65536`);
  if (!Number.isInteger(header.items) || header.items < 0) fail('the item count is not a non-negative integer');
  if (!Number.isInteger(header.shardSize) || header.shardSize < 1) fail('the shard size is not a positive integer');
  if (!Number.isInteger(header.shardCount) || header.shardCount < 0 || header.shardCount !== Math.ceil(header.items / header.shardSize))
    fail(
      `the shard count ${String(header.shardCount)} is not ⌈${header.items} items / ${header.shardSize}⌉ (a head of an earlier layout? republish it with atomem-vectors --shards)`,
    );
  if (typeof header.shardPrefix !== 'string' || !RELATIVE_BELOW(header.shardPrefix))
    fail(`the shard prefix ${JSON.stringify(header.shardPrefix)} is not a relative path below the head`);
  const K = header.shardCount;
  const counts = get('shards.count', ['u32'], K) as Uint32Array;
  const lengths = get('shards.bytes', ['u32'], K) as Uint32Array;
  const crcs = get('shards.crc32', ['u32'], K) as Uint32Array;
  const starts = new Uint32Array(K + 1);
  for (let k = 0; k < K; k++) {
    if (lengths[k] < PREFIX) fail(`shard ${k} has a bad length`);
    starts[k + 1] = starts[k] + counts[k];
  }
  if (starts[K] !== header.items) fail(`the shards hold ${starts[K]} items, the header says ${header.items}`);
  header.shards = Array.from({ length: K }, (_, k) => ({ name: shardName(header.shardPrefix, k, crcs[k]), bytes: lengths[k], crc32: crcs[k] }));
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const head: CatalogHead = { header, starts, id: view.getUint32(12, true).toString(16).padStart(8, '0') };
  const shop = header.shop;
  if (shop) {
    if (!Array.isArray(shop.lists) || !shop.lists.every((l) => typeof l === 'string' && /^[\w-]+$/.test(l))) fail('the shop list names are malformed');
    if (!shop.weights || typeof shop.weights !== 'object') fail('the shop has no weights');
    for (const [k, w] of Object.entries(shop.weights)) if (typeof w !== 'number' || !Number.isFinite(w)) fail(`weight ${k} is not a finite number`);
    if (shop.trend) {
      const t = shop.trend;
      if (!(t.bucketMs > 0) || !Number.isInteger(t.firstBucket) || !Number.isInteger(t.buckets) || t.buckets < 0 || !Number.isInteger(t.window) || t.window < 1)
        fail('the trend header is malformed');
      head.trend = decodeRows(
        get('trend.len', ['u8', 'u16'], t.buckets) as Uint8Array,
        get('trend.targets', ['u8']) as Uint8Array,
        get('trend.scale', ['f32'], t.buckets) as Float32Array,
        get('trend.q', ['i8']) as Int8Array,
        header.items,
        fail,
        'trend',
      );
    }
    if (shop.popRecent) {
      const r = shop.popRecent;
      if (typeof r !== 'object' || r === null) fail('the popRecent header is malformed');
      head.popRecent = decodeRecentPopularity(
        r,
        get('popRecent.targets', ['u8']) as Uint8Array,
        get('popRecent.q', ['u8'], r.items) as Uint8Array,
        header.items,
        fail,
      );
    }
    if (shop.cfDim !== undefined && (!Number.isInteger(shop.cfDim) || shop.cfDim < 1 || shop.cfDim > 4096))
      fail(`the collaborative dim ${String(shop.cfDim)} is not an integer in 1..4096`);
    if (shop.contentMap) {
      const c = shop.contentMap;
      if (!shop.cfDim) fail('a content map needs item vectors');
      if (typeof c.embedder !== 'string' || !Number.isInteger(c.inDim) || c.inDim < 1) fail('the content map header is malformed');
      head.contentMap = {
        mean: get('content.mean', ['f32'], c.inDim) as Float32Array,
        matrix: get('content.matrix', ['f32'], c.inDim * shop.cfDim!) as Float32Array,
        bias: get('content.bias', ['f32'], shop.cfDim!) as Float32Array,
      };
    }
    if (shop.sasrec) {
      try {
        head.sasrec = deserializeSasrec(get('sasrec', ['u8']) as Uint8Array);
      } catch (e) {
        fail(`its SASRec layers do not decode: ${(e as Error).message}`);
      }
      if (head.sasrec!.config.dim !== shop.sasrec.dim) fail(`its SASRec model is ${head.sasrec!.config.dim}-d, the header says ${shop.sasrec.dim}`);
    }
  } else if (has('trend.len') || has('popRecent.q') || has('sasrec')) fail('it has shop sections but no shop header');
  return head;
}

/** Decode and check shard `k` of `head`. Throws {@link CatalogVectorsError} for anything malformed or not this head's. */
export function decodeCatalogShard(head: CatalogHead, k: number, bytes: ArrayBuffer | Uint8Array): CatalogShard {
  const u8 = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
  const ref = head.header.shards[k];
  if (!ref) throw new RangeError(`decodeCatalogShard: the head has no shard ${k}`);
  if (u8.length !== ref.bytes || crc32(u8) !== ref.crc32)
    throw new CatalogVectorsError(
      `not a valid catalog vector shard: ${ref.name} has ${u8.length} bytes and another checksum than the head lists (${ref.bytes} bytes); it belongs to another release or is corrupt`,
    );
  const { header, get, fail } = unpack<CatalogShardHeader>(u8, `shard ${ref.name}`);
  const H = head.header;
  const first = head.starts[k];
  const n = head.starts[k + 1] - first;
  if (header.kind !== 'shard' || header.index !== k || header.first !== first || header.count !== n)
    fail(`it is not shard ${k} (items ${first}..${first + n - 1})`);
  if (!Array.isArray(header.hashes) || header.hashes.length !== n || !header.hashes.every((x) => typeof x === 'string')) fail('its text hashes are malformed');
  if (!Array.isArray(header.ids) || header.ids.length !== n) fail(`its id list does not hold ${n} ids`);
  const seen = new Set<string>();
  for (const id of header.ids) {
    if (typeof id !== 'string' || id === '' || id.includes('\u0000')) fail(`its id ${JSON.stringify(id)} is not a non-empty string without NUL`);
    if (seen.has(id)) fail(`item "${id}" appears twice`);
    seen.add(id);
    if (shardOfId(id, H.shardCount) !== k) fail(`item "${id}" does not hash to shard ${k}`);
  }
  const dim = H.dim;
  const hasVector = get('vectors.has', ['u8'], (n + 7) >> 3) as Uint8Array;
  const scale = get('vectors.scale', ['f32'], n) as Float32Array;
  const q = get('vectors.q', ['i8'], n * dim) as Int8Array;
  const vectors = new Float32Array(n * dim);
  for (let r = 0; r < n; r++) for (let d = 0; d < dim; d++) vectors[r * dim + d] = (scale[r] * q[r * dim + d]) / 127;
  const shard: CatalogShard = { index: k, first, count: n, ids: header.ids, hashes: header.hashes, vectors, hasVector, lists: {} };
  const shop = H.shop;
  if (shop) {
    shard.popularity = get('popularity', ['f32'], n) as Float32Array;
    for (const L of shop.lists) {
      shard.lists[L] = decodeRows(
        get(`list.${L}.len`, ['u8', 'u16'], n) as Uint8Array,
        get(`list.${L}.targets`, ['u8']) as Uint8Array,
        get(`list.${L}.scale`, ['f32'], n) as Float32Array,
        get(`list.${L}.q`, ['i8']) as Int8Array,
        H.items,
        fail,
        `list ${L}`,
      );
    }
    if (shop.cfDim) {
      const s = get('cf.scale', ['f32'], n) as Float32Array;
      const cq = get('cf.q', ['i8'], n * shop.cfDim) as Int8Array;
      const bits = get('cf.cold', ['u8'], (n + 7) >> 3) as Uint8Array;
      const values = new Float32Array(n * shop.cfDim);
      for (let i = 0; i < values.length; i++) values[i] = (s[Math.floor(i / shop.cfDim)] * cq[i]) / 127;
      shard.cf = { values, cold: Uint8Array.from({ length: n }, (_, r) => bit(bits, r)) };
    }
    if (shop.sasrec) {
      const d = shop.sasrec.dim;
      const bits = get('sasrec.has', ['u8'], (n + 7) >> 3) as Uint8Array;
      const s = get('sasrec.scale', ['f32'], n) as Float32Array;
      const sq = get('sasrec.q', ['i8'], n * d) as Int8Array;
      const rows = new Float32Array(n * d);
      for (let i = 0; i < rows.length; i++) rows[i] = s[Math.floor(i / d)] * sq[i];
      shard.sasrec = { has: Uint8Array.from({ length: n }, (_, r) => bit(bits, r)), rows };
    }
  }
  return shard;
}

/**
 * Shard indices that hold `ids` if the file has them (the shard each id hashes to), ascending.
 * An id the file lacks still names a shard: which ids the file holds is only known from the
 * shards, and the request depends only on the ids given.
 */
export function shardsFor(head: CatalogHead, ids: Iterable<string>): number[] {
  const out = new Set<number>();
  const K = head.header.shardCount;
  if (K === 0) return [];
  for (const id of ids) out.add(shardOfId(id, K));
  return [...out].sort((a, b) => a - b);
}

/**
 * The decoded file from a head and the shards loaded so far (see the module comment): content
 * vectors of the loaded items with a content vector; with a shop model, the model over all N
 * items (empty rows and zero vectors for items of shards not loaded) and a SASRec model over the
 * loaded items with a row. The shop part's id is the head's (one id per release).
 */
export function assembleCatalogFile(head: CatalogHead, shards: Iterable<CatalogShard>): CatalogFile {
  const H = head.header;
  const loaded = [...shards].sort((a, b) => a.index - b.index);
  const vectors: CatalogFile['vectors'] = new Map();
  for (const s of loaded) {
    for (let r = 0; r < s.count; r++)
      if (bit(s.hasVector, r)) vectors.set(s.ids[r], { hash: s.hashes[r], vector: s.vectors.slice(r * H.dim, (r + 1) * H.dim) });
  }
  const out: CatalogFile = { version: 3 as CatalogFile['version'], embedder: H.embedder, dim: H.dim, createdAt: H.createdAt, vectors };
  if (H.shopInfo !== undefined) out.shopInfo = H.shopInfo;
  const shop = H.shop;
  if (!shop) return out;
  const N = H.items;
  const lists: Record<string, NeighbourLists> = {};
  for (const L of shop.lists) {
    const len = new Uint32Array(N);
    for (const s of loaded) for (let r = 0; r < s.count; r++) len[s.first + r] = s.lists[L].offsets[r + 1] - s.lists[L].offsets[r];
    const offsets = new Uint32Array(N + 1);
    for (let i = 0; i < N; i++) offsets[i + 1] = offsets[i] + len[i];
    const targets = new Uint32Array(offsets[N]);
    const weights = new Float32Array(offsets[N]);
    for (const s of loaded) {
      const l = s.lists[L];
      const at = offsets[s.first];
      targets.set(l.targets, at);
      weights.set(l.weights, at);
    }
    lists[L] = { offsets, targets, weights };
  }
  const ids = Array.from({ length: N }, (_, g) => unloadedItemId(g));
  const popularity = new Float32Array(N);
  for (const s of loaded) {
    for (let r = 0; r < s.count; r++) ids[s.first + r] = s.ids[r];
    popularity.set(s.popularity!, s.first);
  }
  const model: ShopModel = { items: ids, lists, popularity, weights: shop.weights, info: shop.info ?? {} };
  if (shop.privacy) model.privacy = shop.privacy;
  if (shop.trend && head.trend)
    model.trend = { bucketMs: shop.trend.bucketMs, firstBucket: shop.trend.firstBucket, window: shop.trend.window, counts: head.trend };
  // global indices = the assembled model's item positions
  if (head.popRecent) model.popRecent = head.popRecent;
  if (shop.cfDim) {
    const values = new Float32Array(N * shop.cfDim);
    const cold = new Uint8Array(N);
    for (const s of loaded) {
      values.set(s.cf!.values, s.first * shop.cfDim);
      cold.set(s.cf!.cold, s.first);
    }
    model.vectors = { dim: shop.cfDim, values, cold };
  }
  if (shop.contentMap && head.contentMap) model.contentMap = { embedder: shop.contentMap.embedder, inDim: shop.contentMap.inDim, ...head.contentMap };
  const part: CatalogShopPart = { modelBytes: new Uint8Array(0), model, id: `v3-${head.id}` };
  if (shop.sasrec && head.sasrec) {
    const d = shop.sasrec.dim;
    const sasrecIds: string[] = [];
    const rows: Float32Array[] = [];
    for (const s of loaded) {
      for (let r = 0; r < s.count; r++) {
        if (!s.sasrec!.has[r]) continue;
        sasrecIds.push(s.ids[r]);
        rows.push(s.sasrec!.rows.subarray(r * d, (r + 1) * d));
      }
    }
    if (sasrecIds.length) {
      const w = emptyWeights(head.sasrec.config, sasrecIds.length);
      const src = new Map(namedTensors(head.sasrec));
      for (const [name, t] of namedTensors(w)) if (name !== 'itemEmb') t.set(src.get(name)!);
      rows.forEach((row, i) => w.itemEmb.set(row, (i + 1) * d));
      part.sasrec = { bytes: new Uint8Array(0), weights: w, items: sasrecIds };
    }
  }
  out.shop = part;
  return out;
}
