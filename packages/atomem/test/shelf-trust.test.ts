import { describe, expect, it } from 'vitest';
import { MemoryAgent } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { demoteDuplicates } from '../src/core/diversify.js';
import { resolveConfig } from '../src/core/config.js';
import type { Item } from '../src/core/types.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import { renderWhy } from '../src/reason/wording.js';

describe('demoteDuplicates', () => {
  it('keeps at most `keep` near-duplicates of each owned item in the first row, the rest right after it', () => {
    // candidates 0, 1, 3 duplicate owned "t"; 2 and 4 nothing
    const dupes = [['t'], ['t'], [], ['t'], [], []];
    expect(demoteDuplicates(dupes, 1, 3)).toEqual([0, 2, 4, 1, 3, 5]);
    expect(demoteDuplicates(dupes, 2, 3)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(demoteDuplicates(dupes, 0, 3)).toEqual([2, 4, 5, 0, 1, 3]);
    expect(demoteDuplicates([[], []], 1, 3)).toEqual([0, 1]);
  });

  it('a candidate that duplicates two owned items counts for both', () => {
    expect(demoteDuplicates([['a', 'b'], ['b'], ['a'], []], 1, 2)).toEqual([0, 3, 1, 2]);
  });

  it('config: duplicateSimilarity in [0, 1] (0 = off), duplicateKeep an integer ≥ 0, duplicateActions actions', () => {
    expect(resolveConfig().duplicateActions).toEqual(['purchase']);
    expect(() => resolveConfig({ duplicateSimilarity: 2 })).toThrow(/duplicateSimilarity/);
    expect(() => resolveConfig({ duplicateKeep: 0.5 })).toThrow(/duplicateKeep/);
    expect(() => resolveConfig({ duplicateActions: ['buy' as never] })).toThrow(/duplicateActions/);
  });
});

// A small shop: five tents (the same kind of product), other outdoor gear, some kitchen items.
const TENT = 'tent for camping two person waterproof lightweight shelter';
const CATALOG: Item[] = [
  ...['Alpine', 'Ridge', 'Summit', 'Canyon', 'Trail'].map((a, i) => ({ id: `tent-${i}`, title: `${a} Tent`, categories: ['Outdoor'], description: TENT })),
  { id: 'stove', title: 'Camping Stove', categories: ['Outdoor'], description: 'stove for cooking at the campsite camping' },
  { id: 'headlamp', title: 'Headlamp', categories: ['Outdoor'], description: 'lamp for night hikes and camping' },
  { id: 'boots', title: 'Hiking Boots', categories: ['Outdoor'], description: 'boots for hiking trails and camping' },
  { id: 'bag', title: 'Sleeping Bag', categories: ['Outdoor'], description: 'sleeping bag for cold camping nights' },
  { id: 'pan', title: 'Frying Pan', categories: ['Kitchen'], description: 'pan for searing and cooking' },
  { id: 'knife', title: 'Chef Knife', categories: ['Kitchen'], description: 'knife for slicing and cooking' },
  { id: 'kettle', title: 'Tea Kettle', categories: ['Kitchen'], description: 'kettle for boiling water for tea' },
];
const T0 = Date.UTC(2025, 0, 1);

function agent(config: Parameters<typeof resolveConfig>[0] = {}) {
  return new MemoryAgent({
    items: new ItemVectors(createHashingEmbedder({ dim: 256 }), CATALOG),
    clock: () => T0 + 3_600_000,
    config: { tau: 0.3, diversityDepth: 4, ...config },
  });
}
const ids = CATALOG.map((i) => i.id);
const tents = (list: { id: string }[]) => list.filter((r) => r.id.startsWith('tent-')).length;

describe('recommend after a purchase: the item bought is left out, its near-duplicates leave the first row', () => {
  it('one tent bought: not offered again, at most one more tent among the first row', async () => {
    const a = agent();
    await a.observe({ item: 'tent-0', action: 'purchase', at: T0 });
    const raw = await a.recommend(ids, { diversify: false, exclude: [] });
    expect(tents(raw.slice(0, 4))).toBeGreaterThanOrEqual(3); // without the shelf rules: a row of tents
    const shelf = await a.recommend(ids);
    expect(shelf.map((r) => r.id)).not.toContain('tent-0');
    expect(tents(shelf.slice(0, 4))).toBe(1);
    expect(tents(shelf)).toBe(4); // demoted, not dropped
    // scores stay sorted after the reorder
    for (let i = 1; i < shelf.length; i++) expect(shelf[i].score).toBeLessThanOrEqual(shelf[i - 1].score);
  });

  it('a look is not a purchase; duplicateSimilarity 0 turns it off; duplicateActions widens it', async () => {
    const looked = agent();
    await looked.observe({ item: 'tent-0', action: 'click', at: T0 });
    expect(tents((await looked.recommend(ids)).slice(0, 4))).toBeGreaterThanOrEqual(3);
    const off = agent({ duplicateSimilarity: 0 });
    await off.observe({ item: 'tent-0', action: 'purchase', at: T0 });
    expect(tents((await off.recommend(ids)).slice(0, 4))).toBeGreaterThanOrEqual(3);
    const wide = agent({ duplicateActions: ['click', 'purchase'] });
    await wide.observe({ item: 'tent-0', action: 'click', at: T0 });
    expect(tents((await wide.recommend(ids)).slice(0, 4))).toBe(1);
  });
});

describe('explanations stay within a department', () => {
  // a camping stove reads much like kitchen cookware: content similarity alone would explain it by the pan
  const SHOP: Item[] = [
    { id: 'pan', title: 'Frying Pan', categories: ['Kitchen'], description: 'pan for cooking food on the stove' },
    { id: 'pot', title: 'Cooking Pot', categories: ['Kitchen'], description: 'pot for cooking food on the stove' },
    { id: 'camp-stove', title: 'Camping Stove', categories: ['Outdoor'], description: 'stove for cooking food at the campsite' },
    { id: 'tent', title: 'Tent', categories: ['Outdoor'], description: 'tent for camping' },
    { id: 'novel', title: 'Novel', categories: ['Books'], description: 'a detective story' },
  ];
  it('a card of another department is never explained by the shopper’s item (content space: no collaborative evidence)', async () => {
    const a = new MemoryAgent({ items: new ItemVectors(createHashingEmbedder({ dim: 256 }), SHOP), clock: () => T0 + 3_600_000, config: { tau: 0.3 } });
    await a.observe({ item: 'pan', action: 'purchase', at: T0 });
    await a.observe({ item: 'pot', action: 'click', at: T0 + 60_000 });
    const recs = await a.recommend(
      SHOP.map((i) => i.id),
      { exclude: [] },
    );
    const stove = recs.find((r) => r.id === 'camp-stove')!;
    expect(stove.score).toBeGreaterThan(recs.find((r) => r.id === 'novel')!.score); // the pan does lift it …
    expect(stove.why.map(renderWhy).join(' ')).not.toMatch(/Frying Pan|Cooking Pot/); // … but does not explain it
    const pot = recs.find((r) => r.id === 'pot')!;
    expect(pot.why.map(renderWhy).join(' ')).toMatch(/Frying Pan/); // within the department it does
  });
});
