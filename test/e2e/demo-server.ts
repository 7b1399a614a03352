/**
 * Starts `apps/demo/server.ts` (the demo shop: index service, built page, built library on one
 * origin) as a child process on a free port with its own data folder, for the e2e tests.
 * Resolves once it prints its URL; `stop()` ends it and removes the data folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
