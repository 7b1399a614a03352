import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as fake from 'fake-indexeddb';
import { IDBFactory, IDBObjectStore } from 'fake-indexeddb';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryAgent } from '../../packages/atomem/src/agent/agent.js';
import { ItemVectors } from '../../packages/atomem/src/agent/items.js';
import type { Interaction, Item } from '../../packages/atomem/src/core/types.js';
import { createHashingEmbedder } from '../../packages/atomem/src/embed/hashing.js';
import { INDEX_PATHS, decodeVector, hashToken, type UpsertRequest } from '../../packages/atomem/src/protocol/index-v1.js';
import { createIndexService, type IndexService } from '../../packages/atomem-index/src/service.js';
import { MemoryStore } from '../../packages/atomem/src/store/index.js';
import { HttpIndex, IndexHttpError } from '../../packages/atomem/src/sync/http-index.js';
import { OutboxIndex, SyncClient } from '../../packages/atomem/src/sync/outbox.js';

// The sync client against the REAL index service over real HTTP (fastify on a loopback port).
const { IDBCursor, IDBCursorWithValue, IDBDatabase, IDBIndex, IDBKeyRange, IDBOpenDBRequest, IDBRequest, IDBTransaction } = fake;
Object.assign(globalThis, { IDBCursor, IDBCursorWithValue, IDBDatabase, IDBIndex, IDBKeyRange, IDBObjectStore, IDBOpenDBRequest, IDBRequest, IDBTransaction });

const TEXT: Record<string, string> = {
  Crime: 'A gritty crime thriller about detectives, gangsters and a heist.',
  SciFi: 'A science fiction adventure in outer space with robots and aliens.',
  Romance: 'A tender romance about love, a wedding and a broken heart.',
};
const CATALOG: Item[] = Object.entries(TEXT).flatMap(([genre, text]) =>
  Array.from({ length: 6 }, (_, i) => ({ id: `${genre.toLowerCase()}-${i}`, title: `${genre} film ${i}`, categories: [genre], description: text })),
);
const items = new ItemVectors(createHashingEmbedder({ dim: 64 }), CATALOG);
const EMBEDDER = items.embedderId;

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function startService(dataDir: string, port = 0): Promise<{ service: IndexService; url: string }> {
  // why k1 4: three devices share two memories each with equal vectors across devices, so under
  // the mutual top-k1 rule at k1 2 the random ids break exact ties and a device's memories could
  // all pick the other two's (one device left out: 2 of 12 local runs and once in CI); with 4 candidates
  // every memory of the other uploads is in every list
  const service = createIndexService({ legacyV1: true, dataDir, embedderIds: [EMBEDDER], embedderDims: { [EMBEDDER]: 64 }, minCommunitySize: 2, itemNoise: 0, tau: 0.3, k1: 4, logger: false, rateLimit: false });
  const url = await service.listen({ port, host: '127.0.0.1' });
  return { service, url };
}

function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), 'atomem-sync-'));
  cleanup.push(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

let t = Date.UTC(2025, 0, 1);
const ev = (item: string): Interaction => ({ item, at: (t += 60_000), action: 'purchase' });

async function shopper(name: string, genre: string): Promise<{ agent: MemoryAgent; store: MemoryStore }> {
  const store = await MemoryStore.open({ profile: `${name}-${Math.random()}`, indexedDB: new IDBFactory() });
  cleanup.push(() => store.close());
  const agent = new MemoryAgent({ items, config: { tau: 0.3, minShareEvidence: 1 } });
  for (let i = 0; i < 4; i++) await agent.observe(ev(`${genre}-${i}`));
  return { agent, store };
}

/** A fetch that records every request (URL, headers, body) the client sends. */
function recordingFetch(log: { url: string; headers: Record<string, string>; body: string }[]): typeof fetch {
  return async (input, init) => {
    log.push({ url: String(input), headers: { ...(init?.headers as Record<string, string>) }, body: String(init?.body ?? '') });
    return fetch(input, init);
  };
}

describe('HttpIndex against the real service', () => {
  it('shares, finds communities across devices, and deletes only with the device secret', async () => {
    const { service, url } = await startService(tmp());
    cleanup.push(() => service.close());
    const log: { url: string; headers: Record<string, string>; body: string }[] = [];
    const devices = await Promise.all(['ann', 'bob', 'cat'].map((n) => shopper(n, 'crime')));
    const https = await Promise.all(devices.map(async (d) => new HttpIndex({ url, embedderId: EMBEDDER, secret: await d.store.deviceSecret(), fetch: recordingFetch(log) })));
    for (let i = 0; i < devices.length; i++) await devices[i].agent.sync(https[i], 'items');
    const health = await https[0].health();
    expect(health.memories).toBe(devices.reduce((n, d) => n + d.agent.sharedIds().length, 0));
    // the third device's memories found the other two's: a community with their items
    const views = await https[2].communities(devices[2].agent.sharedIds());
    expect(views.length).toBeGreaterThan(0);
    expect(views[0].members.length).toBeGreaterThan(0);
    expect(Object.keys(views[0].items ?? {}).some((k) => k.startsWith('crime-'))).toBe(true);

    // the payload as it went on the wire: random ids, token hashes, int8 vectors, items only at `items`
    const up = https[0].lastPayload();
    expect(up).toBeDefined();
    const last = log.filter((r) => r.url.endsWith(INDEX_PATHS.upsert)).map((r) => JSON.parse(r.body) as UpsertRequest);
    const m = last[0].memories[0];
    expect(Object.keys(m).sort()).toEqual(['dim', 'embedderId', 'id', 'items', 'tokenHash', 'vector']);
    expect(m.tokenHash).toBe(await hashToken(await https[0].tokenFor(m.id)));
    expect(decodeVector(m.vector)).toHaveLength(64);

    // another device cannot delete ann's copy (its tokens derive from another secret)
    const annId = devices[0].agent.sharedIds()[0];
    await expect(https[1].delete([annId])).rejects.toMatchObject({ name: 'IndexHttpError', status: 403 });
    expect((await https[0].health()).memories).toBe(health.memories);
    await https[0].delete([annId]);
    expect((await https[0].health()).memories).toBe(health.memories - 1);
  });

  it('no stable identifier of a user or device appears in any request', async () => {
    const { service, url } = await startService(tmp());
    cleanup.push(() => service.close());
    const perDevice: { url: string; headers: Record<string, string>; body: string }[][] = [[], []];
    const devices = await Promise.all([shopper('dana', 'scifi'), shopper('eve', 'scifi')]);
    for (let d = 0; d < 2; d++) {
      const secret = await devices[d].store.deviceSecret();
      // two sessions per device (a new HttpIndex per page session), several syncs each, memories changing in between
      for (let session = 0; session < 2; session++) {
        const h = new HttpIndex({ url, embedderId: EMBEDDER, secret, fetch: recordingFetch(perDevice[d]) });
        await devices[d].agent.sync(h, 'embeddings');
        await devices[d].agent.observe(ev(`scifi-${4 + session}`));
        await devices[d].agent.sync(h, 'embeddings');
      }
    }
    const strings = (reqs: typeof perDevice[0]): Set<string> => {
      const out = new Set<string>();
      const walk = (v: unknown): void => {
        if (typeof v === 'string') out.add(v);
        else if (Array.isArray(v)) v.forEach(walk);
        // vectors are content (two shoppers with the same taste send the same vector), not identifiers
        else if (v && typeof v === 'object') Object.entries(v).forEach(([k, x]) => k !== 'vector' && walk(x));
      };
      for (const r of reqs) {
        if (r.body) walk(JSON.parse(r.body));
        out.add(r.headers['x-atomem-client']);
      }
      return out;
    };
    const a = strings(perDevice[0]);
    const b = strings(perDevice[1]);
    // nothing but the protocol's constants and the shared embedder id is common to two devices
    const common = [...a].filter((s) => b.has(s));
    expect(common).toEqual([EMBEDDER]);
    // within one device: the rate-limit token differs per session, and no memory id is reused for a new version
    const tokens = new Set(perDevice[0].map((r) => r.headers['x-atomem-client']));
    expect(tokens.size).toBe(2);
    const ids = perDevice[0].filter((r) => r.url.endsWith(INDEX_PATHS.upsert)).flatMap((r) => (JSON.parse(r.body) as UpsertRequest).memories.map((m) => m.id));
    expect(new Set(ids).size).toBe(ids.length);
    // and the secret itself never travels
    const secret = await devices[0].store.deviceSecret();
    expect(perDevice[0].some((r) => r.body.includes(secret) || Object.values(r.headers).includes(secret))).toBe(false);
  });
});

describe('SyncClient: durable outbox, backoff with jitter', () => {
  it('backoff doubles up to the cap, with equal jitter', () => {
    const lo = new SyncClient({ store: undefined as never, http: undefined as never, baseDelayMs: 1000, maxDelayMs: 8000, random: () => 0 });
    const hi = new SyncClient({ store: undefined as never, http: undefined as never, baseDelayMs: 1000, maxDelayMs: 8000, random: () => 0.999999 });
    expect([1, 2, 3, 4, 5, 9].map((n) => lo.delayFor(n))).toEqual([500, 1000, 2000, 4000, 4000, 4000]);
    expect([1, 2, 3, 4, 5].map((n) => hi.delayFor(n))).toEqual([1000, 2000, 4000, 8000, 8000]);
  });

  it('keeps its outbox through a service outage and drains it afterwards; nothing is sent twice', async () => {
    const dir = tmp();
    let { service, url } = await startService(dir);
    const port = Number(new URL(url).port);
    await service.close(); // the service is down
    const { agent, store } = await shopper('fay', 'romance');
    const http = new HttpIndex({ url, embedderId: EMBEDDER, secret: await store.deviceSecret(), timeoutMs: 2000 });
    const client = new SyncClient({ store, http, baseDelayMs: 60_000 });
    cleanup.push(() => client.stop());
    await agent.sync(new OutboxIndex(store, http), 'embeddings', { pull: false });
    const queued = (await store.outbox()).length;
    expect(queued).toBe(agent.sharedIds().length);
    const down = await client.drain();
    expect(down.error).toBeInstanceOf(IndexHttpError);
    expect(down.error?.retryable).toBe(true);
    expect(down.pending).toBe(queued);
    expect(down.retryInMs).toBeGreaterThanOrEqual(30_000);

    // a forget while offline queues the deletion of its copy too
    const victim = agent.memories()[0].id;
    agent.forget(victim);
    await agent.sync(new OutboxIndex(store, http), 'embeddings', { pull: false });
    expect((await store.outbox()).length).toBe(queued + 1);

    ({ service, url } = await startService(dir, port)); // back up, same address
    cleanup.push(() => service.close());
    const up = await client.drain();
    expect(up).toMatchObject({ sent: queued + 1, dropped: 0, pending: 0, retryInMs: 0 });
    expect(await store.outbox()).toEqual([]);
    expect((await http.health()).memories).toBe(agent.sharedIds().length);
    const again = await client.drain();
    expect(again.sent).toBe(0);
  });

  it('an entry the service refuses for good is dropped and reported, the rest still goes', async () => {
    const { service, url } = await startService(tmp());
    cleanup.push(() => service.close());
    const { agent, store } = await shopper('gus', 'crime');
    const http = new HttpIndex({ url, embedderId: EMBEDDER, secret: await store.deviceSecret() });
    await agent.sync(new OutboxIndex(store, http), 'embeddings', { pull: false });
    // a corrupt queued upload (wrong dimension) among good ones
    await store.enqueue({ kind: 'upload', sharedId: 'corrupt-entry-0001', embedderId: EMBEDDER, vector: new Float32Array(3).fill(0.5), queuedAt: Date.now() });
    const dropped: string[] = [];
    const client = new SyncClient({ store, http, onDropped: (q) => dropped.push(q.entry.sharedId) });
    const r = await client.drain();
    expect(dropped).toEqual(['corrupt-entry-0001']);
    expect(r).toMatchObject({ dropped: 1, pending: 0 });
    expect((await http.health()).memories).toBe(agent.sharedIds().length);
  });
});
