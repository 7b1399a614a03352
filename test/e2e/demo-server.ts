/**
 * What the e2e tests share: `startDemo` starts `apps/demo/server.ts` (the demo shop: index
 * service, built page, built library on one origin) as a child process on a free port with its
 * own data folder (resolves once it prints its URL; `stop()` ends it and removes the data
 * folder); `buildDemoPage` and `launchChromium` prepare the page and the browser; `idle` waits
 * until the page has nothing pending (the page's own `window.atomemDemo.idle()`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Where the e2e tests write their screenshots: `test-results/screenshots/` (gitignored), so a test
 * run leaves the repository as it was, or `ATOMEM_SCREENSHOTS` (relative to the repository root):
 * `ATOMEM_SCREENSHOTS=docs/screenshots npm run test:e2e` refreshes the README's pictures on purpose.
 */
export const SCREENSHOTS = resolve(ROOT, process.env.ATOMEM_SCREENSHOTS || join('test-results', 'screenshots'));

/** A running demo server. */
export interface Demo {
  server: ChildProcess;
  base: string;
  dataDir: string;
  /** Everything it wrote on stderr so far. */
  stderr: () => string;
  stop: () => Promise<void>;
}

/** Start the demo with `env` on top of PORT 0, HOST 127.0.0.1 and a fresh ATOMEM_DATA; `onStderr` sees each chunk. */
export async function startDemo(env: Record<string, string>, onStderr?: (chunk: string) => void): Promise<Demo> {
  const dataDir = mkdtempSync(join(tmpdir(), 'atomem-demo-e2e-'));
  const server = spawn(process.execPath, ['--import', 'tsx', 'apps/demo/server.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ATOMEM_DATA: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  server.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
    onStderr?.(chunk);
  });
  const stop = async (): Promise<void> => {
    if (server.exitCode === null) {
      const exited = new Promise((r) => server.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  const base = await new Promise<string>((resolve, reject) => {
    let out = '';
    server.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const m = /atomem demo ready at (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    server.on('exit', (code) => reject(new Error(`demo server exited with ${code}:\n${stderr}`)));
  }).catch(async (e: unknown) => {
    await stop();
    throw e;
  });
  return { server, base, dataDir, stderr: () => stderr, stop };
}

/** Checks the library is built (`npm run build`) and builds the demo page (apps/demo/dist/) when it is missing. */
export function buildDemoPage(): void {
  if (!existsSync(join(ROOT, 'packages/atomem/dist/index.js'))) throw new Error('packages/atomem/dist/ is missing: run `npm run build` first');
  if (!existsSync(join(ROOT, 'apps/demo/dist/index.html'))) {
    execFileSync(process.execPath, [join(ROOT, 'node_modules/vite/bin/vite.js'), 'build', '--config', 'apps/demo/vite.config.ts'], {
      cwd: ROOT,
      stdio: 'inherit',
    });
  }
}

/** Headless Debian Chromium (`CHROMIUM_PATH`, default /usr/bin/chromium; never a Playwright-downloaded browser). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/**
 * Wait until the demo page has nothing pending: no action, redraw or timer of its own, and an
 * engine with no model loading, no event deferred to idle time and no report scheduled
 * (apps/demo/main.ts `idle`). The page must have started (`body[data-ready="true"]`).
 */
export async function idle(page: Page, timeout = 60_000): Promise<void> {
  const ready = await page.evaluate(() => typeof window.atomemDemo?.idle === 'function');
  if (!ready) throw new Error('the demo page has no window.atomemDemo.idle(): wait for body[data-ready] first, or rebuild apps/demo/dist (`npm run build`)');
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      page.evaluate(() => window.atomemDemo?.idle()),
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`the demo page was not idle after ${timeout} ms`)), timeout))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
