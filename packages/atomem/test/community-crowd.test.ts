// The verifiable release as a ranking signal (community/crowd.ts) and what a Prio3 report counts
// (sync/device-report.ts itemsSince): ln(1 + count), 0 for withheld items; malformed releases are
// refused; only the epoch's positive, processed, catalog events.
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { Prio3Release } from 'atomem/protocol';
import { crowdSignal, isCrowdRelease, type CrowdRelease } from '../src/community/crowd.js';
import { itemsSince } from '../src/sync/device-report.js';
import type { MemoryState } from '../src/core/types.js';

const release = (counts: Record<string, number>): CrowdRelease => ({
  v: 1,
  epoch: 3,
  epochMs: 1000,
  reports: 60,
  rejected: 0,
  mechanism: {
    vdaf: 'Prio3SumVec',
    bits: 1,
    ell: 10,
    noise: 'discrete-laplace',
    scale: 10,
    epsilon: 1,
    delta: 0,
    noiseStd: 20,
    threshold: 60,
    minShare: 0.1,
    minCount: 66,
  },
  counts,
  communities: [],
});

describe('crowd signal', () => {
  it('is ln(1 + released count), 0 for an item the release withholds', () => {
    const s = crowdSignal(release({ a: 60, b: 120 }), ['a', 'b', 'c']);
    expect(Array.from(s)).toEqual([Math.log1p(60), Math.log1p(120), 0]);
  });

  it("is the protocol's Prio3 release type (one wire type, protocol/prio3-release.ts)", () => {
    expectTypeOf<CrowdRelease>().toEqualTypeOf<Prio3Release>();
  });

  it('refuses what is not a release', () => {
    expect(isCrowdRelease(release({ a: 61 }))).toBe(true);
    expect(isCrowdRelease(undefined)).toBe(false);
    expect(isCrowdRelease({ ...release({}), v: 2 })).toBe(false);
    expect(isCrowdRelease({ ...release({}), counts: { a: 'many' } })).toBe(false);
    expect(isCrowdRelease({ ...release({}), epoch: 1.5 })).toBe(false);
  });
});

describe('itemsSince', () => {
  it('counts the distinct positive, processed catalog items at or after `since`, oldest first', () => {
    const ev = (seq: number, item: string, at: number, action: string, pending = false) => ({ seq, item, at, action, pending });
    const state = {
      events: [
        ev(1, 'old', 100, 'purchase'),
        ev(2, 'x', 1000, 'purchase'),
        ev(3, 'y', 1100, 'dislike'),
        ev(4, 'z', 1200, 'click', true),
        ev(5, 'gone', 1300, 'purchase'),
        ev(6, 'w', 1400, 'click'),
        ev(7, 'x', 1500, 'purchase'),
      ],
    } as unknown as MemoryState;
    expect(itemsSince(state, 1000, (id) => id !== 'gone')).toEqual(['w', 'x']);
    expect(itemsSince(state, 2000, () => true)).toEqual([]);
  });
});
