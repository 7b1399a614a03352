import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUseLiteEmbedder, USE_LITE_FLOAT32_ID, USE_LITE_ID, type UseLiteEmbedder } from '../src/embed/use-lite.js';
import { defaultAssetsDir, nodeAssetSource } from '../src/embed/use-lite-node.js';
import { isUint8Manifest, quantizeTensor, quantizeUseLite, QUANT_MIN_ELEMENTS, type ModelJsonLike } from '../src/embed/use-lite-quant.js';
import { itemText } from '../src/embed/cache.js';
import { loadMovieLens } from '@atomem/bench/datasets.js';
import { generateCatalog, toItems } from '@atomem/demo/catalog.js';
import reference from './browser/use-lite-reference.json';

// USE-lite ships uint8 weights (src/embed/use-lite-quant.ts). These tests pin: the scheme is the
// one tfjs dequantizes; the build and Node-from-source produce the same bytes; Node matches the
// reference vectors the browser test also checks (within 1e-5); and quality against float32
// (cosine ≥ 0.99 on every ML-100K item text and every demo product).

const BUILT = resolve(import.meta.dirname, '../dist/assets/use-lite');
const ML100K = [process.env.ATOMEM_ML100K, resolve(import.meta.dirname, '../../../../shared/data/ml-100k')].find((d) => d && existsSync(resolve(d, 'u.item')));

function float32Files(): { model: ModelJsonLike; shards: ArrayBuffer[] } {
  const dir = defaultAssetsDir();
  const model = JSON.parse(readFileSync(resolve(dir, 'model.json'), 'utf8')) as ModelJsonLike;
  const shards = model.weightsManifest
    .flatMap((g) => g.paths)
    .map((p) => {
      const b = readFileSync(resolve(dir, p));
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    });
  return { model, shards };
}

function minCosine(a: Float32Array[], b: Float32Array[]): { min: number; mean: number } {
  let min = Infinity;
  let sum = 0;
  a.forEach((v, i) => {
    let s = 0;
    for (let d = 0; d < v.length; d++) s += v[d] * b[i][d];
    min = Math.min(min, s);
    sum += s;
  });
  return { min, mean: sum / a.length };
}

describe('uint8 quantization scheme', () => {
  it('represents 0 exactly, stays within half a step and dequantizes as tfjs does (q * scale + min)', () => {
    const data = Float32Array.from({ length: 5000 }, (_, i) => Math.sin(i * 0.37) * (i % 7 === 0 ? 3 : 0.5) - 0.2);
    data[17] = 0;
    const { q, min, scale } = quantizeTensor(data);
    expect(scale).toBeGreaterThan(0);
    // zero exactly representable: some integer z with z * scale + min === 0 (up to rounding of the double)
    const z = Math.round(-min / scale);
    expect(Math.abs(z * scale + min)).toBeLessThan(1e-12);
    expect(q[17] * scale + min).toBeCloseTo(0, 12);
    let worst = 0;
    for (let i = 0; i < data.length; i++) worst = Math.max(worst, Math.abs(q[i] * scale + min - data[i]));
    expect(worst).toBeLessThanOrEqual(scale / 2 + 1e-9);
  });

  it('handles constant tensors and refuses NaN', () => {
    const c = quantizeTensor(new Float32Array(2000).fill(0.25));
    expect(c.scale).toBe(1);
    expect(c.q.every((x) => x === 0)).toBe(true);
    expect(c.min).toBe(0.25);
    expect(() => quantizeTensor(Float32Array.from([1, Number.NaN]))).toThrow(/NaN/);
  });

  it('quantizes every large float32 tensor of USE-lite, keeps int32 and small ones, 27.9 MB → 7.0 MB', () => {
    const { model, shards } = float32Files();
    const before = shards.reduce((n, s) => n + s.byteLength, 0);
    const q = quantizeUseLite(model, shards);
    const after = [...q.shards.values()].reduce((n, s) => n + s.byteLength, 0);
    expect(isUint8Manifest(model)).toBe(false);
    expect(isUint8Manifest(q.model)).toBe(true);
    for (const w of q.model.weightsManifest[0].weights) {
      const n = w.shape.reduce((a, b) => a * b, 1);
      if (w.dtype === 'float32' && n >= QUANT_MIN_ELEMENTS) expect(w.quantization).toMatchObject({ dtype: 'uint8' });
      else expect(w.quantization).toBeUndefined();
    }
    console.log(`USE-lite weights: ${before} bytes float32 → ${after} bytes uint8 in ${q.shards.size} shards`);
    expect(before).toBeGreaterThan(27e6);
    expect(after).toBeLessThan(7.1e6);
    // the input is not modified
    expect(isUint8Manifest(float32Files().model)).toBe(false);
  });

  it('is deterministic, and the build wrote exactly these bytes to dist/assets/use-lite/', () => {
    const { model, shards } = float32Files();
    const a = quantizeUseLite(model, shards);
    const b = quantizeUseLite(model, shards);
    const hash = (m: Map<string, ArrayBuffer>): string[] => [...m].map(([k, v]) => `${k}:${createHash('sha256').update(new Uint8Array(v)).digest('hex')}`);
    expect(hash(b.shards)).toEqual(hash(a.shards));
    expect(JSON.stringify(b.model)).toBe(JSON.stringify(a.model));
    expect(existsSync(resolve(BUILT, 'model.json')), 'dist/assets/use-lite is missing: run `npm run build` (npm test does it first)').toBe(true);
    expect(readFileSync(resolve(BUILT, 'model.json'), 'utf8')).toBe(JSON.stringify(a.model));
    for (const [name, bytes] of a.shards)
      expect(
        createHash('sha256')
          .update(readFileSync(resolve(BUILT, name)))
          .digest('hex'),
        name,
      ).toBe(createHash('sha256').update(new Uint8Array(bytes)).digest('hex'));
  });
});

describe('USE-lite uint8 vs float32, Node from source vs the built files', () => {
  let uint8: UseLiteEmbedder;
  let built: UseLiteEmbedder;
  let float32: UseLiteEmbedder;

  beforeAll(async () => {
    uint8 = await createUseLiteEmbedder();
    built = await createUseLiteEmbedder({ assetsPath: BUILT });
    float32 = await createUseLiteEmbedder({ weights: 'float32' });
  }, 180_000);

  afterAll(async () => {
    await Promise.all([uint8?.dispose?.(), built?.dispose?.(), float32?.dispose?.()]);
  });

  it('names each embedder by the weights it loaded', () => {
    expect(uint8.id).toBe(USE_LITE_ID);
    expect(built.id).toBe(USE_LITE_ID);
    expect(float32.id).toBe(USE_LITE_FLOAT32_ID);
    expect(USE_LITE_ID).toBe('use-lite@0.2.0/uint8');
  });

  it('gives the reference vectors (the browser test checks the same file) within 1e-5, from source and from the build', async () => {
    expect(reference.embedderId).toBe(USE_LITE_ID);
    const texts = reference.sentences.map((s) => s.text);
    for (const e of [uint8, built]) {
      const out = await e.embed(texts);
      out.forEach((v, i) => {
        let maxDiff = 0;
        for (let d = 0; d < 512; d++) maxDiff = Math.max(maxDiff, Math.abs(v.vector[d] - reference.sentences[i].vector[d]));
        expect(maxDiff).toBeLessThan(1e-5);
      });
    }
  });

  it('cosine ≥ 0.99 to float32 on every demo product', async () => {
    const texts = toItems(generateCatalog()).map((it) => itemText(it));
    const a = (await float32.embed(texts)).map((e) => e.vector);
    const b = (await uint8.embed(texts)).map((e) => e.vector);
    const c = minCosine(a, b);
    console.log(`demo catalog (${texts.length} products): cosine uint8 vs float32 min ${c.min.toFixed(4)}, mean ${c.mean.toFixed(4)}`);
    expect(c.min).toBeGreaterThanOrEqual(0.99);
  }, 120_000);

  it.skipIf(!ML100K)(
    `cosine ≥ 0.99 to float32 on every ML-100K item text${ML100K ? '' : ' (SKIPPED: set ATOMEM_ML100K)'}`,
    async () => {
      const ds = loadMovieLens(ML100K!, { kcore: 0 });
      const texts = [...ds.items.values()].map((it) => itemText(it));
      expect(texts.length).toBe(1682);
      const a = (await float32.embed(texts)).map((e) => e.vector);
      const b = (await uint8.embed(texts)).map((e) => e.vector);
      const c = minCosine(a, b);
      console.log(`ML-100K (${texts.length} items): cosine uint8 vs float32 min ${c.min.toFixed(4)}, mean ${c.mean.toFixed(4)}`);
      expect(c.min).toBeGreaterThanOrEqual(0.99);
    },
    240_000,
  );

  it('nodeAssetSource of the built folder reads the uint8 manifest', async () => {
    const m = JSON.parse(await nodeAssetSource(BUILT).text('model.json')) as ModelJsonLike;
    expect(isUint8Manifest(m)).toBe(true);
  });
});
