/**
 * The item-space kNN graph from k-means cells (an inverted-file partition, as Faiss's IVF
 * indexes use for search, here used to build the whole graph): the catalog is cut into cells of
 * about `cellSize` items by k-means (centroids trained on a sample), each item is a query in its
 * nearest cell and a data point in its `overlap` nearest cells, and each cell's queries get their
 * exact nearest data points (usearch `exactSearch`, SIMD, on per-vector-scaled i8 copies), which
 * are re-ranked by their exact f32 cosine and offered to both rows (an item also gets the items
 * that found it, as the HNSW path's symmetric candidates). A cell whose queries exceed `cellSize`
 * is cut again the same way.
 *
 * Why: at 1M 512-d items HNSW's insert pass alone took most of the five-minute budget on two
 * cores, and its recall@10 fell to 0.85 (BENCHMARKS.md, "Item-space clustering at scale"); the
 * cells do brute force where it is cheap (within a cell) and pay for the routing once per item,
 * with no graph to walk. Cost ≈ n·(n / cellSize) distances to route every item plus
 * n·overlap·cellSize within the cells — quadratic in n at a fixed cell size, so beyond a few
 * million items the routing would need a tree of its own (not built: SCALING.md §0.1).
 *
 * Deterministic for a given catalog and seed at any number of threads: the sample, the k-means
 * rounds and the exact searches do not depend on the threads' schedule (tested).
 */
import usearch from 'usearch';
import { mulberry32, offer as offerInto, rowFill } from './knn-rows.js';

/** Options of {@link knnByCells}. */
export interface CellsOptions {
  /** Neighbours per row. */
  k: number;
  /** Items per cell (the k-means cells are n / cellSize). Default 500. */
  cellSize?: number;
  /** Cells each item is a data point in (its nearest ones). Default 2. */
  overlap?: number;
  /** k-means rounds on the sample. Default 6. */
  iterations?: number;
  /** Sample size of the k-means training as a multiple of the cells. Default 40. */
  samplePerCell?: number;
  /** Seed of the sample and the initial centroids. Default 1. */
  seed?: number;
  /** Threads of the exact searches (0 = every core). Default 0. */
  threads?: number;
}

/** Rows, cosine, -1 where fewer than `k` exist; as {@link KnnGraph}'s arrays. */
export interface CellsKnn {
  neighbours: Int32Array;
  sims: Float32Array;
}

/** Rows × columns of one exactSearch call at most (its result matrix: 16M floats ≈ 64 MB). */
const SEARCH_BUDGET = 1 << 24;

/** Per-vector-scaled i8 copy of `rows` row-major f32 vectors (the largest component → ±127). */
function quantize(src: Float32Array, rows: number, dim: number, out = new Int8Array(rows * dim)): Int8Array {
  for (let i = 0; i < rows; i++) {
    const o = i * dim;
    let m = 0;
    for (let d = 0; d < dim; d++) {
      const a = Math.abs(src[o + d]);
      if (a > m) m = a;
    }
    const s = m > 0 ? 127 / m : 0;
    for (let d = 0; d < dim; d++) out[o + d] = Math.round(src[o + d] * s);
  }
  return out;
}

/**
 * The kNN graph of `n` row-major `dim`-d vectors from k-means cells (see the file's comment).
 * `onProgress` gets the share of the estimated distance computations done.
 */
export function knnByCells(
  flat: Float32Array,
  n: number,
  dim: number,
  options: CellsOptions,
  onProgress?: (share: number) => void,
  into?: { neighbours: Int32Array; sims: Float32Array },
): CellsKnn {
  const k = options.k;
  const cellSize = Math.max(2 * k + 2, Math.floor(options.cellSize ?? 500));
  const overlap = Math.max(1, Math.floor(options.overlap ?? 2));
  const iterations = Math.max(1, Math.floor(options.iterations ?? 6));
  const perCell = Math.max(2, options.samplePerCell ?? 40);
  const threads = options.threads ?? 0;
  const rng = mulberry32(options.seed ?? 1);
  // `into`: rows to fill (empty, or an earlier partition's, which this one's offers complete)
  const neighbours = into?.neighbours ?? new Int32Array(n * k).fill(-1);
  const sims = into?.sims ?? new Float32Array(n * k);
  const fill = into ? rowFill(neighbours, n, k) : new Int32Array(n);
  const q8 = quantize(flat, n, dim);
  const inv = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let s = 0;
    for (let d = i * dim; d < (i + 1) * dim; d++) s += flat[d] * flat[d];
    inv[i] = s > 0 ? 1 / Math.sqrt(s) : 0;
  }
  const gather = (ids: Int32Array): Int8Array => {
    const o = new Int8Array(ids.length * dim);
    for (let j = 0; j < ids.length; j++) o.set(q8.subarray(ids[j] * dim, ids[j] * dim + dim), j * dim);
    return o;
  };
  // progress: distance computations done against an estimate of the total
  const top = Math.ceil(n / cellSize);
  const estimate = Math.max(1, n * top + iterations * Math.min(n, top * perCell) * top + n * overlap * cellSize * 1.5);
  let distances = 0;
  const count = (d: number) => {
    distances += d;
    onProgress?.(Math.min(0.99, distances / estimate));
  };

  /** The `w` nearest of `c` i8 centroids for each of `ids` (chunked to {@link SEARCH_BUDGET}). */
  const route = (cents: Int8Array, c: number, ids: Int32Array, w: number): Int32Array => {
    const out = new Int32Array(ids.length * w);
    const chunk = Math.max(1, Math.floor(SEARCH_BUDGET / c));
    for (let a = 0; a < ids.length; a += chunk) {
      const part = ids.subarray(a, Math.min(ids.length, a + chunk));
      const r = usearch.exactSearch(cents, gather(part), dim, w, usearch.MetricKind.Cos, threads) as unknown as { keys: BigUint64Array };
      for (let j = 0; j < part.length * w; j++) out[a * w + j] = Number(r.keys[j]);
      count(part.length * c);
    }
    return out;
  };

  /** k-means centroids of `ids` (f32 means of a sample, i8 for routing). */
  const centroids = (ids: Int32Array, c: number): Int8Array => {
    const ns = Math.min(ids.length, c * perCell);
    const sample = new Int32Array(ns);
    for (let j = 0; j < ns; j++) sample[j] = ids[Math.floor(rng() * ids.length)];
    const cent = new Float32Array(c * dim);
    for (let j = 0; j < c; j++) {
      const p = sample[Math.floor(rng() * ns)];
      cent.set(flat.subarray(p * dim, p * dim + dim), j * dim);
    }
    const c8 = new Int8Array(c * dim);
    const counts = new Int32Array(c);
    for (let it = 0; it < iterations; it++) {
      quantize(cent, c, dim, c8);
      const near = route(c8, c, sample, 1);
      cent.fill(0);
      counts.fill(0);
      for (let j = 0; j < ns; j++) {
        const a = near[j];
        counts[a]++;
        const o = sample[j] * dim;
        const s = inv[sample[j]];
        for (let d = 0; d < dim; d++) cent[a * dim + d] += flat[o + d] * s;
      }
      // why: an empty cell is reseeded from the sample (else its centroid stays at zero)
      for (let a = 0; a < c; a++) {
        if (counts[a] > 0) continue;
        const p = sample[Math.floor(rng() * ns)];
        cent.set(flat.subarray(p * dim, p * dim + dim), a * dim);
      }
    }
    return quantize(cent, c, dim, c8);
  };

  /** Offer (j, cosine) to row i: kept sorted, descending, no duplicates. */
  const offer = (i: number, j: number, sim: number) => {
    fill[i] = offerInto(neighbours, sims, i * k, k, fill[i], j, sim);
  };

  /** Exact nearest of `data` for each of `queries` (i8), re-ranked by f32 cosine, offered both ways. */
  const leaf = (queries: Int32Array, data: Int32Array, data8?: Int8Array) => {
    const want = Math.min(data.length, 2 * k + 1);
    if (want < 1) return;
    const d8 = data8 ?? gather(data);
    const chunk = Math.max(1, Math.floor(SEARCH_BUDGET / data.length));
    for (let a0 = 0; a0 < queries.length; a0 += chunk) {
      const part = queries.subarray(a0, Math.min(queries.length, a0 + chunk));
      const r = usearch.exactSearch(d8, gather(part), dim, want, usearch.MetricKind.Cos, threads) as unknown as { keys: BigUint64Array };
      for (let a = 0; a < part.length; a++) {
        const i = part[a];
        const x = i * dim;
        for (let h = 0; h < want; h++) {
          const j = data[Number(r.keys[a * want + h])];
          if (j === i || j === undefined) continue;
          let s = 0;
          const y = j * dim;
          for (let d = 0; d < dim; d++) s += flat[x + d] * flat[y + d];
          s *= inv[i] * inv[j];
          offer(i, j, s);
          offer(j, i, s);
        }
      }
      count(part.length * data.length);
    }
  };

  /** Which rows are queries of the current split (a scratch mark, set and cleared per split). */
  const isQuery = new Uint8Array(n);

  /**
   * Cut `data` into cells and search them: each query (a subset of `data`) in its nearest cell,
   * each data point in its `overlap` nearest. A cell whose queries exceed `cellSize` is cut again
   * with its own data (its overlap kept), so a large cell loses none of its neighbours' items.
   */
  const split = (queries: Int32Array, data: Int32Array) => {
    if (queries.length <= cellSize) return leaf(queries, data);
    const c = Math.ceil(data.length / cellSize);
    const w = Math.min(overlap, c);
    const near = route(centroids(data, c), c, data, w);
    for (let j = 0; j < queries.length; j++) isQuery[queries[j]] = 1;
    // cells as CSR lists: queries (nearest cell) and data (the w nearest cells)
    const qStart = new Int32Array(c + 1);
    const dStart = new Int32Array(c + 1);
    for (let j = 0; j < data.length; j++) {
      if (isQuery[data[j]]) qStart[near[j * w] + 1]++;
      for (let u = 0; u < w; u++) dStart[near[j * w + u] + 1]++;
    }
    for (let a = 0; a < c; a++) {
      qStart[a + 1] += qStart[a];
      dStart[a + 1] += dStart[a];
    }
    const qs = new Int32Array(qStart[c]);
    const ds = new Int32Array(data.length * w);
    const qFill = qStart.slice(0, c);
    const dFill = dStart.slice(0, c);
    for (let j = 0; j < data.length; j++) {
      if (isQuery[data[j]]) qs[qFill[near[j * w]]++] = data[j];
      for (let u = 0; u < w; u++) ds[dFill[near[j * w + u]]++] = data[j];
    }
    for (let j = 0; j < queries.length; j++) isQuery[queries[j]] = 0;
    for (let a = 0; a < c; a++) {
      const q = qs.subarray(qStart[a], qStart[a + 1]);
      if (q.length === 0) continue;
      const d = ds.subarray(dStart[a], dStart[a + 1]);
      if (d.length >= data.length) {
        // why: the cut did not shrink the cell (e.g. duplicates): halve the queries by position,
        // each searched against the whole cell, so the recursion ends
        const h = q.length >> 1;
        if (q.length <= 2 * cellSize) {
          leaf(q.slice(0, h), d);
          leaf(q.slice(h), d);
        } else {
          split(q.slice(0, h), d.slice());
          split(q.slice(h), d.slice());
        }
      } else if (q.length <= cellSize) leaf(q, d);
      else split(q.slice(), d.slice());
    }
  };

  if (n > 1) {
    const all = new Int32Array(n);
    for (let i = 0; i < n; i++) all[i] = i;
    split(all, all);
    // why: a k-means cell can come out smaller than k + 1 items; its rows (and any row the cells
    // left short) are searched against the whole catalog, so every row ends with min(k, n − 1)
    const short: number[] = [];
    for (let i = 0; i < n; i++) if (fill[i] < Math.min(k, n - 1)) short.push(i);
    if (short.length) leaf(Int32Array.from(short), all, q8);
  }
  onProgress?.(1);
  return { neighbours, sims };
}
