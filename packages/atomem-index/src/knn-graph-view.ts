/**
 * A read-only graphology view of a kNN graph, for graphology-communities-louvain.
 *
 * why: Louvain itself (graphology-communities-louvain) takes ~20 s on a 1M-item kNN graph, but
 * building a graphology `Graph` of it took ~80 s (one EdgeData object, one attribute object and
 * two adjacency-dictionary entries per edge, 7M edges). The Louvain implementation reads its
 * input through a handful of read-only calls — `type`, `multi`, `order`, `size`,
 * `selfLoopCount`, `forEachNode`, `undirectedDegreeWithoutSelfLoops`, `forEachEdge` — to fill
 * its own typed-array index (graphology-indices' `UndirectedLouvainIndex`) before it runs. This
 * view answers those calls from typed arrays (an edge list and the degrees), nodes and edges
 * keyed by their index, in the order a graphology graph built from the same rows would iterate
 * them, so Louvain computes the same communities (tested against a real graphology graph in
 * packages/atomem-index/test/knn-graph-view.test.ts, which fails if a new graphology version reads something
 * else). Every mutating call throws: the view exists only to be read by Louvain.
 */
import type { KnnGraph } from './clusters.js';

const NO_ATTRIBUTES: Readonly<Record<string, never>> = Object.freeze({});

function readOnly(name: string): never {
  throw new Error(`KnnGraphView is read-only: ${name} is not supported`);
}

/** The undirected edges of a kNN graph's rows, deduplicated, with weight 1 + cosine. */
export class KnnGraphView {
  readonly type = 'undirected' as const;
  readonly multi = false;
  readonly allowSelfLoops = false;
  readonly selfLoopCount = 0;
  readonly directedSize = 0;
  /** Nodes: 0 … n − 1. */
  readonly order: number;
  /** Undirected edges. */
  readonly size: number;
  /** Edge e joins `source[e]` and `target[e]`. */
  readonly source: Int32Array;
  readonly target: Int32Array;
  /** Edge weights (1 + the cosine of the row entry that created the edge). */
  readonly weights: Float64Array;
  private readonly degree: Int32Array;

  /**
   * Edges in row order: row i's entry j becomes edge (i, j) unless it is out of range, i itself,
   * a repeat within the row, or already created by row j (j < i and i in row j) — the same
   * edges, weights and order as adding the rows to a graphology graph with `hasEdge` checks.
   */
  constructor(n: number, knn: KnnGraph) {
    const { k, neighbours, sims } = knn;
    const cap = n * k;
    const source = new Int32Array(cap);
    const target = new Int32Array(cap);
    const weights = new Float64Array(cap);
    const degree = new Int32Array(n);
    let e = 0;
    for (let i = 0; i < n; i++) {
      const base = i * k;
      for (let t = 0; t < k; t++) {
        const j = neighbours[base + t];
        if (j < 0 || j === i || j >= n) continue;
        let seen = false;
        for (let u = 0; u < t && !seen; u++) seen = neighbours[base + u] === j;
        if (!seen && j < i) {
          const b = j * k;
          for (let u = 0; u < k && !seen; u++) seen = neighbours[b + u] === i;
        }
        if (seen) continue;
        source[e] = i;
        target[e] = j;
        // why: shift cosines to (0, 2] so every kNN edge has a positive weight in centred spaces too
        weights[e] = 1 + sims[base + t];
        degree[i]++;
        degree[j]++;
        e++;
      }
    }
    this.order = n;
    this.size = e;
    this.source = source.subarray(0, e);
    this.target = target.subarray(0, e);
    this.weights = weights.subarray(0, e);
    this.degree = degree;
  }

  get undirectedSize(): number {
    return this.size;
  }

  forEachNode(callback: (node: number, attributes: Readonly<Record<string, never>>) => void): void {
    for (let i = 0; i < this.order; i++) callback(i, NO_ATTRIBUTES);
  }

  undirectedDegreeWithoutSelfLoops(node: number): number {
    return this.degree[node];
  }

  forEachEdge(
    callback: (
      edge: number,
      attributes: Readonly<Record<string, never>>,
      source: number,
      target: number,
      sourceAttributes: Readonly<Record<string, never>>,
      targetAttributes: Readonly<Record<string, never>>,
      undirected: boolean,
    ) => void,
  ): void {
    const { source, target } = this;
    for (let e = 0; e < this.size; e++) callback(e, NO_ATTRIBUTES, source[e], target[e], NO_ATTRIBUTES, NO_ATTRIBUTES, true);
  }

  /** Louvain's edge weight getter for this view. */
  readonly edgeWeight = (edge: number): number => this.weights[edge];

  // graphology's `isGraph` looks for these; the view cannot be changed.
  addUndirectedEdgeWithKey(): never {
    return readOnly('addUndirectedEdgeWithKey');
  }
  dropNode(): never {
    return readOnly('dropNode');
  }
  setNodeAttribute(): never {
    return readOnly('setNodeAttribute');
  }
}
