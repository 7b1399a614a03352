import { afterEach, describe, expect, it } from 'vitest';
import { createAtomem, type Atomem } from '../../src/client/index.js';
import type { Item } from '../../src/core/types.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';

// Whole-catalog recommend through a real module Worker and real IndexedDB in Chromium.

const DEPTS: Record<string, string> = {
  Shoes: 'leather running shoes sneakers footwear',
  Kitchen: 'cooking pan kitchen cookware stove',
  Books: 'paperback novel fiction reading book',
  Garden: 'garden hose plant soil outdoor',
  Audio: 'speaker headphones sound music bass',
  Toys: 'toy kids play game puzzle',
};
const catalog: Item[] = Object.entries(DEPTS).flatMap(([d, words]) =>
  Array.from({ length: 40 }, (_, i) => ({ id: `${d.toLowerCase()}-${i}`, title: `${d} item ${i}`, categories: [d], description: `${words} ${i}` })),
);
const ids = catalog.map((c) => c.id);

const { profile, deleteAll } = profileTracker('whole-');
const open: Atomem[] = [];
afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await deleteAll();
});

describe('whole-catalog recommend through the worker', () => {
  it("recommend({ limit }) ranks the catalog: limit items, none excluded, with reasons, the full ranking's top item", async () => {
    const a = await createAtomem({ profile: profile('whole'), catalog, embedder: 'hashing', config: { tau: 0.3, shortlist: 40 } });
    open.push(a);
    const bought = ['kitchen-1', 'kitchen-5', 'kitchen-9'];
    let t = 1_000;
    for (const id of bought) await a.track({ item: id, action: 'purchase', at: (t += 1_000) });
    await a.track({ item: 'audio-3', action: 'click', at: (t += 1_000) });

    const out = await a.recommend({ limit: 10 });
    expect(out).toHaveLength(10);
    expect(new Set(out.map((r) => r.id)).size).toBe(10);
    for (const r of out) {
      expect(bought).not.toContain(r.id);
      expect(r.explanations.length).toBeGreaterThan(0);
    }
    expect(out.filter((r) => r.id.startsWith('kitchen-')).length).toBeGreaterThanOrEqual(3);

    // the same top item as ranking all 240 items as candidates
    const full = await a.recommend(ids, { diversify: false, limit: 1 });
    const short = await a.recommend(undefined, { diversify: false, limit: 5 });
    expect(short[0].id).toBe(full[0].id);

    const noSeen = await a.recommend({ limit: 20, exclude: ['bought', 'seen'] });
    expect(noSeen).toHaveLength(20);
    expect(noSeen.some((r) => bought.includes(r.id) || r.id === 'audio-3')).toBe(false);

    // default limit 20; bad options rejected across the boundary
    expect(await a.recommend()).toHaveLength(20);
    await expect(a.recommend({ limit: 0 })).rejects.toThrow(/limit must be an integer/);
    await expect(a.recommend({ limits: 3 } as never)).rejects.toThrow(/limits/);
  });
});
