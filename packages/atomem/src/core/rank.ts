/**
 * Ranking a candidate list with per-item explanations. Each candidate gets a small feature
 * vector (one number per signal), a weighted score, and the reasons behind it: the memories
 * and collaborative signals that contributed, largest first.
 */
import type { AtomemConfig, RankWeights } from './config.js';
import type { Action, AtomicMemory } from './types.js';
import { decay } from './memory.js';
import { retrieve, type CommunityContext } from './retrieve.js';
import { dot, rowDots, type DotCache, type FrameRow, type PairFrame } from './vector.js';

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
  /** What the shopper did (for the reason's wording: bought, added to cart, looked at …). */
  action?: Action;
}

/**
 * Why an item got its rank. `contribution` is the reason's part of this card's score relative to
 * the list: the signal's standardised deviation from the list mean times its weight, as
 * {@link combine} adds it (so a reason that every card shares equally contributes nothing).
 */
export type Reason =
  | {
      kind: 'memory';
      memoryId: string;
      content: string;
      similarity: number;
      contribution: number;
      /** The memory's linked item closest to this card (not the card itself), when item vectors were given. */
      item?: string;
      /** The next closest linked items (up to 3), so a row of cards can name different ones. */
      alternatives?: string[];
    }
  | { kind: 'recent'; item: string; similarity: number; contribution: number; action?: Action }
  | { kind: 'community'; communityId: string; summary: string; size: number; contribution: number }
  | { kind: 'popular'; share: number; contribution: number }
  /** A shop-model signal (`ease`, `knn`, `markov`, `vec`, `sasrec`, `pop` …) and the shopper's item behind it, if known. */
  | { kind: 'shop'; signal: string; contribution: number; item?: string }
  /** A first visit's order (nothing known yet): the shop's or the community's popularity, or a neutral variety order. */
  | { kind: 'prior'; prior: 'shop-popularity' | 'community-popularity' | 'variety'; contribution: number; share?: number }
  /**
   * The shopper's stated intent: it matches the candidate (`similarity`: cosine to the intent) and,
   * with `memoryId`, meets one of the memories the intent selected (`item`: that memory's item
   * most like the candidate, `action`: what the shopper did with it). `matched: false`: the intent
   * matches no candidate, so the list was ranked without it (this reason only says so).
   */
  | {
      kind: 'intent';
      intent: string;
      similarity: number;
      contribution: number;
      memoryId?: string;
      content?: string;
      item?: string;
      action?: Action;
      matched?: false;
    };

/** One number per signal: the memory's (one per {@link RankWeights} key) and any extra ones (the shop model's). */
// why `crowd` excepted: it comes as an extra signal (the shelf's, from the Prio3 release), not from the memory
export type Features = Record<Exclude<keyof RankWeights, 'crowd'>, number> & Record<string, number>;

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
  /**
   * Per shop-model signal, the shopper's item that moved each candidate most (same order as
   * `candidates`; undefined entries: none); the extra signals named here get a `shop` reason.
   */
  extraSources?: Readonly<Record<string, ArrayLike<string | undefined>>>;
  /** Vectors of the memories' linked items (so a memory reason can name the item closest to the card). */
  itemVectors?: ReadonlyMap<string, Float32Array>;
  /**
   * The memories' linked items already resolved ({@link linkedItems} of `memories` and
   * `itemVectors`, possibly kept across calls): used instead of resolving them again.
   */
  linked?: LinkedItems;
  /** Weights to combine with (default `cfg.weights`; the agent passes `cfg.shopWeights` when a shop model is loaded). */
  weights?: Readonly<Record<string, number>>;
  /** Reasons behind the `extra` signals, per candidate (same order); placed before the ranker's own (e.g. the stated intent's). */
  extraReasons?: ReadonlyArray<readonly Reason[]>;
  /**
   * Leave the memory reasons' `item` and `alternatives` out (the caller names them with
   * {@link nameLinkedItems} for the items it shows): they cost a cosine per linked item and card.
   */
  deferItems?: boolean;
  /**
   * Item–item dot products kept across calls (the recent events' items and the memories' linked
   * items against each card): the same numbers, summed once. Absent: every one is summed here.
   */
  dots?: DotCache;
  /**
   * The memories' dot products with the cards kept across calls (a memory's vector is replaced,
   * never changed in place, when the memory changes): the same numbers, summed once.
   */
  memoryDots?: DotCache;
}

/** Most reasons kept per ranked item. */
const MAX_REASONS = 6;

/** A memory reason's closest linked item and its alternatives: at most this many in all. */
const NEAR_KEPT = 4;

/**
 * One source of a card's score (a memory, a recent item, a community, …) with its raw part of
 * each signal. Features are sums of these parts, so a signal's standardised deviation splits
 * exactly into the units' deviations (the prototype signal, a maximum, goes to its argmax).
 */
interface Unit {
  key: string;
  reason: Reason;
  parts: Record<string, number>;
  /** Shown even without a positive contribution (a retrieved memory and its communities: STEAM's chain for this card). */
  keep: boolean;
}

/** What every candidate's {@link unitsOf} shares: the memories' weights, computed once per list. */
interface ListWeights {
  /** Memory → strength × decay (the `memory` signal's salience). */
  salience: Map<AtomicMemory, number>;
  /** Per memory (input order): salience × log(1 + evidence), the `profile` signal's weight. */
  profile: Float64Array;
  /** Sum of the absolute profile weights. */
  profileSum: number;
  /** Sum of the absolute recent-event weights. */
  recentSum: number;
  /** Unit keys per memory (`m:<id>`, input order) and per recent event (`r:<item>`), made once per list. */
  memoryKeys: string[];
  recentKeys: string[];
}

function listWeights(input: RankInput, cfg: AtomemConfig): ListWeights {
  const salience = new Map<AtomicMemory, number>();
  const profile = new Float64Array(input.memories.length);
  let profileSum = 0;
  input.memories.forEach((m, i) => {
    const d = decay(cfg, m.updatedAt, input.now);
    salience.set(m, m.strength * d);
    profile[i] = m.strength * d * Math.log1p(m.evidence);
    profileSum += Math.abs(profile[i]);
  });
  let recentSum = 0;
  for (const e of input.recent ?? []) recentSum += Math.abs(e.weight);
  const memoryKeys = input.memories.map((m) => `m:${m.id}`);
  const recentKeys = (input.recent ?? []).map((e) => `r:${e.item}`);
  return { salience, profile, profileSum, recentSum, memoryKeys, recentKeys };
}

/** The memory's unit among `units` (made when missing). */
function memoryUnit(units: Map<string, Unit>, m: AtomicMemory, key: string, similarity: number): Unit {
  let u = units.get(key);
  if (!u) {
    const reason: Reason = { kind: 'memory', memoryId: m.id, content: m.content, similarity, contribution: 0 };
    u = { key, reason, parts: {}, keep: false };
    units.set(key, u);
  }
  return u;
}

/** A candidate's features and the units behind them. `index` = the candidate's position. */
function unitsOf(
  input: RankInput,
  cfg: AtomemConfig,
  c: Candidate,
  index: number,
  lw: ListWeights = listWeights(input, cfg),
  recentFrame?: PairFrame<Float32Array>,
  memoryFrame?: PairFrame<Float32Array>,
): { f: Features; units: Unit[] } {
  const f: Features = { memory: 0, profile: 0, recent: 0, prototype: 0, communityItems: 0, popularity: 0 };
  const units = new Map<string, Unit>();
  // each memory's cosine to the card, summed once: retrieval and the profile signal read the same numbers
  const sims = new Float64Array(input.memories.length);
  const memRow = memoryFrame?.row(c.vector);
  for (let i = 0; i < sims.length; i++) sims[i] = memRow ? memRow.at(i) : dot(input.memories[i].embedding.vector, c.vector);
  const r = retrieve(input.memories, c.vector, cfg, input.communities, sims);
  for (const o of r.own) {
    const sal = lw.salience.get(o.memory) ?? o.memory.strength * decay(cfg, o.memory.updatedAt, input.now);
    const v = sal * o.similarity;
    f.memory += v;
    const u = memoryUnit(units, o.memory, `m:${o.memory.id}`, o.similarity);
    u.parts.memory = v;
    u.keep = true;
  }
  if (input.memories.length) {
    const wsum = lw.profileSum;
    if (wsum > 0) {
      for (let i = 0; i < sims.length; i++) {
        const s = sims[i];
        const t = lw.profile[i] * s;
        f.profile += t / wsum;
        // why: only memories pointing at this card (positive cosine) can be named for it.
        if (s > 0 || units.has(lw.memoryKeys[i])) memoryUnit(units, input.memories[i], lw.memoryKeys[i], s).parts.profile = t / wsum;
      }
    }
  }
  if (input.recent?.length) {
    const wsum = lw.recentSum;
    const row = recentFrame?.row(c.vector);
    for (let j = 0; j < input.recent.length; j++) {
      const e = input.recent[j];
      const s = row ? row.at(j) : dot(e.vector, c.vector);
      const part = wsum > 0 ? (e.weight * s) / wsum : 0;
      f.recent += part;
      const key = lw.recentKeys[j];
      let u = units.get(key);
      if (!u) {
        u = {
          key,
          reason: e.action
            ? { kind: 'recent', item: e.item, similarity: s, contribution: 0, action: e.action }
            : { kind: 'recent', item: e.item, similarity: s, contribution: 0 },
          parts: { recent: 0 },
          keep: false,
        };
        units.set(key, u);
      } else if (e.action && u.reason.kind === 'recent' && strongerAction(e.action, u.reason.action)) {
        u.reason.action = e.action;
      }
      u.parts.recent += part;
    }
  }
  let protoBest: Unit | undefined;
  for (const { community } of r.communities) {
    const v = community.view;
    const p = dot(v.prototype, c.vector);
    const share = v.items && community.itemTotal > 0 ? (v.items[c.id] ?? 0) / community.itemTotal : 0;
    f.communityItems += share;
    const key = `c:${v.id}`;
    const u: Unit = {
      key,
      reason: { kind: 'community', communityId: v.id, summary: community.summary, size: v.size, contribution: 0 },
      parts: { communityItems: share },
      keep: true,
    };
    units.set(key, u);
    if (p > f.prototype || !protoBest) {
      f.prototype = Math.max(f.prototype, p);
      if (p >= f.prototype) protoBest = u;
    }
  }
  if (protoBest) protoBest.parts.prototype = f.prototype;
  const shares = input.communities?.itemShares;
  if (shares) {
    // the release's global popularity estimate
    f.popularity = shares.get(c.id) ?? 0;
    if (f.popularity > 0)
      units.set('pop', { key: 'pop', reason: { kind: 'popular', share: f.popularity, contribution: 0 }, parts: { popularity: f.popularity }, keep: false });
  }
  for (const [name, values] of Object.entries(input.extra ?? {})) {
    f[name] = values[index];
    // why: only the shop model's signals (named in extraSources) get a shop reason; others (the intent's) bring their own extraReasons
    if (!input.extraSources || !Object.hasOwn(input.extraSources, name)) continue;
    const item = input.extraSources[name]?.[index];
    units.set(`x:${name}`, {
      key: `x:${name}`,
      reason: { kind: 'shop', signal: name, contribution: 0, ...(item !== undefined ? { item } : {}) },
      parts: { [name]: values[index] },
      keep: false,
    });
  }
  return { f, units: [...units.values()] };
}

/** Action strength order for wording (a purchase says more than a look). */
const ACTION_RANK: Readonly<Record<Action, number>> = { purchase: 7, cart: 6, like: 5, rate: 4, click: 3, view: 2, skip: 1, dislike: 0 };

/** True when `a` is a stronger positive action than `b`. */
export function strongerAction(a: Action, b: Action | undefined): boolean {
  return b === undefined || ACTION_RANK[a] > ACTION_RANK[b];
}

/** Compute a candidate's features and reasons with raw (unweighted, not list-relative) contributions. */
export function features(input: RankInput, cfg: AtomemConfig, c: Candidate, index = 0): { f: Features; reasons: Reason[] } {
  const { f, units } = unitsOf(input, cfg, c, index);
  const w = (input.weights ?? cfg.weights) as Readonly<Record<string, number>>;
  const reasons = units.map((u) => ({ ...u.reason, contribution: Object.entries(u.parts).reduce((a, [k, x]) => a + (w[k] ?? 0) * x, 0) }) as Reason);
  reasons.sort((a, b) => b.contribution - a.contribution);
  return { f, reasons };
}

/** One memory's linked items as {@link nameLinkedItems} reads them. */
export interface LinkedList {
  /** The linked items that have a vector, in link order. */
  ids: string[];
  /** Each one's index into {@link LinkedItems.vectors}. */
  at: Int32Array;
  /**
   * Each card's named items (closest first, at most {@link NEAR_KEPT}), by the card's vector, for
   * as long as this list is kept: they depend only on the card and on these items and vectors.
   */
  named: WeakMap<Float32Array, { card: string; near: readonly string[] }>;
  /** The items' vectors one after the other (made on first use; null: not all of one dimension). */
  matrix?: { dim: number; rows: Float32Array } | null;
}

/** `list`'s {@link LinkedList.matrix}. */
function matrixOf(list: LinkedList, vectors: readonly Float32Array[]): LinkedList['matrix'] {
  if (list.matrix !== undefined) return list.matrix;
  const dim = list.at.length ? vectors[list.at[0]].length : 0;
  let ok = true;
  for (const j of list.at) if (vectors[j].length !== dim) ok = false;
  if (!ok) return (list.matrix = null);
  const rows = new Float32Array(list.at.length * dim);
  list.at.forEach((j, k) => rows.set(vectors[j], k * dim));
  return (list.matrix = { dim, rows });
}

/**
 * The memories' linked items as {@link nameLinkedItems} reads them: per memory id (the first
 * memory of a repeated id), its {@link LinkedList}, and the distinct items' vectors. A caller may
 * keep one across calls while no memory's linked items and no item vector change (the shelf does).
 */
export interface LinkedItems {
  byMemory: Map<string, LinkedList>;
  vectors: Float32Array[];
  /** The cards' dot products with `vectors`, kept across calls (when a {@link DotCache} was given). */
  frame?: PairFrame<Float32Array>;
}

/**
 * {@link LinkedItems} of `memories` with `itemVectors` (by item id). `named`: earlier named items
 * to keep, per memory id — only for a memory whose linked items and their vectors are unchanged.
 */
export function linkedItems(
  memories: readonly AtomicMemory[],
  itemVectors: ReadonlyMap<string, Float32Array>,
  dots?: DotCache,
  named?: ReadonlyMap<string, LinkedList['named']>,
): LinkedItems {
  const index = new Map<string, number>();
  const vectors: Float32Array[] = [];
  const byMemory = new Map<string, LinkedList>();
  for (const m of memories) {
    if (byMemory.has(m.id)) continue;
    const ids: string[] = [];
    const at: number[] = [];
    for (const id of m.items) {
      const v = itemVectors.get(id);
      if (!v) continue;
      let k = index.get(id);
      if (k === undefined) {
        k = vectors.length;
        index.set(id, k);
        vectors.push(v);
      }
      ids.push(id);
      at.push(k);
    }
    byMemory.set(m.id, { ids, at: Int32Array.from(at), named: named?.get(m.id) ?? new WeakMap() });
  }
  return { byMemory, vectors, ...(dots ? { frame: dots.frame(vectors) } : {}) };
}

/**
 * Name, on each memory reason of a card (in place), the memory's linked item closest to the card
 * (`item`, not the card itself) and the next closest (`alternatives`, up to 3), ties in link
 * order; what {@link rank} does unless `deferItems`. `linked`: see {@link linkedItems}; a card
 * named before for a kept list reads its names back.
 */
export function nameLinkedItems(reasons: readonly Reason[], c: Candidate, linked: LinkedItems): void {
  // why per card: memories share linked items, and each linked item's cosine to this card is needed once
  let sims: Float64Array | undefined;
  let row: FrameRow<Float32Array> | undefined;
  for (const r of reasons) {
    if (r.kind !== 'memory') continue;
    const mine = linked.byMemory.get(r.memoryId);
    if (!mine) continue;
    const kept = mine.named.get(c.vector);
    let names: readonly string[];
    if (kept && kept.card === c.id) names = kept.near;
    else {
      // the memory's items' dot products with the card: the kept ones read back; when one is missing, every row of
      // the memory's matrix summed at once (each in index order: the bits of dot), and kept
      const count = mine.ids.length;
      const vals = new Float64Array(count);
      let missing = false;
      if (linked.frame) {
        row ??= linked.frame.row(c.vector);
        for (let k = 0; k < count; k++) if (Number.isNaN((vals[k] = row.peek(mine.at[k])))) missing = true;
      } else {
        sims ??= new Float64Array(linked.vectors.length).fill(Number.NaN);
        for (let k = 0; k < count; k++) if (Number.isNaN((vals[k] = sims[mine.at[k]]))) missing = true;
      }
      if (missing) {
        const matrix = matrixOf(mine, linked.vectors);
        if (matrix && matrix.dim === c.vector.length) rowDots(matrix.rows, count, matrix.dim, c.vector, vals);
        else for (let k = 0; k < count; k++) vals[k] = dot(linked.vectors[mine.at[k]], c.vector);
        for (let k = 0; k < count; k++) {
          if (row) row.put(mine.at[k], vals[k]);
          else sims![mine.at[k]] = vals[k];
        }
      }
      // the 4 closest linked items, best first, ties in link order (as a stable sort would give)
      const near: { id: string; s: number }[] = [];
      for (let k = 0; k < count; k++) {
        const id = mine.ids[k];
        if (id === c.id) continue;
        const s = vals[k];
        if (near.length === NEAR_KEPT && !(s > near[NEAR_KEPT - 1].s)) continue;
        let at = near.length;
        while (at > 0 && s > near[at - 1].s) at--;
        near.splice(at, 0, { id, s });
        if (near.length > NEAR_KEPT) near.length = NEAR_KEPT;
      }
      names = near.map((x) => x.id);
      mine.named.set(c.vector, { card: c.id, near: names });
    }
    if (names.length) r.item = names[0];
    if (names.length > 1) r.alternatives = names.slice(1);
  }
}

/** Memories by id, the first of a repeated id winning (as `Array.find` would). */
export function memoriesById(memories: readonly AtomicMemory[]): Map<string, AtomicMemory> {
  const byId = new Map<string, AtomicMemory>();
  for (const m of memories) if (!byId.has(m.id)) byId.set(m.id, m);
  return byId;
}

/**
 * Rank candidates, best first: each signal is standardised within the list, then weighted
 * (`cfg.weights`). Ties keep the input order (callers shuffle first). Each item's reasons are
 * the sources of its own score relative to the list (see {@link Reason}), largest first: a
 * memory retrieved for it and that memory's communities (even when they pull the item down),
 * and any other source that lifts it above the list's mean.
 */
export function rank(input: RankInput, cfg: AtomemConfig): RankedItem[] {
  if (input.candidates.length === 0) return [];
  checkDims(input);
  const lw = listWeights(input, cfg);
  const frames = framesOf(input);
  const n = input.candidates.length;
  const memories = input.memories;
  // one pass as unitsOf's (the same sums in the same order), keeping per card only what its reasons read:
  // memory units (one slot per distinct memory key, in the order unitsOf makes them) and the recent items' parts
  const memSlot = new Map<string, number>();
  const slotOfMemory = lw.memoryKeys.map((k) => {
    let x = memSlot.get(k);
    if (x === undefined) memSlot.set(k, (x = memSlot.size));
    return x;
  });
  const ms = memSlot.size;
  const memIndex = new Map<AtomicMemory, number>();
  memories.forEach((m, i) => {
    if (!memIndex.has(m)) memIndex.set(m, i);
  });
  const recent = input.recent ?? [];
  const recSlot = new Map<string, number>();
  const slotOfRecent = lw.recentKeys.map((k) => {
    let x = recSlot.get(k);
    if (x === undefined) recSlot.set(k, (x = recSlot.size));
    return x;
  });
  const rs = recSlot.size;
  // a recent unit's item, its first event (whose cosine it shows) and its strongest action, as unitsOf updates it
  const recentFirst = new Int32Array(rs).fill(-1);
  const recentAction: (Action | undefined)[] = new Array(rs);
  for (let j = 0; j < recent.length; j++) {
    const slot = slotOfRecent[j];
    const a = recent[j].action;
    if (recentFirst[slot] < 0) (recentFirst[slot] = j), (recentAction[slot] = a);
    else if (a && strongerAction(a, recentAction[slot])) recentAction[slot] = a;
  }
  const extras = Object.entries(input.extra ?? {});
  const sourced = extras.filter(([name]) => input.extraSources && Object.hasOwn(input.extraSources, name));
  const shares = input.communities?.itemShares;
  // list means, summed in card order as rank's units are (a unit absent from a card adds nothing)
  const meanMemory = new Float64Array(ms);
  const meanProfile = new Float64Array(ms);
  const hasMemory = new Uint8Array(ms);
  const hasProfile = new Uint8Array(ms);
  const meanRecent = new Float64Array(rs);
  const community = new Map<string, PartMeans>();
  let meanPop = 0;
  const meanExtra = new Float64Array(sourced.length);
  // per card: its memory units (slot, the memory that made it, its similarity, parts; undefined = no such part, in unit order),
  // its recent parts and similarities per slot, its community units
  const features: Features[] = new Array(n);
  const cardUnits: { order: number[]; maker: number[]; sim: number[]; memory: (number | undefined)[]; profile: (number | undefined)[]; keep: boolean[] }[] =
    new Array(n);
  const cardRecent = new Float64Array(n * rs);
  const cardRecentSim = new Float64Array(n * rs);
  const cardCommunities: Unit[][] = new Array(n);
  const cardPop = new Float64Array(n);
  const unitAt = new Int32Array(ms);
  const stamp = new Int32Array(ms).fill(-1);
  type CardUnits = (typeof cardUnits)[number];
  let u: CardUnits = { order: [], maker: [], sim: [], memory: [], profile: [], keep: [] };
  let ci = 0;
  // the card's unit of a memory slot (made when missing, as memoryUnit does)
  const unitOf = (slot: number, maker: number, similarity: number): number => {
    if (stamp[slot] === ci) return unitAt[slot];
    stamp[slot] = ci;
    unitAt[slot] = u.order.length;
    u.order.push(slot);
    u.maker.push(maker);
    u.sim.push(similarity);
    u.memory.push(undefined);
    u.profile.push(undefined);
    u.keep.push(false);
    return u.order.length - 1;
  };
  for (ci = 0; ci < n; ci++) {
    const c = input.candidates[ci];
    const f: Features = { memory: 0, profile: 0, recent: 0, prototype: 0, communityItems: 0, popularity: 0 };
    const sims = new Float64Array(memories.length);
    const memRow = frames.memory?.row(c.vector);
    for (let i = 0; i < sims.length; i++) sims[i] = memRow ? memRow.at(i) : dot(memories[i].embedding.vector, c.vector);
    const r = retrieve(memories, c.vector, cfg, input.communities, sims);
    u = { order: [], maker: [], sim: [], memory: [], profile: [], keep: [] };
    for (const o of r.own) {
      const sal = lw.salience.get(o.memory) ?? o.memory.strength * decay(cfg, o.memory.updatedAt, input.now);
      const v = sal * o.similarity;
      f.memory += v;
      const at = memIndex.get(o.memory)!;
      const k = unitOf(slotOfMemory[at], at, o.similarity);
      u.memory[k] = v;
      u.keep[k] = true;
    }
    if (memories.length) {
      const wsum = lw.profileSum;
      if (wsum > 0) {
        for (let i = 0; i < sims.length; i++) {
          const s = sims[i];
          const t = lw.profile[i] * s;
          f.profile += t / wsum;
          // why: only memories pointing at this card (positive cosine) can be named for it.
          const slot = slotOfMemory[i];
          if (s > 0 || stamp[slot] === ci) u.profile[unitOf(slot, i, s)] = t / wsum;
        }
      }
    }
    for (let k = 0; k < u.order.length; k++) {
      const pm = u.memory[k];
      const pp = u.profile[k];
      if (pm !== undefined) (meanMemory[u.order[k]] += pm / n), (hasMemory[u.order[k]] = 1);
      if (pp !== undefined) (meanProfile[u.order[k]] += pp / n), (hasProfile[u.order[k]] = 1);
    }
    cardUnits[ci] = u;
    if (recent.length) {
      const wsum = lw.recentSum;
      const row = frames.recent?.row(c.vector);
      const base = ci * rs;
      for (let j = 0; j < recent.length; j++) {
        const s = row ? row.at(j) : dot(recent[j].vector, c.vector);
        const part = wsum > 0 ? (recent[j].weight * s) / wsum : 0;
        f.recent += part;
        const slot = slotOfRecent[j];
        if (recentFirst[slot] === j) cardRecentSim[base + slot] = s;
        cardRecent[base + slot] += part;
      }
      for (let slot = 0; slot < rs; slot++) meanRecent[slot] += cardRecent[base + slot] / n;
    }
    const own: Unit[] = [];
    const byKey = new Map<string, number>();
    let protoBest: Unit | undefined;
    for (const { community: k } of r.communities) {
      const v = k.view;
      const p = dot(v.prototype, c.vector);
      const share = v.items && k.itemTotal > 0 ? (v.items[c.id] ?? 0) / k.itemTotal : 0;
      f.communityItems += share;
      const key = `c:${v.id}`;
      const unit: Unit = {
        key,
        reason: { kind: 'community', communityId: v.id, summary: k.summary, size: v.size, contribution: 0 },
        parts: { communityItems: share },
        keep: true,
      };
      // a repeated community replaces its unit in place (as a Map.set would)
      const at = byKey.get(key);
      if (at === undefined) byKey.set(key, own.push(unit) - 1);
      else own[at] = unit;
      if (p > f.prototype || !protoBest) {
        f.prototype = Math.max(f.prototype, p);
        if (p >= f.prototype) protoBest = unit;
      }
    }
    if (protoBest) protoBest.parts.prototype = f.prototype;
    for (const unit of own) {
      let m = community.get(unit.key);
      if (!m) community.set(unit.key, (m = {}));
      for (const key in unit.parts) m[key] = (m[key] ?? 0) + unit.parts[key] / n;
    }
    cardCommunities[ci] = own;
    if (shares) {
      f.popularity = shares.get(c.id) ?? 0;
      if (f.popularity > 0) meanPop += f.popularity / n;
      cardPop[ci] = f.popularity;
    }
    for (const [name, values] of extras) f[name] = values[ci];
    for (let x = 0; x < sourced.length; x++) meanExtra[x] += sourced[x][1][ci] / n;
    features[ci] = f;
  }
  const weights = (input.weights ?? cfg.weights) as Readonly<Record<string, number>>;
  const { scores, scale } = combineDetailed(features, weights);
  const itemVectors = input.itemVectors;
  let linked: LinkedItems | undefined;
  const out = input.candidates.map((c, ci): RankedItem => {
    // the card's units in unitsOf's order (memories, recent items, communities, popularity, shop signals), each reason's contribution as reasonsOf sums it
    const reasons: Reason[] = [];
    const u = cardUnits[ci];
    for (let k = 0; k < u.order.length; k++) {
      const slot = u.order[k];
      let contribution = 0;
      const pm = u.memory[k];
      const pp = u.profile[k];
      if (pm !== undefined) contribution += (scale.memory ?? 0) * (pm - (hasMemory[slot] ? meanMemory[slot] : 0));
      if (pp !== undefined) contribution += (scale.profile ?? 0) * (pp - (hasProfile[slot] ? meanProfile[slot] : 0));
      if (!u.keep[k] && !(contribution > 1e-9)) continue;
      const m = memories[u.maker[k]];
      reasons.push({ kind: 'memory', memoryId: m.id, content: m.content, similarity: u.sim[k], contribution });
    }
    const base = ci * rs;
    for (let slot = 0; slot < rs; slot++) {
      const contribution = 0 + (scale.recent ?? 0) * (cardRecent[base + slot] - meanRecent[slot]);
      if (!(contribution > 1e-9)) continue;
      const e = recent[recentFirst[slot]];
      const action = recentAction[slot];
      const similarity = cardRecentSim[base + slot];
      reasons.push(action ? { kind: 'recent', item: e.item, similarity, contribution, action } : { kind: 'recent', item: e.item, similarity, contribution });
    }
    for (const unit of cardCommunities[ci]) {
      const m = community.get(unit.key)!;
      let contribution = 0;
      for (const key in unit.parts) contribution += (scale[key] ?? 0) * (unit.parts[key] - (m[key] ?? 0));
      reasons.push({ ...unit.reason, contribution } as Reason);
    }
    const pop = cardPop[ci];
    if (shares && pop > 0) {
      const contribution = 0 + (scale.popularity ?? 0) * (pop - meanPop);
      if (contribution > 1e-9) reasons.push({ kind: 'popular', share: pop, contribution });
    }
    for (let x = 0; x < sourced.length; x++) {
      const [name, values] = sourced[x];
      const contribution = 0 + (scale[name] ?? 0) * (values[ci] - meanExtra[x]);
      if (!(contribution > 1e-9)) continue;
      const item = input.extraSources![name]?.[ci];
      reasons.push(item !== undefined ? { kind: 'shop', signal: name, contribution, item } : { kind: 'shop', signal: name, contribution });
    }
    reasons.sort((a, b) => Math.abs(b.contribution) - Math.abs(a.contribution));
    reasons.length = Math.min(reasons.length, MAX_REASONS);
    reasons.sort((a, b) => b.contribution - a.contribution);
    if (itemVectors && !input.deferItems) nameLinkedItems(reasons, c, (linked ??= input.linked ?? linkedItems(input.memories, itemVectors, input.dots)));
    const given = input.extraReasons?.[ci];
    return { id: c.id, score: scores[ci], features: features[ci], reasons: given?.length ? [...given, ...reasons] : reasons };
  });
  return byScore(out);
}

/** Every candidate of one dimension (a clear error otherwise). */
function checkDims(input: RankInput): void {
  const dim = input.candidates[0].vector.length;
  for (const c of input.candidates) {
    if (c.vector.length !== dim) throw new RangeError(`candidate ${c.id}: dimension ${c.vector.length}, expected ${dim}`);
  }
}

/** The call's frames of the kept dot products: the recent events' items, the memories. */
function framesOf(input: RankInput): { recent?: PairFrame<Float32Array>; memory?: PairFrame<Float32Array> } {
  return {
    recent: input.dots && input.recent?.length ? input.dots.frame(input.recent.map((e) => e.vector)) : undefined,
    memory: input.memoryDots && input.memories.length ? input.memoryDots.frame(input.memories.map((m) => m.embedding.vector)) : undefined,
  };
}

/** Best first, ties in input order. */
function byScore<T extends { score: number }>(out: T[]): T[] {
  return out
    .map((x, i) => ({ x, i }))
    .sort((a, b) => b.x.score - a.x.score || a.i - b.i)
    .map((e) => e.x);
}

/** A card's reasons from its units, the list means of the units' parts and each signal's `weight / sd`: see {@link rank}. */
function reasonsOf(units: readonly Unit[], mean: ReadonlyMap<string, Record<string, number>>, scale: Readonly<Record<string, number>>): Reason[] {
  const reasons: Reason[] = [];
  for (const u of units) {
    const m = mean.get(u.key)!;
    let contribution = 0;
    for (const k in u.parts) contribution += (scale[k] ?? 0) * (u.parts[k] - (m[k] ?? 0));
    if (!u.keep && !(contribution > 1e-9)) continue;
    reasons.push({ ...u.reason, contribution } as Reason);
  }
  reasons.sort((a, b) => Math.abs(b.contribution) - Math.abs(a.contribution));
  reasons.length = Math.min(reasons.length, MAX_REASONS);
  reasons.sort((a, b) => b.contribution - a.contribution);
  return reasons;
}

/** Sums of one unit's parts over the list (each part / n, in candidate order, as {@link rank} adds them). */
type PartMeans = Record<string, number>;

/**
 * {@link rank} for a caller that shows only some of the cards (a whole-catalog shortlist, `limit`):
 * the same order, scores and features, with each card's reasons made only when asked for
 * (`reasons(id)`, the same reasons `rank` would give with `deferItems`; the returned items carry
 * an empty `reasons` until then). The first pass sums each card's signals and each reason's list
 * mean without building the reasons; a card's reasons are then made from its own units.
 */
export function rankDeferred(input: RankInput, cfg: AtomemConfig): { ranked: RankedItem[]; reasons(id: string): Reason[] } {
  if (input.candidates.length === 0) return { ranked: [], reasons: () => [] };
  checkDims(input);
  const lw = listWeights(input, cfg);
  const frames = framesOf(input);
  const n = input.candidates.length;
  const memories = input.memories;
  // unit slots: one per distinct memory key (a repeated memory id shares its unit, as in unitsOf)
  const memSlot = new Map<string, number>();
  const slotOfMemory = lw.memoryKeys.map((k) => {
    let x = memSlot.get(k);
    if (x === undefined) memSlot.set(k, (x = memSlot.size));
    return x;
  });
  const bySlotKey = [...memSlot.keys()];
  const memIndex = new Map<AtomicMemory, number>();
  memories.forEach((m, i) => {
    if (!memIndex.has(m)) memIndex.set(m, i);
  });
  const ms = memSlot.size;
  const meanMemory = new Float64Array(ms);
  const meanProfile = new Float64Array(ms);
  const hasMemory = new Uint8Array(ms);
  const hasProfile = new Uint8Array(ms);
  const curMemory = new Float64Array(ms);
  const curProfile = new Float64Array(ms);
  const stampMemory = new Int32Array(ms).fill(-1);
  const stampProfile = new Int32Array(ms).fill(-1);
  const stampUnit = new Int32Array(ms).fill(-1);
  const recent = input.recent ?? [];
  const recSlot = new Map<string, number>();
  const slotOfRecent = lw.recentKeys.map((k) => {
    let x = recSlot.get(k);
    if (x === undefined) recSlot.set(k, (x = recSlot.size));
    return x;
  });
  const meanRecent = new Float64Array(recSlot.size);
  const curRecent = new Float64Array(recSlot.size);
  const community = new Map<string, PartMeans>();
  let meanPop = 0;
  let hasPop = false;
  const extras = Object.entries(input.extra ?? {});
  const sourced = extras.filter(([name]) => input.extraSources && Object.hasOwn(input.extraSources, name));
  const meanExtra = new Float64Array(sourced.length);
  const shares = input.communities?.itemShares;
  const features: Features[] = new Array(n);
  for (let ci = 0; ci < n; ci++) {
    const c = input.candidates[ci];
    const f: Features = { memory: 0, profile: 0, recent: 0, prototype: 0, communityItems: 0, popularity: 0 };
    const sims = new Float64Array(memories.length);
    const memRow = frames.memory?.row(c.vector);
    for (let i = 0; i < sims.length; i++) sims[i] = memRow ? memRow.at(i) : dot(memories[i].embedding.vector, c.vector);
    const r = retrieve(memories, c.vector, cfg, input.communities, sims);
    for (const o of r.own) {
      const sal = lw.salience.get(o.memory) ?? o.memory.strength * decay(cfg, o.memory.updatedAt, input.now);
      const v = sal * o.similarity;
      f.memory += v;
      const slot = memSlot.get(`m:${o.memory.id}`)!;
      curMemory[slot] = v;
      stampMemory[slot] = ci;
      stampUnit[slot] = ci;
    }
    if (memories.length) {
      const wsum = lw.profileSum;
      if (wsum > 0) {
        for (let i = 0; i < sims.length; i++) {
          const s = sims[i];
          const t = lw.profile[i] * s;
          f.profile += t / wsum;
          const slot = slotOfMemory[i];
          if (s > 0 || stampUnit[slot] === ci) {
            curProfile[slot] = t / wsum;
            stampProfile[slot] = ci;
            stampUnit[slot] = ci;
          }
        }
      }
    }
    for (let slot = 0; slot < ms; slot++) {
      if (stampMemory[slot] === ci) (meanMemory[slot] += curMemory[slot] / n), (hasMemory[slot] = 1);
      if (stampProfile[slot] === ci) (meanProfile[slot] += curProfile[slot] / n), (hasProfile[slot] = 1);
    }
    if (recent.length) {
      const wsum = lw.recentSum;
      const row = frames.recent?.row(c.vector);
      curRecent.fill(0);
      for (let j = 0; j < recent.length; j++) {
        const s = row ? row.at(j) : dot(recent[j].vector, c.vector);
        const part = wsum > 0 ? (recent[j].weight * s) / wsum : 0;
        f.recent += part;
        curRecent[slotOfRecent[j]] += part;
      }
      for (let slot = 0; slot < curRecent.length; slot++) meanRecent[slot] += curRecent[slot] / n;
    }
    let protoBest: PartMeans | undefined;
    for (const { community: k } of r.communities) {
      const v = k.view;
      const p = dot(v.prototype, c.vector);
      const share = v.items && k.itemTotal > 0 ? (v.items[c.id] ?? 0) / k.itemTotal : 0;
      f.communityItems += share;
      const key = `c:${v.id}`;
      let m = community.get(key);
      if (!m) community.set(key, (m = {}));
      m.communityItems = (m.communityItems ?? 0) + share / n;
      // the prototype signal (a maximum) goes to its argmax, exactly as unitsOf assigns it
      if (p > f.prototype || !protoBest) {
        f.prototype = Math.max(f.prototype, p);
        if (p >= f.prototype) protoBest = m;
      }
    }
    if (protoBest) protoBest.prototype = (protoBest.prototype ?? 0) + f.prototype / n;
    if (shares) {
      f.popularity = shares.get(c.id) ?? 0;
      if (f.popularity > 0) (meanPop += f.popularity / n), (hasPop = true);
    }
    for (const [name, values] of extras) f[name] = values[ci];
    for (let x = 0; x < sourced.length; x++) meanExtra[x] += sourced[x][1][ci] / n;
    features[ci] = f;
  }
  const weights = (input.weights ?? cfg.weights) as Readonly<Record<string, number>>;
  const { scores, scale } = combineDetailed(features, weights);
  const mean = new Map<string, Record<string, number>>();
  for (let slot = 0; slot < ms; slot++) {
    const m: Record<string, number> = {};
    if (hasMemory[slot]) m.memory = meanMemory[slot];
    if (hasProfile[slot]) m.profile = meanProfile[slot];
    mean.set(bySlotKey[slot], m);
  }
  for (const [key, slot] of recSlot) mean.set(key, { recent: meanRecent[slot] });
  for (const [key, m] of community) mean.set(key, m);
  if (hasPop) mean.set('pop', { popularity: meanPop });
  sourced.forEach(([name], x) => mean.set(`x:${name}`, { [name]: meanExtra[x] }));
  const index = new Map(input.candidates.map((c, i) => [c.id, i]));
  const ranked = byScore(input.candidates.map((c, i) => ({ id: c.id, score: scores[i], features: features[i], reasons: [] as Reason[] })));
  return {
    ranked,
    reasons: (id) => {
      const i = index.get(id);
      if (i === undefined) throw new RangeError(`rankDeferred: ${id} is not a candidate`);
      const { units } = unitsOf(input, cfg, input.candidates[i], i, lw, frames.recent, frames.memory);
      const reasons = reasonsOf(units, mean, scale);
      const given = input.extraReasons?.[i];
      return given?.length ? [...given, ...reasons] : reasons;
    },
  };
}

/**
 * The ranker's combination rule: each signal standardised within the list (z-score), times its
 * weight, summed. A signal that is constant over the list (up to rounding) adds nothing. Also
 * used by the benchmark's weight tuning, so tuned weights mean exactly what `rank` does.
 */
export function combine(features: readonly Readonly<Record<string, number>>[], weights: Readonly<Record<string, number>>): Float64Array {
  return combineDetailed(features, weights).scores;
}

/** {@link combine}, also returning each signal's mean and `weight / sd` (0 for a skipped signal). */
export function combineDetailed(
  features: readonly Readonly<Record<string, number>>[],
  weights: Readonly<Record<string, number>>,
): { scores: Float64Array; scale: Record<string, number>; mean: Record<string, number> } {
  const scores = new Float64Array(features.length);
  const scale: Record<string, number> = {};
  const means: Record<string, number> = {};
  if (features.length === 0) return { scores, scale, mean: means };
  // why: signals live on very different scales (a popularity share is ~1e-3, a similarity
  // ~0.8); standardising each within the list makes the weights comparable and tunable.
  for (const k of Object.keys(weights)) {
    const w = weights[k];
    if (w === 0) continue;
    // why: a signal this list does not have (e.g. no shop model) counts as constant, i.e. nothing
    const x = (f: Readonly<Record<string, number>>) => (Number.isFinite(f[k]) ? f[k] : 0);
    const { mean: m, sd } = moments(features.length, (i) => x(features[i]));
    if (sd === 0) continue;
    scale[k] = w / sd;
    means[k] = m;
    for (let i = 0; i < features.length; i++) scores[i] += (w * (x(features[i]) - m)) / sd;
  }
  return { scores, scale, mean: means };
}

/**
 * Mean and standard deviation of `n` values (`at(i)`), as the ranker standardises a signal;
 * `sd` is 0 when the values are constant up to rounding (relative to their largest magnitude,
 * so at any scale).
 */
export function moments(n: number, at: (i: number) => number): { mean: number; sd: number } {
  if (n === 0) return { mean: 0, sd: 0 };
  let m = 0;
  let maxAbs = 0;
  for (let i = 0; i < n; i++) {
    const v = at(i);
    m += v;
    maxAbs = Math.max(maxAbs, Math.abs(v));
  }
  m /= n;
  let q = 0;
  for (let i = 0; i < n; i++) q += (at(i) - m) ** 2;
  const sd = Math.sqrt(q / n);
  return { mean: m, sd: sd === 0 || sd < 1e-9 * maxAbs ? 0 : sd };
}

/** z-scores within the list (all 0 when the values are constant), exactly as {@link combine} standardises each signal. */
export function standardize(x: ArrayLike<number>): Float64Array {
  const out = new Float64Array(x.length);
  const { mean, sd } = moments(x.length, (i) => x[i]);
  if (sd === 0) return out;
  for (let i = 0; i < x.length; i++) out[i] = (x[i] - mean) / sd;
  return out;
}
