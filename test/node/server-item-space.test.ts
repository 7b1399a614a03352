// The item-space clustering of the index service: the usearch HNSW kNN graph against the exact
// one (recall@10 on a sample), the exact path below `exactBelow`, and the persisted kNN graph
// and communities (a restart reads them back; a changed catalog or a damaged file recomputes).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ITEM_COMMUNITIES_FILE, clusterItemSpace, clusterItems, itemKnn, knnExpansion } from '../../packages/atomem-index/src/clusters.js';
import type { ItemSpace } from '../../packages/atomem/src/community/release.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
  it('the HNSW kNN graph has recall@10 ≥ 0.95 against the exact one (sample of 200 items of 10,000)', () => {
    const space = catalog(10_000, 48, 100);
    const g = itemKnn(space, { k: 10, exactBelow: 0 });
    expect(g.exact).toBe(false);
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
    expect(knnExpansion(1_000_000, 10)).toBeGreaterThan(knnExpansion(10_000, 10));
  }, 120_000);

  it('below exactBelow the graph is exact', () => {
    const space = catalog(600, 16, 12, 3);
    const g = itemKnn(space, { k: 5 });
    expect(g.exact).toBe(true);
    for (const i of [0, 17, 333, 599]) expect(Array.from(g.neighbours.subarray(i * 5, i * 5 + 5))).toEqual(exactRow(space, i, 5));
  });

  it('persists the kNN graph and the communities: a restart reads them back, a changed catalog or a damaged file recomputes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'atomem-knn-'));
    dirs.push(dir);
    const space = catalog(6000, 24, 60, 5);
    const first = await clusterItemSpace(space, {}, dir);
    expect(first.source).toBe('computed');
    expect(first.communities).toEqual(clusterItems(space));
    const again = await clusterItemSpace(space, {}, dir);
    expect(again.source).toBe('cache');
    expect(again.communities).toEqual(first.communities);
    // a damaged communities file is not trusted: the kNN graph is reused, Louvain reruns
    writeFileSync(join(dir, ITEM_COMMUNITIES_FILE), '{"fingerprint": "x", "communities": [');
    const repaired = await clusterItemSpace(space, {}, dir);
    expect(repaired.source).toBe('knn-cache');
    expect(repaired.communities).toEqual(first.communities);
    // one vector changed: another fingerprint, everything recomputed
    const changed = { ...space, vectors: space.vectors.map((v, i) => (i === 10 ? space.vectors[11] : v)) };
    expect((await clusterItemSpace(changed, {}, dir)).source).toBe('computed');
    // the event loop keeps turning during the build
    let turns = 0;
    const t = setInterval(() => turns++, 1);
    await clusterItemSpace(catalog(6000, 24, 60, 6), {});
    clearInterval(t);
    expect(turns).toBeGreaterThan(2);
  }, 120_000);
});
