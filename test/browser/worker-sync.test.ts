import { afterEach, describe, expect, inject, it } from 'vitest';
import { createAtomem, type Atomem } from '../../packages/atomem/src/client/index.js';
import type { Item } from '../../packages/atomem/src/core/types.js';
import type { UpsertRequest } from '../../packages/atomem/src/protocol/index-v1.js';
import { profileTracker } from '../fixtures/idb.js';

// Sharing from the real worker to the REAL index service (started by the project's global
// setup), cross-origin over HTTP, with the durable IndexedDB outbox in between.
const url = inject('indexUrl');

const catalog: Item[] = ['Garden', 'Audio'].flatMap((d) =>
  Array.from({ length: 8 }, (_, i) => ({ id: `${d.toLowerCase()}-${i}`, title: `${d} thing ${i}`, categories: [d], description: `${d} ${d} ${d} product` })),
);
const open: Atomem[] = [];
const profiles = profileTracker('sync-', `${Date.now()}`);

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await profiles.deleteAll();
});

async function start(name: string, privacy: 'off' | 'embeddings' | 'items' = 'items'): Promise<Atomem> {
  const profile = profiles.profile(name);
  const a = await createAtomem({ profile, catalog, embedder: 'hashing', config: { tau: 0.3, minShareEvidence: 1 }, index: { url, privacy, syncEvery: 1000 } });
  open.push(a);
  return a;
}

const health = async (): Promise<{ memories: number }> => (await fetch(`${url}/v1/health`)).json();

describe('sync with the shared index from the worker', () => {
  it('uploads anonymized copies, pulls communities, and switching privacy off deletes them and stops uploads', async () => {
    const before = (await health()).memories;
    const [a, b] = await Promise.all([start('a'), start('b')]);
    for (const x of [a, b]) {
      await x.track({ item: 'garden-1', action: 'purchase' });
      await x.track({ item: 'garden-2', action: 'purchase' });
    }
    const rb = await b.sync();
    const ra = await a.sync();
    expect(rb.error).toBeUndefined();
    expect(ra).toMatchObject({ privacy: 'items', pending: 0, dropped: 0 });
    expect(ra.sent).toBeGreaterThan(0);
    expect(ra.communities).toBeGreaterThan(0); // b's copies are in a's community
    const mine = (await health()).memories - before;
    expect(mine).toBe(ra.sent + rb.sent);

    // what went on the wire: ids, token hashes, int8 vectors, item ids (level items) — no text, no profile name
    const payload = await a.lastPayload();
    const body = JSON.stringify(payload?.body);
    expect(payload?.path).toBe('/v1/communities');
    const status = await a.status();
    expect(status.sync).toMatchObject({ url, privacy: 'items', pending: 0, lastError: null });
    expect(body).not.toContain('sync-a');
    const memories = await a.memories();
    for (const m of memories) expect(body).not.toContain(m.content);

    const off = await a.setPrivacy('off');
    expect(off).toMatchObject({ privacy: 'off', pending: 0 });
    expect((await health()).memories).toBe(before + rb.sent);
    await a.track({ item: 'garden-3', action: 'purchase' });
    const quiet = await a.sync();
    expect(quiet.sent).toBe(0); // nothing uploaded at level off
    expect((await health()).memories).toBe(before + rb.sent);
    const upsert = (await a.lastPayload())?.body as UpsertRequest | { deletions: unknown[] };
    expect('deletions' in upsert).toBe(true); // the last thing a sent was the deletion of its copies
  });

  it('erase deletes this shopper\'s copies on the index too', async () => {
    const before = (await health()).memories;
    const a = await start('erase', 'embeddings');
    await a.track({ item: 'audio-1', action: 'purchase' });
    await a.track({ item: 'audio-5', action: 'purchase' });
    const r = await a.sync();
    expect(r.sent).toBeGreaterThan(0);
    expect((await health()).memories).toBe(before + r.sent);
    await a.erase();
    await expect.poll(async () => (await health()).memories, { timeout: 10_000 }).toBe(before);
    expect(await a.memories()).toEqual([]);
    expect((await a.status()).sync?.pending).toBe(0);
  });
});
