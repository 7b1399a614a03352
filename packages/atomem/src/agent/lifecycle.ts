/**
 * The memory's lifecycle (STEAM's formation and consolidation, ARS's planner): tracked events
 * become durable pending events, reflection turns each into a new memory or consolidates it into
 * one, and the planner decides when to process events, sweep (merge, forget) and resynthesise
 * the profile. One plan per step: a step that processes events is planned again on what they
 * made before its sweep; otherwise the sweep runs the plan the step was given.
 */
import type { AtomemConfig } from '../core/config.js';
import {
  actionWeight,
  appendEvent,
  extract,
  forget,
  markProcessed,
  merge,
  pendingCount,
  reinforce,
  resynthesize,
  salience,
  validateInteraction,
  weaken,
  type OpContext,
  type ValidInteraction,
} from '../core/memory.js';
import { rulesPlanner, type Plan, type PlanContext, type Planner } from '../core/planner.js';
import { retrieveOwn } from '../core/retrieve.js';
import type { AtomicMemory, Interaction, Item, LifecycleEvent, MemoryEvent, MemoryState, Profile } from '../core/types.js';
import { meanNormalized } from '../core/vector.js';
import { RulesReasoner } from '../reason/rules.js';
import type { ForwardStep, MemoryText, MemoryView, Reasoner } from '../reason/types.js';
import type { Ablation } from './ablation.js';
import type { ItemVectors } from './items.js';

/** What the lifecycle is built from (the agent resolves the config and the defaults). */
export interface LifecycleOptions {
  items: ItemVectors;
  config: AtomemConfig;
  state: MemoryState;
  reasoner?: Reasoner;
  planner?: Planner;
  clock: () => number;
  newId: () => string;
  /** A benchmark ablation (see `agent/ablation.ts`); undefined in the product. */
  ablation?: Ablation;
  onLifecycle?: (e: LifecycleEvent) => void;
}

/** One user's memory lifecycle over a {@link MemoryState} it owns. */
export class Lifecycle {
  readonly config: AtomemConfig;
  readonly items: ItemVectors;
  readonly state: MemoryState;
  readonly clock: () => number;
  /** The reasoner in force (rules by default; an LLM reasoner once a model is loaded, see {@link useReasoner}). */
  reasoner: Reasoner;
  /** The rules reasoner, the fallback of every operation. */
  readonly rules = new RulesReasoner();
  private planner: Planner;
  private readonly newId: () => string;
  private readonly ablation?: Ablation;
  private readonly onLifecycle?: (e: LifecycleEvent) => void;

  constructor(opts: LifecycleOptions) {
    this.items = opts.items;
    this.config = opts.config;
    this.state = opts.state;
    this.reasoner = opts.reasoner ?? this.rules;
    this.planner = opts.planner ?? rulesPlanner;
    this.clock = opts.clock;
    this.newId = opts.newId;
    this.ablation = opts.ablation;
    this.onLifecycle = opts.onLifecycle;
  }

  /** Switch reasoner and, optionally, planner (the LLM planner defers event processing to idle time); undefined → rules. */
  useReasoner(reasoner: Reasoner | undefined, planner?: Planner): void {
    this.reasoner = reasoner ?? this.rules;
    this.planner = planner ?? rulesPlanner;
  }

  /** True when durable events wait to be turned into memory. */
  hasPending(): boolean {
    return pendingCount(this.state) > 0;
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
   * Append one validated interaction as a pending event and return the event as stored (with its
   * sequence number). An unknown item → UnknownItemError before anything changes. Nothing is
   * processed: {@link step} does that.
   */
  append(interaction: ValidInteraction): MemoryEvent {
    this.items.item(interaction.item);
    return appendEvent(this.state, this.config, interaction);
  }

  /** Take back the last appended event, if `ev` is it and still pending (see `MemoryAgent.discard`). */
  discard(ev: MemoryEvent): void {
    const last = this.state.events[this.state.events.length - 1];
    if (last !== ev || !ev.pending || ev.seq !== this.state.nextSeq - 1) return;
    this.state.events.pop();
    this.state.nextSeq--;
  }

  /**
   * One planner step: the plan says whether to process the pending events (reflection →
   * extract / reinforce / weaken); then the sweep (merge, forget, resynthesis) runs the plan in
   * force — planned again only when events were processed (the memory changed), so each plan is
   * asked for once and used.
   */
  async step(ctx: PlanContext): Promise<LifecycleEvent[]> {
    const out: LifecycleEvent[] = [];
    const last = this.state.events[this.state.events.length - 1];
    const now = last ? last.at : this.clock();
    let plan = await this.planner(this.state, this.config, now, ctx);
    if (plan.processPending) {
      for (const ev of this.state.events.filter((e) => e.pending)) await this.process(ev, undefined, out);
      plan = await this.planner(this.state, this.config, now, ctx);
    }
    out.push(...(await this.sweep(now, plan)));
    return out;
  }

  /**
   * Move memories made with another embedder into the current vector space: each one's vector
   * becomes the normalised mean of its linked items' vectors, exactly how memories are formed. A
   * memory none of whose items is still in the catalog cannot be placed and is forgotten.
   * Statements, strength and evidence are kept. Returns how many memories were moved and dropped.
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
   * STEAM's training loop over a user's history: for each interaction, a forward step (does
   * memory prefer the real item over `negativeFor(i)`?), then a backward step (reflection →
   * consolidation or formation; misleading memories weakened). `correct` sums the forward
   * credits (ties count half).
   */
  async train(history: readonly Interaction[], negativeFor: (index: number) => string | undefined): Promise<{ correct: number; steps: number }> {
    if (!Array.isArray(history) || history.length === 0) throw new RangeError('train: history is empty (nothing to learn from)');
    const valid = history.map((it, i) => {
      let v: ValidInteraction;
      try {
        v = validateInteraction(it);
      } catch (e) {
        throw new TypeError(`train: history[${i}]: ${(e as Error).message}`);
      }
      this.items.item(v.item);
      return v;
    });
    let correct = 0;
    for (let i = 0; i < valid.length; i++) {
      const it = valid[i];
      const ev = appendEvent(this.state, this.config, it);
      correct += await this.process(ev, negativeFor(i));
      // why: training is offline batch work, the planner's idle case.
      await this.sweep(it.at, await this.planner(this.state, this.config, it.at, { idle: true }));
    }
    return { correct, steps: valid.length };
  }

  /** Forget one memory now (the user asked). */
  forget(memoryId: string): boolean {
    const e = forget(this.state, this.ctx(this.clock()), memoryId, 'asked by the user');
    if (e) this.emit(e);
    return e !== null;
  }

  /** What a reasoner may read of a memory (statement, category, strength, evidence, its items; no embedding). */
  view(m: AtomicMemory): MemoryView {
    return {
      id: m.id,
      content: m.content,
      category: m.category,
      strength: m.strength,
      evidence: m.evidence,
      items: m.items.filter((id) => this.items.has(id)).map((id) => this.items.item(id)),
    };
  }

  /** Run one reasoner operation; if it fails, the rules reasoner does that operation instead. */
  async reason<T>(op: (r: Reasoner) => Promise<T>): Promise<T> {
    if (this.reasoner === this.rules) return op(this.rules);
    try {
      return await op(this.reasoner);
    } catch {
      return op(this.rules);
    }
  }

  private ctx(now: number): OpContext {
    return { now, newId: this.newId };
  }

  private emit(e: LifecycleEvent): void {
    this.onLifecycle?.(e);
  }

  /** Memory-only preference score of an item (the forward step's judgement). */
  private personal(vector: Float32Array, now: number): number {
    let s = 0;
    for (const r of retrieveOwn(this.state.memories, vector, this.config.k2, this.config.tau)) {
      s += salience(this.config, r.memory, now) * r.similarity;
    }
    return s;
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
    let negItem: Item | undefined;
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
    if (this.ablation) reflection = this.ablation.reflect(reflection, this.state);
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

  /** Run a plan's sweep operations (merge, forget, resynthesize). */
  private async sweep(now: number, plan: Plan): Promise<LifecycleEvent[]> {
    const out: LifecycleEvent[] = [];
    const ctx = this.ctx(now);
    for (const [keep, absorb] of this.ablation?.merges === false ? [] : plan.merge) {
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
