/**
 * ARS's planner: decides from the accumulated signal which lifecycle operations to run — not
 * after every event and not on a fixed timer. Per-event operations (extract / reinforce /
 * weaken) are decided by reflection; the planner decides when to process pending events, when
 * to sweep (merge, forget) and when to resynthesise the profile.
 *
 * Two planners share the {@link Planner} signature: {@link rulesPlanner} here (pure, immediate)
 * and the LLM planner (`src/reason/planner.ts`), which defers event processing to idle time and
 * lets a model choose among the sweep {@link SweepCandidates} computed here. Either way, the
 * hard limits (the memory cap) are enforced by {@link enforceCap}, never left to a model.
 */
import type { AtomemConfig } from './config.js';
import type { AtomicMemory, MemoryState } from './types.js';
import { memorySimilarity, pendingCount, salience } from './memory.js';

/** What the planner asks the agent to do now. */
export interface Plan {
  /** Turn pending events into memory (reflection → extract / reinforce / weaken). */
  processPending: boolean;
  /** Pairs to merge, `[keep, absorb]`: an absorbed memory appears once; a kept one may absorb several single-item memories. */
  merge: [string, string][];
  /** Memories to forget, with the reason. */
  forget: { id: string; reason: string }[];
  /** Regenerate the profile narrative. */
  resynthesize: boolean;
  /**
   * The planner considered a due resynthesis and declined it: its triggers (events and
   * prediction errors since the last synthesis) start again, so it is not asked at every event.
   */
  declinedSynthesis?: boolean;
}

/** When the planner is asked. */
export interface PlanContext {
  /**
   * True when the device is idle (no interaction for a while: the worker's idle timer): the
   * time for batched, costly operations. False right after an interaction.
   */
  idle: boolean;
}

/**
 * A planner: the rules planner, or the LLM planner (same signature). May be async (a model
 * call); must always return a valid plan (the LLM planner falls back to rules itself).
 */
export type Planner = (state: MemoryState, cfg: AtomemConfig, now: number, ctx?: PlanContext) => Plan | Promise<Plan>;

/** A possible merge: `[similarity, keep, absorb]` (the one with more evidence is kept). */
export type MergeCandidate = [number, string, string];

/** What a sweep could do, for a planner to choose from. */
export interface SweepCandidates {
  /** True when a sweep is due (events since the last one, or over the memory cap). */
  due: boolean;
  /** Disjoint merge pairs at similarity ≥ the threshold asked for, most similar first. */
  merges: MergeCandidate[];
  /** Faded, weakly supported memories (not in a merge pair). */
  faded: { id: string; reason: string }[];
}

/**
 * Merge and forget candidates. `mergeAt` lowers the merge threshold (the LLM planner looks at
 * near-misses too and decides); the rules planner uses `cfg.mergeThreshold`.
 */
export function sweepCandidates(state: MemoryState, cfg: AtomemConfig, now: number, mergeAt = cfg.mergeThreshold): SweepCandidates {
  const due = state.signal.eventsSinceSweep >= cfg.sweepEvery || state.memories.length > cfg.maxMemories;
  const out: SweepCandidates = { due, merges: [], faded: [] };
  if (!due) return out;
  // Merge: near-duplicate memories of the same polarity (greedy, most similar first).
  const pairs: MergeCandidate[] = [];
  const ms = state.memories;
  for (let i = 0; i < ms.length; i++) {
    for (let j = i + 1; j < ms.length; j++) {
      if (Math.sign(ms[i].strength) !== Math.sign(ms[j].strength)) continue;
      const s = memorySimilarity(ms[i], ms[j]);
      if (s >= mergeAt) {
        const [keep, absorb] = ms[i].evidence >= ms[j].evidence ? [ms[i].id, ms[j].id] : [ms[j].id, ms[i].id];
        pairs.push([s, keep, absorb]);
      }
    }
  }
  pairs.sort((a, b) => b[0] - a[0]);
  const used = new Set<string>();
  for (const p of pairs) {
    if (used.has(p[1]) || used.has(p[2])) continue;
    used.add(p[1]);
    used.add(p[2]);
    out.merges.push(p);
  }
  out.merges.push(...singletonAbsorptions(ms, cfg, used, now, state.nextSeq));
  // Forget: faded (by time or by activity), weakly supported memories.
  for (const m of ms) {
    if (used.has(m.id)) continue;
    const why = fadedReason(m, cfg, now, state.nextSeq);
    if (why !== undefined) out.faded.push({ id: m.id, reason: why });
  }
  return out;
}

/**
 * Why memory `m` should be forgotten, or undefined: it has little evidence (below
 * `cfg.forgetMinEvidence`) and either its salience decayed below `cfg.forgetThreshold` (time)
 * or none of the shopper's last `cfg.forgetAfterEvents` events touched it (activity).
 * `nextSeq` is the state's next event sequence number (without it, time only).
 */
export function fadedReason(m: AtomicMemory, cfg: AtomemConfig, now: number, nextSeq?: number): string | undefined {
  if (m.evidence >= cfg.forgetMinEvidence) return undefined;
  if (Math.abs(salience(cfg, m, now)) < cfg.forgetThreshold) return 'faded with little evidence';
  if (cfg.forgetAfterEvents > 0 && m.lastEventSeq !== undefined && nextSeq !== undefined && nextSeq - 1 - m.lastEventSeq >= cfg.forgetAfterEvents) {
    return `not seen again in the last ${cfg.forgetAfterEvents} events`;
  }
  return undefined;
}

/**
 * Single-item memories that were never reinforced (one item, evidence below
 * `cfg.forgetMinEvidence`) next to an established interest: each is absorbed into its most
 * similar established memory (several items, or reinforced to `forgetMinEvidence`) of the same
 * polarity when their cosine reaches
 * `cfg.tau × cfg.absorbSingletons` (below tau: the item did not consolidate when it came, but it
 * belongs to that interest more than to a memory of its own). `[similarity, keep, absorb]`,
 * absorbed ones disjoint from `used` (which it extends); one memory may absorb several singletons.
 * A faded singleton is left to be forgotten.
 */
export function singletonAbsorptions(ms: readonly AtomicMemory[], cfg: AtomemConfig, used: Set<string>, now: number, nextSeq?: number): MergeCandidate[] {
  if (!(cfg.absorbSingletons > 0)) return [];
  const at = cfg.tau * cfg.absorbSingletons;
  const out: MergeCandidate[] = [];
  const hosts = ms.filter((m) => (m.items.length >= 2 || m.evidence >= cfg.forgetMinEvidence) && !used.has(m.id));
  for (const m of ms) {
    if (used.has(m.id) || m.items.length !== 1 || m.evidence >= cfg.forgetMinEvidence || m.strength === 0) continue;
    // a faded one is forgotten instead (see below in sweepCandidates)
    if (fadedReason(m, cfg, now, nextSeq) !== undefined) continue;
    let best: AtomicMemory | undefined;
    let bestS = -Infinity;
    for (const h of hosts) {
      if (h === m || used.has(h.id) || Math.sign(h.strength) !== Math.sign(m.strength)) continue;
      const sim = memorySimilarity(m, h);
      if (sim > bestS) (bestS = sim), (best = h);
    }
    if (best && bestS >= at) {
      out.push([bestS, best.id, m.id]);
      used.add(m.id);
    }
  }
  return out;
}

/**
 * Add forgets until the memories left after `plan` fit `cfg.maxMemories`: the least salient
 * (salience × log evidence) of those neither merged away nor already forgotten. Mutates and
 * returns `plan`. Both planners end with this, so no model can keep memory over the cap.
 */
export function enforceCap(state: MemoryState, cfg: AtomemConfig, now: number, plan: Plan): Plan {
  const absorbed = new Set(plan.merge.map((p) => p[1]));
  const inPair = new Set(plan.merge.flat());
  const forgotten = new Set(plan.forget.map((f) => f.id));
  const remaining = state.memories.filter((m) => !absorbed.has(m.id) && !forgotten.has(m.id)).length;
  if (remaining <= cfg.maxMemories) return plan;
  const weight = (m: AtomicMemory): number => Math.abs(salience(cfg, m, now)) * Math.log1p(m.evidence);
  const candidates = state.memories.filter((m) => !inPair.has(m.id) && !forgotten.has(m.id)).sort((a, b) => weight(a) - weight(b));
  for (const m of candidates.slice(0, remaining - cfg.maxMemories)) plan.forget.push({ id: m.id, reason: 'over the memory cap' });
  return plan;
}

/** True when the profile should be rewritten now (none yet, enough new events, or enough mistakes). */
export function synthesisDue(state: MemoryState, cfg: AtomemConfig): boolean {
  return (
    state.memories.length > 0 &&
    (state.profile === null || state.signal.eventsSinceSynthesis >= cfg.synthesizeEvery || state.signal.predictionErrors >= cfg.synthesizeOnErrors)
  );
}

/** The rules planner. Pure: same state, config and time → same plan. Processes events at once (ignores `idle`). */
export function rulesPlanner(state: MemoryState, cfg: AtomemConfig, now: number): Plan {
  const c = sweepCandidates(state, cfg, now);
  const plan: Plan = {
    processPending: pendingCount(state) > 0,
    merge: c.merges.map(([, keep, absorb]) => [keep, absorb]),
    forget: [...c.faded],
    resynthesize: synthesisDue(state, cfg),
  };
  return c.due ? enforceCap(state, cfg, now, plan) : plan;
}
