import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ShopScorer, mapContent, type DeviceEvent } from '../src/shop/score.js';
import { decodeShopModel, encodeShopModel } from '../src/protocol/shop-model-v1.js';
import { trainShopModel, type ShopInteraction } from '../src/shop/train.js';
import { Rng } from '@atomem/bench/rng';

/** Two groups; each item's content vector points to its group's axis (plus noise). */
function world(seed = 1) {
  const rng = new Rng(seed);
  const catalog = [...Array.from({ length: 16 }, (_, i) => `A${i}`), ...Array.from({ length: 16 }, (_, i) => `B${i}`)];
  const log: ShopInteraction[] = [];
  for (const g of ['A', 'B'])
    for (let u = 0; u < 50; u++) {
      // items 12..15 of each group are new: nobody has them yet
      rng
        .sampleWithoutReplacement(
          Array.from({ length: 12 }, (_, i) => `${g}${i}`),
          6,
        )
        .forEach((item, k) => log.push({ user: `${g}${u}`, item, at: k, action: 'purchase' }));
    }
  const content = new Map(
    catalog.map((id) => [id, Float32Array.from({ length: 16 }, (_, d) => (d === (id[0] === 'A' ? 0 : 1) ? 1 : 0) + 0.15 * rng.normal())]),
  );
  const r = new Rng(seed + 1);
  const model = trainShopModel(log, { catalog, dim: 4, iterations: 40, content: { embedder: 'toy', vectors: content }, random: () => r.next() });
  return { catalog, log, content, model };
}

const cos = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0,
    na = 0,
    nb = 0;
  for (let d = 0; d < a.length; d++) {
    s += a[d] * b[d];
    na += a[d] * a[d];
    nb += b[d] * b[d];
  }
  return s / Math.sqrt(na * nb);
};

describe('cold items', () => {
  const { catalog, content, model } = world();
  const v = model.vectors!;
  const row = (id: string) => v.values.subarray(catalog.indexOf(id) * v.dim, (catalog.indexOf(id) + 1) * v.dim);
  const centroid = (g: string) => {
    const c = new Float64Array(v.dim);
    for (let i = 0; i < 12; i++) row(`${g}${i}`).forEach((x, d) => (c[d] += x));
    return c;
  };

  it('get a vector from their content, flagged cold, near the items of their group', () => {
    for (const id of ['A12', 'A15', 'B13']) {
      expect(v.cold[catalog.indexOf(id)]).toBe(1);
      const own = cos(row(id), centroid(id[0]));
      const other = cos(row(id), centroid(id[0] === 'A' ? 'B' : 'A'));
      expect(own).toBeGreaterThan(other + 0.3);
    }
    expect(v.cold[catalog.indexOf('A3')]).toBe(0);
  });

  it('rank by their vector for a shopper of their group', () => {
    const sc = new ShopScorer(model);
    const h: DeviceEvent[] = ['A1', 'A2', 'A3'].map((item, k) => ({ item, at: k, action: 'purchase' }));
    const ranked = sc.rank(h, ['B12', 'A12', 'B14', 'A14']);
    expect(
      ranked
        .slice(0, 2)
        .map((r) => r.id)
        .sort(),
    ).toEqual(['A12', 'A14']);
  });

  it('a product newer than the file maps through the shipped content map on the device', () => {
    const file = decodeShopModel(encodeShopModel(model));
    const fresh = Float32Array.from({ length: 16 }, (_, d) => (d === 1 ? 1 : 0));
    const viaMap = mapContent(file.contentMap!, fresh, v.dim);
    expect(cos(viaMap, centroid('B'))).toBeGreaterThan(cos(viaMap, centroid('A')) + 0.3);
    const sc = new ShopScorer(file, { contentVector: (id) => (id === 'brand-new-B' ? fresh : undefined) });
    const h: DeviceEvent[] = ['B1', 'B2'].map((item, k) => ({ item, at: k, action: 'purchase' }));
    const s = sc.signals(h, ['brand-new-B', 'A5', 'unknown']);
    expect(s.vecRecent[0]).toBeGreaterThan(s.vecRecent[1]);
    expect(s.vecRecent[2]).toBe(0);
    expect(() => mapContent(file.contentMap!, new Float32Array(3), v.dim)).toThrow(RangeError);
    void content;
  });
});

describe('the on-device scorer', () => {
  const { model } = world(3);
  const h: DeviceEvent[] = [
    { item: 'A1', at: 10, action: 'purchase' },
    { item: 'B2', at: 5, action: 'view' },
    { item: 'A4', at: 20, action: 'like' },
  ];
  const cands = ['A5', 'B5', 'A7', 'B9', 'A13'];

  it('depends only on the history passed to it: same inputs, same output, whatever was scored before', () => {
    const sc = new ShopScorer(model);
    const first = sc.score(h, cands);
    sc.score(
      [
        { item: 'B1', at: 1 },
        { item: 'B3', at: 2 },
      ],
      ['B4', 'A4'],
    );
    sc.rank([{ item: 'A9', at: 1, action: 'dislike' }], cands);
    expect(Array.from(sc.score(h, cands))).toEqual(Array.from(first));
    expect(Array.from(new ShopScorer(model).score(h, cands))).toEqual(Array.from(first));
    // and the history does matter
    expect(Array.from(sc.score([{ item: 'B1', at: 1 }], cands))).not.toEqual(Array.from(first));
  });

  it('reads the history in time order, whatever order it is passed in', () => {
    const sc = new ShopScorer(model);
    expect(Array.from(sc.score([...h].reverse(), cands))).toEqual(Array.from(sc.score(h, cands)));
  });

  it('does not modify its inputs or the model', () => {
    const frozen = Object.freeze(h.map((e) => Object.freeze({ ...e })));
    const fc = Object.freeze([...cands]);
    const before = encodeShopModel(model);
    new ShopScorer(model).rank(frozen, fc);
    expect(Buffer.from(encodeShopModel(model)).equals(Buffer.from(before))).toBe(true);
  });

  it('is pure source: no Node or DOM APIs, no packages, no clock or randomness', () => {
    const src = readFileSync(new URL('../src/shop/score.ts', import.meta.url), 'utf8');
    const imports = [...src.matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1]);
    expect(imports.every((p) => p === '../protocol/shop-model-v1.js' || p === '../core/types.js')).toBe(true);
    const code = src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    for (const banned of [
      'process.',
      'require(',
      'fetch(',
      'Date.now',
      'Math.random',
      'localStorage',
      'indexedDB',
      'globalThis',
      'window.',
      'self.',
      'XMLHttpRequest',
    ]) {
      expect(code.includes(banned), banned).toBe(false);
    }
    // and what it imports is pure too
    const core = readFileSync(new URL('../src/core/types.ts', import.meta.url), 'utf8');
    expect(core).not.toMatch(/^import (?!type)/m);
    const format = readFileSync(new URL('../src/protocol/shop-model-v1.ts', import.meta.url), 'utf8');
    expect([...format.matchAll(/^import .* from '([^']+)';$/gm)].map((m) => m[1])).toEqual(['./sections.js']);
    const sections = readFileSync(new URL('../src/protocol/sections.ts', import.meta.url), 'utf8');
    expect(sections).not.toMatch(/^import /m);
    for (const banned of ['process.', 'Date.now', 'Math.random', 'globalThis', 'fetch(']) expect(sections.includes(banned), banned).toBe(false);
  });
});
