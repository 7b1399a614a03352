// Recovery by itself: the index service on a real, small file system (a tmpfs mounted for the
// test; root only, skipped visibly otherwise) that fills up — during the start-time aggregation
// and at run time. Health names the fault while it lasts; once space is freed the service resumes
// within seconds, without a restart and without traffic. And the WAL is checkpointed regularly:
// a copy of the main file alone holds the acknowledged reports. And an I/O error (an ext4 file system
// shut down under the service) is named as one, not as corruption, and once the disk is mounted
// again the service opens its file afresh and resumes, without a restart.
import { spawnSync } from 'node:child_process';
import { closeSync, copyFileSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { INDEX_V2_PATHS, encodeCatalogVectors, epochOf } from 'atomem/protocol';
import { axisSpace, clockedV2, indexServices, mintToken, postReport } from '../../../test/fixtures/index-service.js';

const EPOCH_MS = 1_000_000;
const GRACE = EPOCH_MS / 10;

const services = indexServices('atomem-wal-');
const mounts: string[] = [];
/** The small disks' mount points: unmounted, then removed, after all tests. */
const disks: string[] = [];
afterAll(() => {
  for (const m of mounts) spawnSync('umount', [m]);
  for (const d of disks) rmSync(d, { recursive: true, force: true });
});

/** A fresh tmpfs of `size` (e.g. `4m`), or undefined when this process may not mount. */
function smallDisk(size: string): string | undefined {
  const d = mkdtempSync(join(tmpdir(), 'atomem-disk-'));
  disks.push(d);
  if (process.getuid?.() !== 0) return undefined;
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', d]);
  if (r.status !== 0) return undefined;
  mounts.push(d);
  return d;
}
const canMount = (() => {
  const d = smallDisk('1m');
  return d !== undefined;
})();
if (!canMount) console.warn('server-recovery: SKIPPED — needs root and tmpfs mounts (a real full disk)');

/** Fill the file system of `dir` until ENOSPC; returns the filler file (delete it to free the space). */
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

function start(dataDir: string, clock: { now: number }, maintenanceMs?: number) {
  return services.start({
    dataDir,
    rateLimit: false,
    v2: clockedV2(axisSpace('recovery-space@1'), clock, { epochMs: EPOCH_MS, ...(maintenanceMs !== undefined ? { maintenanceMs } : {}) }),
  });
}
const token = (url: string, epoch: number) => mintToken(url, epoch);
const report = postReport;

async function health(url: string) {
  const res = await fetch(`${url}${INDEX_V2_PATHS.health}`);
  return {
    status: res.status,
    body: (await res.json()) as { status: string; latestRelease: number | null; storage: { state: string; file?: string; message?: string } },
  };
}

/** Poll `fn` every 100 ms until it is true; resolves to the ms it took (throws after `limitMs`). */
async function until(fn: () => Promise<boolean>, limitMs: number): Promise<number> {
  const t0 = Date.now();
  while (!(await fn())) {
    if (Date.now() - t0 > limitMs) throw new Error(`not within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return Date.now() - t0;
}

describe.skipIf(!canMount)('recovery by itself (a real full tmpfs)', () => {
  it('disk full during the start-time aggregation: health names it, and ≤ 10 s after space is freed the epoch is released and reports are taken, without a restart', async () => {
    const disk = smallDisk('3m')!;
    const dataDir = join(disk, 'data');
    mkdirSync(dataDir);
    const clock = { now: 5 * EPOCH_MS + 1000 };
    const a = await start(dataDir, clock);
    for (let i = 0; i < 20; i++) expect((await report(a.url, 5, await token(a.url, 5), i)).status).toBe(202);
    await a.svc.close();

    const filler = fill(disk);
    // The next start is after epoch 5's deadline: the aggregation at start meets the full disk.
    clock.now = 6 * EPOCH_MS + GRACE + 1;
    const { url } = await start(dataDir, clock);
    const file = join(dataDir, 'reports.sqlite');
    const during = await health(url);
    expect(during.status).toBe(503);
    expect(during.body.storage).toMatchObject({ state: 'full', file });
    expect(during.body.storage.message).toMatch(/disk is full.*Fix: free space.*resume by themselves/);
    expect(during.body.latestRelease).toBeNull();
    const refused = await report(url, 6, await token(url, 6), 0);
    expect(refused).toEqual({ status: 507, error: 'storage_full' });
    // still refused a few seconds later (the fault lasts): the retries do not pretend
    await new Promise((r) => setTimeout(r, 2500));
    expect((await health(url)).body.storage.state).toBe('full');

    rmSync(filler);
    const ms = await until(async () => {
      const h = await health(url);
      return h.status === 200 && h.body.latestRelease === 5;
    }, 10_000);
    console.info(`server-recovery: start-time aggregation on a full disk — released and healthy ${ms} ms after the space was freed`);
    expect(ms).toBeLessThanOrEqual(10_000);
    const rel = await fetch(`${url}${INDEX_V2_PATHS.release(5)}`);
    expect(rel.status).toBe(200);
    expect(((await rel.json()) as { epoch: number }).epoch).toBe(5);
    expect((await report(url, 6, await token(url, 6), 1)).status).toBe(202);
  }, 90_000);

  it('disk full at run time: 507 while it lasts; after space is freed health clears by itself (no traffic needed) and reports are taken again', async () => {
    const disk = smallDisk('3m')!;
    const dataDir = join(disk, 'data');
    mkdirSync(dataDir);
    const clock = { now: 5 * EPOCH_MS + 1000 };
    const { svc, url } = await start(dataDir, clock);
    let acknowledged = 0;
    for (let i = 0; i < 5; i++) if ((await report(url, 5, await token(url, 5), i)).status === 202) acknowledged++;
    const filler = fill(disk);
    let full: { status: number; error?: string } | undefined;
    for (let i = 0; i < 200 && !full; i++) {
      const r = await report(url, 5, await token(url, 5), i);
      if (r.status === 202) acknowledged++;
      else full = r;
    }
    expect(full).toEqual({ status: 507, error: 'storage_full' });
    expect((await health(url)).body.storage.state).toBe('full');
    rmSync(filler);
    let last: unknown;
    const ms = await until(async () => {
      const h2 = await health(url);
      last = h2.body.storage;
      return h2.status === 200;
    }, 10_000).catch((e: Error) => {
      throw new Error(`${e.message}: storage ${JSON.stringify(last)}`);
    });
    console.info(`server-recovery: run-time full disk — healthy ${ms} ms after the space was freed, without traffic`);
    expect(ms).toBeLessThanOrEqual(10_000);
    expect((await report(url, 5, await token(url, 5), 7)).status).toBe(202);
    acknowledged++;
    await svc.close();
    const db = new Database(join(dataDir, 'reports.sqlite'), { readonly: true });
    expect((db.prepare('SELECT COALESCE(SUM(n), 0) AS n FROM cells').get() as { n: number }).n).toBe(acknowledged);
    db.close();
  }, 90_000);
});

describe('the WAL is checkpointed regularly', () => {
  it('a copy of the main file without its -wal holds every acknowledged report within seconds', async () => {
    const dataDir = services.tempDir();
    const clock = { now: 5 * EPOCH_MS + 1000 };
    const { url } = await start(dataDir, clock, 300);
    for (let i = 0; i < 40; i++) expect((await report(url, 5, await token(url, 5), i)).status).toBe(202);
    const copy = services.tempDir('atomem-wal-copy-');
    const counted = async () => {
      copyFileSync(join(dataDir, 'reports.sqlite'), join(copy, 'reports.sqlite'));
      const db = new Database(join(copy, 'reports.sqlite'), { readonly: true });
      try {
        return (db.prepare('SELECT COALESCE(SUM(n), 0) AS n FROM cells').get() as { n: number }).n;
      } finally {
        db.close();
      }
    };
    await until(async () => (await counted()) === 40, 5000);
    expect(await counted()).toBe(40);
  }, 60_000);
});

/** An ext4 image on a loop device mounted at a fresh dir (root only), or undefined. */
function ext4Disk(): { dir: string; dev: string } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const root = mkdtempSync(join(tmpdir(), 'atomem-ext4-'));
  disks.push(root);
  const img = join(root, 'disk.img');
  const dir = join(root, 'mnt');
  mkdirSync(dir);
  const ok = (cmd: string, args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' });
  if (ok('truncate', ['-s', '32M', img]).status !== 0 || ok('mkfs.ext4', ['-q', '-F', img]).status !== 0) return undefined;
  const dev = ok('losetup', ['--find', '--show', img]);
  if (dev.status !== 0) return undefined;
  loops.push(dev.stdout.trim());
  if (ok('mount', [dev.stdout.trim(), dir]).status !== 0) return undefined;
  mounts.push(dir);
  return { dir, dev: dev.stdout.trim() };
}
const loops: string[] = [];
afterAll(() => {
  for (const l of loops) spawnSync('losetup', ['-d', l]);
});

describe.skipIf(!canMount)('an I/O error (a real ext4 file system shut down under the service)', () => {
  it('answers 503 storage_unavailable and health names an I/O error (not corruption); once the disk is mounted again it resumes by itself within 10 s, with every acknowledged report', async (ctx) => {
    const disk = ext4Disk();
    if (!disk) ctx.skip();
    const dataDir = join(disk!.dir, 'data');
    const catalog = join(disk!.dir, '..', 'catalog.bin');
    const items = Array.from({ length: 12 }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
    writeFileSync(
      catalog,
      encodeCatalogVectors(
        { id: 'eio-space@1', dim: 4 },
        items,
        items.map((_, i) => Float32Array.from([1, i % 2, (i % 3) / 2, 0.5].map((x) => x / 2))),
      ),
    );
    const p = services.spawn(['--port', '0', '--data', dataDir, '--catalog-vectors', catalog, '--rate-max', '0', '--log-level', 'error']);
    const url = await p.ready;
    const epoch = epochOf(Date.now(), ((await health(url)).body as unknown as { epochMs: number }).epochMs);
    for (let i = 0; i < 3; i++) expect((await report(url, epoch, await token(url, epoch), i)).status).toBe(202);
    const t = await token(url, epoch);
    // EXT4_IOC_SHUTDOWN with EXT4_GOING_FLAGS_DEFAULT (sync, then every I/O fails with EIO)
    const shut = spawnSync('python3', [
      '-c',
      `import fcntl,os,struct;fd=os.open(${JSON.stringify(disk!.dir)},os.O_RDONLY);fcntl.ioctl(fd,0x8004587d,struct.pack('I',0))`,
    ]);
    if (shut.status !== 0) ctx.skip();
    const r = await report(url, epoch, t, 3);
    expect(r).toEqual({ status: 503, error: 'storage_unavailable' });
    const h = await health(url);
    expect(h.status).toBe(503);
    expect(h.body.storage.state).toBe('io');
    // SQLite reports either SQLITE_IOERR_* or, when a read of a page fails, SQLITE_CORRUPT: both are named an I/O error here
    expect(h.body.storage.message).toMatch(/: I\/O error \((SQLITE_IOERR|SQLite reported SQLITE_CORRUPT.*EIO)/);
    // The service lets go of its files at its first retry (it closes the connection and fails to open the file again),
    // so the dead file system can be unmounted; a fresh mount of the disk at the same place brings it back.
    await until(async () => /again after an I\/O error failed/.test((await health(url)).body.storage.message ?? ''), 10_000);
    expect(spawnSync('umount', ['-l', disk!.dir]).status).toBe(0);
    expect(spawnSync('mount', [disk!.dev, disk!.dir]).status).toBe(0);
    let last: unknown;
    const ms = await until(async () => {
      const h2 = await health(url);
      last = h2.body.storage;
      return h2.status === 200;
    }, 10_000).catch((e: Error) => {
      throw new Error(`${e.message}: storage ${JSON.stringify(last)}`);
    });
    console.info(`server-recovery: I/O error — healthy again ${ms} ms after the disk was mounted again, without a restart`);
    // the token refused during the fault was not spent: it pays now
    expect((await report(url, epoch, t, 3)).status).toBe(202);
    p.child.kill('SIGKILL');
    await p.exited;
    const db = new Database(join(dataDir, 'reports.sqlite'), { readonly: true });
    try {
      expect((db.prepare('SELECT COALESCE(SUM(n), 0) AS n FROM cells WHERE epoch = ?').get(epoch) as { n: number }).n).toBe(4);
    } finally {
      db.close();
    }
  }, 120_000);
});
