/**
 * Baselines of the benchmark, each a {@link Method}. All learn only from
 * `ctx.histories` (setting `full`: every user's interactions before their own test item)
 * and rank the case's 10 candidates.
 *
 * Ties (equal scores) are broken by a seeded random permutation per (method, user), never by
 * candidate position, so a tie can never systematically favour the positive.
 */
import type { Interaction, Item } from 'atomem/engine';
import { Rng } from './rng.js';
import type { Method, MethodContext, RankCase } from './types.js';

/**
 * Candidates sorted by descending score; equal scores in the order of a random permutation
 * drawn from `rng`. NaN scores count as −∞.
 */
export function rankByScore(candidates: readonly string[], scores: ArrayLike<number>, rng: Rng): string[] {
  const n = candidates.length;
  const keys = new Uint32Array(n);
  for (let i = 0; i < n; i++) keys[i] = rng.nextUint32();
  const order = Array.from({ length: n }, (_, i) => i);
  const score = (i: number) => (Number.isNaN(scores[i]) ? -Infinity : scores[i]);
  order.sort((a, b) => score(b) - score(a) || keys[a] - keys[b] || a - b);
  return order.map((i) => candidates[i]);
}

/** The tie-breaking stream of one method on one user. */
export function tieRng(seed: number, method: string, user: string): Rng {
  return Rng.derive(seed, 'ties', method, user);
}

/** Shared plumbing: keeps the context, ranks by a per-candidate score. */
abstract class ScoringMethod implements Method {
  abstract readonly name: string;
  protected ctx!: MethodContext;

  async prepare(ctx: MethodContext): Promise<void> {
    this.ctx = ctx;
    this.fit(ctx);
  }

  protected abstract fit(ctx: MethodContext): void;
  protected abstract scores(c: RankCase): ArrayLike<number>;

  rank(c: RankCase): string[] {
    return rankByScore(c.candidates, this.scores(c), tieRng(this.ctx.seed, this.name, c.user));
  }

  /** The run's catalog order (full-ranking protocols set it; otherwise the dataset's items). */
  protected catalog(): readonly string[] {
    return this.ctx.catalog ?? [...this.ctx.dataset.items.keys()];
  }

  /** For each slot of {@link catalog}, the method's own index of that item (−1 when it has none). */
  protected slots(index: ReadonlyMap<string, number>): Int32Array {
    return Int32Array.from(this.catalog(), (id) => index.get(id) ?? -1);
  }
}

// ---------------------------------------------------------------------------------------

/** Uniformly random order (seeded per user): the no-signal floor, NDCG@10 ≈ 0.454. */
export class RandomMethod extends ScoringMethod {
  readonly name = 'random';
  protected fit(): void {}
  protected scores(c: RankCase): ArrayLike<number> {
    return new Float64Array(c.candidates.length);
  }

  scoreAll(c: RankCase, out: Float32Array): void {
    const rng = tieRng(this.ctx.seed, this.name, c.user);
    for (let k = 0; k < out.length; k++) out[k] = rng.next();
  }
}

/** Popularity: number of interactions with the item in `ctx.histories` (before each user's test item). */
export class PopMethod extends ScoringMethod {
  readonly name = 'pop';
  private counts = new Map<string, number>();
  protected fit(ctx: MethodContext): void {
    this.counts.clear();
    for (const seq of ctx.histories.values()) for (const x of seq) this.counts.set(x.item, (this.counts.get(x.item) ?? 0) + 1);
  }
  protected scores(c: RankCase): ArrayLike<number> {
    return c.candidates.map((id) => this.counts.get(id) ?? 0);
  }

  private all?: Float32Array;
  scoreAll(_c: RankCase, out: Float32Array): void {
    if (!this.all) {
      const ids = this.catalog();
      this.all = Float32Array.from(ids, (id) => this.counts.get(id) ?? 0);
    }
    out.set(this.all);
  }
}

/** One day in the benchmark's time unit (milliseconds, as the loaders store `at`). */
export const DAY_MS = 86_400_000;

/**
 * Recent popularity ("Time to Split", RecSys 2025): interactions with the item in the last
 * `days` (default 7) before the latest event of `ctx.histories` — in protocol `temporal`, the
 * week before the cut. Needs real timestamps (refuses a dataset with order only).
 */
export class PopRecentMethod extends ScoringMethod {
  readonly name: string;
  private counts = new Map<string, number>();
  /** Total popularity, to order items the window never saw. */
  private total = new Map<string, number>();
  constructor(private readonly days = 7) {
    super();
    if (!(days > 0)) throw new RangeError(`pop7d: days must be > 0, got ${days}`);
    this.name = days === 7 ? 'pop7d' : `pop${days}d`;
  }
  protected fit(ctx: MethodContext): void {
    if (ctx.dataset.ordinalTime) throw new Error(`${this.name} needs timestamps; ${ctx.dataset.name} has the order of events only`);
    let last = -Infinity;
    for (const seq of ctx.histories.values()) for (const x of seq) if (x.at > last) last = x.at;
    const from = last - this.days * DAY_MS;
    this.counts.clear();
    this.total.clear();
    for (const seq of ctx.histories.values()) {
      for (const x of seq) {
        this.total.set(x.item, (this.total.get(x.item) ?? 0) + 1);
        if (x.at > from) this.counts.set(x.item, (this.counts.get(x.item) ?? 0) + 1);
      }
    }
  }
  /** Score = window count + all-time count / (1 + the largest all-time count): the window first, all-time popularity breaks its ties. */
  private get maxTotal(): number {
    let m = 0;
    for (const v of this.total.values()) if (v > m) m = v;
    return m;
  }
  protected scores(c: RankCase): ArrayLike<number> {
    const m = this.maxTotal;
    return c.candidates.map((id) => (this.counts.get(id) ?? 0) + (this.total.get(id) ?? 0) / (1 + m));
  }
  scoreAll(_c: RankCase, out: Float32Array): void {
    const ids = this.catalog();
    const m = this.maxTotal;
    for (let k = 0; k < ids.length; k++) out[k] = (this.counts.get(ids[k]) ?? 0) + (this.total.get(ids[k]) ?? 0) / (1 + m);
  }
}

// ---------------------------------------------------------------------------------------
// BM25

const STOPWORDS = new Set('a an and are as at be by for from has he in is it its of on or that the to was were will with'.split(' '));

/** Lower-cased word tokens (letters/digits, apostrophes dropped: "Children's" → "childrens"), minus stopwords. */
export function tokenize(text: string): string[] {
  return text
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/['’]/g, '')
    .split(/[^\p{L}\p{N}]+/u)
    .filter((t) => t !== '' && !STOPWORDS.has(t));
}

/** The text BM25 indexes for an item: title, categories, description. */
export function itemText(item: Item | undefined): string {
  if (!item) return '';
  return [item.title, ...(item.categories ?? []), item.description ?? ''].join(' ');
}

export interface Bm25Options {
  k1?: number;
  b?: number;
}

/**
 * BM25 (k1 = 1.2, b = 0.75) over item texts (title + categories + description), documents =
 * the catalog. Query = the user's history (training + validation) as a bag of terms: each
 * term weighs the number of history items whose text contains it, so a genre seen in 40 of
 * the user's items counts 40 times and a title word once. idf = ln(1 + (N − df + 0.5)/(df + 0.5)).
 * In setting `instruct` the query is the case's intent alone (BM25 with the intent).
 */
export class Bm25Method extends ScoringMethod {
  readonly name = 'bm25';
  private readonly k1: number;
  private readonly b: number;
  private docs = new Map<string, Map<string, number>>();
  private docLen = new Map<string, number>();
  private idf = new Map<string, number>();
  private avgdl = 1;

  constructor(opts: Bm25Options = {}) {
    super();
    this.k1 = opts.k1 ?? 1.2;
    this.b = opts.b ?? 0.75;
  }

  protected fit(ctx: MethodContext): void {
    const df = new Map<string, number>();
    let total = 0;
    for (const [id, item] of ctx.dataset.items) {
      const toks = tokenize(itemText(item));
      const tf = new Map<string, number>();
      for (const t of toks) tf.set(t, (tf.get(t) ?? 0) + 1);
      this.docs.set(id, tf);
      this.docLen.set(id, toks.length);
      total += toks.length;
      for (const t of tf.keys()) df.set(t, (df.get(t) ?? 0) + 1);
    }
    const N = ctx.dataset.items.size;
    this.avgdl = N > 0 ? Math.max(total / N, 1e-9) : 1;
    for (const [t, d] of df) this.idf.set(t, Math.log(1 + (N - d + 0.5) / (d + 0.5)));
  }

  /** Query term weights of a history. */
  query(history: readonly Interaction[]): Map<string, number> {
    const q = new Map<string, number>();
    for (const x of history) {
      const tf = this.docs.get(x.item) ?? new Map(tokenize(itemText(this.ctx.dataset.items.get(x.item))).map((t) => [t, 1]));
      for (const t of tf.keys()) q.set(t, (q.get(t) ?? 0) + 1);
    }
    return q;
  }

  protected scores(c: RankCase): ArrayLike<number> {
    // setting `instruct`: a search box over item text that knows nothing of the shopper — the intent is the query
    const q = c.intent !== undefined ? new Map(tokenize(c.intent).map((t) => [t, 1])) : this.query(c.history);
    return c.candidates.map((id) => {
      const tf = this.docs.get(id);
      if (!tf) return 0;
      const norm = this.k1 * (1 - this.b + (this.b * (this.docLen.get(id) ?? 0)) / this.avgdl);
      let s = 0;
      for (const [t, f] of tf) {
        const w = q.get(t);
        if (w) s += w * (this.idf.get(t) ?? 0) * ((f * (this.k1 + 1)) / (f + norm));
      }
      return s;
    });
  }
}

// ---------------------------------------------------------------------------------------
// Item-kNN

/**
 * Item-kNN: sim(i, j) = co(i, j) / sqrt(n_i · n_j), with co = number of users whose history
 * (in `ctx.histories`) holds both items and n_i = number of users holding i (each user's
 * history taken as a set). score(c) = Σ over the distinct items h of the user's history of
 * sim(c, h). Only the rows of candidate items are built (sparse), in `prepare`.
 */
export class ItemKnnMethod extends ScoringMethod {
  readonly name = 'itemknn';
  private index = new Map<string, number>();
  private rows = new Map<number, { idx: Int32Array; val: Float32Array }>();
  private mark = new Uint8Array(0);
  private userItems: Int32Array[] = [];
  private itemUsers: number[][] = [];
  private counts = new Int32Array(0);
  private slotOf = new Int32Array(0);

  protected fit(ctx: MethodContext): void {
    const index = this.index;
    index.clear();
    this.rows.clear();
    const userItems: Int32Array[] = (this.userItems = []);
    for (const seq of ctx.histories.values()) {
      const set = new Set<number>();
      for (const x of seq) {
        let i = index.get(x.item);
        if (i === undefined) index.set(x.item, (i = index.size));
        set.add(i);
      }
      if (set.size > 0) userItems.push(Int32Array.from(set));
    }
    const n = index.size;
    const itemUsers: number[][] = (this.itemUsers = Array.from({ length: n }, () => []));
    userItems.forEach((items, u) => {
      for (const i of items) itemUsers[i].push(u);
    });
    this.counts = new Int32Array(n);
    const wanted = new Set<number>();
    for (const c of ctx.cases)
      for (const id of c.candidates) {
        const i = index.get(id);
        if (i !== undefined) wanted.add(i);
      }
    let done = 0;
    for (const ci of wanted) {
      this.row(ci);
      if (++done % 64 === 0) ctx.progress(done, wanted.size, 'co-occurrence rows');
    }
    ctx.progress(wanted.size, wanted.size, 'co-occurrence rows');
    this.mark = new Uint8Array(n);
    const slots = new Map<number, number>();
    (ctx.catalog ?? []).forEach((id, k) => {
      const i = index.get(id);
      if (i !== undefined) slots.set(i, k);
    });
    this.slotOf = Int32Array.from({ length: n }, (_, i) => slots.get(i) ?? -1);
  }

  /** Row `ci` of the similarity (sparse; built on first use, then kept). sim is symmetric. */
  private row(ci: number): { idx: Int32Array; val: Float32Array } {
    const have = this.rows.get(ci);
    if (have) return have;
    const { counts, itemUsers, userItems } = this;
    const touched: number[] = [];
    for (const u of itemUsers[ci]) {
      for (const j of userItems[u]) {
        if (counts[j] === 0) touched.push(j);
        counts[j]++;
      }
    }
    const idx = new Int32Array(touched.length);
    const val = new Float32Array(touched.length);
    const nc = itemUsers[ci].length;
    touched.forEach((j, k) => {
      idx[k] = j;
      val[k] = j === ci ? 0 : counts[j] / Math.sqrt(nc * itemUsers[j].length);
      counts[j] = 0;
    });
    const r = { idx, val };
    this.rows.set(ci, r);
    return r;
  }

  protected scores(c: RankCase): ArrayLike<number> {
    const hist: number[] = [];
    for (const x of c.history) {
      const i = this.index.get(x.item);
      if (i !== undefined && !this.mark[i]) {
        this.mark[i] = 1;
        hist.push(i);
      }
    }
    const out = c.candidates.map((id) => {
      const ci = this.index.get(id);
      const row = ci === undefined ? undefined : this.rows.get(ci);
      if (!row) return 0;
      let s = 0;
      for (let k = 0; k < row.idx.length; k++) if (this.mark[row.idx[k]]) s += row.val[k];
      return s;
    });
    for (const i of hist) this.mark[i] = 0;
    return out;
  }

  /** Every catalog item: Σ over the distinct history items h of row h (sim is symmetric). */
  scoreAll(c: RankCase, out: Float32Array): void {
    out.fill(0);
    const hist: number[] = [];
    for (const x of c.history) {
      const i = this.index.get(x.item);
      if (i !== undefined && !this.mark[i]) {
        this.mark[i] = 1;
        hist.push(i);
      }
    }
    for (const h of hist) {
      this.mark[h] = 0;
      const { idx, val } = this.row(h);
      for (let k = 0; k < idx.length; k++) {
        const slot = this.slotOf[idx[k]];
        if (slot >= 0) out[slot] += val[k];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// BPR-MF

export interface BprOptions {
  factors?: number;
  epochs?: number;
  /** SGD learning rate. */
  lr?: number;
  /** L2 regularisation of user and item factors. */
  reg?: number;
  /** L2 regularisation of item biases. */
  regBias?: number;
  /** Std-dev of the initial factors. */
  init?: number;
  /** 1: draw the user uniformly, then one of their items; 0: draw an interaction uniformly. */
  userUniform?: number;
  /** Learning rate at the last epoch as a fraction of `lr` (linear decay); 1 = constant. */
  lrEnd?: number;
}

/**
 * BPR-MF (Rendle et al. 2009) with item biases: x_uij = b_i − b_j + p_u·(q_i − q_j),
 * plain SGD on Float32Array, trained centralized on every history in `ctx.histories`.
 * One epoch = as many (u, i, j) triples as interactions: (u, i) drawn uniformly among the
 * interactions, j uniformly among the catalog items u never interacted with in training.
 * 100 epochs, learning rate 0.05 decaying linearly to 0.0025, L2 0.01, init N(0, 0.1²).
 * Seeded (stream `bpr`). Defaults chosen on ML-100K validation cases (`--validation`).
 */
export class BprMethod extends ScoringMethod {
  readonly name = 'bpr';
  readonly opts: Required<BprOptions>;
  private userIndex = new Map<string, number>();
  private itemIndex = new Map<string, number>();
  private P = new Float32Array(0);
  private Q = new Float32Array(0);
  private bias = new Float32Array(0);
  private slotIdx?: Int32Array;

  constructor(opts: BprOptions = {}) {
    super();
    const defined = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined));
    // why these: on ML-100K validation cases (--validation), linear decay to 5% reaches in 100
    // epochs what a constant rate needs 300 for (NDCG@10 0.777 vs 0.780; EASE 0.775); reg 0.01
    // beat 0.005 and 0.02; user-uniform sampling and a 0.01 init did not help.
    this.opts = { factors: 32, epochs: 100, lr: 0.05, reg: 0.01, regBias: 0.001, init: 0.1, userUniform: 0, lrEnd: 0.05, ...defined };
  }

  protected fit(ctx: MethodContext): void {
    const { factors: F, epochs, lr: lr0, reg, regBias, init, userUniform, lrEnd } = this.opts;
    const rng = Rng.derive(ctx.seed, 'bpr');
    const items = this.itemIndex;
    const users = this.userIndex;
    items.clear();
    users.clear();
    for (const id of ctx.dataset.items.keys()) items.set(id, items.size);
    const us: number[] = [];
    const is: number[] = [];
    const seen = new Set<number>();
    for (const [user, seq] of ctx.histories) {
      const u = users.size;
      users.set(user, u);
      for (const x of seq) {
        let i = items.get(x.item);
        if (i === undefined) items.set(x.item, (i = items.size));
        const key = u * 0x100000 + i; // why: u·2^20 + i is exact below 2^53 for any realistic size
        if (seen.has(key)) continue;
        seen.add(key);
        us.push(u);
        is.push(i);
      }
    }
    const nu = users.size;
    const ni = items.size;
    if (ni >= 0x100000) throw new Error(`bpr: ${ni} items exceed the supported 2^20`);
    const U = Int32Array.from(us);
    const I = Int32Array.from(is);
    const N = U.length;
    const P = (this.P = new Float32Array(nu * F));
    const Q = (this.Q = new Float32Array(ni * F));
    const bias = (this.bias = new Float32Array(ni));
    for (let k = 0; k < P.length; k++) P[k] = rng.normal() * init;
    for (let k = 0; k < Q.length; k++) Q[k] = rng.normal() * init;
    if (N === 0 || ni < 2) return;

    // Interactions are grouped by user (histories are iterated user by user).
    const start = new Int32Array(nu + 1);
    for (let t = 0; t < N; t++) start[U[t] + 1]++;
    for (let u = 0; u < nu; u++) start[u + 1] += start[u];
    const active = Int32Array.from([...Array(nu).keys()].filter((u) => start[u + 1] > start[u]));
    for (let epoch = 0; epoch < epochs; epoch++) {
      const lr = epochs > 1 ? lr0 * (1 + ((lrEnd - 1) * epoch) / (epochs - 1)) : lr0;
      for (let s = 0; s < N; s++) {
        let t: number;
        if (userUniform) {
          const v = active[rng.int(active.length)];
          t = start[v] + rng.int(start[v + 1] - start[v]);
        } else t = rng.int(N);
        const u = U[t];
        const i = I[t];
        let j = rng.int(ni);
        let tries = 0;
        while (seen.has(u * 0x100000 + j) && tries++ < 100) j = rng.int(ni);
        if (seen.has(u * 0x100000 + j)) continue; // why: u has seen (nearly) every item
        const pu = u * F;
        const qi = i * F;
        const qj = j * F;
        let x = bias[i] - bias[j];
        for (let f = 0; f < F; f++) x += P[pu + f] * (Q[qi + f] - Q[qj + f]);
        // why: sigmoid(−x) without overflow for large |x|.
        const g = x > 0 ? Math.exp(-x) / (1 + Math.exp(-x)) : 1 / (1 + Math.exp(x));
        bias[i] += lr * (g - regBias * bias[i]);
        bias[j] += lr * (-g - regBias * bias[j]);
        for (let f = 0; f < F; f++) {
          const p = P[pu + f];
          const a = Q[qi + f];
          const b = Q[qj + f];
          P[pu + f] += lr * (g * (a - b) - reg * p);
          Q[qi + f] += lr * (g * p - reg * a);
          Q[qj + f] += lr * (-g * p - reg * b);
        }
      }
      ctx.progress(epoch + 1, epochs, 'epochs');
    }
  }

  /** Score of an item for a user (bias only for unknown users; −∞ for unknown items). */
  score(user: string, item: string): number {
    const i = this.itemIndex.get(item);
    if (i === undefined) return -Infinity;
    const u = this.userIndex.get(user);
    const F = this.opts.factors;
    let x = this.bias[i];
    if (u !== undefined) for (let f = 0; f < F; f++) x += this.P[u * F + f] * this.Q[i * F + f];
    return x;
  }

  protected scores(c: RankCase): ArrayLike<number> {
    return c.candidates.map((id) => this.score(c.user, id));
  }

  scoreAll(c: RankCase, out: Float32Array): void {
    const slots = (this.slotIdx ??= this.slots(this.itemIndex));
    const u = this.userIndex.get(c.user);
    const F = this.opts.factors;
    const { P, Q, bias } = this;
    for (let k = 0; k < slots.length; k++) {
      const i = slots[k];
      if (i < 0) continue;
      let x = bias[i];
      if (u !== undefined) for (let f = 0; f < F; f++) x += P[u * F + f] * Q[i * F + f];
      out[k] = x;
    }
  }
}

// ---------------------------------------------------------------------------------------
// EASE

export interface EaseOptions {
  lambda?: number;
  /** Refuse catalogs larger than this (the Gram matrix is dense, n² doubles). Default 12 000. */
  maxItems?: number;
  /**
   * Restricted EASE: only the `topItems` most frequent items of the histories get a column and
   * a row (the dense inverse costs n³); every other item scores −∞ (never recommended) and is
   * ignored in histories. Default: no restriction.
   */
  topItems?: number;
}

/**
 * In-place inverse of a symmetric positive-definite n×n row-major matrix by Gauss–Jordan
 * elimination without pivoting (safe for SPD: every pivot is positive). n³ multiply-adds.
 */
export function invertSpdInPlace(A: Float64Array, n: number, onRow?: (k: number) => void): void {
  for (let k = 0; k < n; k++) {
    const rk = k * n;
    const pivot = A[rk + k];
    if (!(pivot > 0)) throw new Error(`invertSpdInPlace: pivot ${k} is ${pivot}; matrix not positive definite`);
    const inv = 1 / pivot;
    A[rk + k] = 1;
    for (let j = 0; j < n; j++) A[rk + j] *= inv;
    for (let i = 0; i < n; i++) {
      if (i === k) continue;
      const ri = i * n;
      const f = A[ri + k];
      if (f === 0) continue;
      A[ri + k] = 0;
      for (let j = 0; j < n; j++) A[ri + j] -= f * A[rk + j];
    }
    onRow?.(k);
  }
}

/**
 * EASE (Steck 2019): B = I − P·diag(1/diag(P)), P = (XᵀX + λI)⁻¹, diag(B) = 0, with X the
 * binary user × item matrix of `ctx.histories`; score(u, c) = Σ_{h ∈ history(u)} B[h, c].
 * λ = 500. Items never seen in the histories score 0.
 */
export class EaseMethod extends ScoringMethod {
  readonly name = 'ease';
  private readonly lambda: number;
  private readonly maxItems: number;
  private index = new Map<string, number>();
  private P = new Float64Array(0);
  private n = 0;
  private slotIdx?: Int32Array;

  constructor(opts: EaseOptions = {}) {
    super();
    this.lambda = opts.lambda ?? 500;
    this.maxItems = opts.maxItems ?? 12000;
    this.topItems = opts.topItems;
    if (this.topItems !== undefined && !(Number.isInteger(this.topItems) && this.topItems >= 1))
      throw new RangeError(`ease.topItems must be a positive integer, got ${this.topItems}`);
  }

  private readonly topItems?: number;
  /** Items with a column (after any restriction) / items in the histories. */
  private kept = 0;
  private seen = 0;

  protected fit(ctx: MethodContext): void {
    const index = this.index;
    index.clear();
    const rows: Int32Array[] = [];
    let allowed: Set<string> | undefined;
    const freq = new Map<string, number>();
    for (const seq of ctx.histories.values()) for (const x of seq) freq.set(x.item, (freq.get(x.item) ?? 0) + 1);
    this.seen = freq.size;
    if (this.topItems !== undefined && freq.size > this.topItems) {
      allowed = new Set(
        [...freq]
          .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
          .slice(0, this.topItems)
          .map(([id]) => id),
      );
    }
    for (const seq of ctx.histories.values()) {
      const set = new Set<number>();
      for (const x of seq) {
        if (allowed && !allowed.has(x.item)) continue;
        let i = index.get(x.item);
        if (i === undefined) index.set(x.item, (i = index.size));
        set.add(i);
      }
      if (set.size) rows.push(Int32Array.from(set));
    }
    this.kept = index.size;
    const n = (this.n = index.size);
    if (n > this.maxItems) throw new Error(`ease: ${n} items exceed maxItems ${this.maxItems} (dense n×n inverse)`);
    const G = (this.P = new Float64Array(n * n));
    for (const r of rows) {
      for (let a = 0; a < r.length; a++) {
        const ra = r[a] * n;
        for (let b = 0; b < r.length; b++) G[ra + r[b]] += 1;
      }
    }
    for (let i = 0; i < n; i++) G[i * n + i] += this.lambda;
    invertSpdInPlace(G, n, (k) => {
      if (k % 32 === 31 || k === n - 1) ctx.progress(k + 1, n, 'inverse');
    });
  }

  protected scores(c: RankCase): ArrayLike<number> {
    const { n, P } = this;
    const hist = new Set<number>();
    for (const x of c.history) {
      const i = this.index.get(x.item);
      if (i !== undefined) hist.add(i);
    }
    return c.candidates.map((id) => {
      const ci = this.index.get(id);
      if (ci === undefined) return 0;
      const d = P[ci * n + ci];
      let s = 0;
      // why: B[h, c] = −P[h, c] / P[c, c] for h ≠ c; P is symmetric, so read row c.
      for (const h of hist) if (h !== ci) s -= P[ci * n + h] / d;
      return s;
    });
  }

  scoreAll(c: RankCase, out: Float32Array): void {
    const { n, P } = this;
    const slots = (this.slotIdx ??= this.slots(this.index));
    const hist = new Set<number>();
    for (const x of c.history) {
      const i = this.index.get(x.item);
      if (i !== undefined) hist.add(i);
    }
    const hs = Int32Array.from(hist);
    const outside = this.kept < this.seen ? -Infinity : 0;
    for (let k = 0; k < slots.length; k++) {
      const ci = slots[k];
      if (ci < 0) {
        out[k] = outside;
        continue;
      }
      const row = ci * n;
      let s = 0;
      for (let t = 0; t < hs.length; t++) if (hs[t] !== ci) s -= P[row + hs[t]];
      out[k] = s / P[row + ci];
    }
  }

  extras(): Record<string, unknown> {
    return this.kept < this.seen ? { easeItems: `${this.kept} most frequent of ${this.seen} (restricted)` } : {};
  }
}
