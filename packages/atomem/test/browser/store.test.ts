import { afterEach, describe, expect, it } from 'vitest';
import { DB_VERSION, InvalidImportError, MemoryStore, dbName } from '../../src/store/index.js';
import { createState } from '../../src/core/memory.js';
import type { MemoryState } from '../../src/core/types.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';

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

  it('upgrades a version-2 database to 3 (the ledger store), keeping the memory; the ledger survives erase, its tokens do not', async () => {
    expect(DB_VERSION).toBe(3);
    const p = profile('upgrade-v2');
    // a database as version 2 left it: the five memory stores and a meta record
    await new Promise<void>((resolve, reject) => {
      const req = indexedDB.open(dbName(p), 2);
      req.onupgradeneeded = () => {
        const db = req.result;
        db.createObjectStore('events', { keyPath: 'seq' }).createIndex('by-pending', 'pending');
        db.createObjectStore('memories', { keyPath: 'id' });
        db.createObjectStore('profile');
        db.createObjectStore('itemVectors', { keyPath: ['embedderId', 'itemId'] });
        db.createObjectStore('meta');
      };
      req.onsuccess = () => {
        const db = req.result;
        const tx = db.transaction(['events', 'meta'], 'readwrite');
        tx.objectStore('events').put({ seq: 1, item: 'heat', at: 1, action: 'purchase', pending: 0 });
        tx.objectStore('meta').put(
          { schemaVersion: 2, embedderId: null, nextSeq: 2, signal: { predictionErrors: 0, eventsSinceSynthesis: 0, eventsSinceSweep: 0 } },
          'meta',
        );
        tx.oncomplete = () => (db.close(), resolve());
        tx.onerror = () => reject(tx.error);
      };
      req.onerror = () => reject(req.error);
    });
    const store = await open(p);
    expect((await store.load()).events.map((e) => e.item)).toEqual(['heat']);
    expect(await store.loadLedger()).toEqual({ entries: [], tokens: [] });
    const entry = { at: 5, epoch: 1, epsilon: 3.9, q: 1, sent: true };
    await store.saveLedger({ entries: [entry], tokens: [{ epoch: 2, token: 'tok' }] });
    await store.erase();
    expect(await store.loadLedger()).toEqual({ entries: [entry], tokens: [] });
    await store.resetLedger();
    expect(await store.loadLedger()).toEqual({ entries: [], tokens: [] });
  });
});
