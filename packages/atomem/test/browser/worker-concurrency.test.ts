import { afterEach, describe, expect, it, vi } from 'vitest';
import { createAtomem, type Atomem } from '../../src/client/index.js';
import { Engine } from '../../src/worker/engine.js';
import type { Item } from '../../src/core/types.js';
import type { EngineEvent } from '../../src/worker/protocol.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';

// Real Chromium: real module workers (dedicated and shared), real IndexedDB, real Web Locks.

const catalog: Item[] = Array.from({ length: 40 }, (_, i) => {
  const dept = ['Garden', 'Toys', 'Audio', 'Tea'][i % 4];
  return { id: `${dept.toLowerCase()}-${i}`, title: `${dept} product ${i}`, categories: [dept], description: `${dept} ${dept} item number ${i}` };
});

const { profile, deleteAll } = profileTracker('conc-');
const open: Atomem[] = [];

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  vi.restoreAllMocks();
  await new Promise((r) => setTimeout(r, 100)); // let shared workers drop their ports
  await deleteAll();
});

async function start(p: string, extra: Partial<Parameters<typeof createAtomem>[0]> = {}): Promise<Atomem> {
  const a = await createAtomem({ profile: p, catalog, embedder: 'hashing', config: { tau: 0.3 }, ...extra });
  open.push(a);
  return a;
}

describe('durability under crashes and concurrency', () => {
  it('a worker terminated in the middle of a write burst: every acknowledged event is there exactly once', async () => {
    const p = profile('kill');
    const workers: Worker[] = [];
    const a = await start(p, {
      worker: () => {
        const w = new Worker(new URL('../../src/worker/worker.ts', import.meta.url), { type: 'module' });
        workers.push(w);
        return w;
      },
    });
    const acknowledged = new Set<number>();
    const N = 40;
    for (let i = 0; i < N; i++) {
      const at = 10_000 + i;
      // not awaited: a burst of writes queued in the worker
      a.track({ item: catalog[i % catalog.length].id, action: 'click', at }).then(
        () => acknowledged.add(at),
        () => undefined,
      );
    }
    await expect.poll(() => acknowledged.size, { timeout: 20_000, interval: 1 }).toBeGreaterThanOrEqual(8);
    workers[0].terminate(); // the tab's worker dies mid-burst (no chance to finish or clean up)
    const ackedAtKill = new Set(acknowledged);
    expect(ackedAtKill.size).toBeLessThan(N); // really mid-burst

    const b = await start(p); // a new page / restarted worker on the same profile
    const file = await b.export();
    const ats = file.state.events.map((e) => e.at);
    expect(new Set(ats).size).toBe(ats.length); // nothing applied twice
    for (const at of ackedAtKill) expect(ats).toContain(at); // nothing acknowledged lost
    expect(file.state.events.every((e) => !e.pending)).toBe(true); // replayed on start
    // evidence adds up to exactly the events in the store (each applied once)
    const seqs = file.state.events.map((e) => e.seq);
    expect(new Set(seqs).size).toBe(seqs.length);
    console.log(`killed after ${ackedAtKill.size}/${N} acknowledged; ${ats.length} events survived`);
  });

  it('two engines (two tabs) on one profile writing at the same time lose nothing', async () => {
    const p = profile('two-tabs');
    const [a, b] = await Promise.all([start(p), start(p)]);
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 15; i++) {
      writes.push(a.track({ item: catalog[(2 * i) % catalog.length].id, action: 'click', at: 20_000 + 2 * i }));
      writes.push(b.track({ item: catalog[(2 * i + 1) % catalog.length].id, action: 'cart', at: 20_000 + 2 * i + 1 }));
    }
    await Promise.all(writes);
    const c = await start(p);
    const events = (await c.export()).state.events;
    expect(events.map((e) => e.at).sort((x, y) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => 20_000 + i));
    expect(new Set(events.map((e) => e.seq)).size).toBe(30);
    // each engine sees the other's writes on its next call
    const itemsOf = async (x: Atomem) => new Set((await x.memories()).flatMap((m) => m.items));
    const fromA = await itemsOf(a);
    const fromB = await itemsOf(b);
    expect(fromA).toEqual(fromB);
  });

  it('shared: two clients share one SharedWorker engine (one model, one writer)', async () => {
    const p = profile('shared');
    const a = await start(p, { shared: true });
    const b = await start(p, { shared: true });
    expect((await a.status()).shared).toBe(true);
    const seenByB: string[] = [];
    b.on('memory', (e) => seenByB.push(e.op));
    await a.track({ item: 'garden-0', action: 'purchase', at: 1 });
    await a.track({ item: 'garden-4', action: 'purchase', at: 2 });
    const mb = await b.memories();
    expect(mb.flatMap((m) => m.items)).toEqual(expect.arrayContaining(['garden-0', 'garden-4']));
    await expect.poll(() => seenByB.length).toBeGreaterThan(0); // lifecycle events reach every tab
    a.dispose();
    // the other tab keeps working after one leaves
    await b.track({ item: 'tea-3', action: 'click', at: 3 });
    expect((await b.export()).state.events).toHaveLength(3);
  });

  it('storage quota exceeded: the engine reports it, keeps working in memory, and the database is not corrupted', async () => {
    const p = profile('quota');
    const engine = new Engine(); // the engine class itself, on this page, so the test can inject the failure
    const events: EngineEvent[] = [];
    engine.subscribe((e) => void events.push(e));
    await engine.init({ profile: p, catalog, embedder: 'hashing', config: { tau: 0.3 } });
    await engine.track({ item: 'audio-2', action: 'click', at: 1 });
    const before = await engine.export();

    const put = IDBObjectStore.prototype.put;
    vi.spyOn(IDBObjectStore.prototype, 'put').mockImplementation(function (this: IDBObjectStore, ...args: Parameters<IDBObjectStore['put']>) {
      if (this.name === 'memories' || this.name === 'events') throw new DOMException('The quota has been exceeded.', 'QuotaExceededError');
      return put.apply(this, args);
    });
    await engine.track({ item: 'audio-6', action: 'purchase', at: 2 }); // no throw: degraded
    await engine.track({ item: 'audio-10', action: 'purchase', at: 3 });
    expect(events.some((e) => e.type === 'error' && e.payload.name === 'StorageQuotaError')).toBe(true);
    expect((await engine.status()).storage.degraded).toBe(true);
    expect((await engine.memories()).flatMap((m) => m.items)).toEqual(expect.arrayContaining(['audio-2', 'audio-6', 'audio-10']));
    expect((await engine.recommend(['audio-14', 'toys-1']))[0].id).toBe('audio-14');
    vi.restoreAllMocks();
    await engine.closeSession();

    // the database still holds the last good state, intact and loadable
    const again = new Engine();
    await again.init({ profile: p, catalog, embedder: 'hashing', config: { tau: 0.3 } });
    expect((await again.export()).state).toEqual(before.state);
    await again.closeSession();
  });
});
