/**
 * Metrics of protocol `loo` (/EVAL.md step 8 and 10). Pure functions.
 *
 * One relevant item per case, ranks 1-based: NDCG@K = 1 / log2(rank + 1) if rank ≤ K else 0;
 * HR@K = 1 if rank ≤ K; MRR = 1 / rank. Per user, then the mean over users, with a seeded
 * percentile-bootstrap interval over users.
 */
import { Rng } from './rng.js';

/** 1-based rank of `target` in `ranking`; throws if it is absent. */
export function rankOf(ranking: readonly string[], target: string): number {
  const i = ranking.indexOf(target);
  if (i < 0) throw new Error(`rankOf: ${JSON.stringify(target)} is not in the ranking`);
  return i + 1;
}

/** NDCG@k with a single relevant item at 1-based `rank`. */
export function ndcgAt(rank: number, k: number): number {
  return rank >= 1 && rank <= k ? 1 / Math.log2(rank + 1) : 0;
}

/** Hit rate@k: 1 if `rank` ≤ k. */
export function hitAt(rank: number, k: number): number {
  return rank >= 1 && rank <= k ? 1 : 0;
}

/** Reciprocal rank. */
export function reciprocalRank(rank: number): number {
  return rank >= 1 ? 1 / rank : 0;
}

/** The metrics reported per method (means over users, or one user's values). */
export interface RankMetrics {
  ndcg1: number;
  ndcg5: number;
  ndcg10: number;
  hr1: number;
  hr5: number;
  hr10: number;
  mrr: number;
}

export const METRIC_KEYS: readonly (keyof RankMetrics)[] = ['ndcg1', 'ndcg5', 'ndcg10', 'hr1', 'hr5', 'hr10', 'mrr'];

/** One user's metrics from the rank of their positive. */
export function caseMetrics(rank: number): RankMetrics {
  return {
    ndcg1: ndcgAt(rank, 1),
    ndcg5: ndcgAt(rank, 5),
    ndcg10: ndcgAt(rank, 10),
    hr1: hitAt(rank, 1),
    hr5: hitAt(rank, 5),
    hr10: hitAt(rank, 10),
    mrr: reciprocalRank(rank),
  };
}

/** Arithmetic mean (NaN for an empty list). */
export function mean(values: ArrayLike<number>): number {
  if (values.length === 0) return NaN;
  let s = 0;
  for (let i = 0; i < values.length; i++) s += values[i];
  return s / values.length;
}

/** Mean of each metric over the users' ranks. */
export function meanMetrics(ranks: readonly number[]): RankMetrics {
  const per = ranks.map(caseMetrics);
  const out = {} as RankMetrics;
  for (const k of METRIC_KEYS) out[k] = mean(per.map((m) => m[k]));
  return out;
}

/** Quantile with linear interpolation between order statistics (R type 7) of a sorted array. */
function quantileSorted(sorted: Float64Array, q: number): number {
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

export interface BootstrapOptions {
  /** Seed of the resampling stream (`Rng.derive(seed, 'bootstrap')`). Same seed → same interval. */
  seed: number;
  /** Default 1000. */
  resamples?: number;
  /** Default 0.95. */
  level?: number;
}

/**
 * Percentile bootstrap interval of the mean: resample users with replacement `resamples`
 * times, take the (1 − level)/2 and (1 + level)/2 quantiles of the resampled means.
 * With equal seeds and equal n, every method gets the same resamples (paired intervals).
 */
export function bootstrapCI(values: ArrayLike<number>, opts: BootstrapOptions): [number, number] {
  const n = values.length;
  if (n === 0) return [NaN, NaN];
  const resamples = opts.resamples ?? 1000;
  const level = opts.level ?? 0.95;
  const rng = Rng.derive(opts.seed, 'bootstrap');
  const means = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += values[rng.int(n)];
    means[r] = s / n;
  }
  means.sort();
  return [quantileSorted(means, (1 - level) / 2), quantileSorted(means, (1 + level) / 2)];
}

// ---------------------------------------------------------------------------------------
// Diversity of a top-k list (the paper reports top 5).

/** Intra-list distance: mean pairwise Euclidean (L2) distance of the items' vectors (0 for < 2 items). */
export function ild(vectors: readonly ArrayLike<number>[]): number {
  const n = vectors.length;
  if (n < 2) return 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const a = vectors[i];
      const b = vectors[j];
      if (a.length !== b.length) throw new Error(`ild: vectors of different lengths (${a.length}, ${b.length})`);
      let d = 0;
      for (let t = 0; t < a.length; t++) {
        const x = a[t] - b[t];
        d += x * x;
      }
      sum += Math.sqrt(d);
    }
  }
  return sum / ((n * (n - 1)) / 2);
}

/**
 * Shannon entropy (bits) of the category distribution of a list: every (item, category)
 * pair counts once; items without categories are ignored; 0 when no item has one.
 */
export function categoryEntropy(categories: readonly (readonly string[] | undefined)[]): number {
  const counts = new Map<string, number>();
  let total = 0;
  for (const cats of categories) {
    for (const c of new Set(cats ?? [])) {
      counts.set(c, (counts.get(c) ?? 0) + 1);
      total++;
    }
  }
  let h = 0;
  for (const n of counts.values()) {
    const p = n / total;
    h -= p * Math.log2(p);
  }
  return h === 0 ? 0 : h;
}

/** Category coverage: distinct categories in the list / `k` (EVAL.md: / 5). May exceed 1. */
export function categoryCoverage(categories: readonly (readonly string[] | undefined)[], k = 5): number {
  const distinct = new Set<string>();
  for (const cats of categories) for (const c of cats ?? []) distinct.add(c);
  return distinct.size / k;
}

// ---------------------------------------------------------------------------------------
// Simulation fidelity (paper RQ2): the agent answers yes/no per shown item.

export interface FidelityMetrics {
  precision: number;
  recall: number;
  f1: number;
  accuracy: number;
  n: number;
}

/**
 * Precision, recall, F1 (positive class = "yes") of yes/no answers against the truth
 * (`truth[i]` = item i is a held-out real interaction). Precision is 0 when the agent never
 * says yes, recall 0 when there is no positive, F1 0 when both are 0.
 */
export function fidelity(truth: readonly boolean[], answers: readonly boolean[]): FidelityMetrics {
  if (truth.length !== answers.length) throw new Error(`fidelity: ${truth.length} truths but ${answers.length} answers`);
  let tp = 0;
  let fp = 0;
  let fn = 0;
  let correct = 0;
  for (let i = 0; i < truth.length; i++) {
    if (answers[i] && truth[i]) tp++;
    else if (answers[i]) fp++;
    else if (truth[i]) fn++;
    if (answers[i] === truth[i]) correct++;
  }
  const precision = tp + fp > 0 ? tp / (tp + fp) : 0;
  const recall = tp + fn > 0 ? tp / (tp + fn) : 0;
  const f1 = precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
  return { precision, recall, f1, accuracy: truth.length ? correct / truth.length : NaN, n: truth.length };
}
