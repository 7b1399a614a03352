/**
 * The attacks of `npm run bench:privacy` (packages/bench/src/privacy-attacks.ts) as a test that
 * fails if the service regresses: a synthetic population (two taste groups, hashing embedder),
 * protocol v2 through the real service (in-process fastify, Privacy Pass tokens, aggregation
 * job). The "before" column is protocol v1's frozen ML-100K figures, printed beside.
 */
import { describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import {
  V1_FROZEN,
  auc,
  formatAttacks,
  formatDeviceAttacks,
  linkageByTiming,
  measureAttacks,
  measureDeviceAttacks,
  poisoningRows,
} from '../src/privacy-attacks.js';
import { runPoisoning } from '../src/poisoning.js';
import { writeMovieLensTiny } from '../../../test/fixtures/movielens-tiny.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

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

  it('device-side attacks: deterministic for a seed, targets met where the design claims them', async () => {
    const o = { seed: 11, devices: 300, sybilRequests: 12, memoTrials: 4, chromium: false };
    const a = await measureDeviceAttacks(o);
    const b = await measureDeviceAttacks(o);
    expect(b.rows).toEqual(a.rows);
    process.stdout.write(`${formatDeviceAttacks(a)}\n`);
    const row = (p: string, m?: string) => a.rows.find((x) => x.attack.startsWith(p) && (m === undefined || x.measure.startsWith(m)))!;
    // the removed schedule links every report; the shipped one is at chance with independent visits
    expect(row('issuance-to-report linkage, 300 devices/epoch, independent', 'AUC').baseline).toBeGreaterThan(0.99);
    expect(row('issuance-to-report linkage, 300 devices/epoch, independent', 'AUC').measured).toBeLessThanOrEqual(0.55);
    expect(row('issuance-to-report linkage, 300 devices/epoch, independent', 'hit').measured).toBeLessThanOrEqual(2 / 300);
    expect(row('Sybil token farming: 12 requests from one signed-in').measured).toBe(1);
    expect(row('Sybil token farming: 12 requests without an account').measured).toBe(0);
    expect(row('Sybil token farming: 12 requests from one signed-in').baseline).toBe(12);
    for (const r of a.rows.filter((x) => x.attack.startsWith('lifetime ε'))) expect(r.measured).toBeLessThanOrEqual(10);
    // Prio3 uploads: through the relay flushing at each epoch's end, the leader's arrival times carry nothing
    const p3 = (m: string) => row('Prio3 upload-timing linkage', m);
    expect(a.rows.filter((x) => x.attack.startsWith('Prio3 upload-timing linkage'))).toHaveLength(4);
    for (const x of a.rows.filter((r) => r.attack.startsWith('Prio3 upload-timing linkage') && r.measure.startsWith('AUC')))
      expect(Math.abs(x.measured - 0.5)).toBeLessThan(0.06);
    expect(p3('hit').measured).toBeLessThanOrEqual(2 / 300);
    const memo = row('memo-loss averaging');
    expect(memo.measured).toBeLessThan(memo.baseline);
    // another seed gives other draws
    expect(linkageByTiming({ seed: 12, devices: 300, habit: 0, schedule: 'shipped' })).not.toEqual(
      linkageByTiming({ seed: 11, devices: 300, habit: 0, schedule: 'shipped' }),
    );
  }, 120_000);

  it('a relay that flushes at each epoch end brings habitual linkage to chance; an hourly flush does not hide the time of day', () => {
    const o = { seed: 11, devices: 600, habit: 0.02, schedule: 'shipped' as const };
    const direct = linkageByTiming(o);
    const daily = linkageByTiming({ ...o, relayFlushMs: 86_400_000 });
    const hourly = linkageByTiming({ ...o, relayFlushMs: 3_600_000 });
    expect(linkageByTiming({ ...o, relayFlushMs: 86_400_000 })).toEqual(daily);
    expect(direct.auc).toBeGreaterThan(0.56);
    expect(Math.abs(daily.auc - 0.5)).toBeLessThan(0.03);
    expect(daily.hitRate).toBeLessThanOrEqual(2 / 600);
    expect(hourly.auc).toBeGreaterThan(daily.auc + 0.03);
  });

  it('Prio3 uploads: the build time shifts only the arrival; habitual uploads sent directly link by time of day, through the daily relay they do not', () => {
    const o = { seed: 11, devices: 600, habit: 0.02, schedule: 'shipped' as const, buildMs: [300, 3000] as const };
    const direct = linkageByTiming(o);
    const relayed = linkageByTiming({ ...o, relayFlushMs: 86_400_000 });
    expect(linkageByTiming({ ...o, relayFlushMs: 86_400_000 })).toEqual(relayed);
    expect(direct.auc).toBeGreaterThan(0.56);
    expect(Math.abs(relayed.auc - 0.5)).toBeLessThan(0.03);
    expect(relayed.hitRate).toBeLessThanOrEqual(2 / 600);
    // seconds of build time change nothing the time-of-day score sees at this resolution
    expect(Math.abs(direct.auc - linkageByTiming({ ...o, buildMs: undefined }).auc)).toBeLessThan(0.01);
    expect(() => linkageByTiming({ ...o, buildMs: [5, 1] })).toThrow(/buildMs/);
  });

  it('poisoning rows: the Prio3 share needed against the ≥ 10 % target, forged reports refused, the same for a seed', async () => {
    const dir = writeMovieLensTiny();
    try {
      const run = async () => poisoningRows(await runPoisoning({ data: dir, kcore: 0, seed: 3, fakes: 4, forged: 3, epsilon: 1 }));
      const a = await run();
      expect(await run()).toEqual(a);
      expect(a[0]).toMatchObject({ target: 0.1, pass: '≥' });
      expect(a[0].measured).toBeGreaterThan(0.1);
      expect(a[1]).toMatchObject({ measured: 0, target: 0, pass: '≤' });
      // the honest cost: the rule lists no more items than the threshold alone
      expect(a[2].measured).toBeLessThanOrEqual(a[2].baseline);
      expect(formatDeviceAttacks({ seed: 3, rows: a })).toMatch(/\| poisoning: forged Prio3 reports .* \| 0 \|/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
