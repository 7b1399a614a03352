import { env } from '@huggingface/transformers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMiniLMEmbedder, EmbedderLoadError, type MiniLMEmbedder, type MiniLMFileCache } from '../../src/embed/minilm.js';
import { ModelUnavailableError, type LoadProgress } from '../../src/models/types.js';
import { TINY_BERT_HIDDEN, tinyBertExpected, tinyBertFiles } from '../../../../test/fixtures/tiny-bert.js';
import { expectReferenceTokens, expectReferenceVectors, maxDiff, TINY_BERT_SENTENCES } from '../../../../test/fixtures/tiny-bert-checks.js';

// The MiniLM embedder's real path in headless Chromium — transformers.js' file loading, WordPiece
// tokenizer, ONNX Runtime Web (WASM, or WebGPU when an adapter exists), mean pooling, L2
// normalisation — on a tiny BERT-like model built in the test (test/fixtures/tiny-bert.ts).
//
// No network: the model files are served from a custom cache (transformers.js' `env.customCache`,
// the product's own option `cache`) under a host that does not exist, with `allowRemote: false`;
// ONNX Runtime's .wasm/.mjs come from the Vite dev server's node_modules (same origin), never a CDN.

const MODEL_BASE = 'https://models.atomem.invalid/';
const WASM_PATHS = '/node_modules/onnxruntime-web/dist/';
const TINY = 'atomem-test/tiny-bert';

const SENTENCES = TINY_BERT_SENTENCES;

/** A cache holding models' files under `${MODEL_BASE}${model}/${file}`; records every lookup. */
function fixtureCache(models: Record<string, Record<string, Uint8Array | string>>): MiniLMFileCache & { lookups: string[]; puts: string[] } {
  const lookups: string[] = [];
  const puts: string[] = [];
  return {
    lookups,
    puts,
    async match(request: string) {
      lookups.push(request);
      for (const [model, files] of Object.entries(models)) {
        const prefix = `${MODEL_BASE}${model}/`;
        if (!request.startsWith(prefix)) continue;
        const content = files[request.slice(prefix.length)];
        if (content === undefined) return undefined;
        const bytes = typeof content === 'string' ? new TextEncoder().encode(content) : content;
        const type = request.endsWith('.json') ? 'application/json' : 'application/octet-stream';
        return new Response(bytes.slice(), { headers: { 'content-type': type, 'content-length': String(bytes.byteLength) } });
      }
      return undefined;
    },
    async put(request: string) {
      puts.push(request);
    },
  };
}

const { 'onnx/model.onnx': _graph, ...withoutGraph } = tinyBertFiles();
const cache = fixtureCache({
  [TINY]: tinyBertFiles(),
  'atomem-test/no-graph': withoutGraph,
  'atomem-test/broken-graph': { ...withoutGraph, 'onnx/model.onnx': new TextEncoder().encode('not an onnx graph') },
});

/** Every URL this page asked for, by any route: transformers.js' fetch, the global fetch, resource timing. */
const requested: string[] = [];
const isLocal = (url: string): boolean => {
  const u = new URL(url, location.href);
  return u.protocol === 'blob:' || u.protocol === 'data:' || u.origin === location.origin;
};
function leftLocalhost(): string[] {
  const timed = performance.getEntriesByType('resource').map((e) => e.name);
  return [...requested, ...timed].filter((u) => !isLocal(u));
}

/** Load `model` from the fixture cache (fp32, no remote) and return why it failed (or the embedder, if it loaded). */
function loadError(model: string): Promise<unknown> {
  return createMiniLMEmbedder({ model, modelBaseUrl: MODEL_BASE, wasmPaths: WASM_PATHS, dtype: 'fp32', allowRemote: false, cache }).catch((e: unknown) => e);
}

async function webGpuAdapter(): Promise<boolean> {
  const gpu = (navigator as Navigator & { gpu?: { requestAdapter(): Promise<unknown> } }).gpu;
  if (!gpu) return false;
  try {
    return (await gpu.requestAdapter()) != null;
  } catch {
    return false;
  }
}

describe('MiniLM embedder in the browser (tiny BERT fixture, onnxruntime-web)', () => {
  let embedder: MiniLMEmbedder;
  let adapter: boolean;
  const progress: LoadProgress[] = [];
  const realEnvFetch = env.fetch;
  const realFetch = globalThis.fetch;

  beforeAll(async () => {
    env.fetch = (input, init) => {
      requested.push(String(input));
      return realEnvFetch(input, init);
    };
    globalThis.fetch = (input, init) => {
      requested.push(input instanceof Request ? input.url : String(input));
      return realFetch(input, init);
    };
    adapter = await webGpuAdapter();
    embedder = await createMiniLMEmbedder({
      model: TINY,
      modelBaseUrl: MODEL_BASE,
      wasmPaths: WASM_PATHS,
      dtype: 'fp32',
      allowRemote: false,
      cache,
      batchSize: 2,
      onProgress: (p) => progress.push(p),
    });
  }, 120_000);

  afterAll(async () => {
    await embedder?.dispose();
    env.fetch = realEnvFetch;
    globalThis.fetch = realFetch;
  });

  it('runs on the device the WebGPU probe allows, with id = model + dtype and dim from the output', () => {
    expect(typeof window).toBe('object');
    console.log(`WebGPU adapter: ${adapter}; embedder device: ${embedder.device}`);
    expect(embedder.device).toBe(adapter ? 'webgpu' : 'wasm');
    expect(embedder.dtype).toBe('fp32');
    expect(embedder.id).toBe(`${TINY}/fp32`);
    expect(embedder.dim).toBe(TINY_BERT_HIDDEN);
  });

  it('loaded every model file from the cache and nothing left localhost', () => {
    for (const file of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'onnx/model.onnx']) {
      expect(cache.lookups).toContain(`${MODEL_BASE}${TINY}/${file}`);
    }
    expect(requested.filter((u) => u.includes('models.atomem.invalid'))).toEqual([]);
    // the ONNX Runtime binary came from the dev server, not a CDN
    expect(performance.getEntriesByType('resource').some((e) => e.name.includes('/node_modules/onnxruntime-web/dist/ort-wasm-simd-threaded'))).toBe(true);
    expect(leftLocalhost()).toEqual([]);
  });

  it('reports progress as stage embedder, unit bytes: download, load, then ready', () => {
    expect(progress.length).toBeGreaterThan(2);
    for (const p of progress) {
      expect(p).toMatchObject({ stage: 'embedder', unit: 'bytes', model: TINY });
      expect(p.loaded).toBeLessThanOrEqual(p.total);
    }
    const phases = progress.map((p) => p.phase);
    expect(phases[0]).toBe('download');
    expect(phases).toContain('load');
    expect(phases.indexOf('load')).toBeGreaterThan(phases.lastIndexOf('download'));
    expect(phases.filter((p) => p === 'ready')).toHaveLength(1);
    const last = progress[progress.length - 1];
    expect(last.phase).toBe('ready');
    expect(last.total).toBeGreaterThan(1000); // the four files' bytes
    expect(last.loaded).toBe(last.total);
  });

  it('tokenizes with the WordPiece tokenizer.json exactly like the reference', () => {
    expectReferenceTokens(embedder);
  });

  it('returns the mean-pooled, L2-normalised vectors within 1e-4, in input order across batches', async () => {
    // one at a time (no padding) gives the same vectors as the padded batches
    await expectReferenceVectors(embedder, [1]);
  });

  it('serialises concurrent calls and keeps each caller’s order', async () => {
    const [a, b] = await Promise.all([embedder.embed(SENTENCES.slice(0, 3)), embedder.embed(SENTENCES.slice(3).reverse())]);
    expect(maxDiff(a[2].vector, tinyBertExpected(SENTENCES[2]))).toBeLessThan(1e-4);
    expect(maxDiff(b[0].vector, tinyBertExpected(SENTENCES[4]))).toBeLessThan(1e-4);
  });

  it('names a model file missing from the cache, without any request leaving localhost', async () => {
    const err = await loadError('atomem-test/no-graph');
    expect(err).toBeInstanceOf(EmbedderLoadError);
    expect(err).toMatchObject({ name: 'EmbedderLoadError', reason: 'missing-file', model: 'atomem-test/no-graph' });
    expect((err as Error).message).toContain(`${MODEL_BASE}atomem-test/no-graph/onnx/model.onnx`);
    expect((err as Error).message).toContain('allowRemote is false');
    expect(leftLocalhost()).toEqual([]);
  });

  it('names a file that is not an ONNX graph as invalid-model', async () => {
    const err = await loadError('atomem-test/broken-graph');
    expect(err).toBeInstanceOf(EmbedderLoadError);
    expect(err).toMatchObject({ reason: 'invalid-model', model: 'atomem-test/broken-graph' });
  });

  it('after a failed session, says the page/worker must be restarted (transformers.js 4.3.2 never resets its session queue)', async () => {
    // Runs after the broken graph: in this page every later session creation now rejects with that
    // same error, even for the good model. The embedder names it instead of repeating "protobuf parsing failed".
    const err = await loadError(TINY);
    expect(err).toBeInstanceOf(EmbedderLoadError);
    expect(err).toMatchObject({ reason: 'runtime', model: TINY });
    expect((err as Error).message).toContain('Restart the worker');
    // the embedder loaded before the failure still works (inference has its own queue)
    const [v] = await embedder.embed([SENTENCES[0]]);
    expect(maxDiff(v.vector, tinyBertExpected(SENTENCES[0]))).toBeLessThan(1e-4);
  });

  it("device 'webgpu' without an adapter is a ModelUnavailableError (the caller falls back)", async () => {
    if (adapter) return; // a GPU machine: nothing to refuse
    await expect(
      createMiniLMEmbedder({ model: TINY, modelBaseUrl: MODEL_BASE, wasmPaths: WASM_PATHS, device: 'webgpu', allowRemote: false, cache }),
    ).rejects.toBeInstanceOf(ModelUnavailableError);
  });

  it('refuses to run without self-hosted wasmPaths (no silent CDN fallback)', async () => {
    await expect(createMiniLMEmbedder({ model: TINY, modelBaseUrl: MODEL_BASE, allowRemote: false, cache })).rejects.toMatchObject({
      name: 'EmbedderLoadError',
      reason: 'config',
    });
  });

  it('restores transformers.js env after each load', () => {
    expect(env.allowRemoteModels).toBe(true);
    expect(env.useCustomCache).toBe(false);
    expect(env.customCache).toBeNull();
    expect(env.remoteHost).toBe('https://huggingface.co/');
  });
});

/**
 * The same load inside a real module Web Worker (where the product runs it). The worker is a
 * `blob:` module that imports the embedder and the fixture from the Vite dev server by URL; the
 * first line stands in for what Vitest injects into Vite-built workers (it wraps dynamic
 * imports through `__vitest_browser_runner__`). The worker posts back what it saw.
 */
const WORKER_SOURCE = (embedUrl: string, fixtureUrl: string, wasmPaths: string, base: string, model: string, fakeAdapter: boolean) => `
globalThis.__vitest_browser_runner__ ??= { wrapDynamicImport: (f) => f() };
if (${fakeAdapter}) {
  // An adapter without requestDevice: ONNX Runtime's WebGPU backend could not use it (and a failed
  // session cannot be retried in the same realm), so the embedder's probe must reject it up front.
  Object.defineProperty(self.navigator, 'gpu', { configurable: true, value: { requestAdapter: async () => ({ features: new Set(), limits: {} }) } });
}
const { createMiniLMEmbedder } = await import(${JSON.stringify(embedUrl)});
const { tinyBertFiles, tinyBertExpected } = await import(${JSON.stringify(fixtureUrl)});
const files = tinyBertFiles();
const requests = [];
const realFetch = globalThis.fetch;
globalThis.fetch = (input, init) => { requests.push(input instanceof Request ? input.url : String(input)); return realFetch(input, init); };
const prefix = ${JSON.stringify(`${base}${model}/`)};
const cache = {
  async match(key) {
    const content = key.startsWith(prefix) ? files[key.slice(prefix.length)] : undefined;
    if (content === undefined) return undefined;
    const bytes = typeof content === 'string' ? new TextEncoder().encode(content) : content;
    return new Response(bytes.slice(), { headers: { 'content-length': String(bytes.byteLength) } });
  },
  async put() {},
};
try {
  const phases = [];
  const gpu = self.navigator.gpu ? await self.navigator.gpu.requestAdapter().catch(() => null) : null;
  const e = await createMiniLMEmbedder({ model: ${JSON.stringify(model)}, modelBaseUrl: ${JSON.stringify(base)}, wasmPaths: ${JSON.stringify(wasmPaths)},
    dtype: 'fp32', allowRemote: false, cache, onProgress: (p) => phases.push(p.phase) });
  const texts = ['prefers romantic comedies', 'Loves space adventure science fiction movies'];
  const out = await e.embed(texts);
  const maxDiff = Math.max(...out.map((v, i) => { const want = tinyBertExpected(texts[i]); return Math.max(...Array.from(v.vector, (x, d) => Math.abs(x - want[d]))); }));
  await e.dispose();
  const resources = performance.getEntriesByType('resource').map((r) => r.name);
  postMessage({ ok: true, inWorker: typeof window === 'undefined' && typeof WorkerGlobalScope !== 'undefined', adapter: gpu != null,
    device: e.device, id: e.id, dim: e.dim, maxDiff, phases, urls: [...requests, ...resources] });
} catch (err) {
  postMessage({ ok: false, error: String(err && err.stack || err), name: err && err.name, reason: err && err.reason, message: err && err.message });
}
`;

interface WorkerReport {
  ok: boolean;
  error?: string;
  name?: string;
  reason?: string;
  message?: string;
  inWorker: boolean;
  adapter: boolean;
  device: string;
  id: string;
  dim: number;
  maxDiff: number;
  phases: string[];
  urls: string[];
}

/** Run {@link WORKER_SOURCE} in a fresh module worker (a fresh ONNX Runtime) and return its report. */
async function inWorker(wasmPaths: string, fakeAdapter = false): Promise<WorkerReport> {
  const abs = (p: string) => new URL(p, location.href).href;
  const source = WORKER_SOURCE(abs('/packages/atomem/src/embed/minilm.ts'), abs('/test/fixtures/tiny-bert.ts'), abs(wasmPaths), MODEL_BASE, TINY, fakeAdapter);
  const url = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  const worker = new Worker(url, { type: 'module' });
  try {
    return await new Promise<WorkerReport>((resolve, reject) => {
      worker.onmessage = (ev: MessageEvent<WorkerReport>) => resolve(ev.data);
      worker.onerror = (ev) => reject(new Error(`worker error: ${ev.message}`));
    });
  } finally {
    worker.terminate();
    URL.revokeObjectURL(url);
  }
}

describe('MiniLM embedder inside a module Web Worker', () => {
  it('loads the tiny model offline, reports its device, and matches the reference vectors', async () => {
    const report = await inWorker(WASM_PATHS);
    expect(report.error).toBeUndefined();
    expect(report.ok).toBe(true);
    expect(report.inWorker).toBe(true);
    expect(report.device).toBe(report.adapter ? 'webgpu' : 'wasm');
    expect(report.id).toBe(`${TINY}/fp32`);
    expect(report.dim).toBe(TINY_BERT_HIDDEN);
    expect(report.maxDiff).toBeLessThan(1e-4);
    expect(report.phases.at(-1)).toBe('ready');
    expect(report.phases).toContain('download');
    expect(report.urls.filter((u) => !isLocal(u))).toEqual([]);
  }, 60_000);

  it("device 'auto' runs on WASM when an adapter exists but gives no device", async () => {
    const report = await inWorker(WASM_PATHS, true);
    expect(report.error).toBeUndefined();
    expect(report.adapter).toBe(true);
    expect(report.device).toBe('wasm');
    expect(report.maxDiff).toBeLessThan(1e-4);
  }, 60_000);

  it('names an ONNX Runtime that cannot start (wrong wasmPaths) as reason runtime', async () => {
    const report = await inWorker('/no-such-folder/ort/');
    expect(report.ok).toBe(false);
    expect(report).toMatchObject({ name: 'EmbedderLoadError', reason: 'runtime' });
    expect(report.message).toContain('ONNX Runtime could not start (wasmPaths http');
    expect(report.message).toContain('/no-such-folder/ort/');
  }, 60_000);
});
