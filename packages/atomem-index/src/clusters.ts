/**
 * Communities of the public item space: Louvain (graphology-communities-louvain) on a kNN
 * graph of the catalog's item vectors. Runs on public data only (the catalog vector file the
 * service is configured with), so the partition and its prototypes cost no privacy.
 *
 * Why Louvain on a kNN graph: it needs no number of clusters up front, it is deterministic for
 * a seeded rng, and graphology's implementation is maintained and fast (1.3k items: ~50 ms).
 * The resolution is raised until no community holds more than `maxShare` of the items, so no
 * community is a catch-all that says nothing about a shopper.
 */
import Graph from 'graphology';
import louvain from 'graphology-communities-louvain';
import type { ItemCommunities, ItemSpace } from 'atomem/engine';

/** Options of {@link clusterItems}. */
export interface ClusterOptions {
  /** Neighbours per item in the kNN graph. Default 10. */
  k?: number;
  /** Largest community as a share of the items. Default 0.05. */
  maxShare?: number;
  /** First Louvain resolution tried (then ×1.25 until `maxShare` holds). Default 1. */
  resolution?: number;
  /** Seed of Louvain's rng. Default 1. */
  seed?: number;
}

/** mulberry32: a small seeded [0, 1) generator for Louvain's node order. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Cluster the item space (see the module comment). Community ids `k0`, `k1`, … by decreasing size. */
export function clusterItems(space: ItemSpace, options: ClusterOptions = {}): ItemCommunities {
  const { k = 10, maxShare = 0.05, seed = 1 } = options;
  const n = space.ids.length;
  if (n === 0) return { communities: [] };
  if (space.vectors.length !== n) throw new RangeError(`clusterItems: ${n} ids but ${space.vectors.length} vectors`);
  const graph = new Graph({ type: 'undirected', allowSelfLoops: false, multi: false });
  for (const id of space.ids) graph.addNode(id);
  const kk = Math.min(k, n - 1);
  const sims = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const a = space.vectors[i];
    for (let j = 0; j < n; j++) {
      if (j === i) {
        sims[j] = -Infinity;
        continue;
      }
      const b = space.vectors[j];
      let s = 0;
      for (let d = 0; d < a.length; d++) s += a[d] * b[d];
      sims[j] = s;
    }
    const order = Array.from({ length: n }, (_, j) => j).sort((x, y) => sims[y] - sims[x] || x - y);
    for (let t = 0; t < kk; t++) {
      const j = order[t];
      const u = space.ids[i];
      const v = space.ids[j];
      // why: shift cosines to (0, 2] so every kNN edge has a positive weight in centred spaces too
      const w = 1 + sims[j];
      if (!graph.hasEdge(u, v)) graph.addEdge(u, v, { weight: w });
    }
  }
  const limit = Math.max(1, Math.floor(maxShare * n));
  let resolution = options.resolution ?? 1;
  let mapping: Record<string, number> = {};
  for (let attempt = 0; attempt < 40; attempt++) {
    mapping = louvain(graph, { resolution, rng: mulberry32(seed), getEdgeWeight: 'weight' });
    const sizes = new Map<number, number>();
    for (const c of Object.values(mapping)) sizes.set(c, (sizes.get(c) ?? 0) + 1);
    if (Math.max(...sizes.values()) <= limit) break;
    resolution *= 1.25;
  }
  const groups = new Map<number, string[]>();
  for (const id of space.ids) {
    const c = mapping[id];
    let g = groups.get(c);
    if (!g) groups.set(c, (g = []));
    g.push(id);
  }
  const lists = [...groups.values()].sort((a, b) => b.length - a.length || (a[0] < b[0] ? -1 : 1));
  return { communities: lists.map((items, i) => ({ id: `k${i}`, items })) };
}
