/**
 * Browser benchmark (`npm run bench:browser`): atomem in real headless Chromium, each figure
 * beside a baseline measured in the same run, printed as a markdown table.
 *
 * 1. worker start → first recommendation (rules mode), `hashing` and `use-lite`, cold (first
 *    createAtomem in a fresh browser context) and warm (a second one in the same page) —
 *    baseline: an empty module worker answering one postMessage, cold and warm alike;
 * 2. `await atomem.track()` round trip p50/p95 — baseline: a bare Comlink round trip;
 * 3. `MemoryStore.load()` of 1,000 atomic memories (512-d) from IndexedDB — baseline:
 *    `structuredClone` of the same state (JSON.parse of it as JSON is shown beside);
 * 4. USE-lite texts/s on 256 product titles + descriptions, batches of 64 — baseline: the
 *    hashing embedder on the same texts.
 *
 * The page (`bench/browser/`) is served by a Vite dev server rooted at the repo, so it imports
 * `src/` and the engine worker starts from source; USE-lite's files come from the built
 * package's `dist/assets/` (run `npm run build` first). Chromium is Debian's, never downloaded.
 *
 *   npx tsx src/bench/browser.ts [--runs N] [--catalog N] [--json FILE]
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright';
import { createServer, type Plugin, type ViteDevServer } from 'vite';
import type { BenchApi, PageInfo } from '../../bench/browser/page.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'];
const PAGE_PATH = '/bench/browser/index.html';
/** Per page call; a USE-lite cold start takes seconds, not minutes. */
const CALL_TIMEOUT_MS = 300_000;

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

/** dist/assets must hold USE-lite (with `.bin` shards) and the tfjs wasm binaries. */
function checkAssets(): void {
  const model = join(ROOT, 'dist/assets/use-lite/model.json');
  const wasm = join(ROOT, 'dist/assets/tfjs-wasm/tfjs-backend-wasm-simd.wasm');
  let ok = existsSync(model) && existsSync(wasm);
  if (ok) {
    const manifest = JSON.parse(readFileSync(model, 'utf8')) as { weightsManifest: { paths: string[] }[] };
    ok = manifest.weightsManifest.every((g) => g.paths.every((p) => p.endsWith('.bin') && existsSync(join(ROOT, 'dist/assets/use-lite', p))));
  }
  if (!ok) {
    process.stderr.write('bench:browser: dist/assets/ is missing or incomplete (USE-lite model, .bin shards, tfjs wasm). Run `npm run build` first.\n');
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
    optimizeDeps: { entries: ['bench/browser/page.ts', 'src/worker/worker.ts'] },
    plugins: [benchWorkers()],
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

/** Call `window.__bench[name](arg)` in the page. */
async function call<K extends keyof BenchApi>(page: Page, name: K, arg?: Parameters<BenchApi[K]>[0]): Promise<Awaited<ReturnType<BenchApi[K]>>> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`page call ${name} timed out after ${CALL_TIMEOUT_MS / 1000} s`)), CALL_TIMEOUT_MS);
  });
  try {
    const run = page.evaluate(
      ([n, a]) => (window.__bench![n as keyof BenchApi] as (x: unknown) => unknown)(a),
      [name, arg ?? null] as [string, unknown],
    );
    return (await Promise.race([run, timeout])) as Awaited<ReturnType<BenchApi[K]>>;
  } finally {
    clearTimeout(timer);
  }
}

async function main(): Promise<void> {
  const program = new Command()
    .name('bench:browser')
    .description('atomem in headless Chromium: worker start, track() round trip, IndexedDB load, embedder throughput')
    .option('--runs <n>', 'fresh browser contexts per start configuration; IndexedDB loads are timed 4×N times, throughput N times', (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 1 || n > 100) throw new InvalidArgumentError('--runs must be an integer in 1..100');
      return n;
    }, 5)
    .option('--catalog <n>', "products in the engine's catalog for the start and track() figures (embedded at start)", (v) => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < 10 || n > 256) throw new InvalidArgumentError('--catalog must be an integer in 10..256');
      return n;
    }, 256)
    .option('--json <file>', 'also write the results as JSON')
    .parse();
  const opts = program.opts<{ runs: number; catalog: number; json?: string }>();
  const runs = opts.runs;
  const began = performance.now();

  checkAssets();
  const { server, base } = await startVite();
  const assetsBaseUrl = `${base}/dist/assets/`;
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
        for (const embedder of ['hashing', 'use-lite'] as const) {
          await call(page, 'start', { embedder, profile: `bench-${runId}-warmup-${embedder}`, assetsBaseUrl, catalog: 16 });
          await call(page, 'track', { events: 3, warmup: 0 });
          await call(page, 'cleanup');
        }
        await call(page, 'idbLoad', { profile: `bench-${runId}-warmup-idb`, memories: 10, runs: 1 });
        await call(page, 'cleanup');
        break;
      } catch (e) {
        if (attempt >= 3) throw e;
        log(`warm-up attempt ${attempt} failed (${e instanceof Error ? e.message : String(e)}); retrying`);
      } finally {
        await context.close();
      }
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

    for (let r = 0; r < runs; r++) {
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
          if (s.embedder !== expected[embedder] || s.llm !== 'rules') throw new Error(`the engine runs ${s.embedder} with ${s.llm}, expected ${expected[embedder]} with rules`);
          if (s.catalog !== opts.catalog) throw new Error(`the page used ${s.catalog} products, expected ${opts.catalog}`);
          const st = starts[embedder];
          st.cold.push(s.coldMs);
          st.warm.push(s.warmMs);
          if (s.coldEmbedderMs !== null) st.coldModel.push(s.coldEmbedderMs);
          if (s.warmEmbedderMs !== null) st.warmModel.push(s.warmEmbedderMs);
          const t = await call(page, 'track', { events: 200, warmup: 10 });
          starts[embedder].track.push(...t);
          await call(page, 'cleanup');
          const model = (ms: number | null): string => (ms === null ? '' : ` (embedder ready at ${fmtMs(ms)})`);
          log(`run ${r + 1}/${runs}: ${embedder} start cold ${fmtMs(s.coldMs)}${model(s.coldEmbedderMs)}, warm ${fmtMs(s.warmMs)}${model(s.warmEmbedderMs)}; track p50 ${fmtMs(pct(t, 50))} (mean of the first 20 ${fmtMs(mean(t.slice(0, 20)))}, of the last 20 ${fmtMs(mean(t.slice(-20)))})`);
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

    // ---- results ----
    const results: BrowserBenchResult[] = [];
    const add = (name: string, samples: number[], unit: BrowserBenchResult['unit'], baseline: string, baselineValue: number, withP95 = true): void => {
      const value = pct(samples, 50);
      results.push({ name, value, unit, baseline, baselineValue, ratio: value / baselineValue, ...(withP95 ? { p95: pct(samples, 95) } : {}), n: samples.length });
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
    for (const embedder of ['hashing', 'use-lite'] as const) {
      add(`track() round trip, ${embedder} (durable in IndexedDB, ${starts[embedder].track.length / runs} events/run)`, starts[embedder].track, 'ms', 'bare Comlink round trip (p50 of 10-call means)', pct(comlink, 50));
    }
    add(
      `IndexedDB MemoryStore.load() of ${idb.memories.toLocaleString("en-US")} memories (512-d), fresh connection`,
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
        ` (tfjs WASM ${info?.crossOriginIsolated ? 'multi' : 'single'}-threaded), rules mode (no LLM), served from source by the Vite dev server, ${runs} runs, ${wallS.toFixed(0)} s\n`,
    );
    console.log('| what | p50 | p95 | n | baseline (same run) | baseline p50 | ratio |');
    console.log('|---|---:|---:|---:|---|---:|---|');
    for (const r of results) {
      console.log(`| ${r.name} | ${fmtValue(r.value, r.unit)} | ${r.p95 === undefined ? '' : fmtValue(r.p95, r.unit)} | ${r.n} | ${r.baseline} | ${fmtValue(r.baselineValue, r.unit)} | ${fmtRatio(r)} |`);
    }
    log(`done in ${wallS.toFixed(0)} s`);
    if (opts.json) {
      writeFileSync(opts.json, `${JSON.stringify({ chromium: version, cores, crossOriginIsolated: info?.crossOriginIsolated ?? false, runs, catalog: cat, wallSeconds: wallS, baselines: baselineFigures, results }, null, 2)}\n`);
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
