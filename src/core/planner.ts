/**
 * ARS's planner, rules edition: decides from the accumulated signal which lifecycle
 * operations to run — not after every event and not on a fixed timer.
 * Per-event operations (extract / reinforce / weaken) are decided by reflection; the planner
 * decides when to process pending events and when to sweep (merge, forget) and resynthesise.
 */
import type { AtomemConfig } from './config.js';
import type { MemoryState } from './types.js';
import { memorySimilarity, salience } from './memory.js';

/** What the planner asks the agent to do now. */
export interface Plan {
  /** Turn pending events into memory (reflection → extract / reinforce / weaken). */
  processPending: boolean;
  /** Pairs to merge, `[keep, absorb]`, most similar first; a memory appears at most once. */
  merge: [string, string][];
  /** Memories to forget, with the reason. */
  forget: { id: string; reason: string }[];
  /** Regenerate the profile narrative. */
  resynthesize: boolean;
}

/** A planner: rules here; an LLM planner implements the same signature (later issue). */
export type Planner = (state: MemoryState, cfg: AtomemConfig, now: number) => Plan;

/** The rules planner. Pure: same state, config and time → same plan. */
export const rulesPlanner: Planner = (state, cfg, now) => {
  const plan: Plan = { processPending: false, merge: [], forget: [], resynthesize: false };
  plan.processPending = state.events.some((e) => e.pending);

  const sweepDue = state.signal.eventsSinceSweep >= cfg.sweepEvery || state.memories.length > cfg.maxMemories;
  if (sweepDue) {
    // Merge: near-duplicate memories of the same polarity (greedy, most similar first).
    const pairs: [number, string, string][] = [];
    const ms = state.memories;
    for (let i = 0; i < ms.length; i++) {
      for (let j = i + 1; j < ms.length; j++) {
        if (Math.sign(ms[i].strength) !== Math.sign(ms[j].strength)) continue;
        const s = memorySimilarity(ms[i], ms[j]);
        if (s >= cfg.mergeThreshold) {
          const [keep, absorb] = ms[i].evidence >= ms[j].evidence ? [ms[i].id, ms[j].id] : [ms[j].id, ms[i].id];
          pairs.push([s, keep, absorb]);
        }
      }
    }
    pairs.sort((a, b) => b[0] - a[0]);
    const used = new Set<string>();
    for (const [, keep, absorb] of pairs) {
      if (used.has(keep) || used.has(absorb)) continue;
      used.add(keep);
      used.add(absorb);
      plan.merge.push([keep, absorb]);
    }
    // Forget: faded, weakly supported memories; then the least salient beyond the cap.
    const merged = new Set(plan.merge.map((p) => p[1]));
    const alive = ms.filter((m) => !merged.has(m.id) && !used.has(m.id));
    const forgotten = new Set<string>();
    for (const m of alive) {
      if (Math.abs(salience(cfg, m, now)) < cfg.forgetThreshold && m.evidence < cfg.forgetMinEvidence) {
        plan.forget.push({ id: m.id, reason: 'faded with little evidence' });
        forgotten.add(m.id);
      }
    }
    const remaining = ms.length - plan.merge.length - forgotten.size;
    if (remaining > cfg.maxMemories) {
      const candidates = alive
        .filter((m) => !forgotten.has(m.id))
        .sort((a, b) => Math.abs(salience(cfg, a, now)) * Math.log1p(a.evidence) - Math.abs(salience(cfg, b, now)) * Math.log1p(b.evidence));
      for (const m of candidates.slice(0, remaining - cfg.maxMemories)) plan.forget.push({ id: m.id, reason: 'over the memory cap' });
    }
  }

  plan.resynthesize =
    state.memories.length > 0 &&
    (state.profile === null ||
      state.signal.eventsSinceSynthesis >= cfg.synthesizeEvery ||
      state.signal.predictionErrors >= cfg.synthesizeOnErrors);
  return plan;
};
