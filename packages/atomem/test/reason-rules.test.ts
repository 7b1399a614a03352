import { describe, expect, it } from 'vitest';
import type { Item } from '../src/core/types.js';
import { RulesReasoner, rankCategories } from '../src/reason/rules.js';
import type { ForwardStep, MemoryView } from '../src/reason/types.js';

const I: Record<string, Item> = {
  heat: { id: 'heat', title: 'Heat (1995)', categories: ['Crime', 'Thriller'] },
  fargo: { id: 'fargo', title: 'Fargo (1996)', categories: ['Crime', 'Thriller'] },
  casino: { id: 'casino', title: 'Casino (1995)', categories: ['Crime', 'Drama'] },
  godfather: { id: 'godfather', title: 'The Godfather (1972)', categories: ['Crime', 'Drama'] },
  alien: { id: 'alien', title: 'Alien (1979)', categories: ['Sci-Fi', 'Horror'] },
  matrix: { id: 'matrix', title: 'The Matrix (1999)', categories: ['Sci-Fi', 'Action'] },
  titanic: { id: 'titanic', title: 'Titanic (1997)', categories: ['Romance', 'Drama'] },
  emma: { id: 'emma', title: 'Emma (1996)', categories: ['Romance', 'Comedy'] },
  plain: { id: 'plain', title: 'Untitled Box' },
};

const r = new RulesReasoner();

function view(id: string, strength: number, items: Item[], content = `memory ${id}`, evidence = 2): MemoryView {
  return { id, content, category: items[0]?.categories?.[0] ?? 'General', strength, evidence, items };
}

function step(over: Partial<ForwardStep>): ForwardStep {
  return { weight: 1, actual: I.fargo, correct: true, supporting: [], misleading: [], tau: 0.6, ...over };
}

describe('rankCategories', () => {
  it('orders categories by count, ties by first appearance', () => {
    expect(rankCategories([I.heat, I.casino, I.alien])).toEqual(['Crime', 'Thriller', 'Drama', 'Sci-Fi', 'Horror']);
    expect(rankCategories([I.alien, I.heat])).toEqual(['Sci-Fi', 'Horror', 'Crime', 'Thriller']);
    expect(rankCategories([I.plain])).toEqual([]);
  });
});

describe('RulesReasoner.describeMemory', () => {
  it('writes "Enjoys crime thrillers such as …" with the majority category', async () => {
    const t = await r.describeMemory({ items: [I.heat, I.fargo], strength: 0.4 });
    expect(t).toEqual({ content: 'Enjoys crime thrillers such as Fargo (1996) and Heat (1995)', category: 'Crime' });
  });

  it('names at most 3 titles, most recent first, without duplicates', async () => {
    const t = await r.describeMemory({ items: [I.heat, I.fargo, I.casino, I.godfather, I.godfather], strength: 0.4 });
    expect(t.content).toBe('Enjoys crime dramas such as The Godfather (1972), Casino (1995) and Fargo (1996)'); // Drama: 3 of 5
    expect(t.content).not.toContain('Heat');
  });

  it('takes the category of the majority of items, not of the latest one', async () => {
    const t = await r.describeMemory({ items: [I.alien, I.matrix, I.heat], strength: 0.4 });
    expect(t.category).toBe('Sci-Fi');
    expect(t.content).toMatch(/^Enjoys sci-fi horror such as Heat \(1995\), The Matrix \(1999\) and Alien \(1979\)$/);
  });

  it.each([
    [0.8, 'Loves'],
    [0.6, 'Loves'],
    [0.3, 'Enjoys'],
    [0.1, 'Shows some interest in'],
    [0, 'Shows some interest in'],
    [-0.1, 'Is lukewarm about'],
    [-0.3, 'Avoids'],
    [-1, 'Avoids'],
  ])('strength %d reads "%s …"', async (strength, verb) => {
    const t = await r.describeMemory({ items: [I.titanic], strength });
    expect(t.content.startsWith(`${verb} romance dramas such as Titanic (1997)`)).toBe(true);
  });

  it('pluralises single categories readably', async () => {
    expect((await r.describeMemory({ items: [{ id: 'c', title: 'Airplane! (1980)', categories: ['Comedy'] }], strength: 0.4 })).content).toBe(
      'Enjoys comedies such as Airplane! (1980)',
    );
    expect((await r.describeMemory({ items: [{ id: 'a', title: 'Akira (1988)', categories: ['Animation'] }], strength: 0.4 })).content).toBe(
      'Enjoys animation such as Akira (1988)',
    );
  });

  it('falls back to "General" / "items" for uncategorised items', async () => {
    expect(await r.describeMemory({ items: [I.plain], strength: 0.4 })).toEqual({ content: 'Enjoys items such as Untitled Box', category: 'General' });
  });

  it('is deterministic', async () => {
    const a = await r.describeMemory({ items: [I.heat, I.alien, I.casino], strength: 0.5 });
    const b = await r.describeMemory({ items: [I.heat, I.alien, I.casino], strength: 0.5 });
    expect(a).toEqual(b);
  });
});

describe('RulesReasoner.reflect', () => {
  const crime = view('crime', 0.5, [I.heat], 'Enjoys crime thrillers such as Heat (1995)');
  const crimeNeg = view('crime-neg', -0.4, [I.casino], 'Avoids crime dramas such as Casino (1995)');
  const scifi = view('scifi', 0.5, [I.alien], 'Enjoys sci-fi horror such as Alien (1979)');

  it('consolidates into the best same-polarity memory at sim ≥ tau', async () => {
    const out = await r.reflect(
      step({
        supporting: [
          { memory: crime, similarity: 0.8 },
          { memory: scifi, similarity: 0.7 },
        ],
      }),
    );
    expect(out.decision).toBe('consolidate');
    expect(out.target).toBe('crime');
    expect(out.misled).toEqual([]);
    expect(out.insight).toBe('Fargo (1996) confirms "Enjoys crime thrillers such as Heat (1995)"');
  });

  it('forms a new memory when the best match is below tau', async () => {
    const out = await r.reflect(step({ supporting: [{ memory: crime, similarity: 0.59 }] }));
    expect(out).toEqual({ decision: 'form', misled: [], insight: 'Fargo (1996) shows an interest no memory explains yet' });
  });

  it('forms when there are no memories at all', async () => {
    expect((await r.reflect(step({}))).decision).toBe('form');
  });

  it('a like skips an opposite-polarity match and takes the next same-polarity one', async () => {
    const out = await r.reflect(
      step({
        supporting: [
          { memory: crimeNeg, similarity: 0.95 },
          { memory: crime, similarity: 0.7 },
        ],
      }),
    );
    expect(out.target).toBe('crime');
  });

  it('a dislike consolidates into a negative memory, never into a positive one', async () => {
    const dislike = step({
      weight: -1,
      actual: I.godfather,
      supporting: [
        { memory: crime, similarity: 0.95 },
        { memory: crimeNeg, similarity: 0.8 },
      ],
    });
    expect(await r.reflect(dislike)).toMatchObject({ decision: 'consolidate', target: 'crime-neg' });
    const onlyPositive = step({ weight: -1, actual: I.godfather, supporting: [{ memory: crime, similarity: 0.95 }] });
    expect((await r.reflect(onlyPositive)).decision).toBe('form');
  });

  it('says "refines" when the forward step was wrong', async () => {
    const out = await r.reflect(step({ correct: false, negative: I.alien, supporting: [{ memory: crime, similarity: 0.9 }] }));
    expect(out.insight).toMatch(/refines "Enjoys crime thrillers/);
  });

  it('lists memories that favoured the negative when the step was wrong', async () => {
    const out = await r.reflect(
      step({
        actual: I.fargo,
        negative: I.alien,
        correct: false,
        supporting: [{ memory: crime, similarity: 0.85 }],
        misleading: [{ memory: scifi, similarity: 0.9 }],
      }),
    );
    expect(out.misled).toEqual(['scifi']);
    expect(out.target).toBe('crime');
  });

  it('lists no misleading memory when the step was right', async () => {
    const out = await r.reflect(step({ correct: true, negative: I.alien, misleading: [{ memory: scifi, similarity: 0.9 }] }));
    expect(out.misled).toEqual([]);
  });

  it('does not blame a memory that also supports the actual item above tau', async () => {
    const out = await r.reflect(
      step({ correct: false, negative: I.casino, supporting: [{ memory: crime, similarity: 0.8 }], misleading: [{ memory: crime, similarity: 0.85 }] }),
    );
    expect(out.misled).toEqual([]);
  });
});

describe('RulesReasoner.mergeMemories', () => {
  it('describes the union with the evidence-weighted strength', async () => {
    const a = view('a', 0.8, [I.heat, I.fargo], 'x', 3);
    const b = view('b', 0.2, [I.casino], 'y', 1);
    // (0.8·3 + 0.2·1) / 4 = 0.65 → "Loves"
    expect(await r.mergeMemories(a, b)).toEqual({ content: 'Loves crime thrillers such as Casino (1995), Fargo (1996) and Heat (1995)', category: 'Crime' });
    // weighted the other way round → "Enjoys"/"Shows some interest"
    const t = await r.mergeMemories({ ...a, evidence: 1 }, { ...b, evidence: 3 });
    expect(t.content.startsWith('Enjoys')).toBe(true); // (0.8 + 0.6) / 4 = 0.35
  });

  it('handles zero evidence without NaN', async () => {
    const t = await r.mergeMemories(view('a', 0.5, [I.heat], 'x', 0), view('b', 0.5, [I.fargo], 'y', 0));
    expect(t.content).not.toMatch(/NaN|undefined/);
  });
});

describe('RulesReasoner.summarizePrototype', () => {
  it('names the size, the main categories and up to 3 titles', async () => {
    expect(await r.summarizePrototype({ items: [I.heat, I.fargo, I.casino, I.godfather], size: 7 })).toBe(
      "7 shoppers' interests in crime thrillers, e.g. The Godfather (1972), Casino (1995) and Fargo (1996)",
    );
  });
  it('still reads well with no items', async () => {
    expect(await r.summarizePrototype({ items: [], size: 3 })).toBe("3 shoppers' interests in items");
  });
});

describe('RulesReasoner.synthesizeProfile', () => {
  it('lists likes then dislikes, trailing periods removed', async () => {
    const out = await r.synthesizeProfile([
      view('a', 0.7, [I.heat], 'Loves crime thrillers such as Heat (1995).'),
      view('b', -0.5, [I.titanic], 'Avoids romance dramas such as Titanic (1997)'),
      view('c', 0.3, [I.alien], 'Enjoys sci-fi horror such as Alien (1979)'),
    ]);
    expect(out).toBe(
      'Main interests: Loves crime thrillers such as Heat (1995); Enjoys sci-fi horror such as Alien (1979). Tends to avoid: Avoids romance dramas such as Titanic (1997).',
    );
  });
  it('caps likes at 5 and dislikes at 2', async () => {
    const likes = Array.from({ length: 7 }, (_, i) => view(`l${i}`, 0.5, [I.heat], `like ${i}`));
    const dislikes = Array.from({ length: 4 }, (_, i) => view(`d${i}`, -0.5, [I.titanic], `dislike ${i}`));
    const out = await r.synthesizeProfile([...likes, ...dislikes]);
    expect(out).toContain('like 4');
    expect(out).not.toContain('like 5');
    expect(out).toContain('dislike 1');
    expect(out).not.toContain('dislike 2');
  });
  it('says so when nothing is known', async () => {
    expect(await r.synthesizeProfile([])).toBe('No interests known yet.');
  });
  it('is deterministic', async () => {
    const ms = [view('a', 0.7, [I.heat], 'A'), view('b', -0.5, [I.titanic], 'B')];
    expect(await r.synthesizeProfile(ms)).toBe(await r.synthesizeProfile(ms));
  });
});
