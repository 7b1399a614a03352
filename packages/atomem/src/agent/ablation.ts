/**
 * The benchmark's ablations of the memory structure (STEAM's paper): variants of the lifecycle
 * that a shop never runs. The product path asks {@link ablation} once, at construction; with the
 * default mode it returns nothing and the lifecycle runs unchanged.
 */
import type { MemoryState } from '../core/types.js';
import type { Reflection } from '../reason/types.js';

/** Variants used by the benchmark's ablations (STEAM's paper). */
export interface AgentMode {
  /** false = one summary memory instead of atomic memories. */
  atomic: boolean;
  /** false = never consolidate: every interaction forms a memory. */
  consolidation: boolean;
  /** false = sweeps merge nothing (with `consolidation: false`: the no-consolidation ablation). Default true. */
  merge?: boolean;
}

/** How an ablation changes the lifecycle: a reflection's decision overridden, sweeps without merges. */
export interface Ablation {
  /** The decision the ablated memory takes instead of the reflection's. */
  reflect(reflection: Reflection, state: MemoryState): Reflection;
  /** False: sweeps merge nothing (a merge is consolidation of two memories). */
  merges: boolean;
}

/** The ablation a mode asks for, or undefined for the shipped lifecycle (atomic memories, consolidation, merges). */
export function ablation(mode: Partial<AgentMode> | undefined): Ablation | undefined {
  const m: AgentMode = { atomic: true, consolidation: true, ...mode };
  if (m.atomic && m.consolidation && m.merge !== false) return undefined;
  return {
    merges: m.merge !== false,
    reflect(reflection, state) {
      if (!m.atomic) {
        const only = state.memories[0];
        return only ? { ...reflection, decision: 'consolidate', target: only.id } : { ...reflection, decision: 'form' };
      }
      if (!m.consolidation) return { ...reflection, decision: 'form', target: undefined };
      return reflection;
    },
  };
}
