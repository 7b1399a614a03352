/**
 * One user's memory agent: composes the pure core (tiers, lifecycle, planner, retrieval,
 * ranking), a Reasoner, the catalog's item vectors and, optionally, the shared index's release.
 * Runs anywhere (Node for the benchmark, a Web Worker in the browser).
 */
import { resolveConfig, tauFor, type AtomemConfig } from '../core/config.js';
import {
  actionWeight,
  salience,
  appendEvent,
  createState,
  extract,
  forget,
  markProcessed,
  merge,
  pendingCount,
  reinforce,
  resynthesize,
  validateInteraction,
  weaken,
  type OpContext,
} from '../core/memory.js';
import { rulesPlanner, type PlanContext, type Planner } from '../core/planner.js';
import { rank, strongerAction, type Candidate, type RankedItem, type Reason, type RecentSignal } from '../core/rank.js';
import { cleanIntent, intentTerms, selectIntentMemories, termMatch, type IntentMemory } from '../core/intent.js';
import { retrieveOwn, type CommunityContext, type KnownCommunity } from '../core/retrieve.js';
import { dot, meanNormalized } from '../core/vector.js';
import { demoteDuplicates, diversify } from '../core/diversify.js';
import { explain, LOW_SCORE_SENTENCE, NO_SUPPORT_SENTENCE } from '../core/explain.js';
import type { Action, AtomicMemory, Interaction, Item, LifecycleEvent, MemoryEvent, MemoryState, Profile } from '../core/types.js';
import { makeReport } from '../community/ldp.js';
import { decodePrototypes, matchMemory } from '../community/release.js';
import type { LdpParams, Release, WireReport } from '../protocol/index-v2.js';
import { RulesReasoner } from '../reason/rules.js';
import type { ForwardStep, MemoryText, MemoryView, Reasoner } from '../reason/types.js';
import type { ItemVectors } from './items.js';
import { mergeRoundRobin, topByDot, topByLists, vectorTable, type VectorTable } from './shortlist.js';

/** Variants used by the benchmark's ablations (STEAM's paper). */
export interface AgentMode {
  /** false = one summary memory instead of atomic memories. */
  atomic: boolean;
  /** false = never consolidate: every interaction forms a memory. */
  consolidation: boolean;
  /** false = sweeps merge nothing (with `consolidation: false`: the no-consolidation ablation). Default true. */
  merge?: boolean;
}

/** Agent options. Only `items` is required. */
export interface AgentOptions {
  items: ItemVectors;
  reasoner?: Reasoner;
  planner?: Planner;
  config?: Parameters<typeof resolveConfig>[0];
  /** Restore a saved state. */
  state?: MemoryState;
  /** Clock for ranking-time decay (default Date.now). Event operations use the event's time. */
  clock?: () => number;
  /** Id generator (default crypto.randomUUID). */
  newId?: () => string;
  mode?: Partial<AgentMode>;
  /** Called for every lifecycle event (formed, reinforced, weakened, merged, forgotten, resynthesised). */
  onLifecycle?: (e: LifecycleEvent) => void;
}

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

/** The order of a first visit (no memory, no positive event): see {@link MemoryAgent.recommend}. */
export type FirstVisitPrior = 'shop-popularity' | 'community-popularity' | 'variety';

/** Options of {@link MemoryAgent.recommend}. */
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
 * Within the first `depth` cards, a card whose first sentence repeats an earlier card's names
 * the next closest item of the same memory instead (still a linked item close to the card), or
 * else leads with its next own reason, so a row of cards from one interest does not read the
 * same reason eight times. Mutates `out`.
 */
function varyFirstReasons(
  out: Recommendation[],
  depth: number,
  titleOf: (id: string) => string | undefined,
  actionOf: (id: string) => Action | undefined,
): void {
  const used = new Set<string>();
  for (const r of out.slice(0, depth)) {
    const first = r.explanations[0];
    const i = r.reasons.findIndex((x) => x.contribution > 0);
    const top = r.reasons[i];
    if (used.has(first) && top?.kind === 'memory' && top.alternatives) {
      for (const alt of top.alternatives) {
        const reasons = [...r.reasons];
        reasons[i] = { ...top, item: alt, alternatives: top.alternatives.filter((x) => x !== alt).concat(top.item ? [top.item] : []) };
        const explanations = explain({ ...r, reasons }, titleOf, 3, actionOf);
        if (!used.has(explanations[0])) {
          r.reasons = reasons;
          r.explanations = explanations;
          break;
        }
      }
    }
    // still a repeat (e.g. every card's sequence signal names the last item): lead with the card's next own reason
    const next = used.has(r.explanations[0]) ? r.explanations.findIndex((e, j) => j > 0 && !used.has(e)) : -1;
    if (next > 0) r.explanations = [r.explanations[next], ...r.explanations.filter((_, j) => j !== next)];
    used.add(r.explanations[0]);
  }
}

/** Positions a first visit's variety order places by farthest-point; the rest keep the input order. */
const VARIETY_SLOTS = 64;

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

/** A ranked recommendation with readable explanations. */
export interface Recommendation extends RankedItem {
  explanations: string[];
}

/**
 * `tau` (and, in the shop's space, `mergeThreshold`) for an item space: the embedder's calibrated
 * tau, or quantiles of random item pairs' cosines of the shop's file (`shopTauQuantile`,
 * `shopMergeQuantile`).
 */
export function spaceDefaults(items: ItemVectors, config: AgentOptions['config'] = {}): { tau: number; mergeThreshold?: number } {
  const shop = items.shop;
  if (!shop) return { tau: tauFor(items.embedderId) };
  const base = resolveConfig(config);
  return { tau: shop.pairQuantile(base.shopTauQuantile), mergeThreshold: shop.pairQuantile(base.shopMergeQuantile) };
}

/** Options of {@link MemoryAgent.recommend}. */

/** The memories a stated intent selected (see {@link MemoryAgent.intentMemories}). */
export interface IntentSelection {
  /** The intent as used (cleaned). */
  intent: string;
  /** Best first. */
  memories: { memoryId: string; content: string; category: string; similarity: number }[];
}

const defaultId = () => globalThis.crypto.randomUUID();

/** One user's memory agent. */
export class MemoryAgent {
  readonly config: AtomemConfig;
  readonly items: ItemVectors;
  /** The reasoner in force (rules by default; an LLM reasoner once a model is loaded, see {@link useReasoner}). */
  reasoner: Reasoner;
  private readonly rules = new RulesReasoner();
  /** The planner in force (rules by default; the LLM planner once a model is loaded, see {@link useReasoner}). */
  private planner: Planner;
  private readonly clock: () => number;
  private readonly newId: () => string;
  private readonly mode: AgentMode;
  private readonly onLifecycle?: (e: LifecycleEvent) => void;
  private state: MemoryState;
  private communities: CommunityContext | undefined;

  constructor(opts: AgentOptions) {
    this.items = opts.items;
    // why: tau and the merge threshold depend on the item space's similarity spread (see EMBEDDER_TAU; the shop's space is calibrated from its own pairs).
    this.config = resolveConfig({ ...spaceDefaults(opts.items, opts.config), ...opts.config });
    this.reasoner = opts.reasoner ?? this.rules;
    this.planner = opts.planner ?? rulesPlanner;
    this.clock = opts.clock ?? Date.now;
    this.newId = opts.newId ?? defaultId;
    this.mode = { atomic: true, consolidation: true, ...opts.mode };
    this.onLifecycle = opts.onLifecycle;
    this.state = opts.state ?? createState();
  }

  /**
   * Switch reasoner (e.g. to an LLM reasoner when a model finished loading) and, optionally,
   * planner (the LLM planner defers event processing to {@link idle}); undefined → rules.
   */
  useReasoner(reasoner: Reasoner | undefined, planner?: Planner): void {
    this.reasoner = reasoner ?? this.rules;
    this.planner = planner ?? rulesPlanner;
  }

  /** True when durable events wait to be turned into memory (the LLM planner defers them to {@link idle}). */
  hasPending(): boolean {
    return pendingCount(this.state) > 0;
  }

  /** The whole state (for persistence). Do not mutate. */
  get snapshot(): MemoryState {
    return this.state;
  }

  /** Atomic memories, most salient first. */
  memories(): AtomicMemory[] {
    const now = this.clock();
    return [...this.state.memories].sort((a, b) => Math.abs(salience(this.config, b, now)) - Math.abs(salience(this.config, a, now)));
  }

  /** The profile narrative (tier 3), or null before the first synthesis. */
  profile(): Profile | null {
    return this.state.profile;
  }

  /**
   * Observe one interaction: it becomes a durable pending event, then the planner decides
   * what to run (reflection → extract / reinforce / weaken; sweeps; resynthesis). The rules
   * planner runs everything now; the LLM planner leaves it pending for {@link idle} unless
   * `batchEvents` are waiting.
   */
  async observe(interaction: Interaction): Promise<LifecycleEvent[]> {
    validateInteraction(interaction); // bad input → TypeError before anything changes
    this.items.item(interaction.item); // unknown item → UnknownItemError before anything changes
    appendEvent(this.state, this.config, interaction);
    return this.runPlanner({ idle: false });
  }

  /**
   * The device is idle (the worker calls this a moment after the last interaction): the planner
   * runs the batched work — pending events, then sweeps and resynthesis if it decides so.
   */
  async idle(): Promise<LifecycleEvent[]> {
    return this.runPlanner({ idle: true });
  }

  /**
   * Move memories made with another embedder (the shop switched `use-lite` → `minilm`, or the
   * catalog centring changed) into the current vector space: each one's vector becomes the
   * normalised mean of its linked items' vectors, exactly how memories are formed. A memory
   * none of whose items is still in the catalog cannot be placed and is forgotten. Statements,
   * strength and evidence are kept. Returns how many memories were moved and dropped.
   */
  async adoptEmbedder(): Promise<{ moved: number; dropped: number }> {
    const target = this.items.embedderId;
    let moved = 0;
    let dropped = 0;
    const keep: AtomicMemory[] = [];
    for (const m of this.state.memories) {
      if (m.embedding.embedderId === target) {
        keep.push(m);
        continue;
      }
      const ids = m.items.filter((id) => this.items.has(id));
      if (ids.length === 0) {
        dropped++;
        this.onLifecycle?.({ op: 'forget', memoryId: m.id, at: this.clock(), detail: `its items left the catalog while the embedder changed to ${target}` });
        continue;
      }
      const vecs = await this.items.vectorsOf(ids);
      m.embedding = { embedderId: target, vector: meanNormalized(vecs.map((v) => v.vector)) };
      moved++;
      keep.push(m);
    }
    this.state.memories = keep;
    return { moved, dropped };
  }

  /**
   * Process events that are durable but not yet turned into memory (e.g. after a crash or a
   * closed tab, replayed at start); each is applied exactly once.
   */
  async processPending(): Promise<LifecycleEvent[]> {
    return this.runPlanner({ idle: true });
  }

  /**
   * STEAM's training loop over a user's history: for each interaction, a forward step
   * (does memory prefer the real item over `negativeFor(i)`?), then a backward step
   * (reflection → consolidation or formation; misleading memories weakened). `correct` sums
   * the forward credits (ties count half).
   */
  async train(history: readonly Interaction[], negativeFor: (index: number) => string | undefined): Promise<{ correct: number; steps: number }> {
    if (!Array.isArray(history) || history.length === 0) throw new RangeError('train: history is empty (nothing to learn from)');
    history.forEach((it, i) => {
      try {
        validateInteraction(it);
      } catch (e) {
        throw new TypeError(`train: history[${i}]: ${(e as Error).message}`);
      }
      this.items.item(it.item);
    });
    let correct = 0;
    for (let i = 0; i < history.length; i++) {
      const it = history[i];
      this.items.item(it.item);
      const neg = negativeFor(i);
      const ev = appendEvent(this.state, this.config, it);
      correct += await this.process(ev, neg);
      // why: training is offline batch work, the planner's idle case.
      await this.sweep(it.at, { idle: true });
    }
    return { correct, steps: history.length };
  }

  /**
   * Rank candidate item ids with explanations (unknown ids → UnknownItemError), best first.
   * Each card's explanations name what moved that card (see `core/rank.ts`). With
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
    if (candidates === undefined) return (await this.recommend(await this.wholeCatalogShortlist(opts, limit), { ...opts, limit: undefined })).slice(0, limit);
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
    const n = this.config.recentEvents;
    // why: a delisted product may still be in the history; it just stops counting as recent.
    const recentEvents = n > 0 ? this.state.events.slice(-n).filter((e) => this.items.has(e.item)) : [];
    const recentVecs = await this.items.vectorsOf(recentEvents.map((e) => e.item));
    const recent: RecentSignal[] = recentEvents.map((e, i) => ({
      item: e.item,
      vector: recentVecs[i].vector,
      weight: actionWeight(e.action) * 0.9 ** (recentEvents.length - 1 - i),
      action: e.action,
    }));
    const now = opts.now ?? this.clock();
    // the shop's published model scores the candidates from this shopper's own events (nothing leaves the device)
    const shop = this.items.shop;
    const extra: Record<string, ArrayLike<number>> = shop ? { ...shop.signals(this.state.events, ids, now, String(this.state.nextSeq)) } : {};
    // every shop-model signal gets a reason (pop and trend have no source item)
    const extraSources: Record<string, ArrayLike<string | undefined>> | undefined = shop
      ? { ...Object.fromEntries(Object.keys(extra).map((k) => [k, new Array<string | undefined>(ids.length)])), ...shop.sources(this.state.events, ids) }
      : undefined;
    let weights = (shop ? this.config.shopWeights : this.config.weights) as Readonly<Record<string, number>>;
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
    const linked = [...new Set(this.state.memories.flatMap((m) => m.items))].filter((id) => this.items.has(id));
    const linkedVecs = await this.items.vectorsOf(linked);
    const itemVectors = new Map(linked.map((id, i) => [id, linkedVecs[i].vector]));
    let ranked = rank(
      { memories: this.state.memories, candidates: cands, recent, communities: this.communities, now, extra, extraSources, itemVectors, weights, extraReasons },
      this.config,
    );
    const vectorOf = new Map(cands.map((c) => [c.id, c.vector]));
    const firstVisit = intentText === undefined && this.state.memories.length === 0 && !this.state.events.some((e) => actionWeight(e.action) > 0);
    if (firstVisit) ranked = this.byPrior(ranked, vectorOf, shop ? extra : undefined, ids);
    const known = new Map<string, Float32Array>([...itemVectors, ...recent.map((x) => [x.item, x.vector] as const), ...vectorOf]);
    ranked = ranked.map((r) => this.withinDepartment(r, known));
    const titleOf = (id: string) => (this.items.has(id) ? this.items.item(id).title : undefined);
    const actionOf = this.actionLookup();
    let out: Recommendation[] = ranked.map((r) => ({ ...r, explanations: explain(r, titleOf, 3, actionOf) }));
    if (!firstVisit && opts.diversify !== false && this.config.diversity > 0) out = this.diversified(out, vectorOf, now);
    if (opts.diversify !== false && this.config.duplicateSimilarity > 0) out = await this.withoutDuplicates(out);
    varyFirstReasons(out, this.config.diversityDepth, titleOf, actionOf);
    const top = Math.min(rerankN, out.length);
    if (top >= 2 && this.reasoner !== this.rules) out = [...(await this.rerankTop(out.slice(0, top), intentText)), ...out.slice(top)];
    // the list's first card says that the intent matched nothing (once, not on every card)
    if (unmatched && out.length)
      out[0] = {
        ...out[0],
        reasons: [unmatched, ...out[0].reasons],
        explanations: [explain({ ...out[0], score: 0, reasons: [unmatched] }, titleOf)[0], ...out[0].explanations.slice(0, 2)],
      };
    return out.length > limit ? out.slice(0, limit) : out;
  }

  /** Item-space and content-space vector tables of the whole catalog, rebuilt when the space or the catalog size changes. */
  private tables: { item?: { key: string; table: VectorTable }; content?: { key: string; table: VectorTable }; popular?: { key: string; rows: number[] } } = {};

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
   * stated intent's nearest items in the content space, and the shop's most popular items (or,
   * with no shop file and nothing known, an even sample of the catalog) — merged round-robin
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
    for (let i = this.state.events.length - 1; i >= 0 && mine.length < 20; i--) {
      const e = this.state.events[i];
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
    for (const m of this.state.memories) {
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
      const popular: string[] = [];
      for (const r of this.tables.popular.rows) {
        if (popular.length >= size) break;
        const id = items[r];
        if (this.items.has(id) && !excluded.has(id)) popular.push(id);
      }
      sources.push(popular);
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
    for (const m of this.state.memories) {
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
      this.state.memories,
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
        const action = item ? [...this.state.events].reverse().find((e) => e.item === item)?.action : undefined;
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
  private excluded(exclude: RecommendOptions['exclude']): Set<string> {
    const out = new Set<string>();
    if (exclude === undefined) return out;
    const rules = typeof exclude === 'string' ? [exclude] : exclude;
    if (!Array.isArray(rules)) throw new TypeError(`exclude must be one of ${EXCLUDE_RULES.join(', ')} or an array of them, got ${String(exclude)}`);
    for (const r of rules) {
      if (!EXCLUDE_RULES.includes(r)) throw new TypeError(`exclude: unknown rule "${String(r)}" (expected one of ${EXCLUDE_RULES.join(', ')})`);
      const events = r === 'seen' ? this.state.events.slice(-Math.max(1, this.config.recentEvents)) : this.state.events;
      for (const e of events) if (r !== 'bought' || e.action === 'purchase') out.add(e.item);
    }
    return out;
  }

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
   * is left out of the explanations (its share of the score stays). A shop-model reason (already
   * worded as shoppers' behaviour) across departments needs the same collaborative cosine. Items
   * without categories are never judged. `vectorOf`: item-space vectors of the card and the items its reasons name.
   */
  private withinDepartment(r: RankedItem, vectorOf: ReadonlyMap<string, Float32Array>): RankedItem {
    const cats = this.items.has(r.id) ? this.items.item(r.id).categories : undefined;
    if (!cats?.length) return r;
    const same = (id: string) => {
      if (!this.items.has(id)) return false;
      const c = this.items.item(id).categories;
      return !c?.length || c.some((x) => cats.includes(x));
    };
    const collaborative = (id: string) => {
      if (!this.items.shop) return false;
      const a = vectorOf.get(r.id);
      const b = vectorOf.get(id);
      // why halfway to mergeThreshold: tau (the 0.9 quantile of random pairs in the shop's space) is too weak a bond to cross a department on
      return !!a && !!b && dot(a, b) >= (this.config.tau + this.config.mergeThreshold) / 2;
    };
    const reasons: Reason[] = [];
    for (const x of r.reasons) {
      if (x.kind === 'memory' && x.item !== undefined && !same(x.item)) {
        const alternatives = (x.alternatives ?? []).filter(same);
        if (alternatives.length) reasons.push({ ...x, item: alternatives[0], alternatives: alternatives.slice(1) });
        else if (collaborative(x.item)) reasons.push({ kind: 'shop', signal: 'vec', contribution: x.contribution, item: x.item });
        continue;
      }
      if (x.kind === 'memory' && x.alternatives) {
        reasons.push({ ...x, alternatives: x.alternatives.filter(same) });
        continue;
      }
      if (x.kind === 'recent' && !same(x.item)) {
        if (collaborative(x.item)) reasons.push({ kind: 'shop', signal: 'vec', contribution: x.contribution, item: x.item });
        continue;
      }
      // a shop-model reason across departments stands only when the shop's vectors put the two items together
      if (x.kind === 'shop' && x.item !== undefined && !same(x.item) && !collaborative(x.item)) continue;
      if (x.kind === 'intent' && x.item !== undefined && !same(x.item)) {
        // the intent still matches the card; the memory it met is of another department
        reasons.push({ kind: 'intent', intent: x.intent, similarity: x.similarity, contribution: x.contribution });
        continue;
      }
      reasons.push(x);
    }
    return reasons.length === r.reasons.length && reasons.every((x, i) => x === r.reasons[i]) ? r : { ...r, reasons };
  }

  /**
   * Near-duplicates of an owned item (bought: `config.duplicateActions`) beyond
   * `config.duplicateKeep` per owned item moved after the first row (see core/diversify.ts
   * `demoteDuplicates`); scores are reassigned in the new order, as {@link diversified} does.
   */
  private async withoutDuplicates(out: Recommendation[]): Promise<Recommendation[]> {
    const actions = new Set(this.config.duplicateActions);
    const owned = [...new Set(this.state.events.filter((e) => actions.has(e.action) && this.items.has(e.item)).map((e) => e.item))];
    const depth = this.config.diversityDepth;
    if (owned.length === 0 || depth < 1 || out.length < 2) return out;
    // the candidates a first row can reach: the row, plus as many as could be set aside
    const reach = out.slice(0, Math.min(out.length, depth * (1 + Math.max(1, owned.length)) + 8));
    const mean = await this.items.contentMean();
    const centred = (v: Float32Array) => {
      const c = new Float32Array(v.length);
      let norm = 0;
      for (let d = 0; d < v.length; d++) {
        c[d] = v[d] - (mean[d] ?? 0);
        norm += c[d] * c[d];
      }
      norm = Math.sqrt(norm) || 1;
      for (let d = 0; d < v.length; d++) c[d] /= norm;
      return c;
    };
    const ownedVecs = (await this.items.contentVectorsOf(owned)).map((e) => centred(e.vector));
    const candVecs = (await this.items.contentVectorsOf(reach.map((r) => r.id))).map((e) => centred(e.vector));
    const dupes = candVecs.map((v) => owned.filter((_, k) => dot(v, ownedVecs[k]) >= this.config.duplicateSimilarity));
    const order = demoteDuplicates(dupes, this.config.duplicateKeep, depth);
    if (order.every((k, i) => k === i)) return out;
    return [...order.map((k, i) => ({ ...out[k], score: out[i].score })), ...out.slice(reach.length)];
  }

  /** The first row made to cover each strong interest (see core/diversify.ts). */
  private diversified(out: Recommendation[], vectorOf: ReadonlyMap<string, Float32Array>, now: number): Recommendation[] {
    const positive = this.state.memories.filter((m) => m.strength > 0 && m.embedding.vector.length === (vectorOf.values().next().value?.length ?? -1));
    const aspects = positive.map((m) => ({ vector: m.embedding.vector, weight: salience(this.config, m, now) * Math.log1p(m.evidence) }));
    const depth = this.config.diversityDepth;
    const order = diversify(
      out.map((r) => ({ score: r.score, vector: vectorOf.get(r.id)! })),
      aspects,
      { minShare: this.config.diversity, depth, tau: this.config.tau },
    );
    if (order.every((k, i) => k === i)) return out;
    return order.map((k, i) => {
      const r = { ...out[k], score: out[i].score };
      // a card brought into the first row for an interest says which, if its own reasons had nothing positive
      if (i < depth && k >= depth && (r.explanations[0] === LOW_SCORE_SENTENCE || r.explanations[0] === NO_SUPPORT_SENTENCE)) {
        const v = vectorOf.get(r.id)!;
        const best = positive
          .map((m, a) => ({ m, w: aspects[a].weight, s: dot(m.embedding.vector, v) }))
          .filter((x) => x.s >= this.config.tau)
          .sort((x, y) => y.w - x.w)[0];
        if (best) r.explanations = [`For another of your interests: “${best.m.content}”.`];
      }
      return r;
    });
  }

  /** Item → the shopper's strongest positive action on it (purchase > cart > like > rate > click > view), for wording. */
  private actionLookup(): (id: string) => Action | undefined {
    const best = new Map<string, Action>();
    for (const e of this.state.events) {
      if (actionWeight(e.action) <= 0) continue;
      if (strongerAction(e.action, best.get(e.item))) best.set(e.item, e.action);
    }
    return (id) => best.get(id);
  }

  /**
   * Listwise reranking of the top of a ranking by the reasoner, with its one-line reason first
   * among the explanations. Scores are reassigned in the new order (the same set of scores, so
   * the list stays sorted by score). The rules reasoner (also the fallback) keeps the order.
   */
  private async rerankTop(top: Recommendation[], intent?: string): Promise<Recommendation[]> {
    const memories = this.memories()
      .slice(0, 8)
      .map((m) => this.view(m));
    // ARS's ranker reads the profile, the recent events and the stated intent
    const recent = this.state.events
      .slice(-8)
      .filter((e) => this.items.has(e.item))
      .map((e) => ({ item: this.items.item(e.item), action: e.action }));
    const profile = this.state.profile?.narrative.slice(0, this.config.profileMaxChars) || undefined;
    const input = {
      memories,
      candidates: top.map((t) => ({ id: t.id, item: this.items.item(t.id) })),
      recent,
      ...(profile ? { profile } : {}),
      ...(intent !== undefined ? { intent } : {}),
    };
    const result = await this.reason((r) => r.rerank(input));
    const byId = new Map(top.map((t) => [t.id, t]));
    return result.order.map((o, i) => {
      const t = byId.get(o.id)!;
      return { ...t, score: top[i].score, explanations: o.why ? [o.why, ...t.explanations] : t.explanations };
    });
  }

  /** Forget one memory now (the user asked). */
  forget(memoryId: string): boolean {
    const e = forget(this.state, this.ctx(this.clock()), memoryId, 'asked by the user');
    if (e) this.emit(e);
    return e !== null;
  }

  // ——— protocol v2 ———

  /**
   * The items a v2 report samples from: the distinct items of the last `shareRecentEvents`
   * processed events with a positive action, oldest first (catalog items only).
   */
  reportItems(): string[] {
    const n = this.config.shareRecentEvents || this.state.events.length;
    const liked = this.state.events.filter((e) => !e.pending && actionWeight(e.action) > 0 && this.items.has(e.item)).slice(-n);
    const out: string[] = [];
    for (const e of liked) {
      const i = out.indexOf(e.item);
      if (i >= 0) out.splice(i, 1);
      out.push(e.item);
    }
    return out;
  }

  /** Last epoch this device reported for (undefined: never). */
  reportedEpoch(): number | undefined {
    return this.state.reporting?.lastEpoch;
  }

  /**
   * This device's local-DP report (protocol v2; see community/ldp.ts), or undefined when it has
   * already reported for `epoch` or a later one. The memoized permanent randomization is kept
   * in the state (save it); call {@link markReported} once the service accepted the report.
   * `random`: a CSPRNG-backed [0, 1) source on a real device.
   */
  makeReport(epoch: number, params: LdpParams, random: () => number): WireReport | undefined {
    const r = (this.state.reporting ??= { memo: {} });
    if (r.lastEpoch !== undefined && r.lastEpoch >= epoch) return undefined;
    return makeReport(this.reportItems(), params, r.memo, random);
  }

  /** Record that the report of `epoch` was accepted (no second report this epoch). */
  markReported(epoch: number): void {
    const r = (this.state.reporting ??= { memo: {} });
    r.lastEpoch = Math.max(r.lastEpoch ?? -Infinity, epoch);
  }

  /**
   * Use a v2 release for ranking (undefined: none): each memory is linked to its top-`k1`
   * community prototypes (relation extraction against the public space, on the device), and
   * the release's popularity estimates become the popularity signal. Returns the number of
   * memories linked to a community. Nothing is sent.
   */
  async useRelease(release: Release | undefined): Promise<number> {
    if (!release || release.embedderId !== this.items.embedderId) {
      this.communities = undefined;
      for (const m of this.state.memories) m.links = [];
      return 0;
    }
    const prototypes = decodePrototypes(release);
    const known = new Map<string, KnownCommunity>();
    const byMemory = new Map<string, KnownCommunity[]>();
    let linked = 0;
    for (const m of this.state.memories) {
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
          const summary = await this.reason((r) => r.summarizePrototype({ items: examples, size: Math.round(h.community.contributors) }));
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

  // ——— internals ———

  private ctx(now: number): OpContext {
    return { now, newId: this.newId };
  }

  private emit(e: LifecycleEvent): void {
    this.onLifecycle?.(e);
  }

  /** What a reasoner may read of a memory (statement, category, strength, evidence, its items; no embedding). */
  memoryView(m: AtomicMemory): MemoryView {
    return this.view(m);
  }

  private view(m: AtomicMemory): MemoryView {
    return {
      id: m.id,
      content: m.content,
      category: m.category,
      strength: m.strength,
      evidence: m.evidence,
      items: m.items.filter((id) => this.items.has(id)).map((id) => this.items.item(id)),
    };
  }

  /** Memory-only preference score of an item (the forward step's judgement). */
  private personal(vector: Float32Array, now: number): number {
    let s = 0;
    for (const r of retrieveOwn(this.state.memories, vector, this.config.k2, this.config.tau)) {
      s += salience(this.config, r.memory, now) * r.similarity;
    }
    return s;
  }

  private async runPlanner(ctx: PlanContext): Promise<LifecycleEvent[]> {
    const out: LifecycleEvent[] = [];
    const plan = await this.planner(this.state, this.config, this.clock(), ctx);
    if (plan.processPending) {
      for (const ev of this.state.events.filter((e) => e.pending)) {
        await this.process(ev, undefined, out);
      }
    }
    const last = this.state.events[this.state.events.length - 1];
    out.push(...(await this.sweep(last ? last.at : this.clock(), ctx)));
    return out;
  }

  /**
   * Backward step for one event (with an optional forward step against `negative`). Returns the
   * forward step's credit: 1 when memory preferred the real item, 0.5 on a tie, 0 when it lost
   * (1 without a negative).
   */
  private async process(ev: MemoryEvent, negative: string | undefined, out: LifecycleEvent[] = []): Promise<number> {
    if (!ev.pending) return 1; // idempotent: a replayed event is not applied twice
    const start = out.length;
    const now = ev.at;
    const ctx = this.ctx(now);
    const w = actionWeight(ev.action);
    const [v] = await this.items.vectorsOf([ev.item]);
    const actual = this.items.item(ev.item);
    let correct = true;
    let credit = 1;
    let misleading: { memory: AtomicMemory; similarity: number }[] = [];
    let negItem;
    if (negative !== undefined && this.items.has(negative)) {
      const [nv] = await this.items.vectorsOf([negative]);
      negItem = this.items.item(negative);
      const own = this.personal(v.vector, now);
      const other = this.personal(nv.vector, now);
      correct = own > other;
      // why: a tie (typically 0 vs 0: no memory speaks for either) is a coin flip, not a right or wrong answer.
      credit = own > other ? 1 : own === other ? 0.5 : 0;
      if (!correct) {
        this.state.signal.predictionErrors++;
        misleading = retrieveOwn(this.state.memories, nv.vector, this.config.k2, this.config.tau).filter((r) => r.memory.strength > 0);
      }
    }
    const supporting = retrieveOwn(this.state.memories, v.vector, Math.max(3, this.config.k2), -1);
    const step: ForwardStep = {
      weight: w,
      actual,
      negative: negItem,
      correct,
      supporting: supporting.map((r) => ({ memory: this.view(r.memory), similarity: r.similarity })),
      misleading: misleading.map((r) => ({ memory: this.view(r.memory), similarity: r.similarity })),
      tau: this.config.tau,
    };
    let reflection = await this.reason((r) => r.reflect(step));
    // Ablations override the reflection's decision.
    if (!this.mode.atomic) {
      const only = this.state.memories[0];
      reflection = only ? { ...reflection, decision: 'consolidate', target: only.id } : { ...reflection, decision: 'form' };
    } else if (!this.mode.consolidation) {
      reflection = { ...reflection, decision: 'form', target: undefined };
    }
    const target = reflection.decision === 'consolidate' ? this.state.memories.find((m) => m.id === reflection.target) : undefined;
    if (target) {
      const items = [...target.items.filter((i) => i !== ev.item), ev.item].filter((id) => this.items.has(id)).map((id) => this.items.item(id));
      const text = await this.describe(items, target.strength, { content: target.content, category: target.category });
      out.push(reinforce(target, this.config, ctx, { item: ev.item, vector: v, weight: w, seq: ev.seq, ...text }));
    } else {
      const text = await this.describe([actual], this.config.initialStrength * w);
      const { event } = extract(this.state, this.config, ctx, { item: ev.item, vector: v, weight: w, seq: ev.seq, ...text });
      out.push(event);
    }
    if (w < 0) {
      // Contrary evidence: a dislike also weakens the positive memory it contradicts.
      const liked = supporting.find((r) => r.similarity >= this.config.tau && r.memory.strength > 0 && r.memory !== target);
      if (liked) out.push(weaken(liked.memory, this.config, ctx, -w, `${actual.title}: ${ev.action}`));
    }
    for (const id of reflection.misled) {
      const m = this.state.memories.find((x) => x.id === id);
      if (m && m !== target) out.push(weaken(m, this.config, ctx, 0.25, `misled the choice of ${actual.title}`));
    }
    markProcessed(this.state, ev.seq);
    out.slice(start).forEach((e) => this.emit(e));
    return credit;
  }

  /** The memory's statement for its items; `previous` = its current text when it is being updated. */
  private describe(items: Item[], strength: number, previous?: MemoryText): Promise<MemoryText> {
    return this.reason((r) => r.describeMemory({ items, strength, ...(previous ? { previous } : {}) }));
  }

  /** Run one reasoner operation; if it fails, the rules reasoner does that operation instead. */
  private async reason<T>(op: (r: Reasoner) => Promise<T>): Promise<T> {
    if (this.reasoner === this.rules) return op(this.rules);
    try {
      return await op(this.reasoner);
    } catch {
      return op(this.rules);
    }
  }

  /** Run the planner's sweep operations (merge, forget, resynthesize) if due. */
  private async sweep(now: number, when: PlanContext): Promise<LifecycleEvent[]> {
    const out: LifecycleEvent[] = [];
    const plan = await this.planner(this.state, this.config, now, when);
    const ctx = this.ctx(now);
    // why: the no-consolidation ablation must not consolidate in sweeps either (a merge is consolidation of two memories)
    for (const [keep, absorb] of this.mode.merge === false ? [] : plan.merge) {
      const a = this.state.memories.find((m) => m.id === keep);
      const b = this.state.memories.find((m) => m.id === absorb);
      if (!a || !b) continue;
      const text = await this.reason((r) => r.mergeMemories(this.view(a), this.view(b)));
      out.push(merge(this.state, this.config, ctx, keep, absorb, text));
    }
    for (const f of plan.forget) {
      const e = forget(this.state, ctx, f.id, f.reason);
      if (e) out.push(e);
    }
    if (plan.merge.length || plan.forget.length || this.state.signal.eventsSinceSweep >= this.config.sweepEvery) {
      this.state.signal.eventsSinceSweep = 0;
    }
    if (plan.declinedSynthesis) {
      this.state.signal.eventsSinceSynthesis = 0;
      this.state.signal.predictionErrors = 0;
    }
    if (plan.resynthesize) {
      const views = this.memories().map((m) => this.view(m));
      const narrative = await this.reason((r) => r.synthesizeProfile(views));
      out.push(
        resynthesize(
          this.state,
          this.config,
          ctx,
          narrative,
          views.map((v) => v.id),
        ),
      );
    }
    out.forEach((e) => this.emit(e));
    return out;
  }
}

/** z-scores within the list (all 0 when the values are constant), as `combine` standardises. */
function standardize(x: Float64Array): Float64Array {
  const n = x.length;
  const out = new Float64Array(n);
  if (n === 0) return out;
  let m = 0;
  let maxAbs = 0;
  for (const v of x) {
    m += v;
    maxAbs = Math.max(maxAbs, Math.abs(v));
  }
  m /= n;
  let q = 0;
  for (const v of x) q += (v - m) ** 2;
  const sd = Math.sqrt(q / n);
  if (sd === 0 || sd < 1e-9 * maxAbs) return out;
  for (let i = 0; i < n; i++) out[i] = (x[i] - m) / sd;
  return out;
}
