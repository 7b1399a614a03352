/**
 * atomem's memory model: ARS's three tiers (events → atomic memories → profile) where each
 * atomic memory is STEAM's unit `m = {c, e, I, L}` carrying ARS's fields.
 * Pure types, no I/O.
 */

/** A catalog item as the shop describes it. Only `id` and `title` are required. */
export interface Item {
  /** Stable catalog id. */
  id: string;
  /** Human-readable title, e.g. "Fargo (1996)". */
  title: string;
  /** Departments / genres, most specific last is fine; used for memory categories. */
  categories?: string[];
  /** Free text; used by embedders and the rules reasoner. */
  description?: string;
}

/** What the shopper did. Weights are in {@link ACTION_WEIGHTS}. */
export type Action = 'view' | 'click' | 'cart' | 'purchase' | 'rate' | 'like' | 'dislike' | 'skip';

/** How strongly each action supports (positive) or contradicts (negative) an interest. */
export const ACTION_WEIGHTS: Readonly<Record<Action, number>> = {
  view: 0.3,
  click: 0.5,
  cart: 0.8,
  purchase: 1,
  rate: 1,
  like: 1,
  dislike: -1,
  skip: -0.3,
};

/** One interaction as the shop reports it. */
export interface Interaction {
  /** Catalog item id. */
  item: string;
  /** Epoch milliseconds. */
  at: number;
  /** Defaults to `'click'`. */
  action?: Action;
}

/** Tier 1: a raw event in the bounded FIFO. `pending` until turned into memory. */
export interface MemoryEvent {
  /** Monotonic per-user sequence number (idempotency key). */
  seq: number;
  item: string;
  at: number;
  action: Action;
  pending: boolean;
}

/** A vector that always carries the id of the embedder that produced it. */
export interface Embedding {
  /** e.g. `use-lite@1.3.3/float32`. Vectors of two embedders never meet. */
  embedderId: string;
  /** L2-normalised. */
  vector: Float32Array;
}

/** Tier 2: one interest. STEAM's `{c, e, I, L}` with ARS's category, strength and evidence. */
export interface AtomicMemory {
  id: string;
  /** Natural-language statement `c`, e.g. "Enjoys crime thrillers such as Fargo (1996)". */
  content: string;
  /** ARS category, e.g. "Crime". */
  category: string;
  /** `e`, L2-normalised, with its embedder id. */
  embedding: Embedding;
  /** `I`: linked interactions (item ids, most recent last, bounded). */
  items: string[];
  /** Belief in [-1, 1]: positive = likes, negative = avoids. */
  strength: number;
  /** Accumulated weighted evidence (sum of |action weight| that touched this memory). */
  evidence: number;
  /** `L`: ids of community prototypes this memory belongs to (from the shared index). */
  links: string[];
  createdAt: number;
  updatedAt: number;
  /**
   * Sequence number ({@link MemoryEvent.seq}) of the last event that formed or reinforced this
   * memory; forgetting by activity (`forgetAfterEvents`) counts the shopper's events since. Absent
   * in memories stored before it existed (those fade by time only).
   */
  lastEventSeq?: number;
}

/** Tier 3: one narrative synthesised from the memories. */
export interface Profile {
  narrative: string;
  /** Memory ids the narrative was written from. */
  sources: string[];
  updatedAt: number;
}

/** The whole state of one user's memory (what the store persists). */
export interface MemoryState {
  version: 1;
  /** Next event sequence number. */
  nextSeq: number;
  /** Bounded FIFO, oldest first. */
  events: MemoryEvent[];
  memories: AtomicMemory[];
  profile: Profile | null;
  /** Accumulated planner signal since the last operations ran. */
  signal: PlannerSignal;
  /**
   * Protocol v2 reporting state: the memoized permanent randomization per reported item
   * (RAPPOR-style, so later reports cannot average its noise away) and the last epoch a
   * report was sent for (at most one per epoch). Never exported.
   */
  reporting?: ReportingState;
}

/** See {@link MemoryState.reporting}. */
export interface ReportingState {
  /** Item → memoized (cohort, permanently randomized bucket). */
  memo: Record<string, { cohort: number; bucket: number }>;
  /** Last epoch a report was sent for. */
  lastEpoch?: number;
}

/** What the rules planner accumulates between runs. */
export interface PlannerSignal {
  /** Forward-step mistakes (the real item lost to a negative) since last resynthesis. */
  predictionErrors: number;
  /** Events processed since the profile was last synthesised. */
  eventsSinceSynthesis: number;
  /** Events processed since the last forget/merge sweep. */
  eventsSinceSweep: number;
}

/** The six ARS lifecycle operations. STEAM consolidation = reinforce (+merge); formation = extract. */
export type LifecycleOp = 'extract' | 'reinforce' | 'weaken' | 'merge' | 'forget' | 'resynthesize';

/** A lifecycle event the agent emits (the demo's inspector shows them). */
export interface LifecycleEvent {
  op: LifecycleOp;
  memoryId: string;
  /** For merge: the memory merged away. */
  otherId?: string;
  at: number;
  detail?: string;
}
