/**
 * One user's memory agent: the lifecycle (`agent/lifecycle.ts`: events → memories, the planner)
 * and the shelf (`agent/shelf.ts`: retrieval, scoring, diversification, reasons) over one memory
 * state, with a Reasoner, the catalog's item vectors and, optionally, the shared index's release.
 * Runs anywhere (Node for the benchmark, a Web Worker in the browser).
 */
import { resolveConfig, tauFor, type AtomemConfig } from '../core/config.js';
import { createState, validateInteraction, type ValidInteraction } from '../core/memory.js';
import type { Planner } from '../core/planner.js';
import type { AtomicMemory, Interaction, LifecycleEvent, MemoryEvent, MemoryState, Profile } from '../core/types.js';
import type { LdpParams, Release, WireReport } from '../protocol/index-v2.js';
import type { MemoryView, Reasoner } from '../reason/types.js';
import { deviceReport, markReported, reportedEpoch, reportItems } from '../sync/device-report.js';
import { ablation, type AgentMode } from './ablation.js';
import type { ItemVectors } from './items.js';
import { Lifecycle } from './lifecycle.js';
import type { CrowdRelease } from '../community/crowd.js';
import { Shelf, type IntentSelection, type Recommendation, type RecommendOptions } from './shelf.js';

export type { AgentMode } from './ablation.js';
export {
  DEFAULT_EXCLUDE,
  DEFAULT_LIMIT,
  EXCLUDE_RULES,
  varietyOrder,
  type ExcludeRule,
  type FirstVisitPrior,
  type IntentSelection,
  type Recommendation,
  type RecommendOptions,
  type RecommendOpts,
} from './shelf.js';

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
  /** The benchmark's ablations of the memory structure (see `agent/ablation.ts`); the default is the shipped lifecycle. */
  mode?: Partial<AgentMode>;
  /** Called for every lifecycle event (formed, reinforced, weakened, merged, forgotten, resynthesised). */
  onLifecycle?: (e: LifecycleEvent) => void;
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

const defaultId = () => globalThis.crypto.randomUUID();

/** One user's memory agent. */
export class MemoryAgent {
  readonly config: AtomemConfig;
  readonly items: ItemVectors;
  private readonly life: Lifecycle;
  private readonly shelf: Shelf;

  constructor(opts: AgentOptions) {
    this.items = opts.items;
    // why: tau and the merge threshold depend on the item space's similarity spread (see EMBEDDER_TAU; the shop's space is calibrated from its own pairs).
    this.config = resolveConfig({ ...spaceDefaults(opts.items, opts.config), ...opts.config });
    this.life = new Lifecycle({
      items: opts.items,
      config: this.config,
      state: opts.state ?? createState(),
      reasoner: opts.reasoner,
      planner: opts.planner,
      clock: opts.clock ?? Date.now,
      newId: opts.newId ?? defaultId,
      ablation: ablation(opts.mode),
      onLifecycle: opts.onLifecycle,
    });
    this.shelf = new Shelf(this.life);
  }

  /** The reasoner in force (rules by default; an LLM reasoner once a model is loaded, see {@link useReasoner}). */
  get reasoner(): Reasoner {
    return this.life.reasoner;
  }

  /**
   * Switch reasoner (e.g. to an LLM reasoner when a model finished loading) and, optionally,
   * planner (the LLM planner defers event processing to {@link idle}); undefined → rules.
   */
  useReasoner(reasoner: Reasoner | undefined, planner?: Planner): void {
    this.life.useReasoner(reasoner, planner);
  }

  /** True when durable events wait to be turned into memory (the LLM planner defers them to {@link idle}). */
  hasPending(): boolean {
    return this.life.hasPending();
  }

  /** The whole state (for persistence). Do not mutate. */
  get snapshot(): MemoryState {
    return this.life.state;
  }

  /** Atomic memories, most salient first. */
  memories(): AtomicMemory[] {
    return this.life.memories();
  }

  /** The profile narrative (tier 3), or null before the first synthesis. */
  profile(): Profile | null {
    return this.life.profile();
  }

  /**
   * Observe one interaction: validated (bad input → TypeError, unknown item → UnknownItemError,
   * before anything changes), appended as a durable pending event, then one planner step
   * ({@link step}). For callers that hold the agent directly; the worker's engine validates at its
   * boundary and calls {@link append} and {@link step} itself, storing the event in between.
   */
  async observe(interaction: Interaction): Promise<LifecycleEvent[]> {
    this.append(validateInteraction(interaction));
    return this.step();
  }

  /** Append a validated interaction as a pending event; returns the event as stored (its sequence number included). */
  append(interaction: ValidInteraction): MemoryEvent {
    return this.life.append(interaction);
  }

  /**
   * Take back the event {@link append} just returned (its durable write failed): removed, and its
   * sequence number reused. Does nothing for any other event.
   */
  discard(ev: MemoryEvent): void {
    this.life.discard(ev);
  }

  /**
   * The planner's step after an interaction: the rules planner turns pending events into memory
   * now; the LLM planner leaves them pending for {@link idle} unless `batchEvents` are waiting.
   */
  step(): Promise<LifecycleEvent[]> {
    return this.life.step({ idle: false });
  }

  /**
   * The device is idle (the worker calls this a moment after the last interaction): the planner
   * runs the batched work — pending events, then sweeps and resynthesis if it decides so.
   */
  idle(): Promise<LifecycleEvent[]> {
    return this.life.step({ idle: true });
  }

  /**
   * Process events that are durable but not yet turned into memory (e.g. after a crash or a
   * closed tab, replayed at start); each is applied exactly once.
   */
  processPending(): Promise<LifecycleEvent[]> {
    return this.life.step({ idle: true });
  }

  /** Move memories made with another embedder into the current vector space (see `Lifecycle.adoptEmbedder`). */
  adoptEmbedder(): Promise<{ moved: number; dropped: number }> {
    return this.life.adoptEmbedder();
  }

  /** STEAM's training loop over a user's history (see `Lifecycle.train`). */
  train(history: readonly Interaction[], negativeFor: (index: number) => string | undefined): Promise<{ correct: number; steps: number }> {
    return this.life.train(history, negativeFor);
  }

  /** Rank candidate item ids, or the whole catalog (`undefined`), with each card's reasons: see {@link Shelf.recommend}. */
  recommend(candidates: readonly string[] | undefined, opts: RecommendOptions = {}): Promise<Recommendation[]> {
    return this.shelf.recommend(candidates, opts);
  }

  /** The memories a stated intent selects, for inspection (see {@link Shelf.intentMemories}). */
  intentMemories(intent: string): Promise<IntentSelection> {
    return this.shelf.intentMemories(intent);
  }

  /** Use a v2 release for ranking (undefined: none); returns the number of memories linked to a community (see {@link Shelf.useRelease}). */
  useRelease(release: Release | undefined): Promise<number> {
    return this.shelf.useRelease(release);
  }

  /** Use a verifiable (Prio3) release for ranking (undefined: none; see {@link Shelf.useCrowd}). */
  useCrowd(release: CrowdRelease | undefined): void {
    this.shelf.useCrowd(release);
  }

  /** Forget one memory now (the user asked). */
  forget(memoryId: string): boolean {
    return this.life.forget(memoryId);
  }

  /** What a reasoner may read of a memory (statement, category, strength, evidence, its items; no embedding). */
  memoryView(m: AtomicMemory): MemoryView {
    return this.life.view(m);
  }

  // ——— protocol v2 reports (sync/device-report.ts) ———

  /** The items a v2 report samples from (see `sync/device-report.ts`). */
  reportItems(): string[] {
    return reportItems(this.life.state, this.config.shareRecentEvents, (id) => this.items.has(id));
  }

  /** Last epoch this device reported for (undefined: never). */
  reportedEpoch(): number | undefined {
    return reportedEpoch(this.life.state);
  }

  /** This device's local-DP report of `epoch`, or undefined when already reported (see `sync/device-report.ts`). */
  makeReport(epoch: number, params: LdpParams, random: () => number): WireReport | undefined {
    return deviceReport(this.life.state, this.reportItems(), epoch, params, random);
  }

  /** Record that the report of `epoch` was accepted (no second report this epoch). */
  markReported(epoch: number): void {
    markReported(this.life.state, epoch);
  }
}
