import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tinyBertFiles } from '../../../test/fixtures/tiny-bert.js';

// The README's plain static site recipe: the BUILT package in real headless Chromium, a page
// importing dist/index.js served as plain static files (no bundler, no Vite transform). Its
// prebuilt worker (dist/worker/) and shipped assets load next to it: USE-lite + tfjs wasm,
// onnxruntime-web's wasm for MiniLM (assets/ort-wasm/), wllama's (assets/wllama/). Nothing is
// served from another package's folder. `npm test` builds first (pretest).

/** The atomem package folder: the page loads its built dist/ as a shop serving the package would. */
const PKG = fileURLToPath(new URL('../', import.meta.url));
/** The toy GGUF (1.2 MB) of ../shared, read-only and never copied: streamed by the test server; the wllama case is skipped without it. */
const GGUF = fileURLToPath(new URL('../../../../shared/models/stories260K/stories260K.gguf', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const TYPES: Record<string, string> = {
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.html': 'text/html',
  '.map': 'application/json',
};

/** The page's products (the shop's vector file covers exactly these). */
const CATALOG = [
  { id: 'tent', title: 'Two-person camping tent', categories: ['Outdoor'], description: 'lightweight tent for hiking and camping trips' },
  { id: 'stove', title: 'Camping stove', categories: ['Outdoor'], description: 'portable gas stove for camping and hiking' },
  { id: 'boots', title: 'Hiking boots', categories: ['Outdoor'], description: 'waterproof boots for mountain hiking' },
  { id: 'blender', title: 'Kitchen blender', categories: ['Kitchen'], description: 'blender for smoothies and soups' },
  { id: 'kettle', title: 'Electric kettle', categories: ['Kitchen'], description: 'fast boiling kettle for tea' },
  { id: 'novel', title: 'Mystery novel', categories: ['Books'], description: 'a detective story paperback' },
];

const PAGE = `<!doctype html><meta charset="utf-8"><title>atomem dist</title><script type="module">
import { createAtomem } from '/dist/index.js';
const catalog = ${JSON.stringify(CATALOG)};
const out = { progress: [] };
const params = new URLSearchParams(location.search);
// a product the shop's vector file does not cover (added after the file was made)
if (params.get('extra')) catalog.push({ id: 'lamp', title: 'Head lamp', categories: ['Outdoor'], description: 'bright LED lamp for night hikes' });
const embedder = params.get('embedder') ? JSON.parse(params.get('embedder')) : undefined;
const llm = params.get('llm') ? JSON.parse(params.get('llm')) : undefined;
try {
  const t0 = performance.now();
  const atomem = await createAtomem({ profile: params.get('profile') ?? 'dist-test-' + (embedder ? 'x' : 'default'), catalog, embedder: embedder ?? (params.get("burst") ? "hashing" : undefined), catalogVectors: params.get('vectors') ?? undefined, llm, onProgress: (p) => out.progress.push(p) });
  out.startMs = performance.now() - t0;
  out.initialStatus = await atomem.status();
  const burst = params.get('burst');
  if (burst) {
    // one page of several writing to the same profile at once
    await Promise.all(Array.from({ length: 20 }, (_, i) => atomem.track({ item: catalog[i % catalog.length].id, action: 'click', at: Number(burst) + i })));
  } else if (!params.get('readonly')) {
    await atomem.track({ item: 'tent', action: 'purchase' });
    await atomem.track({ item: 'stove', action: 'cart' });
  }
  out.ranked = await atomem.recommend(['blender', 'boots', 'novel', 'kettle']);
  // a language model loads in the background: wait until every configured runtime was tried
  for (let i = 0; llm && i < 600 && (await atomem.status()).llm.loading; i++) await new Promise((r) => setTimeout(r, 100));
  out.memories = (await atomem.memories()).map((m) => ({ content: m.content, items: m.items }));
  out.status = await atomem.status();
  out.events = (await atomem.export()).state.events;
} catch (e) { out.error = e.name + ': ' + e.message; }
window.__result = out;
</script>`;

const tiny = tinyBertFiles();
/** The shop's catalog vector file for the page's six products, made in Node (beforeAll) as atomem-vectors would. */
let vectorFile: Uint8Array | undefined;
/** The same content rows with a shop model and SASRec (format v2), learned from a made-up order log (beforeAll). */
let shopFile: Uint8Array | undefined;
let server: Server;
let browser: Browser;
let base = '';
const requests: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    requests.push(url.pathname);
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
      return;
    }
    if (url.pathname === '/catalog-v2.bin' && shopFile) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(shopFile.length) }).end(shopFile);
      return;
    }
    if (url.pathname === '/catalog-vectors.bin' && vectorFile) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(vectorFile.length) }).end(vectorFile);
      return;
    }
    // a tiny BERT written by the test (config, tokenizer, ONNX graph), as the shop's own model host
    if (url.pathname.startsWith('/models/tiny-bert/')) {
      const body = tiny[url.pathname.slice('/models/tiny-bert/'.length)];
      if (body === undefined) res.writeHead(404).end();
      else res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
      return;
    }
    if (url.pathname === '/models/stories260K.gguf' && existsSync(GGUF)) {
      const size = statSync(GGUF).size;
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(size) });
      if (req.method === 'HEAD') res.end();
      else createReadStream(GGUF).pipe(res);
      return;
    }
    const file = normalize(join(PKG, decodeURIComponent(url.pathname)));
    if (!file.startsWith(join(PKG, 'dist')) || file.startsWith(join(PKG, 'dist', 'node')) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  {
    // the page's catalog (its first six products), embedded in Node with the default USE-lite
    const { createUseLiteEmbedder } = await import('../src/embed/use-lite.js');
    const { itemText } = await import('../src/embed/cache.js');
    const { encodeCatalogVectors } = await import('../src/protocol/catalog-vectors-v1.js');
    const items = CATALOG;
    const use = await createUseLiteEmbedder();
    const vectors = (await use.embed(items.map((it) => itemText(it)))).map((e) => e.vector);
    vectorFile = encodeCatalogVectors(use, items, vectors);
    await use.dispose?.();
    // a made-up order log: campers buy the tent, the stove, the kettle and the blender; hikers the boots and the novel
    const { trainShopModel } = await import('../src/shop/train.js');
    const { trainSasrec } = await import('../src/shop/sasrec/train.js');
    const { encodeCatalogFile } = await import('../src/protocol/catalog-vectors-v2.js');
    const ids = items.map((it) => it.id);
    const log = Array.from({ length: 60 }, (_, u) =>
      (u % 2 ? ['boots', 'novel'] : ['tent', 'stove', 'kettle', 'blender']).map((item, k) => ({
        user: `u${u}`,
        item,
        at: (u * 10 + k) * 60_000,
        action: 'purchase' as const,
      })),
    ).flat();
    const model = trainShopModel(log, { catalog: ids, content: { embedder: use.id, vectors: new Map(ids.map((id, i) => [id, vectors[i]])) } });
    const index = new Map(ids.map((id, i) => [id, i + 1]));
    const seqs = Array.from({ length: 60 }, (_, u) =>
      Int32Array.from(
        log.filter((r) => r.user === `u${u}`),
        (r) => index.get(r.item)!,
      ),
    );
    const { weights } = await trainSasrec(seqs, ids.length, { epochs: 5, threads: 1, seed: 3 });
    shopFile = encodeCatalogFile({ embedder: use, items, vectors, shop: { model, sasrec: { weights, items: ids } } });
  }
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((r) => server?.close(r));
});

describe('the built package (dist/) in headless Chromium', () => {
  it('createAtomem with every default: worker chunk, USE-lite from the shipped assets, learns and explains, nothing leaves the host', async () => {
    expect(existsSync(join(PKG, 'dist/index.js')), 'run `npm run build` first (npm test does)').toBe(true);
    const page = await browser.newPage();
    const offsite: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) offsite.push(r.url());
    });
    await page.goto(`${base}/`);
    await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
    const r = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as {
      error?: string;
      startMs: number;
      progress: { stage: string; phase: string }[];
      ranked: { id: string; explanations: string[] }[];
      memories: { content: string; items: string[] }[];
      status: {
        embedder: { kind: string; device: string; dim: number };
        llm: { mode: string };
        capabilities: { wasm: boolean; webgpu: { available: boolean } };
        storage: { persisted: boolean | null; degraded: boolean };
      };
    };
    expect(r.error).toBeUndefined();
    expect(r.status.embedder).toEqual(expect.objectContaining({ kind: 'use-lite', device: 'wasm', dim: 512 }));
    expect(r.status.llm.mode).toBe('rules');
    expect(r.status.capabilities.wasm).toBe(true);
    expect(r.progress.some((p) => p.stage === 'embedder' && p.phase === 'ready')).toBe(true);
    expect(r.progress.some((p) => p.stage === 'catalog')).toBe(true);
    expect(r.ranked[0].id).toBe('boots');
    expect(r.ranked[0].explanations.join(' ')).toMatch(/tent|stove|camping|outdoor/i);
    expect(r.memories.flatMap((m) => m.items)).toEqual(expect.arrayContaining(['tent', 'stove']));
    // the page loaded the built files only: the entry, the worker chunk, the shipped assets
    expect(requests).toContain('/dist/index.js');
    expect(requests).toContain('/dist/worker/worker.js');
    expect(requests.some((p) => /^\/dist\/worker\/engine-[\w-]+\.js$/.test(p))).toBe(true);
    expect(requests).toContain('/dist/assets/use-lite/model.json');
    expect(requests.some((p) => p.startsWith('/src/'))).toBe(false);
    expect(offsite).toEqual([]);
    expect(typeof r.status.storage.persisted).toBe('boolean'); // navigator.storage.persist() was asked
    expect(r.status.storage.degraded).toBe(false);
    console.log(`dist in Chromium: createAtomem (USE-lite, cold) → ready in ${r.startMs.toFixed(0)} ms`);

    // a page reload: a fresh page and worker, the same profile; the memory is still there
    const before = requests.length;
    await page.goto(`${base}/?readonly=1`);
    await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
    const again = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as typeof r;
    expect(again.error).toBeUndefined();
    // a returning visit: every item vector is in the IndexedDB cache, so USE-lite is never fetched
    expect(requests.slice(before).filter((p) => p.includes('/use-lite') || p.includes('/tfjs-wasm/'))).toEqual([]);
    expect(again.status.embedder).toMatchObject({ id: 'use-lite@0.2.0/uint8', state: 'not loaded' });
    expect(again.memories).toEqual(r.memories);
    expect(again.ranked.map((x) => x.id)).toEqual(r.ranked.map((x) => x.id));
    await page.close();
  }, 120_000);

  it('the shop model from a v2 catalog vector file: the built worker ranks with it (campers are shown the kitchen things campers bought), nothing leaves the host', async () => {
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    const offsite: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) offsite.push(r.url());
    });
    const before = requests.length;
    await page.goto(`${base}/?profile=dist-shop&vectors=/catalog-v2.bin`);
    await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
    const r = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as {
      error?: string;
      ranked: { id: string }[];
      status: { catalog: { version: number; source: string; shop: { sequence: string | null } | null } | null; embedder: { state: string } };
    };
    await ctx.close();
    expect(r.error).toBeUndefined();
    expect(r.status.catalog).toMatchObject({ version: 2, source: 'download', shop: { sequence: 'sasrec' } });
    expect(r.status.embedder.state).toBe('not loaded'); // every product's content vector came from the file
    expect(['kettle', 'blender']).toContain(r.ranked[0].id); // the content space alone ranks the boots first (first test)
    expect(requests.slice(before)).toContain('/catalog-v2.bin');
    expect(offsite).toEqual([]);
  }, 120_000);

  it("lazy USE-lite: a first visit whose catalog the shop's vector file covers fetches no model file; one product missing from it loads the model", async () => {
    type R = {
      error?: string;
      progress: { stage: string; phase: string }[];
      ranked: { id: string }[];
      initialStatus: { embedder: { id: string; state: string } };
      status: { embedder: { state: string } };
    };
    const visit = async (query: string): Promise<{ r: R; fetched: string[] }> => {
      const ctx = await browser.newContext(); // a first visit: empty HTTP cache, empty IndexedDB
      const page = await ctx.newPage();
      const before = requests.length;
      await page.goto(`${base}/?${query}`);
      await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
      const r = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as R;
      const fetched = requests.slice(before);
      await ctx.close();
      return { r, fetched };
    };
    const model = (paths: string[]): string[] =>
      paths.filter((p) => p.startsWith('/dist/assets/use-lite') || p.startsWith('/dist/assets/tfjs-wasm/') || /\/dist\/assets\/use-lite-[\w-]+\.js$/.test(p));

    // covered: the vector file, the entry and the worker chunk; not one USE-lite file, code or wasm
    const covered = await visit('profile=lazy-covered&vectors=/catalog-vectors.bin');
    expect(covered.r.error).toBeUndefined();
    expect(covered.fetched).toContain('/catalog-vectors.bin');
    expect(model(covered.fetched)).toEqual([]);
    expect(covered.r.initialStatus.embedder).toEqual(expect.objectContaining({ id: 'use-lite@0.2.0/uint8', state: 'not loaded' }));
    expect(covered.r.status.embedder.state).toBe('not loaded'); // tracking and ranking cached items needs no model
    expect(covered.r.progress.some((p) => p.stage === 'embedder')).toBe(false);
    expect(covered.r.ranked[0].id).toBe('boots');

    // one product missing from the file: the model loads (progress on the stream), once
    const missing = await visit('profile=lazy-missing&vectors=/catalog-vectors.bin&extra=1');
    expect(missing.r.error).toBeUndefined();
    const m = model(missing.fetched);
    expect(m).toEqual(
      expect.arrayContaining([
        '/dist/assets/use-lite/model.json',
        '/dist/assets/use-lite/vocab.json',
        '/dist/assets/use-lite/group1-shard1of2.bin',
        '/dist/assets/use-lite/group1-shard2of2.bin',
      ]),
    );
    expect(m.filter((p) => p === '/dist/assets/use-lite/model.json')).toHaveLength(1);
    expect(missing.r.initialStatus.embedder.state).toBe('ready');
    expect(missing.r.progress.filter((p) => p.stage === 'embedder').map((p) => p.phase)).toEqual(expect.arrayContaining(['load', 'download', 'ready']));

    // no vector file: the model loads at start as before
    const none = await visit('profile=lazy-none');
    expect(none.r.error).toBeUndefined();
    expect(model(none.fetched)).toContain('/dist/assets/use-lite/model.json');
    expect(none.r.initialStatus.embedder.state).toBe('ready');
  }, 180_000);

  it('two pages of the same origin writing to one profile at the same time lose nothing', async () => {
    const ctx = await browser.newContext();
    const pages = await Promise.all([ctx.newPage(), ctx.newPage()]);
    await Promise.all(pages.map((p, i) => p.goto(`${base}/?profile=two-pages&burst=${(i + 1) * 1000}`)));
    for (const p of pages) await p.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 60_000 });
    const results = (await Promise.all(pages.map((p) => p.evaluate(() => (window as unknown as { __result: unknown }).__result)))) as { error?: string }[];
    expect(results.map((x) => x.error)).toEqual([undefined, undefined]);
    const reader = await ctx.newPage();
    await reader.goto(`${base}/?profile=two-pages&readonly=1&embedder=${encodeURIComponent('"hashing"')}`);
    await reader.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 60_000 });
    const read = (await reader.evaluate(() => (window as unknown as { __result: unknown }).__result)) as { error?: string; events: { at: number }[] };
    expect(read.error).toBeUndefined();
    const ats = read.events.map((e) => e.at);
    const want = [...Array.from({ length: 20 }, (_, i) => 1000 + i), ...Array.from({ length: 20 }, (_, i) => 2000 + i)];
    expect([...ats].sort((x, y) => x - y)).toEqual(want);
    await ctx.close();
  }, 120_000);

  it('with a (software) WebGPU adapter: the probe sees it and MiniLM runs on WebGPU', async () => {
    const gpuBrowser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--enable-unsafe-webgpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    });
    try {
      const page = await gpuBrowser.newPage();
      const embedder = { kind: 'minilm', model: 'tiny-bert', modelBaseUrl: `${base}/models`, dtype: 'fp32', device: 'auto' };
      await page.goto(`${base}/?profile=gpu&embedder=${encodeURIComponent(JSON.stringify(embedder))}`);
      await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
      const r = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as {
        error?: string;
        ranked: { id: string }[];
        status: {
          embedder: { kind: string; device: string };
          capabilities: {
            webgpu: { available: boolean; isFallbackAdapter?: boolean; shaderF16: boolean; features: string[]; limits?: { maxBufferSize: number } };
          };
        };
      };
      expect(r.error).toBeUndefined();
      const gpu = r.status.capabilities.webgpu;
      expect(gpu.available).toBe(true);
      expect(gpu.isFallbackAdapter).toBe(true); // SwiftShader
      expect(gpu.features.length).toBeGreaterThan(0);
      expect(gpu.limits?.maxBufferSize).toBeGreaterThan(0);
      expect(gpu.shaderF16).toBe(gpu.features.includes('shader-f16'));
      expect(r.status.embedder).toMatchObject({ kind: 'minilm', device: 'webgpu' });
      expect(r.ranked).toHaveLength(4);
    } finally {
      await gpuBrowser.close();
    }
  }, 120_000);

  it('MiniLM path from dist/: transformers.js in a worker chunk, the ONNX runtime wasm shipped in assets/ort-wasm, model from the shop host', async () => {
    const page = await browser.newPage();
    const offsite: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) offsite.push(r.url());
    });
    const embedder = { kind: 'minilm', model: 'tiny-bert', modelBaseUrl: `${base}/models`, dtype: 'fp32' };
    const before = requests.length;
    await page.goto(`${base}/?embedder=${encodeURIComponent(JSON.stringify(embedder))}`);
    await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
    const r = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as {
      error?: string;
      progress: { stage: string; phase: string; unit: string }[];
      ranked: { id: string }[];
      status: { embedder: { id: string; kind: string; device: string; dim: number } };
    };
    expect(r.error).toBeUndefined();
    expect(r.status.embedder).toMatchObject({ kind: 'minilm', device: 'wasm' });
    expect(r.status.embedder.id).toContain('tiny-bert');
    expect(r.progress.some((p) => p.stage === 'embedder' && p.unit === 'bytes')).toBe(true);
    expect(r.ranked).toHaveLength(4);
    const mine = requests.slice(before);
    expect(mine).toContain('/dist/assets/ort-wasm/ort-wasm-simd-threaded.asyncify.wasm');
    expect(mine).toContain('/models/tiny-bert/onnx/model.onnx');
    expect(offsite).toEqual([]);
    await page.close();
  }, 120_000);
  it.skipIf(!existsSync(GGUF))(
    'wllama path from dist/: llm: { wllama } with the default wasmUrl loads the shipped assets/wllama/wllama.wasm and runs the model',
    async () => {
      const page = await browser.newPage();
      const offsite: string[] = [];
      page.on('request', (r) => {
        if (!r.url().startsWith(base) && !r.url().startsWith('data:') && !r.url().startsWith('blob:')) offsite.push(r.url());
      });
      const before = requests.length;
      const llm = { wllama: { model: `${base}/models/stories260K.gguf` } };
      await page.goto(`${base}/?profile=dist-wllama&embedder=${encodeURIComponent('"hashing"')}&llm=${encodeURIComponent(JSON.stringify(llm))}`);
      await page.waitForFunction(() => (window as unknown as { __result?: unknown }).__result, undefined, { timeout: 90_000 });
      const r = (await page.evaluate(() => (window as unknown as { __result: unknown }).__result)) as {
        error?: string;
        ranked: { id: string }[];
        status: { llm: { mode: string; model: string | null; loading: boolean; attempts: { runtime: string; ok: boolean; reason?: string }[] } };
      };
      expect(r.error).toBeUndefined();
      expect(r.status.llm.loading).toBe(false);
      expect(r.status.llm, JSON.stringify(r.status.llm.attempts)).toMatchObject({ mode: 'wasm', model: 'wllama:stories260K' });
      expect(r.ranked).toHaveLength(4);
      const mine = requests.slice(before);
      expect(mine).toContain('/dist/assets/wllama/wllama.wasm');
      expect(mine).toContain('/models/stories260K.gguf');
      expect(offsite).toEqual([]);
      await page.close();
    },
    120_000,
  );
});
