/**
 * The index service's first start and restart at catalog scale, end to end
 * (`npm run bench:index -- --item-space --service --sizes 1m`): per size, a synthetic catalog
 * (the item-space benchmark's, ./item-space-scale.ts) written as a catalog vector file
 * (`encodeCatalogVectors`, what `atomem-vectors` writes), then the real service CLI
 * (`packages/atomem-index/src/cli.ts --data DIR --catalog-vectors FILE`) started as a child
 * process in its own process group: the time from the spawn to its "ready" line (the file read
 * and checked, the catalog's fingerprint, the issuer key: tokens, reports and releases are
 * served from then on, confirmed by a 200 from `/v2/health`) and to its "item space clustered"
 * line (kNN graph and Louvain, in the background; a restart reads the persisted communities and
 * prints no such line: the ready line already says they are there); SIGTERM; then the same for
 * a restart on the same data dir. The child's peak RSS (VmHWM) is read before each stop.
 * Progress on stderr, a Markdown table on stdout, `--json FILE`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeCatalogVectors, INDEX_V2_PATHS } from 'atomem/protocol';
import type { ItemSpace } from 'atomem/engine';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

export interface ServiceRow {
  items: number;
  dim: number;
  fileMB: number;
  /** First start: spawn → serving (the ready line), and → the communities computed. */
  firstServingS: number;
  firstClusteredS: number;
  /** Restart: spawn → serving, and → the communities (read back). */
  restartServingS: number;
  restartClusteredS: number;
  firstPeakMB: number;
  restartPeakMB: number;
}

interface Started {
  servingS: number;
  clusteredS: number;
  peakMB: number;
}

function peakRssMB(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

/** Start the service on `dir`, wait for its ready line and a 200 health, read its peak RSS, stop it. */
async function startAndStop(dir: string, file: string, label: string, timeoutMs: number): Promise<Started> {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      '-C',
      'atomem-source',
      '--import',
      'tsx',
      'packages/atomem-index/src/cli.ts',
      '--data',
      dir,
      '--catalog-vectors',
      file,
      '--port',
      '0',
      '--log-level',
      'warn',
    ],
    {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()).length > 20_000 && (stderr = stderr.slice(-10_000)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let out = '';
  /** Resolves with the match of `re` in the child's stdout (and the time it appeared). */
  const line = (re: RegExp, what: string) =>
    new Promise<{ m: RegExpExecArray; s: number }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${label}: no ${what} after ${timeoutMs / 1000} s\n${stderr.slice(-2000)}`)), timeoutMs);
      const check = () => {
        const m = re.exec(out);
        if (m) {
          clearTimeout(timer);
          child.stdout!.off('data', check);
          resolve({ m, s: (performance.now() - t0) / 1000 });
        }
      };
      child.stdout!.on('data', check);
      check();
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`${label}: the service exited (${code}) before its ${what}\n${stderr.slice(-2000)}`));
      });
    });
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  try {
    const ready = await line(/ready at (\S+) \(([^)]*)\)/, 'ready line');
    const url = ready.m[1];
    const res = await fetch(url + INDEX_V2_PATHS.health);
    // why: read the body, so the connection is idle and the service's close does not wait for it
    const body = await res.text();
    if (res.status !== 200) throw new Error(`${label}: ${INDEX_V2_PATHS.health} answered ${res.status} after the ready line: ${body}`);
    const clustered = /being clustered/.test(ready.m[2]) ? (await line(/item space clustered/, '"item space clustered" line')).s : ready.s;
    const peakMB = peakRssMB(child.pid!);
    return { servingS: ready.s, clusteredS: clustered, peakMB };
  } finally {
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      /* already gone */
    }
    const code = await Promise.race([exited, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000).unref())]);
    if (code === 'timeout') process.kill(-child.pid!, 'SIGKILL');
  }
}

/** For each catalog: write its vector file, first start, restart. */
export async function serviceRows(catalogs: Iterable<[number, () => ItemSpace]>, dim: number): Promise<ServiceRow[]> {
  const rows: ServiceRow[] = [];
  for (const [n, make] of catalogs) {
    const work = mkdtempSync(join(tmpdir(), 'atomem-item-space-service-'));
    try {
      process.stderr.write(`${n} items × ${dim}-d: writing the catalog vector file…\n`);
      const space = make();
      const file = join(work, 'catalog-vectors.bin');
      writeFileSync(
        file,
        encodeCatalogVectors(
          { id: space.embedderId, dim },
          space.ids.map((id) => ({ id, title: id })),
          space.vectors,
        ),
      );
      const fileMB = statSync(file).size / 1e6;
      const dir = join(work, 'data');
      // why: generous bounds, the benchmark must end by itself
      const limit = Math.max(120_000, n * 1.2);
      process.stderr.write(`  first start (${fileMB.toFixed(0)} MB file)…\n`);
      const first = await startAndStop(dir, file, 'first start', limit);
      process.stderr.write(`  first start: serving ${first.servingS.toFixed(1)} s, clustered ${first.clusteredS.toFixed(1)} s; restart…\n`);
      const again = await startAndStop(dir, file, 'restart', limit);
      rows.push({
        items: n,
        dim,
        fileMB,
        firstServingS: first.servingS,
        firstClusteredS: first.clusteredS,
        restartServingS: again.servingS,
        restartClusteredS: again.clusteredS,
        firstPeakMB: first.peakMB,
        restartPeakMB: again.peakMB,
      });
      process.stderr.write(`  ${JSON.stringify(rows.at(-1))}\n`);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
  return rows;
}

/** Print the table (and write `json`). */
export function reportServiceRows(rows: ServiceRow[], load0: number, json?: string): void {
  const la = `${load0.toFixed(1)} at the start; ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' / ')} (1 / 5 / 15 min) at the end`;
  process.stdout.write(
    `\n## item-space service, end to end (the service CLI on a catalog vector file; its defaults) — Node ${process.version}, ${cpus().length} cores, load average ${la}\n\n`,
  );
  process.stdout.write(
    '| items | dim | file MB | first start: serving s | first start: communities s | restart: serving s | restart: communities s | peak RSS MB (first · restart) |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n',
  );
  for (const r of rows)
    process.stdout.write(
      `| ${r.items.toLocaleString('en')} | ${r.dim} | ${r.fileMB.toFixed(0)} | ${r.firstServingS.toFixed(1)} | ${r.firstClusteredS.toFixed(1)} | ${r.restartServingS.toFixed(2)} | ${r.restartClusteredS.toFixed(2)} | ${r.firstPeakMB} · ${r.restartPeakMB} |\n`,
    );
  if (json) writeFileSync(json, `${JSON.stringify({ config: { node: process.version, loadavg: la }, rows }, null, 2)}\n`);
}
