// Group commit (`--sync group`, the default): a counted report resolves only after an fsync of
// the WAL that started after its commit, one fsync shared by the writes waiting; fsync failures
// carry SQLite-like codes so health names them. The power-cut rows of `npm run bench:service --
// --faults` test the promise itself (acknowledged reports kept across an ext4 shut down without
// flushing); release reads are answered from memory once read (immutable releases).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ReportStore } from '../src/report-store.js';
import { DEFAULT_SYNC, WalSync, classifyStorageError } from '../src/storage.js';
import { ReleaseCache, SqliteIndexStore } from '../src/store.js';

const dirs: string[] = [];
const temp = () => {
  const d = mkdtempSync(join(tmpdir(), 'atomem-sync-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const nonce = (i: number) => i.toString(16).padStart(64, '0');

describe('group commit', () => {
  it('is the default; concurrent reports share fsyncs, each counted report resolves after one that started after its commit', async () => {
    expect(DEFAULT_SYNC).toBe('group');
    const sqlite = ReportStore.open(temp());
    expect(sqlite.sync).toBe('group');
    const store = new SqliteIndexStore(sqlite);
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => store.spend(nonce(i), 7, i % 4, i % 3)));
    expect(results.every((r) => r === 'counted')).toBe(true);
    // the first commit starts an fsync; the 39 after it wait for the next one
    expect(sqlite.syncRounds).toBeGreaterThanOrEqual(2);
    expect(sqlite.syncRounds).toBeLessThan(40);
    // a refused spend (already spent) writes nothing and waits for nothing
    const before = sqlite.syncRounds;
    expect(await store.spend(nonce(0), 7, 0, 0)).toBe('spent');
    expect(sqlite.syncRounds).toBe(before);
    expect(sqlite.reportCount(7)).toBe(40);
    await store.close();
  });

  it('a caller arriving while an fsync runs waits for the next round; callers arriving together share it', async () => {
    const dir = temp();
    const sqlite = ReportStore.open(dir);
    sqlite.spend(nonce(1), 1, 0, 0);
    const sync = new WalSync(sqlite.file);
    const first = sync.sync();
    const second = sync.sync();
    const third = sync.sync();
    expect(second).toBe(third);
    expect(second).not.toBe(first);
    await first;
    expect(sync.rounds).toBe(1);
    await second;
    expect(sync.rounds).toBe(2);
    sqlite.close();
  });

  it('--sync normal and full do not wait (full: SQLite fsyncs inside the commit)', async () => {
    for (const level of ['normal', 'full'] as const) {
      const sqlite = ReportStore.open(temp(), { synchronous: level });
      const store = new SqliteIndexStore(sqlite);
      expect(await store.spend(nonce(2), 3, 1, 1)).toBe('counted');
      expect(sqlite.syncRounds).toBe(0);
      await store.close();
    }
  });

  it('an fsync that fails is an I/O storage failure (503, health names the file)', async () => {
    const file = join(temp(), 'gone', 'reports.sqlite');
    const err = await new WalSync(file).sync().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect((err as { code: string }).code).toBe('SQLITE_IOERR_FSYNC');
    expect(classifyStorageError(err, file)).toMatchObject({ state: 'io', status: 503 });
  });
});

describe('release cache', () => {
  it('keeps read or stored releases, bounded by count, least recently read out first; pruned epochs leave it', async () => {
    const c = new ReleaseCache(3);
    let reads = 0;
    const read = (e: number) => async () => {
      reads++;
      return e === 99 ? undefined : `release ${e}`;
    };
    expect(await c.body(1, read(1))).toBe('release 1');
    expect(await c.body(1, read(1))).toBe('release 1');
    expect(reads).toBe(1);
    // an epoch without a release is not remembered (it may be published later)
    expect(await c.body(99, read(99))).toBeUndefined();
    expect(await c.body(99, read(99))).toBeUndefined();
    expect(reads).toBe(3);
    c.put(2, 'release 2');
    c.put(3, 'release 3');
    c.get(1);
    c.put(4, 'release 4');
    expect(c.has(2)).toBe(false);
    expect([1, 3, 4].every((e) => c.has(e))).toBe(true);
    c.prune(4, 2);
    expect(c.has(1)).toBe(false);
    expect(c.has(3)).toBe(true);
  });

  it('latest: the store answer when it answers; the latest seen while it cannot be reached (io), the error otherwise', async () => {
    const c = new ReleaseCache();
    const classify = (e: unknown) => classifyStorageError(e, 'f');
    const down = () => Promise.reject(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }));
    await expect(c.latestOr(down, classify)).rejects.toThrow('disk I/O error');
    expect(await c.latestOr(async () => 5, classify)).toBe(5);
    expect(await c.latestOr(down, classify)).toBe(5);
    const other = () => Promise.reject(new Error('a bug'));
    await expect(c.latestOr(other, classify)).rejects.toThrow('a bug');
  });

  it('the SQLite store serves a published release from memory', async () => {
    const sqlite = ReportStore.open(temp());
    const store = new SqliteIndexStore(sqlite);
    for (let i = 0; i < 3; i++) await store.spend(nonce(i), 4, 0, 0);
    const closed = await store.closeEpoch(4, async () => '{"epoch":4}', 30);
    expect(closed.release).toBe('{"epoch":4}');
    expect(store.releases.has(4)).toBe(true);
    sqlite.close();
    // the connection is closed: the read is answered from memory
    expect(await store.release(4)).toBe('{"epoch":4}');
  });
});
