// Seeded fuzz of the index service over real HTTP: ≥ 1,000 random valid and invalid requests
// against a model of what must be stored; invalid ones never change state; every released
// community respects k-anonymity; at the end the state equals a fresh recomputation (the
// components of the stored link graph, and a new service opened on the same data dir).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { INDEX_LIMITS, INDEX_PATHS, decodeVector, encodeVector, hashToken, type WireCommunity, type WireMemory } from '../../packages/atomem/src/protocol/index-v1.js';
import { createIndexService, type IndexService } from '../../packages/atomem-index/src/service.js';
import { cappedComponents, mutualLinks, post, rng, unit } from '../fixtures/index-wire.js';

const E1 = 'fuzz-a@1';
const E2 = 'fuzz-b@1';
const DIMS: Record<string, number> = { [E1]: 16, [E2]: 8 };
const K = 3;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Communities recomputed from the SQLite rows alone: capped components of the mutual candidate links. */
function componentsFromStore(svc: IndexService): string[][] {
  const ids = new Set(svc.store.all().map((m) => m.id));
  for (const l of svc.store.links()) expect(ids.has(l.src) && ids.has(l.dst), `link ${l.src}→${l.dst} points to stored memories`).toBe(true);
  return cappedComponents(ids, mutualLinks(svc.store.links()));
}

function livePartition(svc: IndexService): string[][] {
  return [...svc.partition(E1), ...svc.partition(E2)].sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

/** What a community looks like independent of its (restart-renumbered) id. */
function canonical(c: WireCommunity) {
  return { size: c.size, ownIds: [...c.ownIds].sort(), members: [...c.members].sort(), items: c.items, related: c.related };
}

function checkAnonymity(communities: WireCommunity[], asked: string[]): void {
  for (const c of communities) {
    expect(c.size).toBeGreaterThanOrEqual(K);
    expect(c.ownIds.length).toBeGreaterThan(0);
    for (const id of c.ownIds) expect(asked).toContain(id);
    // The asker's own vectors are never among the members; the rest are other memories.
    expect(c.members.length + c.ownIds.length).toBeLessThanOrEqual(c.size);
  }
}

describe('index service: seeded fuzz', () => {
  it('1,200 random requests: model-exact answers, invalid ones change nothing, k-anonymity, state = recomputation', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'atomem-fuzz-'));
    dirs.push(dataDir);
    // exactBelow 40: the HNSW graph is built, used, dropped and rebuilt during the run.
    const opts = { legacyV1: true, dataDir, embedderIds: [E1, E2], embedderDims: DIMS, minCommunitySize: K, itemNoise: 0, rateLimit: false as const, maxMembers: 8, vectorIndex: { exactBelow: 40 } };
    let svc = createIndexService(opts);
    await svc.ready;
    let url = await svc.listen({ port: 0 });

    const r = rng(20260);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
    const centres: Record<string, Float32Array[]> = {
      [E1]: Array.from({ length: 5 }, () => unit(Array.from({ length: DIMS[E1] }, () => r() - 0.5))),
      [E2]: Array.from({ length: 3 }, () => unit(Array.from({ length: DIMS[E2] }, () => r() - 0.5))),
    };
    const vectorFor = (e: string): Float32Array =>
      r() < 0.15 ? unit(Array.from({ length: DIMS[e] }, () => r() - 0.5)) : unit(Array.from(pick(centres[e]), (x) => x + 0.45 * (r() - 0.5)));
    const model = new Map<string, { token: string; hash: string; embedderId: string }>();
    let nextId = 0;
    const fresh = async (e = r() < 0.8 ? E1 : E2): Promise<{ m: WireMemory; token: string }> => {
      const token = `tok-${nextId}-${Math.floor(r() * 1e9).toString(36)}-padding`;
      const m: WireMemory = { id: `fz-${(nextId++).toString(36).padStart(6, '0')}`, tokenHash: await hashToken(token), embedderId: e, dim: DIMS[e], vector: encodeVector(vectorFor(e)) };
      if (r() < 0.4) m.items = Array.from({ length: 1 + Math.floor(r() * 4) }, () => `sku-${Math.floor(r() * 20)}`);
      return { m, token };
    };
    // Lock both dimensions first, so a wrong dimension is wrong from the first request on.
    {
      const first = [await fresh(E1), await fresh(E2)];
      expect((await post(url, INDEX_PATHS.upsert, { v: 1, memories: first.map((b) => b.m) })).status).toBe(200);
      for (const b of first) model.set(b.m.id, { token: b.token, hash: b.m.tokenHash, embedderId: b.m.embedderId });
    }
    // One string, so the comparison after each invalid request is cheap.
    const snapshot = () =>
      [
        ...svc.store.all().map((m) => `${m.id}|${m.seq}|${m.tokenHash}|${m.embedderId}|${m.dim}|${Buffer.from(m.vector.buffer).toString('base64')}|${m.items?.join(',')}`),
        ...svc.store.links().map((l) => `${l.src}>${l.dst}:${l.sim}`),
        JSON.stringify(livePartition(svc)),
        JSON.stringify([svc.index(E1)!.stats(), svc.index(E2)!.stats()]),
      ].join('\n');
    const stored = () => [...model.keys()];
    const counts: Record<string, number> = {};
    let communityResponses = 0;

    type Op = () => Promise<void>;
    const invalid = async (path: string, body: unknown, status: number, error: string) => {
      const before = snapshot();
      const res = await post(url, path, body);
      expect({ status: res.status, error: res.body.error }).toEqual({ status, error });
      expect(typeof res.body.message).toBe('string');
      expect(snapshot() === before).toBe(true);
    };
    const validPrefix = async () => (r() < 0.6 ? await Promise.all(Array.from({ length: 1 + Math.floor(r() * 3) }, () => fresh())) : []);

    const ops: [number, string, Op][] = [
      [30, 'upsert', async () => {
        const batch = await Promise.all(Array.from({ length: 1 + Math.floor(r() * 3) }, () => fresh()));
        const res = await post(url, INDEX_PATHS.upsert, { v: 1, memories: batch.map((b) => b.m) });
        expect(res).toEqual({ status: 200, body: { accepted: batch.length } });
        for (const b of batch) model.set(b.m.id, { token: b.token, hash: b.m.tokenHash, embedderId: b.m.embedderId });
      }],
      [8, 'replace', async () => {
        if (model.size === 0) return;
        const id = pick(stored());
        const e = r() < 0.8 ? model.get(id)!.embedderId : pick([E1, E2]);
        const m: WireMemory = { id, tokenHash: model.get(id)!.hash, embedderId: e, dim: DIMS[e], vector: encodeVector(vectorFor(e)) };
        const res = await post(url, INDEX_PATHS.upsert, { v: 1, memories: [m] });
        expect(res).toEqual({ status: 200, body: { accepted: 1 } });
        model.get(id)!.embedderId = e;
      }],
      [16, 'delete', async () => {
        const ids = [...new Set(Array.from({ length: Math.floor(r() * 5) }, () => pick(stored())).filter(Boolean))];
        const deletions = ids.map((id) => ({ id, token: model.get(id)!.token }));
        for (let i = Math.floor(r() * 3); i > 0; i--) deletions.push({ id: `unknown-${nextId++}`, token: 'unknown-token-0123456789' });
        const res = await post(url, INDEX_PATHS.delete, { v: 1, deletions });
        expect(res).toEqual({ status: 200, body: { deleted: ids.length } });
        for (const id of ids) model.delete(id);
      }],
      [20, 'communities', async () => {
        const e = r() < 0.8 ? E1 : E2;
        const mine = stored().filter((id) => model.get(id)!.embedderId === e);
        const asked = [...new Set(Array.from({ length: 1 + Math.floor(r() * 5) }, () => (mine.length && r() < 0.9 ? pick(mine) : `nobody-${nextId++}`)))];
        const res = await post(url, INDEX_PATHS.communities, { v: 1, embedderId: e, ids: asked });
        expect(res.status).toBe(200);
        checkAnonymity(res.body.communities, asked);
        communityResponses += res.body.communities.length;
        // Exactly the asked ids whose community has ≥ k members are covered.
        const graph = svc.index(e)!.graph;
        const expected = asked.filter((id) => graph.has(id) && graph.communitySize(graph.communityOf(id)!) >= K).sort();
        expect(res.body.communities.flatMap((c: WireCommunity) => c.ownIds).sort()).toEqual(expected);
      }],
      [3, 'bad dimension', async () => {
        const batch = await validPrefix();
        const bad = (await fresh(E1)).m;
        if (r() < 0.5) bad.dim = 15; // decoded 16 ≠ dim 15
        else Object.assign(bad, { dim: 12, vector: encodeVector(unit(Array.from({ length: 12 }, () => r() - 0.5))) });
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [...batch.map((b) => b.m), bad] }, 400, 'wrong_dimension');
      }],
      [2, 'bad base64', async () => {
        const bad = (await fresh()).m;
        bad.vector = pick(['!!!!', bad.vector.slice(1), `${bad.vector}A`, 'AAAA====']);
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [...(await validPrefix()).map((b) => b.m), bad] }, 400, 'bad_request');
      }],
      [2, 'zero vector', async () => {
        const bad = (await fresh(E2)).m;
        bad.vector = encodeVector(new Float32Array(DIMS[E2]));
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [...(await validPrefix()).map((b) => b.m), bad] }, 400, 'bad_request');
      }],
      [2, 'unknown embedder', async () => {
        const bad = { ...(await fresh()).m, embedderId: `nope@${Math.floor(r() * 9)}` };
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [...(await validPrefix()).map((b) => b.m), bad] }, 400, 'unknown_embedder');
      }],
      [3, 'replay', async () => {
        if (model.size === 0) return;
        const id = pick(stored());
        const bad = { ...(await fresh(model.get(id)!.embedderId)).m, id };
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [...(await validPrefix()).map((b) => b.m), bad] }, 409, 'conflict');
      }],
      [2, 'duplicate id', async () => {
        const a = (await fresh()).m;
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [a, { ...a }] }, 400, 'bad_request');
      }],
      [4, 'schema', async () => {
        const m = (await fresh()).m as unknown as Record<string, unknown>;
        const mutate = pick<(m: Record<string, unknown>) => void>([
          (x) => (x.dim = String(x.dim)),
          (x) => (x.dim = null),
          (x) => (x.dim = -1),
          (x) => (x.vector = null),
          (x) => (x.vector = [1, 2]),
          (x) => (x.id = 'short'),
          (x) => (x.tokenHash = 'xyz'),
          (x) => (x.userId = 'u1'),
          (x) => (x.items = [1]),
          (x) => delete x.embedderId,
        ]);
        mutate(m);
        await invalid(INDEX_PATHS.upsert, { v: 1, memories: [...(await validPrefix()).map((b) => b.m), m] }, 400, 'bad_request');
      }],
      [2, 'malformed', async () => {
        const body = pick(['{', '[]', 'null', '{"v":1,"memories":[}', '{"v":1,"memories":NaN}', '{"v":1,"memories":[{"dim":Infinity}]}', '"text"']);
        const before = snapshot();
        const res = await post(url, INDEX_PATHS.upsert, body);
        expect(res.status).toBe(400);
        expect(res.body.error).toBe('bad_request');
        expect(snapshot() === before).toBe(true);
      }],
      [1, 'oversized batch', async () => {
        const one = (await fresh()).m;
        const memories = Array.from({ length: INDEX_LIMITS.maxBatch + 1 }, (_, i) => ({ ...one, id: `big-${String(i).padStart(6, '0')}` }));
        await invalid(INDEX_PATHS.upsert, { v: 1, memories }, 413, 'too_large');
      }],
      [4, 'wrong token', async () => {
        if (model.size === 0) return;
        const ids = [...new Set(Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(stored())))];
        const deletions = ids.map((id) => ({ id, token: model.get(id)!.token }));
        deletions.splice(Math.floor(r() * (deletions.length + 1)), 0, { id: pick(stored()), token: `forged-token-${nextId++}-xxxx` });
        await invalid(INDEX_PATHS.delete, { v: 1, deletions }, 403, 'forbidden');
      }],
      [2, 'bad query', async () => {
        const body = pick([
          { v: 1, embedderId: 'nope@1', ids: [] },
          { v: 1, embedderId: E1, ids: ['x'] },
          { v: 1, embedderId: E1 },
          { v: 1, embedderId: E1, ids: [], extra: true },
        ]);
        const res = await post(url, INDEX_PATHS.communities, body);
        expect(res.status).toBe(400);
        expect(['bad_request', 'unknown_embedder']).toContain(res.body.error);
      }],
    ];
    const total = ops.reduce((a, [w]) => a + w, 0);
    const N = 1200;
    for (let i = 0; i < N; i++) {
      let x = r() * total;
      const [, name, op] = ops.find(([w]) => (x -= w) < 0) ?? ops[0];
      counts[name] = (counts[name] ?? 0) + 1;
      await op();
      if (i % 100 === 99) {
        // Every stored id: released iff its community has ≥ k members (in-process sweep).
        for (const e of [E1, E2]) {
          const ix = svc.index(e)!;
          for (const id of stored().filter((s) => model.get(s)!.embedderId === e)) {
            for (const c of ix.communitiesSync([id])) expect(c.size).toBeGreaterThanOrEqual(K);
          }
        }
      }
    }
    for (const [, name] of ops) expect(counts[name], name).toBeGreaterThan(0);
    expect(communityResponses).toBeGreaterThan(50);

    // Healthy, and the state is the model's.
    const health = await (await fetch(url + INDEX_PATHS.health)).json();
    expect(health).toMatchObject({ status: 'ok', memories: model.size });
    expect(model.size).toBeGreaterThan(100);
    if (process.env.FUZZ_VERBOSE) console.log(model.size, counts, svc.index(E1)!.stats(), svc.vectorStats(E1));
    // Both neighbour-search paths ran: exact while small, HNSW once past exactBelow.
    expect(svc.vectorStats(E1)).toMatchObject({ hnsw: true, builds: expect.any(Number) });
    expect(svc.vectorStats(E1)!.hnswSearches).toBeGreaterThan(100);
    expect(svc.vectorStats(E1)!.exactSearches).toBeGreaterThan(10);
    expect(svc.store.all().map((m) => m.id).sort()).toEqual(stored().sort());
    for (const m of svc.store.all()) expect(m.embedderId).toBe(model.get(m.id)!.embedderId);

    // Recomputation 1: components of the stored links equal the live communities.
    const live = livePartition(svc);
    expect(componentsFromStore(svc)).toEqual(live);
    for (const e of [E1, E2]) expect(svc.index(e)!.graph.recomputeAll()).toEqual(svc.partition(e));
    expect(live.some((p) => p.length >= K)).toBe(true);

    // Recomputation 2: a new service on the same data dir answers every id the same way.
    const ask = async (u: string) => {
      const out = new Map<string, unknown>();
      const ids = stored();
      for (let i = 0; i < ids.length; i += 16) {
        await Promise.all(
          ids.slice(i, i + 16).map(async (id) => {
            const res = await post(u, INDEX_PATHS.communities, { v: 1, embedderId: model.get(id)!.embedderId, ids: [id] });
            expect(res.status).toBe(200);
            out.set(id, res.body.communities.map((c: WireCommunity) => ({ ...canonical(c), prototype: decodeVector(c.prototype) })));
          }),
        );
      }
      return out;
    };
    const before = await ask(url);
    const edges = mutualLinks(svc.store.links()).length;
    expect(edges).toBe(svc.index(E1)!.graph.edgeTotal + svc.index(E2)!.graph.edgeTotal);
    await svc.close();
    svc = createIndexService(opts);
    await svc.ready;
    url = await svc.listen({ port: 0 });
    expect(livePartition(svc)).toEqual(live);
    expect(svc.index(E1)!.graph.edgeTotal + svc.index(E2)!.graph.edgeTotal).toBe(edges);
    const after = await ask(url);
    for (const id of stored()) {
      const a = before.get(id) as { prototype: Float32Array }[];
      const b = after.get(id) as { prototype: Float32Array }[];
      expect(b.map(({ prototype, ...rest }) => rest), id).toEqual(a.map(({ prototype, ...rest }) => rest));
      // Prototypes are running float64 sums: equal up to int8 rounding.
      a.forEach((c, i) => {
        let dot = 0;
        for (let j = 0; j < c.prototype.length; j++) dot += c.prototype[j] * b[i].prototype[j];
        expect(dot / (Math.hypot(...c.prototype) * Math.hypot(...b[i].prototype))).toBeGreaterThan(0.999);
      });
    }
    await svc.close();
  });

  it('k-anonymity across many random states, whole components and hop-limited views', async () => {
    for (const hops of [undefined, 2]) {
      const k = 4;
      const dataDir = mkdtempSync(join(tmpdir(), 'atomem-kanon-'));
      dirs.push(dataDir);
      // why k1 = 4: links are mutual top-k1, so at k1 = 2 a memory has ≤ 2 links and few
      // communities (or 2-hop views) reach k = 4: nothing would be released to check
      const svc = createIndexService({ legacyV1: true, dataDir, embedderIds: [E1], embedderDims: { [E1]: 16 }, minCommunitySize: k, itemNoise: 1, rateLimit: false, hops, k1: 4 });
      await svc.ready;
      const url = await svc.listen({ port: 0 });
      const r = rng(hops ?? 7);
      const centres = Array.from({ length: 12 }, () => unit(Array.from({ length: 16 }, () => r() - 0.5)));
      const ids: { id: string; token: string }[] = [];
      let released = 0;
      let withheld = 0;
      for (let step = 0; step < 45; step++) {
        if (ids.length > 6 && r() < 0.3) {
          const gone = ids.splice(Math.floor(r() * ids.length), 1 + Math.floor(r() * 3));
          expect((await post(url, INDEX_PATHS.delete, { v: 1, deletions: gone })).status).toBe(200);
        } else {
          const memories: WireMemory[] = [];
          for (let j = 1 + Math.floor(r() * 3); j > 0; j--) {
            const token = `kanon-token-${step}-${j}-${Math.floor(r() * 1e9)}`;
            const id = `ka-${step}-${j}-${Math.floor(r() * 1e6)}`;
            const v = unit(Array.from(centres[Math.floor(r() * centres.length)], (x) => x + 0.5 * (r() - 0.5)));
            memories.push({ id, tokenHash: await hashToken(token), embedderId: E1, dim: 16, vector: encodeVector(v), items: [`sku-${Math.floor(r() * 5)}`] });
            ids.push({ id, token });
          }
          expect((await post(url, INDEX_PATHS.upsert, { v: 1, memories })).status).toBe(200);
        }
        // Ask about every stored id alone, and about random groups of them.
        const asks = [
          ...ids.filter(() => r() < 20 / Math.max(20, ids.length)).map((x) => [x.id]),
          ...Array.from({ length: 3 }, () => ids.filter(() => r() < 0.3).map((x) => x.id)),
        ];
        for (const asked of asks) {
          const res = await post(url, INDEX_PATHS.communities, { v: 1, embedderId: E1, ids: asked });
          expect(res.status).toBe(200);
          checkAnonymity(res.body.communities, asked);
          for (const c of res.body.communities as WireCommunity[]) {
            if (hops !== undefined) expect(c.size - c.ownIds.length).toBeGreaterThanOrEqual(k); // others alone reach k
            if (c.items) for (const v of Object.values(c.items)) expect(v).toBeGreaterThan(0);
          }
          if (asked.length === 1) {
            if (res.body.communities.length) released++;
            else withheld++;
          }
        }
      }
      // The run saw both sides of the threshold.
      expect(released).toBeGreaterThan(20);
      expect(withheld).toBeGreaterThan(20);
      await svc.close();
    }
  });
});
