/**
 * Chrome's built-in Prompt API (the `LanguageModel` global, Gemini Nano on the device) as a
 * {@link LanguageModel} (backend `built-in`). Feature-detected: where the global is missing
 * (other browsers, older Chrome, and — today — workers, where Chrome does not expose it) or
 * answers `unavailable`, creation throws {@link ModelUnavailableError} so the caller falls back.
 *
 * Structured output uses `prompt(input, { responseConstraint: schema })`, which Chrome enforces
 * while decoding. Each `generate` runs in a fresh session (the system messages as its
 * `initialPrompts`), so calls never see each other's turns; one long-lived session created at
 * load keeps the model warm and carries the download progress.
 */
import { ModelUnavailableError } from './types.js';
import type { GenerateRequest, GenerateResult, LanguageModel, OnLoadProgress } from './types.js';
import { abortError } from './abort.js';

/** The Prompt API's answer to `availability()`. */
export type PromptApiAvailability = 'unavailable' | 'downloadable' | 'downloading' | 'available';

/** One message as the Prompt API takes it. */
export interface PromptApiMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** The session surface this adapter uses (current names, plus the pre-2026 `input*` aliases). */
export interface PromptApiSession {
  prompt(input: string | PromptApiMessage[], options?: { responseConstraint?: unknown; signal?: AbortSignal }): Promise<string>;
  measureContextUsage?(input: string | PromptApiMessage[], options?: { responseConstraint?: unknown; signal?: AbortSignal }): Promise<number>;
  measureInputUsage?(input: string | PromptApiMessage[], options?: { responseConstraint?: unknown; signal?: AbortSignal }): Promise<number>;
  readonly contextUsage?: number;
  readonly inputUsage?: number;
  destroy(): void;
}

/** Options given to `availability()` and `create()`. */
export interface PromptApiCreateOptions {
  expectedInputs?: { type: 'text'; languages?: string[] }[];
  expectedOutputs?: { type: 'text'; languages?: string[] }[];
  initialPrompts?: PromptApiMessage[];
  temperature?: number;
  topK?: number;
  signal?: AbortSignal;
  monitor?: (monitor: EventTarget) => void;
}

/** The static side of the `LanguageModel` global. */
export interface PromptApiGlobal {
  availability(options?: PromptApiCreateOptions): Promise<PromptApiAvailability>;
  create(options?: PromptApiCreateOptions): Promise<PromptApiSession>;
  /** Sampling limits; absent where pages may not set sampling (Chrome's web default since 148). */
  params?(): Promise<{ defaultTopK: number; maxTopK: number; defaultTemperature: number; maxTemperature: number } | null>;
}

/** Options of {@link createPromptApiModel}. */
export interface PromptApiModelOptions {
  /** BCP 47 languages of input and output. Default `['en']`. */
  languages?: string[];
  /** Model download progress (`stage: 'llm'`; the API reports a fraction, so `total` is 1). */
  onProgress?: OnLoadProgress;
  /** Abort the download / session creation. */
  signal?: AbortSignal;
  /** The API object. Default: the `LanguageModel` global of this context. */
  api?: PromptApiGlobal;
}

const isAbort = (e: unknown): boolean => e instanceof Error && e.name === 'AbortError';
const RUNTIME = 'prompt-api';
const MODEL = 'chrome-built-in';

function findApi(explicit?: PromptApiGlobal): PromptApiGlobal | undefined {
  const api = explicit ?? (globalThis as { LanguageModel?: unknown }).LanguageModel;
  if (!api || (typeof api !== 'object' && typeof api !== 'function')) return undefined;
  const a = api as Partial<PromptApiGlobal>;
  return typeof a.availability === 'function' && typeof a.create === 'function' ? (api as PromptApiGlobal) : undefined;
}

/** `contextUsage` (current name) or `inputUsage` (older Chrome), undefined when neither. */
function usageOf(session: PromptApiSession): number | undefined {
  const u = session.contextUsage ?? session.inputUsage;
  return typeof u === 'number' && Number.isFinite(u) ? u : undefined;
}

/**
 * Open Chrome's built-in model. Resolves once the model is downloaded (if it had to be) and a
 * session exists. Throws {@link ModelUnavailableError} (runtime `prompt-api`) when the API is
 * absent, says `unavailable`, or refuses to create a session (e.g. a download that needs a user
 * gesture); an `AbortError` when `signal` aborts.
 */
export async function createPromptApiModel(options: PromptApiModelOptions = {}): Promise<LanguageModel> {
  const api = findApi(options.api);
  if (!api) throw new ModelUnavailableError('Chrome Prompt API is absent: no LanguageModel global in this browser or context', RUNTIME);
  const languages = options.languages ?? ['en'];
  const expected: PromptApiCreateOptions = {
    expectedInputs: [{ type: 'text', languages }],
    expectedOutputs: [{ type: 'text', languages }],
  };
  const report = (phase: 'download' | 'load' | 'ready', loaded: number, total: number): void =>
    options.onProgress?.({ stage: 'llm', phase, loaded, total, unit: 'bytes', model: MODEL });

  let availability: PromptApiAvailability;
  try {
    availability = await api.availability(expected);
  } catch (e) {
    throw new ModelUnavailableError(`Chrome Prompt API availability() failed: ${e instanceof Error ? e.message : String(e)}`, RUNTIME);
  }
  if (availability === 'unavailable') {
    throw new ModelUnavailableError(`Chrome Prompt API says 'unavailable' for languages ${languages.join(', ')} on this device`, RUNTIME);
  }

  if (availability === 'available') report('load', 0, 1);
  let warm: PromptApiSession;
  try {
    warm = await api.create({
      ...expected,
      signal: options.signal,
      monitor(m) {
        // Chrome fires 0 and 1 even for a model already on disk: only a real download is reported.
        if (availability === 'available') return;
        m.addEventListener('downloadprogress', (e) => {
          const p = e as ProgressEvent;
          report('download', p.loaded, p.total || 1);
        });
      },
    });
  } catch (e) {
    if (options.signal?.aborted || isAbort(e)) throw abortError(options.signal);
    throw new ModelUnavailableError(
      `Chrome Prompt API could not create a session (availability '${availability}'): ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`,
      RUNTIME,
    );
  }
  report('ready', 1, 1);

  // Sampling is only settable where the API still exposes params(); temperature and topK go together.
  let limits: Awaited<ReturnType<NonNullable<PromptApiGlobal['params']>>> = null;
  try {
    limits = typeof api.params === 'function' ? await api.params() : null;
  } catch {
    limits = null;
  }

  let disposed = false;
  return {
    id: `${RUNTIME}:${MODEL}`,
    backend: 'built-in',
    async generate(request: GenerateRequest): Promise<GenerateResult> {
      if (disposed) throw new Error(`${RUNTIME}:${MODEL} is disposed`);
      const { signal } = request;
      if (signal?.aborted) throw abortError(signal);
      const system = request.messages.filter((m) => m.role === 'system').map((m) => m.content);
      const turns: PromptApiMessage[] = request.messages.filter((m) => m.role !== 'system').map((m) => ({ role: m.role, content: m.content }));
      if (turns.length === 0) throw new Error('prompt-api: a request needs at least one user message');

      const sampling: Pick<PromptApiCreateOptions, 'temperature' | 'topK'> = {};
      if (limits) {
        const t = Math.min(Math.max(request.temperature ?? 0, 0), limits.maxTemperature);
        sampling.temperature = t;
        sampling.topK = t === 0 ? 1 : limits.defaultTopK;
      }
      const promptOptions = { signal, ...(request.schema ? { responseConstraint: request.schema } : {}) };
      const started = performance.now();
      let session: PromptApiSession | undefined;
      try {
        session = await api.create({
          ...expected,
          ...sampling,
          signal,
          initialPrompts: system.length ? [{ role: 'system', content: system.join('\n\n') }] : [],
        });
        const base = usageOf(session);
        const measure = session.measureContextUsage ?? session.measureInputUsage;
        const input = typeof measure === 'function' ? await measure.call(session, turns, promptOptions) : undefined;
        const text = await session.prompt(turns, promptOptions);
        const after = usageOf(session);
        const chars = request.messages.reduce((n, m) => n + m.content.length, 0);
        const promptTokens = base !== undefined && input !== undefined ? base + input : Math.ceil(chars / 4);
        const outputTokens =
          after !== undefined && base !== undefined && input !== undefined && after - base - input > 0 ? after - base - input : Math.ceil(text.length / 4);
        return { text, promptTokens, outputTokens, ms: performance.now() - started, constrained: request.schema !== undefined };
      } catch (e) {
        if (signal?.aborted || isAbort(e)) throw abortError(signal);
        throw e;
      } finally {
        session?.destroy();
      }
    },
    async dispose(): Promise<void> {
      if (disposed) return;
      disposed = true;
      warm.destroy();
    },
  };
}
