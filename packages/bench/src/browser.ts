/**
 * Browser benchmark (`npm run bench:browser`): atomem in real headless Chromium, each figure
 * beside a baseline measured in the same run, printed as a markdown table.
 *
 * 1. worker start → first recommendation (rules mode), `hashing` and `use-lite`, cold (first
 *    createAtomem in a fresh browser context) and warm (a second one in the same page) —
 *    baseline: an empty module worker answering one postMessage, cold and warm alike;
 *    and `use-lite` cold again on a first visit with the shop's precomputed catalog vectors
 *    (`catalogVectors`, made once in the page before the clock starts and served by Vite) —
 *    baseline: the use-lite cold start without them;
 * 2. `await atomem.track()` round trip p50/p95 — baseline: a bare Comlink round trip; then, on the
 *    use-lite instance, `recommend(10 candidates, { intent })` p50/p95 with a new intent text each
 *    call (its USE-lite embedding included) — baseline: `recommend(same candidates)` interleaved;
 * 3. `MemoryStore.load()` of 1,000 atomic memories (512-d) from IndexedDB — baseline:
 *    `structuredClone` of the same state (JSON.parse of it as JSON is shown beside);
 * 4. USE-lite texts/s on 256 product titles + descriptions, batches of 64 — baseline: the
 *    hashing embedder on the same texts;
 * 5. with a language model — only when the toy GGUF `../shared/models/stories260K/stories260K.gguf`
 *    exists next to the repo (served, never copied, at `/bench-models/stories260K.gguf`); wllama
 *    on WASM, the hashing embedder so only the reasoner differs from the rules rows, the call
 *    budget lifted (`llm.budget` 10,000 per event) so every operation reaches the model and the
 *    rows measure the path's full cost (the toy's output is mostly invalid: repairs and
 *    fallbacks to rules are part of that cost). `--llm-runs` fresh contexts, each:
 *    - model load, createAtomem → `status().llm` active (polled every 20 ms), cold (first in
 *      the context) and warm (second: the GGUF is in wllama's OPFS cache) — baseline: the empty
 *      worker's cold / warm start;
 *    - `track()` round trip p50/p95 with the model active: events only stored and deferred
 *      (`llm.idleMs` 60 s and `config.batchEvents` 1000, so neither the idle timer nor the
 *      every-8th-event batch runs inside the timing) — baseline: the rules-mode hashing track()
 *      figure of row 2;
 *    - idle batch: 8 events tracked with `llm.idleMs` 200 (and `batchEvents` 1000, so the 8th
 *      does not trigger the batch inside track()), then last track() → `status().llm.deferred`
 *      0 (polled every 20 ms) minus the 200 ms idle wait, per event; model calls per event and
 *      output tokens/s (of model call time) from `status().llm.costs`; and the whole batch
 *      (sweeps, profile, save: a read queued behind it answers) — baseline: the same 8 events
 *      in rules mode, processed inside track(): Σ track() / 8;
 *    - `recommend(10 candidates, { rerank: 8 })` p50 (answered by the model or fallen back to
 *      the engine's order, counted) — baseline: `recommend(same candidates)` on the same instance.
 *
 * 6. the shop model (catalog vector file v2, `atomem-vectors --log`): a file made once in Node,
 *    untimed, for a `--shop-catalog`-product catalog (hashing embedder) from a seeded synthetic
 *    order log (`--shop-users` shoppers with two favourite departments each) — the shop model
 *    and SASRec (`--shop-sasrec-epochs`: training length does not change inference cost) —
 *    served with an ETag (304 on `If-None-Match`); per fresh context: the first visit
 *    (createAtomem → first recommendation, the file downloaded), 30 shopper events,
 *    `recommend(10 candidates)` p50, and the returning visit (revalidated, models from
 *    IndexedDB) — baselines: the same with the file's content rows alone (format v1).
 *
 * The page (`bench/browser/`) is served by a Vite dev server rooted at the repo, so it imports
 * `src/` and the engine worker starts from source; USE-lite's files come from the built
 * package's `dist/assets/` (run `npm run build` first). Chromium is Debian's, never downloaded.
 *
 * 7. `--shop-only --whole-catalog`: whole-catalog `recommend({ limit: 20 })` (no candidates) on
 *    the `--shop-catalog` file after 30 shopper events, p50/p95 — baseline: a bare dot-product
 *    scan of the same file's collaborative vectors (top 20), in the page, same run; and the
 *    engine worker's heap after the timed calls (over the DevTools protocol).
 *
 *   node -C atomem-source --import tsx packages/bench/src/browser.ts [--runs N] [--llm-runs N] [--catalog N] [--json FILE]
 *                                [--shop-runs N] [--shop-catalog N] [--shop-only] [--whole-catalog]
 */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright';
import { createServer, defaultClientConditions, type Plugin, type ViteDevServer } from 'vite';
import { createHashingEmbedder, itemText, Rng } from 'atomem/engine';
import { encodeCatalogFile, encodeCatalogVectors } from 'atomem/protocol';
import { trainSasrec, trainShopModel, type ShopInteraction } from 'atomem/shop';
import { FIRST_VISIT_BUDGET, measureFirstVisit, type FirstVisit, type FirstVisitResult } from './first-visit.js';
import type { BenchApi, IdleBatchResult, OpenResult, PageInfo, RerankResult, ShopModelResult, WholeCatalogResult } from '../../bench/browser/page.js';
import { productCatalog } from '../browser/products.js';

/** The repository root (the Vite dev server's root). */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** The built package's shipped assets (USE-lite, tfjs wasm), as the page fetches them. */
const ASSETS = join(ROOT, 'packages/atomem/dist/assets');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const PAGE_PATH = '/packages/bench/browser/index.html';
/** Per page call; a USE-lite cold start takes seconds, not minutes. */
const CALL_TIMEOUT_MS = 300_000;

/** The toy GGUF of the language-model rows: read where it lies (outside the repo), never copied. */
const MODEL_PATH = join(ROOT, '../shared/models/stories260K/stories260K.gguf');
const MODEL_ROUTE = '/bench-models/stories260K.gguf';
/** Where the page fetches the catalog vectors made in the warm-up (as a shop would host them). */
const VECTORS_ROUTE = '/bench-vectors/catalog.bin';
/** The catalog vector file, once made (see {@link benchModels}). */
let vectorBytes: Buffer | undefined;
/** Where the page fetches the shop's v2 file and its content-only (v1) twin (served with an ETag). */
const SHOP_ROUTE = '/bench-shop/catalog-v2.bin';
const SHOP_V1_ROUTE = '/bench-shop/catalog-v1.bin';
/** The two files, once made (see {@link makeShopFiles}). */
const shopFiles: Record<string, { bytes: Buffer; etag: string }> = {};
/** Shop-model rows: shopper events before the timed recommendations, samples, warm-up. */
const SHOP = { events: 30, samples: 50, warmup: 5 };

/**
 * The shop's files for the shop-model rows (untimed): a seeded order log of `users` shoppers over
 * `n` products (each shopper: two favourite departments, 10–30 events, mostly there), content
 * vectors of the hashing embedder (the engine's `hashing`, 256-d), the shop model and SASRec
 * trained as `atomem-vectors --log` does, written as v2; and the same content rows as v1.
 */
async function makeShopFiles(n: number, users: number, sasrecEpochs: number, easeItems?: number): Promise<{ rows: number; seconds: number }> {
  const t0 = performance.now();
  const items = productCatalog(n);
  const embedder = createHashingEmbedder({ dim: 256 });
  const vectors = (await embedder.embed(items.map((it) => itemText(it)))).map((e) => e.vector);
  const rng = new Rng(2026);
  const byDept = new Map<string, string[]>();
  for (const it of items) byDept.set(it.categories![0], [...(byDept.get(it.categories![0]) ?? []), it.id]);
  const depts = [...byDept.values()];
  const log: ShopInteraction[] = [];
  const t = Date.UTC(2026, 0, 1);
  for (let u = 0; u < users; u++) {
    const fav = [depts[rng.int(depts.length)], depts[rng.int(depts.length)]];
    const len = 10 + rng.int(21);
    for (let k = 0; k < len; k++) {
      const pool = rng.next() < 0.85 ? fav[k % 2] : depts[rng.int(depts.length)];
      log.push({ user: `u${u}`, item: pool[rng.int(pool.length)], at: t + (u * 40 + k) * 60_000, action: k % 4 === 0 ? 'purchase' : 'click' });
    }
  }
  const catalog = items.map((it) => it.id);
  const model = trainShopModel(log, {
    catalog,
    ...(easeItems !== undefined ? { easeItems } : {}),
    content: { embedder: embedder.id, vectors: new Map(items.map((it, i) => [it.id, vectors[i]])) },
  });
  const index = new Map(catalog.map((id, i) => [id, i + 1]));
  const seqs = new Map<string, number[]>();
  for (const r of log) seqs.set(r.user, [...(seqs.get(r.user) ?? []), index.get(r.item)!]);
  const { weights } = await trainSasrec(
    [...seqs.values()].map((q) => Int32Array.from(q)),
    catalog.length,
    { epochs: sasrecEpochs, seed: 2026 },
  );
  const v2 = Buffer.from(
    encodeCatalogFile({
      embedder,
      items,
      vectors,
      shop: { model, sasrec: { weights, items: catalog }, info: { bench: 'bench:browser synthetic log', logRows: log.length, users } },
    }),
  );
  const v1 = Buffer.from(encodeCatalogVectors(embedder, items, vectors));
  shopFiles[SHOP_ROUTE] = { bytes: v2, etag: `"v2-${v2.length}"` };
  shopFiles[SHOP_V1_ROUTE] = { bytes: v1, etag: `"v1-${v1.length}"` };
  return { rows: log.length, seconds: (performance.now() - t0) / 1000 };
}
/** Language-model rows: see the header comment. */
const LLM = {
  trackEvents: 40,
  trackWarmup: 5,
  deferIdleMs: 60_000,
  batchEvents: 1000,
  idleEvents: 8,
  idleMs: 200,
  rerankTop: 8,
  rerankSamples: 3,
  plainSamples: 20,
  budget: { maxCalls: 10_000, perEvents: 1 },
};

/** The baseline workers, served as virtual modules (same URLs in bench/browser/page.ts). */
const VIRTUAL_WORKERS: Record<string, string> = {
  '/bench/browser/empty-worker.virtual.js': 'self.onmessage = (e) => self.postMessage(e.data);\n',
  '/bench/browser/echo-worker.virtual.js': "import { expose } from 'comlink';\nexpose({ echo: (x) => x });\n",
};

/** One figure of the table (and of `--json`). `ratio` is always value / baselineValue. */
export interface BrowserBenchResult {
  name: string;
  value: number;
  unit: 'ms' | 'texts/s';
  baseline: string;
  baselineValue: number;
  ratio: number;
  /** 95th percentile of the samples (nearest rank; the maximum when there are fewer than 20). */
  p95?: number;
  /** Number of samples behind `value`. */
  n: number;
}

function log(msg: string): void {
  process.stderr.write(`[bench:browser] ${msg}\n`);
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function fmtMs(ms: number): string {
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 100) return `${ms.toFixed(2)} ms`;
  return `${ms.toFixed(0)} ms`;
}

function fmtValue(v: number, unit: BrowserBenchResult['unit']): string {
  return unit === 'ms' ? fmtMs(v) : `${v.toFixed(0)} texts/s`;
}

function fmtRatio(r: BrowserBenchResult): string {
  if (r.unit === 'texts/s') return `${r.ratio < 0.01 ? r.ratio.toExponential(1) : r.ratio.toFixed(3)}× (the baseline ${(1 / r.ratio).toFixed(0)}× faster)`;
  return `${r.ratio >= 100 ? r.ratio.toFixed(0) : r.ratio.toFixed(1)}× the baseline`;
}

function benchWorkers(): Plugin {
  return {
    name: 'atomem-bench-workers',
    enforce: 'pre',
    resolveId(id) {
      const path = id.split('?')[0];
      return path in VIRTUAL_WORKERS ? path : null;
    },
    load(id) {
      return VIRTUAL_WORKERS[id] ?? null;
    },
  };
}

/** Serves the GGUF from outside the repo at {@link MODEL_ROUTE} (Vite's fs.allow keeps `/@fs/` inside it). */
function benchModels(): Plugin {
  return {
    name: 'atomem-bench-models',
    configureServer(server) {
      server.middlewares.use(MODEL_ROUTE, (req, res, next) => {
        if (req.method !== 'GET' && req.method !== 'HEAD') return next();
        const { size, mtimeMs } = statSync(MODEL_PATH);
        res.statusCode = 200;
        res.setHeader('Content-Type', 'application/octet-stream');
        res.setHeader('Content-Length', String(size));
        res.setHeader('ETag', `"${size}-${Math.round(mtimeMs)}"`);
        res.setHeader('Cache-Control', 'no-cache');
        res.end(req.method === 'HEAD' ? undefined : readFileSync(MODEL_PATH));
      });
      server.middlewares.use((req, res, next) => {
        const file = shopFiles[(req.url ?? '').split('?')[0]];
        if (req.method !== 'GET' || !file) return next();
        res.setHeader('ETag', file.etag);
        res.setHeader('Cache-Control', 'no-cache');
        if (req.headers['if-none-match'] === file.etag) {
          res.statusCode = 304;
          res.end();
          return;
        }
        res.statusCode = 200;
        res.setHeader('Content-Type', 'application/octet-stream');
        res.setHeader('Content-Length', String(file.bytes.length));
        res.end(file.bytes);
      });
      server.middlewares.use(VECTORS_ROUTE, (req, res, next) => {
        if (req.method !== 'GET' || !vectorBytes) return next();
        res.statusCode = 200;
        res.setHeader('Content-Type', 'application/octet-stream');
        res.setHeader('Content-Length', String(vectorBytes.length));
        res.setHeader('Cache-Control', 'no-cache');
        res.end(vectorBytes);
      });
    },
  };
}

/** dist/assets must hold USE-lite (with `.bin` shards) and the tfjs wasm binaries. */
function checkAssets(): void {
  const model = join(ASSETS, 'use-lite/model.json');
  const wasm = join(ASSETS, 'tfjs-wasm/tfjs-backend-wasm-simd.wasm');
  let ok = existsSync(model) && existsSync(wasm);
  if (ok) {
    const manifest = JSON.parse(readFileSync(model, 'utf8')) as { weightsManifest: { paths: string[] }[] };
    ok = manifest.weightsManifest.every((g) => g.paths.every((p) => p.endsWith('.bin') && existsSync(join(ASSETS, 'use-lite', p))));
  }
  if (!ok) {
    process.stderr.write(
      'bench:browser: packages/atomem/dist/assets/ is missing or incomplete (USE-lite model, .bin shards, tfjs wasm). Run `npm run build` first.\n',
    );
    process.exit(2);
  }
}

async function startVite(): Promise<{ server: ViteDevServer; base: string }> {
  const server = await createServer({
    configFile: false,
    root: ROOT,
    logLevel: 'silent',
    // why: its own dependency cache, so it never invalidates the test runner's.
    cacheDir: join(ROOT, 'node_modules/.vite/bench-browser'),
    server: { port: 0, host: '127.0.0.1', hmr: false },
    // why: find every dependency (the worker's lazy tfjs too) before the first page asks, so no
    // re-optimisation happens mid-run.
    optimizeDeps: { entries: ['packages/bench/browser/page.ts', 'packages/atomem/src/worker/worker.ts'] },
    // why: in-repo imports of atomem resolve to its sources (the atomem-source export condition), as in the tests
    resolve: { conditions: ['atomem-source', ...defaultClientConditions] },
    plugins: [benchWorkers(), benchModels()],
  });
  await server.listen();
  const address = server.httpServer?.address() as AddressInfo | null;
  if (!address) throw new Error('the Vite dev server did not start listening');
  return { server, base: `http://127.0.0.1:${address.port}` };
}

/** A fresh browser context (own HTTP cache, own IndexedDB) with the bench page loaded. */
async function freshPage(browser: Browser, base: string): Promise<{ context: BrowserContext; page: Page }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) log(`page console: ${m.text()}`);
  });
  page.on('response', (res) => {
    if (res.status() >= 400 && !res.url().endsWith('/favicon.ico')) log(`HTTP ${res.status()} for ${res.url()}`);
  });
  await page.goto(`${base}${PAGE_PATH}`);
  await page.waitForFunction(() => window.__bench !== undefined, undefined, { timeout: 60_000 });
  return { context, page };
}

/**
 * Heap of every dedicated worker of the browser (the engine worker of the one open page), read
 * over the DevTools protocol (`Runtime.getHeapUsage` in each worker target): V8's used heap and
 * the array buffers' backing stores, in MB. The page cannot see a worker's heap.
 */
async function workerHeaps(browser: Browser): Promise<{ url: string; usedMB: number; buffersMB: number }[]> {
  const cdp = await browser.newBrowserCDPSession();
  try {
    const { targetInfos } = (await cdp.send('Target.getTargets')) as { targetInfos: { targetId: string; type: string; url: string }[] };
    const pending = new Map<number, (x: Record<string, number>) => void>();
    let next = 0;
    cdp.on('Target.receivedMessageFromTarget', (e: { message: string }) => {
      const m = JSON.parse(e.message) as { id: number; result?: Record<string, number> };
      pending.get(m.id)?.(m.result ?? {});
      pending.delete(m.id);
    });
    const out: { url: string; usedMB: number; buffersMB: number }[] = [];
    for (const t of targetInfos.filter((x) => x.type === 'worker')) {
      const { sessionId } = (await cdp.send('Target.attachToTarget', { targetId: t.targetId, flatten: false })) as { sessionId: string };
      const id = ++next;
      const heap = await new Promise<Record<string, number>>((resolve) => {
        pending.set(id, resolve);
        void cdp.send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method: 'Runtime.getHeapUsage', params: {} }) });
      });
      await cdp.send('Target.detachFromTarget', { sessionId });
      out.push({ url: t.url, usedMB: (heap.usedSize ?? 0) / 2 ** 20, buffersMB: (heap.backingStorageSize ?? 0) / 2 ** 20 });
    }
    return out;
  } finally {
    await cdp.detach();
  }
}

/** Call `window.__bench[name](arg)` in the page. */
async function call<K extends keyof BenchApi>(page: Page, name: K, arg?: Parameters<BenchApi[K]>[0]): Promise<Awaited<ReturnType<BenchApi[K]>>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`page call ${name} timed out after ${CALL_TIMEOUT_MS / 1000} s`)), CALL_TIMEOUT_MS);
  });
  try {
    const run = page.evaluate(([n, a]) => (window.__bench![n as keyof BenchApi] as (x: unknown) => unknown)(a), [name, arg ?? null] as [string, unknown]);
    return (await Promise.race([run, timeout])) as Awaited<ReturnType<BenchApi[K]>>;
  } finally {
    clearTimeout(timer);
  }
}

/** The shop-model rows from the runs of {@link BenchApi.shopModel}. */
function shopRows(runs: ShopModelResult[], n: number, users: number, epochs: number): BrowserBenchResult[] {
  const kib = (b: number): string => `${(b / 1024).toFixed(0)} KiB`;
  const v2 = shopFiles[SHOP_ROUTE].bytes.length;
  const v1 = shopFiles[SHOP_V1_ROUTE].bytes.length;
  const out: BrowserBenchResult[] = [];
  const row = (name: string, samples: number[], baseline: string, base: number[]): void => {
    const value = pct(samples, 50);
    const baselineValue = pct(base, 50);
    out.push({ name, value, unit: 'ms', baseline, baselineValue, ratio: value / baselineValue, p95: pct(samples, 95), n: samples.length });
  };
  const rec = runs.flatMap((r) => r.shop.recommendMs);
  const target = pct(rec, 50) <= 5 ? 'met' : 'MISSED';
  row(
    `recommend(10 candidates) with the shop model (catalog vector file v2: ${n} products, shop model + SASRec from a ${users}-shopper synthetic log, ${epochs} epochs), after ${SHOP.events} shopper events; target ≤ 5 ms p50: ${target}`,
    rec,
    'recommend(the same 10 candidates) in the content space (the v1 file of the same content rows)',
    runs.flatMap((r) => r.content.recommendMs),
  );
  row(
    `first visit with the v2 file (${kib(v2)} downloaded: ${kib(runs[0].shop.firstBytes)}): createAtomem → first recommendation, hashing embedder, 0 products embedded`,
    runs.map((r) => r.shop.firstMs),
    `the same first visit with the v1 file (${kib(v1)}, content rows only)`,
    runs.map((r) => r.content.firstMs),
  );
  row(
    `returning visit with the v2 file (revalidated: 304, ${runs.map((r) => r.shop.againBytes).reduce((a, b) => Math.max(a, b), 0)} bytes downloaded; shop model and SASRec from IndexedDB): createAtomem → first recommendation`,
    runs.map((r) => r.shop.againMs),
    'the same returning visit with the v1 file (no request: every vector cached)',
    runs.map((r) => r.content.againMs),
  );
  return out;
}

function printRows(results: BrowserBenchResult[]): void {
  console.log('| what | p50 | p95 | n | baseline (same run) | baseline p50 | ratio |');
  console.log('|---|---:|---:|---:|---|---:|---|');
  for (const r of results) {
    console.log(
      `| ${r.name} | ${fmtValue(r.value, r.unit)} | ${r.p95 === undefined ? '' : fmtValue(r.p95, r.unit)} | ${r.n} | ${r.baseline} | ${fmtValue(r.baselineValue, r.unit)} | ${fmtRatio(r)} |`,
    );
  }
}

/** The first-visit table: bytes transferred and time to first recommendation, with and without the vector file. */
function printFirstVisit(fv: FirstVisitResult): void {
  const mb = (b: number): string => `${(b / 1e6).toFixed(2)} MB`;
  const p50 = (xs: FirstVisit[], f: (v: FirstVisit) => number): number => pct(xs.map(f), 50);
  const without = p50(fv.withoutVectors, (v) => v.ttfrMs);
  console.log(
    `First visit of the built package (static loopback server, bodies uncompressed, fresh browser context each; ${fv.catalog}-product catalog; vector file ${mb(fv.vectorFileBytes)}):\n`,
  );
  console.log(
    '| first visit | bytes transferred (p50) | of which USE-lite (code, wasm, model) | of which vector file | time to first recommendation p50 | p95 | n | budget | baseline (same run) | ratio |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---|---|---|');
  const row = (label: string, xs: FirstVisit[], budget: number, baseline: string, base: number): void => {
    const bytes = p50(xs, (v) => v.bytes);
    const ttfr = p50(xs, (v) => v.ttfrMs);
    console.log(
      `| ${label} | ${mb(bytes)} | ${mb(p50(xs, (v) => v.modelBytes))} | ${mb(p50(xs, (v) => v.vectorBytes))} | ${fmtMs(ttfr)} | ${fmtMs(
        pct(
          xs.map((v) => v.ttfrMs),
          95,
        ),
      )} | ${xs.length} | ≤ ${mb(budget)}: ${bytes <= budget ? 'met' : 'MISSED'} | ${baseline} | ${(ttfr / base).toFixed(2)}× |`,
    );
  };
  row(
    "with the shop's catalog vector file (USE-lite never fetched: `status().embedder.state` 'not loaded')",
    fv.withVectors,
    FIRST_VISIT_BUDGET.withVectors,
    'the first visit without the file (next row)',
    without,
  );
  row(
    `without it (USE-lite uint8 fetched, ${fv.catalog} products embedded on the device)`,
    fv.withoutVectors,
    FIRST_VISIT_BUDGET.withoutVectors,
    'itself',
    without,
  );
}

async function main(): Promise<void> {
  const program = new Command()
    .name('bench:browser')
    .description('atomem in headless Chromium: worker start, track() round trip, IndexedDB load, embedder throughput')
    .option(
      '--runs <n>',
      'fresh browser contexts per start configuration; IndexedDB loads are timed 4×N times, throughput N times',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1 || n > 100) throw new InvalidArgumentError('--runs must be an integer in 1..100');
        return n;
      },
      5,
    )
    .option(
      '--catalog <n>',
      "products in the engine's catalog for the start and track() figures (embedded at start)",
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 10 || n > 256) throw new InvalidArgumentError('--catalog must be an integer in 10..256');
        return n;
      },
      256,
    )
    .option(
      '--llm-runs <n>',
      `fresh browser contexts for the language-model rows (stories260K; skipped when ${MODEL_PATH} is missing, or with 0)`,
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 100) throw new InvalidArgumentError('--llm-runs must be an integer in 0..100');
        return n;
      },
      3,
    )
    .option(
      '--first-visit-runs <n>',
      'first visits (fresh contexts) of the built package per configuration, with and without the catalog vector file; 0 skips them',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 100) throw new InvalidArgumentError('--first-visit-runs must be an integer in 0..100');
        return n;
      },
      3,
    )
    .option('--first-visit-catalog <n>', 'products in the first-visit catalog (default: --catalog; up to 5000, titles repeat past 256)', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 10 || n > 5000) throw new InvalidArgumentError('--first-visit-catalog must be an integer in 10..5000');
      return n;
    })
    .option('--first-visit-only', 'only the first-visit rows (no Vite dev server, no other rows)')
    .option(
      '--shop-runs <n>',
      'fresh browser contexts for the shop-model rows (catalog vector file v2); 0 skips them',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0 || n > 100) throw new InvalidArgumentError('--shop-runs must be an integer in 0..100');
        return n;
      },
      3,
    )
    .option(
      '--shop-catalog <n>',
      'products in the shop-model rows (up to 100000, titles repeat past 256)',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 10 || n > 100_000) throw new InvalidArgumentError('--shop-catalog must be an integer in 10..100000');
        return n;
      },
      1682,
    )
    .option(
      '--shop-users <n>',
      'shoppers in the synthetic order log of the shop-model rows',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 10 || n > 100_000) throw new InvalidArgumentError('--shop-users must be an integer in 10..100000');
        return n;
      },
      943,
    )
    .option(
      '--shop-sasrec-epochs <n>',
      "SASRec epochs of the shop-model rows' file (inference cost does not depend on it)",
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1 || n > 1000) throw new InvalidArgumentError('--shop-sasrec-epochs must be an integer in 1..1000');
        return n;
      },
      5,
    )
    .option('--shop-only', 'only the shop-model rows')
    .option(
      '--whole-catalog',
      'with --shop-only: whole-catalog recommend({ limit: 20 }) p50/p95 on the --shop-catalog file, beside a bare dot-product scan of its vectors',
    )
    .option('--json <file>', 'also write the results as JSON')
    .parse();
  const opts = program.opts<{
    runs: number;
    llmRuns: number;
    catalog: number;
    firstVisitRuns: number;
    firstVisitCatalog?: number;
    firstVisitOnly?: boolean;
    shopRuns: number;
    shopCatalog: number;
    shopUsers: number;
    shopSasrecEpochs: number;
    shopOnly?: boolean;
    wholeCatalog?: boolean;
    json?: string;
  }>();
  if (opts.wholeCatalog && !opts.shopOnly) throw new InvalidArgumentError('--whole-catalog needs --shop-only');
  if (opts.shopOnly && opts.shopRuns < 1) throw new InvalidArgumentError('--shop-only needs --shop-runs ≥ 1');
  if (opts.firstVisitOnly) {
    if (opts.firstVisitRuns < 1) throw new InvalidArgumentError('--first-visit-only needs --first-visit-runs ≥ 1');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      const began = performance.now();
      const fv = await measureFirstVisit(browser, { runs: opts.firstVisitRuns, catalog: opts.firstVisitCatalog ?? opts.catalog, log });
      console.log(`atomem first visit — Chromium ${browser.version()}, ${fv.runs} runs, ${((performance.now() - began) / 1000).toFixed(0)} s\n`);
      printFirstVisit(fv);
      if (opts.json) writeFileSync(opts.json, `${JSON.stringify({ chromium: browser.version(), firstVisit: fv }, null, 2)}\n`);
    } finally {
      await browser.close();
    }
    return;
  }
  const runs = opts.runs;
  const began = performance.now();
  const withModel = !opts.shopOnly && opts.llmRuns > 0 && existsSync(MODEL_PATH);
  if (!withModel) log(opts.llmRuns === 0 ? 'language-model rows skipped (--llm-runs 0)' : `language-model rows skipped: no model at ${MODEL_PATH}`);

  checkAssets();
  const { server, base } = await startVite();
  const assetsBaseUrl = `${base}/packages/atomem/dist/assets/`;
  const runId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  let browser: Browser | undefined;
  try {
    log(`Vite dev server at ${base}; launching ${CHROMIUM}`);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const version = browser.version();

    // Warm-up, discarded: the dev server transforms every module once and pre-bundles the
    // dependencies, so the measured cold starts pay the browser's cost, not Vite's.
    log('warm-up (Vite transforms and dependency pre-bundling; discarded)');
    for (let attempt = 1; ; attempt++) {
      const { context, page } = await freshPage(browser, base);
      try {
        await call(page, 'emptyWorker');
        await call(page, 'comlinkRoundTrip', { samples: 2, block: 2, warmup: 2 });
        for (const embedder of opts.shopOnly ? (['hashing'] as const) : (['hashing', 'use-lite'] as const)) {
          await call(page, 'start', { embedder, profile: `bench-${runId}-warmup-${embedder}`, assetsBaseUrl, catalog: 16 });
          await call(page, 'track', { events: 3, warmup: 0 });
          await call(page, 'cleanup');
        }
        await call(page, 'idbLoad', { profile: `bench-${runId}-warmup-idb`, memories: 10, runs: 1 });
        await call(page, 'cleanup');
        if (withModel) {
          // wllama's modules, and one idle batch and rerank through the model
          const o = await call(page, 'open', {
            profile: `bench-${runId}-warmup-llm`,
            catalog: 16,
            llm: { modelUrl: `${base}${MODEL_ROUTE}`, idleMs: LLM.idleMs, budget: LLM.budget },
            batchEvents: LLM.batchEvents,
          });
          if (o.llm === 'rules') throw new Error(`no language model loaded: ${o.attempts.join('; ')}`);
          await call(page, 'idleBatch', { events: 2 });
          await call(page, 'rerank', { top: 4, samples: 1, plainSamples: 1 });
          await call(page, 'cleanup');
        }
        break;
      } catch (e) {
        if (attempt >= 3) throw e;
        log(`warm-up attempt ${attempt} failed (${e instanceof Error ? e.message : String(e)}); retrying`);
      } finally {
        await context.close();
      }
    }

    // Whole-catalog rows: recommend({ limit }) with no candidates on the shop file, beside a bare scan of its vectors.
    if (opts.wholeCatalog) {
      log(`shop-model files: ${opts.shopCatalog} products, ${opts.shopUsers} synthetic shoppers, SASRec ${opts.shopSasrecEpochs} epochs (untimed)`);
      // why 2,000 EASE rows: the default 10,000 inverts a 10k × 10k Gram in Node (many minutes, untimed); retrieval and ranking cost do not depend on it
      const made = await makeShopFiles(opts.shopCatalog, opts.shopUsers, opts.shopSasrecEpochs, 2000);
      log(`shop-model file made in ${made.seconds.toFixed(1)} s: v2 ${(shopFiles[SHOP_ROUTE].bytes.length / 1024).toFixed(0)} KiB`);
      const rec: number[] = [];
      const scan: number[] = [];
      const whole: WholeCatalogResult[] = [];
      const heaps: { usedMB: number; buffersMB: number; workers: number }[] = [];
      for (let r = 0; r < opts.shopRuns; r++) {
        const { context, page } = await freshPage(browser, base);
        try {
          const res = await call(page, 'wholeCatalog', {
            profile: `bench-${runId}-whole${r}`,
            catalog: opts.shopCatalog,
            url: `${base}${SHOP_ROUTE}`,
            events: SHOP.events,
            samples: SHOP.samples,
            warmup: SHOP.warmup,
            limit: 20,
          });
          if (!res.status?.shop) throw new Error(`the shop model was not in use: ${JSON.stringify(res.status)}`);
          if (res.returned !== 20 || res.explained !== 20 || res.bought !== 0)
            throw new Error(`whole-catalog recommend returned ${res.returned} items, ${res.explained} explained, ${res.bought} bought`);
          rec.push(...res.recommendMs);
          scan.push(...res.scanMs);
          whole.push(res);
          // the engine worker's heap after the timed calls (the instance is still open)
          const w = await workerHeaps(browser);
          heaps.push({ usedMB: w.reduce((a, x) => a + x.usedMB, 0), buffersMB: w.reduce((a, x) => a + x.buffersMB, 0), workers: w.length });
          await call(page, 'cleanup');
          log(
            `whole-catalog run ${r + 1}/${opts.shopRuns}: ${res.items} items × ${res.dim}, recommend p50 ${fmtMs(pct(res.recommendMs, 50))} p95 ${fmtMs(pct(res.recommendMs, 95))}, bare scan p50 ${fmtMs(pct(res.scanMs, 50))}, worker heap ${heaps[r].usedMB.toFixed(1)} MB + ${heaps[r].buffersMB.toFixed(1)} MB array buffers (${heaps[r].workers} worker${heaps[r].workers === 1 ? '' : 's'})`,
          );
        } finally {
          await context.close();
        }
      }
      const rows: BrowserBenchResult[] = [
        {
          name: `whole-catalog recommend({ limit: 20 }), ${opts.shopCatalog} items, shop model, after ${SHOP.events} events`,
          value: pct(rec, 50),
          p95: pct(rec, 95),
          unit: 'ms',
          baseline: `bare dot-product scan of the same ${whole[0]?.dim}-d vectors (top 20, page thread)`,
          baselineValue: pct(scan, 50),
          ratio: pct(rec, 50) / Math.max(1e-6, pct(scan, 50)),
          n: rec.length,
        },
      ];
      console.log(
        `atomem browser benchmark, whole-catalog rows — Chromium ${version}, ${opts.shopRuns} runs, ${((performance.now() - began) / 1000).toFixed(0)} s\n`,
      );
      printRows(rows);
      const meanOf = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
      console.log(
        `\nengine worker heap after the timed calls (DevTools Runtime.getHeapUsage, mean of ${heaps.length} runs): ${meanOf(heaps.map((h) => h.usedMB)).toFixed(1)} MB V8 heap + ${meanOf(heaps.map((h) => h.buffersMB)).toFixed(1)} MB array buffers`,
      );
      if (opts.json)
        writeFileSync(
          opts.json,
          `${JSON.stringify({ chromium: version, shopCatalog: opts.shopCatalog, results: rows, workerHeaps: heaps, runs: whole }, null, 2)}\n`,
        );
      return;
    }

    // Shop-model rows (see the header comment): one fresh context per run.
    const shopRuns: ShopModelResult[] = [];
    if (opts.shopRuns > 0) {
      log(`shop-model files: ${opts.shopCatalog} products, ${opts.shopUsers} synthetic shoppers, SASRec ${opts.shopSasrecEpochs} epochs (untimed)`);
      const made = await makeShopFiles(opts.shopCatalog, opts.shopUsers, opts.shopSasrecEpochs);
      log(
        `shop-model files made in ${made.seconds.toFixed(1)} s from ${made.rows} log rows: v2 ${(shopFiles[SHOP_ROUTE].bytes.length / 1024).toFixed(0)} KiB, v1 ${(shopFiles[SHOP_V1_ROUTE].bytes.length / 1024).toFixed(0)} KiB`,
      );
      for (let r = 0; r < opts.shopRuns; r++) {
        const { context, page } = await freshPage(browser, base);
        try {
          const res = await call(page, 'shopModel', {
            profile: `bench-${runId}-shop${r}`,
            catalog: opts.shopCatalog,
            url: `${base}${SHOP_ROUTE}`,
            baselineUrl: `${base}${SHOP_V1_ROUTE}`,
            ...SHOP,
          });
          const s = res.shop;
          if (s.firstStatus?.source !== 'download' || !s.firstStatus.shop?.sequence)
            throw new Error(`the v2 file was not used with its shop model: ${JSON.stringify(s.firstStatus)}`);
          if (s.againStatus?.source !== 'revalidated' || !s.againStatus.shop)
            throw new Error(`the returning visit did not revalidate the v2 file: ${JSON.stringify(s.againStatus)}`);
          if (res.content.firstStatus?.shop !== null || res.content.firstStatus.version !== 1)
            throw new Error(`the v1 baseline ran with ${JSON.stringify(res.content.firstStatus)}`);
          shopRuns.push(res);
          await call(page, 'cleanup');
          log(
            `shop run ${r + 1}/${opts.shopRuns}: first visit ${fmtMs(s.firstMs)} (${s.firstBytes} B; v1 ${fmtMs(res.content.firstMs)}), returning ${fmtMs(s.againMs)} (${s.againBytes} B; v1 ${fmtMs(res.content.againMs)}), ` +
              `recommend p50 ${fmtMs(pct(s.recommendMs, 50))} (content space ${fmtMs(pct(res.content.recommendMs, 50))}); top 3 shop ${s.top.join(' ')}, content ${res.content.top.join(' ')}`,
          );
        } finally {
          await context.close();
        }
      }
    }
    if (opts.shopOnly) {
      const rows = shopRows(shopRuns, opts.shopCatalog, opts.shopUsers, opts.shopSasrecEpochs);
      const wallS = (performance.now() - began) / 1000;
      console.log(
        `atomem browser benchmark, shop-model rows — Chromium ${version}, served from source by the Vite dev server, ${opts.shopRuns} runs, ${wallS.toFixed(0)} s\n`,
      );
      printRows(rows);
      if (opts.json)
        writeFileSync(
          opts.json,
          `${JSON.stringify({ chromium: version, shopRuns: opts.shopRuns, shopCatalog: opts.shopCatalog, shopUsers: opts.shopUsers, results: rows, runs: shopRuns.map((r) => ({ ...r, shop: { ...r.shop }, content: { ...r.content } })) }, null, 2)}\n`,
        );
      return;
    }

    let info: PageInfo | undefined;
    const emptyCold: number[] = [];
    const emptyWarm: number[] = [];
    const comlink: number[] = [];
    type Starts = { cold: number[]; warm: number[]; coldModel: number[]; warmModel: number[]; track: number[] };
    const starts: Record<'hashing' | 'use-lite', Starts> = {
      hashing: { cold: [], warm: [], coldModel: [], warmModel: [], track: [] },
      'use-lite': { cold: [], warm: [], coldModel: [], warmModel: [], track: [] },
    };
    const expected = { hashing: 'hashing/cpu/256', 'use-lite': 'use-lite/wasm/512' };

    // The catalog's vectors as a shop would ship them (made once, untimed, then served by Vite).
    {
      const { context, page } = await freshPage(browser, base);
      try {
        vectorBytes = Buffer.from(await call(page, 'makeCatalogVectors', { assetsBaseUrl, catalog: opts.catalog }), 'base64');
        await call(page, 'cleanup');
        log(`catalog vectors for ${opts.catalog} products: ${(vectorBytes.length / 1024).toFixed(0)} KiB at ${VECTORS_ROUTE}`);
      } finally {
        await context.close();
      }
    }
    const withVectors: number[] = [];

    /** recommend with a stated intent (use-lite instance of each run), and without, interleaved. */
    const intentRows = { intentMs: [] as number[], plainMs: [] as number[], selectMs: [] as number[], candidates: 0 };
    for (let r = 0; r < runs; r++) {
      {
        const { context, page } = await freshPage(browser, base);
        try {
          const v = await call(page, 'startWithVectors', {
            profile: `bench-${runId}-r${r}-vectors`,
            assetsBaseUrl,
            catalog: opts.catalog,
            url: `${base}${VECTORS_ROUTE}`,
          });
          if (v.embedded !== 0) throw new Error(`with catalog vectors the engine still embedded ${v.embedded} products`);
          withVectors.push(v.coldMs);
          await call(page, 'cleanup');
          log(`run ${r + 1}/${runs}: use-lite start cold with catalog vectors ${fmtMs(v.coldMs)}`);
        } finally {
          await context.close();
        }
      }
      {
        const { context, page } = await freshPage(browser, base);
        try {
          info ??= await call(page, 'info');
          const w = await call(page, 'emptyWorker');
          emptyCold.push(w.coldMs);
          emptyWarm.push(w.warmMs);
          comlink.push(...(await call(page, 'comlinkRoundTrip', { samples: 200, block: 10, warmup: 50 })));
          log(`run ${r + 1}/${runs}: empty worker cold ${fmtMs(w.coldMs)}, warm ${fmtMs(w.warmMs)}`);
        } finally {
          await context.close();
        }
      }
      for (const embedder of ['hashing', 'use-lite'] as const) {
        const { context, page } = await freshPage(browser, base);
        try {
          const s = await call(page, 'start', { embedder, profile: `bench-${runId}-r${r}-${embedder}`, assetsBaseUrl, catalog: opts.catalog });
          if (s.embedder !== expected[embedder] || s.llm !== 'rules')
            throw new Error(`the engine runs ${s.embedder} with ${s.llm}, expected ${expected[embedder]} with rules`);
          if (s.catalog !== opts.catalog) throw new Error(`the page used ${s.catalog} products, expected ${opts.catalog}`);
          const st = starts[embedder];
          st.cold.push(s.coldMs);
          st.warm.push(s.warmMs);
          if (s.coldEmbedderMs !== null) st.coldModel.push(s.coldEmbedderMs);
          if (s.warmEmbedderMs !== null) st.warmModel.push(s.warmEmbedderMs);
          const t = await call(page, 'track', { events: 200, warmup: 10 });
          starts[embedder].track.push(...t);
          if (embedder === 'use-lite') {
            // the stated intent on the instance that just learned 210 events: its USE-lite embedding included
            const it = await call(page, 'intent', { samples: 30, warmup: 3 });
            if (it.explained === 0) throw new Error('recommend with an intent explained no item by the intent');
            intentRows.intentMs.push(...it.intentMs);
            intentRows.plainMs.push(...it.plainMs);
            intentRows.selectMs.push(...it.selectMs);
            intentRows.candidates = it.candidates;
            log(
              `run ${r + 1}/${runs}: recommend(${it.candidates}, { intent }) p50 ${fmtMs(pct(it.intentMs, 50))}, without intent ${fmtMs(pct(it.plainMs, 50))}, intentMemories alone ${fmtMs(pct(it.selectMs, 50))}`,
            );
          }
          await call(page, 'cleanup');
          const model = (ms: number | null): string => (ms === null ? '' : ` (embedder ready at ${fmtMs(ms)})`);
          log(
            `run ${r + 1}/${runs}: ${embedder} start cold ${fmtMs(s.coldMs)}${model(s.coldEmbedderMs)}, warm ${fmtMs(s.warmMs)}${model(s.warmEmbedderMs)}; track p50 ${fmtMs(pct(t, 50))} (mean of the first 20 ${fmtMs(mean(t.slice(0, 20)))}, of the last 20 ${fmtMs(mean(t.slice(-20)))})`,
          );
        } finally {
          await context.close();
        }
      }
    }

    log(`IndexedDB: saving 1,000 memories, then ${4 * runs} timed loads`);
    const idb = await (async () => {
      const { context, page } = await freshPage(browser, base);
      try {
        const res = await call(page, 'idbLoad', { profile: `bench-${runId}-idb`, memories: 1000, runs: 4 * runs });
        await call(page, 'cleanup');
        return res;
      } finally {
        await context.close();
      }
    })();

    log(`embedder throughput: USE-lite and hashing, ${runs} passes each`);
    const tp = await (async () => {
      const { context, page } = await freshPage(browser, base);
      try {
        return await call(page, 'throughput', { assetsBaseUrl, runs, batch: 64 });
      } finally {
        await context.close();
      }
    })();

    // Language-model rows (see the header comment): one fresh context per run.
    type LlmRun = {
      cold: OpenResult;
      warm: OpenResult;
      track: number[];
      deferredAfterTrack: number;
      batch: IdleBatchResult;
      rerank: RerankResult;
      rulesTrack: number[];
    };
    const llmRuns: LlmRun[] = [];
    if (withModel) {
      const modelUrl = `${base}${MODEL_ROUTE}`;
      const llmOpts = (idleMs: number) => ({ modelUrl, idleMs, budget: LLM.budget });
      for (let r = 0; r < opts.llmRuns; r++) {
        const { context, page } = await freshPage(browser, base);
        try {
          const p = `bench-${runId}-llm${r}`;
          const active = (o: OpenResult, what: string): OpenResult => {
            if (o.llm !== 'wasm' || o.llmMs === null || o.embedder !== 'hashing/cpu/256')
              throw new Error(`${what}: the engine runs ${o.embedder} with ${o.llm} (${o.attempts.join('; ')}), expected hashing/cpu/256 with wllama on wasm`);
            return o;
          };
          // cold model load, then track() with every event deferred
          const cold = active(
            await call(page, 'open', { profile: `${p}-defer`, catalog: opts.catalog, llm: llmOpts(LLM.deferIdleMs), batchEvents: LLM.batchEvents }),
            'cold model load',
          );
          const track = await call(page, 'track', { events: LLM.trackEvents, warmup: LLM.trackWarmup });
          const st = await call(page, 'llmStatus');
          if (st.deferred !== LLM.trackEvents + LLM.trackWarmup)
            log(`odd: ${st.deferred} events deferred after ${LLM.trackEvents + LLM.trackWarmup} tracks (some were processed inside the timing)`);
          // warm model load (GGUF in wllama's OPFS cache), the idle batch, rerank
          const warm = active(
            await call(page, 'open', { profile: `${p}-idle`, catalog: opts.catalog, llm: llmOpts(LLM.idleMs), batchEvents: LLM.batchEvents }),
            'warm model load',
          );
          const batch = await call(page, 'idleBatch', { events: LLM.idleEvents });
          if (batch.deferredAfterTrack !== LLM.idleEvents)
            log(`odd: ${batch.deferredAfterTrack} of ${LLM.idleEvents} events deferred right after the last track (a batch started early)`);
          if (batch.callEvents !== batch.costs.calls) log(`odd: ${batch.callEvents} 'llm' call events for ${batch.costs.calls} model calls in the costs`);
          const rerank = await call(page, 'rerank', { top: LLM.rerankTop, samples: LLM.rerankSamples, plainSamples: LLM.plainSamples });
          // the same events in rules mode, processed inside track()
          const rules = await call(page, 'open', { profile: `${p}-rules`, catalog: opts.catalog });
          if (rules.llm !== 'rules') throw new Error(`the rules baseline runs ${rules.llm}`);
          const rulesTrack = await call(page, 'track', { events: LLM.idleEvents, warmup: 0 });
          await call(page, 'cleanup');
          llmRuns.push({ cold, warm, track, deferredAfterTrack: st.deferred, batch, rerank, rulesTrack });
          const c = batch.costs;
          log(
            `llm run ${r + 1}/${opts.llmRuns}: model active cold ${fmtMs(cold.llmMs!)} (ready event ${fmtMs(cold.llmReadyEventMs ?? Number.NaN)}), warm ${fmtMs(warm.llmMs!)}; ` +
              `deferred track p50 ${fmtMs(pct(track, 50))}; idle batch of ${LLM.idleEvents}: deferred 0 after ${fmtMs(batch.toDeferred0Ms)}, done after ${fmtMs(batch.toDoneMs)}, ` +
              `${c.calls} calls (${c.repairs} repairs), ${c.requests} operations: ${c.succeeded} answered, fallbacks ${JSON.stringify(c.fallbacks)}, ${c.outputTokens} output tokens in ${fmtMs(c.ms)} of model time; ` +
              `rerank p50 ${fmtMs(pct(rerank.rerankMs, 50))} (${rerank.costs.succeeded}/${rerank.costs.requests} answered, ${rerank.costs.calls} calls), plain ${fmtMs(pct(rerank.plainMs, 50))}; rules Σ track/${LLM.idleEvents} ${fmtMs(mean(rulesTrack))}`,
          );
          log(
            `llm run ${r + 1}/${opts.llmRuns}: batch by operation ${Object.entries(batch.byOperation)
              .map(([op, x]) => `${op} ${x.requests} req/${x.calls} calls/${x.succeeded} ok`)
              .join(', ')}; ${batch.memories} memories`,
          );
          for (const m of new Set([...batch.fallbackMessages, ...rerank.fallbackMessages])) log(`llm run ${r + 1}/${opts.llmRuns}: fallback ${m}`);
        } finally {
          await context.close();
        }
      }
    }

    let firstVisit: FirstVisitResult | null = null;
    if (opts.firstVisitRuns > 0) {
      log(`first visits of the built package: ${opts.firstVisitRuns} per configuration`);
      firstVisit = await measureFirstVisit(browser, { runs: opts.firstVisitRuns, catalog: opts.firstVisitCatalog ?? opts.catalog, log });
    }

    // ---- results ----
    const results: BrowserBenchResult[] = [];
    const add = (name: string, samples: number[], unit: BrowserBenchResult['unit'], baseline: string, baselineValue: number, withP95 = true): void => {
      const value = pct(samples, 50);
      results.push({
        name,
        value,
        unit,
        baseline,
        baselineValue,
        ratio: value / baselineValue,
        ...(withP95 ? { p95: pct(samples, 95) } : {}),
        n: samples.length,
      });
    };
    const cat = opts.catalog;
    const coldBase = 'empty module worker + 1 postMessage answer, cold';
    const warmBase = 'empty module worker + 1 postMessage answer, warm';
    for (const embedder of ['hashing', 'use-lite'] as const) {
      const label = embedder === 'use-lite' ? 'use-lite (default)' : 'hashing';
      const st = starts[embedder];
      add(`worker start → first recommendation, ${label}, cold (fresh context, ${cat}-product catalog)`, st.cold, 'ms', coldBase, pct(emptyCold, 50));
      if (st.coldModel.length) add(`… of which: ${embedder} embedder ready in the worker, cold`, st.coldModel, 'ms', coldBase, pct(emptyCold, 50));
      add(`worker start → first recommendation, ${label}, warm (2nd createAtomem in the page)`, st.warm, 'ms', warmBase, pct(emptyWarm, 50));
      if (st.warmModel.length) add(`… of which: ${embedder} embedder ready in the worker, warm`, st.warmModel, 'ms', warmBase, pct(emptyWarm, 50));
    }
    add(
      `worker start → first recommendation, use-lite (default), cold, with the shop's catalog vectors (\`catalogVectors\`, ${(vectorBytes!.length / 1024).toFixed(0)} KiB; 0 products embedded on the device)`,
      withVectors,
      'ms',
      'the same cold start without catalog vectors (its row above)',
      pct(starts['use-lite'].cold, 50),
    );
    for (const embedder of ['hashing', 'use-lite'] as const) {
      add(
        `track() round trip, ${embedder} (durable in IndexedDB, ${starts[embedder].track.length / runs} events/run)`,
        starts[embedder].track,
        'ms',
        'bare Comlink round trip (p50 of 10-call means)',
        pct(comlink, 50),
      );
    }
    add(
      `recommend(${intentRows.candidates} candidates, { intent }), use-lite, after 210 events (the intent embedded by USE-lite each call, memories selected, intent signals)`,
      intentRows.intentMs,
      'ms',
      'recommend(the same candidates) without an intent, same instance, interleaved',
      pct(intentRows.plainMs, 50),
    );
    add(
      '… of which: intentMemories(intent) alone (the USE-lite embedding of the intent + memory selection, one RPC)',
      intentRows.selectMs,
      'ms',
      'recommend(the same candidates) without an intent, same instance, interleaved',
      pct(intentRows.plainMs, 50),
    );
    add(
      `IndexedDB MemoryStore.load() of ${idb.memories.toLocaleString('en-US')} memories (512-d), fresh connection`,
      idb.loadMs,
      'ms',
      `structuredClone of the same state (JSON.parse of its ${(idb.jsonBytes / 1e6).toFixed(1)} MB JSON: ${fmtMs(pct(idb.parseMs, 50))})`,
      pct(idb.cloneMs, 50),
    );
    add(
      `USE-lite embedding, ${tp.texts} product texts (mean ${tp.meanChars.toFixed(0)} chars), batches of 64, in the page`,
      tp.useRates,
      'texts/s',
      'hashing embedder (256-d) on the same texts',
      pct(tp.hashRates, 50),
      false,
    );
    if (shopRuns.length) results.push(...shopRows(shopRuns, opts.shopCatalog, opts.shopUsers, opts.shopSasrecEpochs));
    let llmSummary: Record<string, unknown> | null = null;
    if (llmRuns.length) {
      const sum = (f: (r: LlmRun) => number): number => llmRuns.reduce((a, r) => a + f(r), 0);
      const K = LLM.idleEvents;
      const rulesBatch = llmRuns.map((r) => r.rulesTrack.reduce((a, b) => a + b, 0) / K);
      const rulesBatchBase = `the same ${K} events in rules mode, processed inside track(): Σ track() / ${K}`;
      const calls = sum((r) => r.batch.costs.calls);
      const ops = sum((r) => r.batch.costs.requests);
      const answered = sum((r) => r.batch.costs.succeeded);
      const tokS = sum((r) => r.batch.costs.outputTokens) / (sum((r) => r.batch.costs.ms) / 1000);
      const fb = (key: 'invalid' | 'timeout' | 'budget' | 'model', f: (r: LlmRun) => Record<typeof key, number>): number => sum((r) => f(r)[key]);
      const fallbacks = (f: (r: LlmRun) => Record<'invalid' | 'timeout' | 'budget' | 'model', number>): string =>
        (['invalid', 'timeout', 'budget', 'model'] as const)
          .map((k) => [k, fb(k, f)] as const)
          .filter(([, n]) => n > 0)
          .map(([k, n]) => `${n} ${k}`)
          .join(', ') || 'none';
      const rr = { requests: sum((r) => r.rerank.costs.requests), answered: sum((r) => r.rerank.costs.succeeded), calls: sum((r) => r.rerank.costs.calls) };
      // wllama runs single-threaded unless the page is cross-origin isolated
      const model = `stories260K (wllama, WASM, ${llmRuns[0].cold.crossOriginIsolated ? 'multi-threaded' : '1 thread'})`;
      add(
        `language model load, ${model}: createAtomem → status().llm active, cold (fresh context)`,
        llmRuns.map((r) => r.cold.llmMs!),
        'ms',
        coldBase,
        pct(emptyCold, 50),
      );
      add(
        `language model load, ${model}: createAtomem → status().llm active, warm (2nd in the page, GGUF in wllama's OPFS cache)`,
        llmRuns.map((r) => r.warm.llmMs!),
        'ms',
        warmBase,
        pct(emptyWarm, 50),
      );
      add(
        `track() round trip, ${model} active, hashing: stored and deferred (llm.idleMs ${LLM.deferIdleMs / 1000} s, config.batchEvents ${LLM.batchEvents}; ${LLM.trackEvents} events/run)`,
        llmRuns.flatMap((r) => r.track),
        'ms',
        'track() round trip, rules mode, hashing (its row above)',
        pct(starts.hashing.track, 50),
      );
      add(
        `idle batch of ${K} events through ${model}: last track() → status().llm.deferred 0, minus llm.idleMs ${LLM.idleMs}, per event (${(calls / (K * llmRuns.length)).toFixed(1)} model calls/event, ${tokS.toFixed(0)} output tokens/s of model time; ${answered} of ${ops} operations answered, fallbacks: ${fallbacks((r) => r.batch.costs.fallbacks)})`,
        llmRuns.map((r) => (r.batch.toDeferred0Ms - LLM.idleMs) / K),
        'ms',
        rulesBatchBase,
        pct(rulesBatch, 50),
      );
      add(
        `… the whole idle batch (+ sweeps, profile, save; a read queued behind it answers), minus llm.idleMs, per event`,
        llmRuns.map((r) => (r.batch.toDoneMs - LLM.idleMs) / K),
        'ms',
        rulesBatchBase,
        pct(rulesBatch, 50),
      );
      add(
        `recommend(10 candidates, { rerank: ${LLM.rerankTop} }), ${model} (${rr.answered} of ${rr.requests} answered, the rest fell back to the engine's order: ${fallbacks((r) => r.rerank.costs.fallbacks)}; ${rr.calls} model calls)`,
        llmRuns.flatMap((r) => r.rerank.rerankMs),
        'ms',
        'recommend(the same 10 candidates) without rerank, same instance',
        pct(
          llmRuns.flatMap((r) => r.rerank.plainMs),
          50,
        ),
      );
      llmSummary = {
        model: MODEL_PATH,
        runtime: 'wllama',
        crossOriginIsolated: llmRuns[0].cold.crossOriginIsolated,
        settings: LLM,
        trackRulesHashingMs: pct(starts.hashing.track, 50),
        rulesBatchPerEventMs: pct(rulesBatch, 50),
        recommendPlainMs: pct(
          llmRuns.flatMap((r) => r.rerank.plainMs),
          50,
        ),
        idleBatch: { events: K, modelCalls: calls, operations: ops, answered, outputTokensPerS: tokS },
        rerank: rr,
        runs: llmRuns,
      };
    }
    // baselines' own figures, for the JSON and the reader
    const baselineFigures = {
      emptyWorkerColdMs: pct(emptyCold, 50),
      emptyWorkerWarmMs: pct(emptyWarm, 50),
      comlinkRoundTripMs: pct(comlink, 50),
      structuredCloneMs: pct(idb.cloneMs, 50),
      jsonParseMs: pct(idb.parseMs, 50),
      hashingTextsPerS: pct(tp.hashRates, 50),
    };

    const wallS = (performance.now() - began) / 1000;
    const cores = info?.cores ?? 0;
    console.log(
      `atomem browser benchmark — Chromium ${version}, navigator.hardwareConcurrency ${cores}, crossOriginIsolated ${info?.crossOriginIsolated ?? false}` +
        ` (tfjs WASM ${info?.crossOriginIsolated ? 'multi' : 'single'}-threaded), rules mode (no LLM) unless a row names a model` +
        `${llmRuns.length ? ` (${llmRuns.length} language-model runs)` : ' (language-model rows skipped)'}, served from source by the Vite dev server, ${runs} runs, ${wallS.toFixed(0)} s\n`,
    );
    printRows(results);
    if (firstVisit) {
      console.log('');
      printFirstVisit(firstVisit);
    }
    log(`done in ${wallS.toFixed(0)} s`);
    if (opts.json) {
      writeFileSync(
        opts.json,
        `${JSON.stringify({ chromium: version, cores, crossOriginIsolated: info?.crossOriginIsolated ?? false, runs, llmRuns: llmRuns.length, catalog: cat, wallSeconds: wallS, baselines: baselineFigures, results, llm: llmSummary, firstVisit }, null, 2)}\n`,
      );
      log(`wrote ${opts.json}`);
    }
  } finally {
    await browser?.close();
    await server.close();
  }
}

main().catch((e) => {
  process.stderr.write(`bench:browser failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
