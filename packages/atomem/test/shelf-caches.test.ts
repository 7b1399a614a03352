/**
 * The shelf's caches kept across calls (item–item and memory–item dot products, near-duplicate
 * pairs, the shopper's actions) change no output: an agent whose caches were warmed before more
 * events arrived answers exactly as a fresh agent with the same history.
 */
import { describe, expect, it } from 'vitest';
import { MemoryAgent } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import type { Action, Interaction } from '../src/core/types.js';
import { Rng } from '@atomem/bench/rng';

const GROUPS = ['Tents', 'Speakers', 'Pans', 'Books'];
const catalog = GROUPS.flatMap((g) =>
  Array.from({ length: 40 }, (_, i) => ({ id: `${g}-${i}`, title: `${g.slice(0, -1)} model ${i} ${i % 3 ? 'classic' : 'pro'}`, categories: [g] })),
);
const ids = catalog.map((c) => c.id);

async function agent(): Promise<MemoryAgent> {
  const items = new ItemVectors(createHashingEmbedder({ dim: 64 }), catalog);
  await items.warm();
  await items.centre();
  let n = 0;
  return new MemoryAgent({ items, clock: () => 1e9, newId: () => `m${++n}` });
}

function history(seed: number, count: number): Interaction[] {
  const rng = new Rng(seed);
  const actions: Action[] = ['purchase', 'click', 'cart', 'view'];
  return Array.from({ length: count }, (_, k) => ({ item: ids[(k % 2) * 40 + rng.int(40)], at: 1e8 + k * 60_000, action: actions[rng.int(actions.length)] }));
}

async function calls(a: MemoryAgent, seed: number): Promise<string> {
  const rng = new Rng(seed);
  const out: unknown[] = [];
  for (let k = 0; k < 6; k++) out.push(await a.recommend(rng.sampleWithoutReplacement(ids, 12 + k * 10)));
  out.push(await a.recommend(undefined, { limit: 10 }));
  out.push(await a.recommend(ids.slice(0, 60), { limit: 5 }));
  return JSON.stringify(out);
}

describe('shelf caches', () => {
  it('warm caches, then more events: the same outputs as a fresh agent with the whole history', async () => {
    const events = history(4, 60);
    const warmed = await agent();
    for (const e of events.slice(0, 30)) await warmed.observe(e);
    await warmed.processPending();
    await calls(warmed, 1);
    await calls(warmed, 2);
    for (const e of events.slice(30)) await warmed.observe(e);
    await warmed.processPending();
    const fresh = await agent();
    for (const e of events) await fresh.observe(e);
    await fresh.processPending();
    const a = await calls(warmed, 3);
    expect(a).toBe(await calls(fresh, 3));
    // and the same calls again, now every cache warm
    expect(await calls(warmed, 3)).toBe(a);
  });
});
