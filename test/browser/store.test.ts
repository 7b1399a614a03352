import { afterEach, describe, expect, it } from 'vitest';
import { InvalidImportError, MemoryStore, dbName } from '../../packages/atomem/src/store/index.js';
import { createState } from '../../packages/atomem/src/core/memory.js';
import type { MemoryState } from '../../packages/atomem/src/core/types.js';
import { profileTracker } from '../fixtures/idb.js';

// Real Chromium IndexedDB, no fake: durability, profile isolation, export/erase/import.

function sampleState(): MemoryState {
  const s = createState();
  s.nextSeq = 3;
  s.events = [
    { seq: 1, item: 'heat', at: 1, action: 'purchase', pending: false },
    { seq: 2, item: 'alien', at: 2, action: 'dislike', pending: true },
  ];
  s.memories = [
    {
      id: 'm1',
      content: 'Enjoys crime thrillers such as Heat (1995)',
      category: 'Crime',
      embedding: { embedderId: 'test@1/float32', vector: new Float32Array([0.1, -0.2, Math.SQRT1_2, 1 / 3]) },
      items: ['heat'],
      strength: 0.35,
      evidence: 1,
      links: [],
      createdAt: 5,
      updatedAt: 6,
    },
  ];
  s.profile = { narrative: 'Likes crime.', sources: ['m1'], updatedAt: 7 };
  s.signal = { predictionErrors: 0, eventsSinceSynthesis: 1, eventsSinceSweep: 1 };
  return s;
}

const { profile, deleteAll } = profileTracker();
const stores: MemoryStore[] = [];
async function open(p: string): Promise<MemoryStore> {
  const s = await MemoryStore.open({ profile: p });
  stores.push(s);
  return s;
}

afterEach(async () => {
  for (const s of stores.splice(0)) s.close();
  await deleteAll();
});

describe('MemoryStore in Chromium IndexedDB', () => {
  it('is durable across closing and reopening the database', async () => {
    const p = profile('durable');
    const a = await open(p);
    await a.saveState(sampleState());
    await a.appendEvent({ seq: 3, item: 'fargo', at: 3, action: 'click', pending: true });
    a.close();
    const b = await open(p);
    const s = await b.load();
    const expected = sampleState();
    expected.events.push({ seq: 3, item: 'fargo', at: 3, action: 'click', pending: true });
    expected.nextSeq = 4;
    expect(s).toEqual(expected);
    expect(s.memories[0].embedding.vector).toBeInstanceOf(Float32Array);
    expect(s.events.filter((e) => e.pending).map((e) => e.seq)).toEqual([2, 3]);
  });

  it('keeps two profiles isolated', async () => {
    const alice = await open(profile('alice'));
    const bob = await open(profile('bob'));
    await alice.saveState(sampleState());
    await bob.appendEvent({ seq: 1, item: 'notting', at: 1, action: 'like', pending: true });
    expect((await alice.load()).events.map((e) => e.item)).toEqual(['heat', 'alien']);
    expect((await bob.load()).events.map((e) => e.item)).toEqual(['notting']);
    expect((await bob.load()).memories).toEqual([]);
    await bob.erase();
    expect(await alice.load()).toEqual(sampleState());
  });

  it('round-trips export → erase → import, and refuses a bad import without touching data', async () => {
    const store = await open(profile('roundtrip'));
    await store.saveState(sampleState());
    const json = JSON.stringify(await store.export());
    await store.erase();
    expect(await store.load()).toEqual(createState());
    await store.import(JSON.parse(json));
    expect(await store.load()).toEqual(sampleState());
    const bad = JSON.parse(json);
    bad.state.memories[0].embedding.vector[1] = null;
    await expect(store.import(bad)).rejects.toBeInstanceOf(InvalidImportError);
    expect(await store.load()).toEqual(sampleState());
  });

  it('steps aside when another connection deletes the database, then reopens', async () => {
    const p = profile('versionchange');
    const store = await open(p);
    await store.saveState(sampleState());
    await new Promise<void>((resolve, reject) => {
      const req = indexedDB.deleteDatabase(dbName(p));
      req.onsuccess = () => resolve();
      req.onerror = () => reject(req.error);
      req.onblocked = () => reject(new Error('blocked by our open connection'));
    });
    expect(await store.load()).toEqual(createState());
  });
});
