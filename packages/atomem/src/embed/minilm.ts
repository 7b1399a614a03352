/**
 * all-MiniLM-L6-v2 (384-d, the STEAM paper's encoder) through `@huggingface/transformers`
 * (transformers.js 4.3): ONNX Runtime Web on WebGPU or WASM in a browser or worker,
 * onnxruntime-node on the CPU in Node. Mean pooling over the attention mask, then L2
 * normalisation — sentence-transformers' recipe for this model.
 *
 * Nothing is fetched from a CDN: the ONNX Runtime `.wasm` comes from `wasmPaths` (required in a
 * browser or worker, self-hosted), the model folder from `modelBaseUrl` (the Hugging Face hub by
 * default, or the shop's own host), and with `allowRemote: false` nothing is downloaded at all:
 * the files must already be in the cache (the browser Cache API `transformers-cache`, a custom
 * `cache`, or, in Node, a folder on disk).
 *
 * ```ts
 * const minilm = await createMiniLMEmbedder({
 *   modelBaseUrl: 'https://shop.example/models/',   // → https://shop.example/models/Xenova/all-MiniLM-L6-v2/…
 *   wasmPaths: 'https://shop.example/ort-wasm/',     // holds ort-wasm-simd-threaded.asyncify.{mjs,wasm}
 *   onProgress: (p) => bar.update(p.loaded, p.total),
 * });
 * minilm.id;     // 'Xenova/all-MiniLM-L6-v2/q8' on wasm, '…/fp32' on WebGPU (unless `dtype` is given)
 * minilm.device; // 'webgpu' | 'wasm' (browser) or 'cpu' (Node)
 * ```
 *
 * transformers.js keeps its settings in one global `env`; this module sets the fields it needs
 * for the duration of one load (loads are serialised) and restores them afterwards, so other
 * users of transformers.js in the same realm see their own settings again.
 */
import type { Embedding } from '../core/types.js';
import { normalize } from '../core/vector.js';
import { ModelUnavailableError, type LoadProgress, type OnLoadProgress } from '../models/types.js';
import type { Embedder } from './types.js';
import { SerialEmbedQueue } from './validate.js';

/** The model loaded when `model` is not given: the ONNX export of sentence-transformers/all-MiniLM-L6-v2. */
const MINILM_DEFAULT_MODEL = 'Xenova/all-MiniLM-L6-v2';

/** Where the model runs: WebGPU or WASM (browser / worker), or onnxruntime-node's native CPU (Node). */
export type MiniLMDevice = 'webgpu' | 'wasm' | 'cpu';

/**
 * Weight precision, i.e. which file of the model's `onnx/` folder is loaded: `fp32` →
 * `model.onnx`, `fp16` → `model_fp16.onnx`, `q8` → `model_quantized.onnx`, `int8`, `uint8`, `q4`,
 * `q4f16`, `bnb4` → `model_<dtype>.onnx`. Part of the embedder id: vectors differ by precision.
 */
export type MiniLMDtype = 'fp32' | 'fp16' | 'q8' | 'int8' | 'uint8' | 'q4' | 'q4f16' | 'bnb4';

const DTYPES: readonly MiniLMDtype[] = ['fp32', 'fp16', 'q8', 'int8', 'uint8', 'q4', 'q4f16', 'bnb4'];

/**
 * A store transformers.js looks files up in before downloading, and puts downloads into (the
 * `match`/`put` subset of the Web Cache API). Keys are the file's URL (or local path).
 */
export interface MiniLMFileCache {
  /** The cached response for `request`, or `undefined`. */
  match(request: string): Promise<Response | undefined>;
  /** Store a downloaded file. */
  put(request: string, response: Response): Promise<void>;
}

/** Options of {@link createMiniLMEmbedder}. */
export interface MiniLMOptions {
  /** Model id (a folder name under `modelBaseUrl`). Default {@link MINILM_DEFAULT_MODEL}. */
  model?: string;
  /**
   * Where model folders live. Default: transformers.js' `env.remoteHost`/`env.remotePathTemplate`
   * (the Hugging Face hub, `https://huggingface.co/{model}/resolve/{revision}/`).
   * - A folder URL (absolute, or relative to the page/worker): files are read from
   *   `${modelBaseUrl}/${model}/${file}`, e.g. `https://shop.example/models/`.
   * - A URL with `{model}` (and optionally `{revision}`, always `main`) placeholders, e.g. a hub
   *   mirror `https://mirror.example/{model}/resolve/{revision}/`.
   * - Node only: a folder on disk (path or `file:` URL) holding `${model}/…`.
   */
  modelBaseUrl?: string;
  /**
   * ONNX Runtime Web's binaries, self-hosted (browser and worker only; ignored in Node).
   * Required there: transformers.js would otherwise fetch them from a CDN. Either
   * - a folder URL (trailing slash) holding `ort-wasm-simd-threaded.asyncify.mjs` and
   *   `ort-wasm-simd-threaded.asyncify.wasm` (the atomem package ships them in
   *   `dist/assets/ort-wasm/`, copied from the exact `onnxruntime-web` its worker bundles), or
   * - `{ wasm }` (URL of `ort-wasm-simd-threaded.asyncify.wasm`: the JS glue bundled in
   *   transformers.js is used) or `{ wasm, mjs }` (both files; transformers.js then caches them
   *   in its cache and imports the glue from a `blob:` URL, which a strict CSP must allow).
   *
   * Relative URLs are resolved against the page or worker. Honoured only until ONNX Runtime has
   * initialised its WASM module in this realm (the first successful load).
   */
  wasmPaths?: string | { wasm: string; mjs?: string };
  /**
   * `auto` (default): WebGPU when `navigator.gpu.requestAdapter()` gives an adapter that gives a
   * device, else WASM; in Node always the native CPU. If the WebGPU load fails, WASM is tried
   * (see the caveat in {@link EmbedderLoadError}'s `runtime` reason). `webgpu`: WebGPU or a
   * {@link ModelUnavailableError}. `wasm`: WASM (Node: the native CPU). The device actually used
   * is {@link MiniLMEmbedder.device}.
   */
  device?: 'auto' | 'webgpu' | 'wasm';
  /**
   * Weight precision. Default: transformers.js' per-device default, `fp32` on WebGPU and `q8`
   * on WASM/CPU (a 23 MB download instead of 90 MB). The embedder id includes it, so a device
   * change under the default switches the id (and so forces a re-embed); pass a dtype to keep
   * one id across devices.
   */
  dtype?: MiniLMDtype;
  /**
   * May files be downloaded (from `modelBaseUrl` or the hub)? Default `true`. With `false`,
   * nothing goes over the network for the model: every file must be in the cache (or, in Node,
   * in a `modelBaseUrl` folder on disk); a missing one is an {@link EmbedderLoadError} with
   * reason `missing-file`. The `.wasm` binaries are not model files and are still loaded.
   */
  allowRemote?: boolean;
  /**
   * Cache looked up before any download and filled by downloads. Default: transformers.js'
   * (the browser Cache API `transformers-cache`, or a folder in Node); or whatever
   * `env.customCache` the host application set.
   */
  cache?: MiniLMFileCache;
  /** Texts per forward pass. Default 32. */
  batchSize?: number;
  /**
   * Load progress, `stage: 'embedder'`, `unit: 'bytes'`, `model` = the model id: `download`
   * (bytes of all files so far / in all, from transformers.js' `progress_total`), `load` once the
   * ONNX file is in and the session is being created, `ready` after a warm-up run.
   */
  onProgress?: OnLoadProgress;
}

/** A loaded MiniLM (or other BERT-like sentence-transformers) embedder. */
export interface MiniLMEmbedder extends Embedder {
  /** `${model}/${dtype}`, e.g. `Xenova/all-MiniLM-L6-v2/q8`. */
  readonly id: string;
  /** Model id as loaded. */
  readonly model: string;
  /** Precision actually loaded. */
  readonly dtype: MiniLMDtype;
  /** Where the model actually runs. */
  readonly device: MiniLMDevice;
  /** Token ids the model sees for `text`, with `[CLS]`/`[SEP]` (for tests and diagnostics). */
  tokenize(text: string): number[];
  /** Release the ONNX session. Idempotent; waits for running `embed` calls. */
  dispose(): Promise<void>;
}

/** Why {@link createMiniLMEmbedder} failed. */
export type EmbedderLoadErrorReason =
  /** A model file is absent (HTTP 404/401/403, not on disk, or not cached with `allowRemote: false`). */
  | 'missing-file'
  /** A file is there but unusable: bad JSON, not an ONNX graph, wrong inputs or output shape. */
  | 'invalid-model'
  /**
   * ONNX Runtime could not start (e.g. the `.wasm` at `wasmPaths` could not be loaded), or
   * transformers.js can no longer create sessions in this page/worker: in a browser, after one
   * failed session creation every later one rejects with the same error (transformers.js 4.3.2
   * never resets its session queue) — the message then says to restart the worker.
   */
  | 'runtime'
  /** Bad options (e.g. no `wasmPaths` in a browser). */
  | 'config';

/** A model that could not be loaded; `reason` tells the caller what to fix. */
export class EmbedderLoadError extends Error {
  override name = 'EmbedderLoadError';
  constructor(
    message: string,
    /** What went wrong. */
    readonly reason: EmbedderLoadErrorReason,
    /** Model id. */
    readonly model: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The embedder id of `model` at precision `dtype`: caches keyed by it never mix vectors. */
export function miniLMEmbedderId(model: string, dtype: MiniLMDtype): string {
  return `${model}/${dtype}`;
}

const DEFAULT_BATCH = 32;

type Transformers = typeof import('@huggingface/transformers');
type Env = Transformers['env'];
type ProgressInfo = import('@huggingface/transformers').ProgressInfo;

/** The parts of transformers.js' feature-extraction pipeline this module uses. */
interface Extractor {
  (texts: string[], options: { pooling: 'mean'; normalize: boolean }): Promise<OutTensor>;
  tokenizer?: { encode(text: string): number[] };
  model?: { sessions?: Record<string, { config?: { device?: string; dtype?: string } }> };
  dispose(): Promise<void>;
}

interface OutTensor {
  dims: number[];
  data: ArrayLike<number>;
  dispose?(): void;
}

/**
 * Load a BERT-like sentence encoder (default all-MiniLM-L6-v2) and return an {@link Embedder}.
 * Vectors are mean-pooled over the attention mask and L2-normalised; `dim` is read from the
 * model's output (384 for MiniLM) during a warm-up run at load. Calls to `embed` are
 * serialised and run in batches of `batchSize`. Texts longer than the tokenizer's
 * `model_max_length` (512 tokens for MiniLM) are truncated.
 *
 * Throws an {@link EmbedderLoadError} (`missing-file`, `invalid-model`, `runtime`, `config`)
 * naming the model and what to fix, or a {@link ModelUnavailableError} when `device: 'webgpu'`
 * is asked for and there is no adapter.
 */
export async function createMiniLMEmbedder(options: MiniLMOptions = {}): Promise<MiniLMEmbedder> {
  const model = options.model ?? MINILM_DEFAULT_MODEL;
  const fail = (message: string, reason: EmbedderLoadErrorReason, cause?: unknown): EmbedderLoadError =>
    new EmbedderLoadError(`MiniLM (${model}): ${message}`, reason, model, cause === undefined ? undefined : { cause });
  if (typeof model !== 'string' || model.trim() === '') throw new EmbedderLoadError('MiniLM: `model` must be a non-empty string', 'config', String(model));
  const batchSize = options.batchSize ?? DEFAULT_BATCH;
  if (!Number.isInteger(batchSize) || batchSize < 1) throw fail(`batchSize must be a positive integer, got ${batchSize}`, 'config');
  if (options.dtype !== undefined && !DTYPES.includes(options.dtype)) {
    throw fail(`dtype must be one of ${DTYPES.join(', ')}, got ${JSON.stringify(options.dtype)}`, 'config');
  }
  const requested = options.device ?? 'auto';
  if (!['auto', 'webgpu', 'wasm'].includes(requested)) throw fail(`device must be 'auto', 'webgpu' or 'wasm', got ${JSON.stringify(requested)}`, 'config');
  const node = isNode();
  if (!node && options.wasmPaths === undefined) {
    throw fail('pass `wasmPaths` (self-hosted onnxruntime-web binaries); without it transformers.js would fetch them from a CDN', 'config');
  }

  const transformers = await import('@huggingface/transformers');

  let devices: MiniLMDevice[];
  if (node) {
    devices = [requested === 'webgpu' ? 'webgpu' : 'cpu'];
  } else if (requested === 'wasm') {
    devices = ['wasm'];
  } else {
    const adapter = await hasWebGpuAdapter();
    if (requested === 'webgpu' && !adapter) {
      throw new ModelUnavailableError(`MiniLM (${model}): device 'webgpu' asked for, but navigator.gpu gave no adapter or no device`, 'transformers.js');
    }
    devices = adapter ? (requested === 'auto' ? ['webgpu', 'wasm'] : ['webgpu']) : ['wasm'];
  }

  let lastError: unknown;
  for (const device of devices) {
    try {
      return await serialised(() => load(transformers, model, device, batchSize, options, fail));
    } catch (e) {
      lastError = e;
      // why: WebGPU fails in device-specific ways (features, limits, an op the EP lacks) that are
      // hard to tell from a bad model; WASM is the authoritative second try. A missing file or bad
      // options fail the same way everywhere. Caveat: transformers.js 4.3.2 cannot create a session
      // after a failed one in the same realm, so the retry only helps when WebGPU failed before
      // session creation; otherwise it ends in a 'runtime' error asking for a worker restart.
      const retry = device === 'webgpu' && devices.length > 1 && !(e instanceof EmbedderLoadError && (e.reason === 'missing-file' || e.reason === 'config'));
      if (!retry) throw e;
    }
  }
  throw lastError;
}

let chain: Promise<unknown> = Promise.resolve();

/** Run loads one at a time: each one owns transformers.js' global `env` while it runs. */
function serialised<T>(fn: () => Promise<T>): Promise<T> {
  const run = chain.then(fn);
  chain = run.catch(() => undefined);
  return run;
}

async function load(
  transformers: Transformers,
  model: string,
  device: MiniLMDevice,
  batchSize: number,
  options: MiniLMOptions,
  fail: (message: string, reason: EmbedderLoadErrorReason, cause?: unknown) => EmbedderLoadError,
): Promise<MiniLMEmbedder> {
  const { env, pipeline } = transformers;
  const dtype: MiniLMDtype = options.dtype ?? (device === 'webgpu' ? 'fp32' : 'q8');
  const allowRemote = options.allowRemote ?? true;
  const progress = progressMapper(model, options.onProgress);
  const where = locate(options.modelBaseUrl, model);
  if (where.remote === undefined && where.localFolder === undefined) where.describe = remoteFolder(env, model);

  const restore = configureEnv(env, where, model, allowRemote, options.cache);
  let extractor: Extractor;
  try {
    if (!isNode()) setWasmPaths(env, options.wasmPaths!, fail);
    try {
      extractor = (await pipeline('feature-extraction', model, {
        device,
        dtype,
        progress_callback: progress.callback,
      })) as unknown as Extractor;
    } catch (e) {
      throw poisoned(e, 'create an ONNX session', fail) ?? classify(e, where, allowRemote, wasmHint(options.wasmPaths), fail);
    }
  } finally {
    restore();
  }

  if (typeof extractor.tokenizer?.encode !== 'function') {
    await extractor.dispose().catch(() => undefined);
    const hint = allowRemote || where.localFolder !== undefined ? '' : ' (in the cache: allowRemote is false)';
    throw fail(`no tokenizer: tokenizer_config.json and tokenizer.json must be in ${where.describe}${hint}`, 'missing-file');
  }
  const session = extractor.model?.sessions?.model?.config;
  const actualDevice = (session?.device as MiniLMDevice | undefined) ?? device;
  const actualDtype = (session?.dtype as MiniLMDtype | undefined) ?? dtype;

  progress.loading();
  let dim: number;
  try {
    // why: the first run compiles kernels; pay it at load time, and read the real dimension.
    const out = await extractor(['warm up'], { pooling: 'mean', normalize: true });
    try {
      if (out.dims.length !== 2 || out.dims[0] !== 1 || !(out.dims[1] > 0)) {
        throw new Error(`pooled output has shape [${out.dims.join(', ')}], expected [1, hidden]`);
      }
      dim = out.dims[1];
      normalize(Array.from(out.data)); // why: throws on NaN/Inf/zero: a broken graph fails here, not in embed()
    } finally {
      out.dispose?.();
    }
  } catch (e) {
    await extractor.dispose().catch(() => undefined);
    const stuck = poisoned(e, 'run a model', fail);
    if (stuck) throw stuck;
    const runtime = looksLikeRuntimeFailure(e);
    throw fail(
      `the model loaded but ${runtime ? 'the runtime failed to run it' : 'does not produce a usable last_hidden_state'} on ${actualDevice}: ${message(e)}`,
      runtime ? 'runtime' : 'invalid-model',
      e,
    );
  }
  progress.ready();
  return new MiniLM(extractor, model, actualDtype, actualDevice, dim, batchSize);
}

class MiniLM implements MiniLMEmbedder {
  readonly id: string;
  private readonly queue = new SerialEmbedQueue<Embedding[]>();
  private disposed = false;

  constructor(
    private readonly extractor: Extractor,
    readonly model: string,
    readonly dtype: MiniLMDtype,
    readonly device: MiniLMDevice,
    readonly dim: number,
    private readonly batchSize: number,
  ) {
    this.id = miniLMEmbedderId(model, dtype);
  }

  tokenize(text: string): number[] {
    return this.extractor.tokenizer!.encode(text);
  }

  embed(texts: readonly string[]): Promise<Embedding[]> {
    // why: one forward at a time keeps peak memory at one batch even under concurrent callers.
    return this.queue.run(texts, (snapshot) => this.embedAll(snapshot));
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.queue.idle();
    await this.extractor.dispose();
  }

  private async embedAll(texts: readonly string[]): Promise<Embedding[]> {
    if (this.disposed) throw new Error(`${this.id} embedder has been disposed`);
    // why: a batch is padded to its longest text; grouping texts of similar length (stable sort by
    // characters, a cheap proxy for tokens) wastes less work on padding.
    const order = texts.map((_, i) => i).sort((a, b) => texts[a].length - texts[b].length);
    const out = new Array<Embedding>(texts.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      const rows = order.slice(start, start + this.batchSize);
      let result: OutTensor;
      try {
        result = await this.extractor(
          rows.map((i) => texts[i]),
          { pooling: 'mean', normalize: true },
        );
      } catch (e) {
        throw poisoned(e, 'run a model', (m) => new Error(`${this.id}: ${m}`, { cause: e })) ?? e;
      }
      try {
        if (result.dims.length !== 2 || result.dims[0] !== rows.length || result.dims[1] !== this.dim) {
          throw new Error(`${this.id} returned shape [${result.dims.join(', ')}], expected [${rows.length}, ${this.dim}]`);
        }
        rows.forEach((textIndex, r) => {
          const row = Array.prototype.slice.call(result.data, r * this.dim, (r + 1) * this.dim) as number[];
          try {
            // why: already unit norm from the pipeline; renormalising in float32 guards the contract and NaNs.
            out[textIndex] = { embedderId: this.id, vector: normalize(row) };
          } catch (e) {
            throw new Error(`${this.id} produced an invalid vector for texts[${textIndex}]: ${message(e)}`, { cause: e });
          }
        });
      } finally {
        result.dispose?.();
      }
    }
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Where the files come from, and transformers.js' global env.

interface ModelLocation {
  /** For error messages: where the model folder is. */
  describe: string;
  /** Set on env for this load. */
  remote?: { host: string; template: string };
  /** Node: a folder on disk. */
  localFolder?: string;
  /** The model folder's URL prefix, when the files come over HTTP(S). */
  folderUrl?: string;
}

function locate(modelBaseUrl: string | undefined, model: string): ModelLocation {
  if (modelBaseUrl === undefined) {
    return { describe: '' }; // filled in from transformers.js' env at load time
  }
  if (typeof modelBaseUrl !== 'string' || modelBaseUrl.trim() === '') {
    throw new EmbedderLoadError(`MiniLM (${model}): modelBaseUrl must be a non-empty string`, 'config', model);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(modelBaseUrl)?.[1]?.toLowerCase();
  if (isNode() && (scheme === undefined || scheme === 'file' || /^[a-z]:[\\/]/i.test(modelBaseUrl))) {
    const folder = scheme === 'file' ? decodeURIComponent(new URL(modelBaseUrl).pathname) : modelBaseUrl;
    return { describe: `${folder.replace(/[\\/]+$/, '')}/${model}`, localFolder: folder };
  }
  const base = globalThis.location?.href;
  let absolute: string;
  try {
    // why: `{model}` placeholders must survive URL parsing, which would percent-encode the braces.
    absolute = decodeURI(new URL(modelBaseUrl, base).href);
  } catch (e) {
    throw new EmbedderLoadError(`MiniLM (${model}): modelBaseUrl ${JSON.stringify(modelBaseUrl)} is not a URL`, 'config', model, { cause: e });
  }
  const brace = absolute.indexOf('{');
  if (brace >= 0) {
    const cut = absolute.lastIndexOf('/', brace) + 1;
    const host = absolute.slice(0, cut);
    const template = absolute.slice(cut);
    const folderUrl = (host + template.replaceAll('{model}', model).replaceAll('{revision}', 'main')).replace(/\/*$/, '/');
    return { describe: folderUrl, remote: { host, template }, folderUrl };
  }
  const host = absolute.endsWith('/') ? absolute : `${absolute}/`;
  return { describe: `${host}${model}/`, remote: { host, template: '{model}/' }, folderUrl: `${host}${model}/` };
}

const ENV_FIELDS = [
  'allowRemoteModels',
  'allowLocalModels',
  'localModelPath',
  'remoteHost',
  'remotePathTemplate',
  'useFS',
  'useCustomCache',
  'customCache',
  'fetch',
] as const;

/** Point transformers.js at `where` for one load; returns the function that restores `env`. */
function configureEnv(env: Env, where: ModelLocation, model: string, allowRemote: boolean, cache: MiniLMFileCache | undefined): () => void {
  const saved = ENV_FIELDS.map((k) => [k, env[k]] as const);
  const restore = () => {
    for (const [k, v] of saved) (env as Record<string, unknown>)[k] = v;
  };
  try {
    env.allowRemoteModels = allowRemote;
    if (cache !== undefined) {
      env.useCustomCache = true;
      env.customCache = cache;
    }
    if (where.localFolder !== undefined) {
      env.allowLocalModels = true;
      env.useFS = true;
      env.localModelPath = where.localFolder;
    } else {
      if (where.remote !== undefined) {
        env.remoteHost = where.remote.host;
        env.remotePathTemplate = where.remote.template;
      }
      if (allowRemote) {
        // why: otherwise transformers.js first probes `/models/<model>/…` on the page's own origin (browser) or
        // its package folder (Node) before going to the remote host.
        env.allowLocalModels = false;
      } else {
        // why: transformers.js refuses a load with both local and remote models disabled, even when every
        // file is cached. "Local" is pointed at the model's own URL (cache keys line up) and any request
        // under it is answered 404 here, so nothing leaves the device and a cache miss is a clean error.
        const host = slash(where.remote?.host ?? env.remoteHost);
        const guarded = [`${host}${model}/`, where.folderUrl ?? remoteFolder(env, model)];
        env.allowLocalModels = true;
        env.localModelPath = host;
        const inner = env.fetch;
        env.fetch = (input: string | URL, init?: unknown) => {
          const url = String(input);
          if (guarded.some((prefix) => url.startsWith(prefix))) {
            return Promise.resolve(new Response(null, { status: 404, statusText: 'allowRemote is false: not downloaded' }));
          }
          return inner(input, init);
        };
      }
    }
  } catch (e) {
    restore();
    throw e;
  }
  return restore;
}

/** The model folder URL transformers.js would download from with the current env. */
function remoteFolder(env: Env, model: string): string {
  return `${slash(env.remoteHost)}${env.remotePathTemplate.replace(/^\/+/, '').replaceAll('{model}', model).replaceAll('{revision}', 'main')}`.replace(
    /\/*$/,
    '/',
  );
}

/** ` (wasmPaths …)` for error messages in a browser, '' in Node. */
function wasmHint(wasmPaths: MiniLMOptions['wasmPaths']): string {
  if (isNode() || wasmPaths === undefined) return '';
  return ` (wasmPaths ${typeof wasmPaths === 'string' ? wasmPaths : JSON.stringify(wasmPaths)})`;
}

function slash(url: string): string {
  return url.endsWith('/') ? url : `${url}/`;
}

function setWasmPaths(env: Env, wasmPaths: NonNullable<MiniLMOptions['wasmPaths']>, fail: (m: string, r: EmbedderLoadErrorReason) => EmbedderLoadError): void {
  const wasm = env.backends.onnx.wasm;
  if (wasm === undefined) throw fail('onnxruntime-web has no wasm backend settings (env.backends.onnx.wasm)', 'runtime');
  const abs = (u: string) => {
    try {
      return new URL(u, globalThis.location?.href).href;
    } catch {
      return u;
    }
  };
  if (typeof wasmPaths === 'string') {
    wasm.wasmPaths = abs(wasmPaths.endsWith('/') ? wasmPaths : `${wasmPaths}/`);
  } else if (wasmPaths && typeof wasmPaths.wasm === 'string') {
    // why: a fresh object — transformers.js swaps `mjs` for a blob: URL inside the object it is given.
    wasm.wasmPaths = wasmPaths.mjs === undefined ? { wasm: abs(wasmPaths.wasm) } : { wasm: abs(wasmPaths.wasm), mjs: abs(wasmPaths.mjs) };
  } else {
    throw fail('wasmPaths must be a folder URL or { wasm, mjs? }', 'config');
  }
}

/** Turn a transformers.js / ONNX Runtime failure into an {@link EmbedderLoadError}. */
function classify(
  e: unknown,
  where: ModelLocation,
  allowRemote: boolean,
  wasm: string,
  fail: (m: string, r: EmbedderLoadErrorReason, c?: unknown) => EmbedderLoadError,
): Error {
  if (e instanceof EmbedderLoadError || e instanceof ModelUnavailableError) return e;
  const name = e instanceof Error ? e.name : '';
  const text = message(e);
  if (name === 'ModelFileNotFoundError' || /Could not locate file|file was not found locally|Unable to load from local path/i.test(text)) {
    const hint = allowRemote || where.localFolder !== undefined ? '' : ' (allowRemote is false: only cached files can be used)';
    return fail(`a model file is missing in ${where.describe}${hint}: ${text}`, 'missing-file', e);
  }
  if (e instanceof SyntaxError) return fail(`a model file in ${where.describe} is not valid JSON: ${text}`, 'invalid-model', e);
  if (looksLikeRuntimeFailure(e)) return fail(`ONNX Runtime could not start${wasm}: ${text}`, 'runtime', e);
  return fail(`cannot load the model from ${where.describe}: ${text}`, 'invalid-model', e);
}

/** ONNX Runtime's own start-up failures (wasm not found, no backend, WebGPU device lost) vs. a bad model. */
function looksLikeRuntimeFailure(e: unknown): boolean {
  return /no available backend|backend not found|initWasm|failed to fetch dynamically imported module|WebAssembly|\.wasm|webgpu|GPUDevice|adapter/i.test(
    message(e),
  );
}

/** Errors transformers.js has thrown in this realm (browser / worker only). */
const seen = new WeakSet<object>();

/**
 * In a browser or worker, transformers.js 4.3.2 queues session creation and inference on
 * module-level promise chains (`webInitChain`, `webInferenceChain` in its backends/onnx.js) that
 * are never reset: after one failure, every later session creation (or inference) in the same
 * realm rejects with that same error object, whatever model or device it is for. Seeing an
 * error object a second time means that happened; say so instead of repeating a misleading
 * message. Returns `undefined` for a fresh error (and remembers it).
 */
function poisoned(e: unknown, what: string, fail: (m: string, r: EmbedderLoadErrorReason, c?: unknown) => Error): Error | undefined {
  if (isNode() || typeof e !== 'object' || e === null) return undefined;
  if (!seen.has(e)) {
    seen.add(e);
    return undefined;
  }
  return fail(
    `transformers.js cannot ${what} in this ${typeof window === 'undefined' ? 'worker' : 'page'} any more: an earlier failure (${message(e)}) left its ONNX queue rejected. Restart the worker (with device 'wasm' if WebGPU failed).`,
    'runtime',
    e,
  );
}

// ---------------------------------------------------------------------------------------------
// Progress.

interface ProgressMapper {
  callback: ((info: ProgressInfo) => void) | undefined;
  /** The session is being created / warmed up. */
  loading(): void;
  ready(): void;
}

function progressMapper(model: string, onProgress: OnLoadProgress | undefined): ProgressMapper {
  let loaded = 0;
  let total = 0;
  let phase: LoadProgress['phase'] = 'download';
  const emit = (p: LoadProgress['phase']) => {
    if (onProgress === undefined) return;
    try {
      onProgress({ stage: 'embedder', phase: p, loaded, total: Math.max(total, loaded), unit: 'bytes', model });
    } catch {
      // why: a throwing progress bar must not fail the load.
    }
  };
  return {
    callback:
      onProgress === undefined
        ? undefined
        : (info) => {
            if (info.status === 'progress_total') {
              loaded = info.loaded;
              total = info.total;
              if (phase === 'download') emit('download');
            } else if (info.status === 'done' && /\.onnx(_data(_\d+)?)?$/.test(info.file) && phase === 'download') {
              // why: transformers.js creates the ONNX session right after the graph file is read.
              phase = 'load';
              emit('load');
            }
          },
    loading() {
      if (phase === 'download') {
        phase = 'load';
        emit('load');
      }
    },
    ready() {
      phase = 'ready';
      total = Math.max(total, loaded);
      loaded = total;
      emit('ready');
    },
  };
}

// ---------------------------------------------------------------------------------------------

interface GpuLike {
  requestAdapter(): Promise<{ requestDevice?(): Promise<{ destroy?(): void }> } | null>;
}

/**
 * An adapter exists and gives a device. Asking for the device too (then releasing it) weeds out
 * adapters ONNX Runtime could not use: a failed WebGPU session cannot be retried on WASM in the
 * same realm (see {@link poisoned}), so the probe must be right the first time.
 */
async function hasWebGpuAdapter(): Promise<boolean> {
  const gpu = (globalThis.navigator as { gpu?: GpuLike } | undefined)?.gpu;
  if (gpu === undefined || typeof gpu.requestAdapter !== 'function') return false;
  try {
    const adapter = await gpu.requestAdapter();
    if (adapter == null || typeof adapter.requestDevice !== 'function') return false;
    const device = await adapter.requestDevice();
    device?.destroy?.();
    return device != null;
  } catch {
    return false;
  }
}

function isNode(): boolean {
  return typeof process !== 'undefined' && process.versions?.node != null && typeof (globalThis as { window?: unknown }).window === 'undefined';
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
