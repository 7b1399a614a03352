/**
 * Diversification of the first row by interest coverage: a multi-interest shopper's first
 * `depth` cards cover each of their strong interests instead of filling up with the strongest
 * one, at the least cost to the ranker's order. Pure.
 *
 * Interests are the shopper's positive memories, weighted by salience × log(1 + evidence) (the
 * `profile` signal's weights); a strong one holds at least `minShare` of the total weight. A
 * candidate covers a memory when its cosine reaches `tau` — exactly the memories that would be
 * retrieved for it, i.e. that support its card. The first row starts as the ranker's top
 * `depth`; for each strong interest it does not cover (strongest first), the best-ranked
 * candidate covering it replaces the lowest-ranked card of the row whose removal uncovers no
 * strong interest. The row stays in the ranker's order; so does the rest.
 */
import { dot, sumProducts, type DotCache } from './vector.js';

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
  /** Share of the interest weight that makes an interest strong, in (0, 1]; 0 = off (the ranker's order). */
  minShare: number;
  /** Size of the first row. */
  depth: number;
  /** Coverage threshold: a candidate covers an aspect at cosine ≥ tau (STEAM's retrieval threshold). */
  tau: number;
}

/**
 * New order of `ranked` (indices into it; `ranked` is best first). The identity when every
 * strong interest is already in the first row, with `minShare` 0, or `depth` < 2. `dots`: the
 * candidates' dot products with the aspects' vectors kept across calls (the same numbers).
 */
export function diversify(ranked: readonly DiversifyCandidate[], aspects: readonly Aspect[], p: DiversifyParams, dots?: DotCache): number[] {
  const n = ranked.length;
  const identity = Array.from({ length: n }, (_, i) => i);
  const depth = Math.min(p.depth, n);
  const total = aspects.reduce((a, x) => a + Math.max(0, x.weight), 0);
  if (!(p.minShare > 0) || depth < 2 || !(total > 0)) return identity;
  const strong = aspects.filter((a) => a.weight / total >= p.minShare).sort((a, b) => b.weight - a.weight);
  if (strong.length < 2) return identity;
  const memo = new Map<number, boolean[]>();
  const coverOf = (i: number) => {
    let c = memo.get(i);
    if (!c) {
      const row = dots?.row(ranked[i].vector);
      memo.set(i, (c = strong.map((a) => (row ? row.get(a.vector) : dot(ranked[i].vector, a.vector)) >= p.tau)));
    }
    return c;
  };
  const row = identity.slice(0, depth);
  const coveredBy = (list: readonly number[], a: number) => list.some((i) => coverOf(i)[a]);
  for (let a = 0; a < strong.length; a++) {
    if (coveredBy(row, a)) continue;
    let add = -1;
    for (let i = depth; i < n && add < 0; i++) if (!row.includes(i) && coverOf(i)[a]) add = i;
    if (add < 0) continue; // no candidate serves this interest
    const needed = strong.map((_, b) => b !== a && coveredBy(row, b));
    // the lowest-ranked card whose removal uncovers no strong interest the row covers
    for (let pos = row.length - 1; pos >= 0; pos--) {
      const rest = row.filter((_, k) => k !== pos);
      if (needed.every((need, b) => !need || coveredBy(rest, b))) {
        row.splice(pos, 1);
        row.push(add);
        break;
      }
    }
  }
  row.sort((x, y) => x - y);
  const inRow = new Set(row);
  return [...row, ...identity.filter((i) => !inRow.has(i))];
}

/**
 * Near-duplicates of what the shopper owns leave the first row: walking the ranked list, a
 * candidate that duplicates an owned item which already has `keep` near-duplicates in the first
 * `depth` cards is set aside, and the next candidate takes its place (one tent after a tent
 * purchase, not five). `dupes[i]` lists the owned items candidate `i` is a near-duplicate of
 * (`ranked` order, best first). Returns the new order (indices); the set-aside candidates follow
 * the first row in their ranked order, the rest keeps the ranker's order. The identity with
 * `keep` < 0 (off), `depth` < 1 or no duplicate.
 */
export function demoteDuplicates(dupes: readonly (readonly string[])[], keep: number, depth: number): number[] {
  const n = dupes.length;
  const identity = Array.from({ length: n }, (_, i) => i);
  if (!(keep >= 0) || depth < 1 || dupes.every((d) => d.length === 0)) return identity;
  const shown = new Map<string, number>();
  const row: number[] = [];
  const aside: number[] = [];
  let i = 0;
  for (; i < n && row.length < depth; i++) {
    const d = dupes[i];
    if (d.some((owned) => (shown.get(owned) ?? 0) >= keep)) {
      aside.push(i);
      continue;
    }
    for (const owned of d) shown.set(owned, (shown.get(owned) ?? 0) + 1);
    row.push(i);
  }
  return [...row, ...aside, ...identity.slice(i)];
}

/** Dimensions at which {@link nearDuplicates} checks whether a pair can still reach the threshold. */
const CHECKS = 4;

/** Norms of `v` from each checkpoint of {@link CHECKS} (the part {@link nearDuplicates} has not summed yet); last entry 0. */
export function tailNorms(v: Float32Array): Float64Array {
  const step = Math.ceil(v.length / CHECKS);
  const out = new Float64Array(CHECKS + 1);
  for (let k = CHECKS - 1; k >= 0; k--) {
    let q = out[k + 1] ** 2;
    for (let d = Math.min(v.length, (k + 1) * step) - 1; d >= k * step; d--) q += v[d] * v[d];
    out[k] = Math.sqrt(q);
  }
  return out;
}

/** Slack on the Cauchy–Schwarz bound for rounding (the sums' errors are ~1e-13 at 1,000 dimensions). */
const SLACK = 1e-7;

/**
 * For each candidate, the indices of `owned` whose dot product with it is ≥ `threshold` — the
 * same answer as comparing the full dot product (summed in index order) of every pair: a pair is
 * given up early only when its partial sum plus the Cauchy–Schwarz bound of the rest (from
 * {@link tailNorms}) stays below the threshold by more than rounding can explain. Vectors of one dimension.
 */
export function nearDuplicates(
  candidates: readonly { vector: Float32Array; tails: Float64Array }[],
  owned: readonly { vector: Float32Array; tails: Float64Array }[],
  threshold: number,
): number[][] {
  return candidates.map((c) => {
    const hits: number[] = [];
    for (let o = 0; o < owned.length; o++) if (isNearDuplicate(c, owned[o], threshold)) hits.push(o);
    return hits;
  });
}

/**
 * One pair of {@link nearDuplicates}: true when the dot product of `c` and `o` (summed in index
 * order) is ≥ `threshold`, given up early when the partial sum plus the Cauchy–Schwarz bound of the
 * remaining dimensions stays below the threshold by more than rounding can explain.
 */
export function isNearDuplicate(
  c: { vector: Float32Array; tails: Float64Array },
  o: { vector: Float32Array; tails: Float64Array },
  threshold: number,
): boolean {
  const a = c.vector;
  const b = o.vector;
  if (b.length !== a.length) throw new RangeError(`vector dimension mismatch: ${a.length} vs ${b.length}`);
  const step = Math.ceil(a.length / CHECKS);
  const tb = o.tails;
  let s = 0;
  let d = 0;
  for (let k = 0; k < CHECKS; k++) {
    const end = Math.min(a.length, (k + 1) * step);
    s = sumProducts(a, b, d, end, s);
    d = end;
    if (k < CHECKS - 1 && s + c.tails[k + 1] * tb[k + 1] < threshold - SLACK) return false;
  }
  return s >= threshold;
}
