/**
 * Dot products kept across calls (`core/vector.ts` PairCache, DotCache, PairFrame): every number
 * read back equals summing the pair again, bit for bit, whatever was evicted or started over; the
 * cache stays within its bound.
 */
import { describe, expect, it } from 'vitest';
import { DotCache, PairCache, dot, rowDots } from '../src/core/vector.js';
import { Rng } from '@atomem/bench/rng';

const rng = new Rng(3);
const vec = (dim = 48) => Float32Array.from({ length: dim }, () => rng.next() - 0.5);

describe('DotCache', () => {
  it('dot is symmetric bit for bit and equals the plain index-order sum', () => {
    for (let t = 0; t < 50; t++) {
      const a = vec(37 + t);
      const b = vec(37 + t);
      let s = 0;
      for (let i = 0; i < a.length; i++) s += a[i] * b[i];
      expect(dot(a, b)).toBe(s);
      expect(dot(b, a)).toBe(s);
    }
  });

  it('rowDots (4 rows of a matrix at a time) equals dot of each row bit for bit', () => {
    for (const [rows, dim] of [
      [1, 5],
      [7, 48],
      [13, 512],
      [40, 33],
    ]) {
      const vs = Array.from({ length: rows }, () => vec(dim));
      const m = new Float32Array(rows * dim);
      vs.forEach((v, r) => m.set(v, r * dim));
      const v = vec(dim);
      const out = new Float64Array(rows);
      rowDots(m, rows, dim, v, out);
      expect([...out]).toEqual(vs.map((x) => dot(x, v)));
      for (let r = 0; r < rows; r++) expect(Object.is(out[r], dot(vs[r], v))).toBe(true);
    }
    expect(() => rowDots(new Float32Array(8), 2, 4, vec(5), new Float64Array(2))).toThrow(RangeError);
  });

  it('row().get and frame().row().at read back the exact dot products, across evictions and restarts', () => {
    const cards = Array.from({ length: 40 }, () => vec());
    const others = Array.from({ length: 30 }, () => vec());
    // small bounds: rows are evicted (64 cells each, 256 in all) and the columns start over
    const cache = new DotCache(256, 50);
    for (let round = 0; round < 5; round++) {
      const pick = others.slice(round * 5, round * 5 + 20);
      const frame = cache.frame(pick);
      for (const c of cards) {
        const row = frame.row(c);
        const r2 = cache.row(c);
        pick.forEach((o, j) => {
          expect(row.at(j)).toBe(dot(o, c));
          expect(r2.get(o)).toBe(dot(o, c));
        });
      }
      expect(cache.size).toBeLessThanOrEqual(256 + 64);
    }
  });

  it('a frame made before the cache started over still reads the right numbers', () => {
    const cache = new DotCache(1 << 12, 8);
    const a = Array.from({ length: 6 }, () => vec());
    const b = Array.from({ length: 6 }, () => vec());
    const card = vec();
    const fa = cache.frame(a);
    const fb = cache.frame(b); // 12 columns > 8: starts over
    expect(a.map((_, j) => fa.row(card).at(j))).toEqual(a.map((o) => dot(card, o)));
    expect(b.map((_, j) => fb.row(card).at(j))).toEqual(b.map((o) => dot(card, o)));
    // more others than columns: computed, not cached
    const many = Array.from({ length: 20 }, () => vec());
    const fm = cache.frame(many);
    expect(many.map((_, j) => fm.row(card).at(j))).toEqual(many.map((o) => dot(card, o)));
  });

  it('a PairCache computes each pair once', () => {
    let calls = 0;
    const cache = new PairCache<{ x: number }>((a, b) => {
      calls++;
      return a.x * 10 + b.x;
    });
    const keys = Array.from({ length: 5 }, (_, x) => ({ x }));
    for (let r = 0; r < 3; r++) for (const a of keys) for (const b of keys) expect(cache.row(a).get(b)).toBe(a.x * 10 + b.x);
    expect(calls).toBe(25);
    expect(() => new PairCache(() => 0, 10)).toThrow(RangeError);
  });
});
