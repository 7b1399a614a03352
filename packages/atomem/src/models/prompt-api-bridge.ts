/**
 * Chrome's Prompt API in the worker, through the page. Chrome exposes `LanguageModel` on Window
 * only, so each page that can lend it passes a {@link PagePromptApi} (a Comlink proxy) to the
 * engine; {@link PromptApiLenders} turns the newest live loan back into a {@link PromptApiGlobal}
 * for `createPromptApiModel`, so the adapter in `prompt-api.ts` runs unchanged.
 *
 * The page going away: a call to a dead page's proxy would never settle. Each page holds a Web
 * Lock for its lifetime (`info.lock`); the worker queues a request for the same lock, which is
 * granted exactly when the page is gone (closed, navigated, crashed) — then every call still
 * waiting on that page rejects with a {@link PageGoneError}, and later calls use another page's
 * loan (a SharedWorker serves several) or fail with `ModelUnavailableError`. The reasoner falls
 * back to rules for the operation either way.
 */
import { proxy } from 'comlink';
import { abortError } from './abort.js';
import type { PromptApiAvailability, PromptApiCreateOptions, PromptApiGlobal, PromptApiMessage, PromptApiSession } from './prompt-api.js';
import { ModelUnavailableError } from './types.js';

/** A chat message as the page's `LanguageModel` takes it. */
export interface BridgeMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** `LanguageModel.availability()` / `create()` options that cross to the page (no signal, no monitor: those stay in the worker). */
export interface BridgeCreateOptions {
  expectedInputs?: { type: 'text'; languages?: string[] }[];
  expectedOutputs?: { type: 'text'; languages?: string[] }[];
  initialPrompts?: BridgeMessage[];
  temperature?: number;
  topK?: number;
}

/**
 * Chrome's built-in Prompt API as the page lends it to the worker (Chrome exposes `LanguageModel`
 * on Window only). The client implements it over the page's `LanguageModel`
 * (`src/client/prompt-bridge.ts`); the worker wraps it back into a `LanguageModel`-like object
 * (`src/models/prompt-api-bridge.ts`). Sessions and calls are named by numbers; `abort(call)`
 * aborts the page-side call (the worker's AbortSignals cannot cross).
 */
export interface PagePromptApi {
  availability(options: BridgeCreateOptions): Promise<'unavailable' | 'downloadable' | 'downloading' | 'available'>;
  params(): Promise<{ defaultTopK: number; maxTopK: number; defaultTemperature: number; maxTemperature: number } | null>;
  /** Create a session; `onDownload` (a Comlink proxy) gets the model's download progress. */
  create(options: BridgeCreateOptions, call: number, onDownload?: (loaded: number, total: number) => void): Promise<{ session: number; usage: number | null }>;
  /** `session.prompt(input, { responseConstraint })`; `usage` is the session's context usage after it. */
  prompt(
    session: number,
    input: string | BridgeMessage[],
    options: { responseConstraint?: unknown },
    call: number,
  ): Promise<{ text: string; usage: number | null }>;
  /** `measureContextUsage` (or the older `measureInputUsage`), null where the browser has neither. */
  measure(session: number, input: string | BridgeMessage[], options: { responseConstraint?: unknown }, call: number): Promise<number | null>;
  abort(call: number): Promise<void>;
  destroy(session: number): Promise<void>;
}

/** What comes with a page's {@link PagePromptApi} loan (or with its refusal). */
export interface PromptApiLoanInfo {
  /** A Web Lock the page holds while it lives: the worker learns that the page went away when it is granted. */
  lock?: string;
  /** Why the page lends nothing (no `LanguageModel`, or the permissions policy blocks `language-model`). */
  reason?: string;
}

/** A call waited on a page that went away (closed, navigated, or left a shared engine). */
export class PageGoneError extends Error {
  override name = 'PageGoneError';
}

interface Lender {
  token: number;
  bridge: PagePromptApi;
  gone: PageGoneError | null;
  waiting: Set<(e: PageGoneError) => void>;
}

type LocksLike = { request(name: string, cb: () => Promise<void> | void): Promise<void> };

/** The pages that lend their Prompt API to this engine (one for a dedicated worker, any number for a shared one). */
export class PromptApiLenders {
  private readonly lenders = new Map<number, Lender>();
  private refusal: string | null = null;
  private nextCall = 1;

  /** Record page `token`'s loan (see `EngineApi.lendPromptApi`). */
  lend(token: number, bridge: PagePromptApi | null, info: PromptApiLoanInfo = {}): void {
    this.gone(token, 'was replaced');
    if (!bridge) {
      if (info.reason) this.refusal = info.reason;
      return;
    }
    const lender: Lender = { token, bridge, gone: null, waiting: new Set() };
    this.lenders.set(token, lender);
    const locks = (globalThis as { navigator?: { locks?: LocksLike } }).navigator?.locks;
    if (info.lock && locks) {
      // granted only once the page that holds it is gone
      locks
        .request(info.lock, () => {
          if (this.lenders.get(token) === lender) this.gone(token, 'went away');
        })
        .catch(() => undefined);
    }
  }

  /** Page `token` left: calls waiting on it reject with {@link PageGoneError}. */
  gone(token: number, why = 'went away'): void {
    const l = this.lenders.get(token);
    if (!l) return;
    this.lenders.delete(token);
    l.gone = new PageGoneError(`the page lending Chrome's Prompt API ${why} during the call`);
    for (const reject of l.waiting) reject(l.gone);
    l.waiting.clear();
  }

  /** The newest lender's `availability()` (no options), or `unavailable` when it fails; `absent` with no lender. */
  async availability(): Promise<PromptApiAvailability | 'absent'> {
    if (this.lenders.size === 0) return 'absent';
    const l = this.pick();
    try {
      const a = await this.guard(l, l.bridge.availability({}));
      return a === 'available' || a === 'downloadable' || a === 'downloading' ? a : 'unavailable';
    } catch {
      return 'unavailable';
    }
  }

  /** Pages lending right now. */
  get size(): number {
    return this.lenders.size;
  }

  /** The lent API as a `LanguageModel` global (calls go to the newest live page). */
  api(): PromptApiGlobal {
    return {
      availability: (o) => {
        const l = this.pick();
        return this.guard(l, l.bridge.availability(strip(o))) as Promise<PromptApiAvailability>;
      },
      params: () => {
        const l = this.pick();
        return this.guard(l, l.bridge.params());
      },
      create: async (o = {}) => {
        const l = this.pick();
        const call = this.nextCall++;
        let onDownload: ((loaded: number, total: number) => void) | undefined;
        if (o.monitor) {
          const target = new EventTarget();
          o.monitor(target);
          onDownload = proxy((loaded: number, total: number) => {
            target.dispatchEvent(Object.assign(new Event('downloadprogress'), { loaded, total }));
          });
        }
        const { session, usage } = await this.guard(l, l.bridge.create(strip(o), call, onDownload), o.signal, call);
        return this.session(l, session, usage);
      },
    };
  }

  private session(l: Lender, id: number, initialUsage: number | null): PromptApiSession {
    let usage = initialUsage ?? undefined;
    return {
      prompt: async (input, options = {}) => {
        const call = this.nextCall++;
        const r = await this.guard(l, l.bridge.prompt(id, cloneInput(input), constraint(options), call), options.signal, call);
        usage = r.usage ?? undefined;
        return r.text;
      },
      measureContextUsage: async (input, options = {}) => {
        const call = this.nextCall++;
        const n = await this.guard(l, l.bridge.measure(id, cloneInput(input), constraint(options), call), options.signal, call);
        return n ?? (undefined as unknown as number); // why: the adapter treats undefined as "not measured"
      },
      get contextUsage() {
        return usage;
      },
      destroy: () => {
        if (!l.gone) l.bridge.destroy(id).catch(() => undefined);
      },
    };
  }

  private pick(): Lender {
    const all = [...this.lenders.values()];
    if (all.length === 0) {
      throw new ModelUnavailableError(
        this.refusal
          ? `${this.refusal} (no page lends it to the worker)`
          : 'Chrome Prompt API is absent: no page lends a LanguageModel to the worker (Chrome exposes it on Window only)',
        'prompt-api',
      );
    }
    return all[all.length - 1];
  }

  /** `work`, unless the page goes away (PageGoneError) or `signal` aborts (AbortError, and the page-side call is aborted) first. */
  private guard<T>(l: Lender, work: Promise<T>, signal?: AbortSignal, call?: number): Promise<T> {
    if (l.gone) {
      work.catch(() => undefined);
      return Promise.reject(l.gone);
    }
    if (signal?.aborted) {
      if (call !== undefined) l.bridge.abort(call).catch(() => undefined);
      work.catch(() => undefined);
      return Promise.reject(abortError(signal));
    }
    return new Promise<T>((resolve, reject) => {
      const finish = (): void => {
        l.waiting.delete(onGone);
        signal?.removeEventListener('abort', onAbort);
      };
      const onGone = (e: PageGoneError): void => {
        finish();
        reject(e);
      };
      const onAbort = (): void => {
        finish();
        if (call !== undefined && !l.gone) l.bridge.abort(call).catch(() => undefined);
        reject(abortError(signal));
      };
      l.waiting.add(onGone);
      signal?.addEventListener('abort', onAbort, { once: true });
      work.then(
        (v) => {
          finish();
          resolve(v);
        },
        (e: unknown) => {
          finish();
          reject(e);
        },
      );
    });
  }
}

/** The structured-clonable part of create/availability options (signal and monitor stay here). */
function strip(o: PromptApiCreateOptions = {}): BridgeCreateOptions {
  const out: BridgeCreateOptions = {};
  if (o.expectedInputs) out.expectedInputs = o.expectedInputs;
  if (o.expectedOutputs) out.expectedOutputs = o.expectedOutputs;
  if (o.initialPrompts) out.initialPrompts = o.initialPrompts;
  if (o.temperature !== undefined) out.temperature = o.temperature;
  if (o.topK !== undefined) out.topK = o.topK;
  return out;
}

function constraint(o: { responseConstraint?: unknown }): { responseConstraint?: unknown } {
  return o.responseConstraint === undefined ? {} : { responseConstraint: o.responseConstraint };
}

function cloneInput(input: string | PromptApiMessage[]): string | PromptApiMessage[] {
  return typeof input === 'string' ? input : input.map((m) => ({ role: m.role, content: m.content }));
}
