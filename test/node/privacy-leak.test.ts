/**
 * The privacy-leak measurement (src/bench/privacy-leak.ts): on a synthetic catalog with the
 * hashing embedder (fast, no model), and on the real MovieLens-100K when it is next to the
 * repository (or ATOMEM_ML100K points at it); skipped, visibly, otherwise. The ML-100K data is
 * read from its path only: nothing of it is written anywhere.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadMovieLens } from '../../packages/bench/src/datasets.js';
import { expectedRandomHit, formatPrivacyLeak, measurePrivacyLeak, toWire, type LeakFigures, type PrivacyLeakReport } from '../../packages/bench/src/privacy-leak.js';
import { twoGroupDataset } from '../fixtures/synthetic.js';

function binomial(n: number, k: number): number {
  let r = 1;
  for (let i = 0; i < k; i++) r = (r * (n - i)) / (i + 1);
  return r;
}

/** Exhaustive hit@k of a uniform k-subset of {0..N-1} against the own items {0..own-1}. */
function bruteForceHit(own: number, N: number, k: number): number {
  let hits = 0;
  let total = 0;
  const pick = (start: number, left: number, hit: boolean) => {
    if (left === 0) {
      total++;
      if (hit) hits++;
      return;
    }
    for (let i = start; i <= N - left; i++) pick(i + 1, left - 1, hit || i < own);
  };
  pick(0, k, false);
  return hits / total;
}

function expectFractions(f: LeakFigures): void {
  for (const x of [f.hit1, f.hit10, f.precision10]) {
    expect(x).toBeGreaterThanOrEqual(0);
    expect(x).toBeLessThanOrEqual(1);
  }
  expect(f.hit1).toBeLessThanOrEqual(f.hit10);
  expect(f.precision10).toBeLessThanOrEqual(f.hit10);
}

describe('expectedRandomHit', () => {
  it('matches the closed form 1 − C(N−n, k)/C(N, k) and exhaustive enumeration', () => {
    for (const [own, N, k] of [
      [1, 8, 3],
      [3, 10, 4],
      [5, 12, 5],
      [0, 9, 2],
      [7, 9, 3],
    ]) {
      const closed = 1 - binomial(N - own, k) / binomial(N, k);
      expect(expectedRandomHit(own, N, k)).toBeCloseTo(closed, 12);
      expect(expectedRandomHit(own, N, k)).toBeCloseTo(bruteForceHit(own, N, k), 12);
    }
    expect(expectedRandomHit(4, 1682, 1)).toBeCloseTo(4 / 1682, 12);
    expect(expectedRandomHit(9, 10, 2)).toBe(1);
    expect(() => expectedRandomHit(11, 10, 2)).toThrow(RangeError);
  });
});

describe('toWire', () => {
  it('quantizes like the wire (int8) and noise lowers the cosine to the clean vector', () => {
    const v = new Float32Array(256).map((_, i) => Math.sin(i + 1));
    let n = 0;
    for (const x of v) n += x * x;
    v.forEach((x, i) => (v[i] = x / Math.sqrt(n)));
    const cos = (a: Float32Array) => {
      let d = 0;
      let na = 0;
      for (let i = 0; i < a.length; i++) {
        d += a[i] * v[i];
        na += a[i] * a[i];
      }
      return d / Math.sqrt(na);
    };
    const q = toWire(v, 0);
    expect(q.every((x) => Number.isInteger(Math.round(x * 127)) && Math.abs(x * 127 - Math.round(x * 127)) < 1e-4)).toBe(true);
    expect(cos(q)).toBeGreaterThan(0.999);
    expect(cos(toWire(v, 0.5))).toBeLessThan(0.5);
  });
});

describe('measurePrivacyLeak on a synthetic catalog (hashing embedder)', () => {
  // 2 tastes × 120 items, 48 shoppers with 14 interactions each.
  const dataset = twoGroupDataset({ usersPerGroup: 24, itemsPerGroup: 120, len: 14 });
  let report: PrivacyLeakReport;

  it('measures hit@1/hit@10/precision@10 in [0,1]; noise 0 leaks more than sigma 0.5', async () => {
    report = await measurePrivacyLeak({ dataset, embedder: 'hashing', cacheDir: null, noise: [0, 0.5], seed: 7, utilityUsers: 12, randomTrials: 200 });
    expect(report.catalogItems).toBe(241);
    expect(report.users).toBe(48);
    expect(report.shared.profiles).toBeGreaterThan(40);
    expect(report.shared.memories).toBeGreaterThan(20);
    expect(report.shared.vectors).toBe(report.shared.memories + report.shared.profiles);
    for (const l of report.levels) {
      expectFractions(l.attack.all);
      expectFractions(l.attack.memory);
      expectFractions(l.attack.profile);
      expect(l.cosine).toBeGreaterThan(0);
      expect(l.cosine).toBeLessThanOrEqual(1 + 1e-6);
    }
    for (const b of Object.values(report.baselines)) expectFractions(b.all);
    const [clean, noisy] = report.levels;
    expect(clean.sigma).toBe(0);
    expect(clean.cosine).toBeGreaterThan(0.999);
    expect(noisy.cosine).toBeLessThan(clean.cosine);
    // The clean vector gives its items away; large noise pushes the attacker toward chance.
    expect(clean.attack.all.hit10).toBeGreaterThan(report.baselines.randomExpected.all.hit10 + 0.3);
    expect(noisy.attack.all.hit10).toBeLessThan(clean.attack.all.hit10);
    expect(noisy.attack.all.precision10).toBeLessThan(clean.attack.all.precision10);
    // Level `items`: at most maxSharedItems (10) ids per record; the owner is always in the anonymity set.
    for (const x of [report.itemLists.memory, report.itemLists.profile]) {
      expect(x.n).toBeGreaterThan(0);
      expect(x.meanLength).toBeGreaterThan(0);
      expect(x.meanLength).toBeLessThanOrEqual(10);
      expect(x.unique).toBeGreaterThanOrEqual(0);
      expect(x.below5).toBeGreaterThanOrEqual(x.unique);
      expect(x.below5).toBeLessThanOrEqual(1);
      expect(x.medianSet).toBeGreaterThanOrEqual(1);
    }
  });

  it('the drawn random guess agrees with its closed form', () => {
    const { randomExpected: e, randomMeasured: m } = report.baselines;
    // 200 draws per vector over > 60 vectors: the standard error is well below 0.01.
    expect(Math.abs(m.all.hit10 - e.all.hit10)).toBeLessThan(0.02);
    expect(Math.abs(m.all.hit1 - e.all.hit1)).toBeLessThan(0.01);
    expect(Math.abs(m.all.precision10 - e.all.precision10)).toBeLessThan(0.01);
    expect(e.all.precision10).toBeCloseTo(e.all.hit1, 12); // both n / N per vector
  });

  it('measures NDCG@10 per noise level and formats a table', () => {
    expect('users' in report.utility && report.utility.users).toBe(12);
    for (const l of report.levels) {
      expect(l.ndcg10).toBeGreaterThanOrEqual(0);
      expect(l.ndcg10).toBeLessThanOrEqual(1);
    }
    const md = formatPrivacyLeak(report);
    expect(md).toContain('| nearest catalog items | 0.5 |');
    expect(md).toContain('random guess, closed form');
    // aggregates only: no item titles or ids of the catalog in the output
    expect(md).not.toMatch(/Smooth Jazz|Metal Thunder|\bA\d+\b|\bB\d+\b/);
  });
});

const candidates = [process.env.ATOMEM_ML100K, resolve(import.meta.dirname, '../../../shared/data/ml-100k')];
const dir = candidates.find((d): d is string => !!d && existsSync(resolve(d, 'u.data')));

describe.skipIf(!dir)(`privacy leak on ML-100K, 100 users ${dir ? '' : '(SKIPPED: set ATOMEM_ML100K to the ml-100k folder)'}`, () => {
  it('prints hit@1/hit@10/precision@10 of shared vectors at sigma 0, 0.02, 0.05, 0.1 and the baselines', async () => {
    const r = await measurePrivacyLeak({ dataset: loadMovieLens(dir!), users: 100 });
    console.log(formatPrivacyLeak(r));
    expect(r.users).toBe(100);
    expect(r.shared.vectors).toBeGreaterThan(100);
    for (const l of r.levels) expectFractions(l.attack.all);
    // Unnoised vectors reveal far more than chance or popularity (measured: hit@10 ≈ 1).
    expect(r.levels[0].attack.all.hit10).toBeGreaterThan(r.baselines.popularity.all.hit10);
    expect(r.levels[0].attack.all.hit10).toBeGreaterThan(r.baselines.randomExpected.all.hit10);
    expect(Math.abs(r.baselines.randomMeasured.all.hit10 - r.baselines.randomExpected.all.hit10)).toBeLessThan(0.02);
  }, 600_000);
});
