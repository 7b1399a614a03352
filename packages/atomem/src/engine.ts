/**
 * `atomem/engine` — the memory agent and its building blocks, for Node (benchmarks, servers),
 * tests and custom workers. A shop page imports `atomem` instead (`createAtomem`, the small
 * main-thread client that runs all of this in a Web Worker).
 */
export {
  MemoryAgent,
  spaceDefaults,
  EXCLUDE_RULES,
  varietyOrder,
  type AgentOptions,
  type AgentMode,
  type Recommendation,
  type RecommendOpts,
  type RecommendOptions as AgentRecommendOptions,
  type IntentSelection,
  type ExcludeRule,
  type FirstVisitPrior,
} from './agent/agent.js';
export { diversify, type Aspect, type DiversifyCandidate, type DiversifyParams } from './core/diversify.js';
export { INTENT_MAX_CHARS, InvalidIntentError, cleanIntent, type InvalidIntentReason } from './core/intent.js';
export { ItemVectors, UnknownItemError } from './agent/items.js';
export { DEFAULT_CONFIG, EMBEDDER_TAU, resolveConfig, tauFor, type AtomemConfig, type RankWeights } from './core/config.js';
export { rulesPlanner, type Plan, type Planner } from './core/planner.js';
export type { Reason, RankedItem, Features } from './core/rank.js';
export { combine } from './core/rank.js';
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
export { USE_LITE_ID, USE_LITE_FLOAT32_ID, USE_LITE_DIM } from './embed/use-lite-id.js';
export type { UseLiteOptions, UseLiteEmbedder } from './embed/use-lite.js';
import type { UseLiteOptions, UseLiteEmbedder } from './embed/use-lite.js';

/**
 * Load USE-lite (see `embed/use-lite.ts`). tfjs is imported on this first call, not when
 * `atomem/engine` loads, so Node code that never embeds text (the index service) needs no tfjs;
 * in Node, install the optional peers `@tensorflow/tfjs-core`, `@tensorflow/tfjs-converter` and
 * `@tensorflow/tfjs-backend-wasm` (4.22) to use it.
 */
export async function createUseLiteEmbedder(options?: UseLiteOptions): Promise<UseLiteEmbedder> {
  const { createUseLiteEmbedder: create } = await import('./embed/use-lite.js');
  return create(options);
}
export { cacheKey, createCachedEmbedder, itemText, type CachedEmbedder } from './embed/cache.js';
export { RulesReasoner } from './reason/rules.js';
export type { Reasoner, MemoryText, MemoryView, ForwardStep, Reflection } from './reason/types.js';
export type { CommunityView, KnownCommunity, CommunityContext } from './core/retrieve.js';
export { MemoryStore, InvalidImportError, StorageQuotaError, type OpenStoreOptions, type ExportFile } from './store/index.js';

// ——— building blocks for the benchmark, the demo and custom hosts ———
export { actionWeight } from './core/memory.js';
export { meanNormalized } from './core/vector.js';
export { createHashingEmbedder } from './embed/hashing.js';
export { LlmReasoner, addCosts, zeroCosts, type OperationCosts } from './reason/llm.js';
export { llmPlanner } from './reason/planner.js';
export { OPERATIONS } from './reason/prompts.js';
export { createOpenAICompatibleModel } from './models/openai.js';
export { createScriptedModel } from './models/scripted.js';
export type { LanguageModel } from './models/types.js';
export { prototypeOf } from './community/prototype.js';
export { Rng, hash32 } from './core/rng.js';
export {
  DEFAULT_LDP,
  ReportHistogram,
  composedChannel,
  composedEpsilon,
  estimateCounts,
  estimateStd,
  grr,
  ldpParams,
  makeReport,
  type PermanentMemo,
} from './community/ldp.js';
export {
  buildRelease,
  decodePrototypes,
  matchMemory,
  type BuildReleaseOptions,
  type ItemCommunities,
  type ItemSpace,
  type MatchedCommunity,
} from './community/release.js';
export { ReportClient, ReportHttpError, reportDelay, WIRE_INIT, type ReportClientOptions, type SentReport } from './sync/report-client.js';
export { planEpoch, randomMomentIn, type EpochPlan } from './sync/schedule.js';
export {
  PRIO3_HPKE_INFO,
  PRIO3_HPKE_SUITE,
  PRIO3_PATHS,
  b64,
  encodePrio3Upload,
  prio3ChunkLength,
  prio3Hpke,
  prio3Measurement,
  prio3ShareAad,
  prio3Vdaf,
  sendPrio3Report,
  type Prio3Config,
  type Prio3Upload,
  type SealedShare,
  type SendPrio3ReportOptions,
} from './sync/prio3-report.js';
export {
  DEFAULT_BUDGET,
  DAY_MS,
  nextAllowed,
  privacyBudget,
  prune,
  refusal,
  spentEpsilon,
  subsampledEpsilon,
  type LedgerEntry,
  type PrivacyBudget,
} from './sync/budget.js';
export { AttesterTokenProvider, blindTokenRequest, epochChallenge, type TokenProvider, type AttesterTokenProviderOptions } from './sync/tokens.js';
