/**
 * Neighbour search for the shared index service: a {@link VectorSearch} that answers exactly
 * (the flat {@link FlatVectorStore} scan) while the store is small, and through a usearch HNSW
 * graph once it holds `exactBelow` vectors or more.
 *
 * - Every vector is also kept in the flat store (float32): `vector()` reads it, small stores are
 *   scanned exactly, and HNSW candidates are re-scored with exact cosine, so reported
 *   similarities (the link weights) and the `minSim` bound are exact; only recall is approximate.
 * - HNSW keys are fresh integers per insert (usearch refuses duplicate keys). A replace or a
 *   removal only unmaps the old key: it stays in the graph as a stale node that searches skip,
 *   and the graph is rebuilt from the flat store once stale nodes exceed the live size (and 256).
 *   usearch's own `remove` is never called: in usearch 2.25.3 it can spin forever once its key
 *   table holds only live and deleted slots (unum-cloud/USearch#753: ~100 remove/add cycles on a
 *   50-vector index hang the process; fixed in 2.26, which declares Node ≥ 22).
 * - `suspend()` / `resume()` skip HNSW maintenance during a bulk load (the service's restart
 *   replays persisted links and never searches) and build the graph once, multi-threaded, at the end.
 */

import usearch from 'usearch';
import { FlatVectorStore, type VectorHit, type VectorSearch } from 'atomem/engine';

/** Options of {@link HnswVectorSearch}. */
export interface HnswOptions {
  /**
   * Below this many stored vectors, searches are exact flat scans (no HNSW graph is kept).
   * Default 512: measured crossover ≈ 300–500 vectors at 384–512 dimensions, counting the HNSW
   * insert (src/server/bench.ts vectors).
   * 0 = always HNSW, Infinity = always exact.
   */
  exactBelow?: number;
  /** usearch scalar kind of the HNSW copy: `i8` (4× smaller, default) or `f32`. */
  quantization?: 'i8' | 'f32';
  /** HNSW connectivity M. Default 16. */
  connectivity?: number;
  /** HNSW ef at construction. Default 64 (same link recall as 128 on clustered 512-d data, about half the build time). */
  expansionAdd?: number;
  /** HNSW ef at search. Default 64. */
  expansionSearch?: number;
  /** Candidates fetched per wanted hit before exact re-scoring (≥ 1). Default 4. */
  oversample?: number;
  /** Threads of a bulk (re)build (0 = all cores). Searches and single inserts run on the calling thread. Default 0. */
  threads?: number;
}

/** Read-only counters of an {@link HnswVectorSearch}. */
export interface HnswStats {
  /** Stored vectors. */
  size: number;
  /** Whether an HNSW graph is currently kept. */
  hnsw: boolean;
  /** HNSW (re)builds so far. */
  builds: number;
  /** Queries answered by the exact scan. */
  exactSearches: number;
  /** Queries answered through the HNSW graph. */
  hnswSearches: number;
}

type UsearchIndex = InstanceType<typeof usearch.Index>;

/**
 * Hybrid exact/HNSW {@link VectorSearch} (cosine over unit vectors). Not thread-safe; one
 * instance per embedder space.
 */
export class HnswVectorSearch implements VectorSearch {
  readonly dim: number;
  private readonly flat: FlatVectorStore;
  private readonly opts: Required<HnswOptions>;
  private hnsw: UsearchIndex | undefined;
  private readonly keyOf = new Map<string, number>();
  private readonly idOfKey = new Map<number, string>();
  private nextKey = 1;
  /** Keys unmapped since the last build: the graph's stale nodes. */
  private removedSinceBuild = 0;
  private suspended = false;
  private readonly counters = { builds: 0, exactSearches: 0, hnswSearches: 0 };

  /** @param dim vector dimension; @param options thresholds and HNSW parameters. */
  constructor(dim: number, options: HnswOptions = {}) {
    this.dim = dim;
    this.flat = new FlatVectorStore(dim);
    this.opts = {
      exactBelow: options.exactBelow ?? 512,
      quantization: options.quantization ?? 'i8',
      connectivity: options.connectivity ?? 16,
      expansionAdd: options.expansionAdd ?? 64,
      expansionSearch: options.expansionSearch ?? 64,
      oversample: Math.max(1, options.oversample ?? 4),
      threads: options.threads ?? 0,
    };
    if (!(this.opts.exactBelow >= 0)) throw new RangeError(`exactBelow must be ≥ 0, got ${this.opts.exactBelow}`);
  }

  get size(): number {
    return this.flat.size;
  }

  /** Counters for metrics and tests. */
  stats(): HnswStats {
    return { size: this.flat.size, hnsw: this.hnsw !== undefined, ...this.counters };
  }

  has(id: string): boolean {
    return this.flat.has(id);
  }

  add(id: string, vector: ArrayLike<number>): void {
    this.flat.add(id, vector);
    if (this.suspended) return;
    if (this.hnsw === undefined) {
      if (this.flat.size >= this.opts.exactBelow) this.build();
      return;
    }
    if (this.dropKey(id) && this.tombstoneHeavy()) this.build();
    else this.insertKey(id, this.flat.vector(id)!);
  }

  remove(id: string): boolean {
    if (!this.flat.remove(id)) return false;
    if (this.hnsw !== undefined && !this.suspended) {
      this.dropKey(id);
      if (this.flat.size < this.opts.exactBelow / 2) this.dropGraph();
      else if (this.tombstoneHeavy()) this.build();
    }
    return true;
  }

  vector(id: string): Float32Array | undefined {
    return this.flat.vector(id);
  }

  /** Stop HNSW maintenance (bulk load): adds and removes touch only the exact store. */
  suspend(): void {
    if (this.suspended) return;
    this.suspended = true;
    this.dropGraph();
  }

  /** End a {@link suspend}: builds the HNSW graph in one multi-threaded pass if the store is large enough. */
  resume(): void {
    if (!this.suspended) return;
    this.suspended = false;
    if (this.flat.size >= this.opts.exactBelow) this.build();
  }

  /** Free the native graph (the instance stays usable: it falls back to exact search). */
  dispose(): void {
    this.dropGraph();
  }

  search(query: ArrayLike<number>, k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[] {
    return this.searchMany([query], k, minSim, filter)[0];
  }

  /**
   * Exhaustive exact scan while the store is in its exact regime (fewer than `exactBelow`
   * vectors); `false` (nothing visited) beyond it, where the graph falls back to searches.
   */
  scanMany(queries: readonly ArrayLike<number>[], minSim: number, visit: (queryIndex: number, id: string, sim: number) => void): boolean {
    if (this.flat.size >= this.opts.exactBelow) return false;
    this.counters.exactSearches += queries.length;
    this.flat.scanMany(queries, minSim, visit);
    return true;
  }

  searchMany(queries: readonly ArrayLike<number>[], k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[][] {
    const kk = Math.min(Math.floor(k), this.flat.size);
    if (!(kk > 0)) return queries.map(() => []);
    const hnsw = this.hnsw;
    // why: a k that covers much of the store is cheaper exact, and HNSW may return fewer than
    // asked when asked for (nearly) everything (seen: 97 of 99).
    if (hnsw === undefined || this.suspended || kk * this.opts.oversample * 2 >= this.flat.size) {
      this.counters.exactSearches += queries.length;
      return this.flat.searchMany(queries, k, minSim, filter);
    }
    this.counters.hnswSearches += queries.length;
    const qs = queries.map((q) => {
      if (q.length !== this.dim) throw new RangeError(`query has ${q.length} dimensions, store has ${this.dim}`);
      return q instanceof Float32Array ? q : Float32Array.from(q);
    });
    // why: stale (unmapped) nodes are still in the graph, so its size bounds what a search can return
    const graphSize = this.flat.size + this.removedSinceBuild;
    let want = Math.min(graphSize, kk * this.opts.oversample);
    const out: (VectorHit[] | undefined)[] = new Array(qs.length);
    let pending = qs.map((_, i) => i);
    while (pending.length > 0) {
      const keys: BigUint64Array[] = [];
      const dists: Float32Array[] = [];
      if (pending.length === 1) {
        const m = hnsw.search(qs[pending[0]], want, 1);
        keys.push(m.keys);
        dists.push(m.distances);
      } else {
        // why: single-threaded like the inserts; usearch refuses a search with more threads than
        // the thread contexts the last capacity growth reserved ("Reserve capacity ahead of searches")
        const m = hnsw.search(pending.map((i) => qs[i]), want, 1);
        for (let j = 0; j < pending.length; j++) {
          const r = m.get(j);
          keys.push(r.keys);
          dists.push(r.distances);
        }
      }
      const retry: number[] = [];
      pending.forEach((qi, j) => {
        const res = this.rescore(qs[qi], keys[j], kk, minSim, filter);
        // Enough hits, the whole store seen, or the approximate similarities already fell
        // below minSim (further candidates are farther still): done.
        const lastApproxSim = keys[j].length === 0 ? -Infinity : 1 - dists[j][dists[j].length - 1];
        const exhausted = keys[j].length < want || want >= graphSize || lastApproxSim < minSim - 0.05;
        if (res.length >= kk || exhausted) out[qi] = res;
        else retry.push(qi);
      });
      pending = retry;
      want = Math.min(graphSize, want * 4);
    }
    return out as VectorHit[][];
  }

  /** Exact cosine for HNSW candidates, bound and filter applied, best `k` first. */
  private rescore(q: Float32Array, keys: BigUint64Array, k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[] {
    const hits: VectorHit[] = [];
    const d = this.dim;
    for (let i = 0; i < keys.length; i++) {
      const id = this.idOfKey.get(Number(keys[i]));
      if (id === undefined) continue;
      const v = this.flat.vector(id)!;
      let s = 0;
      for (let j = 0; j < d; j++) s += v[j] * q[j];
      if (s < minSim) continue;
      if (filter !== undefined && !filter(id)) continue;
      hits.push({ id, sim: s });
    }
    hits.sort((a, b) => b.sim - a.sim || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return hits.length > k ? hits.slice(0, k) : hits;
  }

  private newGraph(): UsearchIndex {
    return new usearch.Index({
      dimensions: this.dim,
      metric: usearch.MetricKind.Cos,
      quantization: this.opts.quantization === 'i8' ? usearch.ScalarKind.I8 : usearch.ScalarKind.F32,
      connectivity: this.opts.connectivity,
      expansion_add: this.opts.expansionAdd,
      expansion_search: this.opts.expansionSearch,
      multi: false,
    });
  }

  /** (Re)build the HNSW graph from the exact store in one batched, multi-threaded add. */
  private build(): void {
    this.dropGraph();
    const g = this.newGraph();
    const n = this.flat.size;
    const d = this.dim;
    const ids = [...this.flat.ids()];
    const CHUNK = 4096;
    for (let start = 0; start < n; start += CHUNK) {
      const end = Math.min(n, start + CHUNK);
      const keys = new BigUint64Array(end - start);
      const block = new Float32Array((end - start) * d);
      for (let i = start; i < end; i++) {
        const key = this.nextKey++;
        keys[i - start] = BigInt(key);
        block.set(this.flat.vector(ids[i])!, (i - start) * d);
        this.keyOf.set(ids[i], key);
        this.idOfKey.set(key, ids[i]);
      }
      g.add(keys, block, this.opts.threads);
    }
    this.hnsw = g;
    this.removedSinceBuild = 0;
    this.counters.builds++;
  }

  private dropGraph(): void {
    // why: usearch frees native memory when the JS wrapper is collected; dropping every key
    // mapping keeps stale keys from resolving after a rebuild.
    this.hnsw = undefined;
    this.keyOf.clear();
    this.idOfKey.clear();
    this.removedSinceBuild = 0;
  }

  private insertKey(id: string, v: Float32Array): void {
    const key = this.nextKey++;
    this.hnsw!.add(BigInt(key), v, 1);
    this.keyOf.set(id, key);
    this.idOfKey.set(key, id);
  }

  /** Unmap `id`'s key (its node stays in the graph, stale, skipped by searches); false when it had none. */
  private dropKey(id: string): boolean {
    const key = this.keyOf.get(id);
    if (key === undefined) return false;
    this.keyOf.delete(id);
    this.idOfKey.delete(key);
    this.removedSinceBuild++;
    return true;
  }

  /** More stale nodes since the last build than live vectors (and at least 256): rebuild. */
  private tombstoneHeavy(): boolean {
    return this.removedSinceBuild > Math.max(256, this.flat.size);
  }
}

/**
 * Factory for `createInProcessIndex({ createVectorSearch })`: an {@link HnswVectorSearch} per
 * embedder space.
 */
export function hnswVectorSearch(options: HnswOptions = {}): (dim: number) => HnswVectorSearch {
  return (dim) => new HnswVectorSearch(dim, options);
}
