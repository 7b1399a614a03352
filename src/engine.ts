/**
 * `atomem/engine` — the memory agent and its building blocks, for Node (benchmarks, servers),
 * tests and custom workers. A shop page imports `atomem` instead (`createAtomem`, the small
 * main-thread client that runs all of this in a Web Worker).
 */
export { MemoryAgent, type AgentOptions, type AgentMode, type PrivacyLevel, type Recommendation } from './agent/agent.js';
export { ItemVectors, UnknownItemError } from './agent/items.js';
export { DEFAULT_CONFIG, EMBEDDER_TAU, resolveConfig, tauFor, type AtomemConfig, type RankWeights } from './core/config.js';
export { rulesPlanner, type Plan, type Planner } from './core/planner.js';
export type { Reason, RankedItem, Features } from './core/rank.js';
export type {
  Action,
  AtomicMemory,
  Embedding,
  Interaction,
  Item,
  LifecycleEvent,
  LifecycleOp,
  MemoryEvent,
  MemoryState,
  Profile,
} from './core/types.js';
export { ACTION_WEIGHTS } from './core/types.js';
export type { Embedder } from './embed/types.js';
export { createUseLiteEmbedder, USE_LITE_ID, type UseLiteOptions } from './embed/use-lite.js';
export { createCachedEmbedder, itemText, type CachedEmbedder } from './embed/cache.js';
export { RulesReasoner } from './reason/rules.js';
export type { Reasoner, MemoryText, MemoryView, ForwardStep, Reflection } from './reason/types.js';
export type { SharedIndex, SharedMemoryUpload, CommunityView } from './community/types.js';
export { createInProcessIndex, type InProcessIndex, type InProcessIndexOptions } from './community/index.js';
export { MemoryStore, InvalidImportError, StorageQuotaError, type OpenStoreOptions, type ExportFile } from './store/index.js';
