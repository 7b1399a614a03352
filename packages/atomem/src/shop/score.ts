/**
 * On-device ranking with a published {@link ShopModel}: per-candidate signals computed from the
 * shopper's own history only (item ids, times, actions; nothing else is read and nothing leaves
 * the function), and a combiner that standardises each signal within the candidate list and
 * weights it (the rule of `core/rank.ts`). Pure: no Node or DOM APIs, no dependencies; runs in a
 * Web Worker.
 *
 * Signals (all larger = better):
 * - `ease`, `knn`: Σ over the distinct history items h of action(h) · list[h → c];
 * - `easeRecent`, `knnRecent`: the same over the last `recent` (5) distinct items, the r-th most
 *   recent weighted `recentDecay^r` (the recent-versus-long-term contrast);
 * - `markov`: P(c | last item) from the transition list (the last `markovItems` items, decayed);
 * - `pop`: log(1 + popularity); `trend`: log(1 + users in the `window` buckets before now);
 * - `popRecent`: log(1 + users in the file's recent window, the last days before its log ended):
 *   what is popular this week, the same for every shopper. It is 0 for a file without it and at a
 *   ranking moment before the log ended ({@link ShopScorer.live}: replaying a past visit, the
 *   window holds that visit's future);
 * - `vec`, `vecRecent`: cosine between the candidate's collaborative vector and the action-weighted
 *   mean of the history's (all / recent) vectors; candidates or history items the file does not
 *   know use `contentVector(id)` through the file's content map, when given.
 * Extra signals computed elsewhere on the device (e.g. a sequence model) join through `extra`
 * and get a weight by name like any other.
 */
import { ACTION_WEIGHTS, type Action } from '../core/types.js';
import type { ContentMap, NeighbourLists, ShopModel } from '../protocol/shop-model-v1.js';

/** One event of the shopper's own history. */
export interface DeviceEvent {
  item: string;
  /** Epoch ms. */
  at: number;
  /** Default `click`. */
  action?: Action;
}

/** Names of the built-in signals, in table order. */
export const SIGNALS = ['ease', 'easeRecent', 'knn', 'knnRecent', 'markov', 'pop', 'trend', 'popRecent', 'vec', 'vecRecent'] as const;
export type SignalName = (typeof SIGNALS)[number];

/** The signals that come from interaction data only (no vector): unknown for an item without data. */
const DATA_SIGNALS = ['ease', 'easeRecent', 'knn', 'knnRecent', 'markov', 'pop', 'trend', 'popRecent'] as const;

/**
 * Default combiner weights: the ε = ∞ fit of `npx tsx packages/bench/src/tune-shop.ts --data <ml-100k>`
 * (ML-100K validation cases, seed 2026, default training options, listwise softmax regression on
 * the z-scored signals, largest weight 1; combined NDCG@10 0.834 in-sample, 0.831 by 5-fold CV).
 * Negative weights are corrections among correlated signals (`pop` and `vec` against `vecRecent`,
 * which leans popular). `trend` has no weight: it adds nothing on ML-100K (published on request).
 */
export const DEFAULT_WEIGHTS: Readonly<Record<string, number>> = {
  ease: 0.575,
  easeRecent: 0.075,
  knn: 0.223,
  knnRecent: 0.12,
  markov: 0.176,
  pop: -0.492,
  vec: -0.328,
  vecRecent: 1,
};

/**
 * Weights for DP files, by ε (the trainer writes the set of the largest ε here not above the
 * file's, the ε = 1 set below 1): `tune-shop.ts --epsilon 8,4,1 --draws 5`, fitted on 5 pooled
 * noise draws. With noisy pairwise statistics, popularity and Markov carry more of the ranking.
 */
export const DP_WEIGHTS: Readonly<Record<number, Readonly<Record<string, number>>>> = {
  8: { ease: 0.057, easeRecent: -0.002, knn: -0.002, knnRecent: 0.273, markov: 0.767, pop: 1, vec: 0.104, vecRecent: 0.697 },
  4: { ease: 0.257, easeRecent: 0.119, knn: -0.127, knnRecent: 0.204, markov: 0.572, pop: 1, vec: 0.096, vecRecent: 0.643 },
  1: { ease: 0.473, easeRecent: 0.516, knn: 0.256, knnRecent: -0.027, markov: 0.625, pop: 1, vec: 0.44, vecRecent: 0.614 },
};

/** The shipped weights for a file of privacy budget ε (∞: {@link DEFAULT_WEIGHTS}). */
export function weightsForEpsilon(epsilon: number): Readonly<Record<string, number>> {
  if (epsilon === Infinity) return DEFAULT_WEIGHTS;
  const keys = Object.keys(DP_WEIGHTS)
    .map(Number)
    .sort((a, b) => a - b);
  const key = keys.filter((k) => k <= epsilon).pop() ?? keys[0];
  return DP_WEIGHTS[key];
}

export interface ScorerOptions {
  /** Distinct recent items of the `*Recent` signals (default 5). */
  recent?: number;
  /** Weight ratio between consecutive recent items (default 0.7). */
  recentDecay?: number;
  /** Last items the Markov signal starts from (default 1). */
  markovItems?: number;
  /** Decay between them (default 0.5). */
  markovDecay?: number;
  /** Trend buckets summed before the current one (default: the file's window). */
  trendWindow?: number;
  /**
   * Raw content vector (the embedder of `model.contentMap`) of an item the file does not know, for
   * its collaborative vector through the content map.
   */
  contentVector?: (id: string) => ArrayLike<number> | undefined;
  /**
   * Candidates without data (unknown to the file; or, in a file without DP, a content-only vector
   * and no popularity) get
   * every data-derived signal (`ease`…`trend`) imputed from their `vecRecent` score, by a least-
   * squares line through the warm candidates of the same list (default true). Why: zeros rank
   * every new item last, and the list mean ranks it in the middle whatever its vector says.
   */
  neutralCold?: boolean;
}

export interface ScoreOptions {
  /** Signal → weight (default: the file's weights, else {@link DEFAULT_WEIGHTS}). Missing names weigh 0. */
  weights?: Readonly<Record<string, number>>;
  /** More per-candidate signals (same order as `candidates`). */
  extra?: Readonly<Record<string, ArrayLike<number>>>;
  /** The device's clock (epoch ms) for `trend`; default the latest history time. */
  now?: number;
}

/** A candidate with its combined score and the signals behind it. */
export interface ScoredCandidate {
  id: string;
  score: number;
  signals: Record<string, number>;
}

/**
 * Apply a content map: bias + normalise(raw − mean) · matrix, the ridge estimate of the item's
 * collaborative vector. Not normalised on purpose: it estimates E[v | content] of a unit vector v,
 * so its dot product with a shopper's direction is the expected cosine, smaller when the content
 * says little (normalising would give every new item the common direction's high cosine).
 */
export function mapContent(map: ContentMap, raw: ArrayLike<number>, dim: number): Float32Array {
  if (raw.length !== map.inDim) throw new RangeError(`content vector has ${raw.length} dimensions, the map expects ${map.inDim}`);
  const x = new Float64Array(map.inDim);
  let nrm = 0;
  for (let d = 0; d < map.inDim; d++) {
    x[d] = raw[d] - map.mean[d];
    nrm += x[d] * x[d];
  }
  nrm = Math.sqrt(nrm) || 1;
  const out = Float32Array.from(map.bias);
  for (let d = 0; d < map.inDim; d++) {
    const a = x[d] / nrm;
    if (a === 0) continue;
    for (let c = 0; c < dim; c++) out[c] += a * map.matrix[d * dim + c];
  }
  return out;
}

/**
 * Standardise each signal within the list (mean 0, population sd 1; a signal constant up to
 * rounding contributes nothing) and sum with the weights. Signals without a weight are ignored.
 */
export function combine(signals: Readonly<Record<string, ArrayLike<number>>>, weights: Readonly<Record<string, number>>, length: number): Float64Array {
  const out = new Float64Array(length);
  for (const [name, w] of Object.entries(weights)) {
    const s = signals[name];
    if (!w || !s) continue;
    if (s.length !== length) throw new RangeError(`signal ${name} has ${s.length} values for ${length} candidates`);
    let mean = 0;
    let maxAbs = 0;
    for (let i = 0; i < length; i++) {
      mean += s[i];
      maxAbs = Math.max(maxAbs, Math.abs(s[i]));
    }
    mean /= length;
    let v = 0;
    for (let i = 0; i < length; i++) v += (s[i] - mean) ** 2;
    const sd = Math.sqrt(v / length);
    if (!(sd > 1e-9 * maxAbs) || !Number.isFinite(sd)) continue;
    for (let i = 0; i < length; i++) out[i] += (w * (s[i] - mean)) / sd;
  }
  return out;
}

/**
 * For candidates marked `cold`, replace each data-derived signal by a + b·vecRecent, the line
 * fitted on the warm candidates of the list (their mean when vecRecent does not vary).
 */
function imputeCold(out: Record<SignalName, Float64Array>, cold: readonly boolean[]): void {
  const warm: number[] = [];
  cold.forEach((c, k) => {
    if (!c) warm.push(k);
  });
  if (warm.length === 0 || warm.length === cold.length) return;
  const x = out.vecRecent;
  let mx = 0;
  for (const k of warm) mx += x[k] / warm.length;
  let sxx = 0;
  for (const k of warm) sxx += (x[k] - mx) ** 2;
  for (const name of DATA_SIGNALS) {
    const y = out[name];
    let my = 0;
    for (const k of warm) my += y[k] / warm.length;
    let sxy = 0;
    for (const k of warm) sxy += (x[k] - mx) * (y[k] - my);
    const b = sxx > 0 ? sxy / sxx : 0;
    for (let k = 0; k < y.length; k++) if (cold[k]) y[k] = my + b * (x[k] - mx);
  }
}

/** Scores candidates for one shopper from a model; build once per model, call per recommendation. */
export class ShopScorer {
  private readonly index = new Map<string, number>();
  private readonly slot: Int32Array;
  /** log(1 + recent popularity) per item (all 0 without `model.popRecent`). */
  private readonly recentPop: Float32Array;
  private readonly opts: Required<Omit<ScorerOptions, 'contentVector' | 'trendWindow'>> & Pick<ScorerOptions, 'contentVector' | 'trendWindow'>;

  constructor(
    readonly model: ShopModel,
    opts: ScorerOptions = {},
  ) {
    model.items.forEach((id, i) => this.index.set(id, i));
    this.slot = new Int32Array(model.items.length).fill(-1);
    this.recentPop = new Float32Array(model.items.length);
    const r = model.popRecent;
    if (r) for (let k = 0; k < r.items.length; k++) this.recentPop[r.items[k]] = Math.log1p(Math.max(0, r.counts[k]));
    this.opts = { recent: 5, recentDecay: 0.7, markovItems: 1, markovDecay: 0.5, neutralCold: true, ...opts };
  }

  /**
   * Whether `now` (epoch ms) is a live moment for this file: it has a recent window (`popRecent`)
   * and `now` is at or after the end of its log (the window's end). A shop ranks after its file
   * was published, so every visit is live; a moment inside the file's log (an offline replay of a
   * past visit, whose future the file has seen) is not: there `popRecent` is 0 and the agent ranks
   * with `shopWeights`.
   */
  live(now: number): boolean {
    const r = this.model.popRecent;
    return r !== undefined && Number.isFinite(now) && now >= r.end;
  }

  /** Position of an item in the file (undefined: the file does not know it). */
  indexOf(id: string): number | undefined {
    return this.index.get(id);
  }

  /** Distinct history items, most recent first, with the action weight of their latest event. */
  private distinct(history: readonly DeviceEvent[]): Array<{ id: string; w: number }> {
    // why: the device's order by time; equal times keep the order given (a stable sort).
    const ordered = history.map((e, k) => ({ e, k })).sort((a, b) => a.e.at - b.e.at || a.k - b.k);
    const seen = new Set<string>();
    const out: Array<{ id: string; w: number }> = [];
    for (let t = ordered.length - 1; t >= 0; t--) {
      const e = ordered[t].e;
      if (seen.has(e.item)) continue;
      seen.add(e.item);
      out.push({ id: e.item, w: ACTION_WEIGHTS[e.action ?? 'click'] ?? 0 });
    }
    return out;
  }

  /** Σ_h weight(h) · list[h → c] for each candidate. */
  private listScores(list: NeighbourLists | undefined, hist: Array<{ i: number; w: number }>, cand: readonly number[]): Float64Array {
    const out = new Float64Array(cand.length);
    if (!list) return out;
    const slot = this.slot;
    cand.forEach((c, k) => {
      if (c >= 0) slot[c] = k;
    });
    for (const { i, w } of hist) {
      if (w === 0) continue;
      for (let p = list.offsets[i]; p < list.offsets[i + 1]; p++) {
        const k = slot[list.targets[p]];
        if (k >= 0) out[k] += w * list.weights[p];
      }
    }
    for (const c of cand) if (c >= 0) slot[c] = -1;
    // why: a candidate already in the history gets no self-vote (lists hold no diagonal), as in EASE.
    return out;
  }

  private vectorOf(id: string): Float32Array | undefined {
    const v = this.model.vectors;
    if (!v) return undefined;
    const i = this.index.get(id);
    if (i !== undefined) {
      const row = v.values.subarray(i * v.dim, (i + 1) * v.dim);
      for (let d = 0; d < v.dim; d++) if (row[d] !== 0) return row;
    }
    const raw = this.opts.contentVector?.(id);
    if (raw && this.model.contentMap) return mapContent(this.model.contentMap, raw, v.dim);
    return undefined;
  }

  private vectorScores(items: Array<{ id: string; w: number }>, candidates: readonly string[]): Float64Array {
    const out = new Float64Array(candidates.length);
    const v = this.model.vectors;
    if (!v || items.length === 0) return out;
    const u = new Float64Array(v.dim);
    for (const { id, w } of items) {
      const x = this.vectorOf(id);
      if (!x || w === 0) continue;
      for (let d = 0; d < v.dim; d++) u[d] += w * x[d];
    }
    let nu = 0;
    for (let d = 0; d < v.dim; d++) nu += u[d] * u[d];
    nu = Math.sqrt(nu);
    if (nu === 0) return out;
    candidates.forEach((id, k) => {
      const x = this.vectorOf(id);
      if (!x) return;
      let s = 0;
      for (let d = 0; d < v.dim; d++) s += u[d] * x[d];
      out[k] = s / nu;
    });
    return out;
  }

  private trendScores(cand: readonly number[], now: number): Float64Array {
    const out = new Float64Array(cand.length);
    const t = this.model.trend;
    if (!t || !Number.isFinite(now)) return out;
    const rows = t.counts.offsets.length - 1;
    // why: the `window` most recent buckets strictly before the current one, so a count never
    // includes the current bucket (a file published yesterday has no later data either).
    const current = Math.floor(now / t.bucketMs) - t.firstBucket;
    const end = Math.min(current, rows);
    const startRow = Math.max(0, end - (this.opts.trendWindow ?? t.window));
    const slot = this.slot;
    cand.forEach((c, k) => {
      if (c >= 0) slot[c] = k;
    });
    for (let b = startRow; b < end; b++) {
      for (let p = t.counts.offsets[b]; p < t.counts.offsets[b + 1]; p++) {
        const k = slot[t.counts.targets[p]];
        if (k >= 0) out[k] += t.counts.weights[p];
      }
    }
    for (const c of cand) if (c >= 0) slot[c] = -1;
    for (let k = 0; k < out.length; k++) out[k] = Math.log1p(Math.max(0, out[k]));
    return out;
  }

  /**
   * For explanations: per signal, the history item that contributed most to each candidate
   * (same order; undefined: none did) — the largest single `w · list[h → c]` term for the list
   * signals (`ease`, `knn`, `markov` and their recent variants), the history item whose vector is
   * closest for `vec` / `vecRecent`. `pop`, `trend` and `popRecent` have no source item.
   */
  sources(history: readonly DeviceEvent[], candidates: readonly string[]): Record<string, Array<string | undefined>> {
    const o = this.opts;
    const all = this.distinct(history);
    const recentItems = all.slice(0, o.recent).map((x, r) => ({ id: x.id, w: x.w * o.recentDecay ** r }));
    const markovFrom = all.slice(0, o.markovItems).map((x, r) => ({ id: x.id, w: x.w * o.markovDecay ** r }));
    const cand = candidates.map((id) => this.index.get(id) ?? -1);
    const { lists } = this.model;
    const best = (list: NeighbourLists | undefined, hist: Array<{ id: string; w: number }>): Array<string | undefined> => {
      const out: Array<string | undefined> = new Array(cand.length).fill(undefined);
      if (!list) return out;
      const top = new Float64Array(cand.length).fill(0);
      const slot = this.slot;
      cand.forEach((c, k) => {
        if (c >= 0) slot[c] = k;
      });
      for (const { id, w } of hist) {
        const i = this.index.get(id);
        if (i === undefined || w <= 0) continue;
        for (let p = list.offsets[i]; p < list.offsets[i + 1]; p++) {
          const k = slot[list.targets[p]];
          if (k >= 0 && w * list.weights[p] > top[k]) {
            top[k] = w * list.weights[p];
            out[k] = id;
          }
        }
      }
      for (const c of cand) if (c >= 0) slot[c] = -1;
      return out;
    };
    const nearest = (hist: Array<{ id: string; w: number }>): Array<string | undefined> => {
      const vs = hist
        .filter((h) => h.w > 0)
        .map((h) => ({ id: h.id, v: this.vectorOf(h.id) }))
        .filter((h) => h.v);
      return candidates.map((id) => {
        const x = this.vectorOf(id);
        if (!x) return undefined;
        let bestId: string | undefined;
        let bestS = 0;
        for (const h of vs) {
          if (h.id === id) continue;
          let s = 0;
          for (let d = 0; d < x.length; d++) s += x[d] * h.v![d];
          if (s > bestS) (bestS = s), (bestId = h.id);
        }
        return bestId;
      });
    };
    return {
      ease: best(lists.ease, all),
      easeRecent: best(lists.ease, recentItems),
      knn: best(lists.knn, all),
      knnRecent: best(lists.knn, recentItems),
      markov: best(lists.markov, markovFrom),
      vec: nearest(all),
      vecRecent: nearest(recentItems),
    };
  }

  /** Every built-in signal for the candidates (same order), from `history` only. */
  signals(history: readonly DeviceEvent[], candidates: readonly string[], now?: number): Record<SignalName, Float64Array> {
    const o = this.opts;
    const all = this.distinct(history);
    const known = all.map((x) => ({ i: this.index.get(x.id) ?? -1, w: x.w })).filter((x) => x.i >= 0);
    const recentItems = all.slice(0, o.recent).map((x, r) => ({ id: x.id, w: x.w * o.recentDecay ** r }));
    const recent = recentItems.map((x) => ({ i: this.index.get(x.id) ?? -1, w: x.w })).filter((x) => x.i >= 0);
    const markovFrom = all
      .slice(0, o.markovItems)
      .map((x, r) => ({ i: this.index.get(x.id) ?? -1, w: x.w * o.markovDecay ** r }))
      .filter((x) => x.i >= 0);
    const cand = candidates.map((id) => this.index.get(id) ?? -1);
    const { lists, popularity } = this.model;
    let latest = -Infinity;
    for (const e of history) if (e.at > latest) latest = e.at;
    const out: Record<SignalName, Float64Array> = {
      ease: this.listScores(lists.ease, known, cand),
      easeRecent: this.listScores(lists.ease, recent, cand),
      knn: this.listScores(lists.knn, known, cand),
      knnRecent: this.listScores(lists.knn, recent, cand),
      markov: this.listScores(lists.markov, markovFrom, cand),
      pop: Float64Array.from(cand, (c) => (c >= 0 ? Math.log1p(Math.max(0, popularity[c])) : 0)),
      trend: this.trendScores(cand, now ?? latest),
      popRecent: this.live(now ?? latest) ? Float64Array.from(cand, (c) => (c >= 0 ? this.recentPop[c] : 0)) : new Float64Array(cand.length),
      vec: this.vectorScores(all, candidates),
      vecRecent: this.vectorScores(recentItems, candidates),
    };
    // why: "no data" = unknown to the file, or a content-only vector and no popularity. A DP file
    // cannot say which items have no data (that is private): there only unknown items count.
    const dp = this.model.privacy !== undefined;
    if (o.neutralCold)
      imputeCold(
        out,
        cand.map((c) => c < 0 || (!dp && this.model.vectors?.cold[c] === 1 && !(popularity[c] > 0))),
      );
    return out;
  }

  /** Combined scores (same order as `candidates`). */
  score(history: readonly DeviceEvent[], candidates: readonly string[], opts: ScoreOptions = {}): Float64Array {
    const s: Record<string, ArrayLike<number>> = { ...this.signals(history, candidates, opts.now), ...opts.extra };
    return combine(s, opts.weights ?? this.model.weights ?? DEFAULT_WEIGHTS, candidates.length);
  }

  /** Candidates best first, with scores and signals (ties keep the input order). */
  rank(history: readonly DeviceEvent[], candidates: readonly string[], opts: ScoreOptions = {}): ScoredCandidate[] {
    const sig: Record<string, ArrayLike<number>> = { ...this.signals(history, candidates, opts.now), ...opts.extra };
    const score = combine(sig, opts.weights ?? this.model.weights ?? DEFAULT_WEIGHTS, candidates.length);
    return candidates
      .map((id, k) => ({ id, score: score[k], signals: Object.fromEntries(Object.entries(sig).map(([n, v]) => [n, v[k]])), k }))
      .sort((a, b) => b.score - a.score || a.k - b.k)
      .map(({ id, score: sc, signals }) => ({ id, score: sc, signals }));
  }
}
