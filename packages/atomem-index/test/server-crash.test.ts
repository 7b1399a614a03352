// The atomem-index CLI as a child process: start-up errors, and crash safety — a burst of
// concurrent reports is cut by SIGKILL, and the restart on the same data dir must hold every
// acknowledged report (a 202 means the report is in the epoch's histogram on disk).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { INDEX_V2_PATHS, epochOf, type HealthV2Response } from 'atomem/protocol';
import { encodeCatalogVectors } from 'atomem/protocol';
import { createIndexService } from '../src/service.js';
import { attesterTokens, post, rng, unit } from '../../../test/fixtures/index-wire.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const EMB = 'crash-test@1';
const DIM = 16;
const ATTESTER = 'attester-key-for-the-crash-test';
const EPOCH_MS = 86_400_000;

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** A small catalog vector file (40 items in 4 clusters) in `dir`. */
function catalogFile(dir: string): string {
  const r = rng(7);
  const centres = Array.from({ length: 4 }, () => unit(Array.from({ length: DIM }, () => r() - 0.5)));
  const items = Array.from({ length: 40 }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
  const file = join(dir, 'catalog.bin');
  writeFileSync(
    file,
    encodeCatalogVectors(
      { id: EMB, dim: DIM },
      items,
      items.map((_, i) => unit(Array.from(centres[i % 4], (x) => x + 0.2 * (r() - 0.5)))),
    ),
  );
  return file;
}

/** Start `atomem-index` (through tsx) and resolve with its URL once it prints that it is ready. */
function startChild(
  dataDir: string,
  catalog: string,
): Promise<{ child: ChildProcess; url: string; exited: Promise<{ code: number | null; signal: string | null }> }> {
  const child = spawn(
    process.execPath,
    [
      '-C',
      'atomem-source',
      '--import',
      'tsx',
      'packages/atomem-index/src/cli.ts',
      '--port',
      '0',
      '--data',
      dataDir,
      '--catalog-vectors',
      catalog,
      '--rate-max',
      '0',
      '--log-level',
      'warn',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ATOMEM_ATTESTER_KEY: ATTESTER } },
  );
  children.push(child);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`service not ready after 60 s\n${out}\n${err}`)), 60_000);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /ready at (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1], exited });
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${code ?? signal}) before it was ready\n${out}\n${err}`));
    });
  });
}

/** Run the CLI to completion (for start-up errors). */
function runCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', 'packages/atomem-index/src/cli.ts', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
}

/** Reports stored for `epoch` in the data dir's report file (read after the service is gone). */
function storedReports(dataDir: string, epoch: number): number {
  const db = new Database(join(dataDir, 'reports.sqlite'), { readonly: true });
  try {
    return (db.prepare('SELECT COALESCE(SUM(n), 0) AS n FROM cells WHERE epoch = ?').get(epoch) as { n: number }).n;
  } finally {
    db.close();
  }
}

describe('atomem-index CLI', () => {
  it('needs the catalog vector file; exits 1 with a message on a bad option, or when the data dir is in use', async () => {
    const dataDir = tempDir('atomem-cli-');
    const none = await runCli(['--data', dataDir, '--port', '0']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/required option '--catalog-vectors <file>' not specified/);
    const catalog = catalogFile(dataDir);
    const bad = await runCli(['--data', dataDir, '--catalog-vectors', catalog, '--min-reports', 'zero']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--min-reports must be an integer/);
    const svc = createIndexService({
      dataDir,
      v2: { space: { embedderId: EMB, ids: ['sku-0'], vectors: [unit(Array.from({ length: DIM }, (_, i) => i + 1))] } },
    });
    try {
      const busy = await runCli(['--data', dataDir, '--catalog-vectors', catalog, '--port', '0']);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toMatch(/in use by another process/);
    } finally {
      await svc.close();
    }
  }, 60_000);
});

describe('index service: crash safety', () => {
  it('SIGKILL mid-burst loses no acknowledged report; the restart serves the same epoch', async () => {
    const dir = tempDir('atomem-crash-');
    const dataDir = join(dir, 'data');
    const catalog = catalogFile(dir);
    const first = await startChild(dataDir, catalog);
    const epoch = epochOf(Date.now(), EPOCH_MS);
    const tokens = attesterTokens(first.url, ATTESTER);
    const minted: string[] = [];
    for (let i = 0; i < 48; i++) minted.push(await tokens.token(epoch));
    // the burst: 8 concurrent senders; SIGKILL once a third is acknowledged
    let acked = 0;
    let sent = 0;
    const send = async (s: number) => {
      for (let i = s; i < minted.length; i += 8) {
        sent++;
        const res = await post(first.url, INDEX_V2_PATHS.report, { v: 2, epoch, token: minted[i], report: { cohort: i % 64, bucket: i % 3 } }).catch(
          () => undefined,
        );
        if (res?.status === 202) acked++;
        else if (res) throw new Error(`report ${i}: ${res.status} ${JSON.stringify(res.body)}`);
        else return;
        if (acked === 16) first.child.kill('SIGKILL');
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, s) => send(s)));
    expect((await first.exited).signal).toBe('SIGKILL');
    expect(acked).toBeGreaterThanOrEqual(16);
    const stored = storedReports(dataDir, epoch);
    expect(stored).toBeGreaterThanOrEqual(acked);
    expect(stored).toBeLessThanOrEqual(sent);
    const second = await startChild(dataDir, catalog);
    const h = (await (await fetch(second.url + INDEX_V2_PATHS.health)).json()) as HealthV2Response;
    expect(h.status).toBe('ok');
    expect(h.epoch).toBe(epoch);
    // a token spent before the crash stays spent
    const again = await post(second.url, INDEX_V2_PATHS.report, { v: 2, epoch, token: minted[0], report: { cohort: 0, bucket: 0 } });
    expect(again.status).toBe(403);
    second.child.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);
  }, 180_000);
});
