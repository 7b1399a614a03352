/**
 * atomem's main-thread entry: `createAtomem` starts the engine in a module Web Worker (or a
 * SharedWorker) and returns a small typed client. All memory work, embedding, models and
 * IndexedDB access happen in the worker; this file only talks to it (Comlink RPC), so it
 * stays tiny (a size budget is enforced in CI).
 *
 * @example
 * import { createAtomem } from 'atomem';
 * const atomem = await createAtomem({ profile: 'shopper', catalog });
 * atomem.on('memory', (e) => console.log(e.op, e.memoryId));
 * await atomem.track({ item: 'sku-123', action: 'click' });
 * const ranked = await atomem.recommend(['sku-9', 'sku-4', 'sku-7']);
 * console.log(ranked[0].id, ranked[0].explanations[0]);
 */
import { proxy, wrap, type Remote } from 'comlink';
import { deserializeError, installErrorTransfer } from '../worker/errors.js';
import { DisposedError, WorkerError } from '../errors.js';
import { checkOptionNames } from '../options.js';
import { defaultAssetsBaseUrl, spawnWorker } from './worker-url.js';
import type {
  EngineApi,
  EngineEvent,
  EngineEventMap,
  EngineEventName,
  EngineOptions,
  EngineStatus,
  PagePromptApi,
  ProgressEvent,
  PromptApiLoanInfo,
  RankedResult,
  RecommendOptions,
  RecommendationResult,
  SerializedError,
} from '../worker/protocol.js';
import { pageLanguageModel, promptBridge } from './prompt-bridge.js';
import { renderWhy as defaultRenderWhy, type WhyRenderer } from '../reason/wording.js';
import type { Why } from '../core/explain.js';

export type {
  Capabilities,
  EmbedderSpec,
  EngineConfig,
  EngineEventMap,
  EngineEventName,
  EngineOptions,
  EngineStatus,
  IndexOptions,
  LlmEvent,
  LlmOptions,
  PrivacyLevel,
  SyncReport,
  PrivacyBudgetStatus,
  ProgressEvent,
  ExcludeRule,
  IntentMemoriesResult,
  RankedResult,
  RecommendOptions,
  RecommendationResult,
  SerializedError,
  ShopBasis,
  TrackInput,
  Why,
  WhyItem,
  WhyKind,
} from '../worker/protocol.js';
/**
 * Reasons in words: `renderWhy` is the default English sentence of one reason (`why` entry), the
 * one `recommend` uses for `explanations` unless `createAtomem({ renderWhy })` gives another;
 * `ACTION_VERBS` is its verb table.
 */
export { ACTION_VERBS, renderWhy, type WhyRenderer } from '../reason/wording.js';
export type { Action, AtomicMemory, Item, LifecycleEvent, LifecycleOp, Profile } from '../core/types.js';
export type { ExportFile } from '../store/file.js';
/**
 * The named errors: a call rejects with an instance of one of these (or with the platform's
 * `TypeError` / `RangeError` / `DOMException`), rebuilt on the page from the worker's, so
 * `instanceof` works. `error` events carry instances too.
 */
export {
  CatalogVectorsError,
  DisposedError,
  InvalidCatalogError,
  InvalidImportError,
  InvalidIntentError,
  StorageQuotaError,
  UnknownItemError,
  WorkerError,
  type InvalidCatalogReason,
  type InvalidIntentReason,
} from '../errors.js';

/** Options of {@link createAtomem}: the engine's options plus where the worker comes from. */
export interface CreateAtomemOptions extends EngineOptions {
  /**
   * Run one engine for all tabs of this origin and profile (a `SharedWorker`): one model in
   * memory, one writer. Default false (a dedicated worker per tab; tabs then coordinate their
   * writes through Web Locks). Falls back to a dedicated worker where SharedWorker is missing.
   */
  shared?: boolean;
  /**
   * The worker running atomem's engine, or a factory for it. Default: the package's own
   * module worker. With a factory (or the default) a dead worker is replaced on the next call; a
   * given instance cannot be replaced, so calls after its death reject.
   */
  worker?: Worker | SharedWorker | (() => Worker | SharedWorker);
  /** Ask the browser for persistent storage (`navigator.storage.persist()`) so memories are not evicted. Default true. */
  persist?: boolean;
  /** Progress listener registered before `init` runs (model downloads, catalog embedding); same as `on('progress', cb)`. */
  onProgress?: (progress: ProgressEvent) => void;
  /** Error-event listener registered before `init` runs (e.g. a bad `catalogVectors` file); same as `on('error', cb)`. */
  onError?: (error: AtomemEventMap['error']) => void;
  /**
   * Words one reason (a `why` entry of `recommend`) for `explanations`, e.g. in the shop's
   * language. Default: {@link defaultRenderWhy | renderWhy}, English. Runs on the page; if it
   * throws or returns no string, that sentence is the default English one.
   */
  renderWhy?: WhyRenderer;
}

/**
 * Event name → payload, as the page gets them: the engine's events, with `error` payloads
 * rebuilt as `Error` instances (the named classes where one exists, e.g. `StorageQuotaError`,
 * `CatalogVectorsError`; else an `Error` whose `name` says what happened: `SyncError`,
 * `ReportError`, `ModelFallback`, …).
 */
export interface AtomemEventMap extends Omit<EngineEventMap, 'error'> {
  /** A non-fatal problem the engine worked around (e.g. storage quota: writes kept in memory), or a dead worker (`WorkerError`). */
  error: Error & SerializedError;
}

/**
 * The on-device memory engine, as the page sees it: the engine's methods (documented once,
 * in `EngineApi` of the worker protocol) minus its wiring, plus events and disposal.
 * Every method runs in the worker.
 */
export interface Atomem extends Omit<EngineApi, 'subscribe' | 'unsubscribe' | 'init' | 'lendPromptApi' | 'recommend'> {
  /**
   * Rank the whole catalog on the device (see `EngineApi.recommend`): each result's reasons as
   * data (`why`) and worded on the page (`explanations`, by `renderWhy`).
   */
  recommend(opts?: RecommendOptions): Promise<RecommendationResult[]>;
  /** Rank candidate ids (unknown id → `UnknownItemError`); `undefined` = the whole catalog, as `recommend(opts)`. */
  recommend(candidates: string[] | undefined, opts?: RecommendOptions): Promise<RecommendationResult[]>;
  /** Listen to `progress`, `memory` (lifecycle), `llm` (model calls and fallbacks) or `error` events. Returns an unsubscribe function. */
  on<K extends EngineEventName>(event: K, cb: (payload: AtomemEventMap[K]) => void): () => void;
  /**
   * Disconnect: terminate a dedicated worker, or leave a shared one. Every call still in flight
   * rejects at once with a `DisposedError`, and so does every later call. Idempotent.
   */
  dispose(): void;
}

interface Connection {
  remote: Remote<EngineApi>;
  close(): void;
  dead: boolean;
  /** Calls waiting on this worker: failed with a `WorkerError` when it is replaced. */
  calls: Set<(e: Error) => void>;
}

function isShared(w: Worker | SharedWorker): w is SharedWorker {
  return typeof SharedWorker === 'function' && w instanceof SharedWorker;
}

/**
 * Start the engine worker, initialise it (open the profile's IndexedDB, build the embedder,
 * load memories, replay pending events) and return the client. Rejects if `init` fails (the
 * worker is then closed) — a `TypeError` for a bad option (an unknown name names the nearest
 * valid one), an `InvalidCatalogError` naming a bad catalog item or a repeated id, a
 * `WorkerError` for a worker that cannot start, or a model that cannot load.
 */
export async function createAtomem(options: CreateAtomemOptions): Promise<Atomem> {
  // why: plain JavaScript has no types; a typo (`embeder`) must not be ignored in silence
  checkOptionNames(options, 'createAtomem', true);
  installErrorTransfer();
  const { worker: given, onProgress, onError, shared = false, persist = true, renderWhy, ...rest } = options;
  if (renderWhy !== undefined && typeof renderWhy !== 'function') throw new TypeError('createAtomem: renderWhy must be a function (why) => string');
  const word = (w: Why): string => {
    if (renderWhy) {
      try {
        const s = renderWhy(w);
        if (typeof s === 'string') return s;
      } catch {
        // the shop's renderer failed on this reason: the default sentence stands in
      }
    }
    return defaultRenderWhy(w);
  };
  const worded = (results: RankedResult[]): RecommendationResult[] => results.map((r) => ({ ...r, explanations: r.why.map(word) }));
  const engineOptions: EngineOptions = { ...rest, assetsBaseUrl: rest.assetsBaseUrl ?? defaultAssetsBaseUrl() };
  // why: the worker would resolve a relative URL against its own script, not the page
  if (typeof rest.catalogVectors === 'string' && typeof location !== 'undefined')
    engineOptions.catalogVectors = new URL(rest.catalogVectors, location.href).href;
  const listeners = new Map<EngineEventName, Set<(payload: never) => void>>();
  if (onProgress) listeners.set('progress', new Set([onProgress as (payload: never) => void]));
  if (onError) listeners.set('error', new Set([onError as (payload: never) => void]));
  let disposed = false;
  let usedGiven = false;

  // workers cannot ask for persistence; the page can (Chromium grants it silently to engaged sites).
  const persisted: Promise<boolean | null> =
    persist && typeof navigator !== 'undefined' && navigator.storage?.persist ? navigator.storage.persist().catch(() => null) : Promise.resolve(null);

  const dispatch = (ev: EngineEvent): void => {
    const set = listeners.get(ev.type);
    if (!set?.size) return;
    // why: the worker sends a SerializedError; the page gets an instance of its class
    const payload = ev.type === 'error' && !(ev.payload instanceof Error) ? deserializeError(ev.payload) : ev.payload;
    for (const cb of set) {
      try {
        (cb as (p: unknown) => void)(payload);
      } catch (e) {
        setTimeout(() => {
          throw e; // a listener's bug surfaces as an uncaught error, never breaks the engine
        });
      }
    }
  };

  const makeWorker = (): Worker | SharedWorker => {
    if (typeof given === 'function') return given();
    if (given) {
      if (usedGiven) throw new WorkerError('the given worker died and cannot be restarted: pass a factory () => Worker');
      usedGiven = true;
      return given;
    }
    return spawnWorker(shared && typeof SharedWorker === 'function', `atomem:${engineOptions.profile ?? 'default'}`);
  };

  const connect = async (): Promise<Connection> => {
    const w = makeWorker();
    const endpoint = isShared(w) ? w.port : w;
    const conn: Connection = {
      remote: wrap<EngineApi>(endpoint),
      dead: false,
      calls: new Set(),
      close: () => {
        for (const fail of [...conn.calls]) fail(new WorkerError('the engine worker died during this call (the next call starts a new one)'));
        if (isShared(w)) {
          const token = subscription;
          if (token !== undefined) conn.remote.unsubscribe(token).catch(() => undefined);
          setTimeout(() => w.port.close(), 50);
        } else w.terminate();
      },
    };
    let subscription: number | undefined;
    let failed: (e: Error) => void = () => undefined;
    // a worker that cannot even load (bad URL, syntax error, CSP) never answers: fail the pending call instead of hanging.
    const died = new Promise<never>((_, reject) => (failed = reject));
    died.catch(() => undefined);
    w.addEventListener('error', (e) => {
      conn.dead = true;
      const message = e instanceof ErrorEvent ? e.message : '';
      const err = new WorkerError(`the engine worker failed: ${message || 'it could not start or crashed (see the browser console)'}`);
      failed(err);
      // why: a worker that failed answers no call in flight (it is replaced on the next call)
      for (const fail of [...conn.calls]) fail(err);
      dispatch({ type: 'error', payload: err });
    });
    try {
      subscription = await Promise.race([conn.remote.subscribe(proxy(dispatch)), died]);
      await Promise.race([lend(conn.remote, subscription), died]);
      await Promise.race([conn.remote.init(engineOptions), died]);
    } catch (e) {
      conn.close();
      throw e;
    }
    return conn;
  };

  // Chrome's Prompt API exists on Window only: with llm.promptApi the page lends it to the worker
  // (feature-detected, permissions policy respected), holding a Web Lock while it lives so that a
  // shared worker learns when this page goes away mid-call.
  let loan: { bridge: PagePromptApi | null; info: PromptApiLoanInfo; close?: () => void } | null = null;
  if (rest.llm?.promptApi) {
    const lm = pageLanguageModel();
    if ('api' in lm) {
      const b = promptBridge(lm.api);
      const info: PromptApiLoanInfo = {};
      let release = (): void => undefined;
      const locks = typeof navigator !== 'undefined' ? navigator.locks : undefined;
      if (locks) {
        const name = (info.lock = `atomem-page:${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`);
        await new Promise<void>((granted) => {
          locks.request(name, () => (granted(), new Promise<void>((r) => (release = r)))).catch(() => granted());
        });
      }
      if (typeof addEventListener === 'function') addEventListener('pagehide', () => b.abortAll('the page went away'));
      loan = { bridge: b.bridge, info, close: () => (b.abortAll('atomem was disposed'), release()) };
    } else loan = { bridge: null, info: { reason: lm.reason } };
  }
  const lend = async (remote: Remote<EngineApi>, token: number): Promise<void> => {
    if (loan) await remote.lendPromptApi(token, loan.bridge ? proxy(loan.bridge) : null, loan.info);
  };

  let current: Promise<Connection> = connect();
  await current;

  /** The live connection; a dead worker is replaced (state comes back from IndexedDB). */
  const engine = async (): Promise<Connection> => {
    const p = current;
    const conn = await p;
    if (!conn.dead) return conn;
    if (current === p) {
      conn.close();
      current = connect();
      current.catch(() => undefined);
    }
    return current;
  };

  /** Calls in flight: `dispose()` rejects each at once (the worker's answer never comes then). */
  const pending = new Map<(e: Error) => void, string>();
  const call = <T>(method: string, fn: (remote: Remote<EngineApi>) => Promise<T>): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      if (disposed) return reject(new DisposedError(method, false));
      let done = false;
      let conn: Connection | undefined;
      const settle = (ok: boolean, v: unknown): void => {
        if (done) return;
        done = true;
        pending.delete(fail);
        conn?.calls.delete(fail);
        if (ok) resolve(v as T);
        else reject(v);
      };
      const fail = (e: Error): void => settle(false, e);
      pending.set(fail, method);
      engine()
        .then((c) => {
          if (done) return undefined;
          conn = c;
          c.calls.add(fail);
          return fn(c.remote).then((v) => settle(true, v));
        })
        .catch(fail);
    });

  return {
    track: (interaction) => call('track', (r) => r.track(interaction)),
    // why the cast: comlink's Remote keeps one overload; the engine reads both shapes (`recommend({ limit })`, `recommend(ids, opts)`)
    recommend: ((candidates?: string[] | RecommendOptions, opts?: RecommendOptions) =>
      call('recommend', (r) => r.recommend(candidates as string[], opts)).then(worded)) as Atomem['recommend'],
    intentMemories: (intent) => call('intentMemories', (r) => r.intentMemories(intent)),
    memories: () => call('memories', (r) => r.memories()),
    profile: () => call('profile', (r) => r.profile()),
    forget: (memoryId) => call('forget', (r) => r.forget(memoryId)),
    export: () => call('export', (r) => r.export()),
    import: (file) => call('import', (r) => r.import(file)),
    erase: () => call('erase', (r) => r.erase()),
    sync: () => call('sync', (r) => r.sync()),
    setPrivacy: (level) => call('setPrivacy', (r) => r.setPrivacy(level)),
    lastPayload: () => call('lastPayload', (r) => r.lastPayload()),
    privacyBudget: () => call('privacyBudget', (r) => r.privacyBudget()),
    resetPrivacyBudget: () => call('resetPrivacyBudget', (r) => r.resetPrivacyBudget()),
    status: () =>
      call('status', async (r): Promise<EngineStatus> => {
        const s = await r.status();
        return { ...s, storage: { ...s.storage, persisted: await persisted } };
      }),
    on(event, cb) {
      let set = listeners.get(event);
      if (!set) listeners.set(event, (set = new Set()));
      set.add(cb as (payload: never) => void);
      return () => void set.delete(cb as (payload: never) => void);
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      for (const [fail, method] of [...pending]) fail(new DisposedError(method, true));
      listeners.clear();
      loan?.close?.();
      current.then(
        (c) => c.close(),
        () => undefined,
      );
    },
  };
}
