/**
 * The worker RPC contract: every type that crosses the main-thread ↔ worker boundary.
 * Both sides import this one file (`src/worker/engine.ts` implements {@link EngineApi},
 * `src/client/index.ts` calls it through Comlink). Types only, no runtime code.
 */
import type { AtomemConfig, RankWeights } from '../core/config.js';
import type { Action, AtomicMemory, Item, LifecycleEvent, Profile } from '../core/types.js';
import type { ExportFile } from '../store/file.js';
import type { Capabilities } from '../models/probe.js';
import type { LoadProgress, ModelBackend } from '../models/types.js';
import type { LlmOptions } from '../models/select.js';
import type { PagePromptApi, PromptApiLoanInfo } from '../models/prompt-api-bridge.js';
import type { LlmCallInfo, LlmCosts, LlmFallbackInfo } from '../reason/llm.js';
import type { RecommendOptions as AgentRecommendOptions } from '../agent/shelf.js';
import type { Why } from '../core/explain.js';

export type { ExcludeRule } from '../agent/shelf.js';
export type { ShopBasis, Why, WhyItem, WhyKind } from '../core/explain.js';

export type { Capabilities } from '../models/probe.js';

/** Partial engine configuration (any knob of {@link AtomemConfig}; `weights` may be partial too). */
export type EngineConfig = Partial<Omit<AtomemConfig, 'weights'>> & { weights?: Partial<RankWeights> };

/**
 * Which embedder the worker builds.
 * - `use-lite` (default): Universal Sentence Encoder lite, 512-d, on tfjs WASM, uint8 weights
 *   (id `use-lite@0.2.0/uint8`). Its files ship with the package (`dist/assets/use-lite/`,
 *   `dist/assets/tfjs-wasm/`; 7.4 MB); works offline. Loaded only when a text must be embedded:
 *   a catalog fully covered by the IndexedDB cache or by `catalogVectors` never fetches it.
 * - `minilm`: all-MiniLM-L6-v2 (384-d) through transformers.js, WebGPU when an adapter exists,
 *   else WASM. Weights come from `modelBaseUrl` (the Hugging Face hub by default, or the shop's
 *   own host); the ONNX runtime's wasm from `wasmPaths` (default `assetsBaseUrl` + `ort-wasm/`,
 *   shipped in the package as `dist/assets/ort-wasm/`, 27 MB, emitted by
 *   `atomem({ assets: ['minilm'] })`; self-hosted, never a CDN).
 * - `hashing`: deterministic feature hashing, instant, no model. For tests and demos; poor quality.
 */
export type EmbedderSpec =
  | 'use-lite'
  | 'minilm'
  | 'hashing'
  | {
      kind: 'use-lite';
      /** Folder URL of model.json, vocab.json and shards: the package's own `dist/assets/use-lite/` files (uint8), served elsewhere. */
      baseUrl?: string;
      /** Folder URL of the tfjs .wasm files (trailing slash). */
      wasmPaths?: string;
    }
  | {
      kind: 'minilm';
      /** Model id. Default `Xenova/all-MiniLM-L6-v2`. */
      model?: string;
      /** Where model folders live (`{base}/{model}/…`). Default: the Hugging Face hub. */
      modelBaseUrl?: string;
      /** Folder URL of onnxruntime-web's .wasm/.mjs files. */
      wasmPaths?: string;
      /** `auto` (default): WebGPU when an adapter exists, else WASM. */
      device?: 'auto' | 'webgpu' | 'wasm';
      /** Weights variant. Default: `fp32` on WebGPU, `q8` on WASM (transformers.js' defaults). */
      dtype?: 'fp32' | 'fp16' | 'q8' | 'q4' | 'q4f16';
    }
  | { kind: 'hashing' /** Buckets. Default 256. */; dim?: number };

export type { LlmOptions } from '../models/select.js';

/**
 * Sharing with the community index (protocol v2): `off` nothing is sent or fetched;
 * `receive` only the public release is downloaded (a plain GET of the same file for everyone)
 * and matched on the device, nothing is sent; `contribute` also sends one local-DP report per
 * epoch (ε per shopper per epoch in the release's `ldp`, see docs/PRIVACY.md).
 */
export type PrivacyLevel = 'off' | 'receive' | 'contribute';

/** Where and how to share with the community index. */
export interface IndexOptions {
  /** The `atomem-index` service root, e.g. `https://index.shop.example`. */
  url: string;
  /**
   * Default `off`: on the benchmark (ML-100K, 943 shoppers) `contribute` at its ε did not
   * measurably beat `off` (docs/PRIVACY.md, "Quality").
   */
  privacy?: PrivacyLevel;
  /**
   * The shop's attester endpoint (needed for `contribute`): authenticates the shopper with the
   * shop's own session, allows one token per shopper per epoch, and forwards the blinded
   * Privacy Pass request to the index (body and answer: `IssueRequest` / `IssueResponse` of
   * `atomem/protocol`). Cookies go to this URL only, never to the index.
   */
  attesterUrl?: string;
  /**
   * An Oblivious HTTP relay (`atomem-relay`, RFC 9458) run by a party other than the shop, e.g.
   * `https://relay.example`: reports go through it, encapsulated to the index's gateway key, so
   * the index sees neither the device's address nor (with the relay's batching) when it
   * reported. Releases and health stay direct. Default none: reports go to `url`.
   */
  relay?: string;
  /**
   * Where the shop serves an ES module build of `@divviup/prio3` (MPL-2.0, not bundled in the
   * package), e.g. `/atomem-prio3.js` made with
   * `npx esbuild node_modules/@divviup/prio3/dist/index.js --bundle --format=esm --outfile=public/atomem-prio3.js`:
   * the prebuilt worker loads it when the index runs Prio3 and a report is built. Default none:
   * the bare name is imported (works where a bundler built atomem, or in Node).
   */
  prio3Module?: string;
  /**
   * Check for a new release after this many tracked events (and on privacy changes). Default 5.
   * The release and health are fetched at most once per epoch whatever this says.
   */
  syncEvery?: number;
  /**
   * Delay before the epoch's report: `random` (default) = a uniformly random moment in what
   * remains of the epoch, so its arrival says nothing about the visit; a number = that many ms
   * (tests and demos).
   */
  reportDelay?: 'random' | number;
  /**
   * The lifetime privacy budget of `contribute` (kept in IndexedDB, across `erase()`): at most
   * `cap` ε in any `windowDays` (default 10 per 365 days; then the device stops reporting until
   * old charges leave the window), and each epoch's report sent with probability `q` (default 1;
   * a dummy report otherwise), charged ln(1 + q(e^ε − 1)) per epoch. See docs/PRIVACY.md.
   */
  budget?: { cap?: number; windowDays?: number; q?: number };
}

/** The lifetime privacy budget as the ledger holds it (`privacyBudget()`). */
export interface PrivacyBudgetStatus {
  cap: number;
  windowDays: number;
  q: number;
  /** ε charged in the window ending now. */
  spent: number;
  /** ε one epoch's lottery charges (null until the service's ε is known). */
  perEpoch: number | null;
  /** Reports sent (not dummies) in the window. */
  reports: number;
  /** Epochs this device holds a token for. */
  tokens: number[];
}

/** What one sync did. */
export interface SyncReport {
  privacy: PrivacyLevel;
  /** Reports the service accepted during this sync (0 or 1). */
  sent: number;
  /** Reports refused for good (their token was spent or the epoch closed), reported as `error` events. */
  dropped: number;
  /** 1 while this epoch's report waits for its random moment (or for the service), else 0. */
  pending: number;
  /** Memories linked to a released community (0 when off or no release yet). */
  communities: number;
  /** Epoch of the release in use, or null. */
  release: number | null;
  /** Why fetching the release or sending the report failed, if it did. */
  error?: string;
}

/** Options of the engine's `init` (and of `createAtomem`). Everything here is structured-clonable. */
export interface EngineOptions {
  /** Local profile: one IndexedDB database each. Defaults to `'default'`. */
  profile?: string;
  /** The shop's catalog. Every tracked or ranked id must be in it. */
  catalog: Item[];
  /** Which embedder the worker builds. Default `'use-lite'`. */
  embedder?: EmbedderSpec;
  /**
   * Base URL of the asset folders, all shipped in the package's `dist/assets/`: `use-lite/` and
   * `tfjs-wasm/` (USE-lite), `ort-wasm/` (MiniLM) and `wllama/` (wllama). `createAtomem` sets it
   * to `dist/assets/` next to its own module (atomem/vite: to the folder it serves or emits); set
   * it when the shop serves those files elsewhere.
   */
  assetsBaseUrl?: string;
  /**
   * URL of the catalog's vectors made ahead of time (`npx atomem-vectors --catalog … --out …`,
   * with the same embedder). Items whose vector is in it (same embedder, same text) are not
   * embedded on the device; the rest are. A missing or mismatched file is an `error` event
   * (`CatalogVectorsError`), never fatal. Fetched only when some item is not cached yet.
   *
   * A file of format v2 made with the shop's order log (`atomem-vectors --log …`) also carries
   * the shop model (and a SASRec sequence model): the engine then ranks with it over the
   * shopper's own history, on the device (the item space becomes the shop's collaborative one,
   * `status().catalog.shop` says which). Its models are cached in IndexedDB (`atomem-files`);
   * a returning shopper revalidates the file with a conditional request when it was served with
   * `ETag` / `Last-Modified` (a 304 downloads nothing), else never fetches it again: publish a
   * changed file under a new URL then.
   */
  catalogVectors?: string;
  /** Optional language models (none by default: rules reasoner). */
  llm?: LlmOptions;
  /** The shared community index (none by default: nothing leaves the device). */
  index?: IndexOptions;
  /** Engine knobs; defaults from `resolveConfig` (tau from the embedder). */
  config?: EngineConfig;
}

/** What the engine runs on, for the page and the demo's inspector. */
export interface EngineStatus {
  capabilities: Capabilities;
  embedder: {
    id: string;
    kind: 'use-lite' | 'minilm' | 'hashing';
    device: 'wasm' | 'webgpu' | 'cpu';
    dim: number;
    /**
     * USE-lite loads only when a text must be embedded (an item missing from the IndexedDB cache
     * and from `catalogVectors`): `not loaded` until then, `loading`, then `ready`. MiniLM and
     * hashing are `ready` from `init` on.
     */
    state: 'not loaded' | 'loading' | 'ready';
    /** Why the last load failed (it is tried again on the next need), or null. */
    error: string | null;
  };
  llm: {
    /** Where the active model runs, or `rules` when none loaded. */
    mode: ModelBackend | 'rules';
    /** Active model id, or null. */
    model: string | null;
    /** Every runtime tried, in order, with why it was skipped. */
    attempts: { runtime: string; ok: boolean; reason?: string }[];
    /** True while configured runtimes are still being tried (the engine answers meanwhile, on rules). */
    loading: boolean;
    /** Model calls, tokens, latency and fallbacks to rules per operation, once a model runs the memory operations. */
    costs: LlmCosts | null;
    /** Tracked events stored but not yet turned into memory (a model defers them to idle time). */
    deferred: number;
  };
  storage: {
    /** True once the store hit the quota and keeps writes in memory. */
    degraded: boolean;
    /**
     * Whether the browser granted persistent storage (`navigator.storage.persist()`, asked by
     * `createAtomem` on the main thread: workers cannot ask). Null when not asked or unknown.
     */
    persisted: boolean | null;
  };
  /** True inside a SharedWorker (several tabs share this engine). */
  shared: boolean;
  /**
   * The catalog vector file (`catalogVectors`), or null without one: its format version, where
   * it came from this time (`download`, `revalidated` by a 304, or the `cache` without a
   * request; null when it could not be used), its size, and the shop model in use (v2 files
   * made with an order log), or null (content space, as with v1). `shop.items`: the items of
   * the shop model the device holds (format v3: those of the shards loaded, not the catalog).
   */
  catalog: {
    url: string;
    version: number | null;
    source: 'download' | 'revalidated' | 'cache' | null;
    bytes: number;
    shop: { id: string; items: number; sequence: 'sasrec' | null; epsilon: number | null } | null;
  } | null;
  /**
   * Sharing with the community index, or null when no index is configured. `reports`: what a
   * report is — `prio3` when the index runs a Prio3 leader (shares to two aggregators), else
   * `ldp` (null before the first sync); `crowdRelease`: the epoch of the Prio3 release in use.
   */
  sync: {
    url: string;
    privacy: PrivacyLevel;
    pending: number;
    lastError: string | null;
    release: number | null;
    reportedEpoch: number | null;
    reports: 'prio3' | 'ldp' | null;
    crowdRelease: number | null;
  } | null;
}

/** One interaction as the page reports it. `at` defaults to the worker's `Date.now()`, `action` to `'click'`. */
export interface TrackInput {
  item: string;
  action?: Action;
  at?: number;
}

/**
 * Options of `recommend`: the agent's (`agent/shelf.ts`), except the ranking time `now`, which
 * the worker's clock sets.
 */
export type RecommendOptions = Omit<AgentRecommendOptions, 'now'>;

/** The memories a stated intent selects (for inspection; see `EngineApi.intentMemories`). */
export interface IntentMemoriesResult {
  /** The intent as used (control characters removed, whitespace collapsed). */
  intent: string;
  /** Best first: each memory's id, statement, category and cosine to the intent. */
  memories: { memoryId: string; content: string; category: string; similarity: number }[];
}

/** A ranked candidate as the worker returns it: its reasons as data (`why`), no wording. */
export interface RankedResult {
  id: string;
  score: number;
  /** Why the card is there, strongest first: kind, the items named, the shopper's action, the memory (see {@link Why}). */
  why: Why[];
}

/**
 * A ranked candidate as `recommend` gives it to the page: the worker's {@link RankedResult}
 * plus `explanations`, its reasons worded on the page (one sentence per `why` entry, in order)
 * by the default English renderer or the shop's `renderWhy`.
 */
export interface RecommendationResult extends RankedResult {
  explanations: string[];
}

/** Progress of anything long (embedder or model download, model load, catalog embedding): one stream. */
export type ProgressEvent = LoadProgress;

/** An error as it crosses the boundary (and as `error` events carry it). */
export interface SerializedError {
  /** The error class name, e.g. `UnknownItemError`, `InvalidImportError`, `TypeError`. */
  name: string;
  message: string;
  stack?: string;
  /** Own primitive fields of the original error, e.g. `{ itemId }` or `{ field }`. */
  details?: Record<string, string | number | boolean>;
  /** True when the original was a `DOMException` (rebuilt as one). */
  domException?: boolean;
}

/**
 * What the LLM reasoner did, for the inspector: every model call (`kind: 'call'`: operation,
 * prompt version, attempt, tokens, latency, whether the output was used) and every operation
 * that fell back to rules (`kind: 'fallback'`, with the reason and message).
 */
export type LlmEvent = ({ kind: 'call' } & LlmCallInfo) | ({ kind: 'fallback' } & LlmFallbackInfo);

/** Event name → payload, for `on(event, cb)`. */
export interface EngineEventMap {
  progress: ProgressEvent;
  /** A memory lifecycle event (formed, reinforced, weakened, merged, forgotten, resynthesised). */
  memory: LifecycleEvent;
  /** A non-fatal problem the engine worked around (e.g. storage quota: writes kept in memory), or a dead worker. */
  error: SerializedError;
  /** A model call or a fallback to rules of the LLM reasoner (only while a model is active). */
  llm: LlmEvent;
}

/** Names of engine events. */
export type EngineEventName = keyof EngineEventMap;

/** One event as the engine pushes it to its listener. */
export type EngineEvent = { [K in EngineEventName]: { type: K; payload: EngineEventMap[K] } }[EngineEventName];

/** The engine's listener (a `Comlink.proxy` callback on the main thread). */
export type EngineListener = (event: EngineEvent) => void;

export type { BridgeCreateOptions, BridgeMessage, PagePromptApi, PromptApiLoanInfo } from '../models/prompt-api-bridge.js';

/** What the worker exposes. Every method except `subscribe` needs `init` first. */
export interface EngineApi {
  /** Register an event listener (one per connected page); call before `init` to get its progress. Returns a token for `unsubscribe`. */
  subscribe(listener: EngineListener): number;
  /** Drop a listener (a page leaving a shared engine). */
  unsubscribe(token: number): void;
  /**
   * The page with subscription `token` lends its Prompt API (a Comlink proxy), or says why it
   * cannot (`bridge` null). Call before `init`. In-flight calls on a page that goes away (its
   * `info.lock` is released, or it unsubscribes) reject with a `PageGoneError`; the operation
   * then falls back to rules and later calls use another page's loan, if any.
   */
  lendPromptApi(token: number, bridge: PagePromptApi | null, info?: PromptApiLoanInfo): void;
  /**
   * Open the profile's store, load its state, build the embedder (and LLM, if configured) and
   * the agent, replay pending events. In a shared engine a second page's `init` for the same
   * profile joins the running session; re-init with other options replaces everything.
   */
  init(options: EngineOptions): Promise<void>;
  /** Capabilities, active embedder and model, fallbacks taken, storage mode. */
  status(): Promise<EngineStatus>;
  /** Record one interaction: durable in IndexedDB first, then turned into memory, then the state is saved. */
  track(interaction: TrackInput): Promise<void>;
  /**
   * Rank the whole catalog on the device: retrieval shortlists `config.shortlist` items (300; the
   * shop model's neighbour lists of the shopper's items, the items nearest the shopper's profile
   * vector and the stated intent, the most popular), then the full scorer ranks them as it ranks candidates (below).
   * Returns the best `limit` (default 20). `recommend(undefined, opts)` is the same call.
   */
  recommend(opts?: RecommendOptions): Promise<RankedResult[]>;
  /** Rank candidate ids (unknown id → `UnknownItemError`); `undefined` = the whole catalog, as `recommend(opts)`. */
  recommend(candidates: string[] | undefined, opts?: RecommendOptions): Promise<RankedResult[]>;
  /** The memories a stated intent selects (same validation as `recommend`'s `intent`; nothing stored). */
  intentMemories(intent: string): Promise<IntentMemoriesResult>;
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
  /** Erase everything of this profile (deletion requests for its shared copies are queued and sent); the engine continues with an empty state. */
  erase(): Promise<void>;
  /** Fetch the latest release and match it; at `contribute`, schedule this epoch's report if not sent yet. Needs `index`. */
  sync(): Promise<SyncReport>;
  /** Change the privacy level and sync (`off` stops fetching and reporting and drops the release in use). */
  setPrivacy(level: PrivacyLevel): Promise<SyncReport>;
  /** The last report sent to the index, exactly as on the wire (for audits and the demo), or null. */
  lastPayload(): Promise<{ path: string; body: unknown; at: number } | null>;
  /** The lifetime privacy budget (ledger kept across `erase()`). */
  privacyBudget(): Promise<PrivacyBudgetStatus>;
  /** Clear the ledger: spent budget and held tokens. Only on the shopper's explicit request. */
  resetPrivacyBudget(): Promise<void>;
}
