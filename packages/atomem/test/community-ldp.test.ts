// Local DP of the v2 report (community/ldp.ts): the composed ε, unbiased estimates, memoized
// permanent randomization, fresh instantaneous randomization, and the release builder.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_LDP,
  ReportHistogram,
  composedChannel,
  composedEpsilon,
  estimateCounts,
  estimateStd,
  grr,
  ldpParams,
  makeReport,
  type PermanentMemo,
} from '../src/community/ldp.js';
import { buildRelease, decodePrototypes, matchMemory } from '../src/community/release.js';
import { olhBucket } from '../src/protocol/index-v2.js';
import { mulberry32 as rng } from '@atomem/bench/rng';

describe('v2 local DP', () => {
  it('the shipped defaults give ε ≤ 4 per report, δ = 0, and the composed channel is a distribution', () => {
    expect(DEFAULT_LDP.epsilon).toBeLessThanOrEqual(4);
    expect(DEFAULT_LDP.epsilon).toBeGreaterThan(3.5);
    expect(DEFAULT_LDP.delta).toBe(0);
    const { same, other } = composedChannel(DEFAULT_LDP.epsPermanent, DEFAULT_LDP.epsInstant, DEFAULT_LDP.g);
    expect(same + (DEFAULT_LDP.g - 1) * other).toBeCloseTo(1, 12);
    // composing two randomizations never costs more than either
    expect(composedEpsilon(4, 7, 51)).toBeLessThan(4);
    const { p, q } = grr(2, 10);
    expect(Math.log(p / q)).toBeCloseTo(2, 12);
    expect(() => ldpParams({ epsPermanent: 0, epsInstant: 1, ell: 1, cohorts: 1 })).toThrow(/epsPermanent/);
  });

  it('the empirical likelihood ratio of one report matches the stated ε', () => {
    const params = { ...DEFAULT_LDP, cohorts: 1, ell: 1 };
    const r = rng(7);
    const N = 200_000;
    let hitX = 0;
    let hitY = 0;
    const hx = olhBucket(0, 'x', params.g);
    let y = 'y';
    for (let i = 0; olhBucket(0, y, params.g) === hx; i++) y = `y${i}`;
    for (let i = 0; i < N; i++) {
      if (makeReport(['x'], params, {}, r).bucket === hx) hitX++;
      if (makeReport([y], params, {}, r).bucket === hx) hitY++;
    }
    expect(Math.log(hitX / hitY)).toBeGreaterThan(params.epsilon - 0.25);
    expect(Math.log(hitX / hitY)).toBeLessThan(params.epsilon + 0.25);
  });

  it("estimates are unbiased and a rare item's spread is what estimateStd says", () => {
    const params = DEFAULT_LDP;
    const domain = ['i0', 'i1', 'i30'];
    // 2,000 devices: item i0 in everyone's set, i1 in half, i2…i59 spread (~34 devices each)
    const sets = Array.from({ length: 2000 }, (_, d) => ['i0', ...(d % 2 ? ['i1'] : []), `i${2 + (d % 58)}`]);
    const runs = 40;
    const draws = new Map<string, number[]>(domain.map((v) => [v, []]));
    for (let k = 0; k < runs; k++) {
      const r = rng(100 + k);
      const h = new ReportHistogram(params);
      for (const s of sets) h.add(makeReport(s, params, {}, r));
      for (const [v, x] of estimateCounts(h, domain, params)) draws.get(v)!.push(x);
    }
    const truth: Record<string, number> = { i0: 2000, i1: 1000, i30: 2000 / 58 };
    for (const v of domain) {
      const xs = draws.get(v)!;
      const m = xs.reduce((a, b) => a + b, 0) / runs;
      const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / (runs - 1));
      expect(Math.abs(m - truth[v])).toBeLessThan((4 * sd) / Math.sqrt(runs));
      if (v === 'i30') {
        expect(sd).toBeGreaterThan(0.7 * estimateStd(2000, params));
        expect(sd).toBeLessThan(1.3 * estimateStd(2000, params));
      }
    }
  });

  it('the permanent randomization is memoized per item; the instantaneous one is fresh', () => {
    const memo: PermanentMemo = {};
    const r = rng(3);
    const params = { ...DEFAULT_LDP, ell: 1 };
    const reports = Array.from({ length: 200 }, () => makeReport(['film-1'], params, memo, r));
    expect(Object.keys(memo)).toEqual(['film-1']);
    // one cohort for the item, always
    expect(new Set(reports.map((x) => x.cohort)).size).toBe(1);
    expect(reports[0].cohort).toBe(memo['film-1'].cohort);
    // the bucket usually equals the memoized one, but not always: reports are not byte-identical
    const same = reports.filter((x) => x.bucket === memo['film-1'].bucket).length;
    expect(same).toBeGreaterThan(150);
    expect(same).toBeLessThan(200);
    // a padding slot reports uniform noise and memoizes nothing
    const m2: PermanentMemo = {};
    const cohorts = new Set(Array.from({ length: 50 }, () => makeReport([], DEFAULT_LDP, m2, r).cohort));
    expect(Object.keys(m2)).toEqual([]);
    expect(cohorts.size).toBeGreaterThan(40);
  });

  it('the release holds aggregates only, thresholds communities, and matching is local', () => {
    const params = DEFAULT_LDP;
    const ids = ['a', 'b', 'c', 'd'];
    const vectors = [
      new Float32Array([1, 0]),
      new Float32Array([0.9, Math.sqrt(1 - 0.81)]),
      new Float32Array([0, 1]),
      new Float32Array([-0.1, Math.sqrt(0.99)]),
    ];
    const space = { embedderId: 'e', ids, vectors };
    const hist = new ReportHistogram(params);
    const r = rng(5);
    for (let d = 0; d < 3000; d++) hist.add(makeReport(d % 3 ? ['a', 'b'] : ['c'], params, {}, r));
    const release = buildRelease({
      epoch: 9,
      epochMs: 1000,
      space,
      communities: {
        communities: [
          { id: 'k0', items: ['a', 'b'] },
          { id: 'k1', items: ['c', 'd'] },
        ],
      },
      hist,
      ldp: params,
      minContributors: 250,
    });
    expect(Object.keys(release).sort()).toEqual([
      'communities',
      'dim',
      'embedderId',
      'epoch',
      'epochMs',
      'ldp',
      'minContributors',
      'popularity',
      'reports',
      'v',
    ]);
    expect(release.reports).toBe(3000);
    // lower bounds of distinct holders: Σ estimates / ℓ ≈ 4000 / 10 for k0, 1000 / 10 for k1: only k0 passes 250
    expect(release.communities.map((c) => c.id)).toEqual(['k0']);
    expect(Object.keys(release.communities[0]).sort()).toEqual(['contributors', 'counts', 'id', 'items', 'prototype']);
    const protos = decodePrototypes(release);
    expect(matchMemory(new Float32Array([1, 0]), protos, 2, 0.5).map((m) => m.community.id)).toEqual(['k0']);
    expect(matchMemory(new Float32Array([0, 1]), protos, 2, 0.5)).toEqual([]);
  });
});
