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
  it('kept linked items, named items, recent signals and exclusions follow a catalog edit and changed memories', async () => {
    const events = history(9, 50);
    const items = new ItemVectors(createHashingEmbedder({ dim: 64 }), catalog);
    await items.warm();
    await items.centre();
    let n = 0;
    const warmed = new MemoryAgent({ items, clock: () => 1e9, newId: () => `m${++n}` });
    for (const e of events) await warmed.observe(e);
    await warmed.processPending();
    await calls(warmed, 5);
    // the same state and items, every cache of the shelf cold
    const cold = () => new MemoryAgent({ items, state: structuredClone(warmed.snapshot), clock: () => 1e9, newId: () => `m${++n}` });
    // an item a memory links to and the shopper just saw gets new text (so a new vector), nothing else changes
    const last = events[events.length - 1].item;
    expect(warmed.snapshot.memories.some((m) => m.items.includes(last))).toBe(true);
    items.add(catalog.filter((c) => c.id === last).map((c) => ({ ...c, title: `${c.title} renamed waterproof` })));
    const a = await calls(warmed, 6);
    expect(a).toBe(await calls(cold(), 6));
    // then events that move items within memories
    for (const [k, e] of events.slice(0, 6).entries()) await warmed.observe({ ...e, at: 1e8 + (80 + k) * 60_000 });
    await warmed.processPending();
    const b = await calls(warmed, 7);
    expect(b).toBe(await calls(cold(), 7));
    expect(await calls(warmed, 7)).toBe(b);
  });

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
