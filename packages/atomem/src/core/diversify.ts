/**
 * Diversification of the top of a ranking by interest coverage (xQuAD, Santos et al. 2010, with
 * the shopper's own memories as the aspects): a multi-interest shopper's first row covers each
 * strong interest instead of filling up with the strongest one. Pure.
 *
 * Aspects are the positive memories, weighted by salience × log(1 + evidence) (the `profile`
 * signal's weights). A candidate covers a memory when its cosine reaches `tau` — exactly the
 * memories that would be retrieved for it, i.e. that support its card (cover is 0 or 1).
 * Greedily, each next slot takes the candidate maximising
 *
 *     (1 − λ) · relevance(c) + λ · Σ_m p(m) · cover(c, m) · Π_{s already placed} (1 − cover(s, m))
 *
 * with relevance the ranker's score min-max scaled over the pool. λ = 0 is the ranker's order.
 */
import { dot } from './vector.js';

/** One ranked candidate as diversification sees it. */
export interface DiversifyCandidate {
  score: number;
  vector: Float32Array;
}

/** One interest (a positive memory). */
export interface Aspect {
  vector: Float32Array;
  /** Non-negative weight (salience × log(1 + evidence)); normalised here. */
  weight: number;
}

/** Options of {@link diversify}. */
export interface DiversifyParams {
  /** λ in [0, 1]: 0 = the ranker's order, 1 = coverage only. */
  lambda: number;
  /** Positions re-ordered (the first row); the rest keep the ranker's order. */
  depth: number;
  /** Coverage threshold: a candidate covers an aspect at cosine ≥ tau (STEAM's retrieval threshold). */
  tau: number;
  /** Candidates considered for the top `depth` (default max(3 · depth, 30)). */
  pool?: number;
}

/**
 * New order of `ranked` (indices into it; `ranked` is best first). With fewer than two aspects,
 * λ = 0 or depth < 2, the identity.
 */
export function diversify(ranked: readonly DiversifyCandidate[], aspects: readonly Aspect[], p: DiversifyParams): number[] {
  const n = ranked.length;
  const identity = Array.from({ length: n }, (_, i) => i);
  const asp = aspects.filter((a) => a.weight > 0);
  const depth = Math.min(p.depth, n);
  if (asp.length < 2 || !(p.lambda > 0) || depth < 2) return identity;
  const total = asp.reduce((a, x) => a + x.weight, 0);
  const weight = asp.map((a) => a.weight / total);
  const poolSize = Math.min(n, Math.max(depth, p.pool ?? Math.max(3 * depth, 30)));
  const cover: Float64Array[] = [];
  let lo = Infinity;
  let hi = -Infinity;
  for (let i = 0; i < poolSize; i++) {
    const c = new Float64Array(asp.length);
    for (let a = 0; a < asp.length; a++) c[a] = dot(ranked[i].vector, asp[a].vector) >= p.tau ? 1 : 0;
    cover.push(c);
    lo = Math.min(lo, ranked[i].score);
    hi = Math.max(hi, ranked[i].score);
  }
  const rel = (i: number) => (hi > lo ? (ranked[i].score - lo) / (hi - lo) : 1);
  const residual = new Float64Array(asp.length).fill(1); // Π (1 − cover) over placed items
  const taken = new Uint8Array(poolSize);
  const order: number[] = [];
  for (let slot = 0; slot < depth; slot++) {
    let best = -1;
    let bestV = -Infinity;
    for (let i = 0; i < poolSize; i++) {
      if (taken[i]) continue;
      let div = 0;
      for (let a = 0; a < asp.length; a++) div += weight[a] * cover[i][a] * residual[a];
      const v = (1 - p.lambda) * rel(i) + p.lambda * div;
      if (v > bestV + 1e-12) {
        bestV = v;
        best = i;
      }
    }
    taken[best] = 1;
    order.push(best);
    for (let a = 0; a < asp.length; a++) residual[a] *= 1 - cover[best][a];
  }
  for (let i = 0; i < n; i++) if (i >= poolSize || !taken[i]) order.push(i);
  return order;
}
