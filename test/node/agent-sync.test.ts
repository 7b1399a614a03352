import { describe, expect, it } from 'vitest';
import { MemoryAgent, type AgentOptions } from '../../packages/atomem/src/agent/agent.js';
import { ItemVectors } from '../../packages/atomem/src/agent/items.js';
import { createInProcessIndex, type InProcessIndex, type SharedIndex, type SharedMemoryUpload } from '../../packages/atomem/src/community/index.js';
import { CATALOG, MIN, T0, TAU, embedder, interactions } from '../fixtures/film-catalog.js';

/** The films' vectors (catalog, TAU and clock: test/fixtures/film-catalog.ts; same genre 0.70–0.89, cross genre ≤ 0.43). */
const catalog = new ItemVectors(embedder, CATALOG);

/** Shared ids are drawn from one global counter so that two agents never collide in one index. */
let sharedCounter = 0;

function makeAgent(user: string, opts: Partial<AgentOptions> = {}) {
  let n = 0;
  return new MemoryAgent({
    items: catalog,
    clock: () => T0 + 600 * MIN,
    // memory ids are per user; the agent also draws shared-copy ids from newId
    newId: () => `${user}-${++n}-${++sharedCounter}`,
    ...opts,
    // These tests pin the atomic memories' copies; the profile record has its own tests below.
    config: { tau: TAU, shareProfile: false, ...opts.config },
  });
}

const ev = interactions();

/** An in-process index that records every call. */
function spyIndex(inner: InProcessIndex = createInProcessIndex({ embedderId: embedder.id, tau: TAU, k1: 2, minCommunitySize: 3 })) {
  const upserts: SharedMemoryUpload[][] = [];
  const deletes: string[][] = [];
  const asked: string[][] = [];
  const index: SharedIndex = {
    embedderId: inner.embedderId,
    async upsert(batch) {
      upserts.push(batch.map((u) => ({ ...u })));
      return inner.upsert(batch);
    },
    async delete(ids) {
      deletes.push([...ids]);
      return inner.delete(ids);
    },
    async communities(ids) {
      asked.push([...ids]);
      return inner.communities(ids);
    },
  };
  return { index, inner, upserts, deletes, asked };
}

async function crimeFan(user: string, items = ['heat', 'fargo']) {
  const a = makeAgent(user);
  for (const id of items) await a.observe(ev(id));
  return a;
}

describe('MemoryAgent.sync', () => {
  it("at 'embeddings' uploads the memory vector only: fresh id, no items, no text", async () => {
    const a = await crimeFan('u1');
    const [m] = a.memories();
    expect(m.evidence).toBeGreaterThanOrEqual(a.config.minShareEvidence);
    const { index, upserts, inner } = spyIndex();
    await a.sync(index, 'embeddings');
    expect(upserts).toHaveLength(1);
    expect(upserts[0]).toHaveLength(1);
    const u = upserts[0][0];
    expect(Object.keys(u).sort()).toEqual(['embedderId', 'id', 'vector']);
    expect(u.id).not.toBe(m.id);
    expect(u.embedderId).toBe(embedder.id);
    expect([...u.vector]).toEqual([...m.embedding.vector]);
    expect(inner.stats().memories).toBe(1);
  });

  it("at 'items' also uploads the memory's item ids", async () => {
    const a = await crimeFan('u1');
    const { index, upserts } = spyIndex();
    await a.sync(index, 'items');
    expect(upserts[0][0].items).toEqual(['heat', 'fargo']);
  });

  it('respects minShareEvidence: a one-click memory is not shared', async () => {
    const a = makeAgent('u1');
    await a.observe(ev('heat'));
    await a.observe(ev('alien'));
    const { index, upserts } = spyIndex();
    await a.sync(index, 'items');
    expect(upserts).toEqual([]);
    // a second crime like lifts that memory to evidence 2: now it is shared, the sci-fi one is not
    await a.observe(ev('fargo'));
    await a.sync(index, 'items');
    expect(upserts).toHaveLength(1);
    expect(upserts[0].map((u) => u.items)).toEqual([['heat', 'fargo']]);
  });

  it('honours a custom minShareEvidence', async () => {
    const a = makeAgent('u1', { config: { minShareEvidence: 0 } });
    await a.observe(ev('heat'));
    const { index, upserts } = spyIndex();
    await a.sync(index, 'embeddings');
    expect(upserts.flat()).toHaveLength(1);
  });

  it('never shares a negative memory', async () => {
    const a = makeAgent('u1', { config: { minShareEvidence: 0 } });
    await a.observe(ev('titanic', 'dislike'));
    await a.observe(ev('casablanca', 'dislike'));
    const { index, upserts } = spyIndex();
    await a.sync(index, 'items');
    expect(upserts).toEqual([]);
  });

  it('an unchanged memory is not re-uploaded', async () => {
    const a = await crimeFan('u1');
    const { index, upserts, deletes } = spyIndex();
    await a.sync(index, 'embeddings');
    await a.sync(index, 'embeddings');
    expect(upserts).toHaveLength(1);
    expect(deletes).toEqual([]);
  });

  it('a changed memory is re-uploaded under a fresh id and the old copy deleted', async () => {
    const a = await crimeFan('u1');
    const { index, upserts, deletes, inner } = spyIndex();
    await a.sync(index, 'items');
    const oldId = upserts[0][0].id;
    await a.observe(ev('casino'));
    await a.sync(index, 'items');
    expect(deletes).toEqual([[oldId]]);
    expect(upserts).toHaveLength(2);
    const fresh = upserts[1][0];
    expect(fresh.id).not.toBe(oldId);
    expect(fresh.items).toEqual(['heat', 'fargo', 'casino']);
    expect([...fresh.vector]).toEqual([...a.memories()[0].embedding.vector]);
    expect(inner.stats().memories).toBe(1);
  });

  it('changing the privacy level re-uploads with or without items', async () => {
    const a = await crimeFan('u1');
    const { index, upserts, deletes } = spyIndex();
    await a.sync(index, 'items');
    await a.sync(index, 'embeddings');
    expect(deletes).toEqual([[upserts[0][0].id]]);
    expect(upserts[1][0].items).toBeUndefined();
    expect(upserts[1][0].id).not.toBe(upserts[0][0].id);
  });

  it('a forgotten memory is deleted at the next sync', async () => {
    const a = await crimeFan('u1');
    const { index, upserts, deletes, inner } = spyIndex();
    await a.sync(index, 'embeddings');
    a.forget(a.memories()[0].id);
    await a.sync(index, 'embeddings');
    expect(deletes).toEqual([[upserts[0][0].id]]);
    expect(inner.stats().memories).toBe(0);
  });

  it("'off' deletes every shared copy, sends nothing and drops community links", async () => {
    const { index, inner, upserts } = spyIndex();
    const others = [await crimeFan('o1', ['heat', 'casino']), await crimeFan('o2', ['fargo', 'godfather'])];
    for (const o of others) await o.sync(index, 'items');
    const a = await crimeFan('u1');
    await a.observe(ev('alien'));
    await a.observe(ev('matrix'));
    await a.sync(index, 'items');
    expect(a.memories().some((m) => m.links.length > 0)).toBe(true);
    const before = inner.stats().memories;
    const sent = upserts.length;
    await a.sync(index, 'off');
    expect(upserts.length).toBe(sent);
    expect(inner.stats().memories).toBe(before - 2);
    for (const m of a.memories()) expect(m.links).toEqual([]);
    const rec = await a.recommend(['godfather', 'casino']);
    for (const r of rec) expect(r.reasons.some((x) => x.kind === 'community' || x.kind === 'popular')).toBe(false);
    // and it stays off: a second 'off' deletes nothing more
    await a.sync(index, 'off');
    expect(inner.stats().memories).toBe(before - 2);
  });

  it('skips memories of another embedder than the index accepts', async () => {
    const a = await crimeFan('u1');
    const other = spyIndex(createInProcessIndex({ embedderId: 'use-lite@0.2.0/uint8' }));
    await expect(a.sync(other.index, 'items')).resolves.toBeUndefined();
    expect(other.upserts).toEqual([]);
  });

  it('sync with pull: false does not ask for communities', async () => {
    const a = await crimeFan('u1');
    const { index, asked } = spyIndex();
    await a.sync(index, 'embeddings', { pull: false });
    expect(asked).toEqual([]);
    await a.sync(index, 'embeddings');
    expect(asked).toHaveLength(1);
  });
});

describe('communities across users', () => {
  async function world(privacy: 'embeddings' | 'items') {
    const spy = spyIndex();
    const alice = await crimeFan('alice', ['heat', 'fargo']);
    await alice.observe(ev('alien'));
    await alice.observe(ev('matrix'));
    const others = [
      await crimeFan('bob', ['heat', 'casino']),
      await crimeFan('carol', ['fargo', 'godfather']),
      await crimeFan('dave', ['casino', 'godfather', 'heat']),
    ];
    await alice.sync(spy.index, privacy);
    for (const o of others) await o.sync(spy.index, privacy);
    return { alice, others, ...spy };
  }

  it('alone, a user has no community (k-anonymity) and no links', async () => {
    const { index } = spyIndex();
    const alice = await crimeFan('alice');
    await alice.sync(index, 'items');
    expect(alice.memories()[0].links).toEqual([]);
  });

  it('after several users sync, pullCommunities links the crime memory to its community', async () => {
    const { alice, inner } = await world('items');
    const crime = () => alice.memories().find((m) => m.category === 'Crime')!;
    expect(crime().links).toEqual([]); // alice synced first, when she was alone
    await alice.pullCommunities(inner);
    expect(crime().links).toHaveLength(1);
    const scifi = alice.memories().find((m) => m.category === 'Sci-Fi')!;
    expect(scifi.links).toEqual([]); // her sci-fi memory is shared but nobody else's is near it
    // the link is the index's community id, holding the four crime memories
    expect(inner.graph.communitySize(crime().links[0])).toBe(4);
  });

  it("recommend's reasons then include the community, and explanations mention similar shoppers", async () => {
    const { alice, inner } = await world('items');
    await alice.pullCommunities(inner);
    const out = await alice.recommend(['titanic', 'godfather', 'solaris', 'casino'], { diversify: false }); // the ranker's order (diversification is tested in shelf-reasons)
    expect(out.slice(0, 2).map((r) => r.id).sort()).toEqual(['casino', 'godfather']);
    const top = out[0];
    const community = top.reasons.find((r) => r.kind === 'community');
    expect(community).toMatchObject({ kind: 'community', size: 4 });
    expect(community && community.kind === 'community' && community.summary).toMatch(/^4 shoppers' interests in crime/);
    expect(top.features.communityItems).toBeGreaterThan(0);
    expect(top.features.popularity).toBeGreaterThan(0);
    const text = top.explanations.join(' ');
    expect(text).toMatch(/Shoppers with a similar taste also chose it|Popular among shoppers|Shoppers who picked what you picked/);
    // an item far from every memory gets no community reason
    expect(out.find((r) => r.id === 'titanic')!.reasons.some((r) => r.kind === 'community')).toBe(false);
  });

  it("at 'embeddings' the community comes without item aggregates", async () => {
    const { alice, inner } = await world('embeddings');
    await alice.pullCommunities(inner);
    const out = await alice.recommend(['godfather', 'titanic']);
    const c = out[0].reasons.find((r) => r.kind === 'community');
    expect(c).toBeDefined();
    expect(out[0].features.communityItems).toBe(0);
    expect(out[0].features.popularity).toBe(0);
    expect(out[0].features.members).toBeGreaterThan(0);
  });

  it('the community reaches other users too, never revealing their own copies back to them', async () => {
    const { others, inner, upserts } = await world('items');
    const dave = others[2];
    await dave.pullCommunities(inner);
    expect(dave.memories()[0].links).toHaveLength(1);
    const daveShared = upserts.flat().filter((u) => u.id.startsWith('dave-')).map((u) => u.id);
    expect(daveShared).toHaveLength(1);
    const [view] = inner.communitiesSync(daveShared);
    expect(view.ownIds).toEqual(daveShared);
    expect(view.members).toHaveLength(view.size - 1);
  });

  it("going 'off' removes the user from the community for everybody", async () => {
    const { alice, others, inner } = await world('items');
    await alice.sync(inner, 'off');
    const bob = others[0];
    await bob.pullCommunities(inner);
    const out = await bob.recommend(['godfather']);
    const c = out[0].reasons.find((r) => r.kind === 'community');
    expect(c).toMatchObject({ size: 3 });
  });
});

describe('the shared profile record', () => {
  it('is one more anonymous upload: the mean of recent liked items, with their ids only at level items', async () => {
    const a = makeAgent('p1', { config: { shareProfile: true, minShareEvidence: 99 } }); // no atomic memory qualifies
    for (const id of ['heat', 'fargo', 'alien']) await a.observe(ev(id));
    const spy = spyIndex();
    await a.sync(spy.index, 'embeddings');
    expect(spy.upserts.flat()).toHaveLength(1);
    const [rec] = spy.upserts.flat();
    expect(rec.items).toBeUndefined();
    expect(Object.keys(rec).sort()).toEqual(['embedderId', 'id', 'vector']);
    await a.sync(spy.index, 'items');
    const last = spy.upserts[spy.upserts.length - 1];
    expect(last).toHaveLength(1);
    expect([...last[0].items!].sort()).toEqual(['alien', 'fargo', 'heat']);
    expect(last[0].id).not.toBe(rec.id); // a new version is a new, unlinkable copy
  });

  it('is not shared at off, nor with fewer than two liked items', async () => {
    const a = makeAgent('p2', { config: { shareProfile: true, minShareEvidence: 99 } });
    await a.observe(ev('heat'));
    const spy = spyIndex();
    await a.sync(spy.index, 'items');
    expect(spy.upserts.flat()).toHaveLength(0);
    await a.observe(ev('fargo'));
    await a.sync(spy.index, 'off');
    expect(spy.upserts.flat()).toHaveLength(0);
  });
});
