/**
 * llama.cpp in WebAssembly (`@wllama/wllama` 3.x) as a {@link LanguageModel}: runs a GGUF on the
 * CPU of any browser with WASM SIMD, no GPU needed. Structured output is grammar-constrained by
 * llama.cpp itself (the schema goes in as OpenAI `response_format: json_schema`; llama.cpp turns
 * it into a GBNF grammar and samples only tokens the grammar allows).
 *
 * Everything is self-hosted: the caller passes the URL of the `wllama.wasm` it serves and the
 * model's URL or bytes. Nothing is fetched from a CDN or a model hub (wllama's Safari "compat"
 * build, which defaults to a CDN, is switched off unless the caller hosts it too).
 */
import { Wllama, type ChatCompletionParams, type WllamaLogger } from '@wllama/wllama';
import type { GenerateRequest, GenerateResult, LanguageModel, OnLoadProgress } from './types.js';
import { abortError, raceAbort } from './abort.js';

/** Options of {@link createWllamaModel}. */
export interface WllamaModelOptions {
  /**
   * The GGUF: a URL (same-origin or CORS; must end in `.gguf`; for a model split with
   * `llama-gguf-split`, the URL of the first `-00001-of-0000N.gguf` shard, the rest are found
   * from it), or the file's bytes as one Blob or the shards as Blobs (in order).
   * A URL model is downloaded once into wllama's Origin Private File System cache and taken
   * from there afterwards (`runtime.cacheManager` lists and clears it).
   */
  model: string | URL | Blob | Blob[];
  /**
   * URL of `wllama.wasm`, served by the shop itself (never a CDN). The atomem package ships the
   * one matching the wllama its worker bundles as `dist/assets/wllama/wllama.wasm` (the default
   * of `llm.wllama.wasmUrl`); code importing this adapter from source with its own
   * `@wllama/wllama` serves that package's `esm/wasm/wllama.wasm` (with Vite, `import wasmUrl
   * from '@wllama/wllama/esm/wasm/wllama.wasm?url'`). It must come from the same release as the
   * wllama JS that loads it (wllama checks the version).
   */
  wasmUrl: string | URL;
  /** Name used in the model id (`wllama:<name>`). Default: the GGUF's file name without `.gguf`. */
  name?: string;
  /**
   * CPU threads. More than 1 needs a cross-origin-isolated page (COOP/COEP headers); without it
   * wllama runs single-threaded whatever is asked. Default: wllama's choice (half the cores).
   */
  threads?: number;
  /** Context length in tokens (prompt + output). Default 4096: the reasoner's prompts run to ~1.5k tokens (1024 cut every one of them off). */
  contextSize?: number;
  /** Sampling seed, for reproducible output when `temperature > 0`. */
  seed?: number;
  /** Download / load progress, as `stage: 'llm'`, unit bytes. */
  onProgress?: OnLoadProgress;
  /** Abort the download (the load then rejects with an `AbortError`). */
  signal?: AbortSignal;
  /**
   * Self-hosted copy of `@wllama/wllama-compat` (worker JS + wasm) for browsers without JSPI or
   * WASM memory64 (Safari). Default: none — on such browsers loading fails instead of reaching
   * for a CDN.
   */
  compat?: { worker: string; wasm: string };
  /** Logger for wllama's own messages. Default: warnings and errors only, native logs off. */
  logger?: WllamaLogger;
}

/** A loaded wllama model; `runtime` exposes the underlying instance for diagnostics. */
export interface WllamaModel extends LanguageModel {
  readonly backend: 'wasm';
  /** The wllama instance (threads in use, context info, ...). */
  readonly runtime: Wllama;
}

const quietLogger: WllamaLogger = {
  debug: () => {},
  log: () => {},
  warn: (...args: unknown[]) => console.warn('[wllama]', ...args),
  error: (...args: unknown[]) => console.error('[wllama]', ...args),
};

function isAbort(e: unknown): boolean {
  return e instanceof Error && e.name === 'AbortError';
}

/**
 * Fail fast on a wrong `wasmUrl`: wllama's worker hangs forever on a 404 page or an HTML
 * fallback instead of rejecting. Reads only the first bytes (the `\0asm` magic), then cancels.
 */
async function checkWasm(url: string, signal?: AbortSignal): Promise<void> {
  let response: Response;
  try {
    response = await fetch(url, { signal });
  } catch (e) {
    if (signal?.aborted) throw abortError(signal);
    throw new Error(`wllama: cannot fetch the wasm at ${url}: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  }
  if (!response.ok) throw new Error(`wllama: the wasm at ${url} answered HTTP ${response.status}`);
  const reader = response.body?.getReader();
  const head: number[] = [];
  while (reader && head.length < 4) {
    const { done, value } = await reader.read();
    if (done) break;
    head.push(...value.subarray(0, 4 - head.length));
  }
  await reader?.cancel().catch(() => {});
  if (head.join() !== '0,97,115,109') {
    throw new Error(
      `wllama: ${url} is not a WebAssembly file (content-type ${response.headers.get('content-type') || 'none'}); ` +
        'serve @wllama/wllama/esm/wasm/wllama.wasm there',
    );
  }
}

function modelName(model: WllamaModelOptions['model']): string {
  if (typeof model === 'string' || model instanceof URL) {
    const path = new URL(String(model), 'http://x/').pathname;
    const file = decodeURIComponent(path.split('/').pop() ?? '');
    return file.replace(/(-\d{5}-of-\d{5})?\.gguf$/i, '') || 'model';
  }
  const first = Array.isArray(model) ? model[0] : model;
  const file = first instanceof File ? first.name : '';
  return file.replace(/(-\d{5}-of-\d{5})?\.gguf$/i, '') || 'model';
}

/**
 * Load a GGUF with wllama and wrap it as a {@link LanguageModel} (backend `wasm`).
 *
 * Progress: `download` events while a URL model streams in (skipped when cached: one event
 * with `loaded = total`), then `load` while llama.cpp reads the weights, then `ready`.
 * Rejects with an `Error` naming the URL when `wasmUrl` does not serve a wasm file (checked
 * first, from its first bytes), with wllama's error when the model cannot be loaded, and with
 * an `AbortError` when `signal` aborts the download.
 */
export async function createWllamaModel(options: WllamaModelOptions): Promise<WllamaModel> {
  const name = options.name ?? modelName(options.model);
  const report = (phase: 'download' | 'load' | 'ready', loaded: number, total: number): void =>
    options.onProgress?.({ stage: 'llm', phase, loaded, total, unit: 'bytes', model: name });
  const logger = options.logger ?? quietLogger;
  const wllama = new Wllama({ default: String(options.wasmUrl) }, { logger, suppressNativeLog: options.logger === undefined, allowOffline: true });
  // why: the default compat resources live on jsDelivr; only a self-hosted copy may be used.
  wllama.setCompat(options.compat ?? null);
  await checkWasm(wllama.getWorkerResources().wasmPath, options.signal);

  let blobs: Blob[];
  if (typeof options.model === 'string' || options.model instanceof URL) {
    const url = new URL(String(options.model), globalThis.location?.href).href;
    let reported = false;
    const download = {
      signal: options.signal,
      progressCallback: ({ loaded, total }: { loaded: number; total: number }) => {
        reported = true;
        report('download', loaded, total);
      },
    };
    try {
      const model = await wllama.modelManager.getModelOrDownload({ url }, download);
      blobs = await model.open();
    } catch (e) {
      if (options.signal?.aborted) throw abortError(options.signal);
      throw e;
    }
    // A copy already in the cache may be taken without a single progress event.
    if (!reported) {
      const size = blobs.reduce((sum, b) => sum + b.size, 0);
      report('download', size, size);
    }
  } else {
    blobs = Array.isArray(options.model) ? [...options.model] : [options.model];
  }
  const size = blobs.reduce((sum, b) => sum + b.size, 0);
  if (options.signal?.aborted) throw abortError(options.signal);

  report('load', 0, size);
  try {
    await wllama.loadModel(blobs, {
      n_ctx: options.contextSize ?? 4096,
      n_threads: options.threads,
      seed: options.seed,
      // backend 'wasm': CPU only; also skips WebGPU device setup.
      n_gpu_layers: 0,
      // one request at a time per adapter; a single slot keeps the KV cache small.
      n_parallel: 1,
    });
  } catch (e) {
    await wllama.exit().catch(() => {}); // free the worker of a half-started runtime
    throw e;
  }
  report('ready', size, size);

  let disposed = false;
  return {
    id: `wllama:${name}`,
    backend: 'wasm',
    runtime: wllama,
    async generate(request: GenerateRequest): Promise<GenerateResult> {
      if (disposed) throw new Error(`wllama:${name} is disposed`);
      const { signal } = request;
      if (signal?.aborted) throw abortError(signal);
      const params: ChatCompletionParams & { stream?: false } = {
        messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
        max_tokens: request.maxTokens ?? 256,
        // llama.cpp samples greedily at temperature <= 0.
        temperature: request.temperature ?? 0,
        abortSignal: signal,
      };
      if (request.schema) {
        params.response_format = {
          type: 'json_schema',
          json_schema: { name: 'output', schema: request.schema, strict: true },
        };
      }
      const started = performance.now();
      let response;
      try {
        response = await raceAbort(wllama.createChatCompletion(params), signal);
      } catch (e) {
        if (signal?.aborted || isAbort(e)) throw abortError(signal);
        throw e;
      }
      const ms = performance.now() - started;
      const text = response.choices[0]?.message.content ?? '';
      const promptChars = request.messages.reduce((n, m) => n + m.content.length, 0);
      return {
        text,
        promptTokens: response.usage?.prompt_tokens ?? Math.ceil(promptChars / 4),
        outputTokens: response.usage?.completion_tokens ?? Math.ceil(text.length / 4),
        ms,
        constrained: request.schema !== undefined,
      };
    },
    async dispose(): Promise<void> {
      if (disposed) return;
      disposed = true;
      await wllama.exit();
    },
  };
}
