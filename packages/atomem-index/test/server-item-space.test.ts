// The item-space clustering of the index service: the kNN graphs (k-means cells, usearch HNSW,
// and `auto`, cells with the HNSW candidates added when the measured recall is low) against the
// exact one (recall@10 on a sample), the self-measured recall, the exact path below
// `exactBelow`, and the persisted kNN graph and communities (a restart reads them back; a
// changed catalog or a damaged file recomputes).
import { existsSync, mkdtempSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  ITEM_COMMUNITIES_FILE,
  ITEM_KNN_FILE,
  clusterItemSpace,
  clusterItems,
  communitiesOfKnn,
  flatVectors,
  itemKnn,
  knnExpansion,
  knnOfMatrix,
  readPersistedKnn,
  type KnnGraph,
} from '../src/clusters.js';
import { createIndexService, type IndexService } from '../src/service.js';
import { INDEX_V2_PATHS, type HealthV2Response } from 'atomem/protocol';
import { ReportClient } from 'atomem/engine';
import { attesterTokens } from '../../../test/fixtures/index-wire.js';
import type { ItemSpace } from 'atomem/engine';
import { mulberry32 as rng } from '@atomem/bench/rng';

const dirs: string[] = [];
const services: IndexService[] = [];
afterEach(async () => {
  while (services.length) await services.pop()!.close();
});
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** n items of a `dim`-d space in `c` noisy clusters (unit vectors). */
function catalog(n: number, dim: number, c: number, seed = 1): ItemSpace {
  const r = rng(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const centres = Array.from({ length: c }, () => Float32Array.from({ length: dim }, gauss));
  const ids: string[] = [];
  const vectors: Float32Array[] = [];
  for (let i = 0; i < n; i++) {
    const v = centres[i % c].map((x) => x + 0.9 * gauss());
    const norm = Math.hypot(...v);
    ids.push(`sku-${i}`);
    vectors.push(v.map((x) => x / norm));
  }
  return { embedderId: 'knn-test@1', ids, vectors };
}

/** Exact top-k (indices) of row i. */
function exactRow(space: ItemSpace, i: number, k: number): number[] {
  const a = space.vectors[i];
  const scored: [number, number][] = [];
  space.vectors.forEach((b, j) => {
    if (j === i) return;
    let s = 0;
    for (let d = 0; d < a.length; d++) s += a[d] * b[d];
    scored.push([s, j]);
  });
  scored.sort((x, y) => y[0] - x[0] || x[1] - y[1]);
  return scored.slice(0, k).map(([, j]) => j);
}

describe('item-space kNN', () => {
  /** Recall@10 of graph rows of 200 random items against exactRow; also checks the rows' shape. */
  const recallAgainstExact = (space: ItemSpace, g: KnnGraph) => {
    const r = rng(9);
    let hit = 0;
    for (let s = 0; s < 200; s++) {
      const i = Math.floor(r() * space.ids.length);
      const truth = new Set(exactRow(space, i, 10));
      const row = Array.from(g.neighbours.subarray(i * 10, i * 10 + 10));
      expect(new Set(row).size, `row ${i} has no repeats`).toBe(10);
      expect(row).not.toContain(i);
      for (let t = 1; t < 10; t++) expect(g.sims[i * 10 + t]).toBeLessThanOrEqual(g.sims[i * 10 + t - 1] + 1e-5);
      for (const j of row) if (truth.has(j)) hit++;
    }
    return hit / 2000;
  };

  it.each([
    ['i8 re-ranked (the default)', {}],
    ['f32', { quantization: 'f32' as const }],
  ])(
    'the HNSW kNN graph (%s) has recall@10 ≥ 0.95 against the exact one (sample of 200 items of 10,000)',
    (_name, opts) => {
      const space = catalog(10_000, 48, 100);
      const g = itemKnn(space, { k: 10, exactBelow: 0, knn: 'hnsw', ...opts });
      expect(g.exact).toBe(false);
      expect(g.method).toBe('hnsw');
      const r = rng(9);
      let hit = 0;
      let total = 0;
      for (let s = 0; s < 200; s++) {
        const i = Math.floor(r() * space.ids.length);
        const truth = new Set(exactRow(space, i, 10));
        for (let t = 0; t < 10; t++) if (truth.has(g.neighbours[i * 10 + t])) hit++;
        total += 10;
        // never itself, sims sorted descending
        for (let t = 0; t < 10; t++) expect(g.neighbours[i * 10 + t]).not.toBe(i);
        for (let t = 1; t < 10; t++) expect(g.sims[i * 10 + t]).toBeLessThanOrEqual(g.sims[i * 10 + t - 1] + 1e-5);
      }
      const recall = hit / total;
      expect(recall, `recall@10 ${recall}`).toBeGreaterThanOrEqual(0.95);
      expect(knnExpansion(10_000_000, 10)).toBeGreaterThan(knnExpansion(10_000, 10));
    },
    120_000,
  );

  it('symmetric candidates (the default) raise recall at a low ef, rows stay duplicate-free and sorted', () => {
    const space = catalog(10_000, 48, 100);
    const recallOf = (g: KnnGraph) => recallAgainstExact(space, g);
    // one thread: both graphs come from the same HNSW index build
    const own = recallOf(itemKnn(space, { k: 10, exactBelow: 0, knn: 'hnsw', expansionSearch: 12, threads: 1, symmetric: false }));
    const sym = recallOf(itemKnn(space, { k: 10, exactBelow: 0, knn: 'hnsw', expansionSearch: 12, threads: 1 }));
    expect(sym, `symmetric ${sym} vs own query only ${own}`).toBeGreaterThan(own);
  }, 120_000);

  it('k-means cells: recall@10 ≥ 0.95 on a catalog of small high-dimensional clusters, the self-measured recall agrees, and the graph is the same at 1 and 2 threads', () => {
    // 256-d: the cells' good case (at 48-d, a lower intrinsic dimension, one partition gave 0.88)
    const space = catalog(10_000, 256, 100);
    const g = itemKnn(space, { k: 10, exactBelow: 0, knn: 'cells' });
    expect(g.method).toBe('cells');
    const recall = recallAgainstExact(space, g);
    expect(recall, `recall@10 ${recall}`).toBeGreaterThanOrEqual(0.95);
    // the service's own check (100 other random items, usearch's exact search) tells the same
    expect(Math.abs(g.recall! - recall), `self-measured ${g.recall} vs ${recall}`).toBeLessThan(0.05);
    const one = itemKnn(space, { k: 10, exactBelow: 0, knn: 'cells', threads: 1 });
    expect(Buffer.from(one.neighbours.buffer).equals(Buffer.from(g.neighbours.buffer))).toBe(true);
  }, 120_000);

  it('auto (the default): where the cells miss, a second partition (when two could reach the floor) and then the HNSW candidates complete the rows and recall@10 is back ≥ 0.95; where they do not, nothing else is built', () => {
    // cells of 30 items and no overlap: most rows lose neighbours across cell boundaries
    const space = catalog(10_000, 48, 100);
    const poor = { k: 10, exactBelow: 0, cellSize: 30, cellOverlap: 1 };
    const cells = itemKnn(space, { ...poor, knn: 'cells' });
    const cellsRecall = recallAgainstExact(space, cells);
    expect(cellsRecall, `cells alone ${cellsRecall}`).toBeLessThan(0.9);
    expect(cells.recall!).toBeLessThan(0.95);
    const auto = itemKnn(space, poor);
    expect(['cells+cells', 'cells+hnsw']).toContain(auto.method);
    expect(auto.cellsRecall).toBeCloseTo(cells.recall!, 6);
    const autoRecall = recallAgainstExact(space, auto);
    expect(autoRecall, `auto ${autoRecall}`).toBeGreaterThanOrEqual(0.95);
    expect(auto.recall!).toBeGreaterThanOrEqual(0.95);
    // a floor two partitions do not reach: the HNSW candidates are added, and recall only rises
    const strict = itemKnn(space, { ...poor, minRecall: 0.9999 });
    expect(strict.method).toBe('cells+hnsw');
    expect(recallAgainstExact(space, strict)).toBeGreaterThanOrEqual(autoRecall - 0.005);
    // the second partition is tried only when two independent ones could reach the floor
    // (1 − (1 − r)² ≥ minRecall): seen in the progress, where it reports within (0.4, 0.6)
    const r1 = cells.recall!;
    const reach = 1 - (1 - r1) ** 2;
    const stages = (minRecall: number) => {
      const shares: number[] = [];
      const g = knnOfMatrix(flatVectors(space), space.ids.length, 48, { ...poor, minRecall }, (x) => shares.push(x));
      return { g, second: shares.some((x) => x > 0.4 && x < 0.6) };
    };
    const skipped = stages(Math.min(0.9999, reach + 0.001));
    expect(skipped.second).toBe(false);
    expect(skipped.g.method).toBe('cells+hnsw');
    const tried = stages(Math.max(r1 + 0.001, reach - 0.001));
    expect(tried.second).toBe(true);
    // a recall floor the cells meet: the cells' graph as it is
    const met = itemKnn(space, { ...poor, minRecall: cells.recall! - 0.01 });
    expect(met.method).toBe('cells');
    expect(Buffer.from(met.neighbours.buffer).equals(Buffer.from(cells.neighbours.buffer))).toBe(true);
    expect(() => itemKnn(space, { k: 10, exactBelow: 0, knn: 'ivf' as never })).toThrow(/knn: ivf/);
  }, 120_000);

  it('below exactBelow the graph is exact', () => {
    const space = catalog(600, 16, 12, 3);
    const g = itemKnn(space, { k: 5 });
    expect(g.exact).toBe(true);
    expect(g.method).toBe('exact');
    for (const i of [0, 17, 333, 599]) expect(Array.from(g.neighbours.subarray(i * 5, i * 5 + 5))).toEqual(exactRow(space, i, 5));
  });

  it('persists the kNN graph and the communities: a restart reads them back, a changed catalog or a damaged file recomputes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'atomem-knn-'));
    dirs.push(dir);
    const space = catalog(6000, 24, 60, 5);
    const first = await clusterItemSpace(space, {}, { dir });
    expect(first.source).toBe('computed');
    expect(first.worker).toBe(true);
    // a multi-threaded build need not be reproducible: the communities are those of the persisted graph
    const persisted = readPersistedKnn(dir, space)!;
    expect(persisted.exact).toBe(false);
    // how the graph was built and its measured recall are persisted with it, and reported
    expect(persisted.method).toBe(first.knn.method);
    expect(persisted.recall).toBeCloseTo(first.knn.recall, 6);
    expect(first.knn.recall).toBeGreaterThanOrEqual(0.95);
    expect(first.communities).toEqual(communitiesOfKnn(space, persisted));
    expect(Math.max(...first.communities.communities.map((c) => c.items.length))).toBeLessThanOrEqual(0.05 * space.ids.length);
    const again = await clusterItemSpace(space, {}, { dir });
    expect(again.source).toBe('cache');
    expect(again.communities).toEqual(first.communities);
    expect(again.knn.method).toBe(first.knn.method);
    expect(again.knn.recall).toBeCloseTo(first.knn.recall, 6);
    // a damaged communities file is not trusted: the kNN graph is reused, Louvain reruns
    writeFileSync(join(dir, ITEM_COMMUNITIES_FILE), '{"fingerprint": "x", "communities": [');
    const repaired = await clusterItemSpace(space, {}, { dir });
    expect(repaired.source).toBe('knn-cache');
    expect(repaired.communities).toEqual(first.communities);
    // one thread inserts in a fixed order: the worker and the synchronous path give the same communities
    expect((await clusterItemSpace(space, { threads: 1 })).communities).toEqual(clusterItems(space, { threads: 1 }));
    // a kNN file of version 1 (no method, no recall) is not trusted: rebuilt, never misreported
    const knnPath = join(dir, ITEM_KNN_FILE);
    const v1 = readFileSync(knnPath);
    v1.writeUInt32LE(1, 4);
    writeFileSync(knnPath, v1);
    unlinkSync(join(dir, ITEM_COMMUNITIES_FILE));
    const rebuilt = await clusterItemSpace(space, {}, { dir });
    expect(rebuilt.source).toBe('computed');
    expect(readPersistedKnn(dir, space)?.method).toBe(rebuilt.knn.method);
    // one vector changed: another fingerprint, everything recomputed
    const changed = { ...space, vectors: space.vectors.map((v, i) => (i === 10 ? space.vectors[11] : v)) };
    expect((await clusterItemSpace(changed, {}, { dir })).source).toBe('computed');
    // the event loop keeps turning during the build
    let turns = 0;
    const t = setInterval(() => turns++, 1);
    await clusterItemSpace(catalog(6000, 24, 60, 6), {});
    clearInterval(t);
    expect(turns).toBeGreaterThan(2);
  }, 120_000);

  it('while the item space is clustered (kNN graph and Louvain in a worker thread) the service serves: health says the phase, reports are accepted, a closed epoch is aggregated once the communities exist; a close mid-clustering stops it', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'atomem-knn-svc-'));
    dirs.push(dataDir);
    const sp = catalog(20_000, 16, 100, 8);
    const EPOCH_MS = 1_000_000;
    const clock = { now: 7 * EPOCH_MS + 1000 };
    const ATTESTER = 'attester-secret-for-tests-0001';
    const start = async (report: boolean) => {
      const svc = createIndexService({
        dataDir,
        rateLimit: false,
        v2: { space: sp, epochMs: EPOCH_MS, now: () => clock.now, tickMs: 0, minReports: 1, minContributors: 0, attesterKey: ATTESTER },
      });
      services.push(svc);
      const url = await svc.listen({ port: 0 });
      await svc.serving;
      let ready = false;
      void svc.ready.then(() => (ready = true));
      /** Health answers seen before the communities were computed. */
      const seen: { status: number; clustering?: { phase: string; share: number }; communities: number }[] = [];
      let reported = false;
      while (!ready) {
        const res = await fetch(`${url}${INDEX_V2_PATHS.health}`);
        const body = (await res.json()) as HealthV2Response;
        // while clustering (after it, `ready` also waits for the release build of the epoch that closed meanwhile)
        if (!ready && body.clustering) seen.push({ status: res.status, clustering: body.clustering, communities: body.space.communities });
        if (report && !reported && !ready) {
          // a token and a report while the communities are computed: accepted
          await new ReportClient({ url, tokens: attesterTokens(url, ATTESTER) }).send(svc.v2!.epoch(), { cohort: 3, bucket: 4 });
          reported = !ready;
          // the epoch closes (grace period included); its aggregation waits for the communities (no error meanwhile)
          clock.now += 2 * EPOCH_MS;
          await svc.v2!.tick();
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      const after = (await (await fetch(`${url}${INDEX_V2_PATHS.health}`)).json()) as HealthV2Response;
      return { svc, seen, after, reported };
    };
    // first start: the kNN graph is built, then Louvain runs; the service serves during both
    const epoch0 = Math.floor(clock.now / EPOCH_MS);
    const first = await start(true);
    expect(first.seen.length).toBeGreaterThan(0);
    for (const s of first.seen) {
      expect(s.status).toBe(200);
      expect(s.communities).toBe(0);
    }
    expect(
      first.seen.some((s) => s.clustering?.phase === 'knn' && s.clustering.share >= 0 && s.clustering.share <= 1),
      JSON.stringify(first.seen.slice(-3)),
    ).toBe(true);
    expect(first.reported, 'a report was accepted before the communities were computed').toBe(true);
    expect(first.after.clustering).toBeUndefined();
    expect(first.after.space.communities).toBeGreaterThan(1);
    // health names how the kNN graph was built and its recall measured on a sample
    expect(['cells', 'cells+cells', 'cells+hnsw']).toContain(first.after.space.knn?.method);
    expect(first.after.space.knn?.recall).toBeGreaterThanOrEqual(0.95);
    // the epoch that closed during the clustering was aggregated once the communities existed
    expect(first.svc.v2!.store.latestRelease()).toBe(epoch0);
    await first.svc.close();
    services.pop();
    // second start with the kNN graph persisted but not the communities: only Louvain runs, and the
    // service serves during it (a share below 100 %: a Louvain on the event loop could not answer before its end)
    expect(existsSync(join(dataDir, ITEM_KNN_FILE))).toBe(true);
    unlinkSync(join(dataDir, ITEM_COMMUNITIES_FILE));
    const second = await start(false);
    expect(second.after.clustering).toBeUndefined();
    expect(
      second.seen.some((s) => s.status === 200 && s.clustering?.phase === 'communities' && s.clustering.share < 1),
      JSON.stringify(second.seen.slice(-3)),
    ).toBe(true);
    expect(second.seen.every((s) => s.clustering?.phase !== 'knn')).toBe(true);
    await second.svc.close();
    services.pop();
    // a close during the clustering ends the worker: close resolves, the next start recomputes;
    // aggregation needs the communities: asked for while they are computed, it refuses
    unlinkSync(join(dataDir, ITEM_COMMUNITIES_FILE));
    unlinkSync(join(dataDir, ITEM_KNN_FILE));
    const third = createIndexService({
      dataDir,
      rateLimit: false,
      v2: { space: sp, epochMs: EPOCH_MS, now: () => clock.now, tickMs: 0, minReports: 1, minContributors: 0, attesterKey: ATTESTER },
    });
    await third.listen({ port: 0 });
    await third.serving;
    expect(third.v2!.clustering()).toBeDefined();
    await expect(third.v2!.aggregate(third.v2!.epoch())).rejects.toThrow(/clustering the item space/);
    const failed = third.ready.then(
      () => 'ready',
      () => 'stopped',
    );
    await third.close();
    expect(await failed).toBe('stopped');
    expect(existsSync(join(dataDir, ITEM_COMMUNITIES_FILE))).toBe(false);
  }, 300_000);
});
