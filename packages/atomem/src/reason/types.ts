import type { Action, Item } from '../core/types.js';

/** The part of a memory a reasoner may read (no embeddings, no ids of other users). */
export interface MemoryView {
  id: string;
  content: string;
  category: string;
  strength: number;
  evidence: number;
  /** Linked items, most recent last. */
  items: Item[];
}

/** A memory's text as a reasoner writes it. */
export interface MemoryText {
  /** One readable statement, e.g. "Enjoys crime thrillers such as Fargo (1996) and Heat (1995)". */
  content: string;
  /** A short category, e.g. "Crime". */
  category: string;
}

/** STEAM's forward step, given to reflection: the agent chose between the real item and a negative. */
export interface ForwardStep {
  /** Action weight of the real interaction (negative for a dislike). */
  weight: number;
  /** What the user really did next. */
  actual: Item;
  /** The negative it was compared with (absent outside training: plain observation). */
  negative?: Item;
  /** True when the agent's memories preferred the actual item (true without a negative). */
  correct: boolean;
  /** Memories retrieved for the actual item with their similarity (best first). */
  supporting: { memory: MemoryView; similarity: number }[];
  /** Memories retrieved for the negative with their similarity (best first). */
  misleading: { memory: MemoryView; similarity: number }[];
  /** Consolidation threshold (tau) in force. */
  tau: number;
}

/** STEAM's backward step: what reflection concluded. */
export interface Reflection {
  /** `consolidate` into `target`, or `form` a new memory. */
  decision: 'consolidate' | 'form';
  /** Memory to consolidate into (when decision is `consolidate`). */
  target?: string;
  /** Memories that misled the forward step and should be weakened. */
  misled: string[];
  /** One-line reason, kept for the inspector. */
  insight: string;
}

/** What the LLM planner shows the model: counts, and candidate sweeps computed by the rules. */
export interface PlanInput {
  /** Counts only (no content). */
  signal: {
    memories: number;
    maxMemories: number;
    eventsSinceSweep: number;
    eventsSinceSynthesis: number;
    predictionErrors: number;
    hasProfile: boolean;
  };
  /** Candidate merge pairs (near-duplicates of the same polarity), most similar first. */
  merges: { a: MemoryView; b: MemoryView; similarity: number }[];
  /** Faded, weakly supported memories that could be forgotten. */
  faded: MemoryView[];
  /** True when the rules would resynthesise the profile now. */
  synthesisDue: boolean;
}

/** The LLM planner's choice among {@link PlanInput}'s candidates (indices into its lists). */
export interface PlanDecision {
  merge: number[];
  forget: number[];
  resynthesize: boolean;
  reason: string;
}

/** Listwise reranking: the engine's top candidates (its order) and the memories to judge them by. */
export interface RerankInput {
  /** Strongest memories first. */
  memories: MemoryView[];
  /** Candidates in the engine's order. */
  candidates: { id: string; item: Item }[];
  /** The profile narrative (ARS's tier 3), if one was synthesised. */
  profile?: string;
  /** The shopper's latest events, oldest first (ARS: the ranker reads the recent events). */
  recent?: { item: Item; action: Action }[];
  /** The shopper's stated intent (cleaned; data, never instructions). */
  intent?: string;
}

/** A reranking: every candidate id exactly once, best first, each with a one-line reason. */
export interface RerankResult {
  order: { id: string; why: string }[];
}

/**
 * Everything an LLM would do for memory, behind one interface: the rules reasoner
 * (no model) and LLM reasoners (later) implement it. Every method must return valid output
 * or throw; callers fall back to rules per operation.
 */
export interface Reasoner {
  /** `rules`, or `llm:<model id>`. */
  readonly id: string;
  /** Formation / after consolidation: write a memory's statement and category from its items. */
  describeMemory(input: { items: Item[]; strength: number; previous?: MemoryText }): Promise<MemoryText>;
  /** Reflection after a forward step: consolidate into which memory, or form a new one. */
  reflect(step: ForwardStep): Promise<Reflection>;
  /** Merge two overlapping memories into one statement. */
  mergeMemories(a: MemoryView, b: MemoryView): Promise<MemoryText>;
  /** Summarise a community prototype from the items its members share most. */
  summarizePrototype(input: { items: Item[]; size: number }): Promise<string>;
  /** Synthesise the profile narrative from the memories (strongest first). */
  synthesizeProfile(memories: MemoryView[]): Promise<string>;
  /** Listwise reranking of the engine's top candidates, with one-line reasons (rules: the engine's order, no reasons). */
  rerank(input: RerankInput): Promise<RerankResult>;
}
