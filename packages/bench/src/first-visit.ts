/**
 * First visits in real Chromium. `measureShopFileVisits`: a page of a shop whose file is a
 * format v3 head and shards (`npm run bench:shop-scale`). `measureFirstVisit`, the
 * first-visit rows of `npm run bench:browser`: what a shopper's first page view costs with the
 * BUILT package (`packages/atomem/dist/`, run `npm run build` first), served as plain static
 * files by a loopback HTTP server that counts every byte it sends (bodies, uncompressed — a
 * shop's gzip/brotli would only lower them). Each visit is a fresh browser context (empty HTTP
 * cache, empty IndexedDB), and:
 *
 * - **with the vector file**: the shop's catalog vector file (`catalogVectors`, made in Node with
 *   the default USE-lite before the clock, exactly as `atomem-vectors` does) covers every product,
 *   so the engine must not fetch USE-lite at all;
 * - **without**: the engine fetches USE-lite (code, tfjs wasm, model files) and embeds the catalog.
 *
 * Time to first recommendation: navigation start → `recommend(10 ids)` resolved in the page
 * (`performance.now()`), so it includes loading the entry, the worker, and whatever it fetches.
 */
import { createReadStream, existsSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser } from 'playwright';
import { productCatalog } from '../browser/products.js';

const PKG = fileURLToPath(new URL('../../atomem/', import.meta.url));
const TYPES: Record<string, string> = {
  '.js': 'text/javascript',
  '.mjs': 'text/javascript',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.html': 'text/html',
  '.bin': 'application/octet-stream',
};

/** First-visit budgets (bytes, decimal MB). */
export const FIRST_VISIT_BUDGET = { withVectors: 5e6, withoutVectors: 10e6 };

/** One first visit. */
export interface FirstVisit {
  /** Bytes the server sent for this visit, all requests. */
  bytes: number;
  /** Of which: USE-lite and its runtime (model files, tfjs wasm, the use-lite code chunk). */
  modelBytes: number;
  /** Of which: the catalog vector file. */
  vectorBytes: number;
  /** Of which: the page itself (HTML with the inline catalog, the shop's own). */
  pageBytes: number;
  /** Navigation start → first recommendation answered (ms). */
  ttfrMs: number;
  /** `status().embedder.state` after the first recommendation. */
  embedderState: string;
  requests: { path: string; bytes: number }[];
}

/** The first-visit measurements of both configurations. */
export interface FirstVisitResult {
  catalog: number;
  runs: number;
  vectorFileBytes: number;
  withVectors: FirstVisit[];
  withoutVectors: FirstVisit[];
}

function page(items: unknown[]): string {
  return `<!doctype html><meta charset="utf-8"><title>first visit</title><script type="module">
import { createAtomem } from '/dist/index.js';
const catalog = ${JSON.stringify(items)};
const params = new URLSearchParams(location.search);
const out = {};
try {
  const atomem = await createAtomem({ profile: 'first-visit', catalog, catalogVectors: params.get('vectors') ? '/catalog-vectors.bin' : undefined, onError: (e) => (out.error = e.name + ': ' + e.message) });
  const ranked = await atomem.recommend(catalog.slice(0, 10).map((it) => it.id));
  out.ttfrMs = performance.now();
  out.n = ranked.length;
  out.embedderState = (await atomem.status()).embedder.state;
} catch (e) { out.error = e.name + ': ' + e.message; }
window.__firstVisit = out;
</script>`;
}

const isModel = (p: string): boolean =>
  p.startsWith('/dist/assets/use-lite/') || p.startsWith('/dist/assets/tfjs-wasm/') || /^\/dist\/assets\/use-lite-[\w-]+\.js$/.test(p);

/**
 * Measure `runs` first visits with and without the catalog vector file (alternating).
 * @param catalog Products in the shop's catalog (the bench's 256-product generator).
 */
export async function measureFirstVisit(
  browser: Browser,
  { runs, catalog, log }: { runs: number; catalog: number; log: (m: string) => void },
): Promise<FirstVisitResult> {
  if (!existsSync(join(PKG, 'dist/index.js')) || !existsSync(join(PKG, 'dist/assets/use-lite/model.json'))) {
    throw new Error('first visit: packages/atomem/dist is missing; run `npm run build` first');
  }
  const items = productCatalog(catalog);
  // the shop's vector file, made in Node with the default USE-lite (the same uint8 weights as the browser)
  const [{ createUseLiteEmbedder, itemText }, { encodeCatalogVectors }] = await Promise.all([import('atomem/engine'), import('atomem/protocol')]);
  const use = await createUseLiteEmbedder();
  const vectorFile = encodeCatalogVectors(
    use,
    items,
    (await use.embed(items.map((it) => itemText(it)))).map((e) => e.vector),
  );
  await use.dispose?.();
  const html = Buffer.from(page(items));

  let sent: { path: string; bytes: number }[] = [];
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const send = (body: Buffer | Uint8Array, type: string): void => {
      sent.push({ path, bytes: body.length });
      res.writeHead(200, { 'content-type': type, 'content-length': String(body.length), 'cache-control': 'no-cache' }).end(body);
    };
    if (path === '/') return send(html, 'text/html');
    if (path === '/catalog-vectors.bin') return send(vectorFile, 'application/octet-stream');
    const file = normalize(join(PKG, decodeURIComponent(path)));
    if (!file.startsWith(join(PKG, 'dist')) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    const size = statSync(file).size;
    sent.push({ path, bytes: size });
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': String(size) });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const visit = async (vectors: boolean): Promise<FirstVisit> => {
    const context = await browser.newContext();
    try {
      const p = await context.newPage();
      sent = [];
      await p.goto(`${base}/${vectors ? '?vectors=1' : ''}`);
      await p.waitForFunction(() => (window as unknown as { __firstVisit?: unknown }).__firstVisit, undefined, { timeout: 300_000 });
      const r = (await p.evaluate(() => (window as unknown as { __firstVisit: unknown }).__firstVisit)) as {
        error?: string;
        ttfrMs: number;
        n: number;
        embedderState: string;
      };
      if (r.error) throw new Error(`first visit${vectors ? ' with the vector file' : ''}: ${r.error}`);
      if (r.n !== 10) throw new Error(`first visit: recommend returned ${r.n} of 10`);
      const requests = sent.slice();
      const sum = (f: (x: { path: string }) => boolean): number => requests.filter(f).reduce((a, x) => a + x.bytes, 0);
      return {
        bytes: sum(() => true),
        modelBytes: sum((x) => isModel(x.path)),
        vectorBytes: sum((x) => x.path === '/catalog-vectors.bin'),
        pageBytes: sum((x) => x.path === '/'),
        ttfrMs: r.ttfrMs,
        embedderState: r.embedderState,
        requests,
      };
    } finally {
      await context.close();
    }
  };

  try {
    await visit(true); // warm-up of the OS file cache and the browser process, discarded
    const withVectors: FirstVisit[] = [];
    const withoutVectors: FirstVisit[] = [];
    for (let r = 0; r < runs; r++) {
      const w = await visit(true);
      if (w.modelBytes !== 0 || w.embedderState !== 'not loaded')
        throw new Error(`first visit with the vector file fetched ${w.modelBytes} bytes of USE-lite (embedder ${w.embedderState})`);
      withVectors.push(w);
      const o = await visit(false);
      withoutVectors.push(o);
      log(
        `first visit ${r + 1}/${runs}: with vector file ${(w.bytes / 1e6).toFixed(2)} MB, ${w.ttfrMs.toFixed(0)} ms; without ${(o.bytes / 1e6).toFixed(2)} MB, ${o.ttfrMs.toFixed(0)} ms`,
      );
    }
    return { catalog, runs, vectorFileBytes: vectorFile.length, withVectors, withoutVectors };
  } finally {
    await new Promise((r) => server.close(r));
  }
}

/** A first visit to a shop whose catalog vector file is a format v3 head and shards, in Chromium. */
export interface ShopFileVisit {
  /** Bytes the server sent: all, the head, the shards, the package (dist/). */
  bytes: number;
  headBytes: number;
  shardBytes: number;
  shardRequests: number;
  packageBytes: number;
  /** Navigation start → first `recommend(candidates)` answered (ms). */
  firstRecommendationMs: number;
  /** Median of `recommendRuns` further `recommend(candidates)` calls after 5 tracked events (ms). */
  recommendP50Ms: number;
  /** `status().catalog` after the first answer. */
  catalog: unknown;
}

function shopFilePage(items: unknown[], dim: number, candidates: number, recommendRuns: number): string {
  return `<!doctype html><meta charset="utf-8"><title>shop file visit</title><script type="module">
import { createAtomem } from '/dist/index.js';
const catalog = ${JSON.stringify(items)};
const ids = catalog.slice(0, ${candidates}).map((it) => it.id);
const out = {};
try {
  const atomem = await createAtomem({ profile: 'shop-file-visit', catalog, embedder: { kind: 'hashing', dim: ${dim} }, catalogVectors: '/catalog.bin', onError: (e) => (out.error = e.name + ': ' + e.message) });
  await atomem.recommend(ids);
  out.firstRecommendationMs = performance.now();
  out.catalog = (await atomem.status()).catalog;
  for (let k = 0; k < 5; k++) await atomem.track({ item: catalog[k].id, action: k % 2 ? 'view' : 'purchase' });
  const times = [];
  for (let r = 0; r < ${recommendRuns}; r++) {
    const t = performance.now();
    await atomem.recommend(ids);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  out.recommendP50Ms = times[Math.floor(times.length / 2)];
} catch (e) { out.error = e.name + ': ' + e.message; }
window.__shopFileVisit = out;
</script>`;
}

/**
 * First visits (fresh browser contexts: empty HTTP cache and IndexedDB) to a page of `items`
 * whose `catalogVectors` is the v3 head `<dir>/catalog.bin` (shards in `<dir>/catalog.bin.shards/`),
 * served with the BUILT package by a loopback server that counts every byte it sends. The engine
 * runs the `hashing` embedder at the file's `dim`, so a first visit embeds nothing.
 */
export async function measureShopFileVisits(
  browser: Browser,
  {
    dir,
    items,
    dim,
    runs,
    candidates = 10,
    recommendRuns = 30,
  }: { dir: string; items: unknown[]; dim: number; runs: number; candidates?: number; recommendRuns?: number },
): Promise<ShopFileVisit[]> {
  if (!existsSync(join(PKG, 'dist/index.js'))) throw new Error('shop file visit: packages/atomem/dist is missing; run `npm run build` first');
  const html = Buffer.from(shopFilePage(items, dim, candidates, recommendRuns));
  let sent: { path: string; bytes: number }[] = [];
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    if (path === '/') {
      sent.push({ path, bytes: html.length });
      res.writeHead(200, { 'content-type': 'text/html', 'content-length': String(html.length), 'cache-control': 'no-cache' }).end(html);
      return;
    }
    const root = path === '/catalog.bin' || path.startsWith('/catalog.bin.shards/') ? dir : PKG;
    const file = normalize(join(root, path));
    const inside = root === dir ? file.startsWith(normalize(join(dir, 'catalog.bin'))) : file.startsWith(join(PKG, 'dist'));
    if (!inside || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end();
      return;
    }
    const size = statSync(file).size;
    sent.push({ path, bytes: size });
    res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream', 'content-length': String(size), etag: `"${size}"` });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const visit = async (): Promise<ShopFileVisit> => {
    const context = await browser.newContext();
    try {
      const p = await context.newPage();
      sent = [];
      await p.goto(`${base}/`);
      await p.waitForFunction(() => (window as unknown as { __shopFileVisit?: unknown }).__shopFileVisit, undefined, { timeout: 600_000 });
      const r = (await p.evaluate(() => (window as unknown as { __shopFileVisit: unknown }).__shopFileVisit)) as {
        error?: string;
        firstRecommendationMs: number;
        recommendP50Ms: number;
        catalog: unknown;
      };
      if (r.error) throw new Error(`shop file visit: ${r.error}`);
      const sum = (f: (x: { path: string }) => boolean): number => sent.filter(f).reduce((a, x) => a + x.bytes, 0);
      return {
        bytes: sum(() => true),
        headBytes: sum((x) => x.path === '/catalog.bin'),
        shardBytes: sum((x) => x.path.startsWith('/catalog.bin.shards/')),
        shardRequests: sent.filter((x) => x.path.startsWith('/catalog.bin.shards/')).length,
        packageBytes: sum((x) => x.path.startsWith('/dist/')),
        firstRecommendationMs: r.firstRecommendationMs,
        recommendP50Ms: r.recommendP50Ms,
        catalog: r.catalog,
      };
    } finally {
      await context.close();
    }
  };
  try {
    await visit(); // warm-up of the OS file cache and the browser process, discarded
    const out: ShopFileVisit[] = [];
    for (let r = 0; r < runs; r++) out.push(await visit());
    return out;
  } finally {
    await new Promise((r) => server.close(r));
  }
}
