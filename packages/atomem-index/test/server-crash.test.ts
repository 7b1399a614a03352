// The atomem-index CLI as a child process: start-up errors, and crash safety — a burst of
// concurrent reports is cut by SIGKILL, and the restart on the same data dir must hold every
// acknowledged report (a 202 means the report is in the epoch's histogram on disk).
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { INDEX_V2_PATHS, epochOf, type HealthV2Response } from 'atomem/protocol';
import { encodeCatalogVectors } from 'atomem/protocol';
import { createIndexService } from '../src/service.js';
import { attesterTokens, post, rng, unit } from '../../../test/fixtures/index-wire.js';
import { indexServices, type IndexProcess } from '../../../test/fixtures/index-service.js';

const EMB = 'crash-test@1';
const DIM = 16;
const ATTESTER = 'attester-key-for-the-crash-test';
const EPOCH_MS = 86_400_000;

const services = indexServices('atomem-crash-');
const tempDir = (prefix: string) => services.tempDir(prefix);
const runCli = (args: string[]) => services.run(args);

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

/** Start `atomem-index` as a process on `dataDir` and resolve with its URL once it prints that it is ready. */
async function startChild(dataDir: string, catalog: string): Promise<{ child: ChildProcess; url: string; exited: IndexProcess['exited'] }> {
  const p = services.spawn(['--port', '0', '--data', dataDir, '--catalog-vectors', catalog, '--rate-max', '0', '--log-level', 'warn'], {
    attesterKey: ATTESTER,
    readyMs: 60_000,
  });
  return { child: p.child, url: await p.ready, exited: p.exited };
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
