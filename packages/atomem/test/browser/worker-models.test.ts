/// <reference types="vite/client" />
import { afterEach, describe, expect, it } from 'vitest';
import wasmUrl from '@wllama/wllama/esm/wasm/wllama.wasm?url';
import { createAtomem, type Atomem, type EngineStatus, type LlmEvent, type ProgressEvent, type SerializedError } from '../../src/client/index.js';
import type { Item } from '../../src/core/types.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';

// The engine's model fallback, in the real worker: WebLLM (no WebGPU adapter in this headless
// Chromium) → wllama (WASM, the real runtime and the real stories260K GGUF from ../shared,
// never copied) → and rules when nothing loads. Every step is visible in status().
const found = import.meta.glob('../../../../../shared/models/stories260K/stories260K.gguf', { query: '?url', import: 'default', eager: true }) as Record<
  string,
  string
>;
const MODEL_URL = Object.values(found)[0];

const catalog: Item[] = [
  { id: 'a', title: 'trail running shoes', categories: ['Shoes'] },
  { id: 'b', title: 'road running shoes', categories: ['Shoes'] },
  { id: 'c', title: 'cast iron skillet', categories: ['Kitchen'] },
];
const open: Atomem[] = [];
const profiles = profileTracker('models-', `${Date.now()}`);

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await profiles.deleteAll();
});

async function start(name: string, llm: Parameters<typeof createAtomem>[0]['llm'], progress: ProgressEvent[] = []): Promise<Atomem> {
  const profile = profiles.profile(name);
  const a = await createAtomem({ profile, catalog, embedder: 'hashing', llm, onProgress: (p) => progress.push(p) });
  open.push(a);
  return a;
}

/** Model calls made so far, and operations that fell back to rules so far. */
const callsOf = (s: EngineStatus): number => s.llm.costs?.total.calls ?? 0;
const fallbacksOf = (s: EngineStatus): number => Object.values(s.llm.costs?.total.fallbacks ?? {}).reduce((x, y) => x + y, 0);

describe('language-model fallback inside the worker', () => {
  it.skipIf(!MODEL_URL)(
    'WebGPU → WASM: WebLLM is skipped with its reason, wllama loads stories260K, the engine keeps answering meanwhile',
    async () => {
      const progress: ProgressEvent[] = [];
      const a = await start(
        'wllama',
        { webllm: { model: 'Qwen2.5-0.5B-Instruct-q4f16_1-MLC' }, wllama: { model: MODEL_URL!, wasmUrl, contextSize: 2048 }, idleMs: 300 },
        progress,
      );
      const errors: SerializedError[] = [];
      a.on('error', (e) => errors.push(e));
      await a.track({ item: 'a', action: 'click' }); // answers on rules while the model loads
      await expect.poll(async () => (await a.status()).llm.loading, { timeout: 60_000, interval: 100 }).toBe(false);
      const s = await a.status();
      const gpu = s.capabilities.webgpu.available;
      if (!gpu) {
        expect(s.llm.attempts[0]).toMatchObject({ runtime: 'webllm', ok: false });
        expect(s.llm.attempts[0].reason).toMatch(/ModelUnavailableError.*WebGPU/);
        expect(s.llm.attempts[1]).toEqual({ runtime: 'wllama', ok: true });
        expect(s.llm).toMatchObject({ mode: 'wasm', model: 'wllama:stories260K', loading: false });
      } else {
        // a GPU here would let WebLLM try the hub and fail offline, then fall back the same way
        expect(s.llm.attempts.at(-1)).toEqual({ runtime: 'wllama', ok: true });
      }
      expect(progress.some((p) => p.stage === 'llm' && p.phase === 'ready')).toBe(true);
      expect(progress.filter((p) => p.stage === 'llm' && p.phase === 'download').every((p) => p.unit === 'bytes')).toBe(true);
      if (!gpu) await expect.poll(() => errors.some((e) => e.name === 'ModelFallback' && /webllm/.test(e.message))).toBe(true);
      expect((await a.recommend(['b', 'c']))[0].id).toBe('b');

      // with the model loaded, memory operations go through it (grammar-constrained JSON, validated;
      // the toy model's gibberish is fine — the path is under test): observe → (idle) form → rank completes
      const feed: LlmEvent[] = [];
      a.on('llm', (e) => feed.push(e));
      const s0 = await a.status();
      const before = callsOf(s0);
      await a.track({ item: 'c', action: 'purchase' });
      await a.track({ item: 'b', action: 'purchase' });
      // the LLM planner defers the events to idle time (idleMs 300), then processes them in one batch
      expect((await a.status()).llm.deferred).toBeGreaterThan(0);
      await expect.poll(async () => (await a.status()).llm.deferred, { timeout: 60_000, interval: 200 }).toBe(0);
      const after = await a.status();
      const costs = after.llm.costs!;
      expect(costs.total.calls).toBeGreaterThan(before);
      expect(costs.byOperation.reflect.requests).toBeGreaterThanOrEqual(2);
      expect(costs.total.requests).toBe(costs.total.succeeded + Object.values(costs.total.fallbacks).reduce((x, y) => x + y, 0));
      const mems = await a.memories();
      expect(mems.length).toBeGreaterThan(0);
      for (const m of mems) expect(m.content.length).toBeGreaterThan(0);
      // listwise rerank through the model (or the engine's order on any failure): always all candidates
      const ranked = await a.recommend(['a', 'b', 'c'], { rerank: 3, exclude: [] }); // exclude []: keep the items bought above
      expect(ranked.map((r) => r.id).sort()).toEqual(['a', 'b', 'c']);
      const final = (await a.status()).llm.costs!;
      expect(final.byOperation.rerank.requests).toBe(1);
      // every model call and every fallback reached the page as an 'llm' event
      await expect.poll(() => feed.filter((e) => e.kind === 'call').length).toBe(final.total.calls - before);
      expect(feed.filter((e) => e.kind === 'fallback').length).toBe(fallbacksOf(await a.status()) - fallbacksOf(s0));
      for (const e of feed) if (e.kind === 'fallback') expect(e.message.length).toBeGreaterThan(0);
      console.log(
        `stories260K as reasoner: ${final.total.calls} calls, ${final.total.succeeded} ok, fallbacks ${JSON.stringify(final.total.fallbacks)}, ${final.total.outputTokens} output tokens; memory: "${mems[0].content.slice(0, 60)}"`,
      );
    },
    90_000,
  );

  it('nothing loads → rules, and status says why each runtime was skipped', async () => {
    const a = await start('rules', { promptApi: true, wllama: { model: '/no/such/model.gguf', wasmUrl: '/no/such/wllama.wasm' } });
    await expect.poll(async () => (await a.status()).llm.loading, { timeout: 30_000 }).toBe(false);
    const s = await a.status();
    expect(s.llm.mode).toBe('rules');
    expect(s.llm.model).toBeNull();
    expect(s.llm.attempts.map((x) => [x.runtime, x.ok])).toEqual([
      ['prompt-api', false],
      ['wllama', false],
    ]);
    expect(s.llm.attempts[1].reason).toMatch(/wllama\.wasm/);
    await a.track({ item: 'c', action: 'purchase' });
    expect((await a.memories()).length).toBeGreaterThan(0);
  }, 60_000);

  it('refuses nonsensical model options with a named error', async () => {
    for (const llm of [{ idleMs: -5 }, { idleMs: Number.NaN }, { budget: { maxCalls: 1.5, perEvents: 2 } }, { budget: { maxCalls: 2, perEvents: 0 } }]) {
      const profile = profiles.profile('bad');
      await expect(createAtomem({ profile, catalog, embedder: 'hashing', llm })).rejects.toMatchObject({
        name: 'TypeError',
        message: expect.stringMatching(/llm\.(idleMs|budget)/),
      });
    }
  });
});
