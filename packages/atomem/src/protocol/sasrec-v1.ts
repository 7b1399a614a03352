/**
 * The SASRec weights a shop publishes (shapes, names, zero initialisation) and their compact
 * binary ("SASR" format v1). The inference over them is `shop/sasrec/model.ts`, the trainer
 * `shop/sasrec/train.ts`; the catalog file formats (`catalog-vectors-v2.ts`, `-v3.ts`) embed
 * these bytes. Pure: no Node APIs, no dependencies.
 */
export interface SasrecConfig {
  /** Longest history the model reads (the original's `maxlen`); older items are dropped. */
  maxLen: number;
  /** Hidden size d (`hidden_units`). */
  dim: number;
  /** Self-attention blocks. */
  blocks: number;
  /** Attention heads (d must be a multiple). */
  heads: number;
}

/** One self-attention block's parameters; matrices d×d `[out][in]`, vectors d. */
export interface SasrecBlock {
  ln1g: Float32Array;
  ln1b: Float32Array;
  wq: Float32Array;
  bq: Float32Array;
  wk: Float32Array;
  bk: Float32Array;
  wv: Float32Array;
  bv: Float32Array;
  ln2g: Float32Array;
  ln2b: Float32Array;
  w1: Float32Array;
  b1: Float32Array;
  w2: Float32Array;
  b2: Float32Array;
}

export const BLOCK_TENSORS = ['ln1g', 'ln1b', 'wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'ln2g', 'ln2b', 'w1', 'b1', 'w2', 'b2'] as const;
export type BlockTensorName = (typeof BLOCK_TENSORS)[number];

/** True for the block tensors that are d×d matrices (the rest are d-vectors). */
export function isMatrix(name: BlockTensorName): boolean {
  return name[0] === 'w';
}

export interface SasrecWeights {
  config: SasrecConfig;
  /** Items are indexed 1..numItems; index 0 is padding. */
  numItems: number;
  /** (numItems + 1) × d, row 0 (padding) all zeros. Shared by the input and the output layer. */
  itemEmb: Float32Array;
  /** maxLen × d. */
  posEmb: Float32Array;
  blocks: SasrecBlock[];
  /** Final layer norm. */
  lnfG: Float32Array;
  lnfB: Float32Array;
}

/** Throws a RangeError unless `config` is usable. */
export function checkConfig(config: SasrecConfig): void {
  const { maxLen, dim, blocks, heads } = config;
  for (const [k, v] of Object.entries({ maxLen, dim, blocks, heads })) {
    if (!Number.isInteger(v) || v < (k === 'blocks' ? 0 : 1) || v > 1 << 16) throw new RangeError(`SASRec config: ${k} must be a positive integer, got ${v}`);
  }
  if (dim % heads !== 0) throw new RangeError(`SASRec config: dim ${dim} is not a multiple of heads ${heads}`);
}

/** Zero-initialised weights of the right shapes. */
export function emptyWeights(config: SasrecConfig, numItems: number): SasrecWeights {
  checkConfig(config);
  if (!Number.isInteger(numItems) || numItems < 1) throw new RangeError(`SASRec: numItems must be a positive integer, got ${numItems}`);
  const d = config.dim;
  const blocks: SasrecBlock[] = [];
  for (let b = 0; b < config.blocks; b++) {
    const blk = {} as Record<BlockTensorName, Float32Array>;
    for (const name of BLOCK_TENSORS) blk[name] = new Float32Array(isMatrix(name) ? d * d : d);
    blk.ln1g.fill(1);
    blk.ln2g.fill(1);
    blocks.push(blk as SasrecBlock);
  }
  return {
    config: { ...config },
    numItems,
    itemEmb: new Float32Array((numItems + 1) * d),
    posEmb: new Float32Array(config.maxLen * d),
    blocks,
    lnfG: new Float32Array(d).fill(1),
    lnfB: new Float32Array(d),
  };
}

/** Every tensor of `w` with a stable name, in serialization order. */
export function namedTensors(w: SasrecWeights): Array<[string, Float32Array]> {
  const out: Array<[string, Float32Array]> = [
    ['itemEmb', w.itemEmb],
    ['posEmb', w.posEmb],
  ];
  w.blocks.forEach((blk, b) => {
    for (const name of BLOCK_TENSORS) out.push([`blocks.${b}.${name}`, blk[name]]);
  });
  out.push(['lnfG', w.lnfG], ['lnfB', w.lnfB]);
  return out;
}

// ---------------------------------------------------------------------------------------
// Binary format
//
//   bytes 0..3   magic "SASR"
//   bytes 4..5   format version (uint16 LE) = 1
//   bytes 6..7   reserved, 0
//   bytes 8..11  header length H in bytes (uint32 LE)
//   12 .. 12+H   UTF-8 JSON header: { config, numItems, itemEmbedding: 'f32'|'f16'|'int8',
//                tensors: [{ name, shape, dtype, offset, bytes }] }, offsets relative to the
//                data section
//   data section starts at the next multiple of 4; tensors little-endian, each 4-byte aligned.
// `int8`: per-row scale (float32 × rows, stored first), then rows × d int8, value = q·scale.
// Row 0 of the item embedding (padding) is stored like the others (zeros).

const MAGIC = [0x53, 0x41, 0x53, 0x52]; // "SASR"
const SASREC_FORMAT_VERSION = 1;

export type ItemEmbeddingEncoding = 'f32' | 'f16' | 'int8';

export interface SerializeOptions {
  /** How to store the item embedding table (the bulk of the file). Default `f32`. */
  itemEmbedding?: ItemEmbeddingEncoding;
}

interface TensorEntry {
  name: string;
  shape: number[];
  dtype: 'f32' | 'f16' | 'int8';
  offset: number;
  bytes: number;
}

interface Header {
  config: SasrecConfig;
  numItems: number;
  itemEmbedding: ItemEmbeddingEncoding;
  tensors: TensorEntry[];
}

/** IEEE half from a float (round to nearest even; overflow → ±Inf). */
export function toHalf(value: number): number {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  f[0] = value;
  const x = u[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** Float from an IEEE half. */
export function fromHalf(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

function align4(n: number): number {
  return (n + 3) & ~3;
}

/** The compact little-endian binary of `weights` (see the format above). */
export function serializeSasrec(weights: SasrecWeights, opts: SerializeOptions = {}): Uint8Array {
  const enc = opts.itemEmbedding ?? 'f32';
  if (enc !== 'f32' && enc !== 'f16' && enc !== 'int8') throw new RangeError(`serializeSasrec: unknown itemEmbedding ${String(enc)}`);
  const d = weights.config.dim;
  const tensors: TensorEntry[] = [];
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const [name, t] of namedTensors(weights)) {
    const rows =
      name === 'itemEmb'
        ? weights.numItems + 1
        : name === 'posEmb'
          ? weights.config.maxLen
          : name.startsWith('blocks.') && name.split('.')[2][0] === 'w'
            ? d
            : 1;
    const shape = rows === 1 ? [d] : [rows, d];
    if (t.length !== rows * d) throw new RangeError(`serializeSasrec: ${name} has ${t.length} values, expected ${rows * d}`);
    let bytes: Uint8Array;
    let dtype: TensorEntry['dtype'] = 'f32';
    if (name === 'itemEmb' && enc === 'f16') {
      dtype = 'f16';
      const h = new Uint16Array(t.length);
      for (let i = 0; i < t.length; i++) h[i] = toHalf(t[i]);
      bytes = new Uint8Array(h.buffer);
    } else if (name === 'itemEmb' && enc === 'int8') {
      dtype = 'int8';
      const scales = new Float32Array(rows);
      const q = new Int8Array(rows * d);
      for (let r = 0; r < rows; r++) {
        let max = 0;
        for (let c = 0; c < d; c++) max = Math.max(max, Math.abs(t[r * d + c]));
        const s = max / 127;
        scales[r] = s;
        for (let c = 0; c < d; c++) q[r * d + c] = s > 0 ? Math.round(t[r * d + c] / s) : 0;
      }
      bytes = new Uint8Array(rows * 4 + rows * d);
      bytes.set(new Uint8Array(scales.buffer), 0);
      bytes.set(new Uint8Array(q.buffer), rows * 4);
    } else {
      bytes = new Uint8Array(t.buffer.slice(t.byteOffset, t.byteOffset + t.byteLength));
    }
    tensors.push({ name, shape, dtype, offset, bytes: bytes.length });
    chunks.push(bytes);
    offset = align4(offset + bytes.length);
  }
  const header: Header = { config: { ...weights.config }, numItems: weights.numItems, itemEmbedding: enc, tensors };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const dataStart = align4(12 + json.length);
  const out = new Uint8Array(dataStart + offset);
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint16(4, SASREC_FORMAT_VERSION, true);
  view.setUint32(8, json.length, true);
  out.set(json, 12);
  tensors.forEach((t, i) => out.set(chunks[i], dataStart + t.offset));
  // why: a big-endian host would write the typed arrays' bytes in its own order.
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new RangeError('serializeSasrec: big-endian hosts are not supported');
  return out;
}

/** Weights from {@link serializeSasrec}'s bytes; quantized item embeddings are expanded to float32. Throws a RangeError on a malformed buffer. */
export function deserializeSasrec(bytes: Uint8Array): SasrecWeights {
  const bad = (why: string): never => {
    throw new RangeError(`deserializeSasrec: ${why}`);
  };
  if (!(bytes instanceof Uint8Array)) bad('expected a Uint8Array');
  if (bytes.length < 12) bad(`buffer of ${bytes.length} bytes is shorter than the 12-byte preamble`);
  for (let i = 0; i < 4; i++) if (bytes[i] !== MAGIC[i]) bad('bad magic (not a SASRec model file)');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(4, true);
  if (version !== SASREC_FORMAT_VERSION) bad(`unsupported format version ${version} (this reader knows ${SASREC_FORMAT_VERSION})`);
  const hlen = view.getUint32(8, true);
  if (12 + hlen > bytes.length) bad(`header of ${hlen} bytes runs past the end of the ${bytes.length}-byte buffer`);
  let header: Header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(12, 12 + hlen))) as Header;
  } catch (e) {
    return bad(`header is not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object' || !header.config || !Array.isArray(header.tensors)) bad('header lacks config or tensors');
  let w: SasrecWeights;
  try {
    w = emptyWeights(header.config, header.numItems);
  } catch (e) {
    return bad((e as Error).message);
  }
  const dataStart = align4(12 + hlen);
  const expected = namedTensors(w);
  if (header.tensors.length !== expected.length) bad(`header lists ${header.tensors.length} tensors, expected ${expected.length}`);
  const d = w.config.dim;
  expected.forEach(([name, target], i) => {
    const t = header.tensors[i];
    if (!t || t.name !== name) bad(`tensor ${i} is ${JSON.stringify(t?.name)}, expected ${name}`);
    const rows = target.length / d;
    const shapeOk =
      Array.isArray(t.shape) && (rows === 1 ? t.shape.length === 1 && t.shape[0] === d : t.shape.length === 2 && t.shape[0] === rows && t.shape[1] === d);
    if (!shapeOk) bad(`tensor ${name} has shape ${JSON.stringify(t.shape)}, expected ${rows === 1 ? `[${d}]` : `[${rows},${d}]`}`);
    const allowed = name === 'itemEmb' ? ['f32', 'f16', 'int8'] : ['f32'];
    if (!allowed.includes(t.dtype)) bad(`tensor ${name} has dtype ${JSON.stringify(t.dtype)}`);
    const need = t.dtype === 'f32' ? target.length * 4 : t.dtype === 'f16' ? target.length * 2 : rows * 4 + target.length;
    if (t.bytes !== need) bad(`tensor ${name} declares ${t.bytes} bytes, expected ${need}`);
    if (!Number.isInteger(t.offset) || t.offset < 0 || t.offset % 4 !== 0) bad(`tensor ${name} has a bad offset ${t.offset}`);
    const start = dataStart + t.offset;
    if (start + need > bytes.length) bad(`tensor ${name} (${need} bytes at ${start}) runs past the end of the ${bytes.length}-byte buffer`);
    const src = bytes.subarray(start, start + need);
    const dv = new DataView(src.buffer, src.byteOffset, src.byteLength);
    if (t.dtype === 'f32') for (let k = 0; k < target.length; k++) target[k] = dv.getFloat32(k * 4, true);
    else if (t.dtype === 'f16') for (let k = 0; k < target.length; k++) target[k] = fromHalf(dv.getUint16(k * 2, true));
    else {
      for (let r = 0; r < rows; r++) {
        const s = dv.getFloat32(r * 4, true);
        for (let c = 0; c < d; c++) target[r * d + c] = dv.getInt8(rows * 4 + r * d + c) * s;
      }
    }
    for (let k = 0; k < target.length; k++) if (!Number.isFinite(target[k])) bad(`tensor ${name} holds a non-finite value at ${k}`);
  });
  return w;
}
