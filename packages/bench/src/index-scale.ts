/**
 * Scale benchmark of the shared community index (`npm run bench:index`): the in-process index
 * (`createInProcessIndex` → `CommunityGraph`) over the service's HNSW index
 * (`HnswVectorSearch`, usearch cosine i8; `--engine usearch` for the int8-only adapter of this
 * folder, `--engine flat` for the exact store) at 10k / 100k / 1M memories of 512-d, with
 * synthetic clustered vectors sent as int8. Results and conclusions: docs/SCALING.md.
 *
 * Per size, each figure beside a baseline measured in the same run:
 * - insert throughput: memories/s of `upsertSync` (validation, relation extraction: the new
 *   memories' top-k1 ≥ tau lists and the lists they enter (mutual top-k1 links), index insert,
 *   incremental communities), one device batch per call; also per
 *   CPU-second of this process (the machine is shared) and the load profile (vector insert /
 *   vector search / the rest);
 * - neighbour search p50/p99: one top-k1 query on the index; baseline: the exact
 *   {@link FlatVectorStore} over the same vectors (sampled queries at 1M), giving recall@k1 and
 *   what a missed neighbour means for communities;
 * - community update p50/p99: one delete / insert / replace of a single memory, also minus the
 *   time spent inside the vector index (the graph's own work);
 * - full recomputation: `graph.recomputeAll()` (capped components of the stored links:
 *   relation extraction not redone), a union-find over an int edge list (lower bound of any
 *   recomputation), and the full rebuild (the whole load), each over one incremental update;
 * - memory: process RSS after the load and RSS growth per memory.
 *
 * Each size runs in its own child process (so RSS is that size's alone) unless `--in-process`.
 * Markdown tables on stdout, progress on stderr, `--json FILE` for { config, results }.
 * Run with `node --expose-gc` (the npm script does) so memory is measured after a collection.
 */
import { spawn } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import cliProgress from 'cli-progress';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createInProcessIndex, type CommunityGraph, type SharedMemoryUpload } from 'atomem/engine';
import { FlatVectorStore, type VectorHit, type VectorSearch } from 'atomem/engine';
import { dequantize, quantize } from 'atomem/protocol';
import { HnswVectorSearch } from 'atomem-index';
import { Rng } from './rng.js';
import { UsearchVectorSearch } from './usearch-search.js';

/**
 * Vector index under the graph: `server` = the service's {@link HnswVectorSearch} (usearch
 * HNSW i8 + float32 master copy, exact below 2,048 vectors), `usearch` = the int8-only
 * {@link UsearchVectorSearch} of this folder, `flat` = the exact {@link FlatVectorStore}.
 */
export type IndexEngine = 'server' | 'usearch' | 'flat';

/** HNSW parameters shared by the two usearch engines (usearch defaults when absent). */
export interface HnswParams {
  /** Links per node, M. Default 16. */
  connectivity?: number;
  /** efConstruction. Default 128. */
  expansionAdd?: number;
  /** ef of searches. Default 64. */
  expansionSearch?: number;
  /** Threads of batched searches. Default 1 (see usearch-search.ts: 2 were slower here). */
  threads?: number;
}

function createEngine(engine: IndexEngine, dim: number, hnsw: HnswParams = {}): VectorSearch {
  const threads = hnsw.threads ?? 1;
  if (engine === 'flat') return new FlatVectorStore(dim);
  if (engine === 'usearch') return new UsearchVectorSearch(dim, { ...hnsw, threads });
  return new HnswVectorSearch(dim, { ...hnsw, threads });
}

/** Delegating {@link VectorSearch} that adds up the time spent in each call (load profile). */
export class TimedVectorSearch implements VectorSearch {
  addMs = 0;
  searchMs = 0;
  removeMs = 0;
  readonly searchMany?: VectorSearch['searchMany'];

  constructor(readonly inner: VectorSearch) {
    const many = inner.searchMany?.bind(inner);
    if (many !== undefined) {
      this.searchMany = (queries, k, minSim, filter) => {
        const t = performance.now();
        try {
          return many(queries, k, minSim, filter);
        } finally {
          this.searchMs += performance.now() - t;
        }
      };
    }
  }

  get dim(): number {
    return this.inner.dim;
  }

  get size(): number {
    return this.inner.size;
  }

  has(id: string): boolean {
    return this.inner.has(id);
  }

  add(id: string, vector: ArrayLike<number>): void {
    const t = performance.now();
    this.inner.add(id, vector);
    this.addMs += performance.now() - t;
  }

  remove(id: string): boolean {
    const t = performance.now();
    const r = this.inner.remove(id);
    this.removeMs += performance.now() - t;
    return r;
  }

  vector(id: string): Float32Array | undefined {
    return this.inner.vector(id);
  }

  search(query: ArrayLike<number>, k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[] {
    const t = performance.now();
    try {
      return this.inner.search(query, k, minSim, filter);
    } finally {
      this.searchMs += performance.now() - t;
    }
  }
}

/** Options of {@link runIndexScale} / {@link runIndexScaleSize}. Every field has a default. */
export interface IndexScaleOptions {
  /** Vector dimension. Default 512. */
  dim?: number;
  /** Neighbours per new memory (STEAM k1). Default 2. */
  k1?: number;
  /** Minimum link similarity. Default 0.5. */
  tau?: number;
  /** Memories per upsert call (one device's upload). Default 10. */
  batch?: number;
  /** Seed of every random draw. Default 2026. */
  seed?: number;
  /** Interest centres of the synthetic data. Default 4096. */
  centres?: number;
  /** Topics the centres are grouped under (centres of one topic are similar). Default 64. */
  topics?: number;
  /** Share of memories that are pure noise (random unit vectors, no centre). Default 0.03. */
  outlierRate?: number;
  /** Zipf exponent of centre popularity. Default 0.9. */
  zipf?: number;
  /** Timed HNSW neighbour queries. Default 1000. */
  searchQueries?: number;
  /** Timed single-memory community updates (thirds: delete, insert, replace). Default 300. */
  updateOps?: number;
  /** Exact-search baseline queries at sizes ≤ `exactFullMax`. Default 200. */
  exactQueries?: number;
  /** Above this size the exact baseline uses `exactSampleQueries` queries. Default 100,000. */
  exactFullMax?: number;
  /** Exact-search queries above `exactFullMax` (0 skips the baseline there). Default 100. */
  exactSampleQueries?: number;
  /** Timed runs of the full recomputation (median reported). Default 3. */
  recomputeRuns?: number;
  /** Vector index under the graph. Default `server`. */
  engine?: IndexEngine;
  /** HNSW parameters (defaults: connectivity 16, expansion add 128 / search 64, 1 thread). */
  hnsw?: HnswParams;
  /** Progress callback (phase, done of total). */
  onProgress?: (e: IndexScaleProgress) => void;
}

/** One progress report. */
export interface IndexScaleProgress {
  memories: number;
  phase: 'load' | 'search' | 'update' | 'recompute' | 'flat-copy' | 'exact';
  done: number;
  total: number;
}

/** Figures of one size. Times in ms unless the name says otherwise. */
export interface IndexScaleResult {
  /** Memories stored. */
  memories: number;
  /** Vector index under the graph. */
  engine: IndexEngine;
  /** Memories/s over the whole load (`upsertSync` time only, data generation excluded). */
  insertPerSec: number;
  /** Memories/s over the last 10% of the load (the marginal upsert cost near this size). */
  insertPerSecLast10: number;
  /**
   * Memories per CPU-second of this process during the upserts (user + system, all threads):
   * what the load would reach with a core to itself. The benchmark machine is shared.
   */
  insertPerCpuSec: number;
  /** Seconds spent in `upsertSync` for the whole load (= the full rebuild cost). */
  loadSeconds: number;
  /** CPU seconds of this process during those upserts. */
  loadCpuSeconds: number;
  /** Share of the load time spent in HNSW inserts, HNSW (relation) searches, and everything else. */
  loadBreakdown: { vectorInsert: number; vectorSearch: number; graphAndValidation: number };
  /** One top-k1 query on the vector index. */
  searchP50Ms: number;
  searchP99Ms: number;
  /** Exact FlatVectorStore top-k1 query over the same vectors (null when skipped). */
  exactSearchP50Ms: number | null;
  /** Queries behind `exactSearchP50Ms` and `recallAtK1`. */
  exactQueries: number;
  /** Share of the exact top-k1 (≥ tau) hits the index returned (null when skipped). */
  recallAtK1: number | null;
  /**
   * What the approximate hits mean for communities, on the same exact-baseline queries (null
   * when skipped): `communityRecall` = share of exact top-k1 hits whose community contains one
   * of the index's hits (a link into the same community is as good for the partition);
   * `fewerLinksRate` = share of queries (with an exact hit) that got fewer links than exact
   * search would make; `top1SimGap` = mean exact − approximate similarity of the best hit.
   */
  linkQuality: { communityRecall: number; fewerLinksRate: number; top1SimGap: number } | null;
  /** Exact FlatVectorStore `searchMany` of one device batch at this size (null when skipped). */
  flatBatchSearchMs: number | null;
  /**
   * Estimated load time with the exact store as the graph's index (the graph's default):
   * batches × flatBatchSearchMs / 2 (the scan grows linearly) + the measured non-vector time.
   */
  flatLoadEstimateSeconds: number | null;
  /** One incremental single-memory update (delete, insert or replace) of the community graph. */
  communityUpdateP50Ms: number;
  communityUpdateP99Ms: number;
  /** p50 per kind of update. */
  deleteP50Ms: number;
  insertP50Ms: number;
  replaceP50Ms: number;
  /** The same updates minus the time spent inside the vector index: the community maintenance alone. */
  graphUpdateP50Ms: number;
  graphUpdateP99Ms: number;
  /** `graph.recomputeAll()`: components by BFS over every stored link (ids sorted), median. */
  fullRecomputeMs: number;
  /** Union-find over an int edge list of every stored link (lower bound of any recomputation), median. */
  unionFindMs: number;
  /** fullRecomputeMs / communityUpdateP50Ms (the graph's own from-scratch path vs one whole update). */
  incrementalVsFullRatio: number;
  /** unionFindMs / graphUpdateP50Ms: components only on both sides (most conservative). */
  componentsOnlyRatio: number;
  /** Full rebuild (loadSeconds, relation extraction included) / communityUpdateP50Ms. */
  incrementalVsRebuildRatio: number;
  /** Whether recomputeAll and union-find find the incremental partition's community sizes / count. */
  recomputeMatches: boolean;
  /** Process RSS after the load (after a GC when exposed). */
  rssMB: number;
  /** RSS growth during the load / memories. */
  bytesPerMemory: number;
  /** V8 heap used after the load (JS objects: graph, maps, ids). */
  heapMB: number;
  /** Graph shape after the load. */
  communities: number;
  largestCommunity: number;
  singletons: number;
  /** Communities with ≥ 3 members (what the index would release). */
  releasableCommunities: number;
  edges: number;
  meanDegree: number;
  /** Wall time of this size, everything included (s). */
  wallSeconds: number;
  /** CPU time of this process / wall time over the whole size (≈ 1 when it had a core to itself). */
  cpuShare: number;
  /** 1-minute load average at the start and the end of this size (other processes compete for the cores). */
  loadAvg: [number, number];
}

const DEFAULTS = {
  dim: 512,
  k1: 2,
  tau: 0.5,
  batch: 10,
  seed: 2026,
  centres: 4096,
  topics: 64,
  outlierRate: 0.03,
  zipf: 0.9,
  searchQueries: 1000,
  updateOps: 300,
  exactQueries: 200,
  exactFullMax: 100_000,
  exactSampleQueries: 100,
  recomputeRuns: 3,
  engine: 'server' as IndexEngine,
};

const EMBEDDER = 'bench-index@1/int8';
/** Spread of centres around their topic (centre–centre cosine within a topic ≈ 1/(1+0.9²) = 0.55). */
const TOPIC_SPREAD = 0.9;
/** Per-memory noise norm is uniform in [RHO_MIN, RHO_MAX] (cosine to the centre 0.93 … 0.61). */
const RHO_MIN = 0.4;
const RHO_MAX = 1.3;

/** Fill `out` with a uniformly random unit vector (Box–Muller, both outputs used). */
function unitGaussian(rng: Rng, out: Float32Array): Float32Array {
  let n = 0;
  for (let i = 0; i < out.length; i += 2) {
    let u = rng.next();
    while (u === 0) u = rng.next();
    const r = Math.sqrt(-2 * Math.log(u));
    const t = 2 * Math.PI * rng.next();
    const a = r * Math.cos(t);
    out[i] = a;
    n += a * a;
    if (i + 1 < out.length) {
      const b = r * Math.sin(t);
      out[i + 1] = b;
      n += b * b;
    }
  }
  const s = 1 / Math.sqrt(n);
  for (let i = 0; i < out.length; i++) out[i] *= s;
  return out;
}

/**
 * Deterministic synthetic memories: `topics` topic directions, `centres` interest centres
 * around them, Zipf-popular; memory i = its centre + noise of norm ρ ∈ [0.4, 1.3], or (with
 * probability `outlierRate`) a random unit vector. Memory i depends only on (seed, i).
 */
export class SyntheticMemories {
  readonly dim: number;
  private readonly centres: Float32Array;
  private readonly cdf: Float64Array;
  private readonly scratch: Float32Array;

  constructor(
    dim: number,
    private readonly seed: number,
    centres = DEFAULTS.centres,
    topics = DEFAULTS.topics,
    private readonly outlierRate = DEFAULTS.outlierRate,
    zipf = DEFAULTS.zipf,
  ) {
    this.dim = dim;
    this.scratch = new Float32Array(dim);
    const rng = Rng.derive(seed, 'centres');
    const topicVecs = Array.from({ length: topics }, () => unitGaussian(rng, new Float32Array(dim)));
    this.centres = new Float32Array(centres * dim);
    const g = new Float32Array(dim);
    for (let c = 0; c < centres; c++) {
      const t = topicVecs[c % topics];
      unitGaussian(rng, g);
      let n = 0;
      for (let j = 0; j < dim; j++) n += (this.centres[c * dim + j] = t[j] + TOPIC_SPREAD * g[j]) ** 2;
      const s = 1 / Math.sqrt(n);
      for (let j = 0; j < dim; j++) this.centres[c * dim + j] *= s;
    }
    // Popularity: centre ranks shuffled so popular centres are spread over the topics.
    const ranks = rng.shuffle(Array.from({ length: centres }, (_, i) => i + 1));
    this.cdf = new Float64Array(centres);
    let acc = 0;
    for (let c = 0; c < centres; c++) this.cdf[c] = acc += ranks[c] ** -zipf;
    for (let c = 0; c < centres; c++) this.cdf[c] /= acc;
  }

  /** Unit float vector of memory `i` (or of query `i` with `stream = 'query'`), as decoded from the int8 wire encoding. */
  vector(i: number, stream: 'memory' | 'query' = 'memory'): Float32Array {
    const rng = Rng.derive(this.seed, stream, i);
    const d = this.dim;
    const v = new Float32Array(d);
    if (rng.next() < this.outlierRate) {
      unitGaussian(rng, v);
    } else {
      const u = rng.next();
      let lo = 0;
      let hi = this.cdf.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.cdf[mid] < u) lo = mid + 1;
        else hi = mid;
      }
      const rho = RHO_MIN + (RHO_MAX - RHO_MIN) * rng.next();
      const g = unitGaussian(rng, this.scratch);
      const o = lo * d;
      let n = 0;
      for (let j = 0; j < d; j++) n += (v[j] = this.centres[o + j] + rho * g[j]) ** 2;
      const s = 1 / Math.sqrt(n);
      for (let j = 0; j < d; j++) v[j] *= s;
    }
    // What the service receives: the int8 wire encoding, decoded (÷127, not renormalised).
    return dequantize(quantize(v));
  }

  /** The 22-character id of memory `i` (the client's ids are 22-char base64url). */
  static id(i: number): string {
    return `mem_${String(i).padStart(18, '0')}`;
  }
}

/** Value at percentile `p` (nearest rank, as in micro.ts). */
function pct(xs: readonly number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function median(xs: readonly number[]): number {
  return pct(xs, 50);
}

const cpuSeconds = (u: NodeJS.CpuUsage): number => (u.user + u.system) / 1e6;

const gc = (): void => (globalThis as { gc?: () => void }).gc?.();

/**
 * Load `memories` synthetic memories into a fresh in-process index and measure it (see the
 * module comment). Runs in the current process: RSS includes whatever the process held before.
 */
export function runIndexScaleSize(memories: number, options: IndexScaleOptions = {}): IndexScaleResult {
  const o = { ...DEFAULTS, ...options };
  const wall0 = performance.now();
  const cpu0 = process.cpuUsage();
  const load0 = loadavg()[0];
  const { dim, k1, tau, batch } = o;
  if (!Number.isInteger(memories) || memories < batch) throw new RangeError(`memories must be an integer ≥ batch (${batch}), got ${memories}`);
  const report = (phase: IndexScaleProgress['phase'], done: number, total: number) => o.onProgress?.({ memories, phase, done, total });
  const data = new SyntheticMemories(dim, o.seed, o.centres, o.topics, o.outlierRate, o.zipf);

  gc();
  const rss0 = process.memoryUsage().rss;
  let store: TimedVectorSearch | undefined;
  const index = createInProcessIndex({
    embedderId: EMBEDDER,
    k1,
    tau,
    createVectorSearch: (d) => (store = new TimedVectorSearch(createEngine(o.engine, d, o.hnsw))),
  });
  const graph = index.graph;
  const timings = () => ({ insertMs: store?.addMs ?? 0, searchMs: store?.searchMs ?? 0 });

  // 1. Load: one upsert per device batch; only the upsert is timed.
  let loadMs = 0;
  let lastMs = 0;
  const lastFrom = Math.floor(memories * 0.9);
  let loadCpuUs = 0;
  const t0 = timings();
  const step = Math.max(batch, Math.floor(memories / 200 / batch) * batch);
  for (let i = 0; i < memories; i += batch) {
    const up: SharedMemoryUpload[] = [];
    for (let j = i; j < Math.min(memories, i + batch); j++) up.push({ id: SyntheticMemories.id(j), embedderId: EMBEDDER, vector: data.vector(j) });
    const c = process.cpuUsage();
    const s = performance.now();
    index.upsertSync(up);
    const dt = performance.now() - s;
    const cu = process.cpuUsage(c);
    loadCpuUs += cu.user + cu.system;
    loadMs += dt;
    if (i >= lastFrom) lastMs += dt;
    if (i % step === 0) report('load', i, memories);
  }
  report('load', memories, memories);
  const t1 = timings();
  const vecInsert = t1.insertMs - t0.insertMs;
  const vecSearch = t1.searchMs - t0.searchMs;

  // 2. Memory after the load.
  gc();
  const mem = process.memoryUsage();
  const stats = index.stats();
  const vs = store!.inner;

  // 3. Neighbour search: fresh queries from the same distribution, one at a time.
  const queries = Array.from({ length: o.searchQueries }, (_, i) => data.vector(i, 'query'));
  const searchMs: number[] = [];
  const annHits: VectorHit[][] = [];
  for (let i = 0; i < queries.length; i++) {
    const s = performance.now();
    annHits.push(vs.search(queries[i], k1, tau));
    searchMs.push(performance.now() - s);
    if (i % 100 === 0) report('search', i, queries.length);
  }

  // 4. Incremental community updates of one memory: delete it, insert it back, replace another.
  const rng = Rng.derive(o.seed, 'updates', memories);
  const del: number[] = [];
  const ins: number[] = [];
  const rep: number[] = [];
  const graphOnly: number[] = [];
  const rounds = Math.max(1, Math.floor(o.updateOps / 3));
  const inVectors = () => store!.addMs + store!.searchMs + store!.removeMs;
  /** Time one operation; also record it minus the time spent inside the vector index. */
  const timed = (into: number[], op: () => void): void => {
    const v0 = inVectors();
    const s = performance.now();
    op();
    const dt = performance.now() - s;
    into.push(dt);
    graphOnly.push(Math.max(0, dt - (inVectors() - v0)));
  };
  for (let r = 0; r < rounds; r++) {
    const a = rng.int(memories);
    const b = rng.int(memories);
    const ua: SharedMemoryUpload = { id: SyntheticMemories.id(a), embedderId: EMBEDDER, vector: data.vector(a) };
    const ub: SharedMemoryUpload = { id: SyntheticMemories.id(b), embedderId: EMBEDDER, vector: data.vector(b) };
    timed(del, () => index.deleteSync([ua.id]));
    timed(ins, () => index.upsertSync([ua]));
    timed(rep, () => index.upsertSync([ub]));
    if (r % 20 === 0) report('update', r, rounds);
  }
  const updates = [...del, ...ins, ...rep];
  const upd50 = pct(updates, 50);

  // 5. Full recomputation of the communities from the stored links.
  const recompute: number[] = [];
  let parts: string[][] = [];
  for (let r = 0; r < o.recomputeRuns; r++) {
    report('recompute', r, o.recomputeRuns);
    parts = [];
    gc();
    const s = performance.now();
    parts = graph.recomputeAll();
    recompute.push(performance.now() - s);
  }
  const fromScratch = parts.map((p) => p.length).sort((x, y) => x - y);
  const incremental = graph.communitySizes().sort((x, y) => x - y);
  const recomputeMatches = fromScratch.length === incremental.length && fromScratch.every((x, i) => x === incremental[i]);
  parts = [];
  const fullMs = median(recompute);
  // Lower bound of any recomputation over the stored links: union-find over an int edge list
  // (building the list from the graph is not timed).
  const edges = edgeList(graph);
  const unionFind: number[] = [];
  let ufComponents = 0;
  for (let r = 0; r < o.recomputeRuns + 2; r++) {
    const s = performance.now();
    ufComponents = countComponents(edges.n, edges.a, edges.b);
    unionFind.push(performance.now() - s);
  }
  const ufMs = median(unionFind);

  // 6. Exact baseline over the same vectors (the flat engine is its own baseline).
  let exactP50: number | null = null;
  let recall: number | null = null;
  let flatBatchMs: number | null = null;
  let quality: IndexScaleResult['linkQuality'] = null;
  const nExact = Math.min(queries.length, memories <= o.exactFullMax ? o.exactQueries : o.exactSampleQueries);
  if (nExact > 0) {
    let flat: FlatVectorStore;
    if (vs instanceof FlatVectorStore) flat = vs;
    else {
      flat = new FlatVectorStore(dim, memories);
      for (let i = 0; i < memories; i++) {
        // the graph stores the normalised upload vector; so does this copy
        const v = data.vector(i);
        let n = 0;
        for (let j = 0; j < dim; j++) n += v[j] * v[j];
        const sc = 1 / Math.sqrt(n);
        for (let j = 0; j < dim; j++) v[j] *= sc;
        flat.add(SyntheticMemories.id(i), v);
        if (i % 10_000 === 0) report('flat-copy', i, memories);
      }
    }
    const exactMs: number[] = [];
    let found = 0;
    let wanted = 0;
    let sameCommunity = 0;
    let linked = 0;
    let fewerLinks = 0;
    let gap = 0;
    for (let i = 0; i < nExact; i++) {
      const s = performance.now();
      const exact = flat.search(queries[i], k1, tau);
      exactMs.push(performance.now() - s);
      const ann = annHits[i];
      const got = new Set(ann.map((h) => h.id));
      const gotCommunities = new Set(ann.map((h) => graph.communityOf(h.id)));
      wanted += exact.length;
      found += exact.filter((h) => got.has(h.id)).length;
      sameCommunity += exact.filter((h) => gotCommunities.has(graph.communityOf(h.id))).length;
      if (exact.length > 0) {
        linked++;
        if (ann.length < exact.length) fewerLinks++;
        gap += exact[0].sim - (ann[0]?.sim ?? tau);
      }
      report('exact', i, nExact);
    }
    exactP50 = median(exactMs);
    recall = wanted === 0 ? 1 : found / wanted;
    quality = {
      communityRecall: wanted === 0 ? 1 : sameCommunity / wanted,
      fewerLinksRate: linked === 0 ? 0 : fewerLinks / linked,
      top1SimGap: linked === 0 ? 0 : gap / linked,
    };
    // What relation extraction costs on the exact store at this size: one device batch.
    const batchMs: number[] = [];
    const runs = memories <= o.exactFullMax ? 10 : 3;
    for (let r = 0; r < runs; r++) {
      const qb = Array.from({ length: batch }, (_, j) => queries[(r * batch + j) % queries.length]);
      const s = performance.now();
      flat.searchMany(qb, k1, tau);
      batchMs.push(performance.now() - s);
    }
    flatBatchMs = median(batchMs);
  }

  const loadSeconds = loadMs / 1000;
  return {
    memories,
    engine: o.engine,
    insertPerSec: memories / loadSeconds,
    insertPerSecLast10: (memories - lastFrom) / (lastMs / 1000),
    insertPerCpuSec: memories / (loadCpuUs / 1e6),
    loadSeconds,
    loadCpuSeconds: loadCpuUs / 1e6,
    loadBreakdown: {
      vectorInsert: vecInsert / loadMs,
      vectorSearch: vecSearch / loadMs,
      graphAndValidation: Math.max(0, 1 - (vecInsert + vecSearch) / loadMs),
    },
    searchP50Ms: pct(searchMs, 50),
    searchP99Ms: pct(searchMs, 99),
    exactSearchP50Ms: exactP50,
    exactQueries: nExact,
    recallAtK1: recall,
    linkQuality: quality,
    flatBatchSearchMs: flatBatchMs,
    // Scan cost grows linearly with the store: the load's batches average half the final cost.
    flatLoadEstimateSeconds: flatBatchMs === null ? null : ((memories / batch) * flatBatchMs) / 2 / 1000 + loadSeconds * (1 - (vecInsert + vecSearch) / loadMs),
    communityUpdateP50Ms: upd50,
    communityUpdateP99Ms: pct(updates, 99),
    deleteP50Ms: pct(del, 50),
    insertP50Ms: pct(ins, 50),
    replaceP50Ms: pct(rep, 50),
    graphUpdateP50Ms: pct(graphOnly, 50),
    graphUpdateP99Ms: pct(graphOnly, 99),
    fullRecomputeMs: fullMs,
    unionFindMs: ufMs,
    incrementalVsFullRatio: fullMs / upd50,
    componentsOnlyRatio: ufMs / Math.max(pct(graphOnly, 50), 1e-6),
    incrementalVsRebuildRatio: loadMs / upd50,
    recomputeMatches: recomputeMatches && ufComponents === incremental.length,
    rssMB: mem.rss / 2 ** 20,
    bytesPerMemory: (mem.rss - rss0) / memories,
    heapMB: mem.heapUsed / 2 ** 20,
    communities: stats.communities,
    largestCommunity: stats.largestCommunity,
    singletons: stats.singletons,
    releasableCommunities: stats.releasableCommunities,
    edges: stats.edges,
    meanDegree: stats.meanDegree,
    wallSeconds: (performance.now() - wall0) / 1000,
    cpuShare: cpuSeconds(process.cpuUsage(cpu0)) / ((performance.now() - wall0) / 1000),
    loadAvg: [load0, loadavg()[0]],
  };
}

/** Every stored link once, as two int arrays over dense memory numbers. */
function edgeList(graph: CommunityGraph): { n: number; a: Int32Array; b: Int32Array } {
  const num = new Map<string, number>();
  for (const members of graph.communities().values()) for (const id of members) num.set(id, num.size);
  let a = new Int32Array(1024);
  let b = new Int32Array(1024);
  let m = 0;
  for (const [id, i] of num) {
    for (const nb of graph.neighbours(id)) {
      const j = num.get(nb.id)!;
      if (j <= i) continue;
      if (m === a.length) {
        const a2 = new Int32Array(m * 2);
        a2.set(a);
        a = a2;
        const b2 = new Int32Array(m * 2);
        b2.set(b);
        b = b2;
      }
      a[m] = i;
      b[m] = j;
      m++;
    }
  }
  return { n: num.size, a: a.subarray(0, m), b: b.subarray(0, m) };
}

/** Connected components of n nodes and the edges (a[i], b[i]): union-find, union by size, path halving. */
function countComponents(n: number, a: Int32Array, b: Int32Array): number {
  const parent = new Int32Array(n);
  const size = new Int32Array(n).fill(1);
  for (let i = 0; i < n; i++) parent[i] = i;
  const find = (x: number): number => {
    while (parent[x] !== x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  };
  let components = n;
  for (let e = 0; e < a.length; e++) {
    let x = find(a[e]);
    let y = find(b[e]);
    if (x === y) continue;
    if (size[x] < size[y]) [x, y] = [y, x];
    parent[y] = x;
    size[x] += size[y];
    components--;
  }
  return components;
}

/** Run every size in this process, smallest first (RSS of a later size includes earlier leftovers). */
export function runIndexScale(sizes: readonly number[], options: IndexScaleOptions = {}): IndexScaleResult[] {
  return [...sizes].sort((a, b) => a - b).map((n) => {
    const r = runIndexScaleSize(n, options);
    gc();
    return r;
  });
}

function fmtMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '—';
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

function fmtSeconds(x: number): string {
  if (x < 120) return `${x.toFixed(1)} s`;
  if (x < 7200) return `${(x / 60).toFixed(1)} min`;
  return `${(x / 3600).toFixed(1)} h`;
}

function fmtInt(x: number): string {
  return Math.round(x).toLocaleString('en-US');
}

function fmtRatio(x: number): string {
  return `${x >= 100 ? fmtInt(x) : x.toFixed(1)}×`;
}

/** The benchmark's markdown tables: headline figures, community updates, graph shape and load profile. */
export function markdownTables(results: readonly IndexScaleResult[]): string {
  const a = [
    '| memories | insert/s (all · last 10% · per CPU-s) | neighbour search p50 · p99 | exact flat p50 (same run) | recall@k1 (ids · communities) | community update p50 · p99 | incremental vs full | RSS | bytes/memory | wall |',
    '|---:|---|---|---|---:|---|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const exact = r.exactSearchP50Ms === null ? 'skipped' : `${fmtMs(r.exactSearchP50Ms)} (${r.exactQueries} q; ${(r.exactSearchP50Ms / r.searchP50Ms).toFixed(0)}× HNSW)`;
    a.push(
      `| ${fmtInt(r.memories)} | ${fmtInt(r.insertPerSec)} · ${fmtInt(r.insertPerSecLast10)} · ${fmtInt(r.insertPerCpuSec)} | ${fmtMs(r.searchP50Ms)} · ${fmtMs(r.searchP99Ms)} | ${exact} | ${r.recallAtK1 === null ? '—' : `${r.recallAtK1.toFixed(3)} · ${r.linkQuality!.communityRecall.toFixed(3)}`} | ` +
        `${fmtMs(r.communityUpdateP50Ms)} · ${fmtMs(r.communityUpdateP99Ms)} | ${fmtRatio(r.incrementalVsFullRatio)} | ${fmtInt(r.rssMB)} MB | ${fmtInt(r.bytesPerMemory)} | ${fmtSeconds(r.wallSeconds)} |`,
    );
  }
  const b = [
    '| memories | delete / insert / replace p50 | graph only (minus vector index) p50 · p99 | full recompute: recomputeAll · union-find | recomputeAll / update | union-find / graph only | full rebuild (load) / update |',
    '|---:|---|---|---|---:|---:|---:|',
  ];
  for (const r of results) {
    b.push(
      `| ${fmtInt(r.memories)} | ${fmtMs(r.deleteP50Ms)} / ${fmtMs(r.insertP50Ms)} / ${fmtMs(r.replaceP50Ms)} | ${fmtMs(r.graphUpdateP50Ms)} · ${fmtMs(r.graphUpdateP99Ms)} | ` +
        `${fmtMs(r.fullRecomputeMs)} · ${fmtMs(r.unionFindMs)}${r.recomputeMatches ? '' : ' (MISMATCH)'} | ${fmtRatio(r.incrementalVsFullRatio)} | ${fmtRatio(r.componentsOnlyRatio)} | ${fmtRatio(r.incrementalVsRebuildRatio)} |`,
    );
  }
  const c = [
    "| memories | engine | communities | largest | singletons | releasable (≥3) | links | mean degree | load time | load: vector insert / vector search / rest | queries linked less than exact · top-1 sim gap | exact flat: one batch's relation search · est. load | V8 heap | CPU share · load avg (start → end) |",
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---|',
  ];
  const pc = (x: number) => `${(100 * x).toFixed(0)}%`;
  for (const r of results) {
    c.push(
      `| ${fmtInt(r.memories)} | ${r.engine} | ${fmtInt(r.communities)} | ${fmtInt(r.largestCommunity)} | ${fmtInt(r.singletons)} | ${fmtInt(r.releasableCommunities)} | ${fmtInt(r.edges)} | ${r.meanDegree.toFixed(2)} | ` +
        `${fmtSeconds(r.loadSeconds)} | ${pc(r.loadBreakdown.vectorInsert)} / ${pc(r.loadBreakdown.vectorSearch)} / ${pc(r.loadBreakdown.graphAndValidation)} | ` +
        `${r.linkQuality === null ? '—' : `${pc(r.linkQuality.fewerLinksRate)} · ${r.linkQuality.top1SimGap.toFixed(4)}`} | ` +
        `${r.flatBatchSearchMs === null ? '—' : `${fmtMs(r.flatBatchSearchMs)} · ${fmtSeconds(r.flatLoadEstimateSeconds!)}`} | ${fmtInt(r.heapMB)} MB | ${(100 * r.cpuShare).toFixed(0)}% · ${r.loadAvg[0].toFixed(1)} → ${r.loadAvg[1].toFixed(1)} |`,
    );
  }
  return [a, b, c].map((t) => t.join('\n')).join('\n\n');
}

const RESULT_MARK = '@@index-scale-result@@';

function parseSizes(value: string): number[] {
  const list = value.split(',').map((s) => s.trim().replace(/_/g, '')).filter(Boolean);
  const sizes = list.map((s) => {
    const m = /^([0-9]+(?:\.[0-9]+)?)([kKmM]?)$/.exec(s);
    if (!m) throw new InvalidArgumentError(`bad size "${s}" (e.g. 10000,100k,1m).`);
    const n = Number(m[1]) * (m[2] === '' ? 1 : /k/i.test(m[2]) ? 1e3 : 1e6);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`bad size "${s}".`);
    return n;
  });
  if (sizes.length === 0) throw new InvalidArgumentError('expected a comma-separated list of sizes.');
  return sizes;
}

function parseCount(value: string): number {
  if (!/^[0-9]+$/.test(value)) throw new InvalidArgumentError('expected a non-negative integer.');
  return Number(value);
}

function parseNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n)) throw new InvalidArgumentError('expected a number.');
  return n;
}

interface CliOptions {
  sizes: number[];
  json?: string;
  batch: number;
  seed: number;
  k1: number;
  tau: number;
  engine: IndexEngine;
  queries: number;
  updates: number;
  connectivity?: number;
  expansionAdd?: number;
  expansionSearch?: number;
  threads: number;
  inProcess?: boolean;
  emitResult?: boolean;
  progress: boolean;
}

function program(): Command {
  return new Command()
    .name('bench:index')
    .description('Scale benchmark of the shared community index (HNSW int8 + incremental communities).')
    .option('--sizes <list>', 'memory counts, e.g. 10000,100000,1000000 or 10k,100k,1m', parseSizes, [10_000, 100_000, 1_000_000])
    .option('--json <file>', 'write { config, results } as JSON')
    .option('--batch <n>', 'memories per upsert (one device upload)', parseCount, DEFAULTS.batch)
    .option('--seed <n>', 'seed of the synthetic data', parseCount, DEFAULTS.seed)
    .option('--k1 <n>', 'links per new memory', parseCount, DEFAULTS.k1)
    .option('--tau <x>', 'minimum link similarity', parseNumber, DEFAULTS.tau)
    .addOption(new Option('--engine <engine>', 'vector index under the graph').choices(['server', 'usearch', 'flat']).default('server'))
    .option('--queries <n>', 'timed HNSW queries', parseCount, DEFAULTS.searchQueries)
    .option('--updates <n>', 'timed single-memory updates', parseCount, DEFAULTS.updateOps)
    .option('--connectivity <n>', 'HNSW links per node (usearch default 16)', parseCount)
    .option('--expansion-add <n>', 'HNSW efConstruction (usearch default 128)', parseCount)
    .option('--expansion-search <n>', 'HNSW ef (usearch default 64)', parseCount)
    .option('--threads <n>', 'usearch threads of batched searches (0 = all cores)', parseCount, 1)
    .option('--in-process', 'run every size in this process (default: one child process per size)')
    .addOption(new Option('--emit-result').hideHelp())
    .option('--no-progress', 'no progress on stderr')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
}

/**
 * Progress on stderr. The benchmark is synchronous, so nothing timer-driven can draw: on a TTY
 * cli-progress redraws from inside `update()` (synchronousUpdate); otherwise one plain line per
 * phase and then at most one every 10 s.
 */
function progressReporter(enabled: boolean): { onProgress?: (e: IndexScaleProgress) => void; stop: () => void } {
  if (!enabled) return { stop: () => {} };
  const tty = process.stderr.isTTY === true;
  let bar: cliProgress.SingleBar | undefined;
  let key = '';
  let lastLine = 0;
  let phaseStart = 0;
  return {
    onProgress: (e) => {
      const k = `${e.memories}/${e.phase}`;
      const label = `${fmtInt(e.memories)} ${e.phase}`;
      if (tty) {
        if (k !== key) {
          bar?.stop();
          bar = new cliProgress.SingleBar(
            { format: '{label} |{bar}| {value}/{total} {duration_formatted} (eta {eta_formatted})', stream: process.stderr, hideCursor: true, clearOnComplete: false, synchronousUpdate: true, fps: 5 },
            cliProgress.Presets.shades_classic,
          );
          bar.start(e.total, e.done, { label });
          key = k;
        } else bar!.update(e.done);
        return;
      }
      const now = Date.now();
      if (k !== key) {
        key = k;
        phaseStart = now;
      } else if (now - lastLine < 10_000 && e.done < e.total) return;
      lastLine = now;
      process.stderr.write(`${label} ${fmtInt(e.done)}/${fmtInt(e.total)} ${((now - phaseStart) / 1000).toFixed(0)} s\n`);
    },
    stop: () => {
      bar?.stop();
      bar = undefined;
      key = '';
    },
  };
}

/** One size in a child process (same node flags), so its RSS is its own. */
function runChild(size: number, argv: readonly string[]): Promise<IndexScaleResult> {
  const args = [...process.execArgv, process.argv[1], ...argv, '--sizes', String(size), '--emit-result'];
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (s: string) => (out += s));
    child.on('error', reject);
    child.on('close', (code) => {
      const line = out.split('\n').find((l) => l.startsWith(RESULT_MARK));
      if (code !== 0 || line === undefined) reject(new Error(`size ${size}: child exited with code ${code}`));
      else resolvePromise(JSON.parse(line.slice(RESULT_MARK.length)) as IndexScaleResult);
    });
  });
}

/** Runs the CLI on `argv` (without node and script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  // `--item-space`: the protocol-v2 item-space clustering at scale (./item-space-scale.ts)
  if (argv.includes('--item-space')) return (await import('./item-space-scale.js')).itemSpaceMain(argv.filter((a) => a !== '--item-space'));
  const cmd = program();
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    throw e;
  }
  const o = cmd.opts<CliOptions>();
  const hnsw: HnswParams = { connectivity: o.connectivity, expansionAdd: o.expansionAdd, expansionSearch: o.expansionSearch, threads: o.threads };
  const options: IndexScaleOptions = { batch: o.batch, seed: o.seed, k1: o.k1, tau: o.tau, engine: o.engine, searchQueries: o.queries, updateOps: o.updates, hnsw };
  const sizes = [...o.sizes].sort((a, b) => a - b);
  const wall0 = performance.now();
  const results: IndexScaleResult[] = [];
  if (o.emitResult || o.inProcess || sizes.length === 1) {
    const p = progressReporter(o.progress);
    for (const n of sizes) {
      results.push(runIndexScaleSize(n, { ...options, onProgress: p.onProgress }));
      p.stop();
      process.stderr.write(`${fmtInt(n)} memories done in ${results.at(-1)!.wallSeconds.toFixed(0)} s\n`);
      gc();
    }
    if (o.emitResult) {
      for (const r of results) process.stdout.write(`${RESULT_MARK}${JSON.stringify(r)}\n`);
      return 0;
    }
  } else {
    // Forward the user's flags, minus the sizes and the JSON file (the parent writes it).
    const forward: string[] = [];
    for (let i = 0; i < argv.length; i++) {
      if (argv[i] === '--sizes' || argv[i] === '--json') i++;
      else if (argv[i].startsWith('--sizes=') || argv[i].startsWith('--json=') || argv[i] === '--in-process') continue;
      else forward.push(argv[i]);
    }
    for (const n of sizes) results.push(await runChild(n, forward));
  }
  const wall = (performance.now() - wall0) / 1000;
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const h = (k: keyof HnswParams, d: number) => hnsw[k] ?? d;
  process.stdout.write(
    `atomem index scale — ${o.engine === 'flat' ? 'exact FlatVectorStore' : `${o.engine === 'server' ? 'server HnswVectorSearch' : 'bench UsearchVectorSearch'} (usearch HNSW cos i8, M=${h('connectivity', 16)}, efAdd=${h('expansionAdd', 128)}, ef=${h('expansionSearch', 64)}, ${h('threads', 1)} thread)`}, ` +
      `${DEFAULTS.dim}-d int8 uploads, k1=${o.k1}, tau=${o.tau}, ${o.batch} memories per upsert, ${DEFAULTS.centres} Zipf(${DEFAULTS.zipf}) centres in ${DEFAULTS.topics} topics + ${DEFAULTS.outlierRate * 100}% noise, seed ${o.seed}; ` +
      `Node ${process.version}, ${cpus().length}× ${cpu}; total wall ${wall.toFixed(0)} s\n\n`,
  );
  process.stdout.write(`${markdownTables(results)}\n`);
  if (o.json) {
    const config = { ...DEFAULTS, ...options, node: process.version, cpus: cpus().length, cpu, totalWallSeconds: wall };
    writeFileSync(o.json, `${JSON.stringify({ config, results }, null, 2)}\n`);
  }
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`error: ${e instanceof Error ? (process.env.DEBUG ? e.stack : e.message) : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
