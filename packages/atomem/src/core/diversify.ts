/**
 * Diversification of the top of a ranking by interest coverage — proportional representation
 * of the shopper's interests in the first row (PM-2, Dang & Croft, SIGIR 2012), with the
 * shopper's own positive memories as the aspects: a multi-interest shopper's first row covers
 * each strong interest instead of filling up with the strongest one. Pure.
 *
 * Aspects are weighted by salience × log(1 + evidence) (the `profile` signal's weights). A
 * candidate covers a memory when its cosine reaches `tau` — exactly the memories that would be
 * retrieved for it, i.e. that support its card. Each slot goes to the aspect with the highest
 * Sainte-Laguë quotient `weight / (2 · seats + 1)`; the slot then takes the candidate maximising
 *
 *     (1 − λ) · relevance(c) + λ · cover(c, that aspect)
 *
 * (relevance = the ranker's score min-max scaled over the pool), and the aspects it covers gain
 * a seat. So an interest with a third of the weight gets about a third of the first row; one too
 * weak for a seat among the first `depth` gets none. λ = 0 is the ranker's order.
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
  // the pool: the top of the ranking plus each aspect's best-ranked covering candidates
  const poolSize = Math.min(n, Math.max(depth, p.pool ?? Math.max(3 * depth, 30)));
  const covers = (i: number, a: number) => dot(ranked[i].vector, asp[a].vector) >= p.tau;
  const pool: number[] = identity.slice(0, poolSize);
  for (let a = 0; a < asp.length; a++) {
    let found = 0;
    for (let i = poolSize; i < n && found < depth; i++) {
      if (covers(i, a)) {
        if (!pool.includes(i)) pool.push(i);
        found++;
      }
    }
  }
  pool.sort((x, y) => x - y);
  const cover = new Map<number, Uint8Array>();
  let lo = Infinity;
  let hi = -Infinity;
  for (const i of pool) {
    const c = new Uint8Array(asp.length);
    for (let a = 0; a < asp.length; a++) c[a] = covers(i, a) ? 1 : 0;
    cover.set(i, c);
    lo = Math.min(lo, ranked[i].score);
    hi = Math.max(hi, ranked[i].score);
  }
  const rel = (i: number) => (hi > lo ? (ranked[i].score - lo) / (hi - lo) : 1);
  const seats = new Float64Array(asp.length);
  const taken = new Set<number>();
  const order: number[] = [];
  for (let slot = 0; slot < depth; slot++) {
    // the aspect whose turn it is (Sainte-Laguë), among those some remaining candidate covers
    let turn = -1;
    let q = -Infinity;
    for (let a = 0; a < asp.length; a++) {
      const qa = asp[a].weight / (2 * seats[a] + 1);
      if (qa > q && pool.some((i) => !taken.has(i) && cover.get(i)![a])) (q = qa), (turn = a);
    }
    let best = -1;
    let bestV = -Infinity;
    for (const i of pool) {
      if (taken.has(i)) continue;
      const v = (1 - p.lambda) * rel(i) + (turn >= 0 ? p.lambda * cover.get(i)![turn] : 0);
      if (v > bestV + 1e-12) (bestV = v), (best = i);
    }
    taken.add(best);
    order.push(best);
    const c = cover.get(best)!;
    for (let a = 0; a < asp.length; a++) if (c[a]) seats[a] += 1;
  }
  for (let i = 0; i < n; i++) if (!taken.has(i)) order.push(i);
  return order;
}
