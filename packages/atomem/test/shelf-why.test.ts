/**
 * Reasons leave the shelf as data (`why`: kind, the items named with their titles, the shopper's
 * action, the memory behind it) and are worded on the page by one renderer, the default English
 * one (`reason/wording.ts`) or the shop's own. One verb table words every action everywhere.
 */
import { describe, expect, it } from 'vitest';
import { MemoryAgent } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { explain, whyKey, type Why } from '../src/core/explain.js';
import type { RankedItem, Reason } from '../src/core/rank.js';
import { ACTION_WEIGHTS, type Action } from '../src/core/types.js';
import { ACTION_VERBS, did, renderReasons, renderWhy, type WhyRenderer } from '../src/reason/wording.js';
import { CATALOG, MIN, T0, TAU, embedder } from '../../../test/fixtures/film-catalog.js';

const titleOf = (id: string) => CATALOG.find((i) => i.id === id)?.title;
const card = (reasons: Reason[], score = 1): RankedItem => ({ id: 'x', score, features: {} as RankedItem['features'], reasons });

async function shopper() {
  let n = 0;
  const agent = new MemoryAgent({ items: new ItemVectors(embedder, CATALOG), clock: () => T0 + 600 * MIN, newId: () => `m${++n}`, config: { tau: TAU } });
  const at = (k: number) => T0 + k * MIN;
  await agent.observe({ item: 'heat', at: at(1), action: 'purchase' });
  await agent.observe({ item: 'fargo', at: at(2), action: 'cart' });
  await agent.observe({ item: 'alien', at: at(3), action: 'like' });
  return agent;
}

describe('structured reasons (why)', () => {
  it("the shelf's reasons are data: kind, items with id and title, the action, an existing memory; no wording", async () => {
    const agent = await shopper();
    const out = await agent.recommend(['godfather', 'casino', 'matrix', 'titanic', 'emma']);
    const memoryIds = new Set(agent.memories().map((m) => m.id));
    const why = out.flatMap((r) => r.why);
    expect(why.length).toBeGreaterThan(0);
    for (const w of why) {
      expect(typeof w.kind).toBe('string');
      if ('items' in w && w.items) for (const it of w.items) expect(it).toEqual({ id: it.id, title: titleOf(it.id) });
      if ('action' in w && w.action !== undefined) expect(Object.keys(ACTION_WEIGHTS)).toContain(w.action);
      if ('memoryId' in w && w.memoryId !== undefined) expect(memoryIds.has(w.memoryId)).toBe(true);
    }
    // the crime films are moved by the crime memory, which names Heat (bought) or Fargo (carted)
    const godfather = out.find((r) => r.id === 'godfather')!;
    const named = godfather.why.find((w) => w.kind === 'memory' || w.kind === 'recent');
    expect(named).toBeDefined();
    expect(named!.kind === 'memory' || named!.kind === 'recent').toBe(true);
    const item = (named as Extract<Why, { kind: 'memory' | 'recent' }>).items![0];
    expect(['heat', 'fargo']).toContain(item.id);
    expect((named as { action?: Action }).action).toBe(item.id === 'heat' ? 'purchase' : 'cart');
    // no English sentence travels in the data (only the catalog's titles and the memories' statements)
    const data = JSON.stringify(why);
    expect(data).not.toMatch(/Because|Close to|which you|Popular|your interest/);
    // and the default renderer words each one
    for (const r of out) for (const s of renderReasons(r.why)) expect(s).toMatch(/^\S.*[.”)]$/);
  });

  it('a shop can replace the wording: every sentence comes from its renderer', async () => {
    const agent = await shopper();
    const out = await agent.recommend(['godfather', 'matrix', 'titanic']);
    const french: WhyRenderer = (w) => {
      if (w.kind === 'recent') return `Parce que vous avez récemment ${w.action === 'purchase' ? 'acheté' : 'regardé'} ${w.items[0].title}.`;
      if (w.kind === 'memory') return `Proche de votre intérêt « ${w.interest} ».`;
      return `(${w.kind})`;
    };
    for (const r of out) {
      const fr = renderReasons(r.why, french);
      expect(fr).toHaveLength(r.why.length);
      for (const s of fr) expect(s).not.toMatch(/Because|Close to|Matches/);
    }
  });

  it('one verb table: an action reads the same in every kind of reason (carted = "added … to your cart")', () => {
    for (const action of Object.keys(ACTION_WEIGHTS) as Action[]) {
      const phrase = did(action, 'Heat (1995)');
      expect(phrase).toBe(ACTION_VERBS[action].replace('{item}', 'Heat (1995)'));
      const item = [{ id: 'heat', title: 'Heat (1995)' }];
      expect(renderWhy({ kind: 'recent', items: item, action })).toBe(`Because you recently ${phrase}.`);
      expect(renderWhy({ kind: 'intent', intent: 'crime', matched: true, memoryId: 'm1', items: item, action })).toBe(`You asked for “crime”; you ${phrase}.`);
      expect(renderWhy({ kind: 'memory', memoryId: 'm1', interest: 'Crime', items: item, action, similarity: 0.9 })).toBe(
        `Close to Heat (1995), which you ${did(action)}: your interest “Crime”.`,
      );
      if (action !== 'purchase')
        expect(renderWhy({ kind: 'shop', basis: 'bought-together', items: item, action })).toBe(
          `People who bought Heat (1995) (you ${did(action, 'it')}) also bought this.`,
        );
    }
    expect(did('cart', 'Heat')).toBe('added Heat to your cart');
    expect(did('cart')).toBe('added to your cart');
    expect(did(undefined, 'Heat')).toBe('looked at Heat');
  });

  it('explain keeps each reason once, by what it shows', () => {
    const twice: Reason[] = [
      { kind: 'shop', signal: 'ease', contribution: 0.5, item: 'heat' },
      { kind: 'shop', signal: 'knn', contribution: 0.4, item: 'heat' }, // same basis, same item: reads the same
      { kind: 'recent', item: 'heat', similarity: 0.9, contribution: 0.3, action: 'purchase' },
    ];
    const why = explain(card(twice), titleOf, 3, () => 'purchase');
    expect(why.map((w) => w.kind)).toEqual(['shop', 'recent']);
    expect(whyKey(why[0])).not.toBe(whyKey(why[1]));
    expect(renderReasons(why)).toEqual(['People who bought Heat (1995) also bought this.', 'Because you recently bought Heat (1995).']);
    expect(explain(card(twice, -1), titleOf)).toEqual([{ kind: 'low-score' }]);
    expect(explain(card([]), titleOf)).toEqual([{ kind: 'no-support' }]);
  });
});
