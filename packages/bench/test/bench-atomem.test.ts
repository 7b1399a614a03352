import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import '../src/methods.js';
import { runBenchmark } from '../src/run.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

// The atomem benchmark methods end to end on a synthetic two-taste dataset, with the hashing
// embedder (fast; USE-lite is covered by its own tests and by the ML-100K run).
describe('atomem as a benchmark method', () => {
  beforeAll(() => {
    process.env.ATOMEM_BENCH_CACHE = mkdtempSync(join(tmpdir(), 'atomem-bench-'));
  });
  const dataset = twoGroupDataset({ usersPerGroup: 25, itemsPerGroup: 30, len: 20 });
  // content item vectors: this file tests the memory engine in the content space (the shop's space: bench-shop-on-device.test.ts)
  const params = { 'atomem.itemVectors': 'content', 'atomem.embedder': 'hashing', 'atomem.centre': '0', 'atomem.tau': '0.3', 'atomem.fidelityUsers': '10' };

  it('runs at every privacy level plus ablations, learns the two tastes, and reports extras', async () => {
    const result = await runBenchmark({
      dataset,
      methods: ['random', 'atomem', 'atomem-single-summary', 'atomem-no-consolidation', 'atomem-no-communities'],
      params,
      seed: 1,
    });
    const row = (m: string, p: string | null) => result.results.find((r) => r.method === m && r.privacy === p)!;
    expect(result.results.map((r) => `${r.method}/${r.privacy}`)).toEqual([
      'random/null',
      'atomem/off',
      'atomem/contribute',
      'atomem-single-summary/off',
      'atomem-single-summary/contribute',
      'atomem-no-consolidation/off',
      'atomem-no-consolidation/contribute',
      'atomem-no-communities/contribute',
    ]);
    // Each user's candidates are 1 positive of their group and 9 negatives, mostly of the
    // other group: memory alone must beat random by a wide margin.
    expect(row('atomem', 'off').ndcg10).toBeGreaterThan(row('random', null).ndcg10 + 0.2);
    const off = row('atomem', 'off');
    expect(off.n).toBe(50);
    expect(off.forwardAccuracy).toBeGreaterThan(0.5);
    expect(off.memoriesPerUser).toBeGreaterThan(0);
    const fid = off['fidelity1:1'] as { precision: number; f1: number; n: number };
    expect(fid.n).toBeGreaterThan(0);
    // held-out items are of the user's own taste: saying yes to them is easy to get right
    expect(fid.precision).toBeGreaterThan(0.5);
    // protocol v2 through the real service: one report per simulated device, then the release
    const release = row('atomem', 'contribute').release as { epsilon: number; reports: number };
    expect(release.reports).toBe(50);
    expect(release.epsilon).toBeLessThanOrEqual(4);
    expect(row('atomem-single-summary', 'off').memoriesPerUser).toBe(1);
  });

  it('is deterministic for a seed', async () => {
    const run = () => runBenchmark({ dataset, methods: ['atomem'], privacy: ['contribute'], params, seed: 3 });
    const [a, b] = [await run(), await run()];
    expect(b.results[0].ndcg10).toBe(a.results[0].ndcg10);
    expect(b.results[0].mrr).toBe(a.results[0].mrr);
  });
});
