/**
 * `npm run bench:start`: what the demo's set-up costs a newcomer, measured end to end.
 *
 * 1. `npm start` on a fresh data folder (the build reused when its inputs are unchanged: see
 *    scripts/build-if-changed.mjs), until it prints its URL; stopped.
 * 2. `npm start` again on the same data folder: the **second start**, the one a developer waits
 *    for every day.
 * 3. Two visits in headless Debian Chromium (playwright, `CHROMIUM_PATH` or /usr/bin/chromium)
 *    with one browser profile on disk, the browser closed in between: each loads the shop, waits
 *    for the "For you" shelf and types an intent (which loads USE-lite in the worker). The bytes
 *    are the response bodies the server sent (its `DEMO_LOG_REQUESTS` log: content-length, 0 for
 *    a 304), so what the browser took from its own cache counts 0.
 *
 * Options: `--data DIR` (default: a temporary folder, removed at the end), `--cold` (force a
 * build first: the first start then includes it). Prints a table; exits 1 when a step fails.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const INTENT = 'a gift for my dad, he hikes';

interface Started {
  child: ChildProcess;
  base: string;
  seconds: number;
  /** Whether this start ran the build (scripts/build-if-changed.mjs found changed inputs). */
  built: boolean;
  /** Response lines logged so far: status, method, path, bytes. */
  responses: { status: number; method: string; path: string; bytes: number }[];
  stop: () => Promise<void>;
}

/** `npm start` with its own data folder and port 0; resolves when it prints its URL. */
async function npmStart(dataDir: string): Promise<Started> {
  const t0 = performance.now();
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ATOMEM_DATA: dataDir, DEMO_LOG_REQUESTS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // its own process group, so stopping it stops npm, tsx and the server
    detached: true,
  });
  const responses: Started['responses'] = [];
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
    for (const m of chunk.matchAll(/^response (\d+) (\S+) (\S+) (\d+)$/gm))
      responses.push({ status: Number(m[1]), method: m[2], path: m[3], bytes: Number(m[4]) });
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    process.kill(-child.pid!, 'SIGTERM');
    await exited;
  };
  let out = '';
  const base = await new Promise<string>((res, rej) => {
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const m = /atomem demo ready at (http:\/\/\S+)/.exec(out);
      if (m) res(m[1]);
    });
    child.on('exit', (code) => rej(new Error(`npm start exited with ${code}:\n${err.slice(-2000)}`)));
  });
  return { child, base, seconds: (performance.now() - t0) / 1000, built: /atomem: building/.test(out), responses, stop };
}

/** One visit with the browser profile in `profile`: the shop, its shelf, one intent. */
async function visit(base: string, profile: string): Promise<void> {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${base}/`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 180_000 });
    await page.waitForFunction(() => document.querySelectorAll('#shelf .card').length === 8, undefined, { timeout: 60_000 });
    await page.locator('#intent-input').fill(INTENT);
    await page.waitForFunction(() => ['on', 'unmatched'].includes(document.getElementById('shelf')?.dataset.intent ?? ''), undefined, { timeout: 180_000 });
    await page.waitForTimeout(1000);
  } finally {
    await context.close();
  }
}

const mb = (b: number) => (b >= 100_000 ? `${(b / 1e6).toFixed(2)} MB` : `${(b / 1e3).toFixed(1)} kB`);

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const dataArg = args.indexOf('--data');
  const own = dataArg < 0;
  const dataDir = own ? mkdtempSync(join(tmpdir(), 'atomem-bench-start-')) : resolve(args[dataArg + 1]);
  const profile = mkdtempSync(join(tmpdir(), 'atomem-bench-profile-'));
  if (args.includes('--cold')) {
    console.error('bench:start: forcing a build (--cold) …');
    const r = spawnSync(process.execPath, [join(ROOT, 'scripts/build-if-changed.mjs'), '--force'], { cwd: ROOT, stdio: 'inherit' });
    if (r.status !== 0) throw new Error('the build failed');
  }
  let server: Started | undefined;
  try {
    console.error(`bench:start: first start (data folder ${dataDir}) …`);
    const first = await npmStart(dataDir);
    await first.stop();
    console.error(`bench:start: first start ready in ${first.seconds.toFixed(1)} s; second start …`);
    server = await npmStart(dataDir);
    console.error(`bench:start: second start ready in ${server.seconds.toFixed(1)} s; first visit …`);
    const visits: { name: string; responses: Started['responses'] }[] = [];
    for (const name of ['first visit', 'second visit (browser restarted, same profile)']) {
      const mark = server.responses.length;
      await visit(server.base, profile);
      await new Promise((r) => setTimeout(r, 500));
      visits.push({ name, responses: server.responses.slice(mark) });
      console.error(`bench:start: ${name} done`);
    }
    console.log(
      `\nnpm start (Node ${process.version}, ${new Date().toISOString().slice(0, 10)}, load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores):\n`,
    );
    console.log('| step | seconds |');
    console.log('|---|---:|');
    const build = (s: Started) => (s.built ? 'the build ran (inputs changed)' : 'build reused');
    console.log(`| first start (fresh data folder: shop model, SASRec, seeding; ${build(first)}) | ${first.seconds.toFixed(1)} |`);
    console.log(`| **second start** (same data folder; ${build(server)}) | **${server.seconds.toFixed(1)}** |`);
    console.log(`\nVisits (the shop, its shelf, then the intent “${INTENT}”; response bodies sent by the server):\n`);
    console.log('| visit | requests | 200 | 304 | bytes | of which USE-lite + tfjs wasm |');
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const v of visits) {
      const bytes = v.responses.reduce((a, r) => a + r.bytes, 0);
      const model = v.responses.filter((r) => /\/(use-lite|tfjs-wasm)\//.test(r.path)).reduce((a, r) => a + r.bytes, 0);
      console.log(
        `| ${v.name} | ${v.responses.length} | ${v.responses.filter((r) => r.status === 200).length} | ${v.responses.filter((r) => r.status === 304).length} | ${mb(bytes)} | ${mb(model)} |`,
      );
    }
    const [a, b] = visits.map((v) => v.responses.reduce((s, r) => s + r.bytes, 0));
    console.log(`\nsecond visit / first visit bytes: ${a > 0 ? (b / a).toFixed(4) : '—'}`);
  } finally {
    await server?.stop();
    rmSync(profile, { recursive: true, force: true });
    if (own) rmSync(dataDir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(`bench:start: ${e instanceof Error ? e.message : String(e)}`);
  process.exit(1);
});
