/**
 * atomem as a shop gets it: the packed tarball installed with a plain `npm install` into a fresh
 * Vite app in a temp folder outside the repository, whose files are exactly the quick start of
 * the package's README, the one npm shows (`<!-- consumer-test: FILE -->` blocks; the root
 * README's copies must be identical: packages/atomem/test/package-readme.test.ts), served by `vite` (dev) or `vite build` +
 * `vite preview`, visited by Debian's Chromium. Shared by test/consumer/ and
 * `npm run bench:package` (package-footprint.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, relative, resolve, sep } from 'node:path';
import { createServer as createHttpServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser } from 'playwright';

/** The repository root. */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const PKG = join(REPO, 'packages', 'atomem');
/** The README in the tarball (npm's page of the package); the repository's README.md has the longer guide. */
export const PACKAGE_README = join(PKG, 'README.md');
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
/** The Vite the fresh app installs (the version the repository builds with). */
export const VITE_RANGE = '~8.3.8';

/** `npm pack --json`'s answer for the packed atomem. */
export interface Packed {
  /** Absolute path of the .tgz. */
  file: string;
  /** Tarball bytes. */
  size: number;
  /** Bytes of the files inside. */
  unpackedSize: number;
  entryCount: number;
  files: { path: string; size: number }[];
}

/**
 * Run a command (asynchronously: a test's timers and the browser keep running); throws with its
 * output when it fails. Logs a line on stderr when `ATOMEM_CONSUMER_LOG` is set (slow machines).
 */
export async function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string; ms: number }> {
  const t0 = performance.now();
  const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const code = await new Promise<number | string>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (c, signal) => resolve(c ?? signal ?? 'unknown'));
  });
  const ms = performance.now() - t0;
  if (process.env.ATOMEM_CONSUMER_LOG) process.stderr.write(`consumer: ${cmd} ${args.join(' ')}: ${(ms / 1000).toFixed(1)} s\n`);
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} (in ${cwd}) exited ${code}:\n${stdout}\n${stderr}`);
  return { stdout, stderr, ms };
}

/** Pack packages/atomem (built: `npm run build` first) into `dir`. */
export async function packAtomem(dir: string): Promise<Packed> {
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', dir], PKG);
  const [info] = JSON.parse(stdout.slice(stdout.indexOf('['))) as {
    filename: string;
    size: number;
    unpackedSize: number;
    entryCount: number;
    files: { path: string; size: number }[];
  }[];
  return { file: join(dir, info.filename), size: info.size, unpackedSize: info.unpackedSize, entryCount: info.entryCount, files: info.files };
}

/** Bytes and files under a folder (symlinks counted as links, not followed). */
export function du(dir: string): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        bytes += (e.isSymbolicLink() ? lstatSync(p) : statSync(p)).size;
        files++;
      }
    }
  };
  walk(dir);
  return { bytes, files };
}

/** A README's `<!-- consumer-test: NAME -->` code blocks, by name (default: the repository's README.md). */
export function readmeBlocks(readme = readFileSync(join(REPO, 'README.md'), 'utf8')): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of readme.matchAll(/<!-- consumer-test: (\S+) -->\s*```\w*\n([\s\S]*?)```/g)) out[m[1]] = m[2];
  return out;
}

function pick(blocks: Record<string, string>, names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    if (blocks[n] === undefined) throw new Error(`the README has no <!-- consumer-test: ${n} --> block`);
    out[n] = blocks[n];
  }
  return out;
}

/** The package README's Vite quick start: vite.config.js (the plugin line), index.html, main.js. */
export function quickStartFiles(blocks = readmeBlocks(readFileSync(PACKAGE_README, 'utf8'))): Record<string, string> {
  return pick(blocks, ['vite.config.js', 'index.html', 'main.js']);
}

/**
 * The repository README's webpack 5 recipe: its webpack.config.js, the quick start's index.html, and the
 * quick start's main.js with the recipe's two options added to the `createAtomem` call.
 */
export function webpackRecipeFiles(blocks = readmeBlocks()): Record<string, string> {
  const b = pick(blocks, ['webpack.config.js', 'webpack-options.js', 'index.html', 'main.js']);
  const anchor = /^(\s*)catalog,\n/m;
  if (!anchor.test(b['main.js'])) throw new Error("the quick start's main.js has no `catalog,` line in its createAtomem call");
  return {
    'webpack.config.js': b['webpack.config.js'],
    'index.html': b['index.html'],
    'main.js': b['main.js'].replace(anchor, (line) => `${line}${b['webpack-options.js']}`),
  };
}

/** A fresh app: folder, install logs and footprint. */
export interface FreshApp {
  dir: string;
  /** `npm install` of the dev dependencies (vite) alone, then of the atomem tarball. */
  installs: { vite: { ms: number }; atomem: { ms: number; output: string } };
  /** node_modules before and after `npm install <atomem tarball>`. */
  footprint: { before: { bytes: number; files: number }; after: { bytes: number; files: number } };
  /** `npm ls --all --json` after both installs. */
  tree: NpmTree;
}

/** `npm ls --json` shape (the parts used). */
export interface NpmTree {
  dependencies?: Record<string, { version?: string; dependencies?: NpmTree['dependencies'] }>;
}

/**
 * Make an app in a temp folder: `npm install` of its dev dependencies (default: vite), then a plain `npm install <tarball>`
 * (with `--foreground-scripts`, so any install script would show in `output`), then the quick
 * start's files. npm uses its normal cache (`--prefer-offline`).
 */
export async function createFreshApp(
  tarball: string,
  files = quickStartFiles(),
  parent = tmpdir(),
  devDependencies: Record<string, string> = { vite: VITE_RANGE },
): Promise<FreshApp> {
  const dir = mkdtempSync(join(parent, 'atomem-shop-'));
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'fresh-shop', private: true, type: 'module', devDependencies }, null, 2)}\n`);
  const npmFlags = ['--no-audit', '--no-fund', '--prefer-offline', '--foreground-scripts'];
  const vite = await run('npm', ['install', ...npmFlags], dir);
  const before = du(join(dir, 'node_modules'));
  const atomem = await run('npm', ['install', ...npmFlags, tarball], dir);
  const after = du(join(dir, 'node_modules'));
  const tree = JSON.parse((await run('npm', ['ls', '--all', '--json'], dir)).stdout) as NpmTree;
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
  }
  return {
    dir,
    installs: { vite: { ms: vite.ms }, atomem: { ms: atomem.ms, output: `${atomem.stdout}\n${atomem.stderr}` } },
    footprint: { before, after },
    tree,
  };
}

/** A free loopback port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** A running `vite` / `vite preview` of the app (its own process group). */
export interface Served {
  url: string;
  output: () => string;
  stop: () => Promise<void>;
}

/** Start `vite` (dev) or `vite preview` (after `vite build`) in the app; resolves once it answers. */
export async function serve(dir: string, mode: 'dev' | 'preview', extraArgs: string[] = []): Promise<Served> {
  const port = await freePort();
  const args = [
    join(dir, 'node_modules', 'vite', 'bin', 'vite.js'),
    ...(mode === 'preview' ? ['preview'] : []),
    '--host',
    '127.0.0.1',
    '--port',
    String(port),
    '--strictPort',
    ...extraArgs,
  ];
  const child: ChildProcess = spawn(process.execPath, args, {
    cwd: dir,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  let log = '';
  child.stdout?.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (log += d.toString()));
  const url = `http://127.0.0.1:${port}/`;
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.pid === undefined) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      return;
    }
    await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
    if (child.exitCode === null) {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`vite ${mode} exited ${child.exitCode}:\n${log}`);
    try {
      const r = await fetch(url);
      if (r.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`vite ${mode} did not answer at ${url} within 60 s:\n${log}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return { url, output: () => log, stop };
}

/** A plain static file server of `root` on loopback (what a shop's web server does for a webpack build). */
export async function serveStatic(root: string): Promise<Served> {
  const types: Record<string, string> = {
    '.html': 'text/html; charset=utf-8',
    '.js': 'text/javascript; charset=utf-8',
    '.mjs': 'text/javascript; charset=utf-8',
    '.json': 'application/json; charset=utf-8',
    '.wasm': 'application/wasm',
  };
  let log = '';
  const server = createHttpServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    const file = resolve(root, `.${path.endsWith('/') ? `${path}index.html` : path}`);
    if (!file.startsWith(resolve(root) + sep) || !existsSync(file) || !statSync(file).isFile()) {
      log += `404 ${path}\n`;
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': types[extname(file)] ?? 'application/octet-stream' });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/`, output: () => log, stop: () => new Promise<void>((r) => server.close(() => r())) };
}

/** `vite build` in the app (extra args e.g. `--base ./ --outDir dist-relative`). */
export async function viteBuild(dir: string, extraArgs: string[] = []): Promise<{ ms: number; output: string }> {
  const r = await run(process.execPath, [join(dir, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', ...extraArgs], dir, { NO_COLOR: '1' });
  return { ms: r.ms, output: r.stdout + r.stderr };
}

/** What one visit of the quick-start page did. */
export interface Visit {
  /** The `<li>` texts of `#recommendations` once rendered ([] if they never were). */
  recommendations: string[];
  /** `#status` text at the end. */
  status: string;
  /** Uncaught page errors and console errors. */
  pageErrors: string[];
  consoleErrors: string[];
  /** Every request (page and worker), and those not on the page's origin. */
  requests: string[];
  offOrigin: string[];
  /** Requests answered with status >= 400. */
  failed: string[];
  /** Bytes on the wire: response bodies as transferred (compressed where the server compresses; 0 for 304s and memory-cache hits), page and worker. */
  bytes: number;
  /** Navigation start → the first `<li>` in `#recommendations` (ms), or null. */
  msToRecommendations: number | null;
}

/**
 * Visit the quick-start page at `url` in a fresh context (empty cache, empty IndexedDB) unless
 * `context` reuses one (a returning visitor: HTTP cache and IndexedDB kept). Waits for the recommendations or `#status` saying
 * they are unavailable.
 */
export async function visit(
  browser: Browser,
  url: string,
  opts: { timeoutMs?: number; context?: Awaited<ReturnType<Browser['newContext']>> } = {},
): Promise<Visit> {
  const context = opts.context ?? (await browser.newContext());
  const origin = new URL(url).origin;
  const v: Visit = {
    recommendations: [],
    status: '',
    pageErrors: [],
    consoleErrors: [],
    requests: [],
    offOrigin: [],
    failed: [],
    bytes: 0,
    msToRecommendations: null,
  };
  // every request of the context, the page's and its worker's (no request routing: it would disable the HTTP cache)
  const onRequest = (r: import('playwright').Request): void => {
    const u = r.url();
    v.requests.push(u);
    if (!u.startsWith(`${origin}/`) && !u.startsWith('data:') && !u.startsWith('blob:')) v.offOrigin.push(u);
  };
  context.on('request', onRequest);
  const page = await context.newPage();
  page.on('pageerror', (e) => v.pageErrors.push(`${e.name}: ${e.message}`));
  page.on('console', (m) => {
    // why: the browser asks for /favicon.ico by itself; the quick start has none
    if (m.type() === 'error' && !/\/favicon\.ico$/.test(m.location().url)) v.consoleErrors.push(`${m.text()} (${m.location().url})`);
  });
  const pending: Promise<void>[] = [];
  let settled = 0;
  const onFailed = (): void => void settled++;
  context.on('requestfailed', onFailed);
  const onFinished = (r: import('playwright').Request): void => {
    settled++;
    pending.push(
      (async () => {
        const res = await r.response();
        if (res && res.status() >= 400) v.failed.push(`${res.status()} ${r.url()}`);
        v.bytes += (await r.sizes().catch(() => ({ responseBodySize: 0 }))).responseBodySize;
      })(),
    );
  };
  context.on('requestfinished', onFinished);
  await page.addInitScript(() => {
    const w = window as unknown as { __recsAt?: number };
    new MutationObserver((_, obs) => {
      if (document.querySelector('#recommendations li')) {
        w.__recsAt = performance.now();
        obs.disconnect();
      }
    }).observe(document, { childList: true, subtree: true });
  });
  await page.goto(url);
  await page
    .waitForFunction(
      () => document.querySelector('#recommendations li') || /unavailable/.test(document.querySelector('#status')?.textContent ?? ''),
      undefined,
      { timeout: opts.timeoutMs ?? 120_000 },
    )
    .catch(() => undefined);
  v.recommendations = await page.$$eval('#recommendations li', (lis) => lis.map((li) => li.textContent ?? ''));
  v.status = (await page.textContent('#status').catch(() => '')) ?? '';
  v.msToRecommendations = await page.evaluate(() => (window as unknown as { __recsAt?: number }).__recsAt ?? null);
  // why: 'requestfinished' of a large body can come after the page rendered; wait (bounded) until every request settled
  for (const end = Date.now() + 10_000; settled < v.requests.length && Date.now() < end; ) await new Promise((r) => setTimeout(r, 50));
  await Promise.all(pending);
  context.off('requestfinished', onFinished);
  context.off('requestfailed', onFailed);
  context.off('request', onRequest);
  await page.close();
  if (!opts.context) await context.close();
  return v;
}

/** Debian's Chromium (never a downloaded one). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}

/**
 * Installed packages that would run something at install time: an `preinstall` / `install` /
 * `postinstall` script, or a `binding.gyp` (npm compiles it with node-gyp). Paths relative to `dir`.
 */
export function installTimeCode(dir: string): string[] {
  const found: string[] = [];
  const walk = (nm: string): void => {
    if (!existsSync(nm)) return;
    for (const e of readdirSync(nm, { withFileTypes: true })) {
      if (!e.isDirectory() || e.name.startsWith('.')) continue;
      if (e.name.startsWith('@')) {
        walk(join(nm, e.name));
        continue;
      }
      const pkg = join(nm, e.name);
      const manifest = join(pkg, 'package.json');
      if (existsSync(manifest)) {
        const scripts = (JSON.parse(readFileSync(manifest, 'utf8')) as { scripts?: Record<string, string> }).scripts ?? {};
        const hooks = ['preinstall', 'install', 'postinstall'].filter((h) => scripts[h]);
        if (hooks.length || existsSync(join(pkg, 'binding.gyp'))) found.push(`${relative(dir, pkg)} (${hooks.join(', ') || 'binding.gyp'})`);
      }
      walk(join(pkg, 'node_modules'));
    }
  };
  walk(join(dir, 'node_modules'));
  return found;
}

/** Remove a temp folder made by {@link createFreshApp} (or anything under the OS temp dir). */
export function removeTemp(dir: string): void {
  if (!dir.startsWith(tmpdir())) throw new Error(`refusing to remove ${dir}: not under ${tmpdir()}`);
  rmSync(dir, { recursive: true, force: true });
}
