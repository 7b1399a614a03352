// Crash safety of the index service: the CLI runs as a child process, a burst of concurrent
// upserts is cut by SIGKILL, and a restart on the same data dir must hold every acknowledged
// upsert, with communities equal to a recomputation from the stored rows and candidate lists.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { INDEX_PATHS, encodeVector, hashToken, type WireCommunity, type WireMemory } from '../../packages/atomem/src/protocol/index-v1.js';
import { createIndexService } from '../../packages/atomem-index/src/service.js';
import { DEFAULT_EMBEDDER } from '../../packages/atomem-index/src/defaults.js';
import { cappedComponents, mutualLinks, post, rng, unit } from '../fixtures/index-wire.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const EMB = 'crash-test@1';
const DIM = 24;
const K = 3;

const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Start `atomem-index` (through tsx) and resolve with its URL once it prints that it is ready. */
function startChild(dataDir: string): Promise<{ child: ChildProcess; url: string; exited: Promise<{ code: number | null; signal: string | null }> }> {
  const child = spawn(
    process.execPath,
    ['-C', 'atomem-source', '--import', 'tsx', 'packages/atomem-index/src/cli.ts', '--legacy-v1', '--port', '0', '--data', dataDir, '--embedder', `${EMB}=${DIM}`, '--k', String(K), '--rate-max', '0', '--log-level', 'warn', '--exact-below', '64'],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`service not ready after 30 s\n${out}\n${err}`)), 30_000);
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
  const child = spawn(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', 'packages/atomem-index/src/cli.ts', ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
}

describe('atomem-index CLI', () => {
  it('serves the browser default embedder when none is given', async () => {
    const { USE_LITE_ID } = await import('../../packages/atomem/src/embed/use-lite.js');
    expect(DEFAULT_EMBEDDER).toBe(USE_LITE_ID);
  });

  it('exits 1 with a message on a bad option, or when the data dir is in use', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'atomem-cli-'));
    dirs.push(dataDir);
    const bad = await runCli(['--legacy-v1', '--data', dataDir, '--embedder', `${EMB}=${DIM}`, '--k', 'zero']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--k must be an integer/);
    const svc = createIndexService({ legacyV1: true, dataDir, embedderIds: [EMB], embedderDims: { [EMB]: DIM } });
    try {
      const busy = await runCli(['--legacy-v1', '--data', dataDir, '--embedder', `${EMB}=${DIM}`, '--port', '0']);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toMatch(/in use by another process/);
    } finally {
      await svc.close();
    }
  });
});

describe('atomem-index CLI, protocol v2', () => {
  it('needs the catalog vector file (or the explicit --legacy-v1)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'atomem-cli-'));
    dirs.push(dataDir);
    const none = await runCli(['--data', dataDir, '--port', '0']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/--catalog-vectors <file> is required/);
  });
});

describe('index service: crash safety', () => {
  it('SIGKILL mid-burst loses no acknowledged upsert; the restart equals a recomputation', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'atomem-crash-'));
    dirs.push(dataDir);
    const first = await startChild(dataDir);

    const r = rng(99);
    const centres = Array.from({ length: 6 }, () => unit(Array.from({ length: DIM }, () => r() - 0.5)));
    const tokenHash = await hashToken('crash-test-token-0123456789');
    const sent = new Set<string>();
    const acked = new Set<string>();
    let next = 0;
    let killed = false;
    let failures = 0;
    const unexpected: unknown[] = [];
    // every worker keeps sending until its request fails (the process is gone), so requests are in flight at the kill
    const worker = async () => {
      for (;;) {
        const memories: WireMemory[] = Array.from({ length: 4 }, () => {
          const id = `crash-${(next++).toString().padStart(6, '0')}`;
          sent.add(id);
          const v = unit(Array.from(centres[Math.floor(r() * centres.length)], (x) => x + 0.5 * (r() - 0.5)));
          return { id, tokenHash, embedderId: EMB, dim: DIM, vector: encodeVector(v), items: [`sku-${Math.floor(r() * 10)}`] };
        });
        let res: { status: number; body: any };
        try {
          res = await post(first.url, INDEX_PATHS.upsert, { v: 1, memories });
        } catch {
          failures++; // the server died under this request: not acknowledged
          return;
        }
        if (res.status === 200 && res.body.accepted === 4) for (const m of memories) acked.add(m.id);
        else unexpected.push(res);
        if (acked.size >= 160 && !killed) {
          killed = true;
          first.child.kill('SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: 6 }, worker));
    expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(unexpected).toEqual([]);
    expect(failures).toBeGreaterThan(0);
    expect(acked.size).toBeGreaterThanOrEqual(160);
    expect(sent.size).toBeGreaterThan(acked.size); // requests were in flight when it died
    expect(sent.size).toBeLessThanOrEqual(512);

    // Restart on the same data dir.
    const second = await startChild(dataDir);
    const health = await (await fetch(second.url + INDEX_PATHS.health)).json();
    expect(health.status).toBe('ok');
    expect(health.memories).toBeGreaterThanOrEqual(acked.size);
    expect(health.memories).toBeLessThanOrEqual(sent.size);
    // Every acknowledged id is stored: re-using it under another token is a conflict.
    const otherHash = await hashToken('another-token-0123456789');
    const ackedIds = [...acked];
    for (let i = 0; i < ackedIds.length; i += 16) {
      const statuses = await Promise.all(
        ackedIds.slice(i, i + 16).map(async (id) => {
          const res = await post(second.url, INDEX_PATHS.upsert, {
            v: 1,
            memories: [{ id, tokenHash: otherHash, embedderId: EMB, dim: DIM, vector: encodeVector(centres[0]) }],
          });
          return res.status;
        }),
      );
      expect(statuses.every((s) => s === 409)).toBe(true);
    }
    // The restarted service's communities, asked about every id that may be stored.
    const res = await post(second.url, INDEX_PATHS.communities, { v: 1, embedderId: EMB, ids: [...sent] });
    expect(res.status).toBe(200);
    const served = (res.body.communities as WireCommunity[]).map((c) => {
      expect(c.size).toBe(c.ownIds.length); // we asked about every stored id
      expect(c.members).toEqual([]); // all of them are "ours": nothing else to release
      return [...c.ownIds].sort();
    });
    expect(served.length).toBeGreaterThan(0);

    // Graceful stop: SIGTERM → exit code 0.
    second.child.kill('SIGTERM');
    expect(await second.exited).toEqual({ code: 0, signal: null });

    // Recompute from the file alone: communities of the stored candidate lists.
    const svc = createIndexService({ legacyV1: true, dataDir, embedderIds: [EMB], embedderDims: { [EMB]: DIM }, minCommunitySize: K, rateLimit: false });
    await svc.ready;
    const rows = svc.store.all();
    const ids = new Set(rows.map((m) => m.id));
    for (const id of acked) expect(ids.has(id), id).toBe(true);
    for (const id of ids) expect(sent.has(id), id).toBe(true);
    const links = svc.store.links();
    expect(links.length).toBeGreaterThan(0);
    for (const l of links) expect(ids.has(l.src) && ids.has(l.dst)).toBe(true);
    // the stored candidate lists: mutual pairs are the links; communities = their capped components
    const edges = mutualLinks(links);
    expect(edges.length).toBeGreaterThan(0);
    expect(svc.index(EMB)!.graph.edges()).toEqual(edges);
    const components = cappedComponents(ids, edges);
    const byFirst = (a: string[], b: string[]) => (a[0] < b[0] ? -1 : 1);
    expect(svc.partition(EMB)).toEqual(components.sort(byFirst));
    expect(served.sort(byFirst)).toEqual(components.filter((c) => c.length >= K).sort(byFirst));
    await svc.close();
  });
});
