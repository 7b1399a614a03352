/**
 * Communities of the public item space: Louvain (graphology-communities-louvain) on a kNN
 * graph of the catalog's item vectors. Runs on public data only (the catalog vector file the
 * service is configured with), so the partition and its prototypes cost no privacy.
 *
 * Why Louvain on a kNN graph: it needs no number of clusters up front, it is deterministic for
 * a seeded rng and a given graph, and graphology's implementation is maintained and fast (1.3k
 * items: ~50 ms; 100k: ~1 s of Louvain proper, most of the phase is building the graphology
 * graph). The resolution is raised until no community holds more than `maxShare` of the items,
 * so no community is a catch-all that says nothing about a shopper.
 *
 * The kNN graph ({@link itemKnn}) is exact below `exactBelow` items (the exact graph is O(n²):
 * 1M items would take days). Above, by default (`knn: 'auto'`), it comes from k-means cells
 * (./knn-cells.ts), whose recall@k is measured on a sample against the exact kNN
 * ({@link sampledRecall}); below `minRecall` a second partition, then the candidates of a usearch
 * HNSW index, complete the rows (DECISIONS 42). The method and the measured recall go with the
 * graph (persisted, logged, in health). {@link clusterItemSpace} (the service's path) runs the
 * build (on every core by default) and Louvain in a worker thread (./cluster-worker.ts) so the
 * event loop stays free, and persists the kNN graph and the communities in the data dir keyed by
 * a fingerprint of the catalog and the options, so a restart reads them back instead of
 * recomputing. The cells are deterministic at any thread count; an HNSW build with more than one
 * thread is not (usearch inserts concurrently): what a restart reads is the persisted result,
 * and Louvain on the persisted graph gives the persisted communities again.
 */
import { createHash } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type Graph from 'graphology';
import louvain from 'graphology-communities-louvain';
import { KnnGraphView } from './knn-graph-view.js';
import { knnByCells } from './knn-cells.js';
import { insertSorted, mulberry32, offer, rowFill } from './knn-rows.js';
import usearch from 'usearch';
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
  /** Below this many items the kNN graph is exact, above it comes from `knn`'s method. Default 5 000. */
  exactBelow?: number;
  /**
   * How the kNN graph is built above `exactBelow`:
   * - `auto` (default): `cells` first; its recall@k is measured on `recallSample` items against
   *   the exact kNN; below `minRecall` a second partition (another seed) is added to the rows
   *   (each row keeps the best k of both) when two independent partitions could reach
   *   `minRecall` (1 − (1 − r)² ≥ minRecall), and measured again; still below, the candidates of an
   *   HNSW index (efConstruction and ef {@link AUTO_HNSW_EF} unless set) are added too and the
   *   result is measured once more (`method`: `cells`, `cells+cells` or `cells+hnsw`);
   * - `cells`: exact search within k-means cells (./knn-cells.ts) — fast, and near-exact on
   *   catalogs of many small high-dimensional clusters, but it misses neighbours across cell
   *   boundaries where the intrinsic dimension is low or clusters are larger than cells;
   * - `hnsw`: queries of a usearch HNSW index of the catalog.
   * BENCHMARKS.md, "Item-space clustering at scale", has each on three synthetic catalogs.
   */
  knn?: 'auto' | 'cells' | 'hnsw';
  /** Items whose kNN rows are checked against the exact kNN after an approximate build. Default 100. */
  recallSample?: number;
  /** `knn: 'auto'`: the measured recall@k below which a second partition, then HNSW candidates, are added. Default 0.95. */
  minRecall?: number;
  /** Items per k-means cell (`knn: 'cells'`). Default 500. */
  cellSize?: number;
  /** Cells each item is a data point in, its nearest (`knn: 'cells'`). Default 2. */
  cellOverlap?: number;
  /** HNSW ef of the kNN queries (`knn: 'hnsw'`). Default {@link knnExpansion} (grows with the catalog). */
  expansionSearch?: number;
  /** HNSW efConstruction. Default 64. */
  expansionAdd?: number;
  /**
   * Threads of the HNSW build and queries (0 = every core). Default 0. A multi-threaded build
   * inserts concurrently, so two builds of the same catalog can give slightly different kNN
   * graphs (and so communities); the service persists the graph it built and the communities
   * of that graph, and a restart reads those back. `threads: 1` inserts in a fixed order: the
   * same catalog always gives the same graph (usearch sizes its search contexts by the build's
   * threads, so the queries use the same number).
   */
  threads?: number;
  /**
   * Scalar kind of the HNSW index. Default `i8`: a quarter of f32's memory traffic, and the
   * candidates are re-ranked by their exact f32 cosine (`oversample`), so the graph's recall is
   * f32's or better at about half the CPU time (BENCHMARKS.md, "Item-space clustering at scale").
   */
  quantization?: 'f32' | 'bf16' | 'f16' | 'i8';
  /**
   * Candidates per row fetched from the index, as a multiple of `k`, then re-ranked by their
   * exact cosine (f32): the top `k` stay. Default 2 with a quantized index, 1 (no re-ranking)
   * with `f32`.
   */
  oversample?: number;
  /**
   * Symmetric candidates: each item's query candidates (with their exact cosine, already
   * computed for the re-ranking) are also offered to those candidates' own rows, so a row also
   * gets the items that found it. No extra distance computations; raises the graph's recall at
   * a given ef (BENCHMARKS.md, "Item-space clustering at scale"). Default true.
   */
  symmetric?: boolean;
}

/**
 * HNSW ef used for a catalog of `n` items and `k` neighbours: 16·k·log10(n) / 15, at least 64 and
 * 2k, at most 256 (k = 10: 64 up to 1M items, 75 at 10M): HNSW recall at a fixed ef falls slowly
 * as the graph grows, so ef grows with log n. With symmetric candidates (the default) ef 64 gave
 * recall@10 0.963 at 1M, above the 0.958 of each row's own query at ef 80 (BENCHMARKS.md); the
 * old 4·k·log10(n) / 3 (80 at 1M) had been set for rows from their own query alone.
 */
export function knnExpansion(n: number, k: number): number {
  return Math.min(256, Math.max(64, 2 * k, Math.ceil((16 * k * Math.log10(Math.max(10, n))) / 15)));
}

/** The kNN graph: row i holds item i's `k` nearest other items (index, cosine), -1 where fewer exist. */
export interface KnnGraph {
  k: number;
  neighbours: Int32Array;
  sims: Float32Array;
  /** Whether it was computed exactly. */
  exact: boolean;
  /** How it was built: `exact`, `cells`, `hnsw`, or (`knn: 'auto'` went on) `cells+cells`, `cells+hnsw`. */
  method?: KnnMethod;
  /** Recall@k of the rows of `recallSample` random items against their exact kNN (1 when exact; NaN: not measured). */
  recall?: number;
  /** `cells+cells`, `cells+hnsw`: the measured recall of the first partition's rows alone. */
  cellsRecall?: number;
}

/** HNSW efConstruction and ef when `knn: 'auto'` adds HNSW candidates to the cells' rows (unless set). */
export const AUTO_HNSW_EF = 32;

/** How a kNN graph was built. */
export type KnnMethod = 'exact' | 'cells' | 'hnsw' | 'cells+hnsw' | 'cells+cells';
const METHODS: readonly KnnMethod[] = ['exact', 'cells', 'hnsw', 'cells+hnsw', 'cells+cells'];

/**
 * Recall@k of the graph's rows of `sample` random items (seeded) against their exact kNN by
 * cosine (usearch's exact SIMD search, f32, over all `n` rows; queries in chunks so its
 * queries × items work matrices stay near 256 MB): `sample` × n distances.
 */
export function sampledRecall(
  flat: Float32Array,
  n: number,
  dim: number,
  g: Pick<KnnGraph, 'k' | 'neighbours'>,
  sample: number,
  seed = 1,
  threads = 0,
): number {
  const k = g.k;
  const m = Math.min(Math.max(0, Math.floor(sample)), n);
  if (m === 0 || n <= 1) return Number.NaN;
  const rng = mulberry32(seed + 0x5eed);
  const picks = Array.from({ length: m }, () => Math.floor(rng() * n));
  const chunk = Math.max(1, Math.floor((1 << 24) / n));
  let hit = 0;
  for (let a = 0; a < m; a += chunk) {
    const part = picks.slice(a, a + chunk);
    const q = new Float32Array(part.length * dim);
    part.forEach((p, i) => q.set(flat.subarray(p * dim, p * dim + dim), i * dim));
    const r = usearch.exactSearch(flat, q, dim, k + 1, usearch.MetricKind.Cos, threads) as unknown as { keys: BigUint64Array };
    part.forEach((p, i) => {
      const truth = new Set<number>();
      for (let h = 0; h <= k && truth.size < k; h++) {
        const key = Number(r.keys[i * (k + 1) + h]);
        if (key !== p) truth.add(key);
      }
      for (let t = 0; t < k; t++) if (truth.has(g.neighbours[p * k + t])) hit++;
    });
  }
  return hit / (m * k);
}

/** Progress of a clustering: the phase and the share of that phase done. */
export type ClusterPhase = 'knn' | 'communities';

const yieldLoop = () => new Promise<void>((r) => setImmediate(r));

/** The vectors of a space as one row-major matrix. */
export function flatVectors(space: ItemSpace): Float32Array {
  const n = space.ids.length;
  const dim = space.vectors[0]?.length ?? 0;
  const flat = new Float32Array(n * dim);
  space.vectors.forEach((v, i) => flat.set(v, i * dim));
  return flat;
}

/** The kNN graph of the item space, synchronously: exact below `exactBelow` items, usearch HNSW above. */
export function itemKnn(space: ItemSpace, options: ClusterOptions = {}): KnnGraph {
  return knnOfMatrix(flatVectors(space), space.ids.length, space.vectors[0]?.length ?? 0, options);
}

/**
 * The kNN graph of `n` row-major `dim`-d unit vectors (the core of {@link itemKnn}, also run by
 * the clustering worker): exact below `exactBelow` rows, above by `options.knn` (see
 * {@link ClusterOptions.knn}), with `threads` threads. `onProgress` gets the share done.
 */
export function knnOfMatrix(flat: Float32Array, n: number, dim: number, options: ClusterOptions = {}, onProgress?: (share: number) => void): KnnGraph {
  const k = Math.max(1, Math.min(options.k ?? 10, n - 1));
  const neighbours = new Int32Array(n * k).fill(-1);
  const sims = new Float32Array(n * k);
  const exact = n < (options.exactBelow ?? 5000);
  if (n <= 1) return { k, neighbours, sims, exact: true, method: 'exact', recall: 1 };
  if (exact) {
    const row = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const a = i * dim;
      for (let j = 0; j < n; j++) {
        if (j === i) {
          row[j] = -Infinity;
          continue;
        }
        let s = 0;
        const b = j * dim;
        for (let d = 0; d < dim; d++) s += flat[a + d] * flat[b + d];
        row[j] = s;
      }
      // top k by insertion (ties: lower index first), O(n·k) at worst
      const base = i * k;
      let filled = 0;
      for (let j = 0; j < n; j++) {
        if (j === i) continue;
        const sj = row[j];
        filled = insertSorted(neighbours, sims, base, k, filled, j, sj);
      }
      if (onProgress && i % 256 === 255) onProgress(i / n);
    }
    return { k, neighbours, sims, exact, method: 'exact', recall: 1 };
  }
  const threads = options.threads ?? 0;
  const method = options.knn ?? 'auto';
  if (!['auto', 'cells', 'hnsw'].includes(method)) throw new RangeError(`knn: ${String(method)} (auto, cells or hnsw)`);
  const recallOf = (g: KnnGraph) => sampledRecall(flat, n, dim, g, options.recallSample ?? 100, options.seed ?? 1, threads);
  if (method === 'hnsw') {
    hnswInto(flat, n, dim, k, options, neighbours, sims, onProgress);
    const g: KnnGraph = { k, neighbours, sims, exact, method: 'hnsw' };
    return { ...g, recall: recallOf(g) };
  }
  // why: in `auto` the first partition is 40 % of the progress bar, a second one 20 %, the HNSW complement the rest
  const first = method === 'auto' ? 0.4 : 1;
  const cellOptions = { k, cellSize: options.cellSize, overlap: options.cellOverlap, seed: options.seed, threads };
  const c = knnByCells(flat, n, dim, cellOptions, onProgress && ((s) => onProgress(s * first)), { neighbours, sims });
  const cells: KnnGraph = { k, neighbours: c.neighbours, sims: c.sims, exact, method: 'cells' };
  let recall = recallOf(cells);
  const minRecall = options.minRecall ?? 0.95;
  if (method === 'cells' || !(recall < minRecall)) {
    onProgress?.(1);
    return { ...cells, recall };
  }
  // a second partition (another seed: other centroids, other boundaries) completes the rows —
  // tried only when two independent partitions could reach the floor (1 − (1 − r)² ≥ minRecall,
  // r ≥ 0.776 at 0.95): far below it (a low intrinsic dimension) it would be paid for nothing
  const cellsRecall = recall;
  if (1 - (1 - recall) ** 2 >= minRecall) {
    knnByCells(flat, n, dim, { ...cellOptions, seed: (options.seed ?? 1) + 7919 }, onProgress && ((s) => onProgress(0.4 + 0.2 * s)), c);
    recall = recallOf(cells);
    if (!(recall < minRecall)) {
      onProgress?.(1);
      return { ...cells, method: 'cells+cells', recall, cellsRecall };
    }
  }
  // the cells missed: add the HNSW candidates to their rows (each keeps the best k of both)
  // why: the HNSW candidates complete rows the cells mostly found, so a cheaper index does (efs 32:
  // on the two 100k catalogs where the cells miss, recall@10 0.966 / 0.989 for 0.71 / 0.60 of
  // the time with DECISIONS 41's efs, which gave 0.985 / 0.999; BENCHMARKS.md, "Item-space clustering at scale")
  const complement = { ...options, expansionAdd: options.expansionAdd ?? AUTO_HNSW_EF, expansionSearch: options.expansionSearch ?? AUTO_HNSW_EF };
  hnswInto(flat, n, dim, k, complement, c.neighbours, c.sims, onProgress && ((s) => onProgress(0.6 + 0.4 * s)));
  const both: KnnGraph = { k, neighbours: c.neighbours, sims: c.sims, exact, method: 'cells+hnsw', cellsRecall };
  return { ...both, recall: recallOf(both) };
}

/**
 * The HNSW candidates of every row (usearch, built and queried in batches with `threads`
 * threads), offered into the rows of `neighbours` / `sims` (empty, or the cells' rows).
 */
function hnswInto(
  flat: Float32Array,
  n: number,
  dim: number,
  k: number,
  options: ClusterOptions,
  neighbours: Int32Array,
  sims: Float32Array,
  onProgress?: (share: number) => void,
): void {
  const fill = rowFill(neighbours, n, k);
  const threads = options.threads ?? 0;
  const quantization = options.quantization ?? 'i8';
  const over = Math.max(1, Math.floor(options.oversample ?? (quantization === 'f32' ? 1 : 2)));
  const index = new usearch.Index({
    dimensions: dim,
    metric: usearch.MetricKind.Cos,
    quantization: { f32: usearch.ScalarKind.F32, bf16: usearch.ScalarKind.BF16, f16: usearch.ScalarKind.F16, i8: usearch.ScalarKind.I8 }[quantization],
    connectivity: 16,
    expansion_add: options.expansionAdd ?? 64,
    expansion_search: options.expansionSearch ?? knnExpansion(n, k),
    multi: false,
  });
  // why: batches large enough for the threads to share, small enough for ~40 progress steps
  const step = Math.max(4096, Math.ceil(n / 20));
  for (let i = 0; i < n; i += step) {
    const end = Math.min(n, i + step);
    const keys = new BigUint64Array(end - i);
    for (let j = i; j < end; j++) keys[j - i] = BigInt(j);
    index.add(keys, flat.subarray(i * dim, end * dim), threads);
    onProgress?.((0.5 * end) / n);
  }
  // why: with oversampling, candidates are scored again by their exact cosine (the index's are quantized)
  const want = k * over + 1;
  let inv: Float32Array | undefined;
  if (over > 1) {
    inv = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      let s = 0;
      for (let d = i * dim; d < (i + 1) * dim; d++) s += flat[d] * flat[d];
      inv[i] = s > 0 ? 1 / Math.sqrt(s) : 0;
    }
  }
  const symmetric = options.symmetric ?? true;
  for (let i = 0; i < n; i += step) {
    const end = Math.min(n, i + step);
    const m = index.search(flat.subarray(i * dim, end * dim), want, threads) as unknown as {
      keys: BigUint64Array;
      distances: Float32Array;
      counts: BigUint64Array | number[];
    };
    for (let q = 0; q < end - i; q++) {
      const self = i + q;
      const base = self * k;
      const found = Math.min(want, Number(m.counts[q]));
      for (let h = 0; h < found; h++) {
        const key = Number(m.keys[q * want + h]);
        if (key === self || key < 0 || key >= n) continue;
        let sim: number;
        if (inv) {
          let dot = 0;
          const a = self * dim;
          const b = key * dim;
          for (let d = 0; d < dim; d++) dot += flat[a + d] * flat[b + d];
          sim = dot * inv[self] * inv[key];
        } else sim = 1 - m.distances[q * want + h];
        // ties: the order of the offers (the index's order within a query)
        fill[self] = offer(neighbours, sims, base, k, fill[self], key, sim);
        if (symmetric) fill[key] = offer(neighbours, sims, key * k, k, fill[key], self, sim);
      }
    }
    onProgress?.(0.5 + (0.5 * end) / n);
  }
}

/** What {@link louvainOfKnn} found. */
export interface KnnMembership {
  /** Community of each item (Louvain's labels, any order). */
  membership: Int32Array;
  /** Resolution that met `maxShare`, and the Louvain runs it took. */
  resolution: number;
  runs: number;
  /** Time spent building the graph view Louvain reads (the rest of the phase is Louvain's runs). */
  graphMs: number;
}

/**
 * Louvain over a kNN graph of `n` items (the core of {@link communitiesOfKnn}, also run by the
 * clustering worker): the undirected graph of the kNN rows (edge weight 1 + cosine), the
 * resolution raised ×1.25 until no community holds more than `maxShare` of the items. Louvain
 * (graphology-communities-louvain) reads the rows through a {@link KnnGraphView} (typed arrays)
 * instead of a graphology `Graph`, whose construction had been most of the phase (79 of 98 s at
 * 1M items); the communities are the same. Deterministic for a given kNN graph and seed.
 * `onProgress(share)`: the view's construction is the first tenth, each Louvain run after it
 * moves on by half of what is left.
 */
export function louvainOfKnn(n: number, knn: KnnGraph, options: ClusterOptions = {}, onProgress?: (share: number) => void): KnnMembership {
  const { maxShare = 0.05, seed = 1 } = options;
  const t0 = performance.now();
  const graph = new KnnGraphView(n, knn);
  onProgress?.(0.1);
  const graphMs = performance.now() - t0;
  const limit = Math.max(1, Math.floor(maxShare * n));
  let resolution = options.resolution ?? 1;
  let mapping: Record<string, number> = {};
  let runs = 0;
  let done = 0.1;
  for (let attempt = 0; attempt < 40; attempt++) {
    runs++;
    // why: the view is read-only and answers exactly the calls Louvain makes (knn-graph-view.ts)
    mapping = louvain(graph as unknown as Graph, { resolution, rng: mulberry32(seed), getEdgeWeight: graph.edgeWeight as unknown as (edge: string) => number });
    done += (1 - done) / 2;
    onProgress?.(done);
    const sizes = new Map<number, number>();
    for (const c of Object.values(mapping)) sizes.set(c, (sizes.get(c) ?? 0) + 1);
    let largest = 0;
    for (const s of sizes.values()) largest = Math.max(largest, s);
    if (largest <= limit) break;
    resolution *= 1.25;
  }
  const membership = new Int32Array(n);
  for (let i = 0; i < n; i++) membership[i] = mapping[i];
  return { membership, resolution, runs, graphMs };
}

/** Communities of a membership: ids `k0`, `k1`, … by decreasing size (ties: smaller first id first). */
export function communitiesOfMembership(ids: readonly string[], membership: Int32Array): ItemCommunities {
  const groups = new Map<number, string[]>();
  for (let i = 0; i < ids.length; i++) {
    const c = membership[i];
    let g = groups.get(c);
    if (!g) groups.set(c, (g = []));
    g.push(ids[i]);
  }
  const lists = [...groups.values()].sort((a, b) => b.length - a.length || (a[0] < b[0] ? -1 : 1));
  return { communities: lists.map((items, i) => ({ id: `k${i}`, items })) };
}

/** Louvain over a kNN graph (see the module comment). Community ids `k0`, `k1`, … by decreasing size. */
export function communitiesOfKnn(space: ItemSpace, knn: KnnGraph, options: ClusterOptions = {}): ItemCommunities {
  const n = space.ids.length;
  if (n === 0) return { communities: [] };
  return communitiesOfMembership(space.ids, louvainOfKnn(n, knn, options).membership);
}

/** Cluster the item space (see the module comment), synchronously. Community ids `k0`, `k1`, … by decreasing size. */
export function clusterItems(space: ItemSpace, options: ClusterOptions = {}): ItemCommunities {
  if (space.ids.length === 0) return { communities: [] };
  if (space.vectors.length !== space.ids.length) throw new RangeError(`clusterItems: ${space.ids.length} ids but ${space.vectors.length} vectors`);
  return communitiesOfKnn(space, itemKnn(space, options), options);
}

function fingerprintHash(space: ItemSpace, options: ClusterOptions) {
  const h = createHash('sha256');
  h.update(
    JSON.stringify({
      v: 2,
      embedderId: space.embedderId,
      n: space.ids.length,
      o: {
        k: options.k ?? 10,
        maxShare: options.maxShare ?? 0.05,
        resolution: options.resolution ?? 1,
        seed: options.seed ?? 1,
        exactBelow: options.exactBelow ?? 5000,
        ef: options.expansionSearch ?? null,
        q: options.quantization ?? 'i8',
        over: options.oversample ?? null,
        knn: options.knn ?? 'auto',
        minRecall: options.minRecall ?? 0.95,
        recallSample: options.recallSample ?? 100,
        cell: options.cellSize ?? 500,
        cellOverlap: options.cellOverlap ?? 2,
        efC: options.expansionAdd ?? 64,
        sym: options.symmetric ?? true,
      },
    }),
  );
  return h;
}
function hashItem(h: ReturnType<typeof createHash>, space: ItemSpace, i: number): void {
  h.update(space.ids[i]);
  h.update('\0');
  const v = space.vectors[i];
  h.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
}

/** Fingerprint of a catalog and the clustering options (what the persisted files are keyed by). */
export function spaceFingerprint(space: ItemSpace, options: ClusterOptions = {}): string {
  const h = fingerprintHash(space, options);
  for (let i = 0; i < space.ids.length; i++) hashItem(h, space, i);
  return h.digest('hex');
}

/** {@link spaceFingerprint} with an event-loop turn every 50,000 items (1M × 128-d: ~1 s of hashing). */
export async function spaceFingerprintAsync(space: ItemSpace, options: ClusterOptions = {}): Promise<string> {
  const h = fingerprintHash(space, options);
  for (let i = 0; i < space.ids.length; i++) {
    hashItem(h, space, i);
    if (i % 50_000 === 49_999) await yieldLoop();
  }
  return h.digest('hex');
}

/** A graph's method and measured recall as reported (JSON has no NaN: null reads back as NaN). */
function knnInfo(g: { method?: KnnMethod; recall?: number | null; cellsRecall?: number | null; exact?: boolean } | undefined): ClusterRun['knn'] {
  const method = g?.method && METHODS.includes(g.method) ? g.method : g?.exact ? 'exact' : 'hnsw';
  return {
    method,
    recall: typeof g?.recall === 'number' ? g.recall : Number.NaN,
    ...(typeof g?.cellsRecall === 'number' ? { cellsRecall: g.cellsRecall } : {}),
  };
}

/** File names of the persisted clustering in the data dir. */
export const ITEM_KNN_FILE = 'item-space.knn';
export const ITEM_COMMUNITIES_FILE = 'item-space.communities.json';

/**
 * Write a cache file atomically (temp file, fsync, rename). The files are caches: on a full,
 * read-only or failing disk nothing is written (the temp file is removed) and the next start
 * computes them again; the service goes on.
 */
function writeAtomic(file: string, data: Uint8Array | string): void {
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
  } catch (err) {
    if (!['ENOSPC', 'EDQUOT', 'EROFS', 'EIO', 'EACCES', 'EPERM'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
    try {
      unlinkSync(tmp);
    } catch {
      // not created
    }
  }
}

/** What {@link clusterItemSpace} did. */
export interface ClusterRun {
  communities: ItemCommunities;
  /** `cache`: read back from the data dir; `knn-cache`: kNN read back, Louvain rerun; `computed`. */
  source: 'cache' | 'knn-cache' | 'computed';
  ms: number;
  /** Time to the kNN graph (fingerprint, build and queries or read-back). */
  knnMs: number;
  /** Time of Louvain (graph construction and runs; 0 when the communities were read back). */
  louvainMs: number;
  /** Of which building the graphology graph. */
  louvainGraphMs: number;
  /** Louvain runs (the resolution is raised until `maxShare` holds). */
  louvainRuns: number;
  /** Whether the work ran in a worker thread. */
  worker: boolean;
  /**
   * How the kNN graph was built, and its recall@k measured on a sample (NaN: not measured);
   * `cells+cells`, `cells+hnsw`: also the first partition's measured recall, which sent `auto` on (not kept in
   * the kNN file: a restart from the kNN file alone reports the method and the final recall).
   */
  knn: { method: KnnMethod; recall: number; cellsRecall?: number };
}

/** Options of {@link clusterItemSpace} beyond the clustering's. */
export interface ClusterRunOptions {
  /** Data dir where the kNN graph and the communities are persisted (none: nothing persisted). */
  dir?: string;
  /** Progress: the phase and the share of it done (at most ~5 calls a second). */
  onProgress?: (share: number, phase: ClusterPhase) => void;
  /** Aborts the clustering (the worker is terminated; the promise rejects with the signal's reason). */
  signal?: AbortSignal;
  /**
   * From this many items on, the kNN graph and Louvain run in a worker thread (the event loop
   * stays free: health answers); below, in this thread (a worker costs ~0.1–0.5 s to start).
   * Default 2 000.
   */
  workerFrom?: number;
}

/** Job of the clustering worker (./cluster-worker.ts). */
export interface ClusterJob {
  n: number;
  dim: number;
  options: ClusterOptions;
  /** Row-major vectors (when the kNN graph is to be built). */
  flat?: Float32Array;
  /** The persisted kNN graph (when only Louvain is to run). */
  knn?: KnnGraph;
}

/** Messages of the clustering worker. */
export type ClusterWorkerMessage =
  | { type: 'progress'; phase: ClusterPhase; share: number }
  | { type: 'knn'; knn: KnnGraph; ms: number }
  | { type: 'done'; membership: Int32Array; resolution: number; runs: number; louvainMs: number; graphMs: number };

/** Runs a {@link ClusterJob} in ./cluster-worker (.ts from source through tsx, .js when built). */
function runWorker(
  job: ClusterJob,
  onMessage: (m: ClusterWorkerMessage) => void,
  signal?: AbortSignal,
): Promise<Extract<ClusterWorkerMessage, { type: 'done' }>> {
  const here = import.meta.url;
  const fromSource = here.endsWith('.ts');
  const url = new URL(fromSource ? './cluster-worker.ts' : './cluster-worker.js', here);
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const transfer = job.flat ? [job.flat.buffer as ArrayBuffer] : [];
    // why: from source (tests, `--import tsx` scripts) the worker's TypeScript goes through tsx's
    // API: Node 20 does not pass the main thread's loader hooks on to a worker
    const worker = fromSource
      ? new Worker(
          new URL(
            `data:text/javascript,${encodeURIComponent(`import { register } from ${JSON.stringify(pathToFileURL(createRequire(here).resolve('tsx/esm/api')).href.replace(/index\.cjs$/, 'index.mjs'))}; register(); await import(${JSON.stringify(url.href)});`)}`,
          ),
          { workerData: job, transferList: transfer },
        )
      : new Worker(url, { workerData: job, transferList: transfer });
    let settled = false;
    const onAbort = () => {
      settled = true;
      void worker.terminate();
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const finish = () => signal?.removeEventListener('abort', onAbort);
    worker.on('message', (m: ClusterWorkerMessage) => {
      if (m.type === 'done') {
        settled = true;
        finish();
        resolve(m);
        void worker.terminate();
      } else onMessage(m);
    });
    worker.on('error', (err) => {
      if (settled) return;
      settled = true;
      finish();
      reject(err);
    });
    worker.on('exit', (code) => {
      if (settled) return;
      settled = true;
      finish();
      reject(new Error(`the clustering worker exited with code ${code} before it finished`));
    });
  });
}

/**
 * The service's clustering: {@link clusterItems} in a worker thread (from `workerFrom` items on:
 * the kNN graph built with `threads` threads, then Louvain, while the event loop stays free), with
 * both the kNN graph and the communities persisted in `dir` (atomic writes) under a fingerprint
 * of the catalog and options. The kNN graph is written as soon as it is built (a stop during
 * Louvain keeps it); a restart with the same catalog reads the communities back; a damaged
 * communities file reruns Louvain on the persisted kNN graph (the same communities: Louvain is
 * deterministic for a given graph); a changed catalog recomputes and replaces both files. A
 * persisted file that does not parse is ignored (recomputed), never trusted.
 */
export async function clusterItemSpace(space: ItemSpace, options: ClusterOptions = {}, run: ClusterRunOptions = {}): Promise<ClusterRun> {
  const { dir, onProgress, signal } = run;
  const t0 = performance.now();
  if (space.vectors.length !== space.ids.length) throw new RangeError(`clusterItems: ${space.ids.length} ids but ${space.vectors.length} vectors`);
  const n = space.ids.length;
  const dim = space.vectors[0]?.length ?? 0;
  const fp = dir ? await spaceFingerprintAsync(space, options) : '';
  const commFile = dir ? join(dir, ITEM_COMMUNITIES_FILE) : '';
  const knnFile = dir ? join(dir, ITEM_KNN_FILE) : '';
  if (dir && existsSync(commFile)) {
    try {
      const saved = JSON.parse(readFileSync(commFile, 'utf8')) as {
        fingerprint: string;
        communities: ItemCommunities['communities'];
        knn?: { method: KnnMethod; recall: number | null };
      };
      if (saved.fingerprint === fp && Array.isArray(saved.communities))
        return {
          communities: { communities: saved.communities },
          source: 'cache',
          ms: performance.now() - t0,
          knnMs: 0,
          louvainMs: 0,
          louvainGraphMs: 0,
          louvainRuns: 0,
          worker: false,
          knn: knnInfo(saved.knn),
        };
    } catch {
      // unreadable: recompute
    }
  }
  let knn: KnnGraph | undefined;
  if (dir && existsSync(knnFile)) knn = readKnn(knnFile, fp, n);
  const source: ClusterRun['source'] = knn ? 'knn-cache' : 'computed';
  let last = -Infinity;
  let lastPhase: ClusterPhase | undefined;
  const progress = (phase: ClusterPhase, share: number) => {
    const now = performance.now();
    if (share < 1 && phase === lastPhase && now - last < 200) return;
    last = now;
    lastPhase = phase;
    onProgress?.(share, phase);
  };
  const persist = (g: KnnGraph) => {
    if (dir) writeKnn(knnFile, fp, g);
  };
  if (n < (run.workerFrom ?? 2000)) {
    if (!knn) {
      knn = knnOfMatrix(flatVectors(space), n, dim, options);
      persist(knn);
    }
    const knnMs = performance.now() - t0;
    const t1 = performance.now();
    const lv = n === 0 ? undefined : louvainOfKnn(n, knn, options);
    const communities = lv ? communitiesOfMembership(space.ids, lv.membership) : { communities: [] };
    const louvainMs = performance.now() - t1;
    const info = knnInfo(knn);
    if (dir) writeAtomic(commFile, JSON.stringify({ fingerprint: fp, communities: communities.communities, knn: info }));
    return {
      communities,
      source,
      ms: performance.now() - t0,
      knnMs,
      louvainMs,
      louvainGraphMs: lv?.graphMs ?? 0,
      louvainRuns: lv?.runs ?? 0,
      worker: false,
      knn: info,
    };
  }
  let knnMs = knn ? performance.now() - t0 : 0;
  let built: KnnGraph | undefined;
  onProgress?.(0, knn ? 'communities' : 'knn');
  const done = await runWorker(
    knn ? { n, dim, options, knn } : { n, dim, options, flat: flatVectors(space) },
    (m) => {
      if (m.type === 'progress') progress(m.phase, m.share);
      else if (m.type === 'knn') {
        knnMs = performance.now() - t0;
        built = m.knn;
        persist(m.knn);
      }
    },
    signal,
  );
  const communities = communitiesOfMembership(space.ids, done.membership);
  const info = knnInfo(knn ?? built);
  if (dir) writeAtomic(commFile, JSON.stringify({ fingerprint: fp, communities: communities.communities, knn: info }));
  onProgress?.(1, 'communities');
  return {
    communities,
    source,
    ms: performance.now() - t0,
    knnMs,
    louvainMs: done.louvainMs,
    louvainGraphMs: done.graphMs,
    louvainRuns: done.runs,
    worker: true,
    knn: info,
  };
}

// kNN file: "ATMK" | u32 version 2 | u32 n | u32 k | u32 exact | 64 hex fingerprint | u32 method | f32 recall | i32 neighbours[n·k] | f32 sims[n·k]
const KNN_MAGIC = 0x4b4d5441;
const KNN_HEAD = 4 * 4 + 4 + 64 + 8;
function writeKnn(file: string, fp: string, g: KnnGraph): void {
  const n = g.neighbours.length / g.k;
  const buf = new Uint8Array(KNN_HEAD + g.neighbours.byteLength + g.sims.byteLength);
  const dv = new DataView(buf.buffer);
  dv.setUint32(0, KNN_MAGIC, true);
  dv.setUint32(4, 2, true);
  dv.setUint32(8, n, true);
  dv.setUint32(12, g.k, true);
  dv.setUint32(16, g.exact ? 1 : 0, true);
  buf.set(Buffer.from(fp, 'ascii'), 20);
  dv.setUint32(84, Math.max(0, METHODS.indexOf(g.method ?? (g.exact ? 'exact' : 'hnsw'))), true);
  dv.setFloat32(88, g.recall ?? Number.NaN, true);
  buf.set(new Uint8Array(g.neighbours.buffer, g.neighbours.byteOffset, g.neighbours.byteLength), KNN_HEAD);
  buf.set(new Uint8Array(g.sims.buffer, g.sims.byteOffset, g.sims.byteLength), KNN_HEAD + g.neighbours.byteLength);
  writeAtomic(file, buf);
}
function readKnn(file: string, fp: string, n: number): KnnGraph | undefined {
  try {
    const b = readFileSync(file);
    const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    // why: version 1 files (no method, no recall) are ignored: rebuilt, never misreported
    if (b.byteLength < KNN_HEAD || dv.getUint32(0, true) !== KNN_MAGIC || dv.getUint32(4, true) !== 2 || dv.getUint32(8, true) !== n) return undefined;
    if (b.subarray(20, 84).toString('ascii') !== fp) return undefined;
    const k = dv.getUint32(12, true);
    const method = METHODS[dv.getUint32(84, true)];
    if (b.byteLength !== KNN_HEAD + n * k * 8 || !method) return undefined;
    const body = new Uint8Array(b.byteLength - KNN_HEAD);
    body.set(b.subarray(KNN_HEAD));
    return {
      k,
      neighbours: new Int32Array(body.buffer, 0, n * k),
      sims: new Float32Array(body.buffer, n * k * 4, n * k),
      exact: dv.getUint32(16, true) === 1,
      method,
      recall: dv.getFloat32(88, true),
    };
  } catch {
    return undefined;
  }
}

/** The kNN graph persisted in `dir` for this catalog and options, if any (benchmarks, tests). */
export function readPersistedKnn(dir: string, space: ItemSpace, options: ClusterOptions = {}): KnnGraph | undefined {
  return readKnn(join(dir, ITEM_KNN_FILE), spaceFingerprint(space, options), space.ids.length);
}

/** Remove the persisted clustering files of a data dir (tests, operators). */
export function removeClusterFiles(dir: string): void {
  for (const f of [ITEM_KNN_FILE, ITEM_COMMUNITIES_FILE]) if (existsSync(join(dir, f))) unlinkSync(join(dir, f));
}
