/**
 * The shop model file, format v1: what a shop learned from its order log (`train.ts`, on its own
 * server), published as one public file the browser downloads and scores with (`score.ts`, in the
 * Web Worker). One file of types and (de)serialisation that both sides import. Pure: no Node APIs.
 *
 * Layout (little-endian):
 * - 4 bytes magic `ATSM`;
 * - u32 format version (1);
 * - u32 byte length H of the header;
 * - H bytes UTF-8 JSON {@link ShopModelHeader} (item ids, weights, privacy, provenance, and the
 *   table of sections: name, element type, byte offset, element count);
 * - zero padding to a multiple of 4, then the sections, each starting at a multiple of 4.
 *
 * Encodings (why: a 64k–100k-item catalog must fit in a few MB):
 * - neighbour lists (CSR, one row per source item): row lengths `u8` (`u16` when a row exceeds 255),
 *   target indices ascending within a row as LEB128 varints of the gaps (first index absolute, then
 *   `t[k] − t[k−1] − 1`), weights as `i8` companded by a square root against a per-row `f32` scale:
 *   `w = scale · sign(q) · (q/127)²` (relative precision where the many small weights are);
 * - item vectors: `i8` per dimension with a per-item `f32` scale (`v = scale · q / 127`), and a
 *   bitset of the items whose vector came from content only (cold items);
 * - popularity and the content map: `f32`;
 * - recent popularity (`popRecent`, optional): only the items with a non-zero count, their indices
 *   ascending as LEB128 varints of the gaps (as a list row), counts as `u8` companded by a square
 *   root against the largest count (`count = scale · (q/255)²`, q ≥ 1 for any non-zero count).
 * Decoding returns plain typed arrays (weights dequantised), so `score.ts` never sees the encoding.
 *
 * Malformed input (wrong magic, version, truncated or inconsistent sections, bad ids, indices out
 * of range, non-finite numbers) throws a RangeError that says what is wrong; nothing is returned.
 */
import { align4, ELEMENT_BYTES, readSections, type ElementType, type SectionEntry, type Typed } from './sections.js';

/** Format version, also in every file. */
export const SHOP_MODEL_VERSION = 1;

const MAGIC = [0x41, 0x54, 0x53, 0x4d]; // "ATSM"
/** Header size cap (ids of a few million items). */
const MAX_HEADER_BYTES = 256 * 1024 * 1024;

/**
 * Sparse item → item weights, one row per *source* item (CSR): row `i` lists the items that
 * item `i` in a shopper's history votes for, with weights. Targets ascend within a row.
 */
export interface NeighbourLists {
  /** `offsets[i] … offsets[i + 1]` index row i's entries; length rows + 1. */
  offsets: Uint32Array;
  /** Target item indices. */
  targets: Uint32Array;
  weights: Float32Array;
}

/** Counts per time bucket (popularity over time, "trending"): row b = bucket `firstBucket + b`. */
export interface TrendCounts {
  /** Bucket width in ms (e.g. one day). */
  bucketMs: number;
  /** Index of the first bucket, `floor(at / bucketMs)`. */
  firstBucket: number;
  /** How many buckets before the shopper's current one the scorer sums (default of the file). */
  window: number;
  /** Row per bucket, targets = item indices, weights = (noisy) distinct-user counts. */
  counts: NeighbourLists;
}

/**
 * Popularity of the log's last days: distinct users per item over the `days` days that end at the
 * log's last event (`end`), listing only the items with a non-zero count. The device reads it as
 * the signal `popRecent` (what is popular this week), whatever the shopper's own clock says.
 */
export interface RecentPopularity {
  /** Window length in days. */
  days: number;
  /** Epoch ms of the window's end (the last event of the log the file was trained on). */
  end: number;
  /** Item indices, strictly ascending. */
  items: Uint32Array;
  /** (Noisy, under DP) distinct users per listed item, > 0. */
  counts: Float32Array;
}

/** Encoded {@link RecentPopularity}: varint gaps of the indices, companded u8 counts, the scale. */
export function encodeRecentPopularity(r: RecentPopularity, itemCount: number, where = 'popRecent'): { targets: Uint8Array; q: Uint8Array; scale: number } {
  const { items, counts } = r;
  if (items.length !== counts.length) throw new RangeError(`${where}: ${items.length} items but ${counts.length} counts`);
  if (!(r.days > 0) || !Number.isFinite(r.days) || !Number.isFinite(r.end))
    throw new RangeError(`${where}: days ${r.days} / end ${r.end} are not finite (days > 0)`);
  let max = 0;
  for (let k = 0; k < counts.length; k++) {
    if (!(counts[k] > 0) || !Number.isFinite(counts[k]))
      throw new RangeError(`${where}: item index ${items[k]} has count ${counts[k]} (only counts > 0 are listed)`);
    max = Math.max(max, counts[k]);
  }
  const scale = Math.fround(max);
  const bytes: number[] = [];
  const q = new Uint8Array(items.length);
  for (let k = 0; k < items.length; k++) {
    const t = items[k];
    if (t >= itemCount) throw new RangeError(`${where}: names item index ${t}, only ${itemCount} items`);
    if (k > 0 && t <= items[k - 1]) throw new RangeError(`${where}: item indices are not strictly ascending`);
    let v = k === 0 ? t : t - items[k - 1] - 1;
    while (v >= 0x80) {
      bytes.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    bytes.push(v);
    q[k] = Math.max(1, Math.min(255, Math.round(255 * Math.sqrt(counts[k] / scale))));
  }
  return { targets: Uint8Array.from(bytes), q, scale };
}

/** Inverse of {@link encodeRecentPopularity}; throws RangeError (via `fail`) for malformed input. */
export function decodeRecentPopularity(
  header: { days: number; end: number; items: number; scale: number },
  targets: Uint8Array,
  q: Uint8Array,
  itemCount: number,
  fail: (why: string) => never,
): RecentPopularity {
  const { days, end, items: count, scale } = header;
  if (!(days > 0) || !Number.isFinite(days) || !Number.isFinite(end) || !Number.isInteger(count) || count < 0 || !(scale >= 0) || !Number.isFinite(scale))
    fail('the popRecent header is malformed');
  if (q.length !== count) fail(`popRecent holds ${q.length} counts for ${count} items`);
  const items = new Uint32Array(count);
  const counts = new Float32Array(count);
  let p = 0;
  let prev = -1;
  for (let k = 0; k < count; k++) {
    let v = 0;
    let mul = 1;
    for (let i = 0; ; i++) {
      if (i === 5) fail('popRecent: an item varint is longer than 5 bytes');
      if (p >= targets.length) fail('popRecent: item varints are truncated');
      const b = targets[p++];
      v += (b & 0x7f) * mul;
      if (b < 0x80) break;
      mul *= 128;
    }
    const t = k === 0 ? v : prev + 1 + v;
    if (t >= itemCount) fail(`popRecent names item index ${t}, only ${itemCount} items`);
    items[k] = prev = t;
    if (q[k] === 0) fail('popRecent lists an item with count 0');
    counts[k] = scale * (q[k] / 255) ** 2;
  }
  if (p !== targets.length) fail(`popRecent: ${targets.length - p} trailing item bytes`);
  return { days, end, items, counts };
}

/** Low-dimensional item vectors where "near" means "liked by the same people". */
export interface ItemVectorTable {
  dim: number;
  /**
   * items × dim, row-major. Rows from data are unit-norm; rows predicted from content (`cold`) are
   * the ridge estimate of a unit vector (norm below 1); a zero row = no vector.
   */
  values: Float32Array;
  /** 1 where the vector was predicted from content only (item without enough data). */
  cold: Uint8Array;
}

/** Maps a content embedding to the collaborative space (for products newer than the file). */
export interface ContentMap {
  /** Embedder id of the content vectors the map expects (raw, uncentred output). */
  embedder: string;
  inDim: number;
  /** Subtracted from a raw content vector before it is normalised and mapped. */
  mean: Float32Array;
  /** inDim × dim, row-major: collaborative ≈ bias + normalise(content − mean) · matrix. */
  matrix: Float32Array;
  /** dim: the mean collaborative vector (the ridge intercept). */
  bias: Float32Array;
}

/** Differential privacy of the published statistics (absent: no privacy, exact counts). */
export interface ShopPrivacy {
  epsilon: number;
  delta: number;
  mechanism: string;
  /** Items per user at full weight (contribution bound). */
  maxItemsPerUser: number;
  /** Noise standard deviation per released statistic. */
  sigma: Record<string, number>;
}

/** Everything the trainer publishes. */
export interface ShopModel {
  /** Catalog item ids; index = position. */
  items: string[];
  /** Named neighbour lists: `ease`, `knn`, `markov` (any name the scorer knows). */
  lists: Record<string, NeighbourLists>;
  /** Per item: (noisy) number of distinct users. */
  popularity: Float32Array;
  trend?: TrendCounts;
  /** Popularity of the log's last days (signal `popRecent`); absent in files written before it. */
  popRecent?: RecentPopularity;
  vectors?: ItemVectorTable;
  contentMap?: ContentMap;
  /** Default combiner weights (signal name → weight) shipped with the file. */
  weights: Record<string, number>;
  privacy?: ShopPrivacy;
  /** Provenance: counts, options, times (JSON-safe, informational). */
  info: Record<string, unknown>;
}

/** One section of the table (this format carries no per-section checksum). */
type Section = Omit<SectionEntry, 'crc32'>;

/** The JSON header. */
export interface ShopModelHeader {
  version: 1;
  items: string[];
  lists: string[];
  trend?: { bucketMs: number; firstBucket: number; window: number; buckets: number };
  /** Recent popularity: window, end, listed items and the counts' scale (sections `popRecent.targets`, `popRecent.q`). */
  popRecent?: { days: number; end: number; items: number; scale: number };
  vectors?: { dim: number };
  contentMap?: { embedder: string; inDim: number };
  weights: Record<string, number>;
  privacy?: ShopPrivacy;
  info: Record<string, unknown>;
  sections: Section[];
}

/** Square-root companded i8 weights against per-row scales. */
function encodeRows(
  lists: NeighbourLists,
  rows: number,
  where: string,
): { len: Uint8Array | Uint16Array; targets: Uint8Array; scale: Float32Array; q: Int8Array } {
  const { offsets, targets, weights } = lists;
  if (offsets.length !== rows + 1) throw new RangeError(`${where}: ${offsets.length} offsets for ${rows} rows`);
  let maxLen = 0;
  for (let r = 0; r < rows; r++) maxLen = Math.max(maxLen, offsets[r + 1] - offsets[r]);
  if (maxLen > 65535) throw new RangeError(`${where}: a row holds ${maxLen} entries (at most 65535)`);
  const len = maxLen > 255 ? new Uint16Array(rows) : new Uint8Array(rows);
  const bytes: number[] = [];
  const scale = new Float32Array(rows);
  const q = new Int8Array(offsets[rows]);
  const push = (v: number) => {
    while (v >= 0x80) {
      bytes.push((v & 0x7f) | 0x80);
      v = Math.floor(v / 128);
    }
    bytes.push(v);
  };
  for (let r = 0; r < rows; r++) {
    const a = offsets[r];
    const b = offsets[r + 1];
    if (b < a) throw new RangeError(`${where}: offsets decrease at row ${r}`);
    len[r] = b - a;
    let max = 0;
    for (let k = a; k < b; k++) {
      if (!Number.isFinite(weights[k])) throw new RangeError(`${where}: row ${r} holds weight ${weights[k]}`);
      max = Math.max(max, Math.abs(weights[k]));
    }
    scale[r] = max;
    const s = scale[r]; // why: the f32-rounded scale, so decode → encode is byte-identical
    for (let k = a; k < b; k++) {
      const t = targets[k];
      if (k > a && t <= targets[k - 1]) throw new RangeError(`${where}: row ${r} targets are not strictly ascending`);
      push(k === a ? t : t - targets[k - 1] - 1);
      q[k] = s > 0 ? Math.sign(weights[k]) * Math.min(127, Math.round(127 * Math.sqrt(Math.abs(weights[k]) / s))) : 0;
    }
  }
  return { len, targets: Uint8Array.from(bytes), scale, q };
}

function decodeRows(len: Uint8Array | Uint16Array, bytes: Uint8Array, scale: Float32Array, q: Int8Array, targetCount: number, where: string): NeighbourLists {
  const rows = len.length;
  if (scale.length !== rows) throw new RangeError(`${where}: ${scale.length} row scales for ${rows} rows`);
  const offsets = new Uint32Array(rows + 1);
  for (let r = 0; r < rows; r++) offsets[r + 1] = offsets[r] + len[r];
  const total = offsets[rows];
  if (q.length !== total) throw new RangeError(`${where}: ${q.length} weights for ${total} entries`);
  const targets = new Uint32Array(total);
  const weights = new Float32Array(total);
  let p = 0;
  const read = (): number => {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < 5; i++) {
      if (p >= bytes.length) throw new RangeError(`${where}: target varints are truncated`);
      const b = bytes[p++];
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
    throw new RangeError(`${where}: a target varint is longer than 5 bytes`);
  };
  for (let r = 0; r < rows; r++) {
    const s = scale[r];
    if (!Number.isFinite(s) || s < 0) throw new RangeError(`${where}: row ${r} has scale ${s}`);
    let prev = -1;
    for (let k = offsets[r]; k < offsets[r + 1]; k++) {
      const t = k === offsets[r] ? read() : prev + 1 + read();
      if (t >= targetCount) throw new RangeError(`${where}: row ${r} names item index ${t}, only ${targetCount} items`);
      targets[k] = t;
      prev = t;
      const x = q[k] / 127;
      weights[k] = s * Math.sign(x) * x * x;
    }
  }
  if (p !== bytes.length) throw new RangeError(`${where}: ${bytes.length - p} trailing target bytes`);
  return { offsets, targets, weights };
}

/** Encode a model (weights quantised; see the module comment). Throws RangeError for an inconsistent model. */
export function encodeShopModel(model: ShopModel): Uint8Array {
  const n = model.items.length;
  const seen = new Set<string>();
  for (const id of model.items) {
    if (typeof id !== 'string' || id === '') throw new RangeError('encodeShopModel: item ids must be non-empty strings');
    if (seen.has(id)) throw new RangeError(`encodeShopModel: item "${id}" appears twice`);
    seen.add(id);
  }
  const arrays: Array<{ name: string; type: ElementType; data: Typed }> = [];
  const add = (name: string, type: ElementType, data: Typed) => arrays.push({ name, type, data });
  const listNames = Object.keys(model.lists);
  for (const name of listNames) {
    const e = encodeRows(model.lists[name], n, `list ${name}`);
    for (const t of model.lists[name].targets) if (t >= n) throw new RangeError(`encodeShopModel: list ${name} names item index ${t}, only ${n} items`);
    add(`list.${name}.len`, e.len instanceof Uint16Array ? 'u16' : 'u8', e.len);
    add(`list.${name}.targets`, 'u8', e.targets);
    add(`list.${name}.scale`, 'f32', e.scale);
    add(`list.${name}.q`, 'i8', e.q);
  }
  if (model.popularity.length !== n) throw new RangeError(`encodeShopModel: ${model.popularity.length} popularity values for ${n} items`);
  add('popularity', 'f32', model.popularity);
  let trendHeader: ShopModelHeader['trend'];
  if (model.trend) {
    const t = model.trend;
    const buckets = t.counts.offsets.length - 1;
    for (const x of t.counts.targets) if (x >= n) throw new RangeError(`encodeShopModel: trend names item index ${x}, only ${n} items`);
    const e = encodeRows(t.counts, buckets, 'trend');
    add('trend.len', e.len instanceof Uint16Array ? 'u16' : 'u8', e.len);
    add('trend.targets', 'u8', e.targets);
    add('trend.scale', 'f32', e.scale);
    add('trend.q', 'i8', e.q);
    trendHeader = { bucketMs: t.bucketMs, firstBucket: t.firstBucket, window: t.window, buckets };
  }
  let recentHeader: ShopModelHeader['popRecent'];
  if (model.popRecent) {
    const e = encodeRecentPopularity(model.popRecent, n, 'encodeShopModel: popRecent');
    add('popRecent.targets', 'u8', e.targets);
    add('popRecent.q', 'u8', e.q);
    recentHeader = { days: model.popRecent.days, end: model.popRecent.end, items: e.q.length, scale: e.scale };
  }
  if (model.vectors) {
    const { dim, values, cold } = model.vectors;
    if (values.length !== n * dim || cold.length !== n)
      throw new RangeError(`encodeShopModel: vectors hold ${values.length} values and ${cold.length} cold flags for ${n} items × ${dim}`);
    const scale = new Float32Array(n);
    const q = new Int8Array(n * dim);
    for (let i = 0; i < n; i++) {
      let max = 0;
      for (let d = 0; d < dim; d++) {
        const v = values[i * dim + d];
        if (!Number.isFinite(v)) throw new RangeError(`encodeShopModel: vector of "${model.items[i]}" holds ${v}`);
        max = Math.max(max, Math.abs(v));
      }
      scale[i] = max;
      const s = scale[i];
      for (let d = 0; d < dim; d++) q[i * dim + d] = s > 0 ? Math.round((127 * values[i * dim + d]) / s) : 0;
    }
    const bits = new Uint8Array((n + 7) >> 3);
    for (let i = 0; i < n; i++) if (cold[i]) bits[i >> 3] |= 1 << (i & 7);
    add('vectors.scale', 'f32', scale);
    add('vectors.q', 'i8', q);
    add('vectors.cold', 'u8', bits);
  }
  if (model.contentMap) {
    const c = model.contentMap;
    const dim = model.vectors?.dim;
    if (!dim) throw new RangeError('encodeShopModel: a content map needs item vectors');
    if (c.mean.length !== c.inDim || c.matrix.length !== c.inDim * dim || c.bias.length !== dim)
      throw new RangeError('encodeShopModel: content map sizes do not match inDim × dim');
    add('content.mean', 'f32', c.mean);
    add('content.matrix', 'f32', c.matrix);
    add('content.bias', 'f32', c.bias);
  }
  for (const a of arrays) {
    if (a.type === 'f32') for (const v of a.data) if (!Number.isFinite(v)) throw new RangeError(`encodeShopModel: section ${a.name} holds ${v}`);
  }
  const sections: Section[] = [];
  let offset = 0;
  for (const a of arrays) {
    sections.push({ name: a.name, type: a.type, offset, count: a.data.length });
    offset = align4(offset + a.data.length * ELEMENT_BYTES[a.type]);
  }
  const header: ShopModelHeader = {
    version: 1,
    items: model.items,
    lists: listNames,
    ...(trendHeader ? { trend: trendHeader } : {}),
    ...(recentHeader ? { popRecent: recentHeader } : {}),
    ...(model.vectors ? { vectors: { dim: model.vectors.dim } } : {}),
    ...(model.contentMap ? { contentMap: { embedder: model.contentMap.embedder, inDim: model.contentMap.inDim } } : {}),
    weights: model.weights,
    ...(model.privacy ? { privacy: model.privacy } : {}),
    info: model.info,
    sections,
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const start = align4(12 + json.length);
  const out = new Uint8Array(start + offset);
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, SHOP_MODEL_VERSION, true);
  view.setUint32(8, json.length, true);
  out.set(json, 12);
  arrays.forEach((a, i) => {
    const base = start + sections[i].offset;
    const d = a.data;
    switch (a.type) {
      case 'u8':
      case 'i8':
        out.set(new Uint8Array(d.buffer, d.byteOffset, d.byteLength), base);
        break;
      case 'u16':
        for (let k = 0; k < d.length; k++) view.setUint16(base + 2 * k, d[k], true);
        break;
      case 'u32':
        for (let k = 0; k < d.length; k++) view.setUint32(base + 4 * k, d[k], true);
        break;
      case 'f32':
        for (let k = 0; k < d.length; k++) view.setFloat32(base + 4 * k, d[k], true);
        break;
    }
  });
  return out;
}

/** Byte sizes of a file by part (for the size table). */
export function shopModelSizes(bytes: Uint8Array): Record<string, number> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const h = view.getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + h))) as ShopModelHeader;
  const out: Record<string, number> = { header: 12 + h, 'header: item ids': new TextEncoder().encode(JSON.stringify(header.items)).length };
  for (const s of header.sections) {
    const part = s.name
      .split('.')
      .slice(0, s.name.startsWith('list.') ? 2 : 1)
      .join('.');
    out[part] = (out[part] ?? 0) + s.count * ELEMENT_BYTES[s.type];
  }
  out.total = bytes.length;
  return out;
}

/** Decode and validate a file. Throws RangeError for anything malformed. */
export function decodeShopModel(bytes: ArrayBuffer | Uint8Array): ShopModel {
  // why: a plain Uint8Array view, so `.slice` copies (Node's Buffer#slice is a view of a pooled buffer).
  const u8 = bytes instanceof Uint8Array ? new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength) : new Uint8Array(bytes);
  const fail = (why: string): never => {
    throw new RangeError(`not a valid shop model file: ${why}`);
  };
  if (u8.length < 12 || MAGIC.some((b, i) => u8[i] !== b)) fail('it does not start with "ATSM"');
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const version = view.getUint32(4, true);
  if (version !== SHOP_MODEL_VERSION) fail(`format version ${version}, this atomem reads ${SHOP_MODEL_VERSION}`);
  const headerBytes = view.getUint32(8, true);
  if (headerBytes > MAX_HEADER_BYTES || 12 + headerBytes > u8.length) fail('the header is truncated');
  let header: ShopModelHeader;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(u8.subarray(12, 12 + headerBytes))) as ShopModelHeader;
  } catch (e) {
    return fail(`the header is not UTF-8 JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) fail('the header is not an object');
  if (header.version !== 1) fail('the header version is not 1');
  if (!Array.isArray(header.items)) fail('the header has no item list');
  const n = header.items.length;
  const ids = new Set<string>();
  for (const id of header.items) {
    if (typeof id !== 'string' || id === '') fail('an item id is not a non-empty string');
    if (ids.has(id)) fail(`item "${id}" appears twice`);
    ids.add(id);
  }
  if (!Array.isArray(header.lists) || header.lists.some((l) => typeof l !== 'string')) fail('the header has no list names');
  if (!header.weights || typeof header.weights !== 'object') fail('the header has no weights');
  for (const [k, w] of Object.entries(header.weights)) if (typeof w !== 'number' || !Number.isFinite(w)) fail(`weight ${k} is not a finite number`);
  if (!Array.isArray(header.sections)) fail('the header has no section table');
  const { get } = readSections(u8, align4(12 + headerBytes), header.sections, fail);
  const rows = (prefix: string, count: number, where: string): NeighbourLists => {
    try {
      return decodeRows(
        get(`${prefix}.len`, ['u8', 'u16'], count) as Uint8Array | Uint16Array,
        get(`${prefix}.targets`, ['u8']) as Uint8Array,
        get(`${prefix}.scale`, ['f32'], count) as Float32Array,
        get(`${prefix}.q`, ['i8']) as Int8Array,
        n,
        where,
      );
    } catch (e) {
      if (e instanceof RangeError && !e.message.startsWith('not a valid')) fail(e.message);
      throw e;
    }
  };
  const lists: Record<string, NeighbourLists> = {};
  for (const name of header.lists) lists[name] = rows(`list.${name}`, n, `list ${name}`);
  const popularity = get('popularity', ['f32'], n) as Float32Array;
  const model: ShopModel = { items: header.items, lists, popularity, weights: header.weights, info: header.info ?? {} };
  if (header.trend) {
    const t = header.trend;
    if (!(t.bucketMs > 0) || !Number.isInteger(t.firstBucket) || !Number.isInteger(t.buckets) || t.buckets < 0 || !Number.isInteger(t.window) || t.window < 1) {
      fail('the trend header is malformed');
    }
    model.trend = { bucketMs: t.bucketMs, firstBucket: t.firstBucket, window: t.window, counts: rows('trend', t.buckets, 'trend') };
  }
  if (header.popRecent) {
    const r = header.popRecent;
    if (!r || typeof r !== 'object') fail('the popRecent header is malformed');
    model.popRecent = decodeRecentPopularity(r, get('popRecent.targets', ['u8']) as Uint8Array, get('popRecent.q', ['u8'], r.items) as Uint8Array, n, fail);
  }
  if (header.vectors) {
    const dim = header.vectors.dim;
    if (!Number.isInteger(dim) || dim < 1 || dim > 4096) fail(`vector dim ${String(dim)} is not an integer in 1..4096`);
    const scale = get('vectors.scale', ['f32'], n) as Float32Array;
    const q = get('vectors.q', ['i8'], n * dim) as Int8Array;
    const bits = get('vectors.cold', ['u8'], (n + 7) >> 3) as Uint8Array;
    const values = new Float32Array(n * dim);
    for (let i = 0; i < n; i++) for (let d = 0; d < dim; d++) values[i * dim + d] = (scale[i] * q[i * dim + d]) / 127;
    const cold = new Uint8Array(n);
    for (let i = 0; i < n; i++) cold[i] = (bits[i >> 3] >> (i & 7)) & 1;
    model.vectors = { dim, values, cold };
  }
  if (header.contentMap) {
    const c = header.contentMap;
    if (!model.vectors) fail('a content map needs item vectors');
    if (typeof c.embedder !== 'string' || !Number.isInteger(c.inDim) || c.inDim < 1) fail('the content map header is malformed');
    model.contentMap = {
      embedder: c.embedder,
      inDim: c.inDim,
      mean: get('content.mean', ['f32'], c.inDim) as Float32Array,
      matrix: get('content.matrix', ['f32'], c.inDim * model.vectors!.dim) as Float32Array,
      bias: get('content.bias', ['f32'], model.vectors!.dim) as Float32Array,
    };
  }
  if (header.privacy) model.privacy = header.privacy;
  return model;
}

/** Quantiles a format v3 writer computes over all items and ships in the model's info (`pairQuantiles`). */
export const PAIR_QUANTILES = [0.5, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99, 0.995, 0.999] as const;

/**
 * The `q`-quantile of cosine similarity between random pairs of the model's items with a
 * collaborative vector (deterministic: up to 20,000 pairs drawn by a fixed xorshift); 0.5 when
 * fewer than two items have one. The device reads it through `ShopKnowledge.pairQuantile`
 * (which prefers the figure a format v3 file ships); the v3 writer computes it over every item.
 */
export function pairQuantileOf(model: ShopModel, q: number): number {
  const v = model.vectors;
  if (!v) return 0.5;
  // an item's row is the last row of its id (as the scorer's id → row map)
  const rowOf = new Map<string, number>();
  model.items.forEach((id, i) => rowOf.set(id, i));
  const hasData = (id: string): boolean => {
    const i = rowOf.get(id)!;
    for (let d = 0; d < v.dim; d++) if (v.values[i * v.dim + d] !== 0) return true;
    return false;
  };
  const rows: number[] = [];
  for (let i = 0; i < model.items.length; i++) if (!v.cold[i] && v.values[i * v.dim] !== undefined && hasData(model.items[i])) rows.push(i);
  if (rows.length < 2) return 0.5;
  let x = 0x9e3779b9;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % rows.length;
  };
  const sims: number[] = [];
  const pairs = Math.min(20000, (rows.length * (rows.length - 1)) / 2);
  while (sims.length < pairs) {
    const a = rows[next()];
    const b = rows[next()];
    if (a === b) continue;
    let s = 0;
    let na = 0;
    let nb = 0;
    for (let d = 0; d < v.dim; d++) {
      const p = v.values[a * v.dim + d];
      const r = v.values[b * v.dim + d];
      s += p * r;
      na += p * p;
      nb += r * r;
    }
    sims.push(na > 0 && nb > 0 ? s / Math.sqrt(na * nb) : 0);
  }
  sims.sort((p, r) => p - r);
  return sims[Math.min(sims.length - 1, Math.floor(q * sims.length))];
}
