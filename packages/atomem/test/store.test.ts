import { afterEach, describe, expect, it, vi } from 'vitest';
import * as fake from 'fake-indexeddb';
import { IDBFactory, IDBObjectStore } from 'fake-indexeddb';
import { InvalidImportError, MemoryStore, StorageQuotaError, dbName } from '../src/store/index.js';
import { createState } from '../src/core/memory.js';
import type { AtomicMemory, MemoryEvent, MemoryState } from '../src/core/types.js';
import { MemoryAgent } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';

// idb recognises IndexedDB objects with `instanceof IDBRequest` etc., so Node needs the classes as
// globals; the factory itself is still injected (a fresh one per test), never global.
const { IDBCursor, IDBCursorWithValue, IDBDatabase, IDBIndex, IDBKeyRange, IDBOpenDBRequest, IDBRequest, IDBTransaction } = fake;
Object.assign(globalThis, { IDBCursor, IDBCursorWithValue, IDBDatabase, IDBIndex, IDBKeyRange, IDBObjectStore, IDBOpenDBRequest, IDBRequest, IDBTransaction });

function memory(id: string, vec: number[], extra: Partial<AtomicMemory> = {}): AtomicMemory {
  return {
    id,
    content: `Enjoys ${id}`,
    category: 'Crime',
    embedding: { embedderId: 'test@1/float32', vector: new Float32Array(vec) },
    items: ['heat', 'fargo'],
    strength: 0.4,
    evidence: 1.3,
    links: ['p1'],
    createdAt: 10,
    updatedAt: 20,
    ...extra,
  };
}

function sampleState(): MemoryState {
  const s = createState();
  s.nextSeq = 4;
  s.events = [
    { seq: 1, item: 'heat', at: 1, action: 'purchase', pending: false },
    { seq: 2, item: 'fargo', at: 2, action: 'click', pending: false },
    { seq: 3, item: 'alien', at: 3, action: 'dislike', pending: true },
  ];
  // why: values that are not exactly representable in float32 check that vectors survive bit-exactly.
  s.memories = [memory('zeta', [0.1, 0.2, Math.SQRT1_2, -1 / 3]), memory('alpha', [1e-7, -0.7, 0.3333, 0.123456789], { strength: -0.5, links: [] })];
  s.profile = { narrative: 'Likes crime thrillers.', sources: ['zeta', 'alpha'], updatedAt: 30 };
  s.signal = { predictionErrors: 1, eventsSinceSynthesis: 2, eventsSinceSweep: 3 };
  return s;
}

const ev = (seq: number, pending = true): MemoryEvent => ({ seq, item: `i${seq}`, at: seq * 10, action: 'click', pending });

let open: MemoryStore[] = [];
async function openStore(factory: IDBFactory, profile = 'p'): Promise<MemoryStore> {
  const s = await MemoryStore.open({ profile, indexedDB: factory });
  open.push(s);
  return s;
}

afterEach(() => {
  vi.restoreAllMocks();
  for (const s of open) s.close();
  open = [];
});

describe('MemoryStore (fake-indexeddb)', () => {
  it('starts empty', async () => {
    const store = await openStore(new IDBFactory());
    expect(await store.load()).toEqual(createState());
    expect(store.degraded).toBe(false);
  });

  it('appendEvent is durable: after reopening the event is there and pending', async () => {
    const factory = new IDBFactory();
    const a = await openStore(factory);
    await a.appendEvent(ev(1));
    await a.appendEvent(ev(2));
    a.close();
    const b = await openStore(factory);
    const s = await b.load();
    expect(s.events).toEqual([ev(1), ev(2)]);
    expect(s.events.every((e) => e.pending)).toBe(true);
    expect(s.nextSeq).toBe(3);
  });

  it('saveState then load gives an equal state with exact Float32Array vectors and memory order', async () => {
    const factory = new IDBFactory();
    const a = await openStore(factory);
    const state = sampleState();
    await a.saveState(state);
    a.close();
    const loaded = await (await openStore(factory)).load();
    expect(loaded).toEqual(state);
    expect(loaded.memories.map((m) => m.id)).toEqual(['zeta', 'alpha']);
    for (let i = 0; i < state.memories.length; i++) {
      const v = loaded.memories[i].embedding.vector;
      expect(v).toBeInstanceOf(Float32Array);
      expect(Array.from(v)).toEqual(Array.from(state.memories[i].embedding.vector));
    }
  });

  it('saveState replaces memories, drops processed events no longer in the FIFO, keeps later appends', async () => {
    const store = await openStore(new IDBFactory());
    await store.saveState(sampleState());
    const next = sampleState();
    next.memories = [next.memories[1]];
    next.events = next.events.slice(1);
    next.profile = null;
    await store.appendEvent(ev(4)); // appended after the snapshot `next` was taken
    await store.saveState(next);
    const s = await store.load();
    expect(s.memories.map((m) => m.id)).toEqual(['alpha']);
    expect(s.events.map((e) => e.seq)).toEqual([2, 3, 4]);
    expect(s.profile).toBeNull();
    expect(s.nextSeq).toBe(5);
  });

  it('round-trips a real agent snapshot into a new agent', async () => {
    const items = new ItemVectors(createHashingEmbedder({ dim: 64 }), [
      { id: 'heat', title: 'Heat (1995)', categories: ['Crime'], description: 'heist crime thriller' },
      { id: 'fargo', title: 'Fargo (1996)', categories: ['Crime'], description: 'crime thriller' },
    ]);
    let n = 0;
    const agent = new MemoryAgent({ items, clock: () => 1_000, newId: () => `m${++n}` });
    await agent.observe({ item: 'heat', at: 1, action: 'purchase' });
    await agent.observe({ item: 'fargo', at: 2, action: 'click' });
    const factory = new IDBFactory();
    const store = await openStore(factory);
    await store.saveState(agent.snapshot);
    store.close();
    const state = await (await openStore(factory)).load();
    expect(state).toEqual(agent.snapshot);
    const again = new MemoryAgent({ items, state, clock: () => 2_000, newId: () => `m${++n}` });
    expect(again.memories().length).toBe(agent.memories().length);
  });

  it('export → erase → import gives an equal state; the export is plain JSON', async () => {
    const store = await openStore(new IDBFactory());
    await store.saveState(sampleState());
    const file = await store.export();
    expect(file.format).toBe('atomem-export');
    expect(file.version).toBe(1);
    expect(typeof file.exportedAt).toBe('string');
    expect(Array.isArray(file.state.memories[0].embedding.vector)).toBe(true);
    const json = JSON.stringify(file);
    await store.erase();
    expect(await store.load()).toEqual(createState());
    await store.import(JSON.parse(json));
    expect(await store.load()).toEqual(sampleState());
  });

  describe('refuses corrupted imports with InvalidImportError and leaves data unchanged', () => {
    // biome-ignore lint/suspicious/noExplicitAny: each case corrupts an arbitrary path of the export file
    const cases: Array<[string, (f: any) => unknown, RegExp]> = [
      ['not an object', () => 'hello', /must be an object/],
      ['null', () => null, /must be an object/],
      ['wrong format', (f) => ({ ...f, format: 'other' }), /format/],
      ['wrong version', (f) => ({ ...f, version: 2 }), /version/],
      ['missing state', (f) => ({ ...f, state: undefined }), /state must be an object/],
      [
        'NaN in a vector',
        (f) => ((f.state.memories[1].embedding.vector[2] = Number.NaN), f),
        /state\.memories\[1\]\.embedding\.vector\[2\] must be a finite number/,
      ],
      ['string in a vector', (f) => ((f.state.memories[0].embedding.vector[0] = '0.1'), f), /state\.memories\[0\]\.embedding\.vector\[0\]/],
      ['float32 overflow', (f) => ((f.state.memories[0].embedding.vector[0] = 1e39), f), /overflows float32/],
      ['mismatched dimension', (f) => (f.state.memories[1].embedding.vector.push(0.5), f), /state\.memories\[1\]\.embedding\.vector has dimension 5.*4/],
      ['missing memory field', (f) => (delete f.state.memories[0].content, f), /state\.memories\[0\]\.content must be a string/],
      ['missing embedder id', (f) => (delete f.state.memories[0].embedding.embedderId, f), /embedderId/],
      ['bad action', (f) => ((f.state.events[0].action = 'stare'), f), /state\.events\[0\]\.action/],
      ['pending not boolean', (f) => ((f.state.events[0].pending = 1), f), /state\.events\[0\]\.pending/],
      ['seq beyond nextSeq', (f) => ((f.state.nextSeq = 2), f), /state\.events\[1\]\.seq/],
      ['duplicate memory id', (f) => ((f.state.memories[1].id = f.state.memories[0].id), f), /duplicates memory id/],
      ['strength out of range', (f) => ((f.state.memories[0].strength = 3), f), /strength must be in/],
      ['bad profile', (f) => ((f.state.profile = { narrative: 1 }), f), /state\.profile\.narrative/],
      ['missing signal field', (f) => (delete f.state.signal.eventsSinceSweep, f), /state\.signal\.eventsSinceSweep/],
      ['events not an array', (f) => ((f.state.events = {}), f), /state\.events must be an array/],
    ];
    for (const [name, corrupt, message] of cases) {
      it(name, async () => {
        const store = await openStore(new IDBFactory());
        await store.saveState(sampleState());
        const good = JSON.parse(JSON.stringify(await store.export()));
        const other = sampleState();
        other.memories = [memory('other', [0, 1, 0, 0])];
        await store.saveState(other);
        const bad = corrupt(good);
        const err = await store.import(bad).then(
          () => null,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(InvalidImportError);
        expect((err as Error).name).toBe('InvalidImportError');
        expect((err as Error).message).toMatch(message);
        expect(await store.load()).toEqual(other);
      });
    }
  });

  describe('quota exceeded', () => {
    const quota = () => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
    };

    it('surfaces StorageQuotaError once, keeps the database unchanged, and keeps working in memory', async () => {
      const factory = new IDBFactory();
      const store = await openStore(factory);
      await store.saveState(sampleState());
      // why: fail the memories put only, after the same transaction already deleted and put
      // events and cleared memories, so only a real rollback keeps the database unchanged.
      const orig = IDBObjectStore.prototype.put;
      const spy = vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['put']>) {
        if (this.name === 'memories') quota();
        return orig.apply(this, args);
      });
      const next = sampleState();
      next.memories = [memory('new', [0, 0, 1, 0])];
      next.events = next.events.slice(1);
      next.events.push(ev(4));
      next.nextSeq = 5;
      const err = await store.saveState(next).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(StorageQuotaError);
      expect((err as Error).cause).toBeInstanceOf(DOMException);
      expect(store.degraded).toBe(true);
      // the failed write is kept in memory …
      expect(await store.load()).toEqual(next);
      const callsAtFailure = spy.mock.calls.length;
      // … later writes no longer throw and stay in memory
      await store.appendEvent(ev(5));
      await store.saveState({ ...next, signal: { predictionErrors: 9, eventsSinceSynthesis: 0, eventsSinceSweep: 0 } });
      const mem = await store.load();
      expect(mem.events.map((e) => e.seq)).toEqual([2, 3, 4, 5]);
      expect(mem.signal.predictionErrors).toBe(9);
      expect(mem.nextSeq).toBe(6);
      const file = await store.export();
      expect(file.state.memories[0].id).toBe('new');
      await store.putItemVectors('e1', [['heat', new Float32Array([1, 2])]]);
      expect(Array.from((await store.getItemVector('e1', 'heat'))!)).toEqual([1, 2]);
      expect(spy.mock.calls.length).toBe(callsAtFailure); // nothing more reached the database
      spy.mockRestore();
      // the database still holds exactly what was stored before the failure
      const fresh = await openStore(factory);
      expect(await fresh.load()).toEqual(sampleState());
      expect(fresh.degraded).toBe(false);
      expect(await fresh.getItemVector('e1', 'heat')).toBeUndefined();
    });

    it('a quota failure on appendEvent also leaves the database unchanged', async () => {
      const factory = new IDBFactory();
      const store = await openStore(factory);
      await store.appendEvent(ev(1));
      vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(quota);
      await expect(store.appendEvent(ev(2))).rejects.toBeInstanceOf(StorageQuotaError);
      expect((await store.load()).events).toEqual([ev(1), ev(2)]);
      vi.restoreAllMocks();
      expect((await (await openStore(factory)).load()).events).toEqual([ev(1)]);
    });

    it('erase still clears the database when degraded', async () => {
      const factory = new IDBFactory();
      const store = await openStore(factory);
      await store.saveState(sampleState());
      vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(quota);
      await expect(store.appendEvent(ev(9))).rejects.toBeInstanceOf(StorageQuotaError);
      vi.restoreAllMocks();
      await store.erase();
      expect(await store.load()).toEqual(createState());
      expect(store.degraded).toBe(false); // the database matches the empty state again
      const fresh = await openStore(factory);
      expect(await fresh.load()).toEqual(createState());
    });

    it('concurrent writes hitting the quota surface the error once and lose nothing in memory', async () => {
      const store = await openStore(new IDBFactory());
      vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(quota);
      const results = await Promise.allSettled([store.appendEvent(ev(1)), store.appendEvent(ev(2)), store.appendEvent(ev(3))]);
      expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
      expect((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason).toBeInstanceOf(StorageQuotaError);
      expect((await store.load()).events.map((e) => e.seq)).toEqual([1, 2, 3]);
    });

    it('other write errors are not swallowed and do not degrade', async () => {
      const store = await openStore(new IDBFactory());
      vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(() => {
        throw new DOMException('nope', 'DataError');
      });
      await expect(store.appendEvent(ev(1))).rejects.toMatchObject({ name: 'DataError' });
      expect(store.degraded).toBe(false);
    });
  });

  it('schema 1 → 3: the outbox, the prototype cache and the sharing state of the removed protocol v1 are dropped, the memory is kept, the ledger store added', async () => {
    const factory = new IDBFactory();
    // a profile database as schema version 1 left it
    await new Promise<void>((resolve, reject) => {
      const req = factory.open(dbName('old'), 1);
      req.onupgradeneeded = () => {
        const db = req.result;
        db.createObjectStore('events', { keyPath: 'seq' }).createIndex('by-pending', 'pending');
        db.createObjectStore('memories', { keyPath: 'id' });
        db.createObjectStore('profile');
        db.createObjectStore('prototypes', { keyPath: 'id' });
        db.createObjectStore('itemVectors', { keyPath: ['embedderId', 'itemId'] });
        db.createObjectStore('outbox', { autoIncrement: true }).add({ kind: 'delete', sharedId: 's1', queuedAt: 1 });
        const meta = db.createObjectStore('meta');
        meta.put(
          {
            schemaVersion: 1,
            embedderId: null,
            nextSeq: 2,
            signal: { predictionErrors: 0, eventsSinceSynthesis: 0, eventsSinceSweep: 0 },
            shared: { m1: { id: 'c1', fingerprint: 'f' } },
            deviceSecret: 'secret',
          },
          'meta',
        );
      };
      req.onsuccess = () => {
        req.result.close();
        resolve();
      };
      req.onerror = () => reject(req.error);
    });
    // opening upgrades; nothing is written after it, so what follows is the migration's work
    const store = await openStore(factory, 'old');
    expect((await store.load()).nextSeq).toBe(2);
    store.close();
    const raw = await new Promise<IDBDatabase>((resolve, reject) => {
      const req = factory.open(dbName('old'));
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    try {
      expect(raw.version).toBe(3);
      expect([...raw.objectStoreNames].sort()).toEqual(['events', 'itemVectors', 'ledger', 'memories', 'meta', 'profile']);
      const meta = await new Promise<Record<string, unknown>>((resolve, reject) => {
        const r = raw.transaction('meta').objectStore('meta').get('meta');
        r.onsuccess = () => resolve(r.result as Record<string, unknown>);
        r.onerror = () => reject(r.error);
      });
      expect(meta).not.toHaveProperty('shared');
      expect(meta).not.toHaveProperty('deviceSecret');
      expect(meta.nextSeq).toBe(2);
    } finally {
      raw.close();
    }
  });

  it('caches item vectors per embedder; erase clears them', async () => {
    const factory = new IDBFactory();
    const store = await openStore(factory);
    const v = new Float32Array([0.1, 0.2, 0.3]);
    await store.putItemVectors('e1', [['heat', v]]);
    await store.putItemVectors('e2', new Map([['heat', new Float32Array([9, 9, 9])]]));
    store.close();
    const again = await openStore(factory);
    const got = await again.getItemVector('e1', 'heat');
    expect(got).toBeInstanceOf(Float32Array);
    expect(Array.from(got!)).toEqual(Array.from(v));
    expect(Array.from((await again.getItemVector('e2', 'heat'))!)).toEqual([9, 9, 9]);
    expect(await again.getItemVector('e1', 'fargo')).toBeUndefined();
    await expect(again.putItemVectors('e1', [['x', [1, 2] as unknown as Float32Array]])).rejects.toThrow(TypeError);
    await again.erase();
    expect(await again.getItemVector('e1', 'heat')).toBeUndefined();
  });

  it('profiles are separate databases', async () => {
    const factory = new IDBFactory();
    const a = await openStore(factory, 'alice');
    const b = await openStore(factory, 'bob');
    await a.saveState(sampleState());
    expect(await b.load()).toEqual(createState());
    expect(dbName('alice')).toBe('atomem:alice');
  });

  it('steps aside on versionchange from another tab and reopens lazily', async () => {
    const factory = new IDBFactory();
    const store = await openStore(factory);
    await store.saveState(sampleState());
    // another tab deletes the database: it must not be blocked by our open connection
    await new Promise<void>((resolve, reject) => {
      const req = factory.deleteDatabase(dbName('p'));
      req.onsuccess = () => resolve();
      req.onerror = () => reject(req.error);
      req.onblocked = () => reject(new Error('blocked'));
    });
    expect(await store.load()).toEqual(createState());
    await store.appendEvent(ev(1));
    expect((await store.load()).events).toEqual([ev(1)]);
  });

  it('rejects use after close and bad arguments', async () => {
    const store = await MemoryStore.open({ indexedDB: new IDBFactory() });
    expect(store.profile).toBe('default');
    await expect(store.appendEvent({ ...ev(1), seq: 0 })).rejects.toThrow(/seq/);
    store.close();
    await expect(store.load()).rejects.toThrow(/closed/);
    await expect(MemoryStore.open({ profile: '', indexedDB: new IDBFactory() })).rejects.toThrow(TypeError);
  });
});
