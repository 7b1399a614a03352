/**
 * The attacks of `npm run bench:privacy` (packages/bench/src/privacy-attacks.ts) as a test that
 * fails if the service regresses: a synthetic population (two taste groups, hashing embedder),
 * protocol v2 through the real service (in-process fastify, Privacy Pass tokens, aggregation
 * job). The "before" column is protocol v1's frozen ML-100K figures, printed beside.
 */
import { describe, expect, it } from 'vitest';
import { V1_FROZEN, auc, formatAttacks, measureAttacks } from '../../packages/bench/src/privacy-attacks.js';
import { twoGroupDataset } from '../fixtures/synthetic.js';

describe('privacy attacks against protocol v2', () => {
  it('auc counts ties as one half', () => {
    expect(auc([1, 2], [0, 0])).toBe(1);
    expect(auc([0], [0])).toBe(0.5);
    expect(auc([0, 1], [1, 0])).toBe(0.5);
  });

  it('v2 stays at chance; the v1 column is the frozen figure, named with its commit', async () => {
    const dataset = twoGroupDataset({ usersPerGroup: 50, itemsPerGroup: 60, len: 18 });
    const r = await measureAttacks({ dataset, embedder: 'hashing', cacheDir: null, holdOut: 20, trials: 20, v2: { minReports: 10, minContributors: 0 } });
    const row = (prefix: string) => r.rows.find((x) => x.attack.startsWith(prefix))!;
    const text = formatAttacks(r);
    process.stdout.write(`${text}\n`);
    expect(text).toContain(`before (v1; frozen: ml-100k at commit ${V1_FROZEN.commit}, not this run)`);
    expect(r.ldp.epsilon).toBeLessThanOrEqual(4);
    // linkage: v2's reports do not link
    expect(row('linkage of two records of one shopper (request log)').v2).toBeLessThan(0.62);
    expect(row('linkage of two records of one shopper (stored data)').v2).toBe(0.5);
    // n−1 and membership inference near chance
    expect(Math.abs(row('n−1: probes').v2 - 0.5)).toBeLessThan(0.25);
    expect(Math.abs(row('membership inference').v2 - 0.5)).toBeLessThan(0.25);
    // re-reading the release gives the same bytes: nothing to average
    expect(row('noise averaging: 30 re-queries').v2).toBe(0);
    // the memo keeps 30 linked reports of one item from revealing it as often as fresh noise would
    expect(row('noise averaging: 30 linked reports').v2).toBeLessThan(0.9);
    // the before column: v1's frozen figure where the attack had a v1 form, none otherwise
    for (const x of r.rows) {
      if (Object.hasOwn(V1_FROZEN.figures, x.attack)) expect(x.v1).toBe(V1_FROZEN.figures[x.attack]);
      else expect(x.v1).toBeNaN();
    }
    expect(r.quality.map((q) => q.level)).toEqual(['off', 'contribute']);
  }, 300_000);
});
