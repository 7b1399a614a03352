/**
 * The model seam: every language-model runtime (WebLLM, Chrome's Prompt API, an
 * OpenAI-compatible HTTP server, wllama) is one {@link LanguageModel}. Reasoners call
 * `generate`; nothing above this file knows which runtime answered. Types only.
 */

/** A JSON schema (the subset the adapters pass on or turn into a grammar). */
export type JsonSchema = Record<string, unknown>;

/** One chat message. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** One generation request. */
export interface GenerateRequest {
  messages: ChatMessage[];
  /**
   * JSON schema the output must satisfy. Runtimes that can constrain decoding do so
   * (WebLLM `response_format`, llama.cpp grammar, OpenAI `response_format: json_schema`,
   * Prompt API `responseConstraint`); the caller validates the text anyway.
   */
  schema?: JsonSchema;
  /** Upper bound on generated tokens. Default 256. */
  maxTokens?: number;
  /** Sampling temperature. Default 0 (greedy, reproducible where the runtime allows). */
  temperature?: number;
  /** Abort (timeout or dispose): the promise rejects with an `AbortError`. */
  signal?: AbortSignal;
}

/** What one call produced and cost. */
export interface GenerateResult {
  text: string;
  /** Prompt tokens as the runtime counted them (estimated as chars / 4 when it does not say). */
  promptTokens: number;
  outputTokens: number;
  /** Wall time of the call. */
  ms: number;
  /** True when decoding was constrained to `schema` by the runtime itself. */
  constrained: boolean;
}

/** Where a model runs. */
export type ModelBackend = 'webgpu' | 'wasm' | 'built-in' | 'remote';

/** A loaded model. */
export interface LanguageModel {
  /** Stable id, e.g. `wllama:stories260K`, `webllm:Qwen2.5-0.5B-Instruct-q4f16_1-MLC`. */
  readonly id: string;
  readonly backend: ModelBackend;
  generate(request: GenerateRequest): Promise<GenerateResult>;
  /** Free the runtime (GPU buffers, wasm heap, worker). Idempotent. */
  dispose(): Promise<void>;
}

/**
 * Progress of loading anything big (model weights, embedder assets, the catalog's vectors).
 * One shape for all of them, so a page shows one progress bar.
 */
export interface LoadProgress {
  /** What is loading: `embedder`, `llm` or `catalog`. */
  stage: 'embedder' | 'llm' | 'catalog';
  /** `download` (bytes over the network or from cache), `load` (compile / init), `embed` (items), `ready`. */
  phase: 'download' | 'load' | 'embed' | 'ready';
  /** Bytes or items done so far. */
  loaded: number;
  /** Bytes or items in all (0 when unknown). */
  total: number;
  unit: 'bytes' | 'items';
  /** Model or asset name, e.g. `Xenova/all-MiniLM-L6-v2`. */
  model?: string;
}

/** Progress callback. */
export type OnLoadProgress = (progress: LoadProgress) => void;

/** Thrown when a runtime cannot run on this device (no WebGPU, no Prompt API, ...): the caller falls back. */
export class ModelUnavailableError extends Error {
  override name = 'ModelUnavailableError';
  constructor(
    message: string,
    /** Which runtime, e.g. `webllm`. */
    readonly runtime: string,
  ) {
    super(message);
  }
}
