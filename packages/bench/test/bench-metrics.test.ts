import { describe, expect, it } from 'vitest';
import {
  bootstrapCI,
  caseMetrics,
  categoryCoverage,
  categoryEntropy,
  fidelity,
  hitAt,
  ild,
  mean,
  meanMetrics,
  ndcgAt,
  rankOf,
  reciprocalRank,
} from '../src/metrics.js';
import { Rng } from '../src/rng.js';

describe('bench metrics: ranking', () => {
  it('NDCG@K of one relevant item at rank 1, 3, 11', () => {
    expect(ndcgAt(1, 10)).toBe(1);
    expect(ndcgAt(3, 10)).toBeCloseTo(0.5, 12); // 1 / log2(4)
    expect(ndcgAt(3, 5)).toBeCloseTo(0.5, 12);
    expect(ndcgAt(3, 1)).toBe(0);
    expect(ndcgAt(2, 10)).toBeCloseTo(1 / Math.log2(3), 12);
    expect(ndcgAt(11, 10)).toBe(0);
    expect(ndcgAt(10, 10)).toBeCloseTo(1 / Math.log2(11), 12);
  });

  it('HR@K, MRR and rankOf', () => {
    expect(hitAt(1, 1)).toBe(1);
    expect(hitAt(2, 1)).toBe(0);
    expect(hitAt(5, 5)).toBe(1);
    expect(reciprocalRank(4)).toBe(0.25);
    expect(rankOf(['a', 'b', 'c'], 'c')).toBe(3);
    expect(() => rankOf(['a'], 'z')).toThrow(/not in the ranking/);
    const m = caseMetrics(3);
    expect(m).toMatchObject({ ndcg1: 0, hr1: 0, hr5: 1, hr10: 1, mrr: 1 / 3 });
    expect(m.ndcg5).toBeCloseTo(0.5, 12);
  });

  it('means per user: ranks 1, 3, 11', () => {
    const m = meanMetrics([1, 3, 11]);
    expect(m.ndcg10).toBeCloseTo((1 + 0.5 + 0) / 3, 12);
    expect(m.ndcg1).toBeCloseTo(1 / 3, 12);
    expect(m.hr1).toBeCloseTo(1 / 3, 12);
    expect(m.mrr).toBeCloseTo((1 + 1 / 3 + 1 / 11) / 3, 12);
    expect(Number.isNaN(mean([]))).toBe(true);
  });

  it('random ranking of 10 gives NDCG@10 ≈ 0.454 and NDCG@1 = 0.1 in expectation', () => {
    const exact = meanMetrics([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(exact.ndcg10).toBeCloseTo(0.4544, 4);
    expect(exact.ndcg1).toBeCloseTo(0.1, 12);
  });
});

describe('bench metrics: bootstrap interval', () => {
  const rng = new Rng(1);
  const values = Array.from({ length: 300 }, () => (rng.next() < 0.4 ? 1 : rng.next()));

  it('contains the mean and is deterministic for a seed', () => {
    const m = mean(values);
    const a = bootstrapCI(values, { seed: 2026 });
    const b = bootstrapCI(values, { seed: 2026 });
    expect(a).toEqual(b);
    expect(a[0]).toBeLessThan(m);
    expect(a[1]).toBeGreaterThan(m);
    // roughly ±1.96 standard errors
    const sd = Math.sqrt(mean(values.map((v) => (v - m) ** 2)));
    const half = (a[1] - a[0]) / 2;
    expect(half).toBeGreaterThan(1.5 * (sd / Math.sqrt(values.length)));
    expect(half).toBeLessThan(2.5 * (sd / Math.sqrt(values.length)));
    expect(bootstrapCI(values, { seed: 7 })).not.toEqual(a);
  });

  it('is a point for constant values and NaN for no values', () => {
    expect(bootstrapCI([0.5, 0.5, 0.5], { seed: 1 })).toEqual([0.5, 0.5]);
    expect(bootstrapCI([], { seed: 1 }).every(Number.isNaN)).toBe(true);
  });
});

describe('bench metrics: diversity of a top-5 list', () => {
  it('ILD: mean pairwise L2 distance', () => {
    // three corners of a unit right triangle: distances 1, 1, √2
    expect(
      ild([
        [0, 0],
        [1, 0],
        [0, 1],
      ]),
    ).toBeCloseTo((2 + Math.SQRT2) / 3, 12);
    expect(
      ild([
        [1, 2, 3],
        [1, 2, 3],
      ]),
    ).toBe(0);
    expect(ild([[1, 2]])).toBe(0);
    expect(ild([Float32Array.of(0, 3), Float32Array.of(4, 0)])).toBeCloseTo(5, 6);
    expect(() => ild([[1], [1, 2]])).toThrow(/different lengths/);
  });

  it('category entropy (bits) and coverage (distinct / 5)', () => {
    const one = [['Drama'], ['Drama'], ['Drama'], ['Drama'], ['Drama']];
    expect(categoryEntropy(one)).toBe(0);
    expect(categoryCoverage(one)).toBeCloseTo(0.2, 12);
    const four = [['A'], ['B'], ['C'], ['D'], undefined];
    expect(categoryEntropy(four)).toBeCloseTo(2, 12);
    expect(categoryCoverage(four)).toBeCloseTo(0.8, 12);
    // pairs (item, category): A, A, B, A → p = (3/4, 1/4); a repeated category in one item counts once
    const mixed = [['A', 'A'], ['A', 'B'], ['A'], []];
    expect(categoryEntropy(mixed)).toBeCloseTo(-(0.75 * Math.log2(0.75) + 0.25 * Math.log2(0.25)), 12);
    expect(categoryCoverage(mixed)).toBeCloseTo(0.4, 12);
    expect(categoryEntropy([undefined, []])).toBe(0);
  });
});

describe('bench metrics: simulation fidelity', () => {
  it('precision, recall, F1 from yes/no answers', () => {
    const truth = [true, true, false, false, false, true];
    const answers = [true, false, true, false, false, true];
    const f = fidelity(truth, answers);
    expect(f.precision).toBeCloseTo(2 / 3, 12);
    expect(f.recall).toBeCloseTo(2 / 3, 12);
    expect(f.f1).toBeCloseTo(2 / 3, 12);
    expect(f.accuracy).toBeCloseTo(4 / 6, 12);
    expect(f.n).toBe(6);
    expect(fidelity([true, false], [false, false])).toMatchObject({ precision: 0, recall: 0, f1: 0 });
    expect(fidelity([true, true, false, false], [true, true, true, true])).toMatchObject({ precision: 0.5, recall: 1 });
    expect(() => fidelity([true], [])).toThrow();
  });
});

describe('bench rng', () => {
  it('is deterministic, derives independent streams, and samples without replacement', () => {
    const a = Rng.derive(2026, 'x', 'u1');
    const b = Rng.derive(2026, 'x', 'u1');
    const seqA = Array.from({ length: 5 }, () => a.nextUint32());
    expect(Array.from({ length: 5 }, () => b.nextUint32())).toEqual(seqA);
    const c = Rng.derive(2026, 'x', 'u2');
    expect(Array.from({ length: 5 }, () => c.nextUint32())).not.toEqual(seqA);
    const r = new Rng(3);
    for (let i = 0; i < 1000; i++) {
      const k = r.int(7);
      expect(k >= 0 && k < 7 && Number.isInteger(k)).toBe(true);
    }
    const s = new Rng(4).sampleWithoutReplacement([1, 2, 3, 4, 5, 6, 7, 8], 5);
    expect(new Set(s).size).toBe(5);
    expect(new Rng(4).sampleWithoutReplacement([1, 2, 3, 4, 5, 6, 7, 8], 6).slice(0, 5)).toEqual(s);
    expect(new Rng(5).shuffle([1, 2, 3, 4, 5]).sort()).toEqual([1, 2, 3, 4, 5]);
    expect(() => r.int(0)).toThrow(RangeError);
  });

  it('int(n) is roughly uniform', () => {
    const r = new Rng('uniform');
    const counts = new Array(10).fill(0);
    for (let i = 0; i < 20000; i++) counts[r.int(10)]++;
    const chi = counts.reduce((s, c) => s + (c - 2000) ** 2 / 2000, 0);
    expect(chi).toBeLessThan(27.88); // χ²(9), p = 0.001
  });
});
