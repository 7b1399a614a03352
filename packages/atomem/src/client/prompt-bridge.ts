/**
 * The page side of the Prompt API bridge: Chrome exposes `LanguageModel` on Window only, the
 * engine runs in a worker, so the page lends it (a {@link PagePromptApi} behind a Comlink proxy;
 * the worker side is `src/models/prompt-api-bridge.ts`). Kept small: it ships in the main-thread
 * entry (size budget).
 */
import type { BridgeCreateOptions, BridgeMessage, PagePromptApi } from '../worker/protocol.js';

interface PageSession {
  prompt(input: string | BridgeMessage[], o: { responseConstraint?: unknown; signal: AbortSignal }): Promise<string>;
  measureContextUsage?(input: string | BridgeMessage[], o: { responseConstraint?: unknown; signal: AbortSignal }): Promise<number>;
  measureInputUsage?(input: string | BridgeMessage[], o: { responseConstraint?: unknown; signal: AbortSignal }): Promise<number>;
  contextUsage?: number;
  inputUsage?: number;
  destroy(): void;
}

interface PageLanguageModel {
  availability(o: BridgeCreateOptions): Promise<'unavailable' | 'downloadable' | 'downloading' | 'available'>;
  create(o: BridgeCreateOptions & { signal: AbortSignal; monitor?: (m: EventTarget) => void }): Promise<PageSession>;
  params?(): Promise<{ defaultTopK: number; maxTopK: number; defaultTemperature: number; maxTemperature: number } | null>;
}

interface PolicyLike {
  allowsFeature?(feature: string): boolean;
}

/**
 * The page's `LanguageModel`, or why it cannot be lent: absent, or blocked by the document's
 * permissions policy (`document.permissionsPolicy`, or the older `featurePolicy`, feature
 * `language-model`: e.g. a cross-origin iframe without `allow="language-model"`).
 */
export function pageLanguageModel(): { api: PageLanguageModel } | { reason: string } {
  const g = globalThis as { LanguageModel?: Partial<PageLanguageModel>; document?: { permissionsPolicy?: PolicyLike; featurePolicy?: PolicyLike } };
  const lm = g.LanguageModel;
  if (!lm || typeof lm.availability !== 'function' || typeof lm.create !== 'function')
    return { reason: 'Chrome Prompt API is absent: no LanguageModel on this page' };
  const policy = g.document?.permissionsPolicy ?? g.document?.featurePolicy;
  if (policy && typeof policy.allowsFeature === 'function' && !policy.allowsFeature('language-model')) {
    return { reason: "Chrome Prompt API is blocked on this page by its permissions policy (feature 'language-model')" };
  }
  return { api: lm as PageLanguageModel };
}

const usage = (s: PageSession): number | null => {
  const u = s.contextUsage ?? s.inputUsage;
  return typeof u === 'number' && Number.isFinite(u) ? u : null;
};

/** Lend `lm` to the worker. `abortAll` aborts every call in flight and ends every session (the page is going away). */
export function promptBridge(lm: PageLanguageModel): { bridge: PagePromptApi; abortAll(reason: string): void } {
  const sessions = new Map<number, PageSession>();
  const calls = new Map<number, AbortController>();
  let next = 1;
  const run = async <T>(call: number, fn: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    const ac = new AbortController();
    calls.set(call, ac);
    try {
      return await fn(ac.signal);
    } finally {
      calls.delete(call);
    }
  };
  const session = (id: number): PageSession => {
    const s = sessions.get(id);
    if (!s) throw new Error(`Prompt API session ${id} is closed`);
    return s;
  };
  const bridge: PagePromptApi = {
    availability: async (o) => lm.availability(o),
    params: async () => (typeof lm.params === 'function' ? lm.params() : null),
    create: (o, call, onDownload) =>
      run(call, async (signal) => {
        const s = await lm.create({
          ...o,
          signal,
          ...(onDownload
            ? {
                monitor: (m: EventTarget) =>
                  m.addEventListener('downloadprogress', (e) => void onDownload((e as ProgressEvent).loaded, (e as ProgressEvent).total)),
              }
            : {}),
        });
        const id = next++;
        sessions.set(id, s);
        return { session: id, usage: usage(s) };
      }),
    prompt: (id, input, o, call) =>
      run(call, async (signal) => {
        const s = session(id);
        const text = await s.prompt(input, { ...o, signal });
        return { text, usage: usage(s) };
      }),
    measure: (id, input, o, call) =>
      run(call, async (signal) => {
        const s = session(id);
        const m = s.measureContextUsage ?? s.measureInputUsage;
        return typeof m === 'function' ? m.call(s, input, { ...o, signal }) : null;
      }),
    abort: async (call) => calls.get(call)?.abort(),
    destroy: async (id) => {
      sessions.get(id)?.destroy();
      sessions.delete(id);
    },
  };
  return {
    bridge,
    abortAll(reason) {
      for (const ac of calls.values()) ac.abort(new DOMException(reason, 'AbortError'));
      for (const s of sessions.values()) s.destroy();
      sessions.clear();
    },
  };
}
