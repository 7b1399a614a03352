/// <reference types="vite/client" />
/**
 * The page of the browser benchmark (`npm run bench:browser`; `packages/bench/src/browser.ts` serves it
 * with a Vite dev server rooted at the repo and drives it through playwright). It imports atomem
 * from `src/`, so the engine worker starts from source, and exposes one function per figure on
 * `window.__bench`; the driver calls them with `page.evaluate`.
 *
 * Only the client (`createAtomem`) is imported statically. Everything the engine worker also
 * loads (store, core, embedders, tfjs) is imported lazily by the figures that need it, so a
 * "cold" start in a fresh browser context finds none of the worker's modules in the HTTP cache.
 */
import { wrap } from 'comlink';
// the URL of wllama's wasm as Vite serves it (a string: nothing is fetched until a model loads)
import wllamaWasmUrl from '@wllama/wllama/esm/wasm/wllama.wasm?url';
import { createAtomem, type Atomem, type EmbedderSpec, type EngineStatus, type LlmEvent } from 'atomem';
import type { AtomicMemory, MemoryState } from '../../atomem/src/core/types.js';
import { productCatalog } from './products.js';
import { decodeCatalogFile } from 'atomem/protocol';

/** Workers the driver serves as virtual modules (no file on disk; same URLs in packages/bench/src/browser.ts). */
const EMPTY_WORKER_URL = '/bench/browser/empty-worker.virtual.js';
const ECHO_WORKER_URL = '/bench/browser/echo-worker.virtual.js';

/** Environment facts printed with the table. */
export interface PageInfo {
  cores: number;
  crossOriginIsolated: boolean;
  userAgent: string;
}

/** A cold and a warm start of one configuration in one page. */
export interface StartResult {
  /** First createAtomem in this (fresh) browser context → first recommendation answered. */
  coldMs: number;
  /** Second createAtomem in the same page (HTTP cache warm, new worker). */
  warmMs: number;
  /** When the engine reported its embedder ready (progress `embedder`/`ready`), or null (hashing reports none). */
  coldEmbedderMs: number | null;
  warmEmbedderMs: number | null;
  /** What the engine reported it runs on (checked by the driver). */
  embedder: string;
  llm: string;
  catalog: number;
}

/** Timings of the IndexedDB figure, one entry per run. */
export interface IdbResult {
  loadMs: number[];
  cloneMs: number[];
  parseMs: number[];
  memories: number;
  jsonBytes: number;
}

/** Embedder throughput, texts/s per run. */
export interface ThroughputResult {
  useRates: number[];
  hashRates: number[];
  texts: number;
  meanChars: number;
}

/** Cost counters of the LLM reasoner (one operation, or the total). */
export type OperationCosts = NonNullable<EngineStatus['llm']['costs']>['total'];

/** What {@link BenchApi.open} reports. */
export interface OpenResult {
  /** createAtomem → resolved (worker up, catalog embedded; the model still loads in the background). */
  createMs: number;
  /** createAtomem → status() shows the model active (`loading` false, mode not `rules`), polled every 20 ms; null without `llm`. */
  llmMs: number | null;
  /** createAtomem → the engine's `llm`/`ready` progress event (model loaded, before the reasoner is wired in). */
  llmReadyEventMs: number | null;
  embedder: string;
  llm: string;
  model: string | null;
  /** Every runtime tried, `runtime:ok` or `runtime:reason`. */
  attempts: string[];
  /** Whether the page is cross-origin isolated (wllama runs single-threaded when not). */
  crossOriginIsolated: boolean;
}

/** What {@link BenchApi.idleBatch} measured. */
export interface IdleBatchResult {
  /** Each track() round trip of the batch's events. */
  trackMs: number[];
  /** status().llm.deferred right after the last track() (all K unless a batch already started). */
  deferredAfterTrack: number;
  /** Last track() resolved → status().llm.deferred === 0 (polled every 20 ms); includes the `idleMs` wait. */
  toDeferred0Ms: number;
  /** Last track() resolved → a read queued after deferred 0 answers: the whole idle batch (sweeps, profile, save) is done. */
  toDoneMs: number;
  /** Costs added by the batch (total over operations). */
  costs: OperationCosts;
  /** Costs added by the batch, per operation (only operations that ran). */
  byOperation: Record<string, OperationCosts>;
  /** `llm` events received during the batch. */
  callEvents: number;
  fallbackEvents: number;
  /** Distinct `reason: message` of the operations that fell back to rules (at most 5, cut to 200 chars). */
  fallbackMessages: string[];
  memories: number;
}

/** What {@link BenchApi.rerank} measured. */
export interface RerankResult {
  /** recommend(candidates, { rerank }) round trips. */
  rerankMs: number[];
  /** recommend(candidates) round trips, same instance. */
  plainMs: number[];
  /** Costs added by the rerank calls (the `rerank` operation). */
  costs: OperationCosts;
  /** Distinct `reason: message` of the reranks that fell back to the engine's order (at most 5, cut to 200 chars). */
  fallbackMessages: string[];
  candidates: number;
}

/** What the page exposes on `window.__bench`. */
/** One visit pair of {@link BenchApi.shopModel} for one file. */
export interface ShopVisit {
  /** createAtomem → first recommendation, first visit (file downloaded). */
  firstMs: number;
  /** Bytes of the file the worker downloaded on the first visit (its download progress). */
  firstBytes: number;
  /** createAtomem → first recommendation, returning visit (same profile, new worker). */
  againMs: number;
  /** Bytes downloaded on the returning visit (0 when revalidated by a 304 or served from the cache). */
  againBytes: number;
  /** `status().catalog` after each visit. */
  firstStatus: EngineStatus['catalog'];
  againStatus: EngineStatus['catalog'];
  /** recommend(10 candidates) times after the shopper's events (first visit's instance). */
  recommendMs: number[];
  /** The top 3 of the last recommendation (to tell the two spaces apart in the log). */
  top: string[];
}

export interface ShopModelResult {
  shop: ShopVisit;
  content: ShopVisit;
}

/** {@link BenchApi.wholeCatalog}'s samples. */
export interface WholeCatalogResult {
  /** `recommend({ limit })` (no candidates: the whole catalog) times, after the shopper's events. */
  recommendMs: number[];
  /** Bare dot-product scans of the same file's collaborative vectors (every item against one query vector, keeping the best `limit`), in the page. */
  scanMs: number[];
  items: number;
  dim: number;
  /** Items returned by the last call, and how many of them had explanations / were items the shopper bought. */
  returned: number;
  explained: number;
  bought: number;
  /** The worker's `status().catalog` (to check the shop model was in use). */
  status: EngineStatus['catalog'];
  /** `performance.memory.usedJSHeapSize` of the page before/after (the worker's heap is not visible to the page). */
  pageHeapMB: number;
}

export interface BenchApi {
  info(): PageInfo;
  /**
   * Whole-catalog recommendation: createAtomem with the shop file at `url` (hashing embedder), the
   * shopper's `events` events, then `samples` timed `recommend({ limit })` after `warmup`; beside
   * them, the same number of bare dot-product scans of the file's collaborative vectors in the page.
   */
  wholeCatalog(o: {
    profile: string;
    catalog: number;
    url: string;
    events: number;
    samples: number;
    warmup: number;
    limit: number;
  }): Promise<WholeCatalogResult>;
  /** Start an empty module worker and get one postMessage answer: first in this context, then again. */
  emptyWorker(): Promise<{ coldMs: number; warmMs: number }>;
  /** Comlink round trips to a bare echo worker; each sample is the mean of `block` consecutive calls. */
  comlinkRoundTrip(o: { samples: number; block: number; warmup: number }): Promise<number[]>;
  /** Cold then warm start (createAtomem → first recommendation); keeps the warm instance for {@link BenchApi.track}. */
  start(o: { embedder: 'hashing' | 'use-lite'; profile: string; assetsBaseUrl: string; catalog: number }): Promise<StartResult>;
  /** The first `catalog` products embedded with USE-lite into a catalog vector file (base64), as a shop would ship it. */
  makeCatalogVectors(o: { assetsBaseUrl: string; catalog: number }): Promise<string>;
  /**
   * First visit with the shop's catalog vectors at `url` (`catalogVectors`): createAtomem → first
   * recommendation, and how many products the engine still embedded (0 expected).
   */
  startWithVectors(o: {
    profile: string;
    assetsBaseUrl: string;
    catalog: number;
    url: string;
  }): Promise<{ coldMs: number; embedderMs: number | null; embedded: number }>;
  /** `await atomem.track()` round trips on the instance kept by {@link BenchApi.start} or {@link BenchApi.open}. */
  track(o: { events: number; warmup: number }): Promise<number[]>;
  /**
   * createAtomem with the hashing embedder (and, with `llm`, the wllama model at `modelUrl`);
   * waits until the model is active (or no runtime is left) and keeps the instance. Closes the
   * instance kept before.
   */
  open(o: {
    profile: string;
    catalog: number;
    llm?: { modelUrl: string; idleMs: number; budget?: { maxCalls: number; perEvents: number } };
    batchEvents?: number;
  }): Promise<OpenResult>;
  /** The kept instance's `status().llm`: mode, deferred events, costs. */
  llmStatus(): Promise<{ mode: string; deferred: number; costs: EngineStatus['llm']['costs'] }>;
  /** Track the shopper's first `events` events on the kept (model) instance, then time the idle batch that turns them into memory. */
  idleBatch(o: { events: number }): Promise<IdleBatchResult>;
  /** recommend() with and without a listwise rerank of the top `top`, on the kept instance. */
  rerank(o: { top: number; samples: number; plainSamples: number }): Promise<RerankResult>;
  /**
   * recommend(10 candidates, { intent }) on the kept instance, a different intent text each sample
   * (so each embeds its intent), and recommend(the same candidates) without one, interleaved.
   */
  intent(o: { samples: number; warmup: number }): Promise<{ intentMs: number[]; plainMs: number[]; selectMs: number[]; candidates: number; explained: number }>;
  /**
   * The shop model path (catalog vector file v2 at `url`, hashing embedder, a `catalog`-product
   * catalog): first visit (createAtomem → first recommendation, the file downloaded), `events`
   * shopper events, `samples` timed recommend(10 candidates); then the returning visit (a new
   * createAtomem on the same profile: the file revalidated, models from IndexedDB). The same with
   * the file's content rows alone (`baselineUrl`, format v1) for the baselines.
   */
  shopModel(o: {
    profile: string;
    catalog: number;
    url: string;
    baselineUrl: string;
    events: number;
    samples: number;
    warmup: number;
  }): Promise<ShopModelResult>;
  /** Dispose every instance and delete every IndexedDB database this page created. */
  cleanup(): Promise<void>;
  /** Save a 1,000-memory state once, then time `MemoryStore.load()` on a fresh connection per run. */
  idbLoad(o: { profile: string; memories: number; runs: number }): Promise<IdbResult>;
  /** USE-lite vs hashing on the 256 products' item texts (as the engine builds them), batches of `batch`. */
  throughput(o: { assetsBaseUrl: string; runs: number; batch: number }): Promise<ThroughputResult>;
}

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------

const products = productCatalog();
/** The engine's catalog: the first `--catalog` products (all 256 by default); set by start(). */
let catalog = products;

const open: Atomem[] = [];
const profiles: string[] = [];
let kept: Atomem | undefined;

function deleteDatabase(profile: string): Promise<void> {
  return new Promise((resolve) => {
    // `atomem:<profile>`, as packages/atomem/src/store/schema.ts names it (not imported: keeps the store module cold).
    const req = indexedDB.deleteDatabase(`atomem:${profile}`);
    const timer = setTimeout(resolve, 10_000);
    req.onsuccess = req.onerror = () => {
      clearTimeout(timer);
      resolve();
    };
  });
}

/** `llm` events of the instance kept by open() (reset by open() and idleBatch()). */
const feed: LlmEvent[] = [];

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Ten candidates across departments, as a "you may also like" slot would ask. */
function candidateIds(): string[] {
  const step = Math.max(1, Math.floor(catalog.length / 10));
  return catalog
    .filter((_, i) => i % step === step - 1)
    .slice(0, 10)
    .map((it) => it.id);
}

/** The i-th event of a shopper who mostly browses two departments (Outdoor, Sports: products 8k and 8k + 7) with the odd detour elsewhere. */
function shopperEvent(i: number): { item: string; action: 'purchase' | 'cart' | 'view' | 'click' } {
  const n = catalog.length;
  const home = (i % 2 === 0 ? 0 : 7) + 8 * ((i * 5) % Math.ceil(n / 8));
  const item = catalog[i % 9 === 8 || home >= n ? (i * 13) % n : home].id;
  const action = i % 11 === 0 ? 'purchase' : i % 5 === 0 ? 'cart' : i % 3 === 0 ? 'view' : 'click';
  return { item, action };
}

/** Distinct fallback reasons and messages in {@link feed}. */
function fallbackMessages(): string[] {
  const out = new Set<string>();
  for (const e of feed) if (e.kind === 'fallback') out.add(`${e.operation} ${e.reason}: ${e.message}`.slice(0, 200));
  return [...out].slice(0, 5);
}

function diffCosts(after: OperationCosts, before: OperationCosts): OperationCosts {
  const fallbacks = { ...after.fallbacks };
  for (const k of Object.keys(fallbacks) as (keyof typeof fallbacks)[]) fallbacks[k] -= before.fallbacks[k];
  return {
    requests: after.requests - before.requests,
    succeeded: after.succeeded - before.succeeded,
    calls: after.calls - before.calls,
    failures: after.failures - before.failures,
    repairs: after.repairs - before.repairs,
    fallbacks,
    promptTokens: after.promptTokens - before.promptTokens,
    outputTokens: after.outputTokens - before.outputTokens,
    ms: after.ms - before.ms,
  };
}

function answerOnce(w: Worker): Promise<void> {
  return new Promise((resolve, reject) => {
    w.onmessage = () => resolve();
    w.onerror = (e) => reject(new Error(`worker failed: ${e.message}`));
    w.postMessage('ping');
  });
}

async function timedStart(
  embedder: EmbedderSpec,
  profile: string,
  assetsBaseUrl: string,
  catalogVectors?: string,
): Promise<{ ms: number; embedderMs: number | null; embedded: number; atomem: Atomem }> {
  profiles.push(profile);
  const candidates = candidateIds();
  let embedderMs: number | null = null;
  let embedded = -1;
  const errors: string[] = [];
  const t0 = performance.now();
  const atomem = await createAtomem({
    profile,
    catalog,
    embedder,
    assetsBaseUrl,
    catalogVectors,
    onError: (e) => errors.push(`${e.name}: ${e.message}`),
    onProgress: (p) => {
      if (p.stage === 'embedder' && p.phase === 'ready') embedderMs ??= performance.now() - t0;
      if (p.stage === 'catalog' && p.unit === 'items') embedded = p.total;
    },
  });
  open.push(atomem);
  const ranked = await atomem.recommend(candidates);
  const ms = performance.now() - t0;
  if (ranked.length !== candidates.length) throw new Error(`recommend returned ${ranked.length} of ${candidates.length} candidates`);
  if (errors.length) throw new Error(`the engine reported: ${errors.join('; ')}`);
  return { ms, embedderMs, embedded, atomem };
}

/** The catalog's USE-lite vectors as a shop would ship them (the bytes, base64, for the bench to serve). */
async function catalogVectorFile(assetsBaseUrl: string): Promise<string> {
  const [{ createUseLiteEmbedder }, { fetchAssetSource }, { itemText }, { encodeCatalogVectors }] = await Promise.all([
    import('../../atomem/src/embed/use-lite.js'),
    import('../../atomem/src/embed/use-lite-browser.js'),
    import('../../atomem/src/embed/cache.js'),
    import('../../atomem/src/protocol/catalog-vectors-v1.js'),
  ]);
  const use = await createUseLiteEmbedder({ assets: fetchAssetSource(`${assetsBaseUrl}use-lite`), wasmPaths: `${assetsBaseUrl}tfjs-wasm/` });
  try {
    const vectors = (await use.embed(catalog.map((it) => itemText(it)))).map((e) => e.vector);
    const bytes = encodeCatalogVectors(use, catalog, vectors);
    let bin = '';
    for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(bin);
  } finally {
    await use.dispose?.();
  }
}

function memoryState(n: number, createState: () => MemoryState): MemoryState {
  const state = createState();
  let seed = 2026;
  const rand = (): number => {
    seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
    return seed / 2 ** 32 - 0.5;
  };
  for (let i = 0; i < n; i++) {
    const item = products[i % products.length];
    const v = new Float32Array(512);
    let s = 0;
    for (let k = 0; k < v.length; k++) {
      v[k] = rand();
      s += v[k] * v[k];
    }
    const inv = 1 / Math.sqrt(s);
    for (let k = 0; k < v.length; k++) v[k] *= inv;
    const memory: AtomicMemory = {
      id: `m-${i}`,
      content: `Enjoys ${item.title} and similar ${item.categories![0].toLowerCase()} products`,
      category: item.categories![0],
      embedding: { embedderId: 'use-lite@0.2.0/uint8', vector: v },
      items: Array.from({ length: 8 }, (_, j) => products[(i + j * 8) % products.length].id),
      strength: 0.2 + 0.6 * (rand() + 0.5),
      evidence: 1 + (i % 9),
      links: [],
      createdAt: 1.7e12 + i * 60_000,
      updatedAt: 1.7e12 + i * 90_000,
    };
    state.memories.push(memory);
  }
  return state;
}

const api: BenchApi = {
  info: () => ({ cores: navigator.hardwareConcurrency, crossOriginIsolated: globalThis.crossOriginIsolated === true, userAgent: navigator.userAgent }),

  async emptyWorker() {
    const once = async (): Promise<number> => {
      const t0 = performance.now();
      const w = new Worker(EMPTY_WORKER_URL, { type: 'module' });
      await answerOnce(w);
      const ms = performance.now() - t0;
      w.terminate();
      return ms;
    };
    const coldMs = await once();
    const warmMs = await once();
    return { coldMs, warmMs };
  },

  async comlinkRoundTrip({ samples, block, warmup }) {
    const w = new Worker(ECHO_WORKER_URL, { type: 'module' });
    const remote = wrap<{ echo(x: unknown): unknown }>(w);
    try {
      const msg = { item: products[0].id, action: 'click' };
      for (let i = 0; i < warmup; i++) await remote.echo(msg);
      const out: number[] = [];
      for (let s = 0; s < samples; s++) {
        const t0 = performance.now();
        for (let i = 0; i < block; i++) await remote.echo(msg);
        out.push((performance.now() - t0) / block);
      }
      return out;
    } finally {
      w.terminate();
    }
  },

  async start({ embedder, profile, assetsBaseUrl, catalog: size }) {
    catalog = products.slice(0, size);
    const cold = await timedStart(embedder, `${profile}-cold`, assetsBaseUrl);
    cold.atomem.dispose();
    const warm = await timedStart(embedder, `${profile}-warm`, assetsBaseUrl);
    kept = warm.atomem;
    const status = await warm.atomem.status();
    return {
      coldMs: cold.ms,
      warmMs: warm.ms,
      coldEmbedderMs: cold.embedderMs,
      warmEmbedderMs: warm.embedderMs,
      embedder: `${status.embedder.kind}/${status.embedder.device}/${status.embedder.dim}`,
      llm: status.llm.mode,
      catalog: catalog.length,
    };
  },

  async makeCatalogVectors({ assetsBaseUrl, catalog: size }) {
    catalog = products.slice(0, size);
    return catalogVectorFile(assetsBaseUrl);
  },

  async startWithVectors({ profile, assetsBaseUrl, catalog: size, url }) {
    catalog = products.slice(0, size);
    const cold = await timedStart('use-lite', `${profile}-vectors`, assetsBaseUrl, url);
    cold.atomem.dispose();
    return { coldMs: cold.ms, embedderMs: cold.embedderMs, embedded: cold.embedded };
  },

  async track({ events, warmup }) {
    const atomem = kept;
    if (!atomem) throw new Error('track: call start() or open() first');
    const out: number[] = [];
    for (let i = 0; i < warmup + events; i++) {
      const t0 = performance.now();
      await atomem.track(shopperEvent(i));
      if (i >= warmup) out.push(performance.now() - t0);
    }
    return out;
  },

  async open({ profile, catalog: size, llm, batchEvents }) {
    if (kept) {
      kept.dispose();
      kept = undefined;
    }
    catalog = products.slice(0, size);
    profiles.push(profile);
    feed.length = 0;
    let readyMs: number | null = null;
    const t0 = performance.now();
    const atomem = await createAtomem({
      profile,
      catalog,
      embedder: 'hashing',
      ...(llm ? { llm: { wllama: { model: llm.modelUrl, wasmUrl: wllamaWasmUrl }, idleMs: llm.idleMs, ...(llm.budget ? { budget: llm.budget } : {}) } } : {}),
      ...(batchEvents !== undefined ? { config: { batchEvents } } : {}),
      onProgress: (p) => {
        if (p.stage === 'llm' && p.phase === 'ready') readyMs ??= performance.now() - t0;
      },
    });
    const createMs = performance.now() - t0;
    open.push(atomem);
    kept = atomem;
    atomem.on('llm', (e) => feed.push(e));
    let status = await atomem.status();
    let llmMs: number | null = null;
    if (llm) {
      const deadline = performance.now() + 120_000;
      // loading ends with the model wired in as the reasoner, or with none loaded (mode rules: the driver reports the attempts)
      while (status.llm.loading) {
        if (performance.now() > deadline) throw new Error('open: the model did not finish loading within 120 s');
        await sleep(20);
        status = await atomem.status();
      }
      if (status.llm.mode !== 'rules') llmMs = performance.now() - t0;
    }
    return {
      createMs,
      llmMs,
      llmReadyEventMs: readyMs,
      embedder: `${status.embedder.kind}/${status.embedder.device}/${status.embedder.dim}`,
      llm: status.llm.mode,
      model: status.llm.model,
      attempts: status.llm.attempts.map((a) => `${a.runtime}:${a.ok ? 'ok' : (a.reason ?? 'failed')}`),
      crossOriginIsolated: globalThis.crossOriginIsolated === true,
    };
  },

  async llmStatus() {
    if (!kept) throw new Error('llmStatus: call open() first');
    const s = await kept.status();
    return { mode: s.llm.mode, deferred: s.llm.deferred, costs: s.llm.costs };
  },

  async idleBatch({ events }) {
    const atomem = kept;
    if (!atomem) throw new Error('idleBatch: call open() first');
    const before = (await atomem.status()).llm;
    if (before.mode === 'rules' || !before.costs) throw new Error('idleBatch: no model is active');
    if (before.deferred !== 0) throw new Error(`idleBatch: ${before.deferred} events already deferred`);
    feed.length = 0;
    const trackMs: number[] = [];
    for (let i = 0; i < events; i++) {
      const t0 = performance.now();
      await atomem.track(shopperEvent(i));
      trackMs.push(performance.now() - t0);
    }
    const last = performance.now();
    let s = (await atomem.status()).llm;
    const deferredAfterTrack = s.deferred;
    const deadline = last + 240_000;
    while (s.deferred > 0) {
      if (performance.now() > deadline) throw new Error(`idleBatch: ${s.deferred} events still deferred after 240 s`);
      await sleep(20);
      s = (await atomem.status()).llm;
    }
    const toDeferred0Ms = performance.now() - last;
    // a read waits behind the idle batch's write lock: it answers once sweeps, profile and save are done
    const memories = (await atomem.memories()).length;
    const toDoneMs = performance.now() - last;
    const after = (await atomem.status()).llm.costs!;
    const byOperation: Record<string, OperationCosts> = {};
    for (const [op, c] of Object.entries(after.byOperation)) {
      const d = diffCosts(c, before.costs.byOperation[op as keyof typeof after.byOperation]);
      if (d.requests > 0 || d.calls > 0) byOperation[op] = d;
    }
    return {
      trackMs,
      deferredAfterTrack,
      toDeferred0Ms,
      toDoneMs,
      costs: diffCosts(after.total, before.costs.total),
      byOperation,
      callEvents: feed.filter((e) => e.kind === 'call').length,
      fallbackEvents: feed.filter((e) => e.kind === 'fallback').length,
      fallbackMessages: fallbackMessages(),
      memories,
    };
  },

  async rerank({ top, samples, plainSamples }) {
    const atomem = kept;
    if (!atomem) throw new Error('rerank: call open() first');
    const candidates = candidateIds();
    const check = (ranked: { id: string }[]): void => {
      if (ranked.length !== candidates.length) throw new Error(`recommend returned ${ranked.length} of ${candidates.length} candidates`);
    };
    const plainMs: number[] = [];
    check(await atomem.recommend(candidates)); // warm-up
    for (let i = 0; i < plainSamples; i++) {
      const t0 = performance.now();
      check(await atomem.recommend(candidates));
      plainMs.push(performance.now() - t0);
    }
    const before = (await atomem.status()).llm.costs;
    if (!before) throw new Error('rerank: no model is active');
    const rerankMs: number[] = [];
    feed.length = 0;
    for (let i = 0; i < samples; i++) {
      const t0 = performance.now();
      check(await atomem.recommend(candidates, { rerank: top }));
      rerankMs.push(performance.now() - t0);
    }
    const after = (await atomem.status()).llm.costs!;
    return {
      rerankMs,
      plainMs,
      costs: diffCosts(after.byOperation.rerank, before.byOperation.rerank),
      fallbackMessages: fallbackMessages(),
      candidates: candidates.length,
    };
  },

  async intent({ samples, warmup }) {
    const atomem = kept;
    if (!atomem) throw new Error('intent: call start() first');
    const candidates = candidateIds();
    const wants = [
      'a gift for my dad, he hikes',
      'something for the kitchen',
      'new headphones for running',
      'a book for a long train ride',
      'garden tools for spring',
      'a toy for a five-year-old',
      'tea for a cold evening',
      'camping gear for the weekend',
    ];
    const intentMs: number[] = [];
    const plainMs: number[] = [];
    const selectMs: number[] = [];
    let explained = 0;
    for (let i = 0; i < warmup + samples; i++) {
      const intent = `${wants[i % wants.length]} (${i})`;
      const t0 = performance.now();
      const ranked = await atomem.recommend(candidates, { intent });
      const t1 = performance.now();
      await atomem.recommend(candidates);
      const t2 = performance.now();
      await atomem.intentMemories(`${intent} again`); // the intent's embedding + memory selection alone
      const t3 = performance.now();
      if (ranked.length !== candidates.length) throw new Error(`recommend returned ${ranked.length} of ${candidates.length} candidates`);
      if (i < warmup) continue;
      intentMs.push(t1 - t0);
      plainMs.push(t2 - t1);
      selectMs.push(t3 - t2);
      if (ranked.some((r) => r.explanations.some((e) => e.includes('asked for')))) explained++;
    }
    return { intentMs, plainMs, selectMs, candidates: candidates.length, explained };
  },

  async shopModel({ profile, catalog: size, url, baselineUrl, events, samples, warmup }) {
    catalog = productCatalog(size);
    const candidates = candidateIds();
    const visit = async (name: string, file: string): Promise<ShopVisit> => {
      profiles.push(`${profile}-${name}`);
      const once = async () => {
        let bytes = 0;
        const errors: string[] = [];
        const t0 = performance.now();
        const a = await createAtomem({
          profile: `${profile}-${name}`,
          catalog,
          embedder: 'hashing',
          catalogVectors: file,
          onError: (e) => errors.push(`${e.name}: ${e.message}`),
          onProgress: (p) => {
            if (p.stage === 'catalog' && p.phase === 'download') bytes = p.loaded;
          },
        });
        open.push(a);
        await a.recommend(candidates);
        const ms = performance.now() - t0;
        if (errors.length) throw new Error(`the engine reported: ${errors.join('; ')}`);
        return { a, ms, bytes, status: (await a.status()).catalog };
      };
      const first = await once();
      for (let i = 0; i < events; i++) await first.a.track({ ...shopperEvent(i), at: 1_700_000_000_000 + i * 60_000 });
      const recommendMs: number[] = [];
      let top: string[] = [];
      for (let i = 0; i < warmup + samples; i++) {
        const t0 = performance.now();
        const r = await first.a.recommend(candidates);
        if (i >= warmup) recommendMs.push(performance.now() - t0);
        top = r.slice(0, 3).map((x) => x.id);
      }
      first.a.dispose();
      const again = await once();
      again.a.dispose();
      return {
        firstMs: first.ms,
        firstBytes: first.bytes,
        againMs: again.ms,
        againBytes: again.bytes,
        firstStatus: first.status,
        againStatus: again.status,
        recommendMs,
        top,
      };
    };
    const shop = await visit('shop', url);
    const content = await visit('content', baselineUrl);
    return { shop, content };
  },

  async wholeCatalog({ profile, catalog: size, url, events, samples, warmup, limit }) {
    catalog = productCatalog(size);
    profiles.push(profile);
    const errors: string[] = [];
    const a = await createAtomem({ profile, catalog, embedder: 'hashing', catalogVectors: url, onError: (e) => errors.push(`${e.name}: ${e.message}`) });
    open.push(a);
    const bought = new Set<string>();
    for (let i = 0; i < events; i++) {
      const e = shopperEvent(i);
      if (e.action === 'purchase') bought.add(e.item);
      await a.track({ ...e, at: 1_700_000_000_000 + i * 60_000 });
    }
    const recommendMs: number[] = [];
    let last: Awaited<ReturnType<Atomem['recommend']>> = [];
    for (let i = 0; i < warmup + samples; i++) {
      const t0 = performance.now();
      last = await a.recommend({ limit });
      if (i >= warmup) recommendMs.push(performance.now() - t0);
    }
    if (errors.length) throw new Error(`the engine reported: ${errors.join('; ')}`);
    // the same vectors, decoded in the page: a bare scan against one query (the mean of the shopper's items' vectors)
    const file = decodeCatalogFile(new Uint8Array(await (await fetch(url)).arrayBuffer()));
    const vec = file.shop?.model.vectors;
    if (!vec) throw new Error('the shop file has no collaborative vectors');
    const n = file.shop!.model.items.length;
    const index = new Map(file.shop!.model.items.map((id, i) => [id, i]));
    const q = new Float32Array(vec.dim);
    for (let i = 0; i < events; i++) {
      const r = index.get(shopperEvent(i).item);
      if (r !== undefined) for (let d = 0; d < vec.dim; d++) q[d] += vec.values[r * vec.dim + d];
    }
    const scanMs: number[] = [];
    let sink = 0;
    for (let i = 0; i < warmup + samples; i++) {
      const t0 = performance.now();
      const best = new Float64Array(limit).fill(-Infinity);
      for (let r = 0, o = 0; r < n; r++, o += vec.dim) {
        let s = 0;
        for (let d = 0; d < vec.dim; d++) s += vec.values[o + d] * q[d];
        if (s > best[limit - 1]) {
          let k = limit - 1;
          while (k > 0 && best[k - 1] < s) (best[k] = best[k - 1]), k--;
          best[k] = s;
        }
      }
      sink += best[0];
      if (i >= warmup) scanMs.push(performance.now() - t0);
    }
    const mem = (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory;
    return {
      recommendMs,
      scanMs: sink === 42.4242 ? [] : scanMs,
      items: n,
      dim: vec.dim,
      returned: last.length,
      explained: last.filter((r) => r.explanations.length > 0).length,
      bought: last.filter((r) => bought.has(r.id)).length,
      status: (await a.status()).catalog,
      pageHeapMB: mem ? mem.usedJSHeapSize / 1e6 : NaN,
    };
  },

  async cleanup() {
    for (const a of open.splice(0)) a.dispose();
    kept = undefined;
    feed.length = 0;
    // a terminated worker's connections close shortly after; the deletion waits for them.
    await Promise.all(profiles.splice(0).map(deleteDatabase));
    // the origin's catalog file cache (packages/atomem/src/worker/shop-file-cache.ts), so the next context starts cold too
    await new Promise<void>((resolve) => {
      const req = indexedDB.deleteDatabase('atomem-files');
      const timer = setTimeout(resolve, 10_000);
      req.onsuccess = req.onerror = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  },

  async idbLoad({ profile, memories, runs }) {
    const [{ MemoryStore }, { createState }] = await Promise.all([import('../../atomem/src/store/store.js'), import('../../atomem/src/core/memory.js')]);
    profiles.push(profile);
    const state = memoryState(memories, createState);
    const writer = await MemoryStore.open({ profile });
    await writer.saveState(state);
    writer.close();
    const json = JSON.stringify(state, (_k, v: unknown) => (v instanceof Float32Array ? Array.from(v) : v));
    const loadMs: number[] = [];
    const cloneMs: number[] = [];
    const parseMs: number[] = [];
    let sink = 0;
    for (let r = 0; r < runs; r++) {
      // a fresh connection each run; the browser's own IndexedDB caches stay (hence "cold-ish").
      const store = await MemoryStore.open({ profile });
      const t0 = performance.now();
      const loaded = await store.load();
      loadMs.push(performance.now() - t0);
      store.close();
      if (loaded.memories.length !== memories || loaded.memories[0].embedding.vector.length !== 512) {
        throw new Error(`load returned ${loaded.memories.length} memories`);
      }
      const t1 = performance.now();
      const cloned = structuredClone(state);
      cloneMs.push(performance.now() - t1);
      const t2 = performance.now();
      const parsed = JSON.parse(json) as MemoryState;
      parseMs.push(performance.now() - t2);
      sink += cloned.memories.length + parsed.memories.length;
    }
    if (sink !== 2 * runs * memories) throw new Error('baseline copies are incomplete');
    return { loadMs, cloneMs, parseMs, memories, jsonBytes: json.length };
  },

  async throughput({ assetsBaseUrl, runs, batch }) {
    const [{ createUseLiteEmbedder }, { fetchAssetSource }, { createHashingEmbedder }, { itemText }] = await Promise.all([
      import('../../atomem/src/embed/use-lite.js'),
      import('../../atomem/src/embed/use-lite-browser.js'),
      import('../../atomem/src/embed/hashing.js'),
      import('../../atomem/src/embed/cache.js'),
    ]);
    const texts = products.map((it) => itemText(it));
    const use = await createUseLiteEmbedder({
      assets: fetchAssetSource(`${assetsBaseUrl}use-lite`),
      wasmPaths: `${assetsBaseUrl}tfjs-wasm/`,
      batchSize: batch,
    });
    // the engine's hashing embedder (256 buckets, see packages/atomem/src/worker/embedders.ts)
    const hashing = createHashingEmbedder({ dim: 256 });
    const pass = async (embed: (t: string[]) => Promise<unknown>, repeat: number): Promise<number> => {
      const t0 = performance.now();
      for (let k = 0; k < repeat; k++) for (let i = 0; i < texts.length; i += batch) await embed(texts.slice(i, i + batch));
      return (repeat * texts.length) / ((performance.now() - t0) / 1000);
    };
    try {
      await pass((t) => use.embed(t), 1); // warm-up: kernels and allocations
      await pass((t) => hashing.embed(t), 5);
      const useRates: number[] = [];
      const hashRates: number[] = [];
      for (let r = 0; r < runs; r++) {
        useRates.push(await pass((t) => use.embed(t), 1));
        // hashing is ~1,000× faster: 20 passes per sample so the timer's resolution does not matter.
        hashRates.push(await pass((t) => hashing.embed(t), 20));
      }
      return { useRates, hashRates, texts: texts.length, meanChars: texts.reduce((s, t) => s + t.length, 0) / texts.length };
    } finally {
      await use.dispose?.();
    }
  },
};

declare global {
  interface Window {
    __bench?: BenchApi;
  }
}

if (typeof window !== 'undefined') window.__bench = api;
