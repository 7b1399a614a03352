/**
 * bench:sharing's release (sharing-scenario.ts scenarioRelease): each device counts its distinct
 * items of the epoch once (at most the last ℓ), the aggregators' noise repeats for a seed, the
 * release rule is atomem-index's (threshold + minimum share of the reports), and ε = ∞ releases
 * the exact counts.
 */
import { describe, expect, it } from 'vitest';
import { prio3Threshold } from 'atomem-index';
import { scenarioRelease } from '../src/sharing-scenario.js';

const items = Array.from({ length: 40 }, (_, i) => `i${i}`);
// device d interacted with i0 (twice), i1 and i(2 + d) inside the epoch [100, 200), and with i39 before it
const histories = new Map(
  Array.from({ length: 30 }, (_, d) => [
    `u${d}`,
    [
      { item: 'i39', at: 50 },
      { item: 'i0', at: 100 },
      { item: 'i1', at: 120 },
      { item: 'i0', at: 150 },
      { item: `i${2 + d}`, at: 199 },
      { item: 'i38', at: 200 },
    ],
  ]),
);

describe('bench:sharing release', () => {
  it('exact counts: every device counts its distinct epoch items once, at most ℓ', () => {
    const all = scenarioRelease(histories, items, { from: 100, to: 200, epsilon: Infinity, ell: 3, minShare: 0, seed: 1, epochMs: 100 });
    expect(all.release.counts.i0).toBe(30);
    expect(all.release.counts.i1).toBe(30);
    expect(all.release.counts.i39).toBeUndefined();
    expect(all.release.counts.i38).toBeUndefined();
    expect(all).toMatchObject({ activeDevices: 30, maxTrueCount: 30 });
    expect(all.release.reports).toBe(30);
    // ℓ = 1: only the last distinct item of each device (i(2 + d), then i0 before it)
    const last = scenarioRelease(histories, items, { from: 100, to: 200, epsilon: Infinity, ell: 1, minShare: 0, seed: 1, epochMs: 100 });
    expect(last.release.counts.i0).toBeUndefined();
    expect(Object.keys(last.release.counts)).toHaveLength(30);
    expect(last.maxTrueCount).toBe(1);
    // the service's default rule: a count needs 1 + ⌈0.1 × 30⌉ = 4, so the single holders are withheld and i0, i1 (30 each) stay
    const rule = scenarioRelease(histories, items, { from: 100, to: 200, epsilon: Infinity, ell: 3, seed: 1, epochMs: 100 });
    expect(rule.release.mechanism).toMatchObject({ threshold: 1, minShare: 0.1, minCount: 4 });
    expect(Object.keys(rule.release.counts).sort()).toEqual(['i0', 'i1']);
  });

  it('noisy: repeats for a seed, differs across seeds, withholds below the service threshold', () => {
    const o = { from: 100, to: 200, epsilon: 1, ell: 3, seed: 7, epochMs: 100 };
    const a = scenarioRelease(histories, items, o);
    expect(scenarioRelease(histories, items, o)).toEqual(a);
    expect(scenarioRelease(histories, items, { ...o, seed: 8 }).release.counts).not.toEqual(a.release.counts);
    expect(a.release.mechanism.threshold).toBe(prio3Threshold(3, items.length));
    for (const c of Object.values(a.release.counts)) expect(c).toBeGreaterThanOrEqual(a.release.mechanism.minCount);
    expect(a.release.mechanism.minCount).toBe(a.release.mechanism.threshold + 3);
  });
});
