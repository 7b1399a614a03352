/**
 * `nearDuplicates` gives up on a pair early only when the Cauchy–Schwarz bound proves it cannot
 * reach the threshold: its answer equals comparing every full dot product.
 */
import { describe, expect, it } from 'vitest';
import { nearDuplicates, tailNorms } from '../src/core/diversify.js';
import { dot, normalize } from '../src/core/vector.js';
import { Rng } from '@atomem/bench/rng';

function unit(rng: Rng, dim: number, base?: Float32Array, noise = 1): Float32Array {
  return normalize(Float32Array.from({ length: dim }, (_, d) => (base ? base[d] : 0) + noise * (rng.next() - 0.5)));
}

describe('nearDuplicates', () => {
  it('equals the full comparison of every pair, at thresholds across the range and odd dimensions', () => {
    const rng = new Rng(3);
    for (const dim of [7, 64, 512, 301]) {
      const owned = Array.from({ length: 40 }, () => unit(rng, dim));
      // candidates near some owned items (at several distances), and random ones
      const cands = [...owned.slice(0, 20).map((o, i) => unit(rng, dim, o, 0.02 * (i + 1))), ...Array.from({ length: 20 }, () => unit(rng, dim))];
      for (const threshold of [-0.2, 0, 0.3, 0.75, 0.9, 0.99, 1]) {
        const expected = cands.map((c) => owned.flatMap((o, k) => (dot(c, o) >= threshold ? [k] : [])));
        const got = nearDuplicates(
          cands.map((v) => ({ vector: v, tails: tailNorms(v) })),
          owned.map((v) => ({ vector: v, tails: tailNorms(v) })),
          threshold,
        );
        expect(got).toEqual(expected);
      }
    }
  });

  it('a pair exactly at the threshold counts; mismatched dimensions throw', () => {
    const v = normalize(Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]));
    const s = dot(v, v);
    expect(nearDuplicates([{ vector: v, tails: tailNorms(v) }], [{ vector: v, tails: tailNorms(v) }], s)).toEqual([[0]]);
    const w = new Float32Array(4);
    expect(() => nearDuplicates([{ vector: v, tails: tailNorms(v) }], [{ vector: w, tails: tailNorms(w) }], 0.5)).toThrow(/dimension mismatch/);
  });

  it('tailNorms: the norm of what follows each checkpoint', () => {
    const v = Float32Array.from([3, 4, 0, 0, 0, 12, 0, 0]);
    const t = tailNorms(v);
    expect(t[0]).toBeCloseTo(13, 10);
    expect(t[t.length - 1]).toBe(0);
  });
});
