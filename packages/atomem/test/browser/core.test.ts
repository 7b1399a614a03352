import { describe, expect, it } from 'vitest';
import { ItemVectors } from '../../src/agent/items.js';
import { MemoryAgent } from '../../src/agent/agent.js';
import { createHashingEmbedder } from '../../src/embed/hashing.js';
import type { Item } from '../../src/core/types.js';
import { renderWhy } from '../../src/reason/wording.js';

const catalog: Item[] = [
  { id: 'heat', title: 'Heat (1995)', categories: ['Crime', 'Thriller'], description: 'heist crime thriller in los angeles' },
  { id: 'fargo', title: 'Fargo (1996)', categories: ['Crime', 'Thriller'], description: 'crime thriller kidnapping in minnesota' },
  { id: 'casino', title: 'Casino (1995)', categories: ['Crime', 'Drama'], description: 'crime drama las vegas mob' },
  { id: 'alien', title: 'Alien (1979)', categories: ['Sci-Fi', 'Horror'], description: 'space horror science fiction' },
  { id: 'notting', title: 'Notting Hill (1999)', categories: ['Romance', 'Comedy'], description: 'romantic comedy in london' },
];

// The pure core and the agent run unchanged in a real browser (headless Chromium).
describe('agent in the browser', () => {
  it('forms memories from clicks and ranks the matching department first, with explanations', async () => {
    expect(typeof window).toBe('object');
    const items = new ItemVectors(createHashingEmbedder({ dim: 256 }), catalog);
    let n = 0;
    const agent = new MemoryAgent({ items, config: { tau: 0.3 }, clock: () => 1_000, newId: () => `m${++n}` });
    await agent.observe({ item: 'heat', at: 1, action: 'purchase' });
    await agent.observe({ item: 'fargo', at: 2, action: 'click' });
    expect(agent.memories().length).toBeGreaterThan(0);
    expect(agent.memories()[0].items).toContain('heat');
    const recs = await agent.recommend(['notting', 'alien', 'casino']);
    expect(recs[0].id).toBe('casino');
    expect(recs[0].why.map(renderWhy).join(' ')).toMatch(/interest|recently/);
  });
});
