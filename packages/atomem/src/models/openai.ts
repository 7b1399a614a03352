/**
 * Any OpenAI-compatible chat-completions server as a {@link LanguageModel} (backend `remote`):
 * OpenAI itself, or a shop's own llama.cpp `llama-server`, vLLM, Ollama, LM Studio, ...
 * Structured output goes as `response_format: { type: 'json_schema', json_schema: { name,
 * schema, strict: true } }`, which these servers enforce while decoding.
 *
 * Leaving the device is the point of this adapter, so it is never picked implicitly: the shop
 * configures the URL (and owns what the server sees).
 */
import type { ChatMessage, GenerateRequest, GenerateResult, JsonSchema, LanguageModel } from './types.js';
import { abortError } from './abort.js';

/** Options of {@link createOpenAICompatibleModel}. */
export interface OpenAICompatibleOptions {
  /** API root up to and including the version, e.g. `https://api.openai.com/v1` or `http://localhost:8080/v1`. */
  baseUrl: string;
  /** Model name sent as `model`, e.g. `gpt-4o-mini`, `qwen2.5-0.5b-instruct`. */
  model: string;
  /** Sent as `Authorization: Bearer <apiKey>` when given. */
  apiKey?: string;
  /** `fetch` to use (a proxy, a test server's, ...). Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Per-request time limit, headers and body included. Default 60 000 ms; 0 disables it. */
  timeoutMs?: number;
  /** Extra headers (e.g. `OpenAI-Organization`). */
  headers?: Record<string, string>;
  /** `json_schema.name` sent with a schema (`[a-zA-Z0-9_-]`, at most 64 chars). Default `output`. */
  schemaName?: string;
}

/** Why a remote call failed. */
export type OpenAICompatibleErrorKind = 'http' | 'timeout' | 'network' | 'malformed';

/**
 * A remote call failed: `kind` says how, `status` and `body` (first 500 characters of the
 * response) are set for HTTP errors and malformed answers. Caller aborts are not wrapped: they
 * reject with an `AbortError` as the {@link LanguageModel} contract says.
 */
export class OpenAICompatibleError extends Error {
  override name = 'OpenAICompatibleError';
  constructor(
    message: string,
    readonly kind: OpenAICompatibleErrorKind,
    /** HTTP status, when the server answered. */
    readonly status?: number,
    /** Start of the response body, when there was one. */
    readonly body?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const EXCERPT = 500;
const excerpt = (text: string): string => (text.length > EXCERPT ? `${text.slice(0, EXCERPT)}…` : text);

interface ChatCompletionBody {
  model: string;
  messages: ChatMessage[];
  max_tokens: number;
  temperature: number;
  stream: false;
  response_format?: { type: 'json_schema'; json_schema: { name: string; schema: JsonSchema; strict: true } };
}

/** The parts of a chat-completions answer this adapter reads. */
interface ChatCompletionAnswer {
  choices?: { message?: { content?: unknown; refusal?: unknown } }[];
  usage?: { prompt_tokens?: unknown; completion_tokens?: unknown };
}

/**
 * Wrap an OpenAI-compatible server as a {@link LanguageModel}. Nothing is requested until the
 * first `generate`. Errors: {@link OpenAICompatibleError} (HTTP status, timeout, network,
 * malformed answer), `AbortError` when the caller's signal aborts.
 */
export function createOpenAICompatibleModel(options: OpenAICompatibleOptions): LanguageModel {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  const url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  const timeoutMs = options.timeoutMs ?? 60_000;
  let disposed = false;
  const inFlight = new Set<AbortController>();

  async function generate(request: GenerateRequest): Promise<GenerateResult> {
    if (disposed) throw new Error(`openai:${options.model} is disposed`);
    const { signal } = request;
    if (signal?.aborted) throw abortError(signal);

    const body: ChatCompletionBody = {
      model: options.model,
      messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
      max_tokens: request.maxTokens ?? 256,
      temperature: request.temperature ?? 0,
      stream: false,
    };
    if (request.schema) {
      body.response_format = {
        type: 'json_schema',
        json_schema: { name: options.schemaName ?? 'output', schema: request.schema, strict: true },
      };
    }
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', ...options.headers };
    if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;

    // One controller per call: the caller's signal, the timeout and dispose all end up here.
    const controller = new AbortController();
    let timedOut = false;
    const onAbort = (): void => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            controller.abort();
          }, timeoutMs)
        : undefined;
    inFlight.add(controller);

    const started = performance.now();
    let status = 0;
    let raw: string;
    try {
      const response = await doFetch(url, { method: 'POST', headers, body: JSON.stringify(body), signal: controller.signal });
      status = response.status;
      raw = await response.text();
      if (!response.ok) {
        throw new OpenAICompatibleError(`POST ${url} answered HTTP ${status} ${response.statusText}: ${excerpt(raw)}`.trim(), 'http', status, excerpt(raw));
      }
    } catch (e) {
      if (e instanceof OpenAICompatibleError) throw e;
      if (timedOut) throw new OpenAICompatibleError(`POST ${url} timed out after ${timeoutMs} ms`, 'timeout', undefined, undefined, { cause: e });
      if (controller.signal.aborted) throw abortError(signal);
      throw new OpenAICompatibleError(`POST ${url} failed: ${e instanceof Error ? e.message : String(e)}`, 'network', undefined, undefined, { cause: e });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      inFlight.delete(controller);
    }
    const ms = performance.now() - started;

    let answer: ChatCompletionAnswer;
    try {
      answer = JSON.parse(raw) as ChatCompletionAnswer;
    } catch (e) {
      throw new OpenAICompatibleError(`POST ${url} answered HTTP ${status} with a body that is not JSON: ${excerpt(raw)}`, 'malformed', status, excerpt(raw), {
        cause: e,
      });
    }
    const message = answer?.choices?.[0]?.message;
    if (typeof message?.content !== 'string') {
      const why = typeof message?.refusal === 'string' ? `the model refused: ${message.refusal}` : 'no choices[0].message.content string';
      throw new OpenAICompatibleError(`POST ${url} answered HTTP ${status} with ${why}: ${excerpt(raw)}`, 'malformed', status, excerpt(raw));
    }
    const text = message.content;
    const count = (v: unknown, fallbackChars: number): number => (typeof v === 'number' && Number.isFinite(v) ? v : Math.ceil(fallbackChars / 4));
    return {
      text,
      promptTokens: count(
        answer.usage?.prompt_tokens,
        request.messages.reduce((n, m) => n + m.content.length, 0),
      ),
      outputTokens: count(answer.usage?.completion_tokens, text.length),
      ms,
      // why: a server may ignore response_format; we cannot know it constrained anything (answers are validated either way).
      constrained: false,
    };
  }

  return {
    id: `openai:${options.model}`,
    backend: 'remote',
    generate,
    async dispose(): Promise<void> {
      disposed = true;
      for (const c of inFlight) c.abort(new DOMException('Model disposed', 'AbortError'));
      inFlight.clear();
    },
  };
}
