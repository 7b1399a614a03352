/**
 * The shop's server side: from its order log (`{user, item, at, action?}` rows, the `jsonl`
 * export format) build the {@link ShopModel} it publishes for on-device ranking (`score.ts`).
 * Runs in Node (secure noise from node:crypto); everything else is plain TypeScript.
 *
 * What it learns (each a sparse or low-dimensional summary; nothing per user is kept):
 * - `ease`: EASE (Steck 2019, λ 500), chosen by catalog size (`ease`, default `auto`): up to
 *   `denseEaseMax` (3 000) items the exact dense inverse on the N most popular (`easeItems`,
 *   default 10 000: N³/2 multiply-adds, 8N² bytes); above, **local EASE**: each item's column
 *   regressed on its own neighbourhood only (its K most co-occurring items; K 128, smaller when
 *   the blocks would not fit `localMemory`), (G_SS + λI) b = G_Sc, n·K³/3 work and n·4K² bytes, so
 *   every catalog item is a candidate at any size. With K ≥ n − 1 and every pair co-occurring it
 *   is exactly dense EASE. Quality against dense (test NDCG@10; docs/SCALING.md): ML-100K 0.791–0.796
 *   vs 0.798, Beauty 0.632 vs 0.637 (dense on the top 3 000). Each candidate keeps its k strongest
 *   predictors (selection `in`, stored by history item).
 * - `knn`: cosine co-occurrence co(i, j)/√(n_i n_j) over distinct users, each candidate's k
 *   nearest items; computed sparsely from inverted lists (Σ_u n_u² work), every catalog item.
 * - `markov`: first-order transitions a → b between consecutive distinct items of a user's
 *   sequence (stable order by time), P(b | a), the k likeliest successors of each item.
 * - k per list: the largest that fits a byte budget (`listBudget`, 6 MiB for the three lists),
 *   capped at 128/128/64 (see `k`).
 * - `popularity`: distinct users per item; `trend` (on request): distinct users per (day, item);
 *   `popRecent`: distinct users per item over the last `recentDays` (7) days before the log's last
 *   event, only the items with a non-zero count (one pass over the kept rows, O(events + items)).
 * - `vectors`: the top-`dim` (32) eigenvectors of the cosine-normalised co-occurrence matrix
 *   D^−½ XᵀX D^−½ (subspace iteration on the sparse log, on the items with data only: 2·nnz·d
 *   per step; 30 steps, 10 above 50 000 items with data — see `iterations`), rows scaled by
 *   √eigenvalue and normalised: two items are near when the same people picked both. Items with
 *   fewer than `coldBelow` users get the ridge estimate of their vector from their content vector
 *   (`content`; map with intercept fitted on the other items, not normalised: an expected vector),
 *   so new and unsold products still rank; the map ships in the file (`contentMap`) for products
 *   newer than the file.
 *
 * ## Differential privacy (`epsilon` < ∞)
 *
 * Guarantee: (ε, δ) user-level DP for the whole file, δ default 1e-6, under add/remove of one
 * user's entire log. Mechanism: one Gaussian mechanism on the concatenation of every
 * sufficient statistic, calibrated with the analytic Gaussian mechanism (`dp.ts`):
 * 1. Contribution bound: a user's n_u distinct items each count w_u = min(1, √(m/n_u))
 *    (`maxItemsPerUser` m, default 16), so in each statistic below the user's contribution has
 *    L2 norm at most Δ_b: popularity √m; co-occurrence (upper triangle with diagonal, w_u² per
 *    pair; ‖·‖² = w_u⁴(k² + k)/2 for k items) √((m² + m)/2); transitions (distinct consecutive pairs, own weight min(1, √(m/t_u)))
 *    √m; trend (distinct (bucket, item) cells, weight min(1, √(m/c_u))) √m.
 * 2. Noise: statistic b gets N(0, σ_b²) on *every* cell of its public domain (catalog items,
 *    the top `dpItems` (100) items of the noisy popularity for co-occurrence and transitions, buckets × items
 *    for trend), σ_b = z · Δ_b / √s_b with budget shares s_b (Σ s_b = 1, `budget`) and z the
 *    analytic-Gaussian noise multiplier of (ε, δ). Σ_b (Δ_b/σ_b)² = 1/z², i.e. the whole release
 *    is (1/z)-Gaussian-DP (Dong, Roth & Su 2019; this composition holds adaptively, so the
 *    domain chosen from the noisy popularity is fine), which is exactly (ε, δ)-DP by Balle & Wang.
 * 3. Everything published is post-processing of the noisy statistics: the top-N set from noisy
 *    popularity (released first, its own share), EASE from the noisy Gram with λ = λ·m/100 + 2σ√N
 *    (public: the weight of a typical user and the noise's spectral scale), kNN and the item vectors from the noisy Gram (noisy diagonal),
 *    Markov from the noisy transitions, counts clipped at 0, content map fitted on noisy vectors.
 *    The catalog (ids, content vectors) and the bucket range are public inputs.
 * Caveats: the benchmark passes seeded noise (reproducible figures); a real release must use the
 * default secure source, and floating-point Gaussian sampling has known precision attacks
 * (Mironov 2012), so a production release should use a discrete Gaussian sampler. A shop that
 * republishes every day composes: ε grows with the number of releases that share users' data.
 */
import type { RankedLists } from './ranked-lists.js';
import { randomBytes } from 'node:crypto';
import { ACTION_WEIGHTS, type Action } from '../core/types.js';
import type { ContentMap, ItemVectorTable, NeighbourLists, RecentPopularity, ShopModel, ShopPrivacy, TrendCounts } from '../protocol/shop-model-v1.js';
import { gaussianNoiseMultiplier } from './dp.js';
import { LogColumns } from './log-reader.js';
import { addRowGram, axpy, choleskyInPlace, invertSpd, ridge, topEigen, topK, type Normal } from './linalg.js';
import { mapContent, weightsForEpsilon } from './score.js';

/** One row of the shop's log. */
export interface ShopInteraction {
  user: string;
  item: string;
  /** Epoch ms. */
  at: number;
  /** Default `click`; only actions with a positive weight (`ACTION_WEIGHTS`) count. */
  action?: Action;
}

/** Content vectors (public: from the catalog text) for the hybrid item vectors. */
export interface ContentInput {
  /** Embedder id (stored with the map). */
  embedder: string;
  /** Raw embedder output per item id. */
  vectors: ReadonlyMap<string, ArrayLike<number>>;
}

export interface TrainOptions {
  /** Catalog item ids (public); items only in the log are appended (not allowed with DP). */
  catalog?: readonly string[];
  /** Only log rows with `at < until` (a retention limit). */
  until?: number;
  /** EASE regularisation (default 500). */
  lambda?: number;
  /** Items with an EASE row: the N most popular (default 10 000). */
  easeItems?: number;
  /**
   * How EASE is solved. `dense`: the exact N×N inverse on the top `easeItems` items (N³/2
   * multiply-adds, 8N² bytes). `local`: every item's EASE column regressed on its own candidate
   * neighbourhood only (its `easeNeighbours` nearest items by co-occurrence cosine):
   * (G_SS + λI) b = G_Sc per item, cost n·K³/3 and memory bounded by `localMemory`, any catalog size.
   * `auto` (default): dense up to `denseEaseMax` items, local above.
   */
  ease?: 'dense' | 'local' | 'auto';
  /** How `local` EASE picks each item's neighbourhood: most co-occurring items (`count`, default) or highest cosine. */
  easeNeighbourhood?: 'count' | 'cosine';
  /** Neighbourhood size K of `local` EASE (default: 128, or the largest ≥ 32 whose blocks fit `localMemory` at once). */
  easeNeighbours?: number;
  /** `auto` uses dense EASE up to this many items (default 3000). */
  denseEaseMax?: number;
  /**
   * Counting stages computed elsewhere (an SQL engine: `sql/engine.ts` `countingStages`), by item
   * id: `knn` replaces the item-kNN stage (each candidate's nearest items with their cosine),
   * `transitions` the Markov stage (each item's likeliest successors with P(b | a)), `neighbours`
   * local EASE's neighbourhoods. Ignored under DP (the noisy statistics are computed here).
   */
  counts?: {
    /** `values`: the cosine. */
    knn?: RankedLists;
    /** `values`: P(b | a) over all of a's successors. */
    transitions?: RankedLists;
    neighbours?: RankedLists;
  };
  /** Bytes of local Gram blocks built at once (default 2 GiB): bounds `local` EASE's memory. */
  localMemory?: number;
  /**
   * Top-k kept per list (overrides {@link listBudget}). Default: the largest k up to ease 128,
   * knn 128, markov 64 that fits the list's share of `listBudget`. Why these caps (ML-100K
   * validation, `shop-study sparsity`): the combination is flat in k, but each list's own signals
   * keep improving up to them (easeRecent 0.646 at 16 → 0.763 at 128, knnRecent 0.668 → 0.780,
   * markov 0.537 → 0.608 at 64), and the reference ensemble EASE + kNN + recent kNN rises from
   * 0.787 (k 16) to 0.813.
   */
  k?: Partial<Record<'ease' | 'knn' | 'markov', number>>;
  /**
   * Bytes the three lists may take in the file together (default 6 MiB; shares ease 40%, knn 40%,
   * markov 20%; EASE sized for its top-N items): bounds the file for any catalog size. ML-100K
   * (1 349 items) gets the k caps; 64 000 items k 73/11/4, 100 000 items 67/5/2 — the
   * collaborative vectors (dense, d bytes per item) carrying the rest.
   */
  listBudget?: number;
  /** Keep negative EASE weights (largest |w|) instead of only the largest positive ones (default false). */
  easeSigned?: boolean;
  /**
   * Per list, how the top k are chosen. `in`: each candidate item keeps the k history items that
   * vote for it most strongly (rows, stored by history item, then vary in length); `out`: each
   * history item keeps the k items it votes for most strongly. Defaults (ML-100K validation,
   * each signal alone): EASE `in` (k 64: 0.764 vs 0.748 `out`), kNN `in` (0.758 vs 0.735),
   * Markov `out` (0.578 vs 0.535).
   */
  orientation?: Partial<Record<'ease' | 'knn' | 'markov', 'in' | 'out'>>;
  /** Dimensions of the collaborative item vectors (default 32; 0 = none). */
  dim?: number;
  /** Eigenvalue exponent of the vector rows before normalisation (default 0.5). */
  vectorPower?: number;
  /** Degree exponent β of the vectors' source matrix D^−β XᵀX D^−β (default 0.5: cosine). */
  vectorDegree?: number;
  /**
   * Subspace iterations (default 30, or `largeIterations` when more than `largeAbove` items have
   * data). Why fewer on a large shop: there the products are what the stage costs (100k items /
   * 10M events: 380 of 605 s before the sequence model), and on the synthetic shops of
   * `bench:shop-scale` the vectors' held-out next-item quality does not drop with fewer
   * iterations (100k items / 1M events, 2 916 held-out items, HR@10: 0.027 at 30, 0.030 at 10,
   * 0.032 at 6; BENCHMARKS.md "The collaborative vectors' iterations at catalog scale").
   * ML-100K and Beauty are far below the threshold: their files are unchanged.
   */
  iterations?: number;
  /** Iterations above `largeAbove` items with data (default 10). */
  largeIterations?: number;
  /** Items with data above which `largeIterations` applies (default 50 000). */
  largeAbove?: number;
  /** Items with fewer users get a content-predicted vector (default 1: only items without data). */
  coldBelow?: number;
  /** Content vectors (enable the content map and cold-item vectors). */
  content?: ContentInput;
  /** Ridge α of the content map (default 1). */
  ridgeAlpha?: number;
  /**
   * Publish popularity per time bucket ("trending"; off by default: on ML-100K validation it adds
   * nothing to the combination, 0.830 with or without). Bucket width default one day; the
   * scorer sums the `trendWindow` (7) buckets before its own.
   */
  trend?: boolean;
  trendBucketMs?: number;
  trendWindow?: number;
  /** Trend bucket range as epoch ms [from, to) (public; default the log's range). */
  trendRange?: [number, number];
  /**
   * Recent popularity (`popRecent`): distinct users per item over the last this-many days of the
   * log, ending at its last kept event (default 7; 0 = none). What is popular this week: under a
   * global time split (ML-100K `temporal`) a week's popularity beats every model trained on the
   * whole history. Not published under DP (the window's end, the log's last event time, is
   * private; the noisy per-day counts of `trend` with a public `trendRange` are the DP route).
   */
  recentDays?: number;
  /** Co-occurrence uses each user's most recent distinct items up to this many (default 2000). */
  maxUserItems?: number;
  /** User-level DP budget (default ∞: exact statistics). */
  epsilon?: number;
  /** DP δ (default 1e-6). */
  delta?: number;
  /** DP contribution bound m (default 16). */
  maxItemsPerUser?: number;
  /**
   * DP: pairwise statistics (co-occurrence, transitions) only on the top items of the noisy
   * popularity (default 100). Why: the noise is the same on every cell, so fewer, denser cells
   * carry more signal (ML-100K validation, ε = 1: 0.634 with 100 items, 0.591 with 200, 0.557 with 500).
   */
  dpItems?: number;
  /** DP budget shares (normalised to sum 1). */
  budget?: Partial<Record<'popularity' | 'gram' | 'transitions' | 'trend', number>>;
  /** DP: multiplier of the noise's spectral scale added to λ (default 1). */
  dpLambdaScale?: number;
  /** Uniform [0, 1) source for noise and random starts (default: node:crypto). Seed it only for benchmarks. */
  random?: () => number;
  /** Combiner weights written into the file (default: `weightsForEpsilon(epsilon)` of score.ts). */
  weights?: Record<string, number>;
  onProgress?: (stage: string, done: number, total: number) => void;
  /** Receives the sufficient statistics (noisy under DP) before anything is derived from them. */
  onStatistics?: (stats: ShopStatistics) => void;
}

/**
 * The (noisy, under DP) sufficient statistics the published model is derived from, for audits
 * and tests (`onStatistics`). Indices of `gram` and `transitions` are positions in `domain`.
 */
export interface ShopStatistics {
  /** Per catalog item (DP: weighted, noisy, clipped at 0). */
  popularity: Float32Array;
  /** Item indices of the pairwise statistics (the top N by popularity). */
  domain: Int32Array;
  /** N × N co-occurrence (DP: weighted and noisy, symmetric). */
  gram: Float64Array;
  /** N × N transition counts a → b (DP only: weighted and noisy, before the 2σ threshold). */
  transitions?: Float64Array;
}

/** DP weight of each of a user's `count` distinct items (or pairs, or cells): min(1, √(m/count)). */
export function contributionWeight(count: number, m: number): number {
  return Math.min(1, Math.sqrt(m / Math.max(count, 1)));
}

/** L2 sensitivity of each released statistic for contribution bound m (see the module comment). */
export function sensitivities(m: number): { popularity: number; gram: number; transitions: number; trend: number } {
  return { popularity: Math.sqrt(m), gram: Math.sqrt((m * m + m) / 2), transitions: Math.sqrt(m), trend: Math.sqrt(m) };
}

/** Uniform [0, 1) from node:crypto, 53 bits per draw, buffered. */
export function secureRandom(): () => number {
  let buf = randomBytes(8192);
  let p = 0;
  return () => {
    if (p + 7 > buf.length) {
      buf = randomBytes(8192);
      p = 0;
    }
    const hi = buf.readUInt32LE(p) >>> 5; // 27 bits
    const lo = buf.readUInt32LE(p + 4) >>> 6; // 26 bits
    p += 8;
    return (hi * 67108864 + lo) / 9007199254740992;
  };
}

/** Box–Muller standard normals from a uniform source. */
function normalFrom(random: () => number): Normal {
  let spare: number | undefined;
  return () => {
    if (spare !== undefined) {
      const s = spare;
      spare = undefined;
      return s;
    }
    let u = random();
    while (u === 0) u = random();
    const r = Math.sqrt(-2 * Math.log(u));
    const t = 2 * Math.PI * random();
    spare = r * Math.sin(t);
    return r * Math.cos(t);
  };
}

/** A user's log as the trainer sees it. */
interface UserLog {
  /** Item indices in time order (repeats kept). */
  seq: Int32Array;
  /** Distinct items, most recent last. */
  items: Int32Array;
  /** Distinct (bucket, item) cells as bucket·n + item. */
  cells: number[];
}

/**
 * The largest k ≤ `max` (at least 2) whose list fits `bytes` in the file format, for `rows` source
 * rows and `candidates` items that keep k sources each: per row a 1-byte length and a 4-byte
 * scale; per entry a 1-byte weight and a varint of the gap between a row's sorted targets (a row
 * holds candidates·k/rows entries spread over `rows` indices).
 */
/**
 * Local EASE's neighbourhood size for `n` items: the largest K ≤ 128 whose n blocks fit
 * `localMemory` bytes at once (one pass over the log), but at least 32 (then several passes).
 * 100k items: K 73; 1M: 32.
 */
function localEaseK(n: number, localMemory: number, easeNeighbours?: number): number {
  const kFits = Math.floor((-8 + Math.sqrt(64 + 16 * (localMemory / Math.max(1, n)))) / 8);
  return Math.max(1, Math.min(easeNeighbours ?? Math.max(32, Math.min(128, kFits)), Math.max(1, n - 1)));
}

/**
 * How long each counted list is for a catalog of `catalogItems` under `opts`' budget: the kNN
 * and Markov lists' k and local EASE's neighbourhood size. What an SQL engine has to return for
 * {@link trainShopModel}'s `counts` (`atomem-shop --engine`); at 1M items that is k 2 / 2 and
 * neighbourhoods of 32, not the caps of 128 / 64 / 128.
 */
export function countedListSizes(
  catalogItems: number,
  opts: Pick<TrainOptions, 'listBudget' | 'k' | 'easeNeighbours' | 'localMemory'> = {},
): { knn: number; markov: number; neighbours: number } {
  const budget = opts.listBudget ?? 6 * 1024 * 1024;
  const n = Math.max(1, catalogItems);
  return {
    knn: opts.k?.knn ?? kForBudget(0.4 * budget, n, 128),
    markov: opts.k?.markov ?? kForBudget(0.2 * budget, n, 64),
    neighbours: localEaseK(n, opts.localMemory ?? 2 * 2 ** 30, opts.easeNeighbours),
  };
}

function kForBudget(bytes: number, rows: number, max: number, candidates = rows): number {
  const varint = (x: number) => (x < 128 ? 1 : x < 16384 ? 2 : x < 2097152 ? 3 : 4);
  for (let k = max; k > 2; k--) if (rows * 5 + candidates * k * (1 + varint((rows * rows) / (candidates * k))) <= bytes) return k;
  return 2;
}

/** Top-k of one sparse row into CSR parts, targets ascending. */
function pushRow(
  out: { targets: number[]; weights: number[]; offsets: number[] },
  idx: ArrayLike<number>,
  val: ArrayLike<number>,
  len: number,
  k: number,
  signed = false,
): void {
  const keep = topK(
    len,
    k,
    (t) => (signed ? Math.abs(val[t]) : val[t]),
    (t) => !(signed ? val[t] !== 0 : val[t] > 0),
  );
  keep.sort((a, b) => idx[a] - idx[b]);
  for (const t of keep) {
    out.targets.push(idx[t]);
    out.weights.push(val[t]);
  }
  out.offsets.push(out.targets.length);
}

function csr(out: { targets: number[]; weights: number[]; offsets: number[] }): NeighbourLists {
  return { offsets: Uint32Array.from(out.offsets), targets: Uint32Array.from(out.targets), weights: Float32Array.from(out.weights) };
}

const newRows = () => ({ targets: [] as number[], weights: [] as number[], offsets: [0] });

/**
 * Collects top-k neighbour lists into CSR rows (source item → targets). `out`: `addRow(i, …)`
 * keeps the k best targets of source i. `in`: `addRow(j, …)` gets the full row of candidate j
 * (sources that vote for j) and keeps j's k best sources, stored under each source.
 */
class Selector {
  private readonly perRow: Array<{ idx: number[]; val: number[] } | undefined>;
  constructor(
    private readonly n: number,
    private readonly k: number,
    private readonly orientation: 'in' | 'out',
    private readonly signed: boolean,
  ) {
    this.perRow = new Array(n);
  }
  add(source: number, target: number, value: number): void {
    let r = this.perRow[source];
    if (!r) this.perRow[source] = r = { idx: [], val: [] };
    r.idx.push(target);
    r.val.push(value);
  }
  addRow(i: number, idx: ArrayLike<number>, val: ArrayLike<number>): void {
    const keep = topK(
      idx.length,
      this.k,
      (t) => (this.signed ? Math.abs(val[t]) : val[t]),
      (t) => !(this.signed ? val[t] !== 0 : val[t] > 0),
    );
    for (const t of keep) {
      if (this.orientation === 'out') this.add(i, idx[t], val[t]);
      else this.add(idx[t], i, val[t]);
    }
  }
  rows(): NeighbourLists {
    const out = newRows();
    for (let i = 0; i < this.n; i++) {
      const r = this.perRow[i];
      if (r) pushRow(out, r.idx, r.val, r.idx.length, r.idx.length, true);
      else out.offsets.push(out.targets.length);
    }
    return csr(out);
  }
}

/** Builds the published model from a shop's log. See the module comment for what and how. */
export function trainShopModel(log: Iterable<ShopInteraction> | LogColumns, opts: TrainOptions = {}): ShopModel {
  const started = Date.now();
  const epsilon = opts.epsilon ?? Infinity;
  const dp = epsilon !== Infinity;
  if (!(epsilon > 0)) throw new RangeError(`epsilon must be > 0 (or Infinity), got ${epsilon}`);
  const delta = opts.delta ?? 1e-6;
  if (dp && !opts.catalog) throw new RangeError('a DP release needs the public catalog (opts.catalog): item ids seen only in the log would reveal purchases');
  if (dp && opts.trend && !opts.trendRange) throw new RangeError("a DP release with trend needs a public trendRange: the log's own time range would leak");
  const m = opts.maxItemsPerUser ?? 16;
  if (dp && !(m >= 1)) throw new RangeError(`maxItemsPerUser must be ≥ 1, got ${m}`);
  const lambda = opts.lambda ?? 500;
  const budget = opts.listBudget ?? 6 * 1024 * 1024;
  // n is not known yet (catalog ∪ log); the catalog size is a fine estimate for the budget. The
  // EASE list only has the top easeItems as candidates, so its k is set for those.
  const nEstimate = Math.max(1, opts.catalog?.length ?? 0);
  const { knn: kKnn, markov: kMarkov } = countedListSizes(nEstimate, opts);
  const dim = opts.dim ?? 32;
  const bucketMs = opts.trendBucketMs ?? 86_400_000;
  const trendWindow = opts.trendWindow ?? 7;
  const recentDays = opts.recentDays ?? 7;
  if (!(recentDays >= 0) || !Number.isFinite(recentDays)) throw new RangeError(`recentDays must be a number ≥ 0, got ${recentDays}`);
  const maxUserItems = opts.maxUserItems ?? 2000;
  const random = opts.random ?? secureRandom();
  const normal = normalFrom(random);
  const progress = opts.onProgress ?? (() => {});
  const orient = (list: 'ease' | 'knn' | 'markov') => opts.orientation?.[list] ?? (list === 'markov' ? 'out' : 'in');

  // ── items and users ──────────────────────────────────────────────────────────────────
  // why: columns (20 bytes a row) instead of per-user arrays of objects: 10M rows fit in ~200 MB.
  let cols: LogColumns;
  if (log instanceof LogColumns) {
    cols = log;
    if (opts.catalog) {
      const known = new Set(cols.items);
      for (const id of opts.catalog)
        if (!known.has(id)) throw new RangeError(`trainShopModel: catalog item "${id}" is not in the LogColumns' item table (build it with the catalog)`);
    }
  } else {
    cols = new LogColumns(opts.catalog ?? [], dp && opts.catalog !== undefined);
    for (const x of log) {
      if (opts.until !== undefined && !(x.at < opts.until)) continue;
      if (!(ACTION_WEIGHTS[x.action ?? 'click'] > 0)) continue;
      cols.add(x.user, x.item, x.at, x.action);
    }
  }
  const items = cols.items;
  const n = items.length;
  const { user: colUser, item: colItem, at: colAt, weight: colWeight } = cols.columns();
  // Rows grouped by user (counting sort), kept rows only, in log order within a user.
  const userCount = cols.users.length;
  const start = new Int32Array(userCount + 1);
  let used = 0;
  let minAt = Infinity;
  let maxAt = -Infinity;
  const keep = (r: number) => !(opts.until !== undefined && !(colAt[r] < opts.until)) && colWeight[r] > 0;
  for (let r = 0; r < cols.length; r++) {
    if (!keep(r)) continue;
    start[colUser[r] + 1]++;
    used++;
    if (colAt[r] < minAt) minAt = colAt[r];
    if (colAt[r] > maxAt) maxAt = colAt[r];
  }
  for (let u = 0; u < userCount; u++) start[u + 1] += start[u];
  const order = new Int32Array(used);
  {
    const fill = start.slice(0, userCount);
    for (let r = 0; r < cols.length; r++) if (keep(r)) order[fill[colUser[r]]++] = r;
  }
  progress('group by user', 1, 1);
  const [from, to] = opts.trendRange ?? [minAt, maxAt + 1];
  const firstBucket = Number.isFinite(from) ? Math.floor(from / bucketMs) : 0;
  const buckets = opts.trend && Number.isFinite(to) ? Math.max(0, Math.floor((to - 1) / bucketMs) - firstBucket + 1) : 0;
  const users: UserLog[] = [];
  const lastSeen = new Int32Array(n).fill(-1);
  for (let u = 0; u < userCount; u++) {
    const a = start[u];
    const b = start[u + 1];
    if (a === b) continue;
    // why: a stable sort keeps the export's order among equal timestamps (the benchmark's
    // (time, item id) order; a shop's log order).
    const rs = Array.from(order.subarray(a, b)).sort((x, y) => colAt[x] - colAt[y] || x - y);
    const seq = Int32Array.from(rs, (r) => colItem[r]);
    for (let t = 0; t < seq.length; t++) lastSeen[seq[t]] = t;
    const distinct: number[] = [];
    for (let t = 0; t < seq.length; t++) if (lastSeen[seq[t]] === t) distinct.push(seq[t]);
    for (let t = 0; t < seq.length; t++) lastSeen[seq[t]] = -1;
    const cells: number[] = [];
    if (buckets > 0) {
      const set = new Set<number>();
      for (const r of rs) {
        const bk = Math.floor(colAt[r] / bucketMs) - firstBucket;
        if (bk >= 0 && bk < buckets) set.add(bk * n + colItem[r]);
      }
      cells.push(...set);
    }
    users.push({ seq, items: Int32Array.from(distinct), cells });
    if ((u & 4095) === 4095) progress('users', u + 1, userCount);
  }
  progress('users', userCount, userCount);

  // ── DP calibration ───────────────────────────────────────────────────────────────────
  const z = dp ? gaussianNoiseMultiplier(epsilon, delta) : 0;
  const share = { popularity: 0.3, gram: 0.5, transitions: 0.2, trend: opts.trend ? 0.1 : 0, ...opts.budget };
  const shareSum = share.popularity + share.gram + share.transitions + share.trend;
  const sens = sensitivities(m);
  const sigma = (b: keyof typeof share): number => (dp && share[b] > 0 ? (z * sens[b]) / Math.sqrt(share[b] / shareSum) : 0);
  const weightOf = (count: number): number => (dp ? contributionWeight(count, m) : 1);

  // ── popularity and trend ─────────────────────────────────────────────────────────────
  const popularity = new Float32Array(n);
  for (const u of users) {
    const w = weightOf(u.items.length);
    for (const i of u.items) popularity[i] += w;
  }
  if (dp) {
    const s = sigma('popularity');
    for (let i = 0; i < n; i++) popularity[i] = Math.max(0, popularity[i] + s * normal());
  }
  let trend: TrendCounts | undefined;
  if (buckets > 0) {
    const counts = new Float64Array(buckets * n);
    for (const u of users) {
      const w = weightOf(u.cells.length);
      for (const c of u.cells) counts[c] += w;
    }
    if (dp) {
      const s = sigma('trend');
      // why: noise on every cell of the public domain, then clip (post-processing).
      for (let c = 0; c < counts.length; c++) counts[c] = Math.max(0, counts[c] + s * normal());
    }
    const out = newRows();
    for (let b = 0; b < buckets; b++) {
      for (let i = 0; i < n; i++) {
        const v = counts[b * n + i];
        // why: under DP most cells hold clipped noise; keep only those above 2σ (post-processing).
        if (v > (dp ? 2 * sigma('trend') : 0)) {
          out.targets.push(i);
          out.weights.push(v);
        }
      }
      out.offsets.push(out.targets.length);
    }
    trend = { bucketMs, firstBucket, window: trendWindow, counts: csr(out) };
  }
  progress('popularity', 1, 1);
  let popRecent: RecentPopularity | undefined;
  if (recentDays > 0 && !dp && used > 0) {
    // distinct users per item with an event in (end − window, end]: one pass over the rows grouped by user
    const end = maxAt;
    const from = end - recentDays * 86_400_000;
    const counts = new Float32Array(n);
    const lastUser = new Int32Array(n).fill(-1);
    for (let u = 0; u < userCount; u++) {
      for (let p = start[u]; p < start[u + 1]; p++) {
        const r = order[p];
        if (!(colAt[r] > from)) continue;
        const i = colItem[r];
        if (lastUser[i] === u) continue;
        lastUser[i] = u;
        counts[i]++;
      }
    }
    const listed: number[] = [];
    for (let i = 0; i < n; i++) if (counts[i] > 0) listed.push(i);
    popRecent = { days: recentDays, end, items: Uint32Array.from(listed), counts: Float32Array.from(listed, (i) => counts[i]) };
    progress('recent popularity', 1, 1);
  }

  // ── the top-N set for EASE (and, under DP, for every pairwise statistic) ─────────────
  // why (dense vs local): see `ease` in TrainOptions; DP keeps the dense path on its small public domain.
  const easeMode: 'dense' | 'local' = dp
    ? 'dense'
    : opts.ease === 'dense' || opts.ease === 'local'
      ? opts.ease
      : n <= (opts.denseEaseMax ?? 3000)
        ? 'dense'
        : 'local';
  const localMemory = opts.localMemory ?? 2 * 2 ** 30;
  // why adaptive: every batch of local EASE recomputes the co-occurrence rows its neighbourhoods
  // use (a pass over the log), so K is sized for `localMemory` (localEaseK).
  const K = localEaseK(n, localMemory, opts.easeNeighbours);
  if (easeMode === 'local' && orient('ease') !== 'in') throw new RangeError("local EASE solves each candidate's column: it needs orientation.ease 'in'");
  const N = easeMode === 'local' ? 0 : Math.min(n, opts.easeItems ?? 10_000, dp ? (opts.dpItems ?? 100) : Infinity);
  const kEase = opts.k?.ease ?? kForBudget(0.4 * budget, nEstimate, 128, easeMode === 'local' ? nEstimate : Math.min(nEstimate, opts.easeItems ?? 10_000));
  // why: catalog order within the chosen set, so the layout (and the noise each cell gets)
  // depends only on which items are in the domain, not on their noisy ranking.
  const top = Int32Array.from(topK(n, N, (i) => popularity[i])).sort();
  const slot = new Int32Array(n).fill(-1);
  top.forEach((i, s) => (slot[i] = s));

  // Distinct items for co-occurrence (the most recent maxUserItems), with DP weights.
  const coItems = users.map((u) => (u.items.length > maxUserItems ? u.items.subarray(u.items.length - maxUserItems) : u.items));
  // The same as CSR both ways (the exact stages; 4 bytes a pair each): each user's items
  // (coStart/coFlat, in coItems order) and each item's users, ascending (userStart/userList).
  const coStart = new Int32Array(coItems.length + 1);
  const userStart = new Int32Array(n + 1);
  let coFlat = new Int32Array(0);
  let userList = new Int32Array(0);
  if (!dp) {
    coItems.forEach((r, u) => (coStart[u + 1] = coStart[u] + r.length));
    coFlat = new Int32Array(coStart[coItems.length]);
    coItems.forEach((r, u) => coFlat.set(r, coStart[u]));
    for (let p = 0; p < coFlat.length; p++) userStart[coFlat[p] + 1]++;
    for (let i = 0; i < n; i++) userStart[i + 1] += userStart[i];
    userList = new Int32Array(userStart[n]);
    const fill = userStart.slice(0, n);
    for (let u = 0; u < coItems.length; u++) for (let p = coStart[u]; p < coStart[u + 1]; p++) userList[fill[coFlat[p]]++] = u;
  }

  // ── Gram on the top-N set (dense) ────────────────────────────────────────────────────
  const G = new Float64Array(N * N);
  for (const r of coItems) {
    const w = weightOf(r.length);
    const w2 = w * w;
    const s: number[] = [];
    for (const i of r) if (slot[i] >= 0) s.push(slot[i]);
    for (const a of s) {
      const ra = a * N;
      for (const b of s) G[ra + b] += w2;
    }
  }
  if (dp) {
    const s = sigma('gram');
    for (let a = 0; a < N; a++)
      for (let b = a; b < N; b++) {
        const e = s * normal();
        G[a * N + b] += e;
        if (b !== a) G[b * N + a] += e;
      }
  }
  const diag = Float64Array.from({ length: N }, (_, a) => G[a * N + a]);
  progress('gram', 1, 1);

  // ── EASE on the top-N set ────────────────────────────────────────────────────────────
  let easeRows: NeighbourLists | undefined;
  let lambdaUsed = lambda;
  if (easeMode === 'dense') {
    // why: under DP the weights w_u² shrink the Gram (a typical 100-item user weighs m/100, a
    // public constant: λ must not depend on the private data), and the noise's spectral scale
    // (a symmetric Gaussian N×N matrix has norm ≈ 2σ√N) is added so that G + λI stays PD.
    if (dp) lambdaUsed = (lambda * Math.min(m, 100)) / 100 + (opts.dpLambdaScale ?? 1) * 2 * sigma('gram') * Math.sqrt(N);
    let P: Float64Array | undefined;
    for (let attempt = 0; attempt < 8 && !P; attempt++) {
      const A = Float64Array.from(G);
      for (let a = 0; a < N; a++) A[a * N + a] += lambdaUsed;
      try {
        P = invertSpd(A, N, (d, t) => progress('ease inverse', d, t));
      } catch (e) {
        if (!(e instanceof RangeError) || !dp) throw e;
        lambdaUsed *= 2; // why: noise made G + λI indefinite; more shrinkage is post-processing
      }
    }
    if (!P) throw new Error('ease: G + λI stayed indefinite');
    if (dp) lambdaUsed = Number(lambdaUsed.toFixed(3));
    const val = new Float64Array(N);
    const ease = new Selector(n, kEase, orient('ease'), opts.easeSigned ?? false);
    for (let x = 0; x < N; x++) {
      // B[h, c] = −P[h, c] / P[c, c]. `out`: x is the history item h (row h of B); `in`: x is the
      // candidate c (column c of B = row c of the symmetric P, scaled).
      for (let y = 0; y < N; y++) val[y] = x === y ? 0 : orient('ease') === 'out' ? -P[x * N + y] / P[y * N + y] : -P[x * N + y] / P[x * N + x];
      ease.addRow(top[x], top, val);
    }
    easeRows = ease.rows();
  }
  if (easeMode === 'dense') progress('ease', 1, 1);

  // ── item-kNN ─────────────────────────────────────────────────────────────────────────
  // why: co-occurrence cosine is symmetric, so a full row i is also column i: `in` keeps, for
  // candidate i, its k nearest history items (classic item-based kNN).
  const knn = new Selector(n, kKnn, orient('knn'), false);
  if (!dp) {
    const counts = new Float64Array(n);
    const touched: number[] = [];
    /** Co-occurrence row of item i into `counts` (touched entries listed in `touched`). */
    const coRow = (i: number) => {
      for (let p = userStart[i]; p < userStart[i + 1]; p++) {
        const u = userList[p];
        for (let q = coStart[u]; q < coStart[u + 1]; q++) {
          const j = coFlat[q];
          if (counts[j] === 0) touched.push(j);
          counts[j]++;
        }
      }
    };
    const clearRow = () => {
      for (const j of touched) counts[j] = 0;
      touched.length = 0;
    };
    const deg = (i: number) => userStart[i + 1] - userStart[i];
    // Local EASE neighbourhoods: each item's K nearest by cosine (-1 padded).
    const nb = easeMode === 'local' ? new Int32Array(n * K).fill(-1) : undefined;
    const byCount = (opts.easeNeighbourhood ?? 'count') === 'count';
    const given = opts.counts;
    const itemOf = (id: string) => cols.itemOf(id);
    if (given?.knn) forEachGivenRow(given.knn, itemOf, (i, idx, val) => knn.addRow(i, Int32Array.from(idx), Float64Array.from(val)));
    if (nb && given?.neighbours) forEachGivenRow(given.neighbours, itemOf, (i, idx) => idx.slice(0, K).forEach((j, q) => (nb[i * K + q] = j)));
    for (let i = 0; i < n && !(given?.knn && (!nb || given.neighbours)); i++) {
      coRow(i);
      const idx = Int32Array.from(touched);
      const val = new Float64Array(touched.length);
      const ni = deg(i);
      touched.forEach((j, t) => {
        val[t] = j === i ? 0 : counts[j] / Math.sqrt(ni * deg(j));
      });
      if (!given?.knn) knn.addRow(i, idx, val);
      if (nb && !given?.neighbours)
        topK(
          idx.length,
          K,
          (t) => (byCount ? counts[idx[t]] : val[t]),
          (t) => !(val[t] > 0),
        ).forEach((t, q) => (nb[i * K + q] = idx[t]));
      clearRow();
      if (i % 256 === 255) progress('knn', i + 1, n);
    }
    if (nb) {
      easeRows = localEase(n, K, nb, coRow, clearRow, counts, lambda, new Selector(n, kEase, orient('ease'), opts.easeSigned ?? false), localMemory, (d, t) =>
        progress('ease (local)', d, t),
      );
      progress('ease (local)', 1, 1);
    }
  } else {
    const idx = new Int32Array(N);
    const val = new Float64Array(N);
    const perRow = new Map<number, number>();
    top.forEach((i, s) => perRow.set(i, s));
    for (let i = 0; i < n; i++) {
      const a = perRow.get(i);
      if (a === undefined) continue;
      for (let b = 0; b < N; b++) {
        idx[b] = top[b];
        val[b] = b === a || diag[a] <= 0 || diag[b] <= 0 ? 0 : G[a * N + b] / Math.sqrt(diag[a] * diag[b]);
      }
      knn.addRow(i, idx, val);
    }
  }
  const knnRows = knn.rows();
  progress('knn', n, n);

  // ── Markov transitions ───────────────────────────────────────────────────────────────
  let markovRows: NeighbourLists;
  let noisyTransitions: Float64Array | undefined;
  {
    const T = new Map<number, Map<number, number>>();
    const add = (a: number, b: number, w: number) => {
      let r = T.get(a);
      if (!r) T.set(a, (r = new Map()));
      r.set(b, (r.get(b) ?? 0) + w);
    };
    const givenTransitions = dp ? undefined : opts.counts?.transitions;
    const markov = new Selector(n, kMarkov, 'out', false);
    if (givenTransitions)
      forEachGivenRow(
        givenTransitions,
        (id) => cols.itemOf(id),
        (a, idx, prob) => {
          // why rows straight into the selector (out): 32M entries at 1M items, too many for per-item Maps.
          if (orient('markov') === 'out') markov.addRow(a, idx, prob);
          else T.set(a, new Map(idx.map((b, q) => [b, prob[q]])));
        },
      );
    // why typed arrays: exact counts at 100M events are ~10⁸ distinct (a, b) pairs, beyond what
    // per-item Maps fit in V8's heap; rows a as CSR in log order give each row's successors in the
    // order the Maps saw them, so the kept lists are the same.
    const csrOut = !dp && !givenTransitions && orient('markov') === 'out';
    if (csrOut) {
      const from = new Int32Array(n + 1);
      for (const u of users) for (let t = 1; t < u.seq.length; t++) if (u.seq[t] !== u.seq[t - 1]) from[u.seq[t - 1] + 1]++;
      for (let a = 0; a < n; a++) from[a + 1] += from[a];
      const next = new Int32Array(from[n]);
      const fill = from.slice(0, n);
      for (const u of users) for (let t = 1; t < u.seq.length; t++) if (u.seq[t] !== u.seq[t - 1]) next[fill[u.seq[t - 1]]++] = u.seq[t];
      const count = new Float64Array(n);
      const touched: number[] = [];
      for (let a = 0; a < n; a++) {
        if (from[a] === from[a + 1]) continue;
        for (let p = from[a]; p < from[a + 1]; p++) {
          const b = next[p];
          if (count[b] === 0) touched.push(b);
          count[b]++;
        }
        const total = from[a + 1] - from[a];
        markov.addRow(
          a,
          touched,
          touched.map((b) => count[b] / total),
        );
        for (const b of touched) count[b] = 0;
        touched.length = 0;
      }
    }
    for (const u of givenTransitions || csrOut ? [] : users) {
      if (!dp) {
        for (let t = 1; t < u.seq.length; t++) if (u.seq[t] !== u.seq[t - 1]) add(u.seq[t - 1], u.seq[t], 1);
        continue;
      }
      const pairs = new Set<number>();
      for (let t = 1; t < u.seq.length; t++) {
        const a = slot[u.seq[t - 1]];
        const b = slot[u.seq[t]];
        if (a >= 0 && b >= 0 && a !== b) pairs.add(a * N + b);
      }
      const w = weightOf(pairs.size);
      for (const p of pairs) add(top[Math.floor(p / N)], top[p % N], w);
    }
    if (dp) {
      // why: noise on every (a, b) cell of the top-N domain, zeros included.
      const s = sigma('transitions');
      noisyTransitions = new Float64Array(N * N);
      for (let a = 0; a < N; a++) {
        const r = T.get(top[a]);
        const row = noisyTransitions.subarray(a * N, (a + 1) * N);
        for (let b = 0; b < N; b++) row[b] = (r?.get(top[b]) ?? 0) + s * normal();
        row[a] = 0; // why: a → a is not a transition (not in the domain); its draw is discarded
        const nr = new Map<number, number>();
        for (let b = 0; b < N; b++) if (row[b] > 2 * s) nr.set(top[b], row[b]);
        T.set(top[a], nr);
      }
      for (const i of [...T.keys()]) if (slot[i] < 0) T.delete(i);
    }
    // P(b | a) as rows a; `in` needs columns b: transpose the sparse matrix first.
    const probs = new Map<number, Map<number, number>>();
    for (const [a, r] of T) {
      let total = 0;
      for (const v of r.values()) total += v;
      if (givenTransitions) total = 1; // why: already P(b | a) over all successors, not only the top k given
      if (total <= 0) continue;
      if (orient('markov') === 'out') {
        const idx = [...r.keys()];
        markov.addRow(
          a,
          idx,
          idx.map((b) => r.get(b)! / total),
        );
      } else {
        for (const [b, v] of r) {
          let col = probs.get(b);
          if (!col) probs.set(b, (col = new Map()));
          col.set(a, v / total);
        }
      }
    }
    if (orient('markov') === 'in') {
      // column b (the candidate): keep its k most likely predecessors a, stored as rows a → b
      for (const [b, col] of probs) {
        const idx = [...col.keys()];
        for (const t of topK(idx.length, kMarkov, (x) => col.get(idx[x])!)) markov.add(idx[t], b, col.get(idx[t])!);
      }
    }
    markovRows = markov.rows();
  }
  progress('markov', 1, 1);
  opts.onStatistics?.({ popularity: Float32Array.from(popularity), domain: top, gram: G, ...(noisyTransitions ? { transitions: noisyTransitions } : {}) });

  // ── collaborative item vectors (+ content for cold items) ───────────────────────────
  let vectors: ItemVectorTable | undefined;
  let contentMap: ContentMap | undefined;
  let vectorInfo: Record<string, unknown> = {};
  if (dim > 0) {
    const power = opts.vectorPower ?? 0.5;
    const coldBelow = opts.coldBelow ?? 1;
    const values = new Float32Array(n * dim);
    const cold = new Uint8Array(n);
    const hasVector = new Uint8Array(n);
    let eig: { values: Float64Array; vectors: Float64Array };
    let rowsOf: (r: number) => number; // eigen row → item index
    let dimUsed: number;
    let iterationsUsed = opts.iterations ?? 30;
    if (!dp) {
      // S = D^−½ XᵀX D^−½ applied through the sparse log: 2·nnz·d per product, on the items
      // with data only (S is zero elsewhere; `rows` of topEigen keeps the result bit for bit).
      const deg = new Float64Array(n);
      for (let i = 0; i < n; i++) deg[i] = userStart[i + 1] - userStart[i];
      const beta = opts.vectorDegree ?? 0.5;
      const inv = Float64Array.from(deg, (x) => (x > 0 ? x ** -beta : 0));
      const support = Int32Array.from(
        (function* () {
          for (let i = 0; i < n; i++) if (deg[i] > 0) yield i;
        })(),
      );
      const apply = cooccurrenceProduct(support, inv, coStart, coFlat, userStart, userList, n);
      dimUsed = Math.min(dim, n);
      iterationsUsed = opts.iterations ?? (support.length > (opts.largeAbove ?? 50_000) ? (opts.largeIterations ?? 10) : 30);
      eig = topEigen(apply, n, dimUsed, normal, iterationsUsed, {
        over: 8,
        rows: support,
        fusedGram: true,
        onIteration: (d, t) => progress('vectors', d, t),
      });
      rowsOf = (r) => support[r];
      for (let i = 0; i < n; i++) hasVector[i] = deg[i] >= Math.max(1, coldBelow) ? 1 : 0;
    } else {
      const apply = (Q: Float64Array, d: number): Float64Array => {
        const Y = new Float64Array(N * d);
        const sc = Float64Array.from(diag, (x) => (x > 0 ? 1 / Math.sqrt(x) : 0));
        for (let a = 0; a < N; a++) {
          const ra = a * N;
          for (let b = 0; b < N; b++) {
            const g = G[ra + b] * sc[a] * sc[b];
            if (g === 0) continue;
            for (let c = 0; c < d; c++) Y[a * d + c] += g * Q[b * d + c];
          }
        }
        return Y;
      };
      dimUsed = Math.min(dim, N);
      eig = topEigen(apply, N, dimUsed, normal, opts.iterations ?? 30);
      rowsOf = (r) => top[r];
      for (let a = 0; a < N; a++) hasVector[top[a]] = diag[a] > 0 && popularity[top[a]] >= coldBelow ? 1 : 0;
    }
    const rowsCount = eig.vectors.length / dimUsed;
    for (let r = 0; r < rowsCount; r++) {
      const i = rowsOf(r);
      if (!hasVector[i]) continue;
      let nrm = 0;
      for (let c = 0; c < dimUsed; c++) {
        const v = eig.vectors[r * dimUsed + c] * Math.max(eig.values[c], 0) ** power;
        values[i * dim + c] = v;
        nrm += v * v;
      }
      nrm = Math.sqrt(nrm);
      if (nrm > 0) for (let c = 0; c < dim; c++) values[i * dim + c] /= nrm;
      else hasVector[i] = 0;
    }
    vectorInfo = { eigenvalues: Array.from(eig.values.slice(0, 8), (x) => Number(x.toFixed(3))) };
    // why only when not 30: the files of the shops below `largeAbove` stay byte for byte as they were.
    if (iterationsUsed !== 30) vectorInfo.iterations = iterationsUsed;
    if (opts.content) {
      const fit = fitContentMap(opts.content, items, values, hasVector, dim, opts.ridgeAlpha ?? 1);
      if (fit) {
        contentMap = fit.map;
        for (let i = 0; i < n; i++) {
          if (hasVector[i]) continue;
          const v = fit.predict(items[i]);
          if (!v) continue;
          values.set(v, i * dim);
          cold[i] = 1;
        }
        vectorInfo.contentMap = { fittedOn: fit.fittedOn, alpha: opts.ridgeAlpha ?? 1 };
      }
    }
    vectors = { dim, values, cold };
  }
  progress('vectors', 1, 1);

  let privacy: ShopPrivacy | undefined;
  if (dp) {
    privacy = {
      epsilon,
      delta,
      mechanism: 'analytic Gaussian mechanism (Balle & Wang 2018), user-level, add/remove one user; contributions scaled to L2 norm bounds',
      maxItemsPerUser: m,
      sigma: { popularity: sigma('popularity'), gram: sigma('gram'), transitions: sigma('transitions'), trend: sigma('trend'), noiseMultiplier: z },
    };
  }
  return {
    items,
    lists: { ease: easeRows!, knn: knnRows, markov: markovRows },
    popularity,
    ...(trend ? { trend } : {}),
    ...(popRecent ? { popRecent } : {}),
    ...(vectors ? { vectors } : {}),
    ...(contentMap ? { contentMap } : {}),
    weights: { ...(opts.weights ?? weightsForEpsilon(epsilon)) },
    ...(privacy ? { privacy } : {}),
    info: {
      createdAt: new Date().toISOString(),
      // why: exact counts and timings are functions of the private log; a DP file omits them.
      ...(dp ? {} : { interactions: used, users: users.length, trainSeconds: (Date.now() - started) / 1000 }),
      items: n,
      lambda: lambdaUsed,
      easeItems: easeMode === 'local' ? n : N,
      ease: easeMode === 'local' ? { method: 'local', neighbours: K } : { method: 'dense' },
      k: { ease: kEase, knn: kKnn, markov: kMarkov },
      dim,
      ...(opts.until !== undefined ? { until: opts.until } : {}),
      vectors: vectorInfo,
    },
  };
}

/**
 * Y = S·Q for S = W Xᵀ X W (X the users × items 0/1 matrix of the co-occurrence log, W the
 * diagonal `inv`), on the rows of `support` (Q and Y are support.length × b). Two passes, each
 * partitioned by its output rows so that every sum keeps the order of the one-pass product
 * (user by user, adding each user's t_u = Σ_{i ∈ u} w_i q_i into each of its items' rows):
 * T = the t_u of a block of users (in each user's item order), then each item's row gathers
 * w_i t_u over its users in ascending order. Users go in blocks of at most 256 MiB of T, so the
 * memory does not grow with the log. With `gram`, each finished row of Y is added to YᵀY's upper
 * triangle (`addRowGram`) while it is in cache.
 */
export function cooccurrenceProduct(
  support: Int32Array,
  inv: Float64Array,
  coStart: Int32Array,
  coFlat: Int32Array,
  userStart: Int32Array,
  userList: Int32Array,
  n: number,
): (Q: Float64Array, b: number, gram?: Float64Array) => Float64Array {
  const m = support.length;
  const U = coStart.length - 1;
  const compact = new Int32Array(n).fill(-1);
  support.forEach((i, k) => (compact[i] = k));
  return (Q, b, gram) => {
    const Y = new Float64Array(m * b);
    const block = Math.max(1, Math.min(U, Math.floor(2 ** 28 / (8 * b))));
    const T = new Float64Array(block * b);
    const pos = block < U ? Int32Array.from(support, (i) => userStart[i]) : undefined;
    for (let u0 = 0; u0 < U; u0 += block) {
      const u1 = Math.min(U, u0 + block);
      if (u0 > 0) T.fill(0);
      for (let u = u0; u < u1; u++) {
        const to = (u - u0) * b;
        for (let p = coStart[u]; p < coStart[u + 1]; p++) {
          const i = coFlat[p];
          const s = inv[i];
          axpy(T, to, Q, compact[i] * b, s, b);
        }
      }
      const last = u1 === U;
      for (let k = 0; k < m; k++) {
        const i = support[k];
        const s = inv[i];
        const yo = k * b;
        const end = userStart[i + 1];
        let p = pos ? pos[k] : userStart[i];
        for (; p < end; p++) {
          const u = userList[p];
          if (u >= u1) break;
          axpy(Y, yo, T, (u - u0) * b, s, b);
        }
        if (pos) pos[k] = p;
        if (last && gram) addRowGram(gram, Y, yo, b);
      }
    }
    return Y;
  };
}

/**
 * Local EASE: for each candidate item c with neighbourhood S (its K nearest items, `nb`), the
 * EASE column restricted to S, b = (G_SS + λI)⁻¹ G_Sc, added to `ease` as c's row (`in`: the
 * history items h ∈ S that vote for c with weight b_h). Gram blocks are built from exact
 * co-occurrence rows (`coRow` fills `counts` for one item) for as many candidates at once as
 * `memory` bytes allow; each batch computes the rows of the items its neighbourhoods use.
 */
function localEase(
  n: number,
  K: number,
  nb: Int32Array,
  coRow: (i: number) => void,
  clearRow: () => void,
  counts: Float64Array,
  lambda: number,
  ease: Selector,
  memory: number,
  progress: (done: number, total: number) => void,
): NeighbourLists {
  const perBatch = Math.max(1, Math.floor(memory / (4 * K * K + 8 * K)));
  const size = (c: number) => {
    let k = 0;
    while (k < K && nb[c * K + k] >= 0) k++;
    return k;
  };
  const L = new Float32Array(Math.min(perBatch, n) * K * K); // counts: exact in float32 below 2^24
  const R = new Float64Array(Math.min(perBatch, n) * K);
  const x = new Float64Array(K);
  const Abuf = new Float64Array(K * K);
  for (let c0 = 0; c0 < n; c0 += perBatch) {
    const c1 = Math.min(n, c0 + perBatch);
    // users[a] = (candidate, position) pairs with a = S_c[position], as CSR over a.
    const cnt = new Int32Array(n + 1);
    for (let c = c0; c < c1; c++)
      for (let q = 0; q < K; q++) {
        const a = nb[c * K + q];
        if (a >= 0) cnt[a + 1]++;
      }
    for (let a = 0; a < n; a++) cnt[a + 1] += cnt[a];
    const ref = new Int32Array(cnt[n] * 2);
    {
      const fill = cnt.slice(0, n);
      for (let c = c0; c < c1; c++)
        for (let q = 0; q < K; q++) {
          const a = nb[c * K + q];
          if (a < 0) continue;
          const p = fill[a]++;
          ref[2 * p] = c;
          ref[2 * p + 1] = q;
        }
    }
    L.fill(0);
    R.fill(0);
    for (let a = 0; a < n; a++) {
      if (cnt[a] === cnt[a + 1]) continue;
      coRow(a);
      for (let p = cnt[a]; p < cnt[a + 1]; p++) {
        const c = ref[2 * p];
        const q = ref[2 * p + 1];
        const b = c - c0;
        const row = (b * K + q) * K;
        for (let t = 0; t < K; t++) {
          const j = nb[c * K + t];
          if (j < 0) break;
          L[row + t] = counts[j];
        }
        R[b * K + q] = counts[c];
      }
      clearRow();
      if ((a & 1023) === 1023) progress(c0 + ((c1 - c0) * a) / n / 2, n);
    }
    for (let c = c0; c < c1; c++) {
      const k = size(c);
      if (k === 0) continue;
      const b = c - c0;
      const A = Abuf.subarray(0, k * k);
      for (let r = 0; r < k; r++) {
        for (let t = 0; t < k; t++) A[r * k + t] = L[(b * K + r) * K + t];
        A[r * k + r] += lambda;
        x[r] = R[b * K + r];
      }
      choleskyInPlace(A, k);
      // forward then backward substitution: L y = r, Lᵀ x = y
      for (let r = 0; r < k; r++) {
        let v = x[r];
        for (let t = 0; t < r; t++) v -= A[r * k + t] * x[t];
        x[r] = v / A[r * k + r];
      }
      for (let r = k - 1; r >= 0; r--) {
        let v = x[r];
        for (let t = r + 1; t < k; t++) v -= A[t * k + r] * x[t];
        x[r] = v / A[r * k + r];
      }
      ease.addRow(c, nb.subarray(c * K, c * K + k), x.subarray(0, k));
      if ((c & 4095) === 4095) progress(c + 1, n);
    }
    progress(c1, n);
  }
  return ease.rows();
}

/**
 * Ridge map (with intercept) from centred, normalised content vectors to the collaborative
 * vectors, fitted on the items that have a collaborative vector; `predict(id)` gives the estimate
 * (not normalised, see `mapContent`; undefined
 * without content).
 */
function fitContentMap(
  content: ContentInput,
  items: readonly string[],
  values: Float32Array,
  hasVector: Uint8Array,
  dim: number,
  alpha: number,
): { map: ContentMap; fittedOn: number; predict: (id: string) => Float32Array | undefined } | undefined {
  let inDim = 0;
  for (const v of content.vectors.values()) {
    inDim = v.length;
    break;
  }
  if (inDim === 0) return undefined;
  const mean = new Float64Array(inDim);
  let count = 0;
  for (const id of items) {
    const v = content.vectors.get(id);
    if (!v) continue;
    if (v.length !== inDim) throw new RangeError(`content vector of "${id}" has ${v.length} dimensions, expected ${inDim}`);
    for (let d = 0; d < inDim; d++) mean[d] += v[d];
    count++;
  }
  if (count === 0) return undefined;
  for (let d = 0; d < inDim; d++) mean[d] /= count;
  const centred = (v: ArrayLike<number>): Float64Array => {
    const out = new Float64Array(inDim);
    let nrm = 0;
    for (let d = 0; d < inDim; d++) {
      out[d] = v[d] - mean[d];
      nrm += out[d] * out[d];
    }
    nrm = Math.sqrt(nrm);
    if (nrm > 0) for (let d = 0; d < inDim; d++) out[d] /= nrm;
    return out;
  };
  const train: number[] = [];
  items.forEach((id, i) => {
    if (hasVector[i] && content.vectors.has(id)) train.push(i);
  });
  if (train.length === 0) return undefined;
  const X = new Float64Array(train.length * inDim);
  const Y = new Float64Array(train.length * dim);
  // why: the collaborative vectors share a large common direction (the first eigenvector is
  // positive on every item); content is centred, so without this intercept every predicted
  // vector would lack it and score low against every shopper (ML-100K: new items ranked below
  // random against items with data, NDCG@10 0.422).
  const bias = new Float64Array(dim);
  for (const i of train) for (let c = 0; c < dim; c++) bias[c] += values[i * dim + c] / train.length;
  train.forEach((i, r) => {
    X.set(centred(content.vectors.get(items[i])!), r * inDim);
    for (let c = 0; c < dim; c++) Y[r * dim + c] = values[i * dim + c] - bias[c];
  });
  const W = ridge(X, Y, train.length, inDim, dim, alpha);
  const map: ContentMap = { embedder: content.embedder, inDim, mean: Float32Array.from(mean), matrix: Float32Array.from(W), bias: Float32Array.from(bias) };
  const predict = (id: string): Float32Array | undefined => {
    const v = content.vectors.get(id);
    return v ? mapContent(map, v, dim) : undefined;
  };
  return { map, fittedOn: train.length, predict };
}

/**
 * Each non-empty row of lists an engine gave (`TrainOptions.counts`) in catalog indices: the row's
 * item, its targets and their values, best first; ids `itemOf` does not know (-1) are dropped.
 */
function forEachGivenRow(l: RankedLists, itemOf: (id: string) => number, onRow: (i: number, idx: number[], val: number[]) => void): void {
  const at = Int32Array.from(l.ids, itemOf);
  for (let a = 0; a < l.ids.length; a++) {
    const i = at[a];
    if (i < 0 || l.offsets[a] === l.offsets[a + 1]) continue;
    const idx: number[] = [];
    const val: number[] = [];
    for (let p = l.offsets[a]; p < l.offsets[a + 1]; p++)
      if (at[l.targets[p]] >= 0) {
        idx.push(at[l.targets[p]]);
        val.push(l.values[p]);
      }
    onRow(i, idx, val);
  }
}
