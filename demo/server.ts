/**
 * The demo shop's server (`npm start`): ONE origin for everything —
 * - the shared community index service (`/v1/…`, SQLite in `ATOMEM_DATA`, default `.atomem-data/`),
 * - the built demo page (`demo/dist/`, from `npm run build:demo`) at `/`,
 * - the built library (`dist/`, from `npm run build`) at `/dist/…` (entry, worker chunk, USE-lite
 *   model files, tfjs wasm): the page imports `/dist/index.js` exactly as a shop would.
 *
 * At the first start it fills the index with a simulated population of shoppers (see
 * demo/seed.ts) so communities exist from the first click; later starts reuse the data folder.
 *
 *   PORT (default 5173; 0 = any free port) · HOST (default 127.0.0.1) · ATOMEM_DATA (data folder)
 *   DEMO_SHOPPERS (simulated shoppers at the first start, default 80)
 *   DEMO_LOG_REQUESTS (set: log `request METHOD /path` for every request on stderr; the e2e test reads it)
 *
 * Prints `atomem demo ready at http://HOST:PORT` on stdout when ready; progress goes to stderr.
 */
import { createReadStream, existsSync, mkdirSync, statSync } from 'node:fs';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { createIndexService } from '../src/server/service.js';
import { createUseLiteEmbedder, tauFor, USE_LITE_ID } from '../src/engine.js';
import { generateCatalog } from './catalog.js';
import { seedPopulation } from './seed.js';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const PAGE_DIR = join(ROOT, 'demo', 'dist');
const LIB_DIR = join(ROOT, 'dist');

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

/** Map a request path to a file under demo/dist/ or dist/ (undefined: not served). */
export function fileFor(pathname: string): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(pathname);
  } catch {
    return undefined;
  }
  if (path.includes('\0')) return undefined;
  const [base, rel] = path.startsWith('/dist/') ? [LIB_DIR, path.slice('/dist/'.length)] : [PAGE_DIR, path === '/' ? 'index.html' : path.slice(1)];
  const file = resolve(base, rel);
  // why: never serve anything outside the two folders (../ tricks), nor dist/node (server code)
  if (!file.startsWith(base + sep) || file.startsWith(join(LIB_DIR, 'node') + sep)) return undefined;
  if (!existsSync(file) || !statSync(file).isFile()) return undefined;
  return file;
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
  for (const [file, script] of [
    [join(PAGE_DIR, 'index.html'), 'npm run build:demo'],
    [join(LIB_DIR, 'index.js'), 'npm run build'],
  ] as const) {
    if (!existsSync(file)) throw new Error(`${file} is missing: run \`${script}\` first (\`npm start\` does)`);
  }
  mkdirSync(dataDir, { recursive: true });
  log(`atomem demo: data folder ${dataDir}`);

  // the browser engine's default embedder: USE-lite, not centred; tau for that space (0.85, not the paper's 0.5)
  const service = createIndexService({ dataDir, embedderIds: [USE_LITE_ID], tau: tauFor(USE_LITE_ID), rateLimit: false });
  if (process.env.DEMO_LOG_REQUESTS) {
    // for the e2e test: every request as it arrives on the wire (method and path only, no address)
    service.app.addHook('onRequest', async (req) => log(`request ${req.method} ${req.url.split('?')[0]}`));
  }
  service.app.register(async (scope) => {
    const serve = async (req: FastifyRequest, reply: FastifyReply) => {
      const file = fileFor(new URL(req.url, 'http://x').pathname);
      if (!file) return reply.code(404).type('text/plain; charset=utf-8').send('not found');
      return reply
        .type(TYPES[extname(file)] ?? 'application/octet-stream')
        .header('cache-control', 'no-cache')
        .send(createReadStream(file));
    };
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
  const health = (await (await fetch(`${base}/v1/health`)).json()) as { memories: number; communities: number };
  if (health.memories > 0) {
    log(`atomem demo: the index already holds ${health.memories} memories in ${health.communities} communities; not re-seeding`);
  } else if (shoppers > 0) {
    const t0 = Date.now();
    log('atomem demo: loading USE-lite (offline, from node_modules) …');
    const embedder = await createUseLiteEmbedder();
    const catalog = generateCatalog();
    log(`atomem demo: simulating ${shoppers} shoppers over ${catalog.length} products …`);
    const width = 30;
    const r = await seedPopulation({
      url: base,
      catalog,
      embedder,
      shoppers,
      onProgress: (done, total) => {
        const bar = '█'.repeat(Math.round((done / total) * width)).padEnd(width, '░');
        if (process.stderr.isTTY) process.stderr.write(`\r  ${bar} ${done}/${total} shoppers`);
        else if (done % 10 === 0 || done === total) log(`  ${done}/${total} shoppers`);
      },
    });
    if (process.stderr.isTTY) process.stderr.write('\n');
    const after = (await (await fetch(`${base}/v1/health`)).json()) as { memories: number; communities: number };
    log(`atomem demo: ${r.shoppers} shoppers, ${r.events} events → ${after.memories} shared memories in ${after.communities} communities (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
  const shown = new URL(base);
  process.stdout.write(`atomem demo ready at http://${host.includes(':') ? `[${host}]` : host}:${shown.port}\n`);
}

main().catch((err: unknown) => {
  log(`atomem demo: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
