/**
 * The automatic, visible fallback between language-model runtimes: try each configured one in
 * order (built-in Prompt API → WebLLM on WebGPU → an OpenAI-compatible server → wllama on WASM)
 * and keep the first that loads; when none does, the engine runs on the rules reasoner. Every
 * attempt and its reason is returned for `status()`.
 */
import type { PromptApiGlobal } from './prompt-api.js';
import { ModelUnavailableError, type LanguageModel, type OnLoadProgress } from './types.js';

/**
 * Optional language models, tried in order until one loads; when none does the engine runs on
 * the rules reasoner. Loading happens in the background after `init` (the engine answers on
 * rules meanwhile); every attempt and its failure reason is visible in `status().llm.attempts`.
 * Order: built-in Prompt API → WebLLM (WebGPU) → OpenAI-compatible endpoint → wllama (WASM) →
 * rules. Once a model loads, memory operations go through it (`LlmReasoner`: versioned prompts,
 * JSON schemas, validation, bounded repairs and budget, rules for any operation that fails).
 */
export interface LlmOptions {
  /**
   * Chrome's built-in Prompt API, when the browser offers it. `LanguageModel` exists on Window
   * only: `createAtomem` lends the page's to the worker (not where `document.permissionsPolicy`
   * blocks `language-model`); with `shared: true` the newest page that lends it answers.
   */
  promptApi?: boolean;
  /** WebLLM on WebGPU: an MLC model id, and optionally an app config pointing at self-hosted weights. */
  webllm?: { model: string; appConfig?: Record<string, unknown> };
  /** An OpenAI-compatible chat-completions server (e.g. a local llama.cpp server). */
  openai?: { baseUrl: string; model: string; apiKey?: string };
  /** Model calls allowed per window of events (default 60 per 20: reflect + describe per event and room for planning); beyond it operations use rules. */
  budget?: { maxCalls: number; perEvents: number };
  /** wllama (llama.cpp in WASM) with a GGUF model URL; `wasmUrl` of `wllama.wasm` (default: shipped asset). */
  wllama?: { model: string; wasmUrl?: string /** Tokens of context (prompt + output). Default 4096. */; contextSize?: number };
  /**
   * While a model runs the memory, tracked events are stored at once but turned into memory in
   * one batch this long after the last interaction (ms; default 2000), or as soon as
   * `config.batchEvents` are waiting; sweeps and resynthesis are planned at the same time.
   */
  idleMs?: number;
}

/** One runtime tried. */
interface ModelAttempt {
  runtime: 'prompt-api' | 'webllm' | 'openai' | 'wllama';
  ok: boolean;
  /** Why it was not used (error name and message). */
  reason?: string;
}

/** The model chosen (or null: rules) and every attempt, in order. */
export interface ModelChoice {
  model: LanguageModel | null;
  attempts: ModelAttempt[];
}

const reasonOf = (e: unknown): string => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

function join(base: string, child: string): string {
  return `${base.replace(/\/+$/, '')}/${child}`;
}

/** Where the runtimes come from, beyond this context's globals. */
export interface ModelSources {
  /** Chrome's Prompt API lent by the page (a worker has no `LanguageModel` of its own). */
  promptApi?: PromptApiGlobal;
}

/**
 * Load the first runtime of `llm` that works on this device. Never throws: failures become
 * attempts with reasons. Runtimes are imported lazily (only the ones configured are loaded).
 */
export async function loadLanguageModel(
  llm: LlmOptions | undefined,
  assetsBaseUrl: string | undefined,
  onProgress: OnLoadProgress,
  sources: ModelSources = {},
): Promise<ModelChoice> {
  const attempts: ModelAttempt[] = [];
  if (!llm) return { model: null, attempts };
  const tries: [ModelAttempt['runtime'], () => Promise<LanguageModel>][] = [];
  if (llm.promptApi) tries.push(['prompt-api', async () => (await import('./prompt-api.js')).createPromptApiModel({ onProgress, api: sources.promptApi })]);
  if (llm.webllm) {
    const w = llm.webllm;
    tries.push(['webllm', async () => (await import('./webllm.js')).createWebLLMModel({ model: w.model, appConfig: w.appConfig as never, onProgress })]);
  }
  if (llm.openai) {
    const o = llm.openai;
    tries.push(['openai', async () => (await import('./openai.js')).createOpenAICompatibleModel({ baseUrl: o.baseUrl, model: o.model, apiKey: o.apiKey })]);
  }
  if (llm.wllama) {
    const w = llm.wllama;
    tries.push([
      'wllama',
      async () => {
        // why: wllama runs llama.cpp in a worker of its own; a SharedWorker (Chromium) cannot start one
        if (typeof Worker !== 'function')
          throw new ModelUnavailableError(
            'wllama needs to start a worker, and this context cannot (no Worker in a SharedWorker): use a dedicated worker (shared: false)',
            'wllama',
          );
        const wasmUrl = w.wasmUrl ?? (assetsBaseUrl ? join(assetsBaseUrl, 'wllama/wllama.wasm') : undefined);
        if (!wasmUrl) throw new TypeError('llm.wllama.wasmUrl (or assetsBaseUrl) is required: the URL of wllama.wasm on your own host');
        return (await import('./wllama.js')).createWllamaModel({ model: w.model, wasmUrl, contextSize: w.contextSize, onProgress });
      },
    ]);
  }
  for (const [runtime, load] of tries) {
    try {
      const model = await load();
      attempts.push({ runtime, ok: true });
      return { model, attempts };
    } catch (e) {
      attempts.push({ runtime, ok: false, reason: reasonOf(e) });
    }
  }
  return { model: null, attempts };
}
