// Several index service instances on one real PostgreSQL (Debian's, installed when missing,
// a throwaway cluster on a loopback port; skipped visibly when it cannot be had): a token spends
// once across instances, an epoch closes and releases once, every instance serves the same bytes,
// a report for an epoch another instance closed is refused by the store itself — and two real
// service processes under a burst, one SIGKILLed mid-burst: 0 acknowledged reports lost, 0 double-spends.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INDEX_V2_PATHS, epochOf } from 'atomem/protocol';
import { encodeCatalogVectors } from 'atomem/protocol';
import { rng, unit } from '../../../test/fixtures/index-wire.js';
import { axisSpace, clockedV2, indexServices, mintToken, sendReport } from '../../../test/fixtures/index-service.js';
import { startPostgres, type PostgresCluster } from '../../../test/fixtures/postgres.js';

const EPOCH_MS = 1_000_000;
const GRACE = EPOCH_MS / 10;

let cluster: PostgresCluster | undefined;
let skip: string | undefined;
const services = indexServices('atomem-pg-data-');

beforeAll(async () => {
  const c = await startPostgres();
  if ('skip' in c) {
    skip = c.skip;
    console.warn(`server-postgres: SKIPPED — ${skip}`);
  } else cluster = c;
}, 900_000);
afterAll(async () => {
  await cluster?.stop();
}, 60_000);

/** The service in process on `store` with the clock `clock`. */
function start(store: string, clock: { now: number }) {
  return services.start({
    store,
    rateLimit: false,
    v2: clockedV2(axisSpace('pg-space@1'), clock, { epochMs: EPOCH_MS }),
  });
}
const issue = (url: string, epoch: number) => mintToken(url, epoch);
const report = sendReport;

async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql, params)).rows;
  } finally {
    await c.end();
  }
}

describe('index service instances on one PostgreSQL', () => {
  it('two instances: one issuer key, each token spends once across both, an epoch releases once with the same bytes everywhere, a report for an epoch another instance closed is refused', async (ctx) => {
    if (!cluster) ctx.skip();
    const url = await cluster!.createDatabase('two_instances');
    const clockA = { now: 5 * EPOCH_MS + 1000 };
    const clockB = { now: 5 * EPOCH_MS + 1000 };
    const [a, b] = await Promise.all([start(url, clockA), start(url, clockB)]);
    expect(await (await fetch(`${a.url}${INDEX_V2_PATHS.tokenKey}`)).text()).toBe(await (await fetch(`${b.url}${INDEX_V2_PATHS.tokenKey}`)).text());
    expect(((await (await fetch(`${a.url}${INDEX_V2_PATHS.health}`)).json()) as { store: string }).store).toBe('postgres');

    // Each of 20 tokens sent to both instances at once: exactly one 202 per token.
    const tokens: string[] = [];
    for (let i = 0; i < 20; i++) tokens.push(await issue(i % 2 ? a.url : b.url, 5));
    const answers = await Promise.all(tokens.map(async (t, i) => Promise.all([report(a.url, 5, t, i), report(b.url, 5, t, i)])));
    for (const pair of answers) expect(pair.sort()).toEqual([202, 403]);
    expect((await query<{ n: string }>(url, 'SELECT SUM(n) AS n FROM atomem_cells WHERE epoch = 5'))[0].n).toBe('20');

    // A past the deadline, B's clock still inside epoch 5's grace period (clocks of instances differ).
    clockA.now = 6 * EPOCH_MS + GRACE + 1;
    clockB.now = 6 * EPOCH_MS + GRACE / 2;
    const late = await issue(b.url, 5);
    const [ra, rb] = await Promise.all([a.svc.v2.aggregate(5), a.svc.v2.aggregate(5)]);
    expect(JSON.stringify(ra)).toBe(JSON.stringify(rb));
    // B has not read the new floor yet; its store refuses the late report anyway (the spend checks the floor in its transaction)
    expect(await report(b.url, 5, late, 0)).toBe(403);
    expect(await b.svc.v2.aggregate(5)).toEqual(ra);
    const bytesA = await (await fetch(`${a.url}${INDEX_V2_PATHS.release(5)}`)).text();
    const bytesB = await (await fetch(`${b.url}${INDEX_V2_PATHS.release(5)}`)).text();
    expect(bytesA).toBe(bytesB);
    expect(JSON.parse(bytesA).epoch).toBe(5);
    expect(await (await fetch(`${b.url}${INDEX_V2_PATHS.latest}`)).text()).toBe(bytesA);
    expect(await query(url, 'SELECT epoch FROM atomem_releases')).toEqual([{ epoch: '5' }]);
    expect(await query(url, 'SELECT count(*)::int AS n FROM atomem_spent')).toEqual([{ n: 0 }]);
    await b.svc.v2.refresh();
    expect(((await (await fetch(`${b.url}${INDEX_V2_PATHS.health}`)).json()) as { epochs: unknown }).epochs).toEqual({ closedThrough: 5, clock: 'ok' });
  }, 120_000);

  it('two service processes under a burst, one SIGKILLed mid-burst: 0 acknowledged reports lost, 0 double-spends; the restart serves the same key', async (ctx) => {
    if (!cluster) ctx.skip();
    const url = await cluster!.createDatabase('burst');
    const dir = services.tempDir('atomem-pg-burst-');
    const catalog = join(dir, 'catalog.bin');
    const r = rng(11);
    const items = Array.from({ length: 40 }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
    writeFileSync(
      catalog,
      encodeCatalogVectors(
        { id: 'pg-burst@1', dim: 8 },
        items,
        items.map(() => unit(Array.from({ length: 8 }, () => r() - 0.5))),
      ),
    );
    const startChild = (name: string) =>
      services.spawn(['--port', '0', '--data', join(dir, name), '--store', url, '--catalog-vectors', catalog, '--rate-max', '0', '--log-level', 'warn']);
    const A = startChild('a');
    const B = startChild('b');
    const [urlA, urlB] = await Promise.all([A.ready, B.ready]);
    const epoch = epochOf(Date.now(), 86_400_000);
    const minted: string[] = [];
    for (let i = 0; i < 120; i++) minted.push(await issue(i % 2 ? urlA : urlB, epoch));
    // 8 senders; every token goes to BOTH instances at once (a replay across the load balancer).
    // A is SIGKILLed once 30 reports are acknowledged.
    const acks = new Map<number, number>();
    let acked = 0;
    let sent = 0;
    let killed = false;
    const send = async (s: number) => {
      for (let i = s; i < minted.length; i += 8) {
        sent++;
        const both = await Promise.all(
          [urlA, urlB].map((u) =>
            fetch(`${u}${INDEX_V2_PATHS.report}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ v: 2, epoch, token: minted[i], report: { cohort: i % 64, bucket: i % 3 } }),
            }).then(
              async (res) => (await res.arrayBuffer(), res.status),
              () => 0,
            ),
          ),
        );
        for (const st of both) {
          if (st === 202) {
            acks.set(i, (acks.get(i) ?? 0) + 1);
            acked++;
          } else if (st !== 403 && st !== 0) throw new Error(`report ${i}: HTTP ${st}`);
        }
        if (!killed && acked >= 30) {
          killed = true;
          A.child.kill('SIGKILL');
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, (_, s) => send(s)));
    expect((await A.exited).signal).toBe('SIGKILL');
    const doubles = [...acks.values()].filter((n) => n > 1).length;
    expect(doubles, 'tokens acknowledged twice').toBe(0);
    const stored = Number((await query<{ n: string }>(url, 'SELECT COALESCE(SUM(n), 0) AS n FROM atomem_cells WHERE epoch = $1', [epoch]))[0].n);
    const spent = Number((await query<{ n: string }>(url, 'SELECT count(*) AS n FROM atomem_spent WHERE epoch = $1', [epoch]))[0].n);
    console.info(
      `server-postgres burst: ${sent} tokens sent to both instances, ${acked} acknowledged, ${stored} stored, ${spent} spent, ${doubles} double-spends`,
    );
    expect(acked).toBeGreaterThanOrEqual(30);
    // every acknowledged report is stored; at most the reports in flight at the kill are stored unacknowledged
    expect(stored).toBeGreaterThanOrEqual(acked);
    expect(stored).toBeLessThanOrEqual(minted.length);
    expect(spent).toBe(stored);
    // after the kill every token was still tried on B: each one is spent exactly once
    expect(stored).toBe(minted.length);
    // A restarts on the same store: same issuer key, and a token spent through B is refused by A
    const A2 = startChild('a');
    const urlA2 = await A2.ready;
    expect(await (await fetch(`${urlA2}${INDEX_V2_PATHS.tokenKey}`)).text()).toBe(await (await fetch(`${urlB}${INDEX_V2_PATHS.tokenKey}`)).text());
    expect(await report(urlA2, epoch, minted[1], 1)).toBe(403);
    for (const c of [A2, B]) {
      c.child.kill('SIGTERM');
      expect((await c.exited).code).toBe(0);
    }
  }, 300_000);

  it('the database goes away: release reads of a published epoch (and latest) are still answered by both instances, byte-identical, from memory', async (ctx) => {
    if (!cluster) ctx.skip();
    const url = await cluster!.createDatabase('outage_releases');
    const clock = { now: 5 * EPOCH_MS + 1000 };
    const [a, b] = await Promise.all([start(url, clock), start(url, clock)]);
    for (let i = 0; i < 4; i++) expect(await report(i % 2 ? a.url : b.url, 5, await issue(a.url, 5), i)).toBe(202);
    clock.now = 6 * EPOCH_MS + GRACE + 1;
    expect(await a.svc.v2.aggregate(5)).toBeDefined();
    // B never read the release: its upkeep's refresh reads the new latest into memory
    await b.svc.v2.refresh();
    const before = await (await fetch(`${a.url}${INDEX_V2_PATHS.release(5)}`)).text();
    const token = await issue(a.url, 6);
    await cluster!.halt();
    try {
      for (const base of [a.url, b.url]) {
        for (const path of [INDEX_V2_PATHS.release(5), INDEX_V2_PATHS.latest]) {
          const res = await fetch(`${base}${path}`);
          expect(res.status).toBe(200);
          expect(res.headers.get('etag')).toBe('"release-5"');
          expect(await res.text()).toBe(before);
        }
        // an epoch never published is not invented; the store's failure is named
        expect((await fetch(`${base}${INDEX_V2_PATHS.release(4)}`)).status).toBe(503);
      }
      // writes still fail visibly
      expect(await report(a.url, 6, token, 0)).toBe(503);
    } finally {
      cluster!.resume();
    }
  }, 120_000);

  it('the database goes away and comes back: 503 storage_unavailable naming it (no password) while it is gone, resumes by itself within seconds of its return', async (ctx) => {
    if (!cluster) ctx.skip();
    const url = await cluster!.createDatabase('outage');
    const clock = { now: 5 * EPOCH_MS + 1000 };
    const { url: base } = await start(url, clock);
    const t1 = await issue(base, 5);
    const t2 = await issue(base, 5);
    expect(await report(base, 5, t1, 0)).toBe(202);
    await cluster!.halt();
    const res = await fetch(`${base}${INDEX_V2_PATHS.report}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ v: 2, epoch: 5, token: t2, report: { cohort: 1, bucket: 1 } }),
    });
    expect(res.status).toBe(503);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.error).toBe('storage_unavailable');
    expect(body.message).toContain(`127.0.0.1:${cluster!.port}/outage`);
    expect(body.message).toMatch(/Fix: check the PostgreSQL server/);
    const h = await fetch(`${base}${INDEX_V2_PATHS.health}`);
    expect(h.status).toBe(503);
    expect(((await h.json()) as { storage: { state: string } }).storage.state).toBe('io');
    cluster!.resume();
    const t0 = Date.now();
    while ((await fetch(`${base}${INDEX_V2_PATHS.health}`)).status !== 200) {
      if (Date.now() - t0 > 10_000) throw new Error('health not ok 10 s after the database returned');
      await new Promise((r) => setTimeout(r, 100));
    }
    console.info(`server-postgres: health ok ${Date.now() - t0} ms after the database returned, without traffic`);
    // the refused report's token was not spent: it is accepted now, once
    expect(await report(base, 5, t2, 1)).toBe(202);
    expect(await report(base, 5, t2, 1)).toBe(403);
    expect((await query<{ n: string }>(url, 'SELECT SUM(n) AS n FROM atomem_cells WHERE epoch = 5'))[0].n).toBe('2');
  }, 120_000);
});
