import { afterEach, describe, expect, it } from 'vitest';
import { createPromptApiModel, type PromptApiCreateOptions, type PromptApiMessage } from '../../src/models/prompt-api.js';
import { ModelUnavailableError, type JsonSchema, type LoadProgress } from '../../src/models/types.js';
import { createWebLLMModel } from '../../src/models/webllm.js';

// Real headless Chromium (launched with --disable-gpu): what the on-device adapters do when
// their runtime is missing, and how the Prompt API adapter maps onto the real API's shape.

const SCHEMA: JsonSchema = {
  type: 'object',
  properties: { content: { type: 'string' }, category: { type: 'string' } },
  required: ['content', 'category'],
  additionalProperties: false,
};

const webLlmLoaded = (): boolean => performance.getEntriesByType('resource').some((e) => /web-llm/i.test(e.name));

describe('WebLLM adapter without a usable GPU', { timeout: 60_000 }, () => {
  it('rejects with ModelUnavailableError before loading anything, or fails clearly on an unreachable model', async () => {
    const gpu = (navigator as { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
    const adapter = gpu ? await gpu.requestAdapter().catch(() => null) : null;
    // Never downloads: the only model listed points at a closed localhost port.
    const appConfig = {
      model_list: [{ model: 'http://127.0.0.1:9/models/unreachable-MLC/', model_id: 'unreachable-MLC', model_lib: 'http://127.0.0.1:9/libs/unreachable.wasm' }],
    };
    const progress: LoadProgress[] = [];
    const err = await createWebLLMModel({ model: 'unreachable-MLC', appConfig, onProgress: (p) => progress.push(p) }).catch((e: unknown) => e);
    console.info(`[detect] navigator.gpu ${gpu ? 'present' : 'absent'}, adapter ${adapter ? 'granted' : 'none'}: ${String(err)}`);
    expect(progress.filter((p) => p.phase === 'ready')).toEqual([]);
    if (!adapter) {
      expect(err).toBeInstanceOf(ModelUnavailableError);
      expect(err).toMatchObject({ name: 'ModelUnavailableError', runtime: 'webllm' });
      expect((err as Error).message).toMatch(/WebGPU/);
      // Detection happens first: the several-MB library was never even fetched.
      expect(webLlmLoaded()).toBe(false);
    } else {
      // An adapter exists (e.g. a software one): the adapter got past detection and failed on the
      // load itself, with an error that names the model rather than a bare TypeError.
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(ModelUnavailableError);
      expect((err as Error).message).toMatch(/webllm: loading unreachable-MLC from .* failed/);
      expect((err as Error).cause).toBeDefined();
    }
  });
  it('past detection (TEST DOUBLE adapter), an unreachable model fails with an error naming it, not a bare TypeError', async () => {
    // Test double of the browser API only: a `navigator.gpu` that grants an adapter, so the real
    // adapter code goes on to import the real WebLLM and try to load. Nothing is downloaded: the
    // model and its library point at a closed localhost port.
    const fakeGpu = { requestAdapter: async () => ({ features: new Set<string>(), limits: {} }) };
    Object.defineProperty(navigator, 'gpu', { value: fakeGpu, configurable: true });
    try {
      const appConfig = {
        model_list: [
          { model: 'http://127.0.0.1:9/models/unreachable-MLC/', model_id: 'unreachable-MLC', model_lib: 'http://127.0.0.1:9/libs/unreachable.wasm' },
        ],
      };
      const progress: LoadProgress[] = [];
      const err = await createWebLLMModel({ model: 'unreachable-MLC', appConfig, onProgress: (p) => progress.push(p) }).catch((e: unknown) => e);
      console.info(`[detect] with a granted adapter: ${String(err)}`);
      expect(err).toBeInstanceOf(Error);
      expect(err).not.toBeInstanceOf(ModelUnavailableError);
      expect((err as Error).message).toMatch(/^webllm: loading unreachable-MLC from http:\/\/127\.0\.0\.1:9\/models\/unreachable-MLC\/ failed: /);
      expect((err as Error).cause).toBeDefined();
      expect(progress.filter((p) => p.phase === 'ready')).toEqual([]);
    } finally {
      delete (navigator as { gpu?: unknown }).gpu;
    }
  });
});

describe('Prompt API adapter', () => {
  const g = globalThis as { LanguageModel?: unknown };
  const original = Object.getOwnPropertyDescriptor(globalThis, 'LanguageModel');
  afterEach(() => {
    if (original) Object.defineProperty(globalThis, 'LanguageModel', original);
    else delete g.LanguageModel;
  });

  it('this Chromium has no usable built-in model: absent or unavailable → ModelUnavailableError', async () => {
    const api = g.LanguageModel as { availability?: (o?: unknown) => Promise<string> } | undefined;
    const said = api?.availability ? await api.availability().catch((e: unknown) => `threw ${String(e)}`) : 'n/a';
    console.info(`[detect] LanguageModel global: ${typeof api}, availability(): ${said}`);
    const err = await createPromptApiModel().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelUnavailableError);
    expect(err).toMatchObject({ runtime: 'prompt-api' });
  });

  it('absent global → ModelUnavailableError naming the missing API', async () => {
    delete g.LanguageModel;
    const err = await createPromptApiModel().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelUnavailableError);
    expect(err).toMatchObject({ runtime: 'prompt-api' });
    expect((err as Error).message).toMatch(/LanguageModel/);
  });

  // ---- TEST DOUBLE of the browser API only: a fake `LanguageModel` global with the shape of
  // Chrome's Prompt API (availability / create with monitor + initialPrompts / prompt with
  // responseConstraint + signal / contextUsage / measureContextUsage / destroy). It checks that
  // the adapter maps onto that shape; it says nothing about Gemini Nano itself.
  function installFakeLanguageModel(opts: { availability: string; params?: boolean; createError?: Error; legacyNames?: boolean }) {
    const calls = {
      availability: [] as PromptApiCreateOptions[],
      create: [] as PromptApiCreateOptions[],
      prompt: [] as { input: PromptApiMessage[]; options: Record<string, unknown> }[],
      destroyed: 0,
      /** How long the fake "model" takes to answer. */
      promptMs: 20,
    };
    class FakeSession {
      usage: number;
      constructor(initial: PromptApiMessage[]) {
        this.usage = initial.reduce((n, m) => n + m.content.split(' ').length, 0);
      }
      get contextUsage() {
        return opts.legacyNames ? undefined : this.usage;
      }
      get inputUsage() {
        return opts.legacyNames ? this.usage : undefined;
      }
      async measure(input: PromptApiMessage[]) {
        return input.reduce((n, m) => n + m.content.split(' ').length, 0);
      }
      async prompt(input: PromptApiMessage[], options: { signal?: AbortSignal; responseConstraint?: unknown } = {}) {
        calls.prompt.push({ input, options });
        if (options.signal?.aborted) throw new DOMException('aborted', 'AbortError');
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, calls.promptMs);
          options.signal?.addEventListener('abort', () => {
            clearTimeout(t);
            reject(new DOMException('aborted', 'AbortError'));
          });
        });
        this.usage += (await this.measure(input)) + 5;
        return options.responseConstraint ? '{"content":"likes trail shoes","category":"shoes"}' : 'plain words';
      }
      destroy() {
        calls.destroyed++;
      }
    }
    const proto = FakeSession.prototype as unknown as Record<string, unknown>;
    if (opts.legacyNames) proto.measureInputUsage = proto.measure;
    else proto.measureContextUsage = proto.measure;
    const fake = {
      async availability(o: PromptApiCreateOptions) {
        calls.availability.push(o);
        return opts.availability;
      },
      async create(o: PromptApiCreateOptions) {
        calls.create.push(o);
        if (opts.createError) throw opts.createError;
        if (o.monitor) {
          const target = new EventTarget();
          o.monitor(target);
          for (const loaded of [0, 0.5, 1]) target.dispatchEvent(new ProgressEvent('downloadprogress', { loaded, total: 1 }));
        }
        return new FakeSession(o.initialPrompts ?? []);
      },
      ...(opts.params ? { params: async () => ({ defaultTopK: 3, maxTopK: 128, defaultTemperature: 1, maxTemperature: 2 }) } : {}),
    };
    g.LanguageModel = fake;
    return calls;
  }

  it("'unavailable' → ModelUnavailableError, no session created", async () => {
    const calls = installFakeLanguageModel({ availability: 'unavailable' });
    await expect(createPromptApiModel()).rejects.toBeInstanceOf(ModelUnavailableError);
    expect(calls.create).toHaveLength(0);
  });

  it('a refused create (e.g. download needs a user gesture) → ModelUnavailableError with the reason', async () => {
    installFakeLanguageModel({ availability: 'downloadable', createError: new DOMException('Requires a user gesture', 'NotAllowedError') });
    const err = await createPromptApiModel().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ModelUnavailableError);
    expect((err as Error).message).toMatch(/NotAllowedError: Requires a user gesture/);
  });

  it('maps download progress, messages, schema, signal, tokens and destroy onto the API', async () => {
    const calls = installFakeLanguageModel({ availability: 'downloadable' });
    const progress: LoadProgress[] = [];
    const model = await createPromptApiModel({ onProgress: (p) => progress.push(p), languages: ['en', 'es'] });
    expect(model.id).toBe('prompt-api:chrome-built-in');
    expect(model.backend).toBe('built-in');
    expect(progress.map((p) => [p.phase, p.loaded, p.total])).toEqual([
      ['download', 0, 1],
      ['download', 0.5, 1],
      ['download', 1, 1],
      ['ready', 1, 1],
    ]);
    expect(progress.every((p) => p.stage === 'llm')).toBe(true);
    const expected = { expectedInputs: [{ type: 'text', languages: ['en', 'es'] }], expectedOutputs: [{ type: 'text', languages: ['en', 'es'] }] };
    expect(calls.availability[0]).toEqual(expected);
    expect(calls.create[0]).toMatchObject(expected);

    const controller = new AbortController();
    const result = await model.generate({
      messages: [
        { role: 'system', content: 'Write one memory as JSON.' },
        { role: 'user', content: 'Bought trail shoes twice.' },
      ],
      schema: SCHEMA,
      signal: controller.signal,
    });
    expect(JSON.parse(result.text)).toEqual({ content: 'likes trail shoes', category: 'shoes' });
    expect(result.constrained).toBe(true);
    // One fresh session per call: system message as initialPrompts, the rest as the prompt.
    expect(calls.create[1]).toMatchObject({
      ...expected,
      initialPrompts: [{ role: 'system', content: 'Write one memory as JSON.' }],
      signal: controller.signal,
    });
    expect(calls.create[1]).not.toHaveProperty('temperature');
    expect(calls.prompt[0].input).toEqual([{ role: 'user', content: 'Bought trail shoes twice.' }]);
    expect(calls.prompt[0].options).toMatchObject({ responseConstraint: SCHEMA, signal: controller.signal });
    // Tokens from the session's own counts: 5 (system) + 4 (input) prompt, 5 output.
    expect(result.promptTokens).toBe(9);
    expect(result.outputTokens).toBe(5);
    expect(calls.destroyed).toBe(1);

    const plain = await model.generate({ messages: [{ role: 'user', content: 'hello there' }] });
    expect(plain.constrained).toBe(false);
    expect(calls.prompt[1].options).not.toHaveProperty('responseConstraint');
    expect(calls.create[2].initialPrompts).toEqual([]);
    expect(calls.destroyed).toBe(2);

    await model.dispose();
    await model.dispose();
    expect(calls.destroyed).toBe(3);
  });

  it('aborts mid-prompt with AbortError and destroys the session; sampling is set only where params() exists', async () => {
    const calls = installFakeLanguageModel({ availability: 'available', params: true, legacyNames: true });
    const progress: LoadProgress[] = [];
    const model = await createPromptApiModel({ onProgress: (p) => progress.push(p) });
    // Already on disk: the monitor's 0 → 1 events are not a download.
    expect(progress.map((p) => p.phase)).toEqual(['load', 'ready']);

    calls.promptMs = 60_000;
    const controller = new AbortController();
    const pending = model.generate({ messages: [{ role: 'user', content: 'hi' }], signal: controller.signal });
    await expect.poll(() => calls.prompt.length).toBe(1);
    controller.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    expect(calls.destroyed).toBe(1);
    expect(calls.create[1]).toMatchObject({ temperature: 0, topK: 1 });

    calls.promptMs = 20;
    const warm = await model.generate({ messages: [{ role: 'user', content: 'one two three' }], temperature: 0.7 });
    expect(calls.create[2]).toMatchObject({ temperature: 0.7, topK: 3 });
    // Older Chrome names (inputUsage / measureInputUsage) are read too.
    expect(warm.promptTokens).toBe(3);
    expect(warm.outputTokens).toBe(5);
    await model.dispose();
  });
});
