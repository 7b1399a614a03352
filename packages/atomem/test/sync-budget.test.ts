// The device's sharing schedule (sync/schedule.ts) and lifetime budget (sync/budget.ts), pure:
// the token is for the next epoch and drawn independently of the report's moment; the ledger's
// rolling cap, one charge per epoch, and the subsampling formula.
import { describe, expect, it } from 'vitest';
import { planEpoch, randomMomentIn } from '../src/sync/schedule.js';
import { DAY_MS, DEFAULT_BUDGET, nextAllowed, privacyBudget, refusal, spentEpsilon, subsampledEpsilon, type LedgerEntry } from '../src/sync/budget.js';
import { DEFAULT_LDP } from '../src/community/ldp.js';
import { mulberry32 } from '@atomem/bench/rng';

const EPOCH = DAY_MS;

describe('epoch schedule', () => {
  it("fetches the next epoch's token and reports this epoch only with a token held", () => {
    const r = mulberry32(1);
    const now = 10 * EPOCH + 1000;
    expect(planEpoch({ now, epochMs: EPOCH, held: [], random: r })).toEqual({ fetchToken: { epoch: 11, delay: expect.any(Number) } });
    const both = planEpoch({ now, epochMs: EPOCH, held: [10], random: r });
    expect(both.fetchToken?.epoch).toBe(11);
    expect(both.report?.epoch).toBe(10);
    expect(planEpoch({ now, epochMs: EPOCH, held: [10, 11], random: r })).toEqual({ report: { epoch: 10, delay: expect.any(Number) } });
    for (const p of [both.fetchToken!, both.report!]) expect(now + p.delay).toBeLessThan(11 * EPOCH);
    expect(planEpoch({ now, epochMs: EPOCH, held: [10], random: r, fixedDelay: 7 })).toEqual({
      fetchToken: { epoch: 11, delay: 7 },
      report: { epoch: 10, delay: 7 },
    });
  });

  it('the issuance moment says nothing about the report moment: correlation ≈ 0 over 20 000 devices, uniform over the epoch', () => {
    const r = mulberry32(7);
    const issued: number[] = [];
    const reported: number[] = [];
    for (let d = 0; d < 20_000; d++) {
      // the device's first visit in epoch 0 and in epoch 1, independent
      const v0 = r() * 0.5 * EPOCH;
      const v1 = EPOCH + r() * 0.5 * EPOCH;
      const p0 = planEpoch({ now: v0, epochMs: EPOCH, held: [], random: r });
      const p1 = planEpoch({ now: v1, epochMs: EPOCH, held: [1], random: r });
      issued.push((v0 + p0.fetchToken!.delay) / EPOCH);
      reported.push((v1 + p1.report!.delay - EPOCH) / EPOCH);
    }
    const mean = (x: number[]) => x.reduce((s, v) => s + v, 0) / x.length;
    const mi = mean(issued),
      mr = mean(reported);
    let c = 0,
      vi = 0,
      vr = 0;
    for (let i = 0; i < issued.length; i++) {
      c += (issued[i] - mi) * (reported[i] - mr);
      vi += (issued[i] - mi) ** 2;
      vr += (reported[i] - mr) ** 2;
    }
    expect(Math.abs(c / Math.sqrt(vi * vr))).toBeLessThan(0.03);
    expect(Math.max(...issued)).toBeLessThan(1);
    expect(Math.max(...reported)).toBeLessThan(1);
  });

  it('randomMomentIn stays inside the epoch minus its margin', () => {
    expect(randomMomentIn(0, 0, 1000, () => 0.999999)).toBeLessThan(950);
    expect(randomMomentIn(990, 0, 1000, () => 0.5)).toBe(0);
  });
});

describe('lifetime budget', () => {
  it('subsampling charges ln(1 + q(e^ε − 1)), ε at q = 1', () => {
    expect(subsampledEpsilon(DEFAULT_LDP.epsilon, 1)).toBe(DEFAULT_LDP.epsilon);
    expect(subsampledEpsilon(1, 0.1)).toBeCloseTo(Math.log(1 + 0.1 * (Math.E - 1)), 12);
    expect(subsampledEpsilon(0.5, 0.1)).toBeCloseTo(0.0629, 3);
    expect(() => subsampledEpsilon(1, 0)).toThrow(RangeError);
    expect(() => privacyBudget({ q: 2 })).toThrow(/budget\.q/);
    expect(() => privacyBudget({ cap: -1 })).toThrow(/budget\.cap/);
    expect(DEFAULT_BUDGET).toMatchObject({ cap: 10, windowMs: 365 * DAY_MS, q: 1 });
  });

  it('at the shipped ε a year of daily epochs charges 2 reports, then stops; the window rolls; one charge per epoch', () => {
    const eps = DEFAULT_LDP.epsilon;
    const entries: LedgerEntry[] = [];
    const t0 = 1_700_000_000_000;
    for (let day = 0; day < 730; day++) {
      const now = t0 + day * DAY_MS;
      const epoch = Math.floor(now / DAY_MS);
      if (refusal(entries, epoch, eps, now, DEFAULT_BUDGET) === undefined) entries.push({ at: now, epoch, epsilon: eps, q: 1, sent: true });
      expect(spentEpsilon(entries, now, DEFAULT_BUDGET.windowMs)).toBeLessThanOrEqual(10);
    }
    // days 0, 1, then again once day 0 has left the window (day 365), and day 366
    expect(entries.map((e) => (e.at - t0) / DAY_MS)).toEqual([0, 1, 365, 366]);
    const e = entries[0];
    expect(refusal([e], e.epoch, eps, e.at, DEFAULT_BUDGET)).toBe('already_charged');
    expect(nextAllowed(entries.slice(0, 2), eps, t0 + 2 * DAY_MS, DEFAULT_BUDGET)).toBe(t0 + 365 * DAY_MS);
    expect(nextAllowed([], 11, t0, DEFAULT_BUDGET)).toBe(Infinity);
  });
});
