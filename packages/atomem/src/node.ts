/**
 * `atomem/engine`, the package's Node entry (this file; the worker's `Engine` class is
 * `src/worker/engine.ts`): the memory agent and the parts the index service
 * (packages/atomem-index), the benchmark (packages/bench) and the demo shop use, each by name.
 * A shop page imports `atomem` instead (`createAtomem`, the small main-thread client that runs
 * the engine in a Web Worker); the wire formats are `atomem/protocol`, the shop's server side
 * `atomem/shop`. Add a name here when one of them needs it.
 */
export { MemoryAgent, type AgentOptions, type AgentMode } from './agent/agent.js';

export { ItemVectors } from './agent/items.js';
export { withinSession } from './agent/shelf.js';
export { DEFAULT_CONFIG, resolveConfig, type AtomemConfig } from './core/config.js';

export { combine } from './core/rank.js';
export type { Action, Interaction, Item, LifecycleEvent, MemoryState } from './core/types.js';
export { ACTION_WEIGHTS } from './core/types.js';
export type { Embedder } from './embed/types.js';
export { USE_LITE_ID } from './embed/use-lite-id.js';
export type { UseLiteOptions } from './embed/use-lite.js';
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

// ——— building blocks: reasoners and models, the index protocol's device side ———

export { createHashingEmbedder } from './embed/hashing.js';
export { LlmReasoner, addCosts, zeroCosts, type OperationCosts } from './reason/llm.js';
export { llmPlanner } from './reason/planner.js';
export { OPERATIONS } from './reason/prompts.js';
export { createOpenAICompatibleModel } from './models/openai.js';
export { createScriptedModel } from './models/scripted.js';
export type { LanguageModel } from './models/types.js';

export { Rng, hash32 } from './core/rng.js';
export { DEFAULT_LDP, ReportHistogram, estimateCounts, ldpParams, makeReport, type PermanentMemo } from './community/ldp.js';
export { buildRelease, type ItemCommunities, type ItemSpace } from './community/release.js';
export { ReportClient, ReportHttpError, reportDelay, WIRE_INIT } from './sync/report-client.js';
export { planEpoch, randomMomentIn } from './sync/schedule.js';
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
export { DAY_MS, privacyBudget, refusal, spentEpsilon, subsampledEpsilon, type LedgerEntry, type PrivacyBudget } from './sync/budget.js';
export { blindTokenRequest, type TokenProvider } from './sync/tokens.js';
export { ACTION_VERBS, renderReasons, renderWhy, type WhyRenderer } from './reason/wording.js';
export type { ShopBasis, Why, WhyItem, WhyKind } from './core/explain.js';
