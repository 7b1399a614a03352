/**
 * MLC WebLLM (`@mlc-ai/web-llm`) as a {@link LanguageModel} (backend `webgpu`): MLC-compiled
 * models on the GPU through WebGPU. atomem already runs in a Web Worker, so the engine runs
 * right here (`CreateMLCEngine`), not in yet another worker. Structured output goes as
 * `response_format: { type: 'json_object', schema }`, which WebLLM enforces with XGrammar.
 *
 * `@mlc-ai/web-llm` (several MB) is imported only when a model is created, and only after a
 * WebGPU adapter was found, so pages that never use it never load it.
 */
import type { AppConfig, ChatOptions, MLCEngine } from '@mlc-ai/web-llm';
import { ModelUnavailableError } from './types.js';
import type { GenerateRequest, GenerateResult, LanguageModel, OnLoadProgress } from './types.js';
import { abortError } from './abort.js';

/** Options of {@link createWebLLMModel}. */
export interface WebLLMModelOptions {
  /** Model id, a `model_id` of `appConfig.model_list`, e.g. `Qwen2.5-0.5B-Instruct-q4f16_1-MLC`. */
  model: string;
  /**
   * Where weights and model libraries come from. A shop self-hosts by listing its own
   * `{ model: 'https://shop.example/models/<id>/', model_id, model_lib: 'https://…/<id>.wasm' }`.
   * Default: WebLLM's `prebuiltAppConfig`, which downloads from huggingface.co and
   * raw.githubusercontent.com.
   */
  appConfig?: AppConfig;
  /** Overrides of the model's `mlc-chat-config.json` (e.g. `context_window_size`). */
  chatOptions?: ChatOptions;
  /**
   * Load progress (`stage: 'llm'`): `download` while fetching weights, `load` while reading
   * them from cache onto the GPU, then `ready`. WebLLM reports a fraction, so `total` is 1.
   */
  onProgress?: OnLoadProgress;
}

interface GpuLike {
  requestAdapter(options?: { powerPreference?: 'high-performance' | 'low-power' }): Promise<unknown>;
}

const RUNTIME = 'webllm';
/** WebLLM errors that mean "this device cannot run the model", not "loading went wrong". */
const DEVICE_ERRORS = new Set(['WebGPUNotAvailableError', 'ShaderF16SupportError', 'FeatureSupportError']);

/** Throws {@link ModelUnavailableError} unless this context has a WebGPU adapter. */
async function requireWebGpu(): Promise<void> {
  const gpu = (globalThis as { navigator?: { gpu?: GpuLike } }).navigator?.gpu;
  if (!gpu || typeof gpu.requestAdapter !== 'function') {
    throw new ModelUnavailableError('WebGPU is absent (no navigator.gpu in this browser or context)', RUNTIME);
  }
  let adapter: unknown;
  try {
    adapter = await gpu.requestAdapter({ powerPreference: 'high-performance' });
  } catch (e) {
    throw new ModelUnavailableError(`WebGPU requestAdapter() failed: ${e instanceof Error ? e.message : String(e)}`, RUNTIME);
  }
  if (!adapter) throw new ModelUnavailableError('WebGPU has no adapter (requestAdapter() returned null: GPU disabled or unsupported)', RUNTIME);
}

/**
 * Load a WebLLM model on the GPU. Throws {@link ModelUnavailableError} (runtime `webllm`) when
 * there is no WebGPU adapter — before loading the library or fetching anything — or when WebLLM
 * finds the GPU lacks what the model needs (e.g. `shader-f16`); an `Error` naming the model and
 * its URL (WebLLM's error as `cause`) when loading fails otherwise.
 */
export async function createWebLLMModel(options: WebLLMModelOptions): Promise<LanguageModel> {
  await requireWebGpu();
  const webllm = await import('@mlc-ai/web-llm');
  const appConfig = options.appConfig ?? webllm.prebuiltAppConfig;
  const report = (phase: 'download' | 'load' | 'ready', loaded: number, total: number): void =>
    options.onProgress?.({ stage: 'llm', phase, loaded, total, unit: 'bytes', model: options.model });

  let engine: MLCEngine;
  try {
    engine = await webllm.CreateMLCEngine(
      options.model,
      {
        appConfig,
        initProgressCallback: (r) => {
          if (r.text.startsWith('Finish')) return; // `ready` is reported below, once.
          report(r.text.startsWith('Fetching') ? 'download' : 'load', r.progress, 1);
        },
      },
      options.chatOptions,
    );
  } catch (e) {
    const why = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    // The device cannot run it (no usable WebGPU, or a GPU feature the model needs): fall back.
    if (e instanceof Error && DEVICE_ERRORS.has(e.name)) throw new ModelUnavailableError(why, RUNTIME);
    const from = appConfig.model_list.find((r) => r.model_id === options.model)?.model;
    throw new Error(`webllm: loading ${options.model}${from ? ` from ${from}` : ''} failed: ${why}`, { cause: e });
  }
  report('ready', 1, 1);

  let disposed = false;
  let queue: Promise<unknown> = Promise.resolve();
  return {
    id: `${RUNTIME}:${options.model}`,
    backend: 'webgpu',
    generate(request: GenerateRequest): Promise<GenerateResult> {
      // One engine decodes one request at a time: calls are queued, an abort stops only its own.
      const run = async (): Promise<GenerateResult> => {
        if (disposed) throw new Error(`${RUNTIME}:${options.model} is disposed`);
        const { signal } = request;
        if (signal?.aborted) throw abortError(signal);
        const onAbort = (): void => void engine.interruptGenerate();
        signal?.addEventListener('abort', onAbort, { once: true });
        const started = performance.now();
        try {
          const reply = await engine.chat.completions.create({
            messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
            max_tokens: request.maxTokens ?? 256,
            temperature: request.temperature ?? 0,
            stream: false,
            ...(request.schema ? { response_format: { type: 'json_object' as const, schema: JSON.stringify(request.schema) } } : {}),
          });
          if (signal?.aborted) throw abortError(signal);
          const text = reply.choices[0]?.message.content ?? '';
          const chars = request.messages.reduce((n, m) => n + m.content.length, 0);
          return {
            text,
            promptTokens: reply.usage?.prompt_tokens ?? Math.ceil(chars / 4),
            outputTokens: reply.usage?.completion_tokens ?? Math.ceil(text.length / 4),
            ms: performance.now() - started,
            constrained: request.schema !== undefined,
          };
        } catch (e) {
          if (signal?.aborted) throw abortError(signal);
          throw e;
        } finally {
          signal?.removeEventListener('abort', onAbort);
        }
      };
      const result = queue.then(run, run);
      queue = result.catch(() => undefined);
      const { signal } = request;
      if (!signal) return result;
      // An abort while still queued rejects at once (the queued run then exits immediately).
      return new Promise<GenerateResult>((resolve, reject) => {
        const onAbort = (): void => reject(abortError(signal));
        signal.addEventListener('abort', onAbort, { once: true });
        result.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
      });
    },
    async dispose(): Promise<void> {
      if (disposed) return;
      disposed = true;
      await engine.interruptGenerate();
      await engine.unload();
    },
  };
}
