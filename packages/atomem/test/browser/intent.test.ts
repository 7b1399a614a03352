import { afterEach, describe, expect, inject, it, vi } from 'vitest';
import { createAtomem, type Atomem } from '../../src/client/index.js';
import { Engine } from '../../src/worker/engine.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { SYNC_CATALOG as catalog } from '../../../../test/fixtures/sync-catalog.js';
import { dbName } from '../../src/store/index.js';

// Real Chromium, real IndexedDB, a real Worker and the REAL index service (global setup): the
// stated intent ranks, crosses the worker RPC with its typed errors, and is neither stored nor sent.
const url = inject('indexUrl');
const { profile, deleteAll } = profileTracker('intent-');
const open: Atomem[] = [];

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  vi.restoreAllMocks();
  await deleteAll();
});

/** Every record of every object store of a profile's database, as one string (typed arrays as numbers). */
async function dumpDatabase(p: string): Promise<string> {
  const db = await new Promise<IDBDatabase>((resolve, reject) => {
    const req = indexedDB.open(dbName(p));
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
  const out: unknown[] = [];
  for (const name of Array.from(db.objectStoreNames)) {
    const rows = await new Promise<unknown[]>((resolve, reject) => {
      const req = db.transaction(name).objectStore(name).getAll();
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    const keys = await new Promise<IDBValidKey[]>((resolve, reject) => {
      const req = db.transaction(name).objectStore(name).getAllKeys();
      req.onsuccess = () => resolve(req.result);
      req.onerror = () => reject(req.error);
    });
    out.push({ name, keys, rows });
  }
  db.close();
  return JSON.stringify(out, (_k, v) => (ArrayBuffer.isView(v) ? Array.from(v as Float32Array) : v));
}

const MARKER = 'Zanzibar-marker';

describe('recommend with a stated intent', () => {
  it('through the worker: the intent re-ranks with explanations, bad intents reject typed, and IndexedDB never holds it', async () => {
    const p = profile('worker');
    const a = await createAtomem({ profile: p, catalog, embedder: 'hashing', config: { tau: 0.3 } });
    open.push(a);
    for (const [i, item] of ['garden-1', 'garden-2', 'garden-3', 'audio-1'].entries())
      await a.track({ item, action: i === 3 ? 'click' : 'purchase', at: 1000 * (i + 1) });
    const candidates = ['garden-5', 'audio-5', 'garden-6', 'audio-6'];
    const plain = await a.recommend(candidates);
    expect(plain[0].id.startsWith('garden')).toBe(true);
    const asked = await a.recommend(candidates, { intent: `Audio for my ${MARKER} trip` });
    expect(asked[0].id.startsWith('audio')).toBe(true);
    expect(asked[0].explanations[0]).toMatch(/^(You asked for “Audio for my Zanzibar-marker trip”;|Matches what you asked for)/);
    const sel = await a.intentMemories('Garden garden');
    expect(sel.memories.length).toBeGreaterThan(0);
    expect(sel.memories[0].content).toMatch(/Garden/i);

    for (const [bad, reason] of [
      [42, 'type'],
      ['  \u0000 ', 'empty'],
      ['y'.repeat(201), 'too-long'],
    ] as const) {
      const err = await a.recommend(candidates, { intent: bad as string }).then(
        () => null,
        (e: unknown) => e as Error & { reason?: string },
      );
      expect(err?.name).toBe('InvalidIntentError');
      expect(err?.reason).toBe(reason);
    }
    // the engine still answers after the refusals
    expect(await a.recommend(candidates)).toHaveLength(4);
    await a.track({ item: 'garden-4', action: 'click', at: 9000 }); // a save after the intent was used
    const stored = await dumpDatabase(p);
    expect(stored).toContain('garden-4'); // the dump really reads the stored state
    expect(stored).not.toContain(MARKER);
    expect(stored).not.toContain('Zanzibar');
  });

  it('the engine sends nothing of the intent: every request to the real index service, bodies included', async () => {
    const requests: string[] = [];
    const realFetch = globalThis.fetch.bind(globalThis);
    vi.spyOn(globalThis, 'fetch').mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
      const req = new Request(input, init);
      requests.push(`${req.method} ${req.url} ${await req.clone().text()}`);
      return realFetch(req);
    });
    const p = profile('engine');
    const engine = new Engine(); // the worker's engine on this page, so its fetches can be watched
    await engine.init({
      profile: p,
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      index: { url, privacy: 'contribute', syncEvery: 1, attesterUrl: `${url}/attester`, reportDelay: 0 },
    });
    await engine.track({ item: 'audio-1', action: 'purchase', at: 1 });
    await engine.track({ item: 'audio-2', action: 'purchase', at: 2 });
    const ranked = await engine.recommend(['garden-5', 'audio-5', 'garden-6'], { intent: `${MARKER}: audio for the garden` });
    expect(ranked).toHaveLength(3);
    await engine.intentMemories(`${MARKER} audio`);
    await engine.track({ item: 'garden-1', action: 'click', at: 3 });
    await engine.sync();
    await expect.poll(async () => (await engine.status()).sync?.reportedEpoch ?? null, { timeout: 10_000 }).not.toBeNull();
    expect(requests.some((r) => r.startsWith('POST') && r.includes('/v2/reports'))).toBe(true); // the report really went out
    expect(requests.length).toBeGreaterThan(1);
    for (const r of requests) expect(r).not.toContain('Zanzibar');
    expect(await dumpDatabase(p)).not.toContain('Zanzibar');
    await engine.closeSession();
  });
});
