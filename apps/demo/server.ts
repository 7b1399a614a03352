/**
 * The demo shop's server (`npm start`): ONE origin for everything —
 * - the shared community index service (protocol v2, `/v2/…`, SQLite in `ATOMEM_DATA`, default
 *   `.atomem-data/`) and the shop's Privacy Pass attester (`POST /shop/atomem-token`),
 * - the built demo page (`apps/demo/dist/`, from `npm run build`) at `/`: a Vite build that
 *   imports `atomem` and uses `atomem/vite` like a shop, so atomem's worker, its chunks and the
 *   USE-lite files are part of it (`assets/atomem-<hash>/`).
 *
 * At the first start it publishes the release of the previous epoch from a simulated
 * population's reports (see demo/seed.ts) so communities exist from the first click, and embeds the catalog ahead of time
 * into `catalog-vectors.bin` (served at `/catalog-vectors.bin`, the page's `catalogVectors`) so
 * a visitor's browser does not embed 300 products; later starts reuse the data folder.
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
import { createIndexService } from 'atomem-index';
import { buildRelease, createUseLiteEmbedder, ItemVectors, ReportHistogram, USE_LITE_ID, type Embedder, type Item } from 'atomem/engine';
import { decodeCatalogVectors, encodeCatalogVectors, itemTextHash } from 'atomem/protocol';
import type { LlmOptions } from 'atomem';
import { generateCatalog, toItems } from './catalog.js';
import { seedPopulation } from './seed.js';

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

/** What the page reads from `GET /demo-config.json` before it calls `createAtomem`. */
export interface DemoConfig {
  /** Passed as `createAtomem({ llm })`; null: no model, the rules reasoner. */
  llm: LlmOptions | null;
  /** Passed as `createAtomem({ catalogVectors })`: the catalog embedded by this server at start. */
  catalogVectors?: string;
}

/** Where the page fetches the catalog's precomputed vectors. */
const VECTORS_ROUTE = '/catalog-vectors.bin';

/** True when `file` holds USE-lite vectors of exactly these items with their current text. */
function vectorsFresh(file: string, items: readonly Item[]): boolean {
  try {
    const { header, vectors } = decodeCatalogVectors(readFileSync(file));
    return header.embedder === USE_LITE_ID && vectors.size === items.length && items.every((it) => vectors.get(it.id)?.hash === itemTextHash(it));
  } catch {
    return false;
  }
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
export const MODEL_ENV = ['ATOMEM_GGUF', 'ATOMEM_OPENAI_URL', 'ATOMEM_OPENAI_MODEL', 'ATOMEM_OPENAI_KEY', 'ATOMEM_WEBLLM_MODEL', 'ATOMEM_LLM_BUDGET', 'ATOMEM_GGUF_CONTEXT'] as const;

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
    if (!openaiUrl || !openaiModel) throw new Error('ATOMEM_OPENAI_URL and ATOMEM_OPENAI_MODEL go together (e.g. http://127.0.0.1:8080/v1 and the served model name)');
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
    if (contextSize !== undefined && !(Number.isInteger(contextSize) && contextSize >= 64)) throw new Error(`ATOMEM_GGUF_CONTEXT must be an integer ≥ 64, got ${ctx}`);
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
      summary: `no language model: the page uses the rules reasoner${ignored}; set ATOMEM_GGUF, ATOMEM_OPENAI_URL + ATOMEM_OPENAI_MODEL or ATOMEM_WEBLLM_MODEL to try one (demo/README.md)`,
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
  // The catalog embedded once here, so a visitor's browser skips it (catalogVectors); the same
  // vectors are the index's public item space (protocol v2) and serve the simulated shoppers.
  const vectorsFile = join(dataDir, 'catalog-vectors.bin');
  let items: ItemVectors | undefined;
  if (!vectorsFresh(vectorsFile, toItems(catalog))) {
    const t0 = Date.now();
    items = new ItemVectors(await loadEmbedder(), toItems(catalog));
    await items.warm();
    const all = toItems(catalog);
    const tmp = `${vectorsFile}.${process.pid}.tmp`;
    writeFileSync(tmp, encodeCatalogVectors(items.embedder, all, all.map((it) => items!.raw(it.id)!)));
    renameSync(tmp, vectorsFile);
    log(`atomem demo: embedded ${all.length} products for the browsers (${VECTORS_ROUTE}, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }

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
      space: async () => {
        const cv = decodeCatalogVectors(readFileSync(vectorsFile));
        const ids = [...cv.vectors.keys()].sort();
        return { embedderId: cv.header.embedder, ids, vectors: ids.map((id) => cv.vectors.get(id)!.vector) };
      },
    },
  });
  if (process.env.DEMO_LOG_REQUESTS) {
    // for the e2e test: every request as it arrives on the wire (method, path, whether it carried a cookie; no address)
    service.app.addHook('onRequest', async (req) => log(`request ${req.method} ${req.url.split('?')[0]}${req.headers.cookie ? ' cookie' : ''}`));
  }
  // The shop's Privacy Pass attester: one token per shopper (here: per demo cookie) per epoch.
  // A real shop keys this on its login or session; the index never sees the cookie.
  const tokensGiven = new Map<string, number>();
  service.app.post<{ Body: { v: 2; epoch: number; request: string } }>('/shop/atomem-token', async (req, reply) => {
    const cookie = /(?:^|;\s*)demo_shopper=([A-Za-z0-9_-]{16,64})/.exec(req.headers.cookie ?? '')?.[1];
    const shopper = cookie ?? randomBytes(18).toString('base64url');
    if (!cookie) reply.header('set-cookie', `demo_shopper=${shopper}; Path=/; HttpOnly; SameSite=Strict`);
    const body = req.body;
    const v2 = service.v2!;
    if (!body || body.v !== 2 || body.epoch !== v2.epoch() || typeof body.request !== 'string') return reply.code(400).send({ error: 'bad_request', message: 'expected { v: 2, epoch: <current>, request }' });
    if (tokensGiven.get(shopper) === body.epoch) return reply.code(429).send({ error: 'rate_limited', message: 'one token per shopper per epoch' });
    tokensGiven.set(shopper, body.epoch);
    try {
      return { response: await v2.issuer().issue(body.request) };
    } catch (e) {
      return reply.code(400).send({ error: 'bad_request', message: e instanceof Error ? e.message : String(e) });
    }
  });
  service.app.register(async (scope) => {
    const serve = async (req: FastifyRequest, reply: FastifyReply) => {
      const file = fileFor(new URL(req.url, 'http://x').pathname);
      if (!file) return reply.code(404).type('text/plain; charset=utf-8').send('not found');
      return reply
        .type(TYPES[extname(file)] ?? 'application/octet-stream')
        .header('cache-control', 'no-cache')
        .send(createReadStream(file));
    };
    // the page's configuration: which language model to load, if any (never cached: env may change between starts)
    scope.get('/demo-config.json', async (_req, reply) => reply.header('cache-control', 'no-store').send({ ...model.config, catalogVectors: VECTORS_ROUTE } satisfies DemoConfig));
    scope.get(VECTORS_ROUTE, async (_req, reply) => {
      const file = join(dataDir, 'catalog-vectors.bin');
      if (!existsSync(file)) return reply.code(404).type('text/plain; charset=utf-8').send('not made yet');
      return reply.type('application/octet-stream').header('content-length', String(statSync(file).size)).header('cache-control', 'no-cache').send(createReadStream(file));
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
    service.close().then(() => process.exit(0), () => process.exit(1));
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  const base = await service.listen({ port, host });
  await service.ready;
  const v2 = service.v2!;
  if (v2.store.latestRelease() !== undefined) {
    log(`atomem demo: the index has a release (epoch ${v2.store.latestRelease()}); not re-seeding`);
  } else if (shoppers > 0) {
    // Demo shortcut: the release of the PREVIOUS epoch, made from simulated shoppers' reports by the
    // service's own aggregation code (not over HTTP), so communities exist from the first click.
    const t0 = Date.now();
    const seedEmbedder = await loadEmbedder();
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
    const space = await (async () => {
      const cv = decodeCatalogVectors(readFileSync(vectorsFile));
      const ids = [...cv.vectors.keys()].sort();
      return { embedderId: cv.header.embedder, ids, vectors: ids.map((id) => cv.vectors.get(id)!.vector) };
    })();
    const release = buildRelease({ epoch, epochMs, space, communities: v2.communities(), hist, ldp: v2.ldp, minContributors: 2 });
    v2.store.publish(epoch, JSON.stringify(release));
    log(`atomem demo: ${r.shoppers} shoppers, ${r.events} events → ${r.reports.length} reports → release of epoch ${epoch} with ${release.communities.length} communities (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
  const shown = new URL(base);
  process.stdout.write(`atomem demo ready at http://${host.includes(':') ? `[${host}]` : host}:${shown.port}\n`);
}

main().catch((err: unknown) => {
  log(`atomem demo: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
