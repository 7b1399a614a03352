/// <reference types="vite/client" />
import { afterEach, describe, expect, it } from 'vitest';
import { createAtomem, type Atomem, type LlmEvent, type ProgressEvent, type SerializedError } from '../../src/client/index.js';
import type { GenerateRequest } from '../../src/models/types.js';
import { REFLECT_SCHEMA } from '../../src/reason/prompts.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { CATALOG, opOf, TAU, VALID } from '../../../../test/fixtures/llm-agent.js';
import { installScriptedLanguageModel, type ScriptedLanguageModel } from '../../../../test/fixtures/scripted-language-model.js';

// Chrome's Prompt API lives on Window only; the engine runs in a worker. The client lends the
// page's LanguageModel to the worker (src/client/prompt-bridge.ts ↔ src/models/prompt-api-bridge.ts).
// The real Gemini Nano cannot be downloaded here, so a scripted LanguageModel is installed on the
// page (test/fixtures/scripted-language-model.ts); everything else is real: the worker, Comlink,
// IndexedDB, the LLM reasoner with its schemas, Web Locks, a SharedWorker and an iframe that goes away.
const found = import.meta.glob('../../../../../shared/models/stories260K/stories260K.gguf', { query: '?url', import: 'default', eager: true }) as Record<
  string,
  string
>;
const GGUF = Object.values(found)[0];
const WLLAMA_WASM = '/node_modules/@wllama/wllama/esm/wasm/wllama.wasm';

const open: Atomem[] = [];
const installed: ScriptedLanguageModel[] = [];
const profiles = profileTracker('prompt-bridge-', `${Date.now()}`);
const answerByOperation = (input: unknown): string => VALID[opOf({ messages: input } as GenerateRequest)];

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  for (const lm of installed.splice(0)) lm.uninstall();
  document.querySelectorAll('iframe[data-bridge-test]').forEach((f) => f.remove());
  await profiles.deleteAll();
});

async function start(name: string, extra: Partial<Parameters<typeof createAtomem>[0]> = {}, progress: ProgressEvent[] = []): Promise<Atomem> {
  const a = await createAtomem({
    profile: profiles.profile(name),
    catalog: CATALOG,
    embedder: 'hashing',
    config: { tau: TAU },
    llm: { promptApi: true, idleMs: 50 },
    onProgress: (p) => progress.push(p),
    ...extra,
  });
  open.push(a);
  return a;
}

describe('Chrome Prompt API through the page', () => {
  it("the worker runs the memory on the page's LanguageModel: availability and download progress on the one stream, structured output (responseConstraint)", async () => {
    const lm = installScriptedLanguageModel(window, { availability: 'downloadable', answer: answerByOperation });
    installed.push(lm);
    const progress: ProgressEvent[] = [];
    const a = await start('dedicated', {}, progress);
    await expect.poll(async () => (await a.status()).llm.loading, { timeout: 20_000 }).toBe(false);
    const s = await a.status();
    expect(s.llm).toMatchObject({ mode: 'built-in', model: 'prompt-api:chrome-built-in' });
    expect(s.llm.attempts).toEqual([{ runtime: 'prompt-api', ok: true }]);
    expect(s.capabilities.promptApi).toBe('downloadable'); // the page's answer, asked before the download
    const dl = progress.filter((p) => p.stage === 'llm' && p.phase === 'download');
    expect(dl.map((p) => p.loaded)).toEqual([0, 0.5, 1]);
    expect(progress.some((p) => p.stage === 'llm' && p.phase === 'ready')).toBe(true);

    const feed: LlmEvent[] = [];
    a.on('llm', (e) => feed.push(e));
    await a.track({ item: 'heat', action: 'purchase' });
    await a.track({ item: 'fargo', action: 'like' });
    await expect.poll(async () => (await a.status()).llm.deferred, { timeout: 20_000, interval: 50 }).toBe(0);
    const costs = (await a.status()).llm.costs!;
    expect(costs.total.succeeded).toBeGreaterThan(0);
    expect(costs.byOperation.reflect.succeeded).toBeGreaterThanOrEqual(1);
    // every prompt asked for structured output; the reflect ones with the reflect schema, decoded by the page
    expect(lm.prompts.length).toBeGreaterThan(0);
    expect(lm.prompts.every((p) => typeof p.responseConstraint === 'object' && p.responseConstraint !== null)).toBe(true);
    expect(lm.prompts.some((p) => JSON.stringify(p.responseConstraint) === JSON.stringify(REFLECT_SCHEMA))).toBe(true);
    // each call ran in a fresh session with the system prompt as its initial prompt, destroyed after
    expect(lm.prompts.every((p) => Array.isArray(p.initialPrompts) && (p.initialPrompts as { role: string }[])[0]?.role === 'system')).toBe(true);
    // why: polled as a difference — a late background call may still create a session after this line
    await expect.poll(() => lm.created - lm.destroyed).toBe(1); // all but the warm session
    expect(feed.some((e) => e.kind === 'call' && e.ok && e.constrained)).toBe(true);
    const memories = await a.memories();
    expect(memories.some((m) => m.content === 'Enjoys tense crime stories')).toBe(true); // describeMemory's answer
  }, 60_000);

  it('respects the permissions policy: blocked `language-model` → not lent, the reason in status and an error event, rules', async () => {
    const lm = installScriptedLanguageModel(window, { answer: answerByOperation });
    installed.push(lm);
    // the real policy of this same-origin page allows the feature (default allowlist 'self'), so detection does not block it
    const real =
      (document as { permissionsPolicy?: { allowsFeature(f: string): boolean }; featurePolicy?: { allowsFeature(f: string): boolean } }).permissionsPolicy ??
      (document as { featurePolicy?: { allowsFeature(f: string): boolean } }).featurePolicy;
    console.log(
      `this Chromium: document.${'permissionsPolicy' in document ? 'permissionsPolicy' : 'featurePolicy' in document ? 'featurePolicy' : '(no policy API)'}.allowsFeature('language-model') = ${real?.allowsFeature('language-model')}`,
    );
    if (real) expect(real.allowsFeature('language-model')).toBe(true);
    const had = Object.getOwnPropertyDescriptor(document, 'permissionsPolicy');
    // what a cross-origin iframe without allow="language-model" sees (Document.permissionsPolicy)
    Object.defineProperty(document, 'permissionsPolicy', { configurable: true, value: { allowsFeature: (f: string) => f !== 'language-model' } });
    try {
      const errors: SerializedError[] = [];
      const a = await start('policy', { onError: (e) => errors.push(e) });
      await expect.poll(async () => (await a.status()).llm.loading, { timeout: 20_000 }).toBe(false);
      const s = await a.status();
      expect(s.llm.mode).toBe('rules');
      expect(s.llm.attempts[0].ok).toBe(false);
      expect(s.llm.attempts[0].reason).toMatch(/permissions policy.*language-model/);
      await expect.poll(() => errors.some((e) => e.name === 'ModelFallback' && /permissions policy/.test(e.message))).toBe(true);
      expect(lm.created).toBe(0);
      await a.track({ item: 'heat', action: 'purchase' });
      expect((await a.memories()).length).toBeGreaterThan(0);
    } finally {
      if (had) Object.defineProperty(document, 'permissionsPolicy', had);
      else delete (document as { permissionsPolicy?: unknown }).permissionsPolicy;
    }
  }, 60_000);

  it('shared: true — the lending page goes away mid-call: the worker gets a PageGoneError at once and that operation falls back to rules', async () => {
    const profile = profiles.profile('gone');
    const options = {
      profile,
      catalog: CATALOG,
      embedder: 'hashing' as const,
      config: { tau: TAU },
      llm: { promptApi: true, idleMs: 50 },
      shared: true,
      assetsBaseUrl: `${location.origin}/packages/atomem/dist/assets/`,
    };
    // a second document of this origin (an iframe) with a LanguageModel whose prompts never answer
    const frame = document.createElement('iframe');
    frame.dataset.bridgeTest = '1';
    const messages: string[] = [];
    const onMessage = (e: MessageEvent): void => void messages.push(String((e.data as { type?: string })?.type));
    addEventListener('message', onMessage);
    frame.srcdoc = `<!doctype html><script type="module">
      import { installScriptedLanguageModel } from '/test/fixtures/scripted-language-model.ts';
      import { createAtomem } from '/packages/atomem/src/client/index.ts';
      const lm = installScriptedLanguageModel(window, { answer: () => 'hang' });
      lm.onPrompt = () => parent.postMessage({ type: 'prompt-started' }, '*');
      try {
        window.atomem = await createAtomem(${JSON.stringify(options)});
        parent.postMessage({ type: 'ready' }, '*');
      } catch (e) { parent.postMessage({ type: 'failed: ' + e.message }, '*'); }
    </script>`;
    document.body.append(frame);
    try {
      await expect.poll(() => messages.find((m) => m === 'ready' || m.startsWith('failed')), { timeout: 30_000 }).toBe('ready');
      // this page joins the same shared engine; it has no LanguageModel of its own
      const a = await createAtomem(options);
      open.push(a);
      await expect.poll(async () => (await a.status()).llm.loading, { timeout: 20_000 }).toBe(false);
      const s = await a.status();
      expect(s.shared).toBe(true);
      expect(s.llm.mode).toBe('built-in');
      const feed: LlmEvent[] = [];
      a.on('llm', (e) => feed.push(e));
      await a.track({ item: 'heat', action: 'purchase' });
      await expect.poll(() => messages.includes('prompt-started'), { timeout: 20_000 }).toBe(true);
      const gone = performance.now();
      frame.remove(); // the lending page goes away while the worker waits on its prompt
      await expect.poll(() => feed.find((e) => e.kind === 'fallback'), { timeout: 10_000, interval: 20 }).toBeDefined();
      const ms = performance.now() - gone;
      const first = feed.find((e) => e.kind === 'fallback')!;
      expect(first).toMatchObject({ kind: 'fallback', reason: 'model' });
      expect(first.kind === 'fallback' && first.message).toMatch(/PageGoneError|went away/);
      expect(ms).toBeLessThan(5_000); // the page's lock, not the reasoner's 15 s call timeout
      // the operation went on with rules: the event became memory
      await expect.poll(async () => (await a.status()).llm.deferred, { timeout: 20_000, interval: 50 }).toBe(0);
      expect((await a.memories()).some((m) => m.items.includes('heat'))).toBe(true);
      // no page lends any more: later calls fail at once as unavailable (rules), never hang
      await a.track({ item: 'fargo', action: 'like' });
      await expect.poll(async () => (await a.status()).llm.deferred, { timeout: 10_000, interval: 50 }).toBe(0);
      expect(feed.filter((e) => e.kind === 'fallback').some((e) => e.kind === 'fallback' && /no page lends/.test(e.message))).toBe(true);
      console.log(`lending page removed mid-call → fallback to rules after ${ms.toFixed(0)} ms`);
    } finally {
      removeEventListener('message', onMessage);
    }
  }, 90_000);

  it('shared: true — which backends work in a SharedWorker (capabilities, embedder, each model runtime), and every fallback is visible', async () => {
    const lm = installScriptedLanguageModel(window, { answer: answerByOperation });
    installed.push(lm);
    const errors: SerializedError[] = [];
    const llm = {
      webllm: { model: 'Qwen2.5-0.5B-Instruct-q4f16_1-MLC' },
      ...(GGUF ? { wllama: { model: GGUF, wasmUrl: WLLAMA_WASM, contextSize: 512 } } : {}),
      idleMs: 50,
    };
    const a = await start('shared-backends', {
      shared: true,
      embedder: 'use-lite',
      assetsBaseUrl: `${location.origin}/packages/atomem/dist/assets/`,
      llm,
      onError: (e) => errors.push(e),
    });
    await expect.poll(async () => (await a.status()).llm.loading, { timeout: 60_000 }).toBe(false);
    const s = await a.status();
    expect(s.shared).toBe(true);
    // the embedder: USE-lite on WASM works in a SharedWorker (single-threaded without cross-origin isolation)
    expect(s.embedder).toMatchObject({ kind: 'use-lite', device: 'wasm', state: 'ready' });
    expect((await a.recommend(['heat', 'emma'])).length).toBe(2);
    const row = (runtime: string): string => {
      const at = s.llm.attempts.find((x) => x.runtime === runtime);
      return at ? (at.ok ? 'works' : `falls back: ${at.reason}`) : 'not tried';
    };
    const report = {
      webgpu: s.capabilities.webgpu.available ? 'yes' : `no (${s.capabilities.webgpu.reason})`,
      nestedWorkers: s.capabilities.workers,
      crossOriginIsolated: s.capabilities.crossOriginIsolated,
      'use-lite': `${s.embedder.kind}/${s.embedder.device}`,
      webllm: row('webllm'),
      wllama: row('wllama'),
    };
    console.log(`backends under shared: true (${navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0]}): ${JSON.stringify(report, null, 1)}`);
    // WebLLM needs WebGPU: none in this headless SharedWorker → skipped with its reason, as an error event too
    if (!s.capabilities.webgpu.available) {
      expect(s.llm.attempts[0]).toMatchObject({ runtime: 'webllm', ok: false });
      expect(errors.some((e) => e.name === 'ModelFallback' && /webllm/.test(e.message))).toBe(true);
    }
    if (GGUF) {
      const w = s.llm.attempts.find((x) => x.runtime === 'wllama')!;
      if (!s.capabilities.workers) {
        // wllama starts a worker of its own; a Chromium SharedWorker has no Worker constructor
        expect(w.ok).toBe(false);
        expect(w.reason).toMatch(/cannot.*worker|no Worker/i);
        expect(errors.some((e) => e.name === 'ModelFallback' && /wllama/.test(e.message))).toBe(true);
        expect(s.llm.mode).toBe('rules');
      } else expect(w.ok).toBe(true);
    }
    a.dispose();
    open.splice(open.indexOf(a), 1);

    // the Prompt API through the page works in a SharedWorker as in a dedicated one
    const b = await start('shared-prompt', { shared: true });
    await expect.poll(async () => (await b.status()).llm.loading, { timeout: 20_000 }).toBe(false);
    const sb = await b.status();
    expect(sb.llm).toMatchObject({ mode: 'built-in' });
    await b.track({ item: 'heat', action: 'purchase' });
    await expect.poll(async () => (await b.status()).llm.deferred, { timeout: 20_000, interval: 50 }).toBe(0);
    expect((await b.status()).llm.costs!.total.succeeded).toBeGreaterThan(0);
    console.log(`prompt-api through the page under shared: true: ${sb.llm.mode}, ${lm.prompts.length} prompts answered`);
  }, 120_000);
});
