/**
 * ARS's planner, LLM edition: the same {@link Planner} signature as the rules planner.
 *
 * - **Batching.** Right after an interaction (`idle: false`) it only processes pending events
 *   once `cfg.batchEvents` are waiting; otherwise they stay durable and pending until the worker
 *   reports idle time, when the whole batch is processed (each event's reflection and statement
 *   are model calls, so a shopper's click never waits on a model).
 * - **Sweeps.** At idle time, with no events pending, it computes the candidates the rules would
 *   look at — merge pairs down to `mergeThreshold - mergeSlack`, faded memories, whether
 *   resynthesis is due — and, if there is anything to decide, asks the model which to run
 *   (`planLifecycle@1`). Nothing to decide costs no call.
 * - **Safety.** The model can only pick among candidates (labels are checked); the memory cap is
 *   enforced afterwards whatever it said, and the first profile is always written; if the call fails (invalid output, timeout, model
 *   error, or the reasoner's call budget is spent) the rules plan is used for that sweep.
 */
import type { AtomemConfig } from '../core/config.js';
import { enforceCap, rulesPlanner, sweepCandidates, synthesisDue, type Plan, type PlanContext, type Planner } from '../core/planner.js';
import { pendingCount } from '../core/memory.js';
import type { AtomicMemory, MemoryState } from '../core/types.js';
import type { PlanDecision, PlanInput } from './types.js';

/** What the LLM planner needs of a reasoner (an {@link import('./llm.js').LlmReasoner}). */
export interface PlanningReasoner {
  planLifecycle(input: PlanInput): Promise<PlanDecision>;
}

/** Options of {@link llmPlanner}. */
export interface LlmPlannerOptions {
  /** Merge pairs this far below `mergeThreshold` are shown to the model too. Default 0.05. */
  mergeSlack?: number;
  /** Called with each decision the model made (for logs and the inspector). */
  onDecision?: (decision: PlanDecision, input: PlanInput) => void;
}

const EMPTY = (): Plan => ({ processPending: false, merge: [], forget: [], resynthesize: false });

/**
 * The LLM planner. `view` turns a memory into what the reasoner may read (the agent's view:
 * statement, category, strength, evidence, items).
 */
export function llmPlanner(reasoner: PlanningReasoner, view: (m: AtomicMemory) => PlanInput['faded'][number], options: LlmPlannerOptions = {}): Planner {
  const slack = options.mergeSlack ?? 0.05;
  if (!(slack >= 0 && slack < 1)) throw new RangeError('mergeSlack must be in [0, 1)');
  return async (state: MemoryState, cfg: AtomemConfig, now: number, ctx: PlanContext = { idle: false }): Promise<Plan> => {
    const pending = pendingCount(state);
    if (pending > 0) {
      // Events first: at idle, or when a burst has piled up enough of them. Sweeps come after.
      return { ...EMPTY(), processPending: ctx.idle || pending >= cfg.batchEvents };
    }
    if (!ctx.idle) return EMPTY();
    const c = sweepCandidates(state, cfg, now, Math.max(0, cfg.mergeThreshold - slack));
    const due = synthesisDue(state, cfg);
    if (c.merges.length === 0 && c.faded.length === 0 && !due) return c.due ? enforceCap(state, cfg, now, EMPTY()) : EMPTY();
    const byId = new Map(state.memories.map((m) => [m.id, m]));
    const input: PlanInput = {
      signal: {
        memories: state.memories.length,
        maxMemories: cfg.maxMemories,
        eventsSinceSweep: state.signal.eventsSinceSweep,
        eventsSinceSynthesis: state.signal.eventsSinceSynthesis,
        predictionErrors: state.signal.predictionErrors,
        hasProfile: state.profile !== null,
      },
      merges: c.merges.map(([similarity, keep, absorb]) => ({ a: view(byId.get(keep)!), b: view(byId.get(absorb)!), similarity })),
      faded: c.faded.map((f) => view(byId.get(f.id)!)),
      synthesisDue: due,
    };
    let decision: PlanDecision;
    try {
      decision = await reasoner.planLifecycle(input);
    } catch {
      // The reasoner reported why (its fallback feed); the rules decide this sweep.
      return rulesPlanner(state, cfg, now);
    }
    options.onDecision?.(decision, input);
    const plan: Plan = {
      processPending: false,
      merge: decision.merge.map((i) => [c.merges[i][1], c.merges[i][2]]),
      forget: decision.forget.map((i) => ({ id: c.faded[i].id, reason: `${c.faded[i].reason}; planner: ${decision.reason}` })),
      // why: a first profile is not optional (ranking and the inspector read it).
      resynthesize: state.memories.length > 0 && (decision.resynthesize || state.profile === null),
    };
    if (due && !plan.resynthesize) plan.declinedSynthesis = true;
    return enforceCap(state, cfg, now, plan);
  };
}
