import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { PrototypeTracker, aggregateItems, laplace, noisyCounts, prototypeOf } from '../../packages/atomem/src/community/index.js';

describe('prototypes', () => {
  it('prototypeOf = normalised mean', () => {
    const p = prototypeOf([
      [1, 0, 0],
      [0, 1, 0],
      [0, 1, 0],
    ]);
    const n = Math.hypot(1, 2);
    expect(p[0]).toBeCloseTo(1 / n, 6);
    expect(p[1]).toBeCloseTo(2 / n, 6);
    expect(p[2]).toBe(0);
  });

  it('the tracker matches from-scratch values through add / remove / absorb / split', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            v: fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: 3, maxLength: 3 }),
            items: fc.option(fc.array(fc.constantFrom('a', 'b', 'c'), { maxLength: 3 })),
          }),
          { minLength: 2, maxLength: 20 },
        ),
        (members) => {
          const t = new PrototypeTracker(3);
          // the graph only ever feeds unit vectors
          const unit = (v: number[]) => (Math.hypot(...v) > 1e-3 ? v.map((x) => x / Math.hypot(...v)) : [1, 0, 0]);
          const ms = members.map((m) => ({ vector: unit(m.v), items: m.items === null ? undefined : [...new Set(m.items)] }));
          const half = Math.floor(ms.length / 2);
          ms.slice(0, half).forEach((m) => t.add('x', m));
          ms.slice(half).forEach((m) => t.add('y', m));
          t.absorb('x', 'y');
          expect(t.size('x')).toBe(ms.length);
          expect(t.size('y')).toBe(0);
          // split the last member off, remove the first
          t.split('x', 'z', [ms[ms.length - 1]]);
          t.remove('x', ms[0]);
          const rest = ms.slice(1, -1);
          const check = (id: string, group: typeof ms) => {
            if (group.length === 0) return expect(t.size(id)).toBe(0);
            // why: when members (nearly) cancel out the mean has no direction; running and
            // from-scratch sums then legitimately normalise rounding noise differently.
            const sum = [0, 1, 2].map((i) => group.reduce((a, m) => a + m.vector[i], 0));
            if (Math.hypot(...sum) > 1e-3) {
              const want = prototypeOf(group.map((m) => m.vector));
              const got = t.prototype(id)!;
              for (let i = 0; i < 3; i++) expect(got[i]).toBeCloseTo(want[i], 5);
            }
            const wantItems = aggregateItems(group.map((m) => m.items));
            expect(t.items(id) === undefined ? undefined : new Map(t.items(id))).toEqual(wantItems);
          };
          check('x', rest);
          check('z', [ms[ms.length - 1]]);
        },
      ),
    );
  });

  it('aggregateItems counts each member at most once per item, undefined when nobody uploaded', () => {
    expect(aggregateItems([['i1', 'i2'], ['i1'], ['i1', 'i1'], undefined])).toEqual(
      new Map([
        ['i1', 3],
        ['i2', 1],
      ]),
    );
    expect(aggregateItems([undefined, undefined])).toBeUndefined();
    expect(aggregateItems([[]])).toEqual(new Map());
  });
});

describe('item noise', () => {
  const counts = new Map([
    ['i1', 5],
    ['i2', 1],
    ['i3', 2],
    ['i4', 1],
  ]);

  it('is deterministic per (seed, key) and changes with either', () => {
    expect(noisyCounts(counts, 1, 42, 'c1@7')).toEqual(noisyCounts(counts, 1, 42, 'c1@7'));
    expect(noisyCounts(counts, 1, 43, 'c1@7')).not.toEqual(noisyCounts(counts, 1, 42, 'c1@7'));
    expect(noisyCounts(counts, 1, 42, 'c1@8')).not.toEqual(noisyCounts(counts, 1, 42, 'c1@7'));
    // insertion order does not matter
    const reversed = new Map([...counts].reverse());
    expect(noisyCounts(reversed, 1, 42, 'k')).toEqual(noisyCounts(counts, 1, 42, 'k'));
  });

  it('never yields counts ≤ 0, drops them instead', () => {
    fc.assert(
      fc.property(fc.integer(), fc.double({ min: 0, max: 10, noNaN: true }), fc.string(), (seed, scale, key) => {
        const out = noisyCounts(counts, scale, seed, key);
        for (const v of Object.values(out)) expect(v).toBeGreaterThan(0);
        for (const k of Object.keys(out)) expect(counts.has(k)).toBe(true);
      }),
    );
  });

  it('scale 0 returns exact counts', () => {
    expect(noisyCounts(counts, 0, 1, 'k')).toEqual({ i1: 5, i2: 1, i3: 2, i4: 1 });
  });

  it('is Laplace(0, b): mean ≈ 0, mean |x| ≈ b, symmetric', () => {
    const b = 2;
    const xs = Array.from({ length: 20_000 }, (_, i) => laplace(7, `k${i}`, b));
    const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
    const mad = xs.reduce((s, x) => s + Math.abs(x), 0) / xs.length;
    const pos = xs.filter((x) => x > 0).length / xs.length;
    expect(Math.abs(mean)).toBeLessThan(0.1);
    expect(mad).toBeGreaterThan(b * 0.95);
    expect(mad).toBeLessThan(b * 1.05);
    expect(pos).toBeGreaterThan(0.48);
    expect(pos).toBeLessThan(0.52);
    expect(xs.every(Number.isFinite)).toBe(true);
  });
});
