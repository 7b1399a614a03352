/**
 * Benchmark method `sasrec` (packages/bench/src/sasrec-method.ts): registered, parameters parsed,
 * learns the synthetic two-group task, and ranks from the history and candidates only.
 */
import { describe, expect, it } from 'vitest';
import '../src/methods.js';
import { methodFactories } from '../src/registry.js';
import { testCases } from '../src/protocol.js';
import { runBenchmark } from '../src/run.js';
import { SasrecMethod, sasrecOptions } from '../src/sasrec-method.js';
import type { MethodContext } from '../src/types.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

describe('bench method sasrec', () => {
  it('is registered and parses its sasrec.* parameters', () => {
    expect(methodFactories.has('sasrec')).toBe(true);
    expect(sasrecOptions({ 'sasrec.epochs': '3', 'sasrec.lr': '0.01', other: 'x' })).toMatchObject({ epochs: 3, lr: 0.01, dim: undefined });
    expect(() => sasrecOptions({ 'sasrec.epoch': '3' })).toThrow(/unknown parameter sasrec\.epoch/);
    expect(() => sasrecOptions({ 'sasrec.lr': 'fast' })).toThrow(/must be a number/);
  });

  // (EASE reaches about 0.71 here: a third of the negatives are unseen items of the user's own group)
  it('learns two taste groups far above random through runBenchmark', async () => {
    const r = await runBenchmark({
      dataset: twoGroupDataset({ usersPerGroup: 30, len: 10 }),
      methods: ['random', 'sasrec'],
      resamples: 50,
      params: { 'sasrec.epochs': '30', 'sasrec.dim': '16', 'sasrec.maxLen': '10', 'sasrec.batchSize': '16', 'sasrec.lr': '0.01', 'sasrec.threads': '1' },
    });
    const byName = Object.fromEntries(r.results.map((x) => [x.method, x]));
    expect(byName.sasrec.ndcg10).toBeGreaterThan(byName.random.ndcg10 + 0.12);
    expect(byName.sasrec.trainSeconds).toBeGreaterThanOrEqual(0);
  }, 60_000);

  it("trains with the run's seed unless sasrec.seed is given", async () => {
    const dataset = twoGroupDataset({ usersPerGroup: 8, len: 6 });
    const { cases, histories } = testCases(dataset);
    const train = async (seed: number, opts: Record<string, number> = {}) => {
      // as the registered factory builds it: every sasrec.* key present, absent ones undefined
      const m = new SasrecMethod({ ...sasrecOptions({}), epochs: 1, dim: 8, maxLen: 6, batchSize: 8, threads: 1, ...opts });
      await m.prepare({ dataset, cases, histories, seed, privacy: 'off', progress: () => {} });
      return m.model!.itemEmb;
    };
    expect(await train(1)).toEqual(await train(1));
    expect(await train(2)).not.toEqual(await train(1));
    expect(await train(2, { seed: 1 })).toEqual(await train(1));
  });

  it('a ranking depends only on the history and the candidates, never on the test item', async () => {
    const dataset = twoGroupDataset({ usersPerGroup: 10, len: 8 });
    const { cases, histories } = testCases(dataset);
    const ctx: MethodContext = { dataset, cases, histories, seed: 2026, privacy: 'off', progress: () => {} };
    const m = new SasrecMethod({ epochs: 2, dim: 8, maxLen: 8, batchSize: 8, threads: 1 });
    await m.prepare(ctx);
    for (const c of cases.slice(0, 5)) {
      const before = m.rank(c);
      // what a method gets (RankCase) holds no target: the same ranking from the case without it
      const ranked = m.rank({ user: c.user, history: c.history, candidates: c.candidates, now: c.now });
      expect(ranked).toEqual(before);
      expect([...before].sort()).toEqual([...c.candidates].sort());
    }
  });
});
