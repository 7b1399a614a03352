/**
 * The automatic, visible fallback between language-model runtimes: try each configured one in
 * order (built-in Prompt API → WebLLM on WebGPU → an OpenAI-compatible server → wllama on WASM)
 * and keep the first that loads; when none does, the engine runs on the rules reasoner. Every
 * attempt and its reason is returned for `status()`.
 */
import type { LlmOptions } from '../worker/protocol.js';
import type { PromptApiGlobal } from './prompt-api.js';
import { ModelUnavailableError, type LanguageModel, type OnLoadProgress } from './types.js';

/** One runtime tried. */
export interface ModelAttempt {
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
