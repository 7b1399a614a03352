/**
 * Ranking a candidate list with per-item explanations. Each candidate gets a small feature
 * vector (one number per signal), a weighted score, and the reasons behind it: the memories
 * and collaborative signals that contributed, largest first.
 */
import type { AtomemConfig, RankWeights } from './config.js';
import type { Action, AtomicMemory } from './types.js';
import { decay } from './memory.js';
import { retrieve, type CommunityContext, type KnownCommunity } from './retrieve.js';
import { dot } from './vector.js';

/** A candidate with its embedding. */
export interface Candidate {
  id: string;
  vector: Float32Array;
}

/** A recent event with its item's embedding. */
export interface RecentSignal {
  item: string;
  vector: Float32Array;
  /** Action weight × position decay. */
  weight: number;
}

/** Why an item got its rank. */
export type Reason =
  | { kind: 'memory'; memoryId: string; content: string; similarity: number; contribution: number }
  | { kind: 'recent'; item: string; similarity: number; contribution: number }
  | { kind: 'community'; communityId: string; summary: string; size: number; contribution: number }
  | { kind: 'popular'; share: number; contribution: number }
  | { kind: 'alsoPicked'; share: number; contribution: number }
  /**
   * The shopper's stated intent: it matches the candidate (`similarity`: cosine to the intent) and,
   * with `memoryId`, meets one of the memories the intent selected (`item`: that memory's item
   * most like the candidate, `action`: what the shopper did with it).
   */
  | { kind: 'intent'; intent: string; similarity: number; contribution: number; memoryId?: string; content?: string; item?: string; action?: Action };

/** One number per signal: the memory's (one per {@link RankWeights} key) and any extra ones (the shop model's). */
export type Features = Record<keyof RankWeights, number> & Record<string, number>;

/** A ranked candidate. */
export interface RankedItem {
  id: string;
  score: number;
  features: Features;
  /** Largest contribution first; empty when nothing is known. */
  reasons: Reason[];
}

/** What the ranker reads. */
export interface RankInput {
  memories: readonly AtomicMemory[];
  candidates: readonly Candidate[];
  recent?: readonly RecentSignal[];
  /** Own memory id → its communities (global context). Absent at privacy `off`. */
  communities?: CommunityContext;
  now: number;
  /** More signals per candidate (same order as `candidates`), e.g. the shop model's; combined by name like the rest. */
  extra?: Readonly<Record<string, ArrayLike<number>>>;
  /** Weights to combine with (default `cfg.weights`; the agent passes `cfg.shopWeights` when a shop model is loaded). */
  weights?: Readonly<Record<string, number>>;
  /** Reasons behind the `extra` signals, per candidate (same order); placed before the ranker's own (e.g. the stated intent's). */
  extraReasons?: ReadonlyArray<readonly Reason[]>;
}

/**
 * Collaborative votes from community members' vectors (embeddings level). A member vector
 * is the centroid of another shopper's interest; it votes for a candidate in proportion to
 * how far its cosine exceeds `tau` (a member far from every candidate votes for none), and a
 * member's votes are capped at 1 in total. So a candidate gets the share of similar
 * shoppers' interests that point at it. Returns community id → votes per candidate index.
 */
export function memberVotes(candidates: readonly Candidate[], communities: readonly KnownCommunity[], tau: number): Map<string, Float64Array> {
  const out = new Map<string, Float64Array>();
  const n = candidates.length;
  const gain = new Float64Array(n);
  const span = Math.max(1e-6, 1 - tau);
  for (const k of communities) {
    const votes = new Float64Array(n);
    const members = k.view.members;
    for (const m of members) {
      let total = 0;
      for (let i = 0; i < n; i++) {
        const g = (dot(m, candidates[i].vector) - tau) / span;
        gain[i] = g > 0 ? g : 0;
        total += gain[i];
      }
      if (total === 0) continue;
      const scale = total > 1 ? 1 / total : 1;
      for (let i = 0; i < n; i++) votes[i] += gain[i] * scale;
    }
    if (members.length) for (let i = 0; i < n; i++) votes[i] /= members.length;
    out.set(k.view.id, votes);
  }
  return out;
}

/** Compute a candidate's features and reasons (unweighted). `votes` from {@link memberVotes}, `index` = the candidate's position. */
export function features(
  input: RankInput,
  cfg: AtomemConfig,
  c: Candidate,
  all: readonly KnownCommunity[],
  votes?: Map<string, Float64Array>,
  index = 0,
): { f: Features; reasons: Reason[] } {
  const f: Features = { memory: 0, profile: 0, recent: 0, prototype: 0, members: 0, communityItems: 0, popularity: 0, related: 0 };
  const reasons: Reason[] = [];
  const w = cfg.weights;
  const r = retrieve(input.memories, c.vector, cfg, input.communities);
  for (const o of r.own) {
    const sal = o.memory.strength * decay(cfg, o.memory.updatedAt, input.now);
    const v = sal * o.similarity;
    f.memory += v;
    reasons.push({ kind: 'memory', memoryId: o.memory.id, content: o.memory.content, similarity: o.similarity, contribution: w.memory * v });
  }
  if (input.memories.length) {
    let total = 0;
    let wsum = 0;
    for (const m of input.memories) {
      const wm = m.strength * decay(cfg, m.updatedAt, input.now) * Math.log1p(m.evidence);
      total += wm * dot(m.embedding.vector, c.vector);
      wsum += Math.abs(wm);
    }
    f.profile = wsum > 0 ? total / wsum : 0;
  }
  if (input.recent && input.recent.length) {
    let best = { item: '', sim: -Infinity, contribution: 0 };
    let total = 0;
    let wsum = 0;
    for (const e of input.recent) {
      const s = dot(e.vector, c.vector);
      total += e.weight * s;
      wsum += Math.abs(e.weight);
      if (e.weight * s > best.contribution || best.item === '') best = { item: e.item, sim: s, contribution: e.weight * s };
    }
    f.recent = wsum > 0 ? total / wsum : 0;
    if (best.item) reasons.push({ kind: 'recent', item: best.item, similarity: best.sim, contribution: w.recent * f.recent });
  }
  for (const { community } of r.communities) {
    const v = community.view;
    const p = dot(v.prototype, c.vector);
    f.prototype = Math.max(f.prototype, p);
    const members = votes?.get(v.id)?.[index] ?? 0;
    f.members += members;
    const share = v.items && community.itemTotal > 0 ? (v.items[c.id] ?? 0) / community.itemTotal : 0;
    f.communityItems += share;
    reasons.push({
      kind: 'community',
      communityId: v.id,
      summary: community.summary,
      size: v.size,
      contribution: w.prototype * p + w.members * members + w.communityItems * share,
    });
  }
  const shares = input.communities?.itemShares;
  if (shares) {
    // protocol v2: the release's global popularity estimate
    f.popularity = shares.get(c.id) ?? 0;
    if (f.popularity > 0) reasons.push({ kind: 'popular', share: f.popularity, contribution: w.popularity * f.popularity });
  }
  if (all.length) {
    let count = 0;
    let total = 0;
    for (const k of all) {
      if (!k.view.items) continue;
      count += k.view.items[c.id] ?? 0;
      total += k.itemTotal;
    }
    if (total > 0 && !shares) {
      f.popularity = count / total;
      if (count > 0) reasons.push({ kind: 'popular', share: f.popularity, contribution: w.popularity * f.popularity });
    }
    let rel = 0;
    let relTotal = 0;
    for (const k of all) {
      if (!k.view.related) continue;
      rel += k.view.related[c.id] ?? 0;
      relTotal += k.relatedTotal ?? 0;
    }
    if (relTotal > 0) {
      f.related = rel / relTotal;
      if (rel > 0) reasons.push({ kind: 'alsoPicked', share: f.related, contribution: w.related * f.related });
    }
  }
  reasons.sort((a, b) => b.contribution - a.contribution);
  return { f, reasons };
}

/**
 * Rank candidates, best first: each signal is standardised within the list, then weighted
 * (`cfg.weights`). Ties keep the input order (callers shuffle first).
 */
export function rank(input: RankInput, cfg: AtomemConfig): RankedItem[] {
  if (input.candidates.length === 0) return [];
  const dim = input.candidates[0].vector.length;
  for (const c of input.candidates) {
    if (c.vector.length !== dim) throw new RangeError(`candidate ${c.id}: dimension ${c.vector.length}, expected ${dim}`);
  }
  const all = input.communities ? uniqueCommunities(input.communities) : [];
  const votes = all.length ? memberVotes(input.candidates, all, cfg.tau) : undefined;
  const out = input.candidates.map((c, i) => {
    const { f, reasons } = features(input, cfg, c, all, votes, i);
    for (const [name, values] of Object.entries(input.extra ?? {})) f[name] = values[i];
    const given = input.extraReasons?.[i];
    return { id: c.id, score: 0, features: f, reasons: given?.length ? [...given, ...reasons] : reasons };
  });
  const weights = input.weights ?? cfg.weights;
  const scores = combine(out.map((o) => o.features), weights as Readonly<Record<string, number>>);
  out.forEach((o, i) => (o.score = scores[i]));
  return out.map((x, i) => ({ x, i })).sort((a, b) => b.x.score - a.x.score || a.i - b.i).map((e) => e.x);
}

/**
 * The ranker's combination rule: each signal standardised within the list (z-score), times its
 * weight, summed. A signal that is constant over the list (up to rounding) adds nothing. Also
 * used by the benchmark's weight tuning, so tuned weights mean exactly what `rank` does.
 */
export function combine(features: readonly Readonly<Record<string, number>>[], weights: Readonly<Record<string, number>>): Float64Array {
  const scores = new Float64Array(features.length);
  if (features.length === 0) return scores;
  // why: signals live on very different scales (a popularity share is ~1e-3, a similarity
  // ~0.8); standardising each within the list makes the weights comparable and tunable.
  for (const k of Object.keys(weights)) {
    const w = weights[k];
    if (w === 0) continue;
    let m = 0;
    let maxAbs = 0;
    // why: a signal this list does not have (e.g. no shop model) counts as constant, i.e. nothing
    const x = (f: Readonly<Record<string, number>>) => (Number.isFinite(f[k]) ? f[k] : 0);
    for (const f of features) {
      m += x(f);
      maxAbs = Math.max(maxAbs, Math.abs(x(f)));
    }
    m /= features.length;
    let v = 0;
    for (const f of features) v += (x(f) - m) ** 2;
    const sd = Math.sqrt(v / features.length);
    // why: relative, so a signal that is constant up to rounding is skipped at any scale.
    if (sd === 0 || sd < 1e-9 * maxAbs) continue;
    for (let i = 0; i < features.length; i++) scores[i] += (w * (x(features[i]) - m)) / sd;
  }
  return scores;
}

function uniqueCommunities(ctx: CommunityContext): KnownCommunity[] {
  const seen = new Map<string, KnownCommunity>();
  for (const list of ctx.byMemory.values()) for (const k of list) seen.set(k.view.id, k);
  return [...seen.values()];
}
