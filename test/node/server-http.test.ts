// The index service over real HTTP (fastify on port 0, global fetch): health, validation of
// every body, errors that never change state, deletion tokens, replay, rate limits, logs.
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  INDEX_LIMITS,
  INDEX_PATHS,
  decodeVector,
  encodeVector,
  hashToken,
  quantize,
  type WireCommunity,
  type WireMemory,
} from '../../packages/atomem/src/protocol/index-v1.js';
import { CLIENT_HEADER, createIndexService, type IndexService, type IndexServiceOptions } from '../../packages/atomem-index/src/service.js';
import { DataDirInUseError, MemoryStore } from '../../packages/atomem-index/src/store.js';
import { clustered, unit } from '../fixtures/index-wire.js';

const EMB = 'test-embedder@1/int8';
const DIM = 8;
const E2 = 'other-embedder@2/int8';
/** The registry of embedder dimensions, fixed by configuration. */
const DIMS = { [EMB]: DIM, [E2]: 12, 'second@1': DIM };

const dirs: string[] = [];
const services: IndexService[] = [];
afterEach(async () => {
  while (services.length) await services.pop()!.close();
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'atomem-server-'));
  dirs.push(d);
  return d;
}

async function start(opts: Partial<IndexServiceOptions> = {}, dataDir = tempDir()) {
  const svc = createIndexService({ legacyV1: true, dataDir, embedderIds: [EMB], embedderDims: DIMS, itemNoise: 0, rateLimit: false, metricsToken: METRICS_TOKEN, ...opts });
  services.push(svc);
  await svc.ready;
  const url = await svc.listen({ port: 0 });
  return { svc, url, dataDir };
}

interface Res {
  status: number;
  type: string | null;
  body: any;
}

async function request(url: string, method: 'GET' | 'POST', body?: unknown, headers: Record<string, string> = {}): Promise<Res> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // keep text
  }
  return { status: res.status, type: res.headers.get('content-type'), body: parsed };
}

const METRICS_TOKEN = 'metrics-token-for-tests-0123';
const metricsAuth = { authorization: `Bearer ${METRICS_TOKEN}` };
const token = () => randomBytes(16).toString('base64url');
let idCounter = 0;
const newId = () => `mem-${(idCounter++).toString().padStart(6, '0')}-${randomBytes(3).toString('hex')}`;

async function owned(vector: Float32Array, extra: Partial<WireMemory> = {}) {
  const t = token();
  const m: WireMemory = { id: newId(), tokenHash: await hashToken(t), embedderId: EMB, dim: vector.length, vector: encodeVector(vector), ...extra };
  return { m, token: t };
}

/** Everything that must not change on bad input. */
function state(svc: IndexService, embedders = [EMB]) {
  return {
    rows: svc.store.all(),
    links: svc.store.links(),
    partitions: embedders.map((e) => svc.partition(e)),
    dims: [...svc.store.embedderDims()],
  };
}

/** Until health answers 200 (the background rebuild after a failed write has finished). */
async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if ((await request(url + INDEX_PATHS.health, 'GET')).status === 200) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the service did not become ready');
}

describe('index service: health and basics', () => {
  it('health answers 200 JSON once ready, with the protocol fields', async () => {
    const { url } = await start({ minCommunitySize: 4, itemNoise: 0.5 });
    const h = await request(url + INDEX_PATHS.health, 'GET');
    expect(h.status).toBe(200);
    expect(h.type).toMatch(/^application\/json/);
    expect(h.body).toEqual({ status: 'ok', version: 1, embedderIds: [EMB], memories: 0, communities: 0, minCommunitySize: 4, itemNoise: 0.5, storage: { state: 'ok' } });
    // Metrics are a side channel on other shoppers' activity: only with the token.
    expect((await request(url + INDEX_PATHS.metrics, 'GET')).status).toBe(404);
    expect((await request(url + INDEX_PATHS.metrics, 'GET', undefined, { authorization: 'Bearer wrong-token-wrong-token' })).status).toBe(404);
    const m = await request(url + INDEX_PATHS.metrics, 'GET', undefined, metricsAuth);
    expect(m.status).toBe(200);
    expect(m.body).toMatchObject({ memories: 0, communities: 0, requests: { health: 1 } });
    expect(m.body.rssBytes).toBeGreaterThan(0);
    const nf = await request(url + '/v1/nothing', 'GET');
    expect(nf.status).toBe(404);
    expect(nf.body).toEqual({ error: 'not_found', message: expect.stringContaining('/v1/nothing') });
  });

  it('answers 503 not_ready while loading the stored memories, 200 once ready', async () => {
    const dataDir = tempDir();
    const seed = MemoryStore.open(dataDir);
    const gen = clustered(9, 4, 3, 0.2);
    seed.upsert(
      Array.from({ length: 10_000 }, (_, i) => ({ id: `seeded-${i}`, tokenHash: 'a'.repeat(64), embedderId: EMB, dim: 4, vector: quantize(gen()), items: undefined })),
      [],
      [[EMB, 4]],
    );
    seed.close();
    const svc = createIndexService({ legacyV1: true, dataDir, embedderIds: [EMB], embedderDims: { [EMB]: 4 }, rateLimit: false });
    services.push(svc);
    const early = await svc.app.inject({ method: 'GET', url: INDEX_PATHS.health });
    expect(early.statusCode).toBe(503);
    expect(early.json()).toEqual({ error: 'not_ready', message: expect.stringMatching(/loading/) });
    const q = await svc.app.inject({ method: 'POST', url: INDEX_PATHS.communities, payload: { v: 1, embedderId: EMB, ids: [] } });
    expect(q.statusCode).toBe(503);
    await svc.ready;
    const h = await svc.app.inject({ method: 'GET', url: INDEX_PATHS.health });
    expect(h.statusCode).toBe(200);
    expect(h.json()).toMatchObject({ status: 'ok', memories: 10_000 });
  });

  it('a file of the old link rule (links new → older, no linkRule marker) is relinked once on load', async () => {
    const dataDir = tempDir();
    const seed = MemoryStore.open(dataDir);
    const gen = clustered(5, DIM, 3, 0.2);
    const rows = Array.from({ length: 40 }, (_, i) => ({ id: `old-${String(i).padStart(2, '0')}`, tokenHash: 'a'.repeat(64), embedderId: EMB, dim: DIM, vector: quantize(gen()), items: undefined }));
    // the old rule's links: each memory to the one before it (one direction only)
    seed.upsert(rows, rows.slice(1).map((r, i) => ({ src: r.id, dst: rows[i].id, sim: 0.9 })), [[EMB, DIM]]);
    seed.close();
    const first = await start({}, dataDir);
    const graph = first.svc.index(EMB)!.graph;
    expect(first.svc.store.getMeta('linkRule')).toBe('mutual-top-k1');
    // every stored list is the live candidate list; the links are derived anew (exact at this size)
    const stored = first.svc.store.links();
    expect(stored).toEqual(rows.flatMap((r) => graph.candidates(r.id).map((n) => ({ src: r.id, dst: n.id, sim: n.sim }))).sort((a, b) => (a.src < b.src ? -1 : a.src > b.src ? 1 : a.dst < b.dst ? -1 : 1)));
    expect(graph.edges()).toEqual(graph.recomputeFromScratch().edges);
    expect(graph.edgeTotal).toBeGreaterThan(0);
    const edges = graph.edges();
    await first.svc.close();
    services.splice(services.indexOf(first.svc), 1);
    // a second start restores the lists without relinking
    const second = await start({}, dataDir);
    expect(second.svc.index(EMB)!.graph.edges()).toEqual(edges);
    expect(second.svc.store.links()).toEqual(stored);
  });

  it('stores uploads durably, releases communities of ≥ k without the asker\'s vectors', async () => {
    const { svc, url } = await start({ minCommunitySize: 3 });
    const gen = clustered(1, DIM, 2, 0.05);
    const a = await Promise.all([0, 0, 0].map(() => owned(gen(0), { items: ['sku-1', 'sku-2'] })));
    const b = await owned(gen(0), { items: ['sku-1'] });
    for (const batch of [[a[0].m], [a[1].m], [a[2].m, (await owned(gen(1))).m]]) {
      const r = await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: batch });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ accepted: batch.length });
    }
    expect(svc.store.count()).toBe(4);
    // Two members only in the cluster of b's memory so far? a0..a2 form a 3-community.
    let c = await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [a[0].m.id] });
    expect(c.status).toBe(200);
    expect(c.body.communities).toHaveLength(1);
    const com: WireCommunity = c.body.communities[0];
    expect(com.size).toBe(3);
    expect(com.ownIds).toEqual([a[0].m.id]);
    expect(com.members).toHaveLength(2);
    expect(com.members).not.toContain(a[0].m.vector);
    expect(decodeVector(com.prototype)).toHaveLength(DIM);
    expect(com.items).toEqual({ 'sku-1': 3, 'sku-2': 3 });
    // The lone memory of cluster 1 is in no releasable community.
    c = await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [b.m.id] });
    expect(c.body).toEqual({ communities: [] });
    const h = await request(url + INDEX_PATHS.health, 'GET');
    expect(h.body).toMatchObject({ memories: 4, communities: 1 });
  });

  it('same id + same tokenHash replaces (idempotent); delete needs the token; unknown ids count 0', async () => {
    const { svc, url } = await start();
    const gen = clustered(2, DIM, 3, 0.1);
    const x = await owned(gen(0));
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [x.m] })).status).toBe(200);
    const moved = { ...x.m, vector: encodeVector(gen(1)), items: ['sku-9'] };
    const r = await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [moved] });
    expect(r).toMatchObject({ status: 200, body: { accepted: 1 } });
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [moved] })).body).toEqual({ accepted: 1 });
    const rows = svc.store.all();
    expect(rows).toHaveLength(1);
    expect(encodeVector(Array.from(rows[0].vector, (v) => v / 127))).toBe(moved.vector);
    expect(rows[0].items).toEqual(['sku-9']);

    const unknown = await request(url + INDEX_PATHS.delete, 'POST', { v: 1, deletions: [{ id: 'never-stored-1', token: token() }] });
    expect(unknown).toMatchObject({ status: 200, body: { deleted: 0 } });
    const del = await request(url + INDEX_PATHS.delete, 'POST', {
      v: 1,
      deletions: [
        { id: x.m.id, token: x.token },
        { id: x.m.id, token: x.token },
        { id: 'never-stored-2', token: token() },
      ],
    });
    expect(del).toMatchObject({ status: 200, body: { deleted: 1 } });
    expect(svc.store.count()).toBe(0);
    expect(svc.index(EMB)!.graph.size).toBe(0);
    // The id is free again: another device may now use it with its own token.
    const again = await owned(gen(0), { id: x.m.id });
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [again.m] })).status).toBe(200);
  });

  it('serves several embedders, each with its own dimension and communities', async () => {
    const { svc, url } = await start({ embedderIds: [EMB, E2], minCommunitySize: 2 });
    const g8 = clustered(3, 8, 1, 0.05);
    const g12 = clustered(4, 12, 1, 0.05);
    const a = await Promise.all([0, 1].map(() => owned(g8())));
    const b = await Promise.all([0, 1].map(() => owned(g12(), { embedderId: E2 })));
    for (const m of [a[0].m, b[0].m, a[1].m, b[1].m]) expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [m] })).status).toBe(200);
    expect(svc.store.embedderDims()).toEqual(new Map([[EMB, 8], [E2, 12]]));
    const ca = await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [a[0].m.id, b[0].m.id] });
    expect(ca.body.communities).toHaveLength(1);
    expect(ca.body.communities[0]).toMatchObject({ size: 2, ownIds: [a[0].m.id] });
    const cb = await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: E2, ids: [b[1].m.id] });
    expect(decodeVector(cb.body.communities[0].prototype)).toHaveLength(12);
    // A memory re-uploaded (same token) under the other embedder moves spaces.
    const moved = { ...a[0].m, embedderId: E2, dim: 12, vector: encodeVector(g12()) };
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [moved] })).status).toBe(200);
    expect(svc.index(EMB)!.graph.has(a[0].m.id)).toBe(false);
    expect(svc.index(E2)!.graph.has(a[0].m.id)).toBe(true);
    expect(svc.partition(E2).flat()).toHaveLength(3);
  });

  it('a second service on the same data dir is refused while the first runs', async () => {
    const { dataDir } = await start();
    expect(() => createIndexService({ legacyV1: true, dataDir, embedderIds: [EMB], embedderDims: DIMS, logger: false })).toThrow(DataDirInUseError);
    // A service that fails to build releases the data dir.
    const other = tempDir();
    expect(() => createIndexService({ legacyV1: true, dataDir: other, embedderIds: [EMB], embedderDims: DIMS, itemNoise: -1 })).toThrow(/itemNoise/);
    await start({}, other);
  });
});

describe('index service: bad input never changes state', () => {
  it('answers 4xx {error, message} naming the field, for every kind of bad request', async () => {
    const { svc, url } = await start({ embedderIds: [EMB, 'second@1'] });
    const gen = clustered(5, DIM, 2, 0.1);
    const base = await Promise.all([0, 0, 1].map((c) => owned(gen(c), { items: ['sku-1'] })));
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: base.map((b) => b.m) })).status).toBe(200);
    const good = (await owned(gen(0))).m;
    const vec = (n: number) => encodeVector(unit(Array.from({ length: n }, (_, i) => i + 1)));
    const many = (n: number) => Array.from({ length: n }, (_, i) => ({ ...good, id: `bulk-${String(i).padStart(6, '0')}` }));
    const U = INDEX_PATHS.upsert;
    const D = INDEX_PATHS.delete;
    const C = INDEX_PATHS.communities;
    type Case = [name: string, path: string, body: unknown, status: number, code: string, message: RegExp, headers?: Record<string, string>];
    const cases: Case[] = [
      ['malformed JSON', U, '{"v":1,"memories":[', 400, 'bad_request', /not valid JSON/],
      ['NaN literal', U, '{"v":1,"memories":[{"dim":NaN}]}', 400, 'bad_request', /not valid JSON/],
      ['empty body', U, '', 400, 'bad_request', /empty/],
      ['proto poisoning', U, '{"v":1,"memories":[],"__proto__":{"x":1}}', 400, 'bad_request', /JSON/],
      ['text/plain body', U, { raw: 'hello' }, 400, 'bad_request', /body must be object/, { 'content-type': 'text/plain' }],
      ['unsupported media type', U, { raw: '<x/>' }, 415, 'unsupported_media_type', /application\/json/, { 'content-type': 'application/xml' }],
      ['wrong version', U, { v: 2, memories: [good] }, 400, 'bad_request', /body\/v must be equal to constant/],
      ['missing memories', U, { v: 1 }, 400, 'bad_request', /must have required property 'memories'/],
      ['extra top-level field', U, { v: 1, memories: [good], user: 'alice' }, 400, 'bad_request', /additional properties/],
      ['extra memory field', U, { v: 1, memories: [{ ...good, deviceId: 'd1' }] }, 400, 'bad_request', /memories\/0 must NOT have additional properties/],
      ['dim as string', U, { v: 1, memories: [{ ...good, dim: '8' }] }, 400, 'bad_request', /memories\/0\/dim must be integer/],
      ['dim "NaN"', U, { v: 1, memories: [{ ...good, dim: 'NaN' }] }, 400, 'bad_request', /memories\/0\/dim must be integer/],
      ['dim null', U, { v: 1, memories: [{ ...good, dim: null }] }, 400, 'bad_request', /memories\/0\/dim must be integer/],
      ['dim 1e400 (Infinity)', U, `{"v":1,"memories":[${JSON.stringify({ ...good, dim: 0 }).replace('"dim":0', '"dim":1e400')}]}`, 400, 'bad_request', /dim must be integer/],
      ['dim fractional', U, { v: 1, memories: [{ ...good, dim: 7.5 }] }, 400, 'bad_request', /dim must be integer/],
      ['dim above maxDim', U, { v: 1, memories: [{ ...good, dim: INDEX_LIMITS.maxDim + 1 }] }, 400, 'bad_request', /dim must be <= 2048/],
      ['vector null', U, { v: 1, memories: [{ ...good, vector: null }] }, 400, 'bad_request', /memories\/0\/vector must be string/],
      ['vector as number array', U, { v: 1, memories: [{ ...good, vector: [1, 2, 3] }] }, 400, 'bad_request', /vector must be string/],
      ['bad base64', U, { v: 1, memories: [good, { ...good, id: 'other-id-1', vector: '@@@@####' }] }, 400, 'bad_request', /memories\[1\]\.vector is not valid base64/],
      ['unpadded base64', U, { v: 1, memories: [{ ...good, vector: good.vector.replace(/=+$/, '') }] }, 400, 'bad_request', /memories\[0\]\.vector is not valid base64/],
      ['decoded length ≠ dim', U, { v: 1, memories: [good, { ...good, id: 'other-id-2', vector: vec(7) }] }, 400, 'wrong_dimension', /memories\[1\]\.vector decodes to 7 int8 values but memories\[1\]\.dim is 8/],
      ['dim ≠ index dimension', U, { v: 1, memories: [{ ...good, dim: 16, vector: vec(16) }] }, 400, 'wrong_dimension', /memories\[0\]\.dim is 16 but this index serves 8-dimensional/],
      ['two dims for a new embedder in one batch', U, { v: 1, memories: [{ ...good, embedderId: 'second@1' }, { ...good, id: 'other-id-3', embedderId: 'second@1', dim: 4, vector: vec(4) }] }, 400, 'wrong_dimension', /memories\[1\]\.dim is 4 but this index serves 8/],
      ['zero vector', U, { v: 1, memories: [{ ...good, vector: encodeVector(new Float32Array(DIM)) }] }, 400, 'bad_request', /memories\[0\]\.vector is all zeros/],
      ['unknown embedder', U, { v: 1, memories: [good, { ...good, id: 'other-id-4', embedderId: 'nope@0' }] }, 400, 'unknown_embedder', /memories\[1\]\.embedderId is not served/],
      ['empty embedder id', U, { v: 1, memories: [{ ...good, embedderId: '' }] }, 400, 'bad_request', /embedderId must NOT have fewer than 1 characters/],
      ['short id', U, { v: 1, memories: [{ ...good, id: 'abc' }] }, 400, 'bad_request', /memories\/0\/id must match pattern/],
      ['id with bad chars', U, { v: 1, memories: [{ ...good, id: 'abc def ghi' }] }, 400, 'bad_request', /memories\/0\/id must match pattern/],
      ['tokenHash not hex', U, { v: 1, memories: [{ ...good, tokenHash: 'Z'.repeat(64) }] }, 400, 'bad_request', /tokenHash must match pattern/],
      ['empty item id', U, { v: 1, memories: [{ ...good, items: [''] }] }, 400, 'bad_request', /items\/0 must match pattern/],
      ['item id with NUL', U, { v: 1, memories: [{ ...good, items: ['sku\u0000x'] }] }, 400, 'bad_request', /items\/0 must match pattern/],
      ['item id with a bidi override', U, { v: 1, memories: [{ ...good, items: ['sku\u202Egpj.exe'] }] }, 400, 'bad_request', /items\/0 must match pattern/],
      ['item id with markup', U, { v: 1, memories: [{ ...good, items: ['<img src=x onerror=alert(1)>'] }] }, 400, 'bad_request', /items\/0 must match pattern/],
      ['item id with a lone surrogate', U, `{"v":1,"memories":[${JSON.stringify({ ...good, items: ['X'] }).replace('"X"', '"sku\\ud800"')}]}`, 400, 'bad_request', /items\/0 must match pattern/],
      ['item id with a space', U, { v: 1, memories: [{ ...good, items: ['sku 1'] }] }, 400, 'bad_request', /items\/0 must match pattern/],
      ['duplicate ids in a batch', U, { v: 1, memories: [good, { ...good }] }, 400, 'bad_request', /memories\[1\]\.id repeats memories\[0\]\.id/],
      ['replay with another tokenHash', U, { v: 1, memories: [good, { ...base[0].m, tokenHash: 'a'.repeat(64) }] }, 409, 'conflict', /memories\[1\]\.id is already stored with another tokenHash/],
      ['batch above maxBatch', U, { v: 1, memories: many(INDEX_LIMITS.maxBatch + 1) }, 413, 'too_large', /memories must NOT have more than 256 items/],
      ['items above maxItems', U, { v: 1, memories: [{ ...good, items: Array.from({ length: 65 }, (_, i) => `sku-${i}`) }] }, 413, 'too_large', /items must NOT have more than 64 items/],
      ['body above maxBodyBytes', U, { v: 1, memories: [good], pad: 'x'.repeat(INDEX_LIMITS.maxBodyBytes) }, 413, 'too_large', /exceeds 1048576 bytes/],
      ['delete: wrong token (with a valid one)', D, { v: 1, deletions: [{ id: base[1].m.id, token: base[1].token }, { id: base[0].m.id, token: token() }] }, 403, 'forbidden', /deletions\[1\]\.token is not the deletion token/],
      ['delete: token too short', D, { v: 1, deletions: [{ id: base[0].m.id, token: 'short' }] }, 400, 'bad_request', /deletions\/0\/token must match pattern/],
      ['delete: token hash instead of token field', D, { v: 1, deletions: [{ id: base[0].m.id, tokenHash: base[0].m.tokenHash }] }, 400, 'bad_request', /deletions\/0/],
      ['delete: above maxBatch', D, { v: 1, deletions: Array.from({ length: 257 }, (_, i) => ({ id: `del-${String(i).padStart(6, '0')}`, token: token() })) }, 413, 'too_large', /deletions must NOT have more than 256/],
      ['communities: unknown embedder', C, { v: 1, embedderId: 'nope@0', ids: [base[0].m.id] }, 400, 'unknown_embedder', /embedderId is not served/],
      ['communities: bad id', C, { v: 1, embedderId: EMB, ids: ['x'] }, 400, 'bad_request', /ids\/0 must match pattern/],
      ['communities: ids above maxIds', C, { v: 1, embedderId: EMB, ids: Array.from({ length: 513 }, (_, i) => `q-${String(i).padStart(8, '0')}`) }, 413, 'too_large', /ids must NOT have more than 512/],
      ['communities: ids null', C, { v: 1, embedderId: EMB, ids: null }, 400, 'bad_request', /ids must be array/],
    ];
    const before = state(svc, [EMB, 'second@1']);
    for (const [name, path, body, status, code, message, headers] of cases) {
      const raw = body !== null && typeof body === 'object' && 'raw' in body ? (body as { raw: string }).raw : body;
      const r = await request(url + path, 'POST', raw, headers);
      expect({ name, status: r.status, error: r.body?.error }).toEqual({ name, status, error: code });
      expect(r.type, name).toMatch(/^application\/json/);
      expect(Object.keys(r.body).sort(), name).toEqual(['error', 'message']);
      expect(r.body.message, name).toMatch(message);
      expect(state(svc, [EMB, 'second@1']), name).toEqual(before);
    }
    const m = await request(url + INDEX_PATHS.metrics, 'GET', undefined, metricsAuth);
    expect(m.body.rejected).toMatchObject({ bad_request: expect.any(Number), wrong_dimension: 3, unknown_embedder: 2, conflict: 1, forbidden: 1, too_large: 5 });
    // The good memory of those batches is still accepted on its own.
    expect((await request(url + U, 'POST', { v: 1, memories: [good] })).status).toBe(200);
  });
});

describe('index service: failures and noise', () => {
  it('a failed write answers 500, leaves memory and disk as they were, and the service keeps working', async () => {
    const { svc, url } = await start({ minCommunitySize: 2 });
    const gen = clustered(7, DIM, 1, 0.05);
    const a = await owned(gen());
    const b = await owned(gen());
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [a.m] })).status).toBe(200);
    const before = state(svc);
    const store = svc.store as { upsert: unknown; delete: unknown };
    const realUpsert = store.upsert;
    const realDelete = store.delete;
    store.upsert = () => {
      throw new Error('disk full');
    };
    store.delete = () => {
      throw new Error('disk full');
    };
    const r1 = await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [b.m] });
    expect(r1).toMatchObject({ status: 500, body: { error: 'internal', message: expect.stringMatching(/no effect/) } });
    // The rebuild from SQLite runs in the background (the event loop is not blocked): 503 meanwhile, then 500 again.
    await waitReady(url);
    const r2 = await request(url + INDEX_PATHS.delete, 'POST', { v: 1, deletions: [{ id: a.m.id, token: a.token }] });
    expect(r2.status).toBe(500);
    store.upsert = realUpsert;
    store.delete = realDelete;
    await waitReady(url);
    // The in-memory index was rebuilt from disk: b is not in it, a still is.
    expect(state(svc)).toEqual(before);
    expect(svc.index(EMB)!.graph.has(b.m.id)).toBe(false);
    expect(svc.index(EMB)!.graph.has(a.m.id)).toBe(true);
    expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [b.m] })).status).toBe(200);
    const c = await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [a.m.id] });
    expect(c.body.communities[0]).toMatchObject({ size: 2, ownIds: [a.m.id] });
  });

  it('noises released item counts (Laplace, b = itemNoise) deterministically per community state', async () => {
    // why k1 = 5: links are mutual top-k1; six near-identical memories form one community of
    // six only when each may list the five others
    const { url } = await start({ minCommunitySize: 3, itemNoise: 1, k1: 5 });
    const gen = clustered(8, DIM, 1, 0.05);
    const ms = await Promise.all(Array.from({ length: 6 }, () => owned(gen(), { items: ['sku-a', 'sku-b', 'sku-c'] })));
    for (const x of ms) expect((await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [x.m] })).status).toBe(200);
    const ask = () => request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [ms[0].m.id] });
    const first = (await ask()).body.communities[0] as WireCommunity;
    expect(first.size).toBe(6);
    const values = Object.values(first.items ?? {});
    expect(values.length).toBeGreaterThan(0);
    expect(values.some((v) => v !== 6)).toBe(true); // exact counts would all be 6
    // Asking again cannot average the noise away: same state, same answer.
    expect((await ask()).body.communities[0].items).toEqual(first.items);
  });
});

describe('index service: rate limits and logs', () => {
  it('limits per client address: rotating the client header or forwarding headers gets no new bucket', async () => {
    const { url } = await start({ rateLimit: { max: 3, timeWindow: 60_000 } });
    const q = (h: Record<string, string>) => request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [] }, h);
    for (let i = 0; i < 3; i++) expect((await q({ [CLIENT_HEADER]: `client-token-${i}aaaa` })).status).toBe(200);
    const limited = await q({ [CLIENT_HEADER]: 'client-token-zzzz' });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ error: 'rate_limited', message: expect.stringMatching(/rate limit exceeded .*per client address/) });
    expect((await q({})).status).toBe(429);
    // Spoofed forwarding headers do not create new buckets (trustProxy is off).
    expect((await q({ 'x-forwarded-for': '10.9.8.7' })).status).toBe(429);
    // Health is never rate limited.
    expect((await request(url + INDEX_PATHS.health, 'GET')).status).toBe(200);
  });

  it('with trustProxy, the address the proxy reports keys the limit (and only then)', async () => {
    const { url } = await start({ rateLimit: { max: 2, timeWindow: 60_000 }, trustProxy: '127.0.0.1' });
    const q = (ip: string) => request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [] }, { 'x-forwarded-for': ip });
    expect((await q('203.0.113.1')).status).toBe(200);
    expect((await q('203.0.113.1')).status).toBe(200);
    expect((await q('203.0.113.1')).status).toBe(429);
    expect((await q('203.0.113.2')).status).toBe(200);
  });

  it('never logs IP addresses, ports or host names', async () => {
    const lines: string[] = [];
    const { url } = await start({ logger: { level: 'trace', stream: { write: (l) => void lines.push(l) } }, rateLimit: { max: 2, timeWindow: 60_000 } });
    const gen = clustered(6, DIM, 1, 0.1);
    const hdr = { 'x-forwarded-for': '10.1.2.3', 'x-real-ip': '10.4.5.6', forwarded: 'for=10.7.8.9' };
    await request(url + INDEX_PATHS.health, 'GET', undefined, hdr);
    await request(url + INDEX_PATHS.upsert, 'POST', { v: 1, memories: [(await owned(gen())).m] }, hdr);
    await request(url + INDEX_PATHS.upsert, 'POST', '{bad json', hdr);
    await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [] }, hdr);
    await request(url + INDEX_PATHS.communities, 'POST', { v: 1, embedderId: EMB, ids: [] }, hdr); // 429
    await request(url + '/missing', 'GET', undefined, hdr);
    const log = lines.join('');
    if (process.env.SHOW_LOG) console.log(log);
    expect(lines.length).toBeGreaterThan(8);
    expect(log).toContain('incoming request');
    for (const needle of ['127.0.0.1', '::1', '::ffff', '10.1.2.3', '10.4.5.6', '10.7.8.9', 'remoteAddress', 'remotePort', '"hostname"', '"host"', hostname()]) {
      expect(log, needle).not.toContain(needle);
    }
  });
});
