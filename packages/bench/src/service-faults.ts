/**
 * `npm run bench:service -- --faults`: the index service's fault matrix, each fault injected
 * into real `atomem-index` processes on loopback, one row per fault:
 *
 * - **disk full at run time** and **disk full during an epoch close**: the data dir on a small
 *   tmpfs mounted by the bench (root), filled to ENOSPC, then freed;
 * - **read-only data dir**: the tmpfs remounted read-only (Linux refuses that while files are
 *   open for writing, so the service is stopped first: this is the fault at start), then
 *   read-write again;
 * - **I/O error**: the data dir on an ext4 image on a loop device, shut down with the
 *   `EXT4_IOC_SHUTDOWN` ioctl (every later I/O on it fails with EIO, as on a dead disk), then
 *   remounted;
 * - **wall clock stepped back** into a released epoch and **forward** again: the service runs
 *   under Debian's `faketime` (libfaketime, its offset read from a file each second);
 * - **power cut**: the same ext4 shut down without flushing data or journal, once per `--sync`
 *   level (`group`, the default; `normal`; `full`);
 * - **SIGKILL during an epoch close** (while its release is built);
 * - **SIGKILL ×3 mid-burst**: reports sent 8 at a time while the instance is killed three times
 *   and restarted (one instance on SQLite; two on PostgreSQL, one of them killed), acknowledged
 *   counted against what the store holds;
 * - **a corrupted data file** (pages of `reports.sqlite` overwritten while the service is
 *   stopped): what the start says and does, and the restart on the restored file;
 * - **PostgreSQL stopped and restarted** under two service instances, with release reads of a
 *   published epoch alongside.
 *
 * Each row: what the service answered while the fault lasted (status counts of a fixed number of
 * reports, and health), seconds from the fault's end until health is ok and a report is
 * accepted again, reports acknowledged (202; reports answered 5xx during the fault are sent once
 * more after it, as a device retries) vs kept (the epoch's release's count, less the second sends
 * it accepted), whether
 * an earlier release's bytes are unchanged, and how many of the acknowledged tokens a second
 * send spent again. Counts are fixed by the seed and the schedule (reports are sent one at a
 * time); seconds vary with the machine's load.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { blindTokenRequest } from 'atomem/engine';
import { INDEX_V2_PATHS, type IssueResponse, type TokenKeyResponse } from 'atomem/protocol';
import { ReportStore, type SyncLevel } from 'atomem-index';
import pg from 'pg';
import { mulberry32 } from './rng.js';
import { startPostgres, type PostgresCluster } from '../../../test/fixtures/postgres.js';

const REPO = resolve(import.meta.dirname, '../../..');
const ATTESTER = randomBytes(18).toString('base64url');
const EPOCH_MS = 8000;
const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const log = (s: string) => process.stderr.write(`${s}\n`);

/** One row of the matrix. */
export interface FaultRow {
  fault: string;
  /** Status counts of the reports sent while the fault lasted (e.g. `507×6`), or what the start answered. */
  answered: string;
  /** Health while the fault lasted (status, state, the first words of its message). */
  health: string;
  /** Seconds from the fault's end until health is ok and a report is accepted (undefined: not within the limit). */
  recoverSeconds: number | undefined;
  acknowledged: number;
  kept: number;
  releaseUnchanged: boolean;
  doubleSpent: number;
  note?: string;
}

interface Proc {
  child: ChildProcess;
  url: string;
  out: () => string;
  exited: Promise<number | null>;
}

const procs: ChildProcess[] = [];

function startService(args: string[], env: Record<string, string> = {}): Promise<Proc> & { child: ChildProcess } {
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
      '--rate-max',
      '0',
      '--log-level',
      'error',
      '--epoch-ms',
      String(EPOCH_MS),
      '--tick-ms',
      '200',
      '--min-reports',
      '3',
      '--min-contributors',
      '0',
      ...args,
    ],
    { cwd: REPO, env: { ...process.env, ATOMEM_ATTESTER_KEY: ATTESTER, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  procs.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d));
  child.stderr!.on('data', (d: Buffer) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const p = new Promise<Proc>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`atomem-index not ready after 120 s\n${out}`)), 120_000);
    child.stdout!.on('data', () => {
      const m = /ready at (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        ok({ child, url: m[1], out: () => out, exited });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      fail(new Error(`atomem-index exited (${code}) before it was ready\n${out}`));
    });
  });
  return Object.assign(p, { child });
}

async function stop(p: { child: ChildProcess }, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  const c = p.child;
  if (c.exitCode !== null || c.signalCode !== null) return;
  const gone = new Promise<void>((r) => c.once('exit', () => r()));
  try {
    process.kill(-c.pid!, signal);
  } catch {
    return;
  }
  const t = setTimeout(() => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }, 10_000);
  await gone;
  clearTimeout(t);
}

type Health = {
  http: number;
  body: {
    status?: string;
    clustering?: unknown;
    epoch: number;
    latestRelease: number | null;
    storage?: { state: string; message?: string };
    epochs?: { clock: string; message?: string };
  };
};

async function health(url: string): Promise<Health> {
  try {
    const res = await fetch(`${url}${INDEX_V2_PATHS.health}`, { signal: AbortSignal.timeout(3000) });
    return { http: res.status, body: (await res.json()) as Health['body'] };
  } catch (e) {
    return { http: 0, body: { epoch: -1, latestRelease: null, status: `unreachable (${(e as Error).message})` } };
  }
}

function healthText(h: Health): string {
  const b = h.body;
  const words = (s?: string) => (s ? ` "${s.split(/\s+/).slice(0, 9).join(' ')}…"` : '');
  if (h.http === 0) return `no answer (${b.status})`;
  if (b.storage && b.storage.state !== 'ok') return `${h.http} ${b.status}, storage ${b.storage.state}:${words(b.storage.message?.replace(/^\S+: /, ''))}`;
  if (b.epochs?.clock === 'behind') return `${h.http} ${b.status}, clock behind:${words(b.epochs.message)}`;
  return `${h.http} ${b.status ?? ''}`.trim();
}

/** Tokens for `epoch` through the real issuance route (the device's blinding runs here). */
async function mint(url: string, epoch: number, n: number): Promise<string[]> {
  const key = (await (await fetch(`${url}${INDEX_V2_PATHS.tokenKey}`)).json()) as TokenKeyResponse;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const blind = await blindTokenRequest(key, epoch);
    const res = await fetch(`${url}${INDEX_V2_PATHS.issue}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ATTESTER}` },
      body: JSON.stringify({ v: 2, epoch, request: blind.request }),
    });
    if (!res.ok) throw new Error(`token issuance: ${res.status} ${await res.text()}`);
    out.push(await blind.finalize(((await res.json()) as IssueResponse).response));
  }
  return out;
}

/** POST one report; the status (0: no answer). */
async function report(url: string, epoch: number, token: string, rnd: () => number): Promise<number> {
  try {
    const res = await fetch(`${url}${INDEX_V2_PATHS.report}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ v: 2, epoch, token, report: { cohort: Math.floor(rnd() * 4), bucket: Math.floor(rnd() * 3) } }),
      signal: AbortSignal.timeout(5000),
    });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return 0;
  }
}

/** Send each token once (one at a time, `urls` in turn): the statuses. */
async function sendAll(urls: string[], epoch: number, tokens: string[], rnd: () => number): Promise<number[]> {
  const s: number[] = [];
  for (const [i, t] of tokens.entries()) s.push(await report(urls[i % urls.length], epoch, t, rnd));
  return s;
}

const tally = (statuses: number[]) => {
  const m = new Map<number, number>();
  for (const s of statuses) m.set(s, (m.get(s) ?? 0) + 1);
  return [...m]
    .sort((a, b) => a[0] - b[0])
    .map(([k, v]) => `${k === 0 ? 'reset' : k}×${v}`)
    .join(' ');
};

async function releaseBytes(url: string, epoch: number): Promise<string | undefined> {
  const res = await fetch(`${url}${INDEX_V2_PATHS.release(epoch)}`);
  return res.ok ? res.text() : undefined;
}
const digest = (s: string | undefined) => (s === undefined ? 'none' : createHash('sha256').update(s).digest('hex').slice(0, 12));

/** Wait until `epoch` is released on `url` (limit `ms`); its `reports`, or undefined. */
async function releasedReports(url: string, epoch: number, ms = 4 * EPOCH_MS): Promise<number | undefined> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const b = await releaseBytes(url, epoch).catch(() => undefined);
    if (b !== undefined) return (JSON.parse(b) as { reports: number }).reports;
    await sleep(200);
  }
  return undefined;
}

/** The start of the next epoch (by the service's health) with at least `room` ms left in it. */
async function freshEpoch(url: string, room: number): Promise<number> {
  for (;;) {
    const now = Date.now();
    const e = Math.floor(now / EPOCH_MS);
    if ((e + 1) * EPOCH_MS - now >= room) {
      const h = await health(url);
      if (h.body.epoch === e) return e;
    }
    await sleep(Math.min(200, (e + 1) * EPOCH_MS - now + 20));
  }
}

/** A released epoch to watch: 4 reports in a fresh epoch, then its release. */
async function baseline(urls: string[], rnd: () => number): Promise<{ epoch: number; digest: string }> {
  const e = await freshEpoch(urls[0], EPOCH_MS / 2);
  const tokens = await mint(urls[0], e, 4);
  const s = await sendAll(urls, e, tokens, rnd);
  if (s.some((x) => x !== 202)) throw new Error(`baseline reports answered ${tally(s)}`);
  if ((await releasedReports(urls[0], e)) === undefined) throw new Error(`baseline epoch ${e} was not released`);
  return { epoch: e, digest: digest(await releaseBytes(urls[0], e)) };
}

/** Seconds until health is ok on every url and a fresh token's report is accepted (limit `ms`). */
async function recovery(urls: string[], t0: number, rnd: () => number, ms = 60_000): Promise<{ seconds: number | undefined; epoch?: number; token?: string }> {
  while (Date.now() - t0 < ms) {
    const hs = await Promise.all(urls.map(health));
    if (hs.every((h) => h.http === 200)) {
      try {
        const e = hs[0].body.epoch;
        const [t] = await mint(urls[0], e, 1);
        if ((await report(urls[urls.length - 1], e, t, rnd)) === 202) return { seconds: (Date.now() - t0) / 1000, epoch: e, token: t };
      } catch {
        // not yet
      }
    }
    await sleep(100);
  }
  return { seconds: undefined };
}

/** Fill the file system of `dir` to ENOSPC; the filler file. */
function fill(dir: string): string {
  const file = join(dir, 'filler');
  const fd = openSync(file, 'w');
  try {
    for (let chunk = 1 << 20; chunk >= 512; ) {
      try {
        writeSync(fd, Buffer.alloc(chunk, 1));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
        chunk >>= 1;
      }
    }
  } finally {
    closeSync(fd);
  }
  return file;
}

const mounts: string[] = [];
const loops: string[] = [];
function mountTmpfs(dir: string, size: string): void {
  mkdirSync(dir, { recursive: true });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`mount tmpfs: ${r.stderr}`);
  mounts.push(dir);
}
function sh(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr || r.stdout}`);
  return r.stdout.trim();
}

/** The common tail of a row: the rest of the epoch's tokens, a second send of every token, the release. */
async function finish(
  urls: string[],
  e: number,
  tokens: string[],
  statuses: Map<string, number>,
  rnd: () => number,
  base: { epoch: number; digest: string },
): Promise<{ acknowledged: number; kept: number; releaseUnchanged: boolean; doubleSpent: number }> {
  // the tokens not sent yet, and those answered 5xx or not at all again (a device retries those: nothing was spent)
  for (const t of tokens) {
    const s = statuses.get(t);
    if (s === undefined || s === 0 || s >= 500) statuses.set(t, await report(urls[0], e, t, rnd));
  }
  const acked = [...statuses].filter(([, s]) => s === 202).map(([t]) => t);
  let doubleSpent = 0;
  for (const t of acked) for (const u of urls) if ((await report(u, e, t, rnd)) === 202) doubleSpent++;
  // the release counts the acknowledged reports stored plus any second send that was accepted (a double spend)
  const kept = ((await releasedReports(urls[0], e)) ?? doubleSpent) - doubleSpent;
  const now = digest(await releaseBytes(urls[urls.length - 1], base.epoch));
  return { acknowledged: acked.length, kept, releaseUnchanged: now === base.digest, doubleSpent };
}

async function diskFullRunTime(root: string, catalog: string, rnd: () => number): Promise<FaultRow> {
  const disk = join(root, 'disk-a');
  mountTmpfs(disk, '24m');
  const svc = await startService(['--data', join(disk, 'data'), '--catalog-vectors', catalog]);
  try {
    const base = await baseline([svc.url], rnd);
    const e = await freshEpoch(svc.url, EPOCH_MS * 0.75);
    const tokens = await mint(svc.url, e, 16);
    const st = new Map<string, number>();
    for (const t of tokens.slice(0, 4)) st.set(t, await report(svc.url, e, t, rnd));
    const filler = fill(disk);
    const during: number[] = [];
    for (const t of tokens.slice(4, 10)) {
      const s = await report(svc.url, e, t, rnd);
      st.set(t, s);
      during.push(s);
    }
    const h = await health(svc.url);
    rmSync(filler);
    const t0 = Date.now();
    const rec = await recovery([svc.url], t0, rnd);
    if (rec.epoch === e && rec.token) st.set(rec.token, 202);
    const tail = await finish([svc.url], e, tokens, st, rnd, base);
    return { fault: 'disk full at run time (tmpfs filled, then freed)', answered: tally(during), health: healthText(h), recoverSeconds: rec.seconds, ...tail };
  } finally {
    await stop(svc);
  }
}

/** Wait until the item space's communities are computed (epochs close only then). */
async function clustered(url: string): Promise<void> {
  for (let i = 0; i < 900 && (await health(url)).body.clustering !== undefined; i++) await sleep(200);
}

async function diskFullAtClose(root: string, bigCatalog: string, rnd: () => number): Promise<FaultRow> {
  const disk = join(root, 'disk-b');
  mountTmpfs(disk, '24m');
  // why 20k items: the release (≈ 0.2 MB) needs more than the WAL space its reports left, so the close itself meets the full disk
  const svc = await startService(['--data', join(disk, 'data'), '--catalog-vectors', bigCatalog]);
  await clustered(svc.url);
  try {
    const base = await baseline([svc.url], rnd);
    const e = await freshEpoch(svc.url, EPOCH_MS * 0.75);
    const tokens = await mint(svc.url, e, 6);
    const st = new Map<string, number>();
    for (const t of tokens) st.set(t, await report(svc.url, e, t, rnd));
    const next = await mint(svc.url, e + 1, 6);
    // fill just before the epoch's deadline (end + grace), hold 3 s past it
    const deadline = (e + 1) * EPOCH_MS + EPOCH_MS / 10;
    await sleep(Math.max(0, deadline - 300 - Date.now()));
    const filler = fill(disk);
    // the fault lasts until health reports it or the release is published anyway (at most 15 s after the deadline)
    let h = await health(svc.url);
    while (Date.now() < deadline + 15_000 && h.http === 200 && (await releaseBytes(svc.url, e)) === undefined) {
      await sleep(200);
      h = await health(svc.url);
    }
    const during = await sendAll([svc.url], e + 1, next.slice(0, 3), rnd);
    const releasedDuring = (await releaseBytes(svc.url, e)) !== undefined;
    rmSync(filler);
    const t0 = Date.now();
    const rec = await recovery([svc.url], t0, rnd);
    const tail = await finish([svc.url], e, tokens, st, rnd, base);
    return {
      fault: 'disk full during an epoch close (filled 0.3 s before the deadline, 20k items)',
      answered: `next epoch's reports ${tally(during)}; release ${releasedDuring ? 'published' : 'not published'} while full`,
      health: healthText(h),
      recoverSeconds: rec.seconds,
      ...tail,
    };
  } finally {
    await stop(svc);
  }
}

/** A service on `data` with a release to watch and `sent` of `n` fresh tokens' reports sent, then stopped (SIGTERM). */
async function seededThenStopped(data: string, catalog: string, rnd: () => number, room: number, n: number, sent: number) {
  const svc = await startService(['--data', data, '--catalog-vectors', catalog]);
  try {
    const base = await baseline([svc.url], rnd);
    const e = await freshEpoch(svc.url, EPOCH_MS * room);
    const tokens = await mint(svc.url, e, n);
    const st = new Map<string, number>();
    for (const t of tokens.slice(0, sent)) st.set(t, await report(svc.url, e, t, rnd));
    return { base, e, tokens, st };
  } finally {
    await stop(svc);
  }
}

/** A start expected to be refused: whether it started anyway, its exit code and what it said. */
async function refusedStart(data: string, catalog: string): Promise<{ started: boolean; code: string | undefined; text: string }> {
  return startService(['--data', data, '--catalog-vectors', catalog]).then(
    async (p) => {
      await stop(p);
      return { started: true, code: undefined, text: '' };
    },
    (err: Error) => ({ started: false, code: /exited \((\w+)\)/.exec(err.message)?.[1], text: err.message }),
  );
}

/** After the operator's fix (at `t0`): a start, the recovery, and the row's common tail. */
async function restartAfterFix(data: string, catalog: string, rnd: () => number, t0: number, seeded: Awaited<ReturnType<typeof seededThenStopped>>) {
  const { base, e, tokens, st } = seeded;
  const svc = await startService(['--data', data, '--catalog-vectors', catalog]);
  try {
    const rec = await recovery([svc.url], t0, rnd);
    if (rec.epoch === e && rec.token) st.set(rec.token, 202);
    return { recoverSeconds: rec.seconds, ...(await finish([svc.url], e, tokens, st, rnd, base)) };
  } finally {
    await stop(svc);
  }
}

async function readOnly(root: string, catalog: string, rnd: () => number): Promise<FaultRow> {
  const disk = join(root, 'disk-c');
  mountTmpfs(disk, '24m');
  const data = join(disk, 'data');
  const seeded = await seededThenStopped(data, catalog, rnd, 0.8, 6, 4);
  // why: Linux refuses a read-only remount while files are open for writing, so the fault is met at start
  const busy = spawnSync('mount', ['-o', 'remount,ro', disk], { encoding: 'utf8' });
  if (busy.status !== 0) throw new Error(`remount ro: ${busy.stderr}`);
  const outcome = await refusedStart(data, catalog);
  const said = /the data dir \S+ is not writable[^.]*\./.exec(outcome.text)?.[0] ?? '';
  sh('mount', ['-o', 'remount,rw', disk]);
  const after = await restartAfterFix(data, catalog, rnd, Date.now(), seeded);
  return {
    fault: 'read-only data dir (remounted ro; met at start)',
    answered: outcome.started ? 'started anyway' : `start refused: exit ${outcome.code}`,
    health: said.replace(/ \/\S+/, ' <dir>').slice(0, 90) || '(no message)',
    ...after,
    note: 'includes the restart by the operator',
  };
}

let ioRuns = 0;

/**
 * The data dir on ext4 on a loop device, shut down under the service. `flush`: the file system
 * is synced first (an I/O error: what was written is on disk); without it neither the data nor
 * the journal is flushed (a power cut: what is only in the OS's cache is lost).
 */
async function ioError(root: string, catalog: string, rnd: () => number, flush: boolean, sync: SyncLevel = 'group'): Promise<FaultRow> {
  const name = `${flush ? 'eio' : 'cut'}-${sync}-${++ioRuns}`;
  const img = join(root, `${name}.img`);
  const disk = join(root, name);
  writeFileSync(img, Buffer.alloc(0));
  sh('truncate', ['-s', '48M', img]);
  sh('mkfs.ext4', ['-q', '-F', img]);
  mkdirSync(disk, { recursive: true });
  const dev = sh('losetup', ['--find', '--show', img]);
  loops.push(dev);
  sh('mount', [dev, disk]);
  mounts.push(disk);
  const data = join(disk, 'data');
  let svc = await startService(['--data', data, '--catalog-vectors', catalog, '--sync', sync]);
  try {
    const base = await baseline([svc.url], rnd);
    const e = await freshEpoch(svc.url, EPOCH_MS * 0.75);
    const tokens = await mint(svc.url, e, 12);
    const st = new Map<string, number>();
    for (const t of tokens.slice(0, 4)) st.set(t, await report(svc.url, e, t, rnd));
    // EXT4_IOC_SHUTDOWN (_IOR('X', 125, __u32)), flags 0 (EXT4_GOING_FLAGS_DEFAULT: sync, then shut down) or 2 (NOLOGFLUSH): every later I/O fails with EIO
    sh('python3', [
      '-c',
      `import fcntl,os,struct;fd=os.open(${JSON.stringify(disk)},os.O_RDONLY);fcntl.ioctl(fd,0x8004587d,struct.pack('I',${flush ? 0 : 2}))`,
    ]);
    const during: number[] = [];
    for (const t of tokens.slice(4, 8)) {
      const s = await report(svc.url, e, t, rnd);
      st.set(t, s);
      during.push(s);
    }
    const h = await health(svc.url);
    // the "disk" comes back: once the service has let go of its files (its first retry closes them), a fresh mount of the image
    for (let i = 0; i < 100 && !/again after an I\/O error failed/.test((await health(svc.url)).body.storage?.message ?? ''); i++) await sleep(100);
    sh('umount', ['-l', disk]);
    sh('mount', [dev, disk]);
    const t0 = Date.now();
    let rec = await recovery([svc.url], t0, rnd, 15_000);
    let note = 'recovered without a restart';
    if (rec.seconds === undefined) {
      // the operator's fix: stop the service, mount the disk afresh (the shut-down superblock lives while files on it are open), start
      await stop(svc);
      sh('umount', ['-l', disk]);
      await sleep(500);
      sh('mount', [dev, disk]);
      const t1 = Date.now();
      svc = await startService(['--data', data, '--catalog-vectors', catalog, '--sync', sync]);
      rec = await recovery([svc.url], t1, rnd);
      note = 'no recovery within 15 s without a restart; the figure is from a restart on the remounted disk';
    }
    if (rec.epoch === e && rec.token) st.set(rec.token, 202);
    const tail = await finish([svc.url], e, tokens, st, rnd, base);
    return {
      fault: flush
        ? `I/O error (ext4 synced, then shut down: EIO), then remounted; --sync ${sync}`
        : `power cut (ext4 shut down without flushing data or journal), then remounted; --sync ${sync}${sync === 'group' ? ' (default)' : ''}`,
      answered: tally(during),
      health: healthText(h),
      recoverSeconds: rec.seconds,
      ...tail,
      note,
    };
  } finally {
    await stop(svc);
  }
}

async function clockStep(root: string, catalog: string, rnd: () => number): Promise<FaultRow> {
  const offsetFile = join(root, 'faketime-offset');
  writeFileSync(offsetFile, '+0\n');
  const env = { LD_PRELOAD: FAKETIME_LIB, FAKETIME_TIMESTAMP_FILE: offsetFile, FAKETIME_CACHE_DURATION: '1', FAKETIME_DONT_FAKE_MONOTONIC: '1' };
  const svc = await startService(['--data', join(root, 'clock-data'), '--catalog-vectors', catalog], env);
  try {
    // the released epoch: 4 reports, 6 more tokens kept unspent
    const e = await freshEpoch(svc.url, EPOCH_MS * 0.75);
    const tokens = await mint(svc.url, e, 10);
    const spent = tokens.slice(0, 4);
    const unspent = tokens.slice(4);
    const first = await sendAll([svc.url], e, spent, rnd);
    if (first.some((s) => s !== 202)) throw new Error(`clock row: reports answered ${tally(first)}`);
    const keptBefore = await releasedReports(svc.url, e);
    const before = digest(await releaseBytes(svc.url, e));
    // back into the middle of epoch e
    const back = Math.ceil((Date.now() - (e * EPOCH_MS + EPOCH_MS / 2)) / 1000);
    writeFileSync(offsetFile, `-${back}\n`);
    await sleep(1500);
    const h = await health(svc.url);
    const during = [...(await sendAll([svc.url], e, spent, rnd)), ...(await sendAll([svc.url], e, unspent, rnd))];
    const issue = await mint(svc.url, e, 1).then(
      () => 'issued',
      (err: Error) => /token issuance: (\d+)/.exec(err.message)?.[1] ?? 'error',
    );
    const duringDigest = digest(await releaseBytes(svc.url, e));
    writeFileSync(offsetFile, '+0\n');
    const t0 = Date.now();
    const rec = await recovery([svc.url], t0, rnd);
    // forward again: the spent and unspent tokens of e once more
    const after = [...(await sendAll([svc.url], e, spent, rnd)), ...(await sendAll([svc.url], e, unspent, rnd))];
    const now = digest(await releaseBytes(svc.url, e));
    const doubleSpent = [...during.slice(0, 4), ...after.slice(0, 4)].filter((s) => s === 202).length;
    const reopened = [...during.slice(4), ...after.slice(4)].filter((s) => s === 202).length;
    return {
      fault: `wall clock stepped back ${back} s (into released epoch), then forward`,
      answered: `reports for it ${tally(during)}; issuance for it ${issue}`,
      health: healthText(h),
      recoverSeconds: rec.seconds,
      acknowledged: 4 + reopened,
      kept: keptBefore ?? 0,
      releaseUnchanged: before === duringDigest && before === now,
      doubleSpent,
      note: `the released epoch's own release compared (${before})`,
    };
  } finally {
    await stop(svc);
  }
}

async function sigkillAtClose(root: string, bigCatalog: string, rnd: () => number): Promise<FaultRow> {
  const data = join(root, 'kill-data');
  let svc = await startService(['--data', data, '--catalog-vectors', bigCatalog]);
  await clustered(svc.url);
  try {
    const base = await baseline([svc.url], rnd);
    const e = await freshEpoch(svc.url, EPOCH_MS * 0.75);
    const tokens = await mint(svc.url, e, 8);
    const st = new Map<string, number>();
    for (const t of tokens) st.set(t, await report(svc.url, e, t, rnd));
    const deadline = (e + 1) * EPOCH_MS + EPOCH_MS / 10;
    // the tick (200 ms) starts the close within 200 ms of the deadline; the release is built in a worker meanwhile
    await sleep(Math.max(0, deadline + 250 - Date.now()));
    const publishedBefore = (await releaseBytes(svc.url, e)) !== undefined;
    await stop(svc, 'SIGKILL');
    const t0 = Date.now();
    svc = await startService(['--data', data, '--catalog-vectors', bigCatalog]);
    const rec = await recovery([svc.url], t0, rnd, 120_000);
    const tail = await finish([svc.url], e, tokens, st, rnd, base);
    return {
      fault: 'SIGKILL during an epoch close (0.25 s after the deadline, 20k items)',
      answered: `killed; release ${publishedBefore ? 'was published before the kill' : 'not yet published at the kill'}`,
      health: 'process gone',
      recoverSeconds: rec.seconds,
      ...tail,
      note: 'includes the restart (start-up and the item space read)',
    };
  } finally {
    await stop(svc);
  }
}

/** A row that could not run (no PostgreSQL), saying why. */
function skipped(fault: string, why: string): FaultRow {
  return { fault, answered: `skipped: ${why}`, health: '', recoverSeconds: undefined, acknowledged: 0, kept: 0, releaseUnchanged: true, doubleSpent: 0 };
}

async function postgresRestart(root: string, catalog: string, rnd: () => number): Promise<FaultRow> {
  const c = await startPostgres();
  if ('skip' in c) return skipped('PostgreSQL stopped and restarted', c.skip);
  const cluster: PostgresCluster = c;
  const url = await cluster.createDatabase('faults');
  const [a, b] = await Promise.all(['pg-a', 'pg-b'].map((n) => startService(['--data', join(root, n), '--store', url, '--catalog-vectors', catalog])));
  try {
    const urls = [a.url, b.url];
    const base = await baseline(urls, rnd);
    const e = await freshEpoch(a.url, EPOCH_MS * 0.75);
    const tokens = await mint(a.url, e, 16);
    const st = new Map<string, number>();
    for (const [i, t] of tokens.slice(0, 4).entries()) st.set(t, await report(urls[i % 2], e, t, rnd));
    // GETs keep both instances busy while the database is down (as devices fetching releases would)
    let load = true;
    let down = false;
    /** Release GETs while the database was down: answered 200 with the published bytes, or not. */
    const outage = { same: 0, other: 0 };
    const gets = (async () => {
      let n = 0;
      while (load) {
        const d = down;
        const body = await fetch(`${urls[n++ % 2]}${INDEX_V2_PATHS.release(base.epoch)}`)
          .then((r) => (r.ok ? r.text() : undefined))
          .catch(() => undefined);
        if (d && down) outage[digest(body) === base.digest ? 'same' : 'other']++;
      }
      return n;
    })();
    await cluster.halt();
    down = true;
    const during: number[] = [];
    for (const [i, t] of tokens.slice(4, 10).entries()) {
      const s = await report(urls[i % 2], e, t, rnd);
      st.set(t, s);
      during.push(s);
    }
    const h = await Promise.all(urls.map(health));
    const releaseDuring = digest(await releaseBytes(b.url, base.epoch).catch(() => undefined));
    down = false;
    cluster.resume();
    const t0 = Date.now();
    const rec = await recovery(urls, t0, rnd);
    load = false;
    const reads = await gets;
    if (rec.epoch === e && rec.token) st.set(rec.token, 202);
    const tail = await finish(urls, e, tokens, st, rnd, base);
    return {
      fault: 'PostgreSQL stopped (fast shutdown) and restarted, two instances',
      answered: tally(during),
      health: `A: ${healthText(h[0])} / B: ${healthText(h[1]).slice(0, 40)}`,
      recoverSeconds: rec.seconds,
      ...tail,
      note: `release GETs of the published epoch while the database was down: ${outage.same} answered 200 with the published bytes, ${outage.other} not (${releaseDuring === base.digest ? 'same bytes' : releaseDuring} from B at the end of the outage); ${reads} release GETs in all`,
    };
  } finally {
    await Promise.all([stop(a), stop(b)]);
    await cluster.stop();
  }
}

/** What the store holds for `epoch`: SQLite (the service stopped: the file is not locked) or PostgreSQL. */
async function storedReports(where: { data: string } | { url: string }, epoch: number): Promise<number> {
  if ('data' in where) {
    const s = ReportStore.open(where.data);
    try {
      return s.reportCount(epoch);
    } finally {
      s.close();
    }
  }
  const c = new pg.Client({ connectionString: where.url });
  await c.connect();
  try {
    return Number((await c.query<{ n: string }>('SELECT COALESCE(SUM(n), 0) AS n FROM atomem_cells WHERE epoch = $1', [epoch])).rows[0].n);
  } finally {
    await c.end();
  }
}

/**
 * SIGKILL ×3 mid-burst: reports sent 8 at a time (each token once); 0.3 s into each of three
 * bursts the instance is SIGKILLed (the burst stops there) and started again; reports answered
 * 5xx or not at all are sent again after (a device retries). With `postgres`, two instances
 * share the store, reports alternate between them, and A is the one killed. Acknowledged is
 * counted against the store itself.
 */
async function sigkillBurst(root: string, catalog: string, rnd: () => number, postgres: boolean): Promise<FaultRow> {
  const name = postgres ? 'PostgreSQL, two instances (A killed)' : 'SQLite, one instance';
  let cluster: PostgresCluster | undefined;
  let store: string[] = [];
  if (postgres) {
    const c = await startPostgres();
    if ('skip' in c) return skipped(`SIGKILL ×3 mid-burst, ${name}`, c.skip);
    cluster = c;
    store = ['--store', await c.createDatabase('sigkill_burst')];
  }
  const dataA = join(root, postgres ? 'burst-pg-a' : 'burst-a');
  // why: one-hour epochs, so the minting, the three restarts and the count happen inside one epoch (its cells are deleted at its close)
  const args = (data: string) => ['--data', data, '--catalog-vectors', catalog, '--epoch-ms', '3600000', ...store];
  let a = await startService(args(dataA));
  const b = postgres ? await startService(args(join(root, 'burst-pg-b'))) : undefined;
  try {
    const e = (await health(a.url)).body.epoch;
    const tokens = await mint(a.url, e, 240);
    const st = new Map<string, number>();
    let next = 0;
    let restarts = 0;
    let restartSeconds = 0;
    const atKill: number[] = [];
    for (let round = 0; round < 3; round++) {
      let killed = false;
      let stopRound = false;
      const kill = (async () => {
        await sleep(300);
        atKill.push(next);
        await stop(a, 'SIGKILL');
        killed = true;
        stopRound = true;
      })();
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < tokens.length && !stopRound) {
            const i = next++;
            st.set(tokens[i], await report(b && (killed || i % 2) ? b.url : a.url, e, tokens[i], rnd));
          }
        }),
      );
      await kill;
      const t0 = Date.now();
      a = await startService(args(dataA));
      restartSeconds += (Date.now() - t0) / 1000;
      restarts++;
    }
    const cut = [...st.values()].filter((s) => s === 0 || s >= 500).length;
    // the rest, and every token answered 5xx or not at all, once more (a device retries those)
    const urls = b ? [a.url, b.url] : [a.url];
    for (const [i, t] of tokens.entries()) {
      const s = st.get(t);
      if (s === undefined || s === 0 || s >= 500) st.set(t, await report(urls[i % urls.length], e, t, rnd));
    }
    const acked = [...st].filter(([, s]) => s === 202).map(([t]) => t);
    let doubleSpent = 0;
    for (const t of acked) for (const u of urls) if ((await report(u, e, t, rnd)) === 202) doubleSpent++;
    await stop(a);
    if (b) await stop(b);
    const stored = await storedReports(postgres ? { url: store[1] } : { data: dataA }, e);
    return {
      fault: `SIGKILL ×3 mid-burst (8 concurrent senders, ${tokens.length} tokens), ${name}`,
      answered: `${tally([...st.values()])} after the retries; ${restarts} restarts`,
      health: 'process gone (A)',
      recoverSeconds: restartSeconds / restarts,
      acknowledged: acked.length,
      kept: stored - doubleSpent,
      releaseUnchanged: true,
      doubleSpent,
      note: `kills after ${atKill.join(', ')} sends; kept = reports in the store for the epoch (${stored}) less second sends accepted; recovered = mean restart time; ${cut} sends cut by a kill (no answer or 5xx) sent again, ${tokens.length - atKill[2]} never sent before the last kill sent then`,
    };
  } finally {
    await stop(a);
    if (b) await stop(b);
    await cluster?.stop();
  }
}

/**
 * A corrupted data file: the service stopped after a release and 6 reports, pages 2… of
 * `reports.sqlite` overwritten (a bad sector), then a start: what it says and whether it left
 * the file as it was; then the operator restores the copy taken before and starts again.
 */
async function corruptFile(root: string, catalog: string, rnd: () => number): Promise<FaultRow> {
  const data = join(root, 'corrupt-data');
  const seeded = await seededThenStopped(data, catalog, rnd, 0.75, 10, 6);
  const file = join(data, 'reports.sqlite');
  const backup = join(root, 'reports.sqlite.backup');
  copyFileSync(file, backup);
  const page = 4096;
  const pages = Math.floor(statSync(file).size / page);
  const fd = openSync(file, 'r+');
  for (let p = 1; p < pages; p++) writeSync(fd, Buffer.alloc(page, 0xa5), 0, page, p * page);
  closeSync(fd);
  const sha = () => createHash('sha256').update(readFileSync(file)).digest('hex');
  const before = sha();
  const outcome = await refusedStart(data, catalog);
  const said = /atomem-index: (.*)/.exec(outcome.text)?.[1] ?? '';
  const untouched = sha() === before;
  // the operator's fix: the copy back in place, a start
  copyFileSync(backup, file);
  const after = await restartAfterFix(data, catalog, rnd, Date.now(), seeded);
  return {
    fault: 'corrupted data file (pages 2… of reports.sqlite overwritten while stopped)',
    answered: outcome.started ? 'started anyway' : `start refused: exit ${outcome.code}`,
    health: said ? said.replace(/\/\S+/g, '<file>').slice(0, 110) : '(no message)',
    ...after,
    note: `the refused start left the file as it was: ${untouched ? 'yes' : 'NO'}; recovered = after the operator restored the copy (includes the start)`,
  };
}

/** A synthetic catalog vector file of `n` items (as ./service-bench.ts writes it). */
async function writeCatalog(file: string, n: number, dim: number, seed: number): Promise<void> {
  const { encodeCatalogVectors } = await import('atomem/protocol');
  const uniform = mulberry32(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  const unit = (v: Float32Array) => {
    const s = Math.hypot(...v) || 1;
    return v.map((x) => x / s);
  };
  const centres = Array.from({ length: 40 }, () => unit(Float32Array.from({ length: dim }, normal)));
  const items = Array.from({ length: n }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
  writeFileSync(
    file,
    encodeCatalogVectors(
      { id: 'service-faults@1', dim },
      items,
      items.map((_, i) => unit(centres[i % 40].map((x) => x + (0.35 * normal()) / Math.sqrt(dim)))),
    ),
  );
}

const ROWS = [
  'disk-full',
  'disk-full-close',
  'read-only',
  'io-error',
  'power-cut',
  'power-cut-normal',
  'power-cut-full',
  'clock',
  'sigkill-close',
  'sigkill-burst',
  'sigkill-burst-pg',
  'corrupt-file',
  'postgres',
] as const;

/** Run the matrix (root for the mounts); prints a markdown table on stdout. */
export async function runFaults(o: { seed: number; only?: string[]; json?: string }): Promise<FaultRow[]> {
  if (process.getuid?.() !== 0) throw new Error('--faults mounts small file systems (tmpfs, a loop device): run it as root');
  const only = o.only ?? [...ROWS];
  for (const r of only) if (!(ROWS as readonly string[]).includes(r)) throw new Error(`--fault-rows: unknown row ${r} (one of ${ROWS.join(', ')})`);
  if (only.includes('clock') && !existsSync(FAKETIME_LIB)) throw new Error(`the clock row needs Debian's faketime (${FAKETIME_LIB}): apt-get install faketime`);
  const root = mkdtempSync(join(tmpdir(), 'atomem-faults-'));
  const catalog = join(root, 'catalog.bin');
  const big = join(root, 'catalog-20k.bin');
  await writeCatalog(catalog, 2000, 64, 7);
  if (only.includes('sigkill-close') || only.includes('disk-full-close')) await writeCatalog(big, 20_000, 64, 7);
  const rnd = mulberry32(o.seed);
  const rows: FaultRow[] = [];
  const cleanup = async () => {
    await Promise.all(procs.map((c) => stop({ child: c }, 'SIGKILL')));
    for (const m of mounts.reverse()) spawnSync('umount', ['-l', m]);
    for (const l of loops) spawnSync('losetup', ['-d', l]);
    rmSync(root, { recursive: true, force: true });
  };
  const load0 = loadavg();
  try {
    const run: Record<(typeof ROWS)[number], () => Promise<FaultRow>> = {
      'disk-full': () => diskFullRunTime(root, catalog, rnd),
      'disk-full-close': () => diskFullAtClose(root, big, rnd),
      'read-only': () => readOnly(root, catalog, rnd),
      'io-error': () => ioError(root, catalog, rnd, true),
      'power-cut': () => ioError(root, catalog, rnd, false),
      'power-cut-normal': () => ioError(root, catalog, rnd, false, 'normal'),
      'power-cut-full': () => ioError(root, catalog, rnd, false, 'full'),
      clock: () => clockStep(root, catalog, rnd),
      'sigkill-close': () => sigkillAtClose(root, big, rnd),
      'sigkill-burst': () => sigkillBurst(root, catalog, rnd, false),
      'sigkill-burst-pg': () => sigkillBurst(root, catalog, rnd, true),
      'corrupt-file': () => corruptFile(root, catalog, rnd),
      postgres: () => postgresRestart(root, catalog, rnd),
    };
    for (const name of only) {
      log(`fault: ${name}…`);
      const t = Date.now();
      try {
        rows.push(await run[name as (typeof ROWS)[number]]());
      } catch (err) {
        rows.push({
          fault: name,
          answered: `row failed: ${(err as Error).message.split('\n')[0].slice(0, 120)}`,
          health: '',
          recoverSeconds: undefined,
          acknowledged: 0,
          kept: 0,
          releaseUnchanged: false,
          doubleSpent: 0,
        });
      }
      log(`  ${JSON.stringify(rows[rows.length - 1])} (${((Date.now() - t) / 1000).toFixed(0)} s)`);
    }
  } finally {
    await cleanup();
  }
  console.log(
    `## bench:service --faults — seed ${o.seed}, epochs of ${EPOCH_MS / 1000} s, load average ${load0.map((x) => x.toFixed(2)).join(' / ')} at start, ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' / ')} at the end\n`,
  );
  console.log(
    '| fault | answered while it lasted | health while it lasted | recovered after (s) | acknowledged | kept | earlier release unchanged | double-spent | note |',
  );
  console.log('|---|---|---|---:|---:|---:|---|---:|---|');
  for (const r of rows)
    console.log(
      `| ${r.fault} | ${r.answered} | ${r.health.replaceAll(root, '<tmp>').replaceAll('|', '/')} | ${r.recoverSeconds === undefined ? '–' : r.recoverSeconds.toFixed(1)} | ${r.acknowledged} | ${r.kept} | ${r.releaseUnchanged ? 'yes' : 'NO'} | ${r.doubleSpent} | ${r.note ?? ''} |`,
    );
  if (o.json) writeFileSync(o.json, JSON.stringify({ seed: o.seed, epochMs: EPOCH_MS, loadavgStart: load0, rows }, null, 2));
  return rows;
}
