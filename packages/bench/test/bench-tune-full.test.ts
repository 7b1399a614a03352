import { describe, expect, it } from 'vitest';
import { fitWeights } from 'atomem/shop';
import { fitCaseNdcg, halvesByUser, liveMoment, liveWeightsCase } from '../src/tune-weights.js';

describe('tune-weights --protocol: scoring fitted weights on whole-catalog validation cases', () => {
  it('ranks the positive pessimistically (ties count against it) among the candidates not excluded', () => {
    const a = Float32Array.from([5, 4, 3, 2, 1]);
    // positive is item 2: items 0 and 1 score above it → rank 3
    expect(fitCaseNdcg([{ signals: { a }, positive: 2 }], { a: 1 })).toBeCloseTo(1 / Math.log2(4), 12);
    // the shopper's own items 0 and 1 are excluded → rank 1
    expect(fitCaseNdcg([{ signals: { a }, positive: 2, exclude: Uint8Array.from([1, 1, 0, 0, 0]) }], { a: 1 })).toBe(1);
    // a tie with a competitor counts against the positive: rank 2
    const tied = Float32Array.from([3, 3, 1]);
    expect(fitCaseNdcg([{ signals: { a: tied }, positive: 1 }], { a: 1 })).toBeCloseTo(1 / Math.log2(3), 12);
    // a weight on a signal the cases do not carry changes nothing; rank > 10 scores 0
    const long = Float32Array.from({ length: 30 }, (_, i) => 30 - i);
    expect(fitCaseNdcg([{ signals: { a: long }, positive: 15 }], { a: 1, missing: 5 })).toBe(0);
  });

  it('weights fitted on cases where one signal finds the positive beat the weights that ignore it', () => {
    const cases = Array.from({ length: 30 }, (_, c) => {
      const m = 50;
      const good = Float32Array.from({ length: m }, (_, i) => (i === c % m ? 3 : Math.sin(c * 13 + i)));
      const noise = Float32Array.from({ length: m }, (_, i) => Math.cos(c * 7 + i * 3));
      return { signals: { good, noise }, positive: c % m };
    });
    const w = fitWeights(cases, ['good', 'noise']);
    expect(fitCaseNdcg(cases, w)).toBeGreaterThan(fitCaseNdcg(cases, { good: 0, noise: 1 }));
    expect(fitCaseNdcg(cases, w)).toBeGreaterThan(0.9);
  });

  it("a case is at a live moment from the log's last event on", () => {
    const DAY = 86_400_000;
    const histories = new Map([
      ['a', [{ at: 0 }, { at: 20 * DAY }]],
      ['b', [{ at: 30 * DAY }]],
    ]);
    expect(liveMoment(30 * DAY, histories)).toBe(true);
    expect(liveMoment(31 * DAY, histories)).toBe(true);
    expect(liveMoment(30 * DAY - 1, histories)).toBe(false);
    expect(liveMoment(0, new Map())).toBe(true);
  });

  it('the 2-fold split is by user: every case of a user (at several validation origins) falls in one half', () => {
    // cases of four users from several origins, in no particular order
    const users = ['u2', 'u1', 'u3', 'u1', 'u10', 'u2', 'u3', 'u10'];
    const half = halvesByUser(users);
    const of = new Map<string, Set<number>>();
    users.forEach((u, i) => of.set(u, (of.get(u) ?? new Set()).add(half[i])));
    for (const h of of.values()) expect(h.size).toBe(1);
    expect([...half].filter((h) => h === 0).length).toBe(4);
    // one case per user in sorted order: the parity of the index
    expect([...halvesByUser(['1', '2', '3', '4'])]).toEqual([0, 1, 0, 1]);
  });

  it('a case is ranked with shopWeightsLive when live and returning (its last event at least sessionGapMinutes before the moment)', () => {
    const DAY = 86_400_000;
    const histories = new Map([['a', [{ at: 0 }, { at: 30 * DAY }]]]);
    expect(liveWeightsCase(31 * DAY, [{ at: 2 * DAY }], histories)).toBe(true);
    // acted 10 minutes before the moment: a session goes on, shopWeights rank it
    expect(liveWeightsCase(31 * DAY, [{ at: 31 * DAY - 10 * 60_000 }], histories)).toBe(false);
    // a replay inside the log is never live
    expect(liveWeightsCase(20 * DAY, [{ at: 2 * DAY }], histories)).toBe(false);
  });
});
