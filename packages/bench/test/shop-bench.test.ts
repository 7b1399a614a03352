import { describe, expect, it } from 'vitest';
import '../src/methods.js';
import { methodFactories } from '../src/registry.js';
import { runBenchmark } from '../src/run.js';
import { buildProtocol } from '../src/protocol.js';
import { registerShopSignal, timeQuantile, trainOptionsFrom, weightsFrom, shopLog } from '../src/shop-method.js';
import { fitWeights, standardise, type FitCase } from '../../atomem/src/shop/fit.js';
import { Rng } from '../src/rng.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

describe('bench method shop', () => {
  const dataset = twoGroupDataset({ usersPerGroup: 30, itemsPerGroup: 20, len: 10 });

  it('is registered and ranks every case from the file, far above chance on two taste groups', async () => {
    expect(methodFactories.has('shop')).toBe(true);
    const res = await runBenchmark({ dataset, methods: ['random', 'shop'], params: { 'shop.content': 'none' }, resamples: 50 });
    const [random, shop] = res.results;
    expect(shop.n).toBe(60);
    expect(shop.ndcg10).toBeGreaterThan(random.ndcg10 + 0.15);
    expect(shop.fileBytes).toBeGreaterThan(0);
  });

  it('runs with DP, a retention cut-off, one signal alone and an extra signal', async () => {
    let prepared = 0;
    // the oracle knows the targets from the protocol (a method never does: it gets no target)
    const targets = new Map(buildProtocol(dataset).cases.map((c) => [c.user, c.test.item]));
    registerShopSignal('test-oracle', () => ({
      prepare: () => void prepared++,
      scores: (c) => c.candidates.map((id) => (id === targets.get(c.user) ? 1 : 0)),
    }));
    const run = (params: Record<string, string>) => runBenchmark({ dataset, methods: ['shop'], params: { 'shop.content': 'none', ...params }, resamples: 20 });
    const dp = await run({ 'shop.epsilon': '2' });
    expect(dp.results[0].ndcg10).toBeGreaterThan(0.3);
    const cut = await run({ 'shop.until': '0.5' });
    expect(cut.results[0].n).toBe(60);
    const alone = await run({ 'shop.only': 'pop' });
    expect(alone.results[0].n).toBe(60);
    const oracle = await run({ 'shop.extra': 'test-oracle', 'shop.w.test-oracle': '1000' });
    expect(prepared).toBe(1);
    expect(oracle.results[0].ndcg10).toBe(1);
    await expect(run({ 'shop.only': 'nope' })).rejects.toThrow(/unknown signal/);
    await expect(run({ 'shop.extra': 'nope' })).rejects.toThrow(/unknown signal/);
  });

  it('maps parameters to training and combiner options', () => {
    expect(trainOptionsFrom({ 'shop.epsilon': '4', 'shop.k.ease': '32', 'shop.orient.knn': 'out', 'shop.budget.gram': '0.7' })).toMatchObject({
      epsilon: 4,
      k: { ease: 32 },
      orientation: { knn: 'out' },
      budget: { gram: 0.7 },
    });
    expect(() => trainOptionsFrom({ 'shop.orient.ease': 'sideways' })).toThrow(/in or out/);
    expect(weightsFrom({ 'shop.w.ease': '2' }, { ease: 1, knn: 1 })).toEqual({ ease: 2, knn: 1 });
    expect(weightsFrom({ 'shop.only': 'knn' })).toEqual({ knn: 1 });
    const log = shopLog(
      new Map([
        [
          'u',
          [
            { item: 'a', at: 10 },
            { item: 'b', at: 20 },
            { item: 'c', at: 30 },
            { item: 'd', at: 40 },
            { item: 'e', at: 50 },
          ],
        ],
      ]),
    );
    expect(timeQuantile(log, 0.8)).toBe(50);
    expect(timeQuantile(log, 0.5)).toBe(30);
    expect(() => timeQuantile(log, 0)).toThrow(RangeError);
  });
});

describe('fitWeights', () => {
  it('puts the weight on the informative signal and converges when one nearly separates', () => {
    const rng = new Rng(4);
    const cases: FitCase[] = Array.from({ length: 300 }, () => {
      const positive = rng.int(10);
      const good = Array.from({ length: 10 }, (_, i) => rng.normal() + (i === positive ? 2 : 0));
      const noise = Array.from({ length: 10 }, () => rng.normal());
      const perfect = Array.from({ length: 10 }, (_, i) => (i === positive ? 1 : 0));
      return { signals: { good, noise, perfect }, positive };
    });
    const w = fitWeights(cases, ['good', 'noise']);
    expect(w.good).toBe(1);
    expect(Math.abs(w.noise)).toBeLessThan(0.2);
    const sep = fitWeights(cases, ['good', 'noise', 'perfect']);
    expect(sep.perfect).toBe(1);
    expect(Object.values(sep).every(Number.isFinite)).toBe(true);
  });

  it('standardises like the combiner (constant → zeros)', () => {
    expect(Array.from(standardise([2, 2, 2]))).toEqual([0, 0, 0]);
    const z = standardise([1, 2, 3]);
    expect(z[2]).toBeCloseTo(Math.sqrt(1.5), 12);
  });
});
