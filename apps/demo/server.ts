/**
 * The demo shop's server (`npm start`): ONE origin for everything —
 * - the shared community index service (protocol v2, `/v2/…`, SQLite in `ATOMEM_DATA`, default
 *   `.atomem-data/`) and the shop's Privacy Pass attester (`POST /shop/atomem-token`),
 * - the built demo page (`apps/demo/dist/`, from `npm run build`) at `/`: a Vite build that
 *   imports `atomem` and uses `atomem/vite` like a shop, so atomem's worker, its chunks and the
 *   USE-lite files are part of it (`assets/atomem-<hash>/`).
 *
 * At the first start it publishes the release of the previous epoch from a simulated
 * population's reports (see demo/seed.ts) so communities exist from the first click, and makes
 * `catalog-vectors.bin` (served at `/catalog-vectors.bin`, the page's `catalogVectors`): the
 * catalog embedded ahead of time (a visitor's browser does not embed 300 products) plus what the
 * shop learned from its order log — a made-up log of the demo's personas (seed.ts `orderLog`,
 * never real data) — the shop model and SASRec (catalog vector file v2), so the page ranks with
 * them on the device. The index's public item space is that shop space (the vectors the
 * browsers compute from the file), so the seeded communities live where the page's memories
 * do. Later starts reuse the data folder.
 *
 *   PORT (default 5173; 0 = any free port) · HOST (default 127.0.0.1) · ATOMEM_DATA (data folder)
 *   DEMO_SHOPPERS (simulated shoppers at the first start, default 80) · DEMO_EPOCH_MS (default one day)
 *   DEMO_LOG_REQUESTS (set: log `request METHOD /path` for every request on stderr; the e2e test reads it)
 *
 * An optional language model for the page (none by default: the rules reasoner), see
 * {@link modelSetupFromEnv}; the page reads it from `GET /demo-config.json`:
 *   ATOMEM_GGUF=/path/to/model.gguf (served, streamed from that path, at `/models/<name>.gguf`;
 *     run in the browser by wllama; ATOMEM_GGUF_CONTEXT = context length, default the runtime's)
 *   ATOMEM_OPENAI_URL=http://127.0.0.1:8080/v1 + ATOMEM_OPENAI_MODEL=name (+ ATOMEM_OPENAI_KEY)
 *   ATOMEM_WEBLLM_MODEL=<MLC model id> (used when the browser has WebGPU)
 *   ATOMEM_LLM_BUDGET=calls/events, e.g. 60/20
 *
 * Prints `atomem demo ready at http://HOST:PORT` on stdout when ready; progress goes to stderr.
 */
import { createReadStream, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { basename, extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomBytes } from 'node:crypto';
import { Attester, createIndexService, issueInProcess, registerAttester } from 'atomem-index';
import { buildRelease, createUseLiteEmbedder, ItemVectors, ReportHistogram, USE_LITE_ID, type Embedder, type Item } from 'atomem/engine';
import { decodeCatalogFile, encodeCatalogFile, itemTextHash, type CatalogFile } from 'atomem/protocol';
import { ShopKnowledge, trainSasrec, trainShopModel } from 'atomem/shop';
import type { LlmOptions } from 'atomem';
import { generateCatalog, toItems, type Product } from './catalog.js';
import { orderLog, seedPopulation } from './seed.js';

/** The repository root (the data folder's default parent). */
const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const PAGE_DIR = join(ROOT, 'apps', 'demo', 'dist');

/** Content types of the files the demo serves. */
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  // why: USE-lite's vocab.json holds '▁'; a wrong charset silently corrupts every embedding
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json; charset=utf-8',
  '.bin': 'application/octet-stream',
  '.gguf': 'application/octet-stream',
};

/** Map a request path to a file under apps/demo/dist/ (undefined: not served). */
export function fileFor(pathname: string): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(pathname);
  } catch {
    return undefined;
  }
  if (path.includes('\0')) return undefined;
  const file = resolve(PAGE_DIR, path === '/' ? 'index.html' : path.slice(1));
  // why: never serve anything outside the page's folder (../ tricks)
  if (!file.startsWith(PAGE_DIR + sep)) return undefined;
  if (!existsSync(file) || !statSync(file).isFile()) return undefined;
  return file;
}

/**
 * `Cache-Control` of a file of the built page. Everything under `/assets/` is content-hashed —
 * Vite's `assets/<name>-<hash>.<ext>`, and atomem's worker, chunks and model files (USE-lite's
 * weights, wllama.wasm) under `assets/atomem-<hash>/`, whose hash covers every emitted byte — so
 * a browser keeps it a year without asking again (a rebuild that changes a byte changes the URL).
 * The rest (index.html, which names the current hashes) is revalidated on every visit (its ETag
 * answers 304 when unchanged).
 */
export function cacheControlFor(pathname: string): string {
  return pathname.startsWith('/assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
}

/** What the page reads from `GET /demo-config.json` before it calls `createAtomem`. */
export interface DemoConfig {
  /** Passed as `createAtomem({ llm })`; null: no model, the rules reasoner. */
  llm: LlmOptions | null;
  /** Passed as `createAtomem({ catalogVectors })`: the catalog embedded by this server at start. */
  catalogVectors?: string;
}

/** Where the page fetches the catalog's precomputed vectors. */
const VECTORS_ROUTE = '/catalog-vectors.bin';

/**
 * The demo shop's order log and what it trains (see {@link makeShopFile}): 400 made-up personas
 * (seed 11, not the seeded reporting population's), log end 2026-01-01, SASRec 20 epochs (3
 * steps an epoch on this log; short, so a first start stays well under a minute on 2 cores).
 * Part of the file's header, so a change rebuilds it.
 */
export const DEMO_SHOP_LOG = { shoppers: 400, seed: 11, end: Date.UTC(2026, 0, 1), sasrecEpochs: 20 } as const;
const DEMO_SHOP_ID = `demo-personas:${DEMO_SHOP_LOG.shoppers}:${DEMO_SHOP_LOG.seed}:${DEMO_SHOP_LOG.end}:${DEMO_SHOP_LOG.sasrecEpochs}`;

/** The decoded file, or undefined when it is missing or malformed. */
function readCatalogFile(file: string): CatalogFile | undefined {
  try {
    return decodeCatalogFile(readFileSync(file));
  } catch {
    return undefined;
  }
}

/** True when `file` holds USE-lite vectors of exactly these items with their current text. */
function contentFresh(file: CatalogFile | undefined, items: readonly Item[]): boolean {
  return (
    !!file && file.embedder === USE_LITE_ID && file.vectors.size === items.length && items.every((it) => file.vectors.get(it.id)?.hash === itemTextHash(it))
  );
}

/** True when `file` is this demo's v2 file: fresh content rows and the shop part of {@link DEMO_SHOP_LOG}. */
function shopFileFresh(file: CatalogFile | undefined, items: readonly Item[]): boolean {
  return contentFresh(file, items) && !!file?.shop?.sasrec && file.shopInfo?.demoLog === DEMO_SHOP_ID;
}

/**
 * Write the demo's catalog vector file v2 (atomically): content rows (from `content`, embedded
 * once), and the shop model and SASRec trained on {@link orderLog} — what `atomem-vectors --log`
 * does for a real shop.
 */
async function makeShopFile(out: string, catalog: readonly Product[], content: ItemVectors): Promise<{ rows: number; seconds: number; bytes: number }> {
  const t0 = Date.now();
  const all = toItems(catalog);
  const ids = all.map((it) => it.id);
  await content.warm();
  const vectors = all.map((it) => content.raw(it.id)!);
  const log = orderLog(catalog, DEMO_SHOP_LOG);
  const model = trainShopModel(log, { catalog: ids, content: { embedder: content.embedder.id, vectors: new Map(all.map((it, i) => [it.id, vectors[i]])) } });
  const index = new Map(ids.map((id, i) => [id, i + 1]));
  const byUser = new Map<string, number[]>();
  for (const r of [...log].sort((a, b) => a.at - b.at)) byUser.set(r.user, [...(byUser.get(r.user) ?? []), index.get(r.item)!]);
  const { weights } = await trainSasrec(
    [...byUser.values()].map((q) => Int32Array.from(q)),
    ids.length,
    { epochs: DEMO_SHOP_LOG.sasrecEpochs, seed: 2026 },
  );
  const bytes = encodeCatalogFile({
    embedder: { id: content.embedder.id, dim: content.embedder.dim },
    items: all,
    vectors,
    shop: { model, sasrec: { weights, items: ids }, info: { demoLog: DEMO_SHOP_ID, logRows: log.length, users: DEMO_SHOP_LOG.shoppers, sequence: 'sasrec' } },
  });
  const tmp = `${out}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, out);
  return { rows: log.length, seconds: (Date.now() - t0) / 1000, bytes: bytes.length };
}

/** The language model the person running the demo configured (environment variables). */
export interface ModelSetup {
  config: DemoConfig;
  /** The GGUF file served at `route` (never copied: streamed from `file`), or null. */
  gguf: { file: string; name: string; route: string; size: number } | null;
  /** One line for the startup log (never the API key). */
  summary: string;
}

/** Environment variables that configure a model (for messages). */
export const MODEL_ENV = [
  'ATOMEM_GGUF',
  'ATOMEM_OPENAI_URL',
  'ATOMEM_OPENAI_MODEL',
  'ATOMEM_OPENAI_KEY',
  'ATOMEM_WEBLLM_MODEL',
  'ATOMEM_LLM_BUDGET',
  'ATOMEM_GGUF_CONTEXT',
] as const;

/**
 * Read the optional model configuration from the environment. Several may be set: the engine
 * tries them in its order (WebLLM when WebGPU exists → the OpenAI-compatible server → wllama)
 * and keeps the first that loads. Throws a readable error on a bad value (the server then
 * refuses to start rather than silently running on rules).
 */
export function modelSetupFromEnv(env: NodeJS.ProcessEnv): ModelSetup {
  const get = (k: (typeof MODEL_ENV)[number]): string | undefined => env[k]?.trim() || undefined;
  const llm: LlmOptions = {};
  const parts: string[] = [];
  let gguf: ModelSetup['gguf'] = null;

  const webllm = get('ATOMEM_WEBLLM_MODEL');
  if (webllm) {
    llm.webllm = { model: webllm };
    parts.push(`WebLLM ${webllm} (when the browser has WebGPU)`);
  }

  const openaiUrl = get('ATOMEM_OPENAI_URL');
  const openaiModel = get('ATOMEM_OPENAI_MODEL');
  if (openaiUrl || openaiModel) {
    if (!openaiUrl || !openaiModel)
      throw new Error('ATOMEM_OPENAI_URL and ATOMEM_OPENAI_MODEL go together (e.g. http://127.0.0.1:8080/v1 and the served model name)');
    let url: URL;
    try {
      url = new URL(openaiUrl);
    } catch {
      throw new Error(`ATOMEM_OPENAI_URL is not a URL: ${openaiUrl}`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`ATOMEM_OPENAI_URL must be http(s), got ${openaiUrl}`);
    const apiKey = get('ATOMEM_OPENAI_KEY');
    llm.openai = { baseUrl: openaiUrl, model: openaiModel, ...(apiKey ? { apiKey } : {}) };
    parts.push(`OpenAI-compatible ${openaiModel} at ${openaiUrl}${apiKey ? ' (with an API key, which the page receives)' : ''}`);
  }

  const ggufPath = get('ATOMEM_GGUF');
  if (ggufPath) {
    const file = resolve(ggufPath);
    if (!existsSync(file) || !statSync(file).isFile()) throw new Error(`ATOMEM_GGUF: no such file ${file}`);
    const name = basename(file);
    if (!/\.gguf$/i.test(name)) throw new Error(`ATOMEM_GGUF must name a .gguf file, got ${name}`);
    const route = `/models/${encodeURIComponent(name)}`;
    const size = statSync(file).size;
    const ctx = get('ATOMEM_GGUF_CONTEXT');
    const contextSize = ctx === undefined ? undefined : Number(ctx);
    if (contextSize !== undefined && !(Number.isInteger(contextSize) && contextSize >= 64))
      throw new Error(`ATOMEM_GGUF_CONTEXT must be an integer ≥ 64, got ${ctx}`);
    gguf = { file, name, route, size };
    // the page turns the same-origin path into an absolute URL (the worker resolves against its own script)
    llm.wllama = { model: route, ...(contextSize ? { contextSize } : {}) };
    parts.push(`wllama (WASM) ${file} (${(size / 1e6).toFixed(1)} MB) served at ${route}${contextSize ? `, context ${contextSize}` : ''}`);
  }

  const budget = get('ATOMEM_LLM_BUDGET');
  if (budget) {
    const m = /^(\d+)\s*\/\s*(\d+)$/.exec(budget);
    if (!m || Number(m[2]) < 1) throw new Error(`ATOMEM_LLM_BUDGET must be calls/events with events ≥ 1, e.g. 40/20; got ${budget}`);
    llm.budget = { maxCalls: Number(m[1]), perEvents: Number(m[2]) };
  }

  if (parts.length === 0) {
    const ignored = budget ? ' (ATOMEM_LLM_BUDGET ignored)' : '';
    return {
      config: { llm: null },
      gguf: null,
      summary: `no language model: the page uses the rules reasoner${ignored}; set ATOMEM_GGUF, ATOMEM_OPENAI_URL + ATOMEM_OPENAI_MODEL or ATOMEM_WEBLLM_MODEL to try one (apps/demo/README.md)`,
    };
  }
  const b = llm.budget ? `${llm.budget.maxCalls} calls per ${llm.budget.perEvents} events` : 'the default budget (60 calls per 20 events)';
  return { config: { llm }, gguf, summary: `language model: ${parts.join(', then ')}; ${b}; rules if none loads` };
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function main(): Promise<void> {
  const port = Number(process.env.PORT ?? 5173);
  const host = process.env.HOST ?? '127.0.0.1';
  const dataDir = resolve(process.env.ATOMEM_DATA ?? join(ROOT, '.atomem-data'));
  const shoppers = Number(process.env.DEMO_SHOPPERS ?? 80);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new RangeError(`PORT must be an integer in 0–65535, got ${process.env.PORT}`);
  const model = modelSetupFromEnv(process.env);
  const page = join(PAGE_DIR, 'index.html');
  if (!existsSync(page)) throw new Error(`${page} is missing: run \`npm run build\` first (\`npm start\` does)`);
  mkdirSync(dataDir, { recursive: true });
  log(`atomem demo: data folder ${dataDir}`);
  log(`atomem demo: ${model.summary}`);

  const catalog = generateCatalog();
  let embedder: Embedder | undefined;
  const loadEmbedder = async (): Promise<Embedder> => {
    if (!embedder) {
      log('atomem demo: loading USE-lite (offline, from node_modules) …');
      embedder = await createUseLiteEmbedder();
    }
    return embedder;
  };
  // why lazy: USE-lite loads only if some text must still be embedded (a fresh data folder)
  const lazyEmbedder: Embedder = { id: USE_LITE_ID, dim: 512, embed: async (texts) => (await loadEmbedder()).embed(texts) };
  // The catalog embedded once here, so a visitor's browser skips it (catalogVectors), with the
  // shop model learned from the demo's order log (v2); the browsers' item space is the shop's,
  // and so is the index's public item space (protocol v2) and the simulated shoppers'.
  const vectorsFile = join(dataDir, 'catalog-vectors.bin');
  const all = toItems(catalog);
  let file = readCatalogFile(vectorsFile);
  let rebuilt = false;
  if (!shopFileFresh(file, all)) {
    const content = new ItemVectors(lazyEmbedder, all);
    // content rows of an older file (v1 of an earlier demo) are reused: only the shop part is new
    if (contentFresh(file, all)) for (const it of all) content.seed(it.id, file!.vectors.get(it.id)!.vector);
    log(`atomem demo: training the shop model on a made-up order log of ${DEMO_SHOP_LOG.shoppers} personas …`);
    const made = await makeShopFile(vectorsFile, catalog, content);
    log(
      `atomem demo: ${all.length} products and the shop model (${made.rows} log rows; SASRec ${DEMO_SHOP_LOG.sasrecEpochs} epochs) for the browsers (${VECTORS_ROUTE}, ${(made.bytes / 1024).toFixed(0)} KiB, ${made.seconds.toFixed(1)} s)`,
    );
    file = readCatalogFile(vectorsFile);
    rebuilt = true;
  }
  if (!file?.shop) throw new Error(`${vectorsFile} could not be read back`);
  // the same item space the browsers build from the file (ItemVectors.useShop)
  const items = new ItemVectors(lazyEmbedder, all);
  for (const it of all) items.seed(it.id, file.vectors.get(it.id)!.vector);
  items.useShop(
    new ShopKnowledge(file.shop.id, file.shop.model, file.shop.sasrec ? { weights: file.shop.sasrec.weights, items: file.shop.sasrec.items } : undefined),
  );
  const ids = all.map((it) => it.id).sort();
  const spaceVectors = (await items.vectorsOf(ids)).map((e) => e.vector);
  const publicSpace = () => ({ embedderId: items.embedderId, ids, vectors: spaceVectors });

  // protocol v2 over the catalog's item space; this server is also the shop's attester (below)
  const epochMs = Number(process.env.DEMO_EPOCH_MS ?? 86_400_000);
  const service = createIndexService({
    dataDir,
    rateLimit: false,
    v2: {
      epochMs,
      // why: the demo's seeded population is small; the service defaults (50 reports, 20 contributors) are for real traffic
      minReports: 10,
      minContributors: 2,
      space: async () => publicSpace(),
      // why: the demo re-embeds its catalog when the model or the shop file changes (and re-seeds below)
      replaceSpace: true,
    },
  });
  if (process.env.DEMO_LOG_REQUESTS) {
    // for the e2e test: every request as it arrives on the wire (method, path, whether it carried a cookie; no address)
    service.app.addHook('onRequest', async (req) => log(`request ${req.method} ${req.url.split('?')[0]}${req.headers.cookie ? ' cookie' : ''}`));
    // and each answer's status and body bytes (content-length; 0 for a 304): what `npm run bench:start` sums per visit
    service.app.addHook('onResponse', async (req, reply) =>
      log(`response ${reply.statusCode} ${req.method} ${req.url.split('?')[0]} ${Number(reply.getHeader('content-length') ?? 0) || 0}`),
    );
  }
  // The shop's Privacy Pass attester (atomem-index's reference attester): one token per account
  // per epoch, none for visitors without one. The demo has no login, so its "account" is a
  // first-party cookie set when a page is served — a visitor who drops it gets a new account;
  // a real shop keys this on its sign-in. The index never sees the cookie.
  service.app.addHook('onRequest', async (req, reply) => {
    if (req.method === 'GET' && !req.url.startsWith('/v2/') && !/(?:^|;\s*)demo_shopper=/.test(req.headers.cookie ?? '')) {
      reply.header('set-cookie', `demo_shopper=${randomBytes(18).toString('base64url')}; Path=/; HttpOnly; SameSite=Strict`);
    }
  });
  const attester = new Attester({ issue: issueInProcess(() => service.v2!.issuer()), epoch: () => service.v2!.epoch() });
  registerAttester(service.app, {
    path: '/shop/atomem-token',
    attester,
    accountOf: (req) => /(?:^|;\s*)demo_shopper=([A-Za-z0-9_-]{16,64})/.exec(req.headers.cookie ?? '')?.[1],
  });
  service.app.register(async (scope) => {
    const serve = async (req: FastifyRequest, reply: FastifyReply) => {
      const pathname = new URL(req.url, 'http://x').pathname;
      const file = fileFor(pathname);
      if (!file) return reply.code(404).type('text/plain; charset=utf-8').send('not found');
      const { size, mtimeMs } = statSync(file);
      const etag = `"${size.toString(16)}-${Math.floor(mtimeMs).toString(16)}"`;
      reply
        .type(TYPES[extname(file)] ?? 'application/octet-stream')
        .header('cache-control', cacheControlFor(pathname))
        .header('etag', etag);
      if (req.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.header('content-length', String(size)).send(createReadStream(file));
    };
    // the page's configuration: which language model to load, if any (never cached: env may change between starts)
    scope.get('/demo-config.json', async (_req, reply) =>
      reply.header('cache-control', 'no-store').send({ ...model.config, catalogVectors: VECTORS_ROUTE } satisfies DemoConfig),
    );
    scope.get(VECTORS_ROUTE, async (req, reply) => {
      const file = join(dataDir, 'catalog-vectors.bin');
      if (!existsSync(file)) return reply.code(404).type('text/plain; charset=utf-8').send('not made yet');
      const { size, mtimeMs } = statSync(file);
      // why an ETag: a returning visitor's engine revalidates the file (304, no body) and keeps its cached shop model
      const etag = `"${size.toString(16)}-${Math.floor(mtimeMs).toString(16)}"`;
      reply.header('etag', etag).header('cache-control', 'no-cache');
      if (req.headers['if-none-match'] === etag) return reply.code(304).send();
      return reply.type('application/octet-stream').header('content-length', String(size)).send(createReadStream(file));
    });
    // the configured GGUF, streamed from where it lies (HEAD answers its size too: wllama checks it)
    scope.route<{ Params: { name: string } }>({
      method: ['GET', 'HEAD'],
      url: '/models/:name',
      // why: fastify's automatic HEAD would answer content-length 0 (or read the whole file)
      exposeHeadRoute: false,
      handler: async (req, reply) => {
        const g = model.gguf;
        if (!g || req.params.name !== g.name) return reply.code(404).type('text/plain; charset=utf-8').send('not found');
        let size: number;
        let mtime: number;
        try {
          ({ size, mtimeMs: mtime } = statSync(g.file));
        } catch {
          return reply.code(404).type('text/plain; charset=utf-8').send('the model file is gone');
        }
        reply
          .type('application/octet-stream')
          .header('content-length', String(size))
          .header('cache-control', 'no-cache')
          .header('etag', `"${size.toString(16)}-${Math.floor(mtime).toString(16)}"`);
        return req.method === 'HEAD' ? reply.send() : reply.send(createReadStream(g.file));
      },
    });
    scope.get('/', serve);
    scope.get('/*', serve);
  });

  let closing = false;
  const stop = (signal: string) => {
    if (closing) process.exit(1);
    closing = true;
    log(`atomem demo: ${signal}, closing`);
    service.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  const base = await service.listen({ port, host });
  await service.ready;
  const v2 = service.v2!;
  const latest = v2.store.latestRelease();
  // a release made in another item space (an older demo's content space, or an older shop file) never matches the page's memories
  const stale = latest !== undefined && (rebuilt || (JSON.parse(v2.store.release(latest) ?? '{}') as { embedderId?: string }).embedderId !== items.embedderId);
  if (stale) log(`atomem demo: the index's release (epoch ${latest}) is of another item space; re-seeding`);
  if (latest !== undefined && !stale) {
    log(`atomem demo: the index has a release (epoch ${v2.store.latestRelease()}); not re-seeding`);
  } else if (shoppers > 0) {
    // Demo shortcut: the release of the PREVIOUS epoch, made from simulated shoppers' reports by the
    // service's own aggregation code (not over HTTP), so communities exist from the first click.
    const t0 = Date.now();
    const seedEmbedder = lazyEmbedder;
    const epoch = v2.epoch() - 1;
    log(`atomem demo: simulating ${shoppers} shoppers over ${catalog.length} products …`);
    const width = 30;
    const r = await seedPopulation({
      epoch,
      ldp: v2.ldp,
      catalog,
      embedder: seedEmbedder,
      items,
      shoppers,
      onProgress: (done, total) => {
        const bar = '█'.repeat(Math.round((done / total) * width)).padEnd(width, '░');
        if (process.stderr.isTTY) process.stderr.write(`\r  ${bar} ${done}/${total} shoppers`);
        else if (done % 10 === 0 || done === total) log(`  ${done}/${total} shoppers`);
      },
    });
    if (process.stderr.isTTY) process.stderr.write('\n');
    const hist = new ReportHistogram(v2.ldp);
    for (const rep of r.reports) hist.add(rep);
    const space = publicSpace();
    const release = buildRelease({ epoch, epochMs, space, communities: v2.communities(), hist, ldp: v2.ldp, minContributors: 2 });
    v2.store.publish(epoch, JSON.stringify(release));
    log(
      `atomem demo: ${r.shoppers} shoppers, ${r.events} events → ${r.reports.length} reports → release of epoch ${epoch} with ${release.communities.length} communities (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
    );
  }
  const shown = new URL(base);
  process.stdout.write(`atomem demo ready at http://${host.includes(':') ? `[${host}]` : host}:${shown.port}\n`);
}

main().catch((err: unknown) => {
  log(`atomem demo: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
