/**
 * The worker RPC contract: every type that crosses the main-thread ↔ worker boundary.
 * Both sides import this one file (`src/worker/engine.ts` implements {@link EngineApi},
 * `src/client/index.ts` calls it through Comlink). Types only, no runtime code.
 */
import type { AtomemConfig, RankWeights } from '../core/config.js';
import type { Action, AtomicMemory, Item, LifecycleEvent, Profile } from '../core/types.js';
import type { ExportFile } from '../store/file.js';

/** Partial engine configuration (any knob of {@link AtomemConfig}; `weights` may be partial too). */
export type EngineConfig = Partial<Omit<AtomemConfig, 'weights'>> & { weights?: Partial<RankWeights> };

/** Options of the engine's `init` (and of `createAtomem`). Everything here is structured-clonable. */
export interface EngineOptions {
  /** Local profile: one IndexedDB database each. Defaults to `'default'`. */
  profile?: string;
  /** The shop's catalog. Every tracked or ranked id must be in it. */
  catalog: Item[];
  /**
   * Which embedder the worker builds. Only `'hashing'` (deterministic feature hashing,
   * instant, no model; fine for tests and demos, poor quality) exists for now; USE-lite and
   * MiniLM (WebGPU → WASM, with download progress) come next.
   */
  embedder: 'hashing';
  /** Engine knobs; defaults from `resolveConfig` (tau from the embedder). */
  config?: EngineConfig;
}

/** One interaction as the page reports it. `at` defaults to the worker's `Date.now()`, `action` to `'click'`. */
export interface TrackInput {
  item: string;
  action?: Action;
  at?: number;
}

/** A ranked candidate with readable explanations, best first. */
export interface RecommendationResult {
  id: string;
  score: number;
  explanations: string[];
}

/** Progress of a long step (today: embedding the catalog during `init`). */
export interface ProgressEvent {
  /** What is progressing, e.g. `'embed-catalog'`. */
  stage: string;
  done: number;
  total: number;
}

/** An error as it crosses the boundary (and as `error` events carry it). */
export interface SerializedError {
  /** The error class name, e.g. `UnknownItemError`, `InvalidImportError`, `TypeError`. */
  name: string;
  message: string;
  stack?: string;
  /** Own primitive fields of the original error, e.g. `{ itemId }` or `{ field }`. */
  details?: Record<string, string | number | boolean>;
}

/** Event name → payload, for `on(event, cb)`. */
export interface EngineEventMap {
  progress: ProgressEvent;
  /** A memory lifecycle event (formed, reinforced, weakened, merged, forgotten, resynthesised). */
  memory: LifecycleEvent;
  /** A non-fatal problem the engine worked around (e.g. storage quota: writes kept in memory), or a dead worker. */
  error: SerializedError;
}

/** Names of engine events. */
export type EngineEventName = keyof EngineEventMap;

/** One event as the engine pushes it to its listener. */
export type EngineEvent = { [K in EngineEventName]: { type: K; payload: EngineEventMap[K] } }[EngineEventName];

/** The engine's listener (a `Comlink.proxy` callback on the main thread). */
export type EngineListener = (event: EngineEvent) => void;

/** What the worker exposes. Every method except `subscribe` needs `init` first. */
export interface EngineApi {
  /** Register the (single) event listener; call before `init` to get its progress. */
  subscribe(listener: EngineListener): void;
  /** Open the profile's store, load its state, build the agent and replay pending events. Re-init replaces everything. */
  init(options: EngineOptions): Promise<void>;
  /** Record one interaction: durable in IndexedDB first, then turned into memory, then the state is saved. */
  track(interaction: TrackInput): Promise<void>;
  /** Rank candidate ids (unknown id → `UnknownItemError`). */
  recommend(candidates: string[]): Promise<RecommendationResult[]>;
  /** Atomic memories, most salient first. */
  memories(): Promise<AtomicMemory[]>;
  /** The profile narrative, or null before the first synthesis. */
  profile(): Promise<Profile | null>;
  /** Forget one memory (the user asked). False when no such memory. */
  forget(memoryId: string): Promise<boolean>;
  /** The stored state as a versioned JSON-safe export file. */
  export(): Promise<ExportFile>;
  /** Replace the state with an export file (`InvalidImportError` naming the bad field; nothing changed then). */
  import(file: unknown): Promise<void>;
  /** Erase everything of this profile; the engine continues with an empty state. */
  erase(): Promise<void>;
}
