/**
 * The shelf: what `recommend` shows and why. Retrieval (the whole catalog's shortlist, the stated
 * intent's memories), scoring (`core/rank.ts` over the memory the lifecycle formed, the shop
 * model's signals, the community release), a first visit's prior, diversification of the first
 * row, and each card's reasons. Reads the lifecycle's state; changes nothing in it except the
 * memories' community links (see {@link Shelf.useRelease}).
 */
import type { AtomemConfig } from '../core/config.js';
import { actionWeight, salience } from '../core/memory.js';
import {
  linkedItems,
  nameLinkedItems,
  type LinkedItems,
  type LinkedList,
  rank,
  rankDeferred,
  standardize,
  strongerAction,
  type Candidate,
  type RankInput,
  type RankedItem,
  type Reason,
  type RecentSignal,
} from '../core/rank.js';
import { cleanIntent, intentTerms, selectIntentMemories, termMatch, type IntentMemory } from '../core/intent.js';
import type { CommunityContext, KnownCommunity } from '../core/retrieve.js';
import { DotCache, PairCache, dot, meanNormalized, type PairFrame } from '../core/vector.js';
import { demoteDuplicates, diversify, isNearDuplicate, tailNorms } from '../core/diversify.js';
import { explain, whyKey, type Why } from '../core/explain.js';
import type { Action, AtomicMemory } from '../core/types.js';
import { decodePrototypes, matchMemory } from '../community/release.js';
import { crowdSignal, type CrowdRelease } from '../community/crowd.js';
import type { Release } from '../protocol/index-v2.js';
import type { ItemVectors } from './items.js';
import type { Lifecycle } from './lifecycle.js';
import { mergeRoundRobin, topByDot, topByLists, vectorTable, type VectorTable } from './shortlist.js';

/**
 * Which candidates `recommend` leaves out: `bought` — items with a purchase in the history;
 * `seen` — items of the last `config.recentEvents` events, whatever the action (just looked at,
 * carted or bought); `interacted` — every item in the event history.
 */
export type ExcludeRule = 'bought' | 'seen' | 'interacted';

/** Every {@link ExcludeRule}. */
export const EXCLUDE_RULES: readonly ExcludeRule[] = ['bought', 'seen', 'interacted'];

/** What `recommend` leaves out when `exclude` is not given: the items already bought. */
export const DEFAULT_EXCLUDE: readonly ExcludeRule[] = Object.freeze(['bought'] as ExcludeRule[]);

/** The order of a first visit (no memory, no positive event): see {@link Shelf.recommend}. */
export type FirstVisitPrior = 'shop-popularity' | 'community-popularity' | 'variety';

/** Options of {@link Shelf.recommend}. */
export interface RecommendOptions {
  /** Ranking time for memory decay (default: the agent's clock). */
  now?: number;
  /** Rerank the top this-many listwise with the reasoner (0 = off; rules keep the order). */
  rerank?: number;
  /**
   * Diversify the first `config.diversityDepth` positions by interest coverage (default true;
   * `config.diversity` = the share that makes an interest strong, 0 = off): a shopper with
   * several strong interests sees each in the first row. It also keeps near-duplicates of an
   * owned item off the first row beyond `config.duplicateKeep` (`config.duplicateSimilarity`,
   * 0 = off). `false` = the ranker's order.
   */
  diversify?: boolean;
  /**
   * Leave out items already bought or just seen, … (one rule or several). Default `'bought'`
   * ({@link DEFAULT_EXCLUDE}): a shelf does not offer what the shopper has just bought; `[]` keeps
   * every candidate.
   */
  exclude?: ExcludeRule | readonly ExcludeRule[];
  /**
   * The shopper's stated intent, e.g. "a gift for my dad, he hikes" (at most
   * `INTENT_MAX_CHARS` characters; control characters are removed; non-string, empty or
   * over-long → `InvalidIntentError`). Embedded on the device in the content space, it selects
   * the memories that bear on it and adds the intent signals (`config.intentWeights`) to the
   * ranking. Used for this call only: never stored, never sent.
   */
  intent?: string;
  /**
   * At most this many results (an integer ≥ 1). With candidates: default all of them. Without
   * candidates (the whole catalog): default {@link DEFAULT_LIMIT}.
   */
  limit?: number;
}

/** How many items a whole-catalog `recommend` returns when `limit` is not given. */
export const DEFAULT_LIMIT = 20;

/** Same as {@link RecommendOptions} (the name the intent work used). */
export type RecommendOpts = RecommendOptions;

/**
 * Within the first `depth` cards, a card whose first reason repeats an earlier card's names
 * the next closest item of the same memory instead (still a linked item close to the card), or
 * else leads with its next own reason, so a row of cards from one interest does not read the
 * same reason eight times. Mutates `out`.
 */
function varyFirstReasons(
  out: Recommendation[],
  depth: number,
  titleOf: (id: string) => string | undefined,
  actionOf: (id: string) => Action | undefined,
  keyOf: Map<Why, string> = new Map(),
): void {
  const used = new Set<string>();
  const key = (w: Why) => {
    let k = keyOf.get(w);
    if (k === undefined) keyOf.set(w, (k = whyKey(w)));
    return k;
  };
  for (const r of out.slice(0, depth)) {
    const first = key(r.why[0]);
    const i = r.reasons.findIndex((x) => x.contribution > 0);
    const top = r.reasons[i];
    if (used.has(first) && top?.kind === 'memory' && top.alternatives) {
      for (const alt of top.alternatives) {
        const reasons = [...r.reasons];
        reasons[i] = { ...top, item: alt, alternatives: top.alternatives.filter((x) => x !== alt).concat(top.item ? [top.item] : []) };
        const why = explain({ ...r, reasons }, titleOf, 3, actionOf, keyOf);
        if (!used.has(key(why[0]))) {
          r.reasons = reasons;
          r.why = why;
          break;
        }
      }
    }
    // still a repeat (e.g. every card's sequence signal names the last item): lead with the card's next own reason
    const next = used.has(key(r.why[0])) ? r.why.findIndex((w, j) => j > 0 && !used.has(key(w))) : -1;
    if (next > 0) r.why = [r.why[next], ...r.why.filter((_, j) => j !== next)];
    used.add(key(r.why[0]));
  }
}

/** Positions a first visit's variety order places by farthest-point; the rest keep the input order. */
const VARIETY_SLOTS = 64;

/**
 * Whether a visit at `now` continues a session: the shopper's latest event is less than
 * `gapMinutes` old. No event: a returning (or first) visit.
 */
export function withinSession(events: readonly { at: number }[], now: number, gapMinutes: number): boolean {
  let last = -Infinity;
  for (const e of events) if (e.at > last) last = e.at;
  return now - last < gapMinutes * 60_000;
}

/**
 * Farthest-point order of `vectors` (indices): the most typical item first (nearest the mean),
 * then each next the one least similar to those already placed, for the first `slots` positions.
 */
export function varietyOrder(vectors: readonly Float32Array[], slots: number): number[] {
  const n = vectors.length;
  if (n === 0) return [];
  const dim = vectors[0].length;
  const mean = new Float32Array(dim);
  for (const v of vectors) for (let d = 0; d < dim; d++) mean[d] += v[d] / n;
  let first = 0;
  let best = -Infinity;
  vectors.forEach((v, i) => {
    const s = dot(v, mean);
    if (s > best) (best = s), (first = i);
  });
  const order = [first];
  const taken = new Uint8Array(n);
  taken[first] = 1;
  const maxSim = Float64Array.from(vectors, (v) => dot(v, vectors[first]));
  while (order.length < Math.min(slots, n)) {
    let pick = -1;
    let low = Infinity;
    for (let i = 0; i < n; i++) if (!taken[i] && maxSim[i] < low) (low = maxSim[i]), (pick = i);
    taken[pick] = 1;
    order.push(pick);
    for (let i = 0; i < n; i++) if (!taken[i]) maxSim[i] = Math.max(maxSim[i], dot(vectors[i], vectors[pick]));
  }
  for (let i = 0; i < n; i++) if (!taken[i]) order.push(i);
  return order;
}

/** A ranked recommendation with its reasons as data (the page words them: `reason/wording.ts`). */
export interface Recommendation extends RankedItem {
  /** What the card shows, strongest first (see `core/explain.ts`). */
  why: Why[];
}

/** The memories a stated intent selected (see {@link Shelf.intentMemories}). */
export interface IntentSelection {
  /** The intent as used (cleaned). */
  intent: string;
  /** Best first. */
  memories: { memoryId: string; content: string; category: string; similarity: number }[];
}

/** Equal keys (element by element, by identity). */
function sameKey(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** A placeholder vector (see `Shelf.linkedState`). */
const EMPTY = new Float32Array(0);

/** A unit centred content vector and its tail norms (see core/diversify.ts `isNearDuplicate`). */
interface Centred {
  vector: Float32Array;
  tails: Float64Array;
}

/** The shelf of one user's agent (see the module comment). */
export class Shelf {
  private readonly config: AtomemConfig;
  private readonly items: ItemVectors;
  /** The community release's context in force (see {@link useRelease}). */
  private communities: CommunityContext | undefined;
  /** The verifiable (Prio3) release in force: its counts become the `crowd` signal (community/crowd.ts). */
  private crowd: CrowdRelease | undefined;

  constructor(private readonly life: Lifecycle) {
    this.config = life.config;
    this.items = life.items;
  }

  /**
   * Rank candidate item ids with their reasons (unknown ids → UnknownItemError), best first.
   * Each card's reasons (`why`) name what moved that card (see `core/rank.ts`). With
   * `opts.intent`, the stated intent conditions the ranking (see {@link RecommendOptions.intent}).
   * The first `config.diversityDepth` positions are diversified by interest coverage unless
   * `diversify: false` (or `config.diversity` 0); scores are then reassigned in the new order
   * (the same set of scores, so the list stays sorted by score). On a first visit (no memory,
   * no positive event, no intent) the order is a prior: see {@link FirstVisitPrior}.
   * `candidates` undefined ranks the whole catalog: retrieval shortlists `config.shortlist` items
   * (at least `opts.limit`; see {@link wholeCatalogShortlist}), ranked as above; the best
   * `opts.limit` ({@link DEFAULT_LIMIT}) are returned. Scores are standardised within the list,
   * so a shortlist may in principle order its items differently from the whole catalog; the
   * shortlist holds the items each strong signal puts first.
   */
  async recommend(candidates: readonly string[] | undefined, opts: RecommendOptions = {}): Promise<Recommendation[]> {
    if (!opts || typeof opts !== 'object') throw new TypeError('recommend: opts must be an object');
    const limit = opts.limit ?? (candidates === undefined ? DEFAULT_LIMIT : Infinity);
    if (opts.limit !== undefined && (!Number.isInteger(opts.limit) || opts.limit < 1))
      throw new TypeError(`limit must be an integer ≥ 1, got ${String(opts.limit)}`);
    if (candidates === undefined) return this.recommend(await this.wholeCatalogShortlist(opts, limit), { ...opts, limit });
    if (!Array.isArray(candidates)) throw new TypeError('candidates must be an array of item ids');
    const rerankN = opts.rerank ?? 0;
    if (!Number.isInteger(rerankN) || rerankN < 0) throw new TypeError(`rerank must be an integer ≥ 0, got ${String(opts.rerank)}`);
    if (opts.diversify !== undefined && typeof opts.diversify !== 'boolean') throw new TypeError(`diversify must be a boolean, got ${String(opts.diversify)}`);
    const excluded = this.excluded(opts.exclude === undefined ? DEFAULT_EXCLUDE : opts.exclude);
    const asked = opts.intent === undefined ? undefined : cleanIntent(opts.intent);
    const seen = new Set<string>();
    for (const id of candidates) {
      if (seen.has(id)) throw new TypeError(`candidates contain "${id}" twice`);
      seen.add(id);
    }
    const ids = candidates
      .map((id) => {
        this.items.item(id);
        return id;
      })
      .filter((id) => !excluded.has(id));
    if (ids.length === 0) return [];
    const vecs = await this.items.vectorsOf(ids);
    const cands: Candidate[] = ids.map((id, i) => ({ id, vector: vecs[i].vector }));
    const recent = await this.recentSignals();
    const now = opts.now ?? this.life.clock();
    // the shop's published model scores the candidates from this shopper's own events (nothing leaves the device)
    const shop = this.items.shop;
    const extra: Record<string, ArrayLike<number>> = shop ? { ...shop.signals(this.life.state.events, ids, now, String(this.life.state.nextSeq)) } : {};
    // every shop-model signal gets a reason (pop and trend have no source item)
    const extraSources: Record<string, ArrayLike<string | undefined>> | undefined = shop
      ? { ...Object.fromEntries(Object.keys(extra).map((k) => [k, new Array<string | undefined>(ids.length)])), ...shop.sources(this.life.state.events, ids) }
      : undefined;
    // the verifiable release's counts (no reason of their own: a card is not shown for what others chose)
    if (this.crowd) extra.crowd = crowdSignal(this.crowd, ids);
    // a returning visit at a live moment (at or after the end of the file's log: every visit after
    // the file was published) ranks with the weights fitted on such visits; a visit within a session
    // (the shopper acted in the last sessionGapMinutes) and an offline replay inside the log with the others
    let weights = (
      shop
        ? shop.live(now) && !withinSession(this.life.state.events, now, this.config.sessionGapMinutes)
          ? this.config.shopWeightsLive
          : this.config.shopWeights
        : this.config.weights
    ) as Readonly<Record<string, number>>;
    let extraReasons: Reason[][] | undefined;
    // an intent that matches no candidate ranks nothing: the list is ranked without it, and says so
    let intentText: string | undefined;
    let unmatched: Reason | undefined;
    if (asked !== undefined) {
      const signals = await this.intentSignals(asked, ids, cands, now);
      if (signals.matched) {
        intentText = asked;
        Object.assign(extra, signals.extra);
        extraReasons = signals.reasons;
        weights = { ...weights, ...this.config.intentWeights };
      } else {
        unmatched = { kind: 'intent', intent: asked, similarity: 0, contribution: 0, matched: false };
      }
    }
    // the memories' linked items, so a memory's reason can name the one closest to each card
    const { vectorOf: itemVectors, linked } = await this.linkedState();
    // why deferred: with fewer cards returned than ranked, only the cards that can be shown (or whose reasons
    // the first row's ordering reads) get their memory reasons' items named, a cosine per linked item and card
    const defer = limit < ids.length;
    const firstVisit = intentText === undefined && this.life.state.memories.length === 0 && !this.life.state.events.some((e) => actionWeight(e.action) > 0);
    const input: RankInput = {
      memories: this.life.state.memories,
      candidates: cands,
      recent,
      communities: this.communities,
      now,
      extra,
      extraSources,
      itemVectors,
      linked,
      weights,
      extraReasons,
      deferItems: defer,
      dots: this.itemDots().items,
      memoryDots: this.itemDots().memories,
    };
    // why lazy: with fewer cards shown than ranked, only the cards shown (or read by the first row's ordering) get
    // their reasons made (a first visit's prior replaces every card's reasons, so it ranks eagerly)
    const lazy = defer && !firstVisit ? rankDeferred(input, this.config) : undefined;
    let ranked = lazy ? lazy.ranked : rank(input, this.config);
    const vectorOf = new Map(cands.map((c) => [c.id, c.vector]));
    if (firstVisit) ranked = this.byPrior(ranked, vectorOf, shop ? extra : undefined, ids);
    // item-space vectors of the cards and of the items their reasons name (a card's own first, then a recent item's, then a linked item's)
    const recentById = new Map(recent.map((x) => [x.item, x.vector]));
    const known = { get: (id: string) => vectorOf.get(id) ?? recentById.get(id) ?? itemVectors.get(id) };
    const titleOf = (id: string) => (this.items.has(id) ? this.items.item(id).title : undefined);
    const actionOf = this.actionLookup();
    // each shown reason's whyKey, made once (explain makes it; the first row's variation reads it)
    const keyOf = new Map<Why, string>();
    // a card as shown: its memory reasons' items named (when deferred), kept within its department, worded
    const shown = (r: RankedItem): Recommendation => {
      if (lazy) r.reasons = lazy.reasons(r.id);
      if (defer) nameLinkedItems(r.reasons, { id: r.id, vector: vectorOf.get(r.id)! }, linked);
      const kept = this.withinDepartment(r, known);
      return { ...kept, why: explain(kept, titleOf, 3, actionOf, keyOf) };
    };
    const ready = new Map<string, Recommendation>();
    const full = (r: RankedItem): Recommendation => {
      let x = ready.get(r.id);
      if (!x) ready.set(r.id, (x = shown(r)));
      return x;
    };
    const original = new Map(ranked.map((r) => [r.id, r]));
    // deferred cards carry this `why` until shown (see `materialize`)
    const UNSHOWN: Why[] = [];
    let out: Recommendation[] = defer ? ranked.map((r) => ({ ...r, why: UNSHOWN })) : ranked.map(full);
    // the first `n` cards made as shown (their reasons and why from `full`, a `why` set by diversification kept)
    const materialize = (n: number) => {
      for (let i = 0; i < Math.min(n, out.length); i++) {
        const r = out[i];
        const f = full(original.get(r.id)!);
        out[i] = { ...r, reasons: f.reasons, why: r.why === UNSHOWN ? f.why : r.why };
      }
    };
    const whyOf = (r: Recommendation) => (r.why === UNSHOWN ? full(original.get(r.id)!).why : r.why);
    if (!firstVisit && opts.diversify !== false && this.config.diversity > 0) out = this.diversified(out, vectorOf, now, whyOf);
    if (opts.diversify !== false && this.config.duplicateSimilarity > 0) out = await this.withoutDuplicates(out);
    if (defer) materialize(Math.max(limit, this.config.diversityDepth, rerankN));
    varyFirstReasons(out, this.config.diversityDepth, titleOf, actionOf, keyOf);
    const top = Math.min(rerankN, out.length);
    if (top >= 2 && this.life.reasoner !== this.life.rules) out = [...(await this.rerankTop(out.slice(0, top), intentText)), ...out.slice(top)];
    // the list's first card says that the intent matched nothing (once, not on every card)
    if (unmatched && out.length)
      out[0] = {
        ...out[0],
        reasons: [unmatched, ...out[0].reasons],
        why: [explain({ ...out[0], score: 0, reasons: [unmatched] }, titleOf)[0], ...out[0].why.slice(0, 2)],
      };
    return out.length > limit ? out.slice(0, limit) : out;
  }

  /** Item-space dot products kept across calls (see {@link itemDots}). */
  private dots?: { space: string; items: DotCache; memories: DotCache };

  /**
   * The item space's {@link DotCache}s, started over when the item space changes (a new space
   * id: centring, the shop's file); an edited item's new vector, or a changed memory's (a memory's
   * vector is replaced, never changed in place), misses by itself. `items`: the recent events' and
   * the memories' linked items against the cards; `memories`: the memories against the cards (a
   * column per memory vector, so the cache starts over after `maxColumns` memory changes).
   */
  private itemDots(): { items: DotCache; memories: DotCache } {
    const space = this.items.embedderId;
    // bounds: at most 2 MiB and 1 MiB of numbers (2^18 and 2^17 float64s)
    if (this.dots?.space !== space) this.dots = { space, items: new DotCache(1 << 18), memories: new DotCache(1 << 17, 512) };
    return this.dots;
  }

  /** Item-space and content-space vector tables of the whole catalog, rebuilt when the space or the catalog size changes. */
  private tables: {
    item?: { key: string; table: VectorTable };
    content?: { key: string; table: VectorTable };
    popular?: { key: string; rows: number[] };
    trending?: { key: string; rows: number[] };
  } = {};

  private async catalogTable(kind: 'item' | 'content'): Promise<VectorTable> {
    const key = `${kind === 'item' ? this.items.embedderId : this.items.contentSpaceId}|${this.items.size}`;
    const hit = this.tables[kind];
    if (hit?.key === key) return hit.table;
    const ids = [...this.items.all()].map((it) => it.id);
    const vecs = kind === 'item' ? await this.items.vectorsOf(ids) : await this.items.contentVectorsOf(ids);
    const table = vectorTable(
      ids,
      vecs.map((e) => e.vector),
    );
    this.tables[kind] = { key, table };
    return table;
  }

  /**
   * The candidates of a whole-catalog `recommend` (see `agent/shortlist.ts`): the shop model's
   * neighbour lists of the shopper's recent positive items, the items nearest the shopper's
   * profile vector (positive memories by strength + recent events by action and recency), the
   * stated intent's nearest items in the content space, the shop's most popular items (or,
   * with no shop file and nothing known, an even sample of the catalog) and, at a live moment,
   * the items most popular in the file's last week — merged round-robin
   * into `max(config.shortlist, limit)` items, excluded items left out.
   */
  private async wholeCatalogShortlist(opts: RecommendOptions, limit: number): Promise<string[]> {
    const size = Math.max(this.config.shortlist, limit);
    const excluded = this.excluded(opts.exclude === undefined ? DEFAULT_EXCLUDE : opts.exclude);
    const sources: string[][] = [];
    const shop = this.items.shop;
    // the shopper's distinct items, most recent first, with action weight × recency
    const mine: { id: string; w: number }[] = [];
    const seen = new Set<string>();
    for (let i = this.life.state.events.length - 1; i >= 0 && mine.length < 20; i--) {
      const e = this.life.state.events[i];
      if (seen.has(e.item)) continue;
      seen.add(e.item);
      const w = actionWeight(e.action);
      if (w > 0) mine.push({ id: e.item, w: w * 0.8 ** mine.length });
    }
    if (shop && mine.length) {
      const rows = mine.flatMap(({ id, w }) => {
        const row = shop.scorer.indexOf(id);
        return row === undefined ? [] : [{ row, w }];
      });
      const items = shop.model.items;
      sources.push(topByLists(Object.values(shop.model.lists), rows, size, (t) => excluded.has(items[t]) || !this.items.has(items[t])).map((t) => items[t]));
    }
    const table = await this.catalogTable('item');
    const skip = (i: number) => excluded.has(table.ids[i]);
    const query = new Float64Array(table.dim);
    let any = false;
    for (const m of this.life.state.memories) {
      if (m.strength <= 0 || m.embedding.embedderId !== this.items.embedderId || m.embedding.vector.length !== table.dim) continue;
      for (let d = 0; d < table.dim; d++) query[d] += m.strength * m.embedding.vector[d];
      any = true;
    }
    const recent = mine.slice(0, Math.max(1, this.config.recentEvents)).filter((x) => this.items.has(x.id));
    for (const [k, e] of (await this.items.vectorsOf(recent.map((x) => x.id))).entries()) {
      for (let d = 0; d < table.dim; d++) query[d] += recent[k].w * e.vector[d];
      any = true;
    }
    if (any) sources.push(topByDot(table, query, size, skip).map((i) => table.ids[i]));
    if (opts.intent !== undefined) {
      const content = await this.catalogTable('content');
      const q = await this.items.embedText(cleanIntent(opts.intent));
      sources.push(topByDot(content, q.vector, size, (i) => excluded.has(content.ids[i])).map((i) => content.ids[i]));
    }
    if (shop) {
      const key = `${shop.id}`;
      if (this.tables.popular?.key !== key) {
        const pop = shop.model.popularity;
        this.tables.popular = {
          key,
          rows: Array.from(pop.keys())
            .filter((r) => pop[r] > 0)
            .sort((a, b) => pop[b] - pop[a] || a - b)
            .slice(0, 5000),
        };
      }
      const items = shop.model.items;
      // the first `size` of ranked rows whose items the catalog has and the shopper has not excluded
      const firstOf = (rows: readonly number[]): string[] => {
        const ids: string[] = [];
        for (const r of rows) {
          if (ids.length >= size) break;
          const id = items[r];
          if (this.items.has(id) && !excluded.has(id)) ids.push(id);
        }
        return ids;
      };
      sources.push(firstOf(this.tables.popular.rows));
      // a live moment ranks with the week's popularity (shopWeightsLive): the week's best sellers reach the shortlist too
      const recentPop = shop.model.popRecent;
      if (recentPop && shop.live(opts.now ?? this.life.clock())) {
        if (this.tables.trending?.key !== key)
          this.tables.trending = {
            key,
            rows: Array.from(recentPop.items.keys())
              .sort((a, b) => recentPop.counts[b] - recentPop.counts[a] || recentPop.items[a] - recentPop.items[b])
              .slice(0, 5000)
              .map((k) => recentPop.items[k]),
          };
        sources.push(firstOf(this.tables.trending.rows));
      }
    }
    const out = mergeRoundRobin(sources, size);
    if (out.length < size) {
      // nothing known and no shop popularity, or a small catalog: filled with an even sample of the catalog (a first visit's variety order spreads it)
      const taken = new Set(out);
      const step = Math.max(1, Math.floor(table.ids.length / (size - out.length)));
      for (let start = 0; start < step && out.length < size; start++) {
        for (let i = start; i < table.ids.length && out.length < size; i += step) {
          const id = table.ids[i];
          if (!excluded.has(id) && !taken.has(id)) taken.add(id), out.push(id);
        }
      }
    }
    return out;
  }

  /**
   * The memories a stated intent selects (STEAM-style retrieval with the intent as the query, over
   * the memories' content centroids), for inspection. Same validation as `recommend`'s intent;
   * nothing is stored.
   */
  async intentMemories(intent: string): Promise<IntentSelection> {
    const text = cleanIntent(intent);
    const { selected } = await this.intentQuery(text);
    return {
      intent: text,
      memories: selected.map((s) => ({ memoryId: s.memory.id, content: s.memory.content, category: s.memory.category, similarity: s.similarity })),
    };
  }

  /** Embed the (clean) intent in the content space and select the memories that bear on it. */
  private async intentQuery(text: string): Promise<{ vector: Float32Array; selected: IntentMemory[]; average: number }> {
    const { vector } = await this.items.embedText(text);
    // why: with the shop's model loaded, memory vectors live in its collaborative space; the intent
    // is text, so memories are compared through their items' content centroid instead.
    const centroids = new Map<string, Float32Array>();
    const contentId = this.items.contentSpaceId;
    for (const m of this.life.state.memories) {
      if (m.strength <= 0) continue;
      if (m.embedding.embedderId === contentId) {
        centroids.set(m.id, m.embedding.vector);
        continue;
      }
      const known = m.items.filter((id) => this.items.has(id));
      if (known.length === 0) continue;
      centroids.set(m.id, meanNormalized((await this.items.contentVectorsOf(known)).map((e) => e.vector)));
    }
    // why: "bears on it" = closer to the intent than the catalog's average item is (cosines spread
    // differently per space: around 0 when centred, around 0.5 in raw USE-lite)
    const average = dot(vector, await this.items.contentMean());
    const selected = selectIntentMemories(
      this.life.state.memories,
      vector,
      (m) => centroids.get(m.id),
      this.config.intentMemories,
      Math.max(this.config.intentMinSimilarity, average),
    );
    return { vector, selected, average };
  }

  /**
   * The intent's signals per candidate (see `AtomemConfig.intentWeights`) and the reasons that say
   * how the intent and the memory met, given only to the candidates the intent matches
   * (`config.intentMatch`); `matched` is false when it matches none.
   */
  private async intentSignals(
    text: string,
    ids: readonly string[],
    cands: readonly Candidate[],
    now: number,
  ): Promise<{ extra: Record<string, Float64Array>; reasons: Reason[][]; matched: boolean }> {
    const { vector, selected, average } = await this.intentQuery(text);
    const content = await this.items.contentVectorsOf(ids);
    const terms = new Set(intentTerms(text));
    const n = ids.length;
    const intent = new Float64Array(n);
    const covered = new Float64Array(n);
    const categories = new Float64Array(n);
    const memory = new Float64Array(n);
    const best: (IntentMemory | undefined)[] = new Array(n);
    const bestCos = new Float64Array(n);
    const space = this.items.embedderId;
    const sel = selected
      .filter((s) => s.memory.embedding.embedderId === space)
      .map((s) => ({ ...s, w: salience(this.config, s.memory, now) * Math.max(0, s.similarity) }));
    for (let i = 0; i < n; i++) {
      intent[i] = dot(vector, content[i].vector);
      const t = termMatch(terms, this.items.item(ids[i]));
      covered[i] = t.covered;
      categories[i] = t.categories;
      let top = 0;
      for (const s of sel) {
        const cos = dot(s.memory.embedding.vector, cands[i].vector);
        const v = s.w * cos;
        memory[i] += v;
        if (v > top) {
          top = v;
          best[i] = s;
          bestCos[i] = cos;
        }
      }
    }
    const w = this.config.intentWeights;
    const z = standardize;
    const zi = z(intent),
      zc = z(covered),
      zk = z(categories),
      zm = z(memory);
    const reasons: Reason[][] = [];
    // why rescaled: cosines spread differently per space (around 0 when centred, around 0.5 in raw USE-lite)
    const matches = (i: number) => covered[i] > 0 || (intent[i] - average) / Math.max(1e-6, 1 - average) >= this.config.intentMatch;
    let matched = false;
    for (let i = 0; i < n; i++) {
      if (!matches(i)) {
        reasons.push([]);
        continue;
      }
      matched = true;
      const textPart = (w.intent ?? 0) * zi[i] + (w.intentTerms ?? 0) * zc[i] + (w.intentCategories ?? 0) * zk[i];
      const memoryPart = (w.intentMemory ?? 0) * zm[i];
      const list: Reason[] = [];
      // the intent met a memory: the candidate fits the intent and is like (cosine ≥ tau) a memory the intent
      // selected — whatever intentMemory weighs, the memory's own signals rank it among the intent's items —
      // or the intent-selected memory itself lifted it
      const b = best[i];
      const met = b !== undefined && ((textPart > 0 && bestCos[i] >= this.config.tau) || memoryPart > 0);
      if (b && met) {
        const item = await this.nearestItem(b.memory, cands[i].vector);
        const action = item ? [...this.life.state.events].reverse().find((e) => e.item === item)?.action : undefined;
        list.push({
          kind: 'intent',
          intent: text,
          similarity: intent[i],
          contribution: memoryPart + Math.max(0, textPart),
          memoryId: b.memory.id,
          content: b.memory.content,
          ...(item ? { item } : {}),
          ...(action ? { action } : {}),
        });
      } else if (textPart > 0) {
        list.push({ kind: 'intent', intent: text, similarity: intent[i], contribution: textPart });
      }
      reasons.push(list);
    }
    return { extra: { intent, intentTerms: covered, intentCategories: categories, intentMemory: memory }, reasons, matched };
  }

  /** The memory's linked item most like `vector` (item space), if any is still in the catalog. */
  private async nearestItem(m: AtomicMemory, vector: Float32Array): Promise<string | undefined> {
    const known = m.items.filter((id) => this.items.has(id));
    if (known.length === 0) return undefined;
    const vs = await this.items.vectorsOf(known);
    let best = known[known.length - 1];
    let bestSim = -Infinity;
    vs.forEach((v, i) => {
      const s = dot(v.vector, vector);
      if (s > bestSim) {
        bestSim = s;
        best = known[i];
      }
    });
    return best;
  }

  /** Ids the `exclude` rules drop (see {@link ExcludeRule}); a bad rule → TypeError. */
  private excluded(exclude: RecommendOptions['exclude']): ReadonlySet<string> {
    if (exclude === undefined) return new Set<string>();
    const rules = typeof exclude === 'string' ? [exclude] : exclude;
    if (!Array.isArray(rules)) throw new TypeError(`exclude must be one of ${EXCLUDE_RULES.join(', ')} or an array of them, got ${String(exclude)}`);
    for (const r of rules)
      if (!EXCLUDE_RULES.includes(r)) throw new TypeError(`exclude: unknown rule "${String(r)}" (expected one of ${EXCLUDE_RULES.join(', ')})`);
    // why kept: the set changes only with the event history (and the rules)
    const key = [...this.eventsKey(), this.config.recentEvents, ...rules];
    if (this.excludedMemo && sameKey(this.excludedMemo.key, key)) return this.excludedMemo.set;
    const out = new Set<string>();
    for (const r of rules) {
      const events = r === 'seen' ? this.life.state.events.slice(-Math.max(1, this.config.recentEvents)) : this.life.state.events;
      for (const e of events) if (r !== 'bought' || e.action === 'purchase') out.add(e.item);
    }
    this.excludedMemo = { key, set: out };
    return out;
  }

  /** {@link excluded}'s last answer and the event history and rules it was made from. */
  private excludedMemo?: { key: readonly unknown[]; set: ReadonlySet<string> };

  /**
   * A first visit's order (nothing known about the shopper): the shop model's popularity when a
   * shop model is loaded, else the community release's popularity when there is one, else a
   * neutral variety order (farthest-point over the item vectors, from the most typical item), so
   * the first row spans the catalog instead of showing its first page. Each card's one reason
   * says which.
   */
  private byPrior(
    ranked: RankedItem[],
    vectorOf: ReadonlyMap<string, Float32Array>,
    extra: Readonly<Record<string, ArrayLike<number>>> | undefined,
    ids: readonly string[],
  ): RankedItem[] {
    const index = new Map(ids.map((id, i) => [id, i]));
    const pop = extra?.pop;
    const shopPrior = pop !== undefined && Array.from(pop).some((x) => x !== pop[0]);
    const communityPrior = !shopPrior && ranked.some((r) => r.features.popularity > 0);
    if (shopPrior || communityPrior) {
      const value = (r: RankedItem) => (shopPrior ? pop![index.get(r.id)!] : r.features.popularity);
      const xs = ranked.map(value);
      const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
      const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length) || 1;
      return ranked
        .map((r, k) => ({ r, k, z: (xs[k] - mean) / sd }))
        .sort((a, b) => b.z - a.z || index.get(a.r.id)! - index.get(b.r.id)!)
        .map(({ r, z }) => ({
          ...r,
          score: z,
          reasons: [
            shopPrior
              ? { kind: 'prior' as const, prior: 'shop-popularity' as const, contribution: z }
              : { kind: 'prior' as const, prior: 'community-popularity' as const, share: r.features.popularity, contribution: z },
          ],
        }));
    }
    const byInput = [...ranked].sort((a, b) => index.get(a.id)! - index.get(b.id)!);
    const order = varietyOrder(
      byInput.map((r) => vectorOf.get(r.id)!),
      VARIETY_SLOTS,
    );
    return order.map((k) => ({ ...byInput[k], score: 0, reasons: [{ kind: 'prior' as const, prior: 'variety' as const, contribution: 0 }] }));
  }

  /**
   * The card's reasons kept within its department: a reason naming one of the shopper's items
   * that shares no category with the card (a frying pan for a headlamp) names the memory's next
   * linked item that does, or — when the shop's collaborative vectors put the two together
   * (cosine ≥ halfway from tau to mergeThreshold in that space) — is worded as what it is, shoppers' co-interest; otherwise it
   * is left out of the card's reasons (its share of the score stays). A shop-model reason (already
   * worded as shoppers' behaviour) across departments needs the same collaborative cosine. Items
   * without categories are never judged. `vectorOf`: item-space vectors of the card and the items its reasons name.
   */
  private withinDepartment(r: RankedItem, vectorOf: { get(id: string): Float32Array | undefined }): RankedItem {
    const cats = this.items.has(r.id) ? this.items.item(r.id).categories : undefined;
    if (!cats?.length) return r;
    const reasons: Reason[] = [];
    for (const x of r.reasons) {
      if (x.kind === 'memory' && x.item !== undefined && !this.sameDepartment(x.item, cats)) {
        const alternatives = (x.alternatives ?? []).filter((id) => this.sameDepartment(id, cats));
        if (alternatives.length) reasons.push({ ...x, item: alternatives[0], alternatives: alternatives.slice(1) });
        else if (this.collaborative(r.id, x.item, vectorOf)) reasons.push({ kind: 'shop', signal: 'vec', contribution: x.contribution, item: x.item });
        continue;
      }
      if (x.kind === 'memory' && x.alternatives) {
        reasons.push({ ...x, alternatives: x.alternatives.filter((id) => this.sameDepartment(id, cats)) });
        continue;
      }
      if (x.kind === 'recent' && !this.sameDepartment(x.item, cats)) {
        if (this.collaborative(r.id, x.item, vectorOf)) reasons.push({ kind: 'shop', signal: 'vec', contribution: x.contribution, item: x.item });
        continue;
      }
      // a shop-model reason across departments stands only when the shop's vectors put the two items together
      if (x.kind === 'shop' && x.item !== undefined && !this.sameDepartment(x.item, cats) && !this.collaborative(r.id, x.item, vectorOf)) continue;
      if (x.kind === 'intent' && x.item !== undefined && !this.sameDepartment(x.item, cats)) {
        // the intent still matches the card; the memory it met is of another department
        reasons.push({ kind: 'intent', intent: x.intent, similarity: x.similarity, contribution: x.contribution });
        continue;
      }
      reasons.push(x);
    }
    return reasons.length === r.reasons.length && reasons.every((x, i) => x === r.reasons[i]) ? r : { ...r, reasons };
  }

  /** True when item `id` is in the catalog and shares a category with `cats` (or has none). */
  private sameDepartment(id: string, cats: readonly string[]): boolean {
    if (!this.items.has(id)) return false;
    const c = this.items.item(id).categories;
    return !c?.length || c.some((x) => cats.includes(x));
  }

  /** True when the shop's collaborative vectors put `card` and `id` together (see {@link withinDepartment}). */
  private collaborative(card: string, id: string, vectorOf: { get(id: string): Float32Array | undefined }): boolean {
    if (!this.items.shop) return false;
    const a = vectorOf.get(card);
    const b = vectorOf.get(id);
    // why halfway to mergeThreshold: tau (the 0.9 quantile of random pairs in the shop's space) is too weak a bond to cross a department on
    return !!a && !!b && dot(a, b) >= (this.config.tau + this.config.mergeThreshold) / 2;
  }

  /**
   * Unit centred content vectors by content vector, for the catalog mean they were centred with,
   * and which pairs of them are near-duplicates at `threshold` (see {@link withoutDuplicates}).
   */
  private centredCache?: {
    mean: Float32Array;
    byVector: WeakMap<Float32Array, Centred>;
    threshold: number;
    duplicate: PairCache<Centred>;
  };

  /**
   * Near-duplicates of an owned item (bought: `config.duplicateActions`) beyond
   * `config.duplicateKeep` per owned item moved after the first row (see core/diversify.ts
   * `demoteDuplicates`); scores are reassigned in the new order, as {@link diversified} does.
   */
  /** The items the shopper owns (`config.duplicateActions`, in the catalog), for the event history and catalog size they were listed from. */
  private ownedMemo?: {
    key: readonly unknown[];
    owned: string[];
    /** The owned items' centred vectors, their columns, and each card's near-duplicates among them (by the card's centred vector). */
    centred?: { cache: object | undefined; vecs: Centred[]; frame: PairFrame<Centred>; hits: WeakMap<Centred, string[]> };
  };

  private async withoutDuplicates(out: Recommendation[]): Promise<Recommendation[]> {
    const ownedKey = [...this.eventsKey(), this.items.size];
    if (!this.ownedMemo || !sameKey(this.ownedMemo.key, ownedKey)) {
      const actions = new Set(this.config.duplicateActions);
      this.ownedMemo = {
        key: ownedKey,
        owned: [...new Set(this.life.state.events.filter((e) => actions.has(e.action) && this.items.has(e.item)).map((e) => e.item))],
      };
    }
    const ownedState = this.ownedMemo;
    const owned = ownedState.owned;
    const depth = this.config.diversityDepth;
    if (owned.length === 0 || depth < 1 || out.length < 2) return out;
    // the candidates a first row can reach: the row, plus as many as could be set aside
    const reach = out.slice(0, Math.min(out.length, depth * (1 + Math.max(1, owned.length)) + 8));
    const mean = await this.items.contentMean();
    // why cached: an item's content vector and the catalog mean are stable objects until the catalog or the space changes
    const threshold = this.config.duplicateSimilarity;
    if (this.centredCache?.mean !== mean || this.centredCache.threshold !== threshold)
      this.centredCache = { mean, byVector: new WeakMap(), threshold, duplicate: new PairCache((c, o) => (isNearDuplicate(c, o, threshold) ? 1 : 0), 1 << 17) };
    const centredState = this.centredCache;
    const duplicate = centredState.duplicate;
    const cache = centredState.byVector;
    const centred = (v: Float32Array): Centred => {
      const hit = cache.get(v);
      if (hit) return hit;
      const c = new Float32Array(v.length);
      let norm = 0;
      for (let d = 0; d < v.length; d++) {
        c[d] = v[d] - (mean[d] ?? 0);
        norm += c[d] * c[d];
      }
      norm = Math.sqrt(norm) || 1;
      for (let d = 0; d < v.length; d++) c[d] /= norm;
      const entry = { vector: c, tails: tailNorms(c) };
      cache.set(v, entry);
      return entry;
    };
    // the owned items' centred vectors and their columns, once per owned list and centring
    let known = ownedState.centred;
    if (known?.cache !== centredState) {
      const vecs = (await this.items.contentVectorsOf(owned)).map((e) => centred(e.vector));
      known = ownedState.centred = { cache: centredState, vecs, frame: duplicate.frame(vecs), hits: new WeakMap() };
    }
    const ownedVecs = known.vecs;
    const candVecs = (await this.items.contentVectorsOf(reach.map((r) => r.id))).map((e) => centred(e.vector));
    // why cached across calls: whether two catalog items are near-duplicates does not change until the catalog does
    const frame = known.frame;
    const kept = known.hits;
    const dupes = candVecs.map((c) => {
      let hits = kept.get(c);
      if (!hits) {
        const row = frame.row(c);
        hits = [];
        for (let k = 0; k < ownedVecs.length; k++) if (row.at(k) === 1) hits.push(owned[k]);
        kept.set(c, hits);
      }
      return hits;
    });
    const order = demoteDuplicates(dupes, this.config.duplicateKeep, depth);
    if (order.every((k, i) => k === i)) return out;
    return [...order.map((k, i) => ({ ...out[k], score: out[i].score })), ...out.slice(reach.length)];
  }

  /** The first row made to cover each strong interest (see core/diversify.ts). */
  private diversified(
    out: Recommendation[],
    vectorOf: ReadonlyMap<string, Float32Array>,
    now: number,
    whyOf: (r: Recommendation) => Why[] = (r) => r.why,
  ): Recommendation[] {
    const positive = this.life.state.memories.filter((m) => m.strength > 0 && m.embedding.vector.length === (vectorOf.values().next().value?.length ?? -1));
    const aspects = positive.map((m) => ({ vector: m.embedding.vector, weight: salience(this.config, m, now) * Math.log1p(m.evidence) }));
    const depth = this.config.diversityDepth;
    const order = diversify(
      out.map((r) => ({ score: r.score, vector: vectorOf.get(r.id)! })),
      aspects,
      { minShare: this.config.diversity, depth, tau: this.config.tau },
      this.itemDots().memories,
    );
    if (order.every((k, i) => k === i)) return out;
    return order.map((k, i) => {
      const r = { ...out[k], score: out[i].score };
      // a card brought into the first row for an interest says which, if its own reasons had nothing positive
      if (i < depth && k >= depth && (whyOf(r)[0].kind === 'low-score' || whyOf(r)[0].kind === 'no-support')) {
        const v = vectorOf.get(r.id)!;
        const best = positive
          .map((m, a) => ({ m, w: aspects[a].weight, s: dot(m.embedding.vector, v) }))
          .filter((x) => x.s >= this.config.tau)
          .sort((x, y) => y.w - x.w)[0];
        if (best) r.why = [{ kind: 'other-interest', memoryId: best.m.id, interest: best.m.content }];
      }
      return r;
    });
  }

  /** {@link linkedState}'s last answer and what it was made from. */
  private linkedKept?: {
    dots: DotCache;
    /** `items.version` when made: while unchanged, every vector of `seen` is still the item's. */
    version: number;
    /** Per memory (state order): its id, its linked items as read then and each one's vector then (undefined: not in the catalog). */
    seen: { id: string; items: string[]; vectors: (Float32Array | undefined)[] }[];
    vectorOf: Map<string, Float32Array>;
    linked: LinkedItems;
  };

  /**
   * True when memory `m`'s linked items and their vectors are still those of `seen` (`vectors`:
   * the item vectors may have changed since, so each one is compared).
   */
  private sameLinks(m: AtomicMemory, seen: { id: string; items: string[]; vectors: (Float32Array | undefined)[] }, vectors: boolean): boolean {
    const items = m.items;
    if (m.id !== seen.id || items.length !== seen.items.length) return false;
    for (let k = 0; k < items.length; k++) {
      const id = items[k];
      if (id !== seen.items[k]) return false;
      if (!vectors) continue;
      const v = seen.vectors[k];
      // why both: an item's vector is a new object after an edit or a new item space; a missing item may be added later
      if (v === undefined ? this.items.has(id) : this.items.cached(id)?.vector !== v) return false;
    }
    return true;
  }

  /**
   * The memories' linked items (those in the catalog) → their item-space vectors (first
   * appearance order; the ones not computed yet in one batch), and the same resolved for
   * naming (`core/rank.ts` {@link LinkedItems}), kept across calls while every memory's linked
   * items and their vectors are unchanged; after a change, the named items of the memories whose
   * linked items did not change are kept.
   */
  private async linkedState(): Promise<{ vectorOf: Map<string, Float32Array>; linked: LinkedItems }> {
    const memories = this.life.state.memories;
    const dots = this.itemDots().items;
    const kept = this.linkedKept?.dots === dots ? this.linkedKept : undefined;
    const vectors = kept?.version !== this.items.version;
    if (kept && kept.seen.length === memories.length && memories.every((m, i) => this.sameLinks(m, kept.seen[i], vectors))) {
      kept.version = this.items.version;
      return kept;
    }
    const version = this.items.version;
    const vectorOf = new Map<string, Float32Array>();
    const missing: string[] = [];
    for (const m of memories) {
      for (const id of m.items) {
        if (vectorOf.has(id) || !this.items.has(id)) continue;
        const e = this.items.cached(id);
        // a placeholder keeps the first-appearance order; filled below
        vectorOf.set(id, e ? e.vector : EMPTY);
        if (!e) missing.push(id);
      }
    }
    if (missing.length) (await this.items.vectorsOf(missing)).forEach((e, i) => vectorOf.set(missing[i], e.vector));
    const seen = memories.map((m) => ({ id: m.id, items: [...m.items], vectors: m.items.map((id) => vectorOf.get(id)) }));
    // the named items of a memory whose linked items and vectors are unchanged stay valid
    const named = new Map<string, LinkedList['named']>();
    if (kept) {
      const before = new Map<string, (typeof seen)[number]>();
      for (const x of kept.seen) if (!before.has(x.id)) before.set(x.id, x);
      for (const m of memories) {
        const b = before.get(m.id);
        const list = kept.linked.byMemory.get(m.id);
        if (b && list && !named.has(m.id) && this.sameLinks(m, b, true)) named.set(m.id, list.named);
      }
    }
    this.linkedKept = { dots, version, seen, vectorOf, linked: linkedItems(memories, vectorOf, dots, named) };
    return this.linkedKept;
  }

  /** {@link recentSignals}' last answer and what it was made from. */
  private recentMemo?: { key: readonly unknown[]; recent: RecentSignal[] };

  /**
   * The last `config.recentEvents` events' items with their item-space vectors and weights
   * (action weight × 0.9 per later event), kept until the event history, the catalog or the item space changes.
   */
  private async recentSignals(): Promise<RecentSignal[]> {
    const n = this.config.recentEvents;
    const key = [...this.eventsKey(), n, this.items.version, this.items.embedderId];
    if (this.recentMemo && sameKey(this.recentMemo.key, key)) return this.recentMemo.recent;
    // why: a delisted product may still be in the history; it just stops counting as recent.
    const recentEvents = n > 0 ? this.life.state.events.slice(-n).filter((e) => this.items.has(e.item)) : [];
    const recentVecs = await this.items.vectorsOf(recentEvents.map((e) => e.item));
    const recent: RecentSignal[] = recentEvents.map((e, i) => ({
      item: e.item,
      vector: recentVecs[i].vector,
      weight: actionWeight(e.action) * 0.9 ** (recentEvents.length - 1 - i),
      action: e.action,
    }));
    this.recentMemo = { key, recent };
    return recent;
  }

  /** {@link actionLookup}'s last answer and the event history it was made from. */
  private actionsMemo?: { key: readonly unknown[]; lookup: (id: string) => Action | undefined };

  /**
   * A key that changes whenever the event history does (events are appended, trimmed from the
   * front, erased or replaced; each append takes a new sequence number).
   */
  private eventsKey(): readonly unknown[] {
    const ev = this.life.state.events;
    return [ev, ev.length, ev[0], ev[ev.length - 1], this.life.state.nextSeq];
  }

  /** Item → the shopper's strongest positive action on it (purchase > cart > like > rate > click > view), for wording. */
  private actionLookup(): (id: string) => Action | undefined {
    const key = this.eventsKey();
    if (this.actionsMemo && sameKey(this.actionsMemo.key, key)) return this.actionsMemo.lookup;
    const lookup = this.actionLookupOf();
    this.actionsMemo = { key, lookup };
    return lookup;
  }

  private actionLookupOf(): (id: string) => Action | undefined {
    const best = new Map<string, Action>();
    for (const e of this.life.state.events) {
      if (actionWeight(e.action) <= 0) continue;
      if (strongerAction(e.action, best.get(e.item))) best.set(e.item, e.action);
    }
    return (id) => best.get(id);
  }

  /**
   * Listwise reranking of the top of a ranking by the reasoner, with its one-line reason first
   * among the card's reasons (`model`). Scores are reassigned in the new order (the same set of scores, so
   * the list stays sorted by score). The rules reasoner (also the fallback) keeps the order.
   */
  private async rerankTop(top: Recommendation[], intent?: string): Promise<Recommendation[]> {
    const memories = this.life
      .memories()
      .slice(0, 8)
      .map((m) => this.life.view(m));
    // ARS's ranker reads the profile, the recent events and the stated intent
    const recent = this.life.state.events
      .slice(-8)
      .filter((e) => this.items.has(e.item))
      .map((e) => ({ item: this.items.item(e.item), action: e.action }));
    const profile = this.life.state.profile?.narrative.slice(0, this.config.profileMaxChars) || undefined;
    const input = {
      memories,
      candidates: top.map((t) => ({ id: t.id, item: this.items.item(t.id) })),
      recent,
      ...(profile ? { profile } : {}),
      ...(intent !== undefined ? { intent } : {}),
    };
    const result = await this.life.reason((r) => r.rerank(input));
    const byId = new Map(top.map((t) => [t.id, t]));
    return result.order.map((o, i) => {
      const t = byId.get(o.id)!;
      return { ...t, score: top[i].score, why: o.why ? [{ kind: 'model' as const, text: o.why }, ...t.why] : t.why };
    });
  }

  /**
   * Use a v2 release for ranking (undefined: none): each memory is linked to its top-`k1`
   * community prototypes (relation extraction against the public space, on the device), and
   * the release's popularity estimates become the popularity signal. Returns the number of
   * memories linked to a community. Nothing is sent.
   */
  /** Use a verifiable (Prio3) release for ranking (undefined: none): see community/crowd.ts. Nothing is sent. */
  useCrowd(release: CrowdRelease | undefined): void {
    this.crowd = release;
  }

  async useRelease(release: Release | undefined): Promise<number> {
    if (!release || release.embedderId !== this.items.embedderId) {
      this.communities = undefined;
      for (const m of this.life.state.memories) m.links = [];
      return 0;
    }
    const prototypes = decodePrototypes(release);
    const known = new Map<string, KnownCommunity>();
    const byMemory = new Map<string, KnownCommunity[]>();
    let linked = 0;
    for (const m of this.life.state.memories) {
      m.links = [];
      if (m.strength <= 0 || m.embedding.embedderId !== release.embedderId) continue;
      const hits = matchMemory(m.embedding.vector, prototypes, this.config.k1, -1);
      const list: KnownCommunity[] = [];
      for (const h of hits) {
        let k = known.get(h.community.id);
        if (!k) {
          const top = Object.entries(h.community.counts)
            .sort((a, b) => b[1] - a[1])
            .slice(0, 3)
            .map(([id]) => id)
            .filter((id) => this.items.has(id));
          const examples = (top.length ? top : h.community.items.filter((id) => this.items.has(id)).slice(0, 3)).map((id) => this.items.item(id));
          const summary = await this.life.reason((r) => r.summarizePrototype({ items: examples, size: Math.round(h.community.contributors) }));
          const itemTotal = Object.values(h.community.counts).reduce((a, b) => a + b, 0);
          k = {
            view: { id: h.community.id, size: Math.round(h.community.contributors), prototype: h.prototype, items: h.community.counts },
            summary,
            itemTotal,
          };
          known.set(h.community.id, k);
        }
        list.push(k);
        m.links.push(h.community.id);
      }
      if (list.length) {
        byMemory.set(m.id, list);
        linked++;
      }
    }
    const total = Object.values(release.popularity).reduce((a, b) => a + b, 0);
    const itemShares = new Map(total > 0 ? Object.entries(release.popularity).map(([id, x]) => [id, x / total] as const) : []);
    this.communities = { byMemory, itemShares };
    return linked;
  }
}
