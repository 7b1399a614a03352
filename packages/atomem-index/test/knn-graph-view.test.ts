// KnnGraphView feeds graphology-communities-louvain from typed arrays instead of a graphology
// Graph. It must give Louvain exactly what a real graph of the same kNN rows gives: these tests
// build that real graph (the construction clusters.ts used before) and compare Louvain's
// communities, the edges and the degrees. A graphology upgrade that reads other calls fails here.
import Graph from 'graphology';
import louvain from 'graphology-communities-louvain';
import { describe, expect, it } from 'vitest';
import type { KnnGraph } from '../src/clusters.js';
import { louvainOfKnn } from '../src/clusters.js';
import { KnnGraphView } from '../src/knn-graph-view.js';
import { mulberry32 } from '@atomem/bench/rng';

/** A kNN-like graph: clustered rows, plus the oddities rows can hold (−1, self, repeats, out of range). */
function randomKnn(seed: number, n: number, k: number, clusters: number): KnnGraph {
  const r = mulberry32(seed);
  const cl = Array.from({ length: n }, () => Math.floor(r() * clusters));
  const byC: number[][] = Array.from({ length: clusters }, () => []);
  cl.forEach((c, i) => byC[c].push(i));
  const neighbours = new Int32Array(n * k);
  const sims = new Float32Array(n * k);
  for (let i = 0; i < n; i++) {
    for (let t = 0; t < k; t++) {
      const u = r();
      let j: number;
      if (u < 0.02) j = -1;
      else if (u < 0.03) j = i;
      else if (u < 0.04) j = n + 3;
      else if (u < 0.07 && t > 0) j = neighbours[i * k + t - 1];
      else if (u < 0.12) j = Math.floor(r() * n);
      else j = byC[cl[i]][Math.floor(r() * byC[cl[i]].length)];
      neighbours[i * k + t] = j;
      sims[i * k + t] = 0.95 - 0.03 * t - 0.01 * r();
    }
  }
  return { k, neighbours, sims, exact: false };
}

/** The graphology graph clusters.ts built before the view (hasEdge checks, index keys). */
function graphologyOf(n: number, knn: KnnGraph): { graph: Graph; weights: Float64Array } {
  const graph = new Graph({ type: 'undirected', allowSelfLoops: false, multi: false });
  for (let i = 0; i < n; i++) graph.addNode(i);
  const weights = new Float64Array(n * knn.k);
  let edges = 0;
  for (let i = 0; i < n; i++) {
    for (let t = 0; t < knn.k; t++) {
      const j = knn.neighbours[i * knn.k + t];
      if (j < 0 || j === i || j >= n) continue;
      if (graph.hasEdge(i, j)) continue;
      weights[edges] = 1 + knn.sims[i * knn.k + t];
      graph.addEdgeWithKey(edges++, i, j);
    }
  }
  return { graph, weights };
}

describe('KnnGraphView', () => {
  it('has the edges, weights, order and degrees of the graphology graph of the same rows', () => {
    for (const [seed, n, k] of [
      [1, 300, 5],
      [2, 1000, 10],
      [3, 50, 12],
    ] as const) {
      const knn = randomKnn(seed, n, k, Math.max(3, Math.round(n / 40)));
      const view = new KnnGraphView(n, knn);
      const { graph, weights } = graphologyOf(n, knn);
      expect(view.order).toBe(graph.order);
      expect(view.size).toBe(graph.size);
      const real: [string, string, number][] = [];
      graph.forEachEdge((e, _a, s, t) => real.push([s, t, weights[Number(e)]]));
      const mine: [string, string, number][] = [];
      view.forEachEdge((e, _a, s, t) => mine.push([String(s), String(t), view.edgeWeight(e)]));
      expect(mine).toEqual(real);
      for (let i = 0; i < n; i++) expect(view.undirectedDegreeWithoutSelfLoops(i)).toBe(graph.undirectedDegreeWithoutSelfLoops(String(i)));
    }
  });

  it('Louvain gives the same communities through the view as through a graphology graph', () => {
    for (const [seed, n, k, resolution] of [
      [4, 2000, 10, 1],
      [5, 2000, 10, 2.5],
      [6, 500, 4, 1],
      [7, 5000, 8, 1.25],
    ] as const) {
      const knn = randomKnn(seed, n, k, Math.round(n / 50));
      const { graph, weights } = graphologyOf(n, knn);
      const expected = louvain(graph, { resolution, rng: mulberry32(9), getEdgeWeight: (e: string) => weights[Number(e)] });
      const view = new KnnGraphView(n, knn);
      const got = louvain(view as unknown as Graph, { resolution, rng: mulberry32(9), getEdgeWeight: view.edgeWeight as unknown as (e: string) => number });
      for (let i = 0; i < n; i++) expect(got[i], `item ${i} (seed ${seed})`).toBe(expected[String(i)]);
      expect(new Set(Object.values(got)).size).toBeGreaterThan(1);
    }
  });

  it('louvainOfKnn (the view, maxShare loop) equals the graphology path it replaced', () => {
    const n = 3000;
    const knn = randomKnn(8, n, 10, 3);
    const r = louvainOfKnn(n, knn, { maxShare: 0.05, seed: 3 });
    // the same loop on a real graph
    const { graph, weights } = graphologyOf(n, knn);
    let resolution = 1;
    let mapping: Record<string, number> = {};
    for (let attempt = 0; attempt < 40; attempt++) {
      mapping = louvain(graph, { resolution, rng: mulberry32(3), getEdgeWeight: (e: string) => weights[Number(e)] });
      const sizes = new Map<number, number>();
      for (const c of Object.values(mapping)) sizes.set(c, (sizes.get(c) ?? 0) + 1);
      if (Math.max(...sizes.values()) <= Math.floor(0.05 * n)) break;
      resolution *= 1.25;
    }
    expect(r.resolution).toBe(resolution);
    expect(r.resolution).toBeGreaterThan(1);
    expect(Array.from(r.membership)).toEqual(Array.from({ length: n }, (_, i) => mapping[String(i)]));
  });

  it('is read-only: every mutating call throws', () => {
    const view = new KnnGraphView(10, randomKnn(1, 10, 3, 2));
    expect(() => view.addUndirectedEdgeWithKey()).toThrow(/read-only/);
    expect(() => view.dropNode()).toThrow(/read-only/);
    expect(() => view.setNodeAttribute()).toThrow(/read-only/);
  });
});
