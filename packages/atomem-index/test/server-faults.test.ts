// The index service under faults and abuse, over real HTTP and real SQLite files:
// disk full, corrupted / emptied / missing / foreign database files, a read-only data dir,
// slow clients, connection floods, header rotation, CORS, metrics, the dimension registry.
// Each fault ends with the data intact, the state named (health or the start error) and a
// message naming the file and the fix.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createIndexService, type IndexService, type IndexServiceOptions } from '../src/service.js';
import { StorageError, StorageHealth, MARKER_FILE, classifyStorageError } from '../src/storage.js';
import { addressKeyer, ipv6Prefix64, resolveNetworkLimits } from '../src/edge.js';
import { INDEX_V2_PATHS, isValidItemId } from 'atomem/protocol';
import type { ItemSpace } from 'atomem/engine';
import { axisSpace, mintToken } from '../../../test/fixtures/index-service.js';

const ATTESTER = 'attester-secret-for-tests-0001';
const METRICS = 'metrics-secret-for-tests-0001';
const EPOCH_MS = 1_000_000;

const dirs: string[] = [];
const immutable: string[] = [];
const services: IndexService[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  while (services.length) await services.pop()!.close();
});
afterAll(() => {
  for (const d of immutable) spawnSync('chattr', ['-i', d]);
  for (const d of dirs) {
    try {
      chmodSync(d, 0o755);
    } catch {
      // gone
    }
    rmSync(d, { recursive: true, force: true });
  }
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'atomem-faults-'));
  dirs.push(d);
  return d;
}

function space(embedderId = 'fault-space@1', dim = 8): ItemSpace {
  return axisSpace(embedderId, { dim, step: 7, bump: 0.3 });
}

function v2Options(dataDir: string, extra: Partial<IndexServiceOptions> = {}, sp: ItemSpace = space()): IndexServiceOptions {
  return {
    dataDir,
    rateLimit: false,
    metricsToken: METRICS,
    v2: { space: sp, epochMs: EPOCH_MS, now: () => 5 * EPOCH_MS + 1000, tickMs: 0, minReports: 1, minContributors: 0, attesterKey: ATTESTER },
    ...extra,
  };
}

async function startV2(dataDir = tempDir(), extra: Partial<IndexServiceOptions> = {}) {
  const svc = createIndexService(v2Options(dataDir, extra));
  services.push(svc);
  await svc.ready;
  const url = await svc.listen({ port: 0 });
  return { svc, url, dataDir };
}

const token = (url: string, epoch: number) => mintToken(url, epoch, ATTESTER);

async function report(url: string, epoch: number, t: string, i: number) {
  const res = await fetch(`${url}${INDEX_V2_PATHS.report}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ v: 2, epoch, token: t, report: { cohort: i % 8, bucket: i % 3 } }),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: string; message?: string } };
}

async function health(url: string) {
  const res = await fetch(`${url}${INDEX_V2_PATHS.health}`);
  return {
    status: res.status,
    body: (await res.json()) as { status: string; storage: { state: string; file?: string; message?: string; refusedWrites?: number } },
  };
}

function cellsOf(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT COALESCE(SUM(n), 0) AS n FROM cells').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

const sha = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

function startError(fn: () => unknown): StorageError {
  try {
    fn();
  } catch (e) {
    if (e instanceof StorageError) return e;
    throw e;
  }
  throw new Error('expected a StorageError');
}

describe('storage faults', () => {
  it('disk full: 507 storage_full with Retry-After, health degraded naming the file, nothing lost; writes resume once there is space', async () => {
    const dataDir = tempDir();
    // First start: creates the files and the issuer key.
    const first = await startV2(dataDir);
    const epoch = first.svc.v2!.epoch();
    await services.pop()!.close();
    const file = join(dataDir, 'reports.sqlite');
    const db = new Database(file);
    const bytes = (db.pragma('page_count', { simple: true }) as number) * (db.pragma('page_size', { simple: true }) as number);
    db.close();
    // Second start: the file may not grow (a full disk as SQLite sees it: SQLITE_FULL).
    const { url } = await startV2(dataDir, { storage: { maxBytes: bytes } });
    let accepted = 0;
    let full: Awaited<ReturnType<typeof report>> | undefined;
    let refusedToken = '';
    for (let i = 0; i < 600 && !full; i++) {
      const t = await token(url, epoch);
      const r = await report(url, epoch, t, i);
      if (r.status === 202) accepted++;
      else {
        full = r;
        refusedToken = t;
      }
    }
    expect(full, 'the size limit was never reached').toBeDefined();
    expect(full!.status).toBe(507);
    expect(full!.body.error).toBe('storage_full');
    expect(Number(full!.retryAfter)).toBeGreaterThan(0);
    expect(full!.body.message).toContain(file);
    expect(full!.body.message).toMatch(/Fix: free space/);
    const h = await health(url);
    expect(h.status).toBe(503);
    expect(h.body.status).toBe('degraded');
    expect(h.body.storage).toMatchObject({ state: 'full', file });
    // Reads still work while writes fail.
    expect((await fetch(`${url}${INDEX_V2_PATHS.tokenKey}`)).status).toBe(200);
    await services.pop()!.close();
    // Every acknowledged report is on disk; the refused one was not written (its token is unspent).
    expect(cellsOf(file)).toBe(accepted);
    // "Space freed" (no limit): the same token is accepted now, health is ok again.
    const again = await startV2(dataDir);
    expect((await report(again.url, epoch, refusedToken, 0)).status).toBe(202);
    expect((await health(again.url)).body.storage.state).toBe('ok');
    await services.pop()!.close();
    expect(cellsOf(file)).toBe(accepted + 1);
  }, 120_000);

  it('a corrupted page: the start is refused naming the file and the fix, the file is left as it was', async () => {
    const dataDir = tempDir();
    const { url, svc } = await startV2(dataDir);
    const epoch = svc.v2!.epoch();
    for (let i = 0; i < 30; i++) expect((await report(url, epoch, await token(url, epoch), i)).status).toBe(202);
    await services.pop()!.close();
    const file = join(dataDir, 'reports.sqlite');
    const db = new Database(file);
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const pages = db.pragma('page_count', { simple: true }) as number;
    db.close();
    expect(pages).toBeGreaterThan(2);
    // Overwrite the b-tree pages after the schema page with garbage (what a bad sector does).
    const fd = openSync(file, 'r+');
    for (let p = 1; p < pages; p++) writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, p * pageSize);
    closeSync(fd);
    const before = sha(file);
    const e = startError(() => createIndexService(v2Options(dataDir)));
    expect(e.problem).toBe('corrupt');
    expect(e.file).toBe(file);
    expect(e.message).toContain(file);
    expect(e.message).toMatch(/Fix: .*restore it/);
    expect(sha(file)).toBe(before);
  });

  it('a page corrupted while the service runs: 503 storage_corrupt with Retry-After, health names the file, writes refused at once without touching the file, the start refused after', async () => {
    const dataDir = tempDir();
    const first = await startV2(dataDir);
    const epoch = first.svc.v2!.epoch();
    await services.pop()!.close();
    const file = join(dataDir, 'reports.sqlite');
    // Tombstones of the open epoch (valid rows) make the file larger than SQLite's page cache
    // (better-sqlite3: 16 MB), so a write reads pages from the disk while the service runs.
    const db = new Database(file);
    const insert = db.prepare('INSERT INTO spent (nonce, epoch) VALUES (?, ?)');
    db.transaction(() => {
      for (let i = 0; i < 700_000; i++) insert.run(createHash('sha256').update(`filler-${i}`).digest(), epoch);
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
    const pageSize = db.pragma('page_size', { simple: true }) as number;
    const pages = db.pragma('page_count', { simple: true }) as number;
    db.close();
    expect(pages * pageSize).toBeGreaterThan(24 * 2 ** 20);
    const { url } = await startV2(dataDir);
    let accepted = 0;
    for (let i = 0; i < 5; i++) if ((await report(url, epoch, await token(url, epoch), i)).status === 202) accepted++;
    expect(accepted).toBe(5);
    // A bad sector under the running service: every page after the schema page becomes garbage.
    const fd = openSync(file, 'r+');
    for (let p = 1; p < pages; p++) writeSync(fd, Buffer.alloc(pageSize, 0xa5), 0, pageSize, p * pageSize);
    closeSync(fd);
    let refused: Awaited<ReturnType<typeof report>> | undefined;
    for (let i = 0; i < 50 && !refused; i++) {
      const r = await report(url, epoch, await token(url, epoch), 100 + i);
      if (r.status !== 202) refused = r;
    }
    expect(refused, 'no write met a corrupted page').toBeDefined();
    // from the first refusal on (the corruption is known), nothing touches the file: no write, no WAL checkpoint
    const corrupted = sha(file);
    expect(refused!.status).toBe(503);
    expect(refused!.body.error).toBe('storage_corrupt');
    expect(Number(refused!.retryAfter)).toBeGreaterThan(0);
    expect(refused!.body.message).toContain(file);
    expect(refused!.body.message).toMatch(/Fix: .*restore it/);
    const h = await health(url);
    expect(h.status).toBe(503);
    expect(h.body.status).toBe('degraded');
    expect(h.body.storage).toMatchObject({ state: 'corrupt', file });
    // Sticky: the next writes are refused before they reach SQLite, so nothing more is written to the file.
    for (let i = 0; i < 3; i++) {
      const r = await report(url, epoch, await token(url, epoch), 200 + i);
      expect(r.status).toBe(503);
      expect(r.body.error).toBe('storage_corrupt');
      expect(Number(r.retryAfter)).toBeGreaterThan(0);
    }
    expect((await health(url)).body.storage.refusedWrites).toBeGreaterThanOrEqual(4);
    expect(sha(file)).toBe(corrupted);
    // Reads that need no database keep answering.
    expect((await fetch(`${url}${INDEX_V2_PATHS.tokenKey}`)).status).toBe(200);
    await services.pop()!.close();
    // The next start refuses the file (quick_check), naming it and the fix, and leaves it as it is.
    const before = sha(file);
    const e = startError(() => createIndexService(v2Options(dataDir)));
    expect(e.problem).toBe('corrupt');
    expect(e.file).toBe(file);
    expect(e.message).toMatch(/Fix: .*restore it/);
    expect(sha(file)).toBe(before);
  }, 120_000);

  it('a zero-byte or missing database file in an initialised data dir is refused (data loss), not started empty', async () => {
    const dataDir = tempDir();
    await startV2(dataDir);
    await services.pop()!.close();
    const file = join(dataDir, 'reports.sqlite');
    expect(JSON.parse(readFileSync(join(dataDir, MARKER_FILE), 'utf8')).files).toContain('reports.sqlite');
    writeFileSync(file, '');
    const empty = startError(() => createIndexService(v2Options(dataDir)));
    expect(empty.problem).toBe('empty');
    expect(empty.message).toMatch(/0 bytes.*data is lost/);
    expect(statSync(file).size).toBe(0);
    rmSync(file);
    const missing = startError(() => createIndexService(v2Options(dataDir)));
    expect(missing.problem).toBe('missing');
    expect(missing.message).toContain(file);
  });

  it("a foreign file (another program's SQLite database, or not SQLite) is refused and left untouched", async () => {
    const dataDir = tempDir();
    const file = join(dataDir, 'reports.sqlite');
    const other = new Database(file);
    other.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, email TEXT); INSERT INTO customers (email) VALUES ('a@b.example')");
    other.close();
    const before = sha(file);
    const e = startError(() => createIndexService(v2Options(dataDir)));
    expect(e.problem).toBe('foreign');
    expect(e.message).toMatch(/tables: customers/);
    expect(sha(file)).toBe(before);
    writeFileSync(file, 'hello, this is not a database'.repeat(40));
    expect(startError(() => createIndexService(v2Options(dataDir))).problem).toBe('foreign');
  });

  it('a read-only data dir: exit 1 naming the directory, the user and the fix', async () => {
    const dataDir = tempDir();
    const data = join(dataDir, 'data');
    mkdirSync(data);
    chmodSync(data, 0o555);
    chmodSync(dataDir, 0o755);
    // why: root writes anywhere. Then run the service as nobody when nobody can read the
    // repository, else make the directory immutable (chattr +i); one of them is needed.
    let asUser = {};
    if (process.getuid?.() === 0) {
      const cli = join(process.cwd(), 'packages/atomem-index/src/cli.ts');
      const nobody = spawnSync(process.execPath, ['-e', `require('fs').accessSync(${JSON.stringify(cli)}, 4)`], { uid: 65534, gid: 65534 });
      if (nobody.status === 0) asUser = { uid: 65534, gid: 65534 };
      else {
        expect(spawnSync('chattr', ['+i', data]).status, 'neither nobody nor chattr can make a read-only data dir here').toBe(0);
        immutable.push(data);
      }
    }
    const child = spawn(
      process.execPath,
      [
        '-C',
        'atomem-source',
        '--import',
        'tsx',
        'packages/atomem-index/src/cli.ts',
        '--catalog-vectors',
        join(dataDir, 'catalog.bin'),
        '--port',
        '0',
        '--data',
        join(dataDir, 'data'),
      ],
      { cwd: process.cwd(), env: { ...process.env, HOME: dataDir }, stdio: ['ignore', 'pipe', 'pipe'], ...asUser },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    expect(code).toBe(1);
    expect(stderr).toContain(join(dataDir, 'data'));
    expect(stderr).toMatch(/not writable by this process \(uid \d+/);
    expect(stderr).toMatch(/Fix: make the directory writable/);
  }, 60_000);
});

describe('storage failure classification', () => {
  it('run-time corruption is sticky (writes refused until an operator acts), full / I/O clear on the next good write', () => {
    const file = '/data/reports.sqlite';
    const c = classifyStorageError(Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' }), file)!;
    expect(c).toMatchObject({ state: 'corrupt', status: 503, code: 'storage_corrupt' });
    expect(c.message).toContain(file);
    expect(classifyStorageError(Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR_WRITE' }), file)).toMatchObject({
      state: 'io',
      status: 503,
      code: 'storage_unavailable',
    });
    expect(classifyStorageError(new Error('a bug'), file)).toBeUndefined();
    const h = new StorageHealth();
    h.fail(Object.assign(new Error('full'), { code: 'SQLITE_FULL' }), file);
    expect(h.status()).toMatchObject({ state: 'full', file, refusedWrites: 1 });
    h.ok(file);
    expect(h.healthy).toBe(true);
    h.fail(Object.assign(new Error('malformed'), { code: 'SQLITE_CORRUPT' }), file);
    h.ok(file);
    expect(h.healthy).toBe(false);
    expect(h.blocked(file)?.state).toBe('corrupt');
  });
});

describe('configuration registries', () => {
  it('v2: the item space is recorded in the marker; another embedder or dimension refuses the start', async () => {
    const dataDir = tempDir();
    await startV2(dataDir);
    await services.pop()!.close();
    const svc = createIndexService(v2Options(dataDir, {}, space('other-space@2', 16)));
    services.push(svc);
    await expect(svc.ready).rejects.toThrow(/holds releases of the item space fault-space@1 \(8-d\), but the configured catalog is other-space@2 \(16-d\)/);
    await services.pop()!.close();
    // on purpose: replaceSpace records the new space
    const base = v2Options(dataDir, {}, space('other-space@2', 16));
    const replaced = createIndexService({ ...base, v2: { ...base.v2!, replaceSpace: true } });
    services.push(replaced);
    await replaced.ready;
    expect(JSON.parse(readFileSync(join(dataDir, MARKER_FILE), 'utf8')).space).toEqual({ embedderId: 'other-space@2', dim: 16 });
  });

  it('item ids follow the documented grammar; a catalog with a hostile id is refused naming it', async () => {
    for (const ok of ['sku-1', 'item:42', 'café-noir', 'ürün_7', 'a/b@c+d~e#f=g', '商品123']) expect(isValidItemId(ok), ok).toBe(true);
    for (const bad of [
      '',
      ' sku',
      'sku 1',
      'sku\u0000',
      'x\u202Egpj.exe',
      'a\u200Bb',
      '\uD800x',
      '<img src=x onerror=alert(1)>',
      'a"b',
      "a'b",
      'a&b',
      '-lead',
      'x'.repeat(129),
    ]) {
      expect(isValidItemId(bad), JSON.stringify(bad)).toBe(false);
    }
    const base = space();
    const sp = { ...base, ids: base.ids.map((id, i) => (i === 3 ? 'sku\u202Eevil' : id)) };
    const svc = createIndexService(v2Options(tempDir(), {}, sp));
    services.push(svc);
    await expect(svc.ready).rejects.toThrow(/item id "sku\\u202eevil" \(entry 3 of the catalog\) does not follow the item-id grammar/i);
  });
});

describe('the edge', () => {
  it('slow clients (one byte every 300 ms) are cut at the headers timeout; health stays fast meanwhile', async () => {
    const { url } = await startV2(tempDir(), { network: { headersTimeoutMs: 1000, requestTimeoutMs: 2000, idleTimeoutMs: 2000 } });
    const port = Number(new URL(url).port);
    const closedAt: number[] = [];
    const t0 = Date.now();
    for (let i = 0; i < 40; i++) {
      // why: its own loopback address, so the per-address cap is not what closes them
      const s = connect({ port, host: '127.0.0.1', localAddress: `127.0.0.${10 + (i % 40)}` });
      sockets.push(s);
      s.on('error', () => {});
      s.on('close', () => closedAt.push(Date.now() - t0));
      s.on('connect', () => s.write('G'));
      const timer = setInterval(() => (s.destroyed ? clearInterval(timer) : s.write('E')), 300);
      s.on('close', () => clearInterval(timer));
    }
    const lat: number[] = [];
    while (Date.now() - t0 < 3500) {
      const s = performance.now();
      expect((await fetch(`${url}${INDEX_V2_PATHS.health}`)).status).toBe(200);
      lat.push(performance.now() - s);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(closedAt.length).toBe(40);
    // headers timeout 1 s, checked every second by Node: cut within ~2.5 s
    expect(Math.max(...closedAt)).toBeLessThan(3000);
    lat.sort((a, b) => a - b);
    // why 500 ms: health held behind the slow clients would wait for their timeouts (seconds);
    // the latency target itself is the abuse benchmark's (health p99 ≤ 50 ms, BENCHMARKS.md), not
    // a timed test's on a shared CI machine
    expect(lat[Math.floor(lat.length * 0.99)]).toBeLessThan(500);
  }, 30_000);

  it('connection caps: beyond the per-address cap new connections are closed at once; other addresses are served', async () => {
    const { url, svc } = await startV2(tempDir(), { network: { maxConnectionsPerAddress: 8 } });
    const port = Number(new URL(url).port);
    const opened = await Promise.all(
      Array.from(
        { length: 20 },
        () =>
          new Promise<Socket>((resolve) => {
            const s = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.77' }, () => resolve(s));
            s.on('error', () => {});
            sockets.push(s);
          }),
      ),
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(opened.filter((s) => !s.destroyed).length).toBe(8);
    expect(svc.edge.refusedConnections).toBe(12);
    expect((await fetch(`${url}${INDEX_V2_PATHS.health}`)).status).toBe(200);
  });

  it('rate limits key on the connection address: header rotation gets no new bucket; health is exempt', async () => {
    const { url, svc } = await startV2(tempDir(), { rateLimit: { max: 5, timeWindow: 60_000 } });
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await fetch(`${url}${INDEX_V2_PATHS.tokenKey}`, {
        headers: { 'x-atomem-client': `rotating-client-${i}`, 'x-forwarded-for': `198.51.100.${i}` },
      });
      statuses.push(res.status);
      if (res.status === 429) expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      await res.arrayBuffer();
    }
    expect(statuses.filter((s) => s === 200).length).toBe(5);
    expect(svc.edge.rateLimited).toBe(7);
    for (let i = 0; i < 10; i++) expect((await fetch(`${url}${INDEX_V2_PATHS.health}`)).status).toBe(200);
  });

  it('CORS: default same origin only; an allow-list answers only its origins; null never', async () => {
    const ask = async (url: string, origin: string) =>
      (await fetch(`${url}${INDEX_V2_PATHS.health}`, { headers: { origin } })).headers.get('access-control-allow-origin');
    const plain = await startV2(tempDir());
    expect(await ask(plain.url, 'https://evil.example')).toBeNull();
    expect(await ask(plain.url, 'null')).toBeNull();
    const listed = await startV2(tempDir(), { corsOrigins: ['https://shop.example', /^https:\/\/[a-z]+\.shop\.example$/] });
    expect(await ask(listed.url, 'https://shop.example')).toBe('https://shop.example');
    expect(await ask(listed.url, 'https://eu.shop.example')).toBe('https://eu.shop.example');
    expect(await ask(listed.url, 'https://evil.example')).toBeNull();
    expect(await ask(listed.url, 'null')).toBeNull();
    const any = await startV2(tempDir(), { corsOrigins: '*' });
    expect(await ask(any.url, 'https://elsewhere.example')).toBe('https://elsewhere.example');
    expect(await ask(any.url, 'null')).toBeNull();
    expect(() => createIndexService(v2Options(tempDir(), { corsOrigins: ['null'] }))).toThrow(/'null' is not allowed/);
  });

  it('metrics only with the token (404 otherwise, as if absent)', async () => {
    const { url } = await startV2(tempDir());
    expect((await fetch(`${url}/v2/metrics`)).status).toBe(404);
    expect((await fetch(`${url}/v2/metrics`, { headers: { authorization: 'Bearer not-the-metrics-token' } })).status).toBe(404);
    const m = await fetch(`${url}/v2/metrics`, { headers: { authorization: `Bearer ${METRICS}` } });
    expect(m.status).toBe(200);
    expect(await m.json()).toMatchObject({ storage: { state: 'ok' }, edge: { connections: expect.any(Number) }, requests: expect.any(Object) });
  });
});

describe('edge helpers', () => {
  it('network defaults, and nonsense refused', () => {
    expect(resolveNetworkLimits()).toEqual({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 15_000,
      idleTimeoutMs: 15_000,
      keepAliveTimeoutMs: 5_000,
      maxConnections: 4096,
      maxConnectionsPerAddress: 64,
      maxRequestsPerSocket: 1000,
    });
    expect(resolveNetworkLimits({}, true).maxConnectionsPerAddress).toBe(Infinity);
    expect(() => resolveNetworkLimits({ requestTimeoutMs: 0 })).toThrow(/requestTimeoutMs must be a number ≥ 1/);
    expect(() => resolveNetworkLimits({ headersTimeoutMs: 20_000 })).toThrow(/must not exceed/);
  });

  it('rate-limit keys: an HMAC of the address (never the address), IPv6 by its /64, IPv4-mapped as IPv4', () => {
    const key = addressKeyer();
    expect(key('203.0.113.9')).not.toContain('203');
    expect(key('203.0.113.9')).toBe(key('::ffff:203.0.113.9'));
    expect(key('203.0.113.9')).not.toBe(key('203.0.113.10'));
    expect(ipv6Prefix64('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2');
    expect(ipv6Prefix64('2001:db8::1')).toBe('2001:db8:0:0');
    expect(key('2001:db8:1:2::1')).toBe(key('2001:db8:1:2:ffff:ffff:ffff:ffff'));
    expect(key('2001:db8:1:2::1')).not.toBe(key('2001:db8:1:3::1'));
    expect(addressKeyer()('203.0.113.9')).not.toBe(key('203.0.113.9'));
  });
});
