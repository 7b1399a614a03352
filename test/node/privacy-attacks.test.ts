/**
 * The attacks of `npm run bench:privacy` (packages/bench/src/privacy-attacks.ts) as a test that
 * fails if the service regresses: a synthetic population (two taste groups, hashing embedder),
 * protocol v1 through its in-process index with the service's v1 defaults, protocol v2 through
 * the real service (in-process fastify, Privacy Pass tokens, aggregation job).
 */
import { describe, expect, it } from 'vitest';
import { auc, formatAttacks, measureAttacks } from '../../packages/bench/src/privacy-attacks.js';
import { twoGroupDataset } from '../fixtures/synthetic.js';

describe('privacy attacks, before (v1) and after (v2)', () => {
  it('auc counts ties as one half', () => {
    expect(auc([1, 2], [0, 0])).toBe(1);
    expect(auc([0], [0])).toBe(0.5);
    expect(auc([0, 1], [1, 0])).toBe(0.5);
  });

  it('v1 links, isolates and recovers; v2 stays at chance', async () => {
    const dataset = twoGroupDataset({ usersPerGroup: 50, itemsPerGroup: 60, len: 18 });
    const r = await measureAttacks({ dataset, embedder: 'hashing', cacheDir: null, holdOut: 20, trials: 20, v2: { minReports: 10, minContributors: 0 } });
    const row = (prefix: string) => r.rows.find((x) => x.attack.startsWith(prefix))!;
    process.stdout.write(`${formatAttacks(r)}\n`);
    expect(r.ldp.epsilon).toBeLessThanOrEqual(4);
    // linkage: v1's request log links every pair; v2's reports do not
    expect(row('linkage of two records of one shopper (request log)').v1).toBeGreaterThan(0.9);
    expect(row('linkage of two records of one shopper (request log)').v2).toBeLessThan(0.62);
    // n−1: v1 hands back the victim's vector
    expect(row('n−1: probes').v1).toBeGreaterThan(0.5);
    expect(Math.abs(row('n−1: probes').v2 - 0.5)).toBeLessThan(0.25);
    // membership inference
    expect(row('membership inference').v1).toBeGreaterThan(0.8);
    expect(Math.abs(row('membership inference').v2 - 0.5)).toBeLessThan(0.25);
    // re-reading the release gives the same bytes: nothing to average
    expect(row('noise averaging: 30 re-queries').v2).toBe(0);
    // the memo keeps 30 linked reports of one item from revealing it as often as fresh noise would
    const memo = row('noise averaging: 30 linked reports');
    expect(memo.v2).toBeLessThan(0.9);
    // set recovery: v1's vectors give their items away far better than v2's reports
    expect(row('set recovery').v1).toBeGreaterThan(row('set recovery').v2);
    expect(r.quality.map((q) => q.level)).toEqual(['off', 'contribute']);
  }, 300_000);
});
