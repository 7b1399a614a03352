import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FlatVectorStore, type VectorSearch } from '../../packages/atomem/src/community/index.js';

function unit(v: number[]): Float32Array {
  const n = Math.hypot(...v) || 1;
  return Float32Array.from(v.map((x) => x / n));
}

function brute(entries: Map<string, Float32Array>, q: Float32Array, k: number, minSim: number, filter?: (id: string) => boolean) {
  const all = [...entries].map(([id, v]) => ({ id, sim: v.reduce((s, x, i) => s + x * q[i], 0) }));
  return all.filter((h) => h.sim >= minSim && (!filter || filter(h.id))).sort((a, b) => b.sim - a.sim).slice(0, k);
}

describe('FlatVectorStore', () => {
  it('adds, replaces, removes (swap-remove) and grows', () => {
    const s = new FlatVectorStore(3, 1);
    const asInterface: VectorSearch = s; // the flat store is a VectorSearch
    expect(asInterface.dim).toBe(3);
    s.add('a', unit([1, 0, 0]));
    s.add('b', unit([0, 1, 0]));
    s.add('c', unit([0, 0, 1]));
    expect(s.size).toBe(3);
    expect(s.remove('a')).toBe(true);
    expect(s.remove('a')).toBe(false);
    expect(s.size).toBe(2);
    // the last row ('c') moved into the hole and is still addressable
    expect([...s.vector('c')!]).toEqual([0, 0, 1]);
    expect([...s.vector('b')!]).toEqual([0, 1, 0]);
    s.add('b', unit([1, 0, 0])); // replace
    expect(s.size).toBe(2);
    expect([...s.vector('b')!]).toEqual([1, 0, 0]);
    expect(new Set(s.ids())).toEqual(new Set(['b', 'c']));
    expect(() => s.add('x', new Float32Array(2))).toThrow(RangeError);
  });

  it('search returns exact top-k ≥ minSim, best first, honouring the filter', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 0, max: 70 }),
        fc.integer({ min: 0, max: 6 }),
        fc.double({ min: -1, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 0, max: 20 }),
        fc.integer({ min: 1, max: 5 }),
        (dim, n, k, minSim, seed, removals, nq) => {
          let x = seed;
          const rnd = () => {
            x = (Math.imul(x, 1103515245) + 12345) >>> 0;
            return x / 2 ** 32 - 0.5;
          };
          const vec = () => unit(Array.from({ length: dim }, rnd));
          const s = new FlatVectorStore(dim, 2);
          const ref = new Map<string, Float32Array>();
          for (let i = 0; i < n; i++) {
            const v = vec();
            s.add(`m${i}`, v);
            ref.set(`m${i}`, v);
          }
          for (let i = 0; i < removals && ref.size > 0; i++) {
            const id = [...ref.keys()][Math.floor((rnd() + 0.5) * ref.size) % ref.size];
            s.remove(id);
            ref.delete(id);
          }
          const filter = (id: string) => id.length % 2 === 0 || id.endsWith('3');
          const qs = Array.from({ length: nq }, vec);
          const many = s.searchMany(qs, k, minSim, filter);
          qs.forEach((q, i) => {
            const want = brute(ref, q, k, minSim, filter);
            const got = s.search(q, k, minSim, filter);
            expect(got.map((h) => h.sim)).toEqual(many[i].map((h) => h.sim));
            expect(got.length).toBe(want.length);
            got.forEach((h, j) => {
              expect(h.sim).toBeCloseTo(want[j].sim, 5);
              expect(h.sim).toBeCloseTo(ref.get(h.id)!.reduce((a, v, t) => a + v * q[t], 0), 5);
            });
          });
        },
      ),
      { numRuns: 200 },
    );
  });

  // Speed is measured by `COMMUNITY_BENCH=1 … community-bench` (figures in BENCHMARKS.md), not asserted here.
  it('batched search over 10k × 512-d agrees with one search per query', () => {
    const dim = 512;
    const s = new FlatVectorStore(dim);
    let x = 1;
    const rnd = () => {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      return x / 2 ** 32 - 0.5;
    };
    for (let i = 0; i < 10_000; i++) s.add(`m${i}`, unit(Array.from({ length: dim }, rnd)));
    const qs = Array.from({ length: 10 }, () => unit(Array.from({ length: dim }, rnd)));
    const many = s.searchMany(qs, 3, -1);
    qs.forEach((q, i) => expect(many[i]).toEqual(s.search(q, 3, -1)));
    expect(many.every((hits) => hits.length === 3)).toBe(true);
  });
});
