import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decodeShopModel, encodeShopModel, shopModelSizes, SHOP_MODEL_VERSION, type ShopModel } from '../src/protocol/shop-model-v1.js';
import { trainShopModel, type ShopInteraction } from '../src/shop/train.js';
import { Rng } from '@atomem/bench/rng';

/** A model with every part: three lists, trend, vectors (items 30–39 cold), content map, a privacy block. */
function fullModel(): ShopModel {
  const rng = new Rng(11);
  const catalog = Array.from({ length: 40 }, (_, i) => `item-${i}`);
  const log: ShopInteraction[] = [];
  const t0 = Date.UTC(2024, 0, 1);
  for (let u = 0; u < 60; u++) {
    const g = u % 2;
    let t = t0 + rng.int(10) * 86_400_000;
    for (let k = 0; k < 6; k++) log.push({ user: `u${u}`, item: catalog[g * 15 + rng.int(15)], at: (t += 1000), action: 'purchase' });
  }
  // items 30..39 have no interactions: their vectors come from content
  const content = new Map(
    catalog.map((id, i) => [
      id,
      Float32Array.from({ length: 8 }, (_, d) => (i < 15 ? 1 : i < 30 ? -1 : i < 35 ? 1 : -1) * (d === 0 ? 1 : 0) + 0.1 * rng.normal()),
    ]),
  );
  const r = new Rng(2);
  const model = trainShopModel(log, {
    catalog,
    dim: 4,
    trend: true,
    trendRange: [t0, t0 + 20 * 86_400_000],
    content: { embedder: 'test-embedder', vectors: content },
    random: () => r.next(),
  });
  // why: a real DP file cannot mark items without data as cold; the header block is what matters here
  model.privacy = { epsilon: 8, delta: 1e-6, mechanism: 'analytic Gaussian', maxItemsPerUser: 16, sigma: { popularity: 1.5, gram: 2.5 } };
  return model;
}

function expectClose(a: ArrayLike<number>, b: ArrayLike<number>, tol: (k: number) => number): void {
  expect(a.length).toBe(b.length);
  for (let k = 0; k < a.length; k++) expect(Math.abs(a[k] - b[k])).toBeLessThanOrEqual(tol(k));
}

describe('shop model file', () => {
  const model = fullModel();
  const bytes = encodeShopModel(model);

  it('round-trips: ids, structure and floats exact; weights and vectors within their quantisation', () => {
    expect(String.fromCharCode(...bytes.subarray(0, 4))).toBe('ATSM');
    expect(new DataView(bytes.buffer).getUint32(4, true)).toBe(SHOP_MODEL_VERSION);
    const back = decodeShopModel(bytes);
    expect(back.items).toEqual(model.items);
    expect(back.weights).toEqual(model.weights);
    expect(back.privacy).toEqual(model.privacy);
    expect(back.info).toEqual(model.info);
    expect(Array.from(back.popularity)).toEqual(Array.from(model.popularity));
    expect(Object.keys(back.lists)).toEqual(['ease', 'knn', 'markov']);
    for (const [name, l] of Object.entries(model.lists)) {
      const b = back.lists[name];
      expect(Array.from(b.offsets)).toEqual(Array.from(l.offsets));
      expect(Array.from(b.targets)).toEqual(Array.from(l.targets));
      // i8 companded by √: error ≤ scale · (2·127·√(w/s) + 1)/127² ≤ 3·scale/127 per entry
      const rowMax = (k: number) => {
        let r = 0;
        while (l.offsets[r + 1] <= k) r++;
        let m = 0;
        for (let p = l.offsets[r]; p < l.offsets[r + 1]; p++) m = Math.max(m, Math.abs(l.weights[p]));
        return m;
      };
      expectClose(b.weights, l.weights, (k) => (3 * rowMax(k)) / 127 + 1e-7);
    }
    expect(back.trend!.bucketMs).toBe(model.trend!.bucketMs);
    expect(back.trend!.firstBucket).toBe(model.trend!.firstBucket);
    expect(Array.from(back.trend!.counts.targets)).toEqual(Array.from(model.trend!.counts.targets));
    const v = model.vectors!;
    expect(Array.from(back.vectors!.cold)).toEqual(Array.from(v.cold));
    expect(v.cold.slice(30).every((c) => c === 1)).toBe(true);
    expectClose(back.vectors!.values, v.values, () => 1 / 127 + 1e-6);
    expect(Array.from(back.contentMap!.matrix)).toEqual(Array.from(model.contentMap!.matrix));
    expect(Array.from(back.contentMap!.bias)).toEqual(Array.from(model.contentMap!.bias));
    expect(back.contentMap!.embedder).toBe('test-embedder');
  });

  it('is idempotent: encode(decode(file)) is the same bytes', () => {
    expect(Buffer.from(encodeShopModel(decodeShopModel(bytes))).equals(Buffer.from(bytes))).toBe(true);
  });

  it('reports its size by part', () => {
    const sizes = shopModelSizes(bytes);
    expect(sizes.total).toBe(bytes.length);
    for (const part of ['header', 'list.ease', 'list.knn', 'list.markov', 'popularity', 'trend', 'vectors', 'content']) expect(sizes[part]).toBeGreaterThan(0);
  });

  it('stores large catalogs: item indices past 65 535 and rows longer than 255', () => {
    const n = 70_000;
    const items = Array.from({ length: n }, (_, i) => `p${i}`);
    const offsets = new Uint32Array(n + 1);
    const targets: number[] = [];
    const weights: number[] = [];
    for (let t = 0; t < 300; t++) {
      targets.push(t * 233);
      weights.push(t + 1);
    }
    targets.push(69_999);
    weights.push(-5);
    for (let i = 1; i <= n; i++) offsets[i] = targets.length;
    const m: ShopModel = {
      items,
      lists: { knn: { offsets, targets: Uint32Array.from(targets), weights: Float32Array.from(weights) } },
      popularity: new Float32Array(n),
      weights: { knn: 1 },
      info: {},
    };
    const back = decodeShopModel(encodeShopModel(m));
    expect(Array.from(back.lists.knn.targets)).toEqual(targets);
    expect(back.lists.knn.weights[300]).toBeCloseTo(-5, 0);
    expect(back.lists.knn.weights[299]).toBe(300);
  });
});

describe('malformed input', () => {
  const bytes = encodeShopModel(fullModel());
  const headerLength = new DataView(bytes.buffer).getUint32(8, true);
  const headerOf = (b: Uint8Array) => JSON.parse(new TextDecoder().decode(b.subarray(12, 12 + headerLength)));
  /** The same file with a rewritten header (data area moved to stay aligned). */
  const withHeader = (edit: (h: Record<string, unknown>) => void): Uint8Array => {
    const h = headerOf(bytes);
    edit(h);
    const json = new TextEncoder().encode(JSON.stringify(h));
    const start = (12 + json.length + 3) & ~3;
    const oldStart = (12 + headerLength + 3) & ~3;
    const out = new Uint8Array(start + bytes.length - oldStart);
    out.set(bytes.subarray(0, 12));
    new DataView(out.buffer).setUint32(8, json.length, true);
    out.set(json, 12);
    out.set(bytes.subarray(oldStart), start);
    return out;
  };

  it.each([
    ['wrong magic', () => Uint8Array.from([0x50, 0x4b, 3, 4, ...bytes.subarray(4)]), /ATSM/],
    [
      'another version',
      () => {
        const b = bytes.slice();
        new DataView(b.buffer).setUint32(4, 2, true);
        return b;
      },
      /version 2/,
    ],
    ['empty', () => new Uint8Array(0), /ATSM/],
    [
      'header longer than the file',
      () => {
        const b = bytes.slice();
        new DataView(b.buffer).setUint32(8, 1e9, true);
        return b;
      },
      /truncated/,
    ],
    ['truncated data', () => bytes.slice(0, bytes.length - 10), /past the end|section/],
    ['extra bytes', () => Uint8Array.from([...bytes, 0, 0, 0, 0, 0, 0, 0, 0]), /after the last section/],
    [
      'header not JSON',
      () => {
        const b = bytes.slice();
        b[12] = 0x7b;
        b[13] = 0x7b;
        return b;
      },
      /JSON/,
    ],
    ['duplicate item id', () => withHeader((h) => ((h.items as string[])[1] = (h.items as string[])[0])), /twice/],
    ['empty item id', () => withHeader((h) => ((h.items as string[])[3] = '')), /item id/],
    ['fewer items than the sections', () => withHeader((h) => (h.items as string[]).pop()), /elements|expected/],
    ['missing section', () => withHeader((h) => (h.sections as unknown[]).splice(0, 1)), /missing/],
    ['section of the wrong type', () => withHeader((h) => ((h.sections as Array<{ type: string }>)[2].type = 'u16')), /type/],
    ['misaligned section', () => withHeader((h) => ((h.sections as Array<{ offset: number }>)[1].offset += 1)), /aligned|overlaps/],
    ['overlapping sections', () => withHeader((h) => ((h.sections as Array<{ offset: number }>)[1].offset = 0)), /overlaps/],
    ['non-finite weight', () => withHeader((h) => ((h.weights as Record<string, unknown>).ease = 'x')), /weight ease/],
    ['bad vector dim', () => withHeader((h) => ((h.vectors as { dim: number }).dim = 0)), /dim/],
  ])('%s → RangeError', (_, make, message) => {
    expect(() => decodeShopModel(make())).toThrow(RangeError);
    expect(() => decodeShopModel(make())).toThrow(message);
  });

  it('a NaN float section is refused', () => {
    const h = headerOf(bytes);
    const pop = (h.sections as Array<{ name: string; offset: number }>).find((s) => s.name === 'popularity')!;
    const b = bytes.slice();
    new DataView(b.buffer).setFloat32(((12 + headerLength + 3) & ~3) + pop.offset, NaN, true);
    expect(() => decodeShopModel(b)).toThrow(/popularity holds NaN/);
  });

  it('an item index out of range is refused', () => {
    const h = headerOf(bytes);
    const t = (h.sections as Array<{ name: string; offset: number }>).find((s) => s.name === 'list.ease.targets')!;
    const b = bytes.slice();
    b[((12 + headerLength + 3) & ~3) + t.offset] = 0x7f; // first target of the first non-empty row → 127 ≥ 40 items
    expect(() => decodeShopModel(b)).toThrow(RangeError);
  });

  it('any prefix, and any single corrupted byte, gives a model or a RangeError, never another error', () => {
    for (let len = 0; len < bytes.length; len += 97) expect(() => decodeShopModel(bytes.subarray(0, len))).toThrow(RangeError);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: bytes.length - 1 }), fc.integer({ min: 0, max: 255 }), (at, value) => {
        const b = bytes.slice();
        b[at] = value;
        try {
          decodeShopModel(b);
        } catch (e) {
          expect(e).toBeInstanceOf(RangeError);
        }
      }),
      { numRuns: 400 },
    );
  });

  it('the encoder refuses inconsistent models', () => {
    const m = fullModel();
    expect(() => encodeShopModel({ ...m, items: [...m.items.slice(0, -1), m.items[0]] })).toThrow(/twice/);
    expect(() => encodeShopModel({ ...m, popularity: new Float32Array(3) })).toThrow(RangeError);
    const bad = { ...m.lists.knn, weights: Float32Array.from(m.lists.knn.weights, (w, k) => (k === 0 ? NaN : w)) };
    expect(() => encodeShopModel({ ...m, lists: { ...m.lists, knn: bad } })).toThrow(/NaN/);
  });
});

describe('inputs', () => {
  it('decodes a Node Buffer from a shared pool and an ArrayBuffer alike', () => {
    const bytes = encodeShopModel(fullModel());
    const pooled = Buffer.concat([Buffer.alloc(3), Buffer.from(bytes)]).subarray(3);
    expect(pooled.byteOffset).toBeGreaterThan(0);
    const a = decodeShopModel(pooled);
    const b = decodeShopModel(bytes.slice().buffer);
    expect(Array.from(a.lists.ease.weights)).toEqual(Array.from(b.lists.ease.weights));
    expect(Array.from(a.vectors!.values)).toEqual(Array.from(b.vectors!.values));
  });
});
