import { describe, expect, it } from 'vitest';
import { ItemNumbers, RankedListsBuilder, rankedListsToMap } from '../src/shop/ranked-lists.js';

describe('ranked lists from an engine', () => {
  it('places rows that arrive in any order at their rank, over ids shared by the lists', () => {
    const numbers = new ItemNumbers();
    const a = new RankedListsBuilder(numbers);
    const b = new RankedListsBuilder(numbers);
    for (let i = 0; i < 3000; i++) a.add(`x${i % 7}`, `y${i}`, Math.floor(i / 7) + 1, 1 / (i + 1), i);
    b.add('z', 'x3', 2, 0.25, 1);
    b.add('z', 'x1', 1, 0.75, 3);
    const la = a.build();
    const lb = b.build();
    expect(la.ids).toBe(lb.ids);
    expect(la.offsets.length).toBe(numbers.ids.length + 1);
    const m = rankedListsToMap(la);
    expect(m.size).toBe(7);
    for (const [x, l] of m) {
      const k = Number(x.slice(1));
      expect(l.map((e) => e.item)).toEqual(Array.from({ length: l.length }, (_, r) => `y${r * 7 + k}`));
      for (let r = 1; r < l.length; r++) expect(l[r].value).toBeLessThan(l[r - 1].value);
    }
    expect(rankedListsToMap(lb).get('z')).toEqual([
      { item: 'x1', value: 0.75, count: 3 },
      { item: 'x3', value: 0.25, count: 1 },
    ]);
    expect(rankedListsToMap(lb).has('x1')).toBe(false);
  });

  it('refuses ranks that are not 1..length once each', () => {
    const gap = new RankedListsBuilder(new ItemNumbers());
    gap.add('a', 'b', 1, 1, 1);
    gap.add('a', 'c', 3, 1, 1);
    expect(() => gap.build()).toThrow(/rank 3 out of place/);
    const twice = new RankedListsBuilder(new ItemNumbers());
    twice.add('a', 'b', 1, 1, 1);
    twice.add('a', 'c', 1, 1, 1);
    expect(() => twice.build()).toThrow(/rank 1 out of place/);
  });
});
