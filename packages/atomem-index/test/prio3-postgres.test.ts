// The Prio3 aggregators as several instances on one real PostgreSQL (Debian's, a throwaway
// cluster on a loopback port; skipped visibly when it cannot be had): two leader instances and
// two helper instances, each role on its own database. Devices upload to either leader; a token
// pays for one upload across both leaders (the same upload sent to both at once: one 202); both
// leaders close the epoch at once and one aggregates while the other waits for its release; the
// helpers count each report once although the leaders' batches reach both helper instances; the
// release is stored once and both leaders serve the same bytes; the helpers draw one collection's noise.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRIO3_PATHS, prio3Measurement, sendPrio3Report, type Prio3Config } from 'atomem/engine';
import { attesterTokens, rng } from '../../../test/fixtures/index-wire.js';
import { TEST_ATTESTER, axisSpace, indexServices } from '../../../test/fixtures/index-service.js';
import { startPostgres, type PostgresCluster } from '../../../test/fixtures/postgres.js';
import type { Prio3Release } from '../src/prio3-aggregator.js';

const PEER_KEY = 'peer-key-of-the-two-aggregators';
const EPOCH_MS = 1_000_000_000;
const N_ITEMS = 30;

let cluster: PostgresCluster | undefined;
let skip: string | undefined;
const services = indexServices('atomem-prio3-pg-');

beforeAll(async () => {
  const c = await startPostgres();
  if ('skip' in c) {
    skip = c.skip;
    console.warn(`prio3-postgres: SKIPPED — ${skip}`);
  } else cluster = c;
}, 900_000);
afterAll(async () => {
  await cluster?.stop();
}, 60_000);

/** One aggregator instance in process on `store` (the Prio3 tick off: the test closes epochs). */
function start(store: string, role: 'leader' | 'helper', peerUrl: string) {
  return services.start({
    store,
    rateLimit: false,
    ohttp: false,
    v2: { space: axisSpace('prio3-pg@1', { items: N_ITEMS }), epochMs: EPOCH_MS, tickMs: 0, attesterKey: TEST_ATTESTER, minReports: 3, minContributors: 0 },
    prio3: { role, peerUrl, peerKey: PEER_KEY, epsilon: 10, threshold: 0, minShare: 0, minReports: 5, tickMs: 0 },
  });
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<T>(sql)).rows;
  } finally {
    await c.end();
  }
}

describe('prio3 aggregators on one PostgreSQL', () => {
  it('two leaders and two helpers: one key per role, a token pays once across leaders, one aggregation, one release with the same bytes everywhere, one collection', {
    timeout: 240_000,
  }, async (ctx) => {
    if (!cluster) ctx.skip();
    const leaderDb = await cluster!.createDatabase('prio3_leader');
    const helperDb = await cluster!.createDatabase('prio3_helper');
    const [h1, h2] = await Promise.all([start(helperDb, 'helper', 'http://127.0.0.1:9'), start(helperDb, 'helper', 'http://127.0.0.1:9')]);
    const [l1, l2] = await Promise.all([start(leaderDb, 'leader', h1.url), start(leaderDb, 'leader', h2.url)]);
    const configs = (await Promise.all([l1, l2, h1, h2].map(async (s) => (await fetch(`${s.url}${PRIO3_PATHS.config}`)).json()))) as Prio3Config[];
    // one HPKE key per role across its instances (the first instance's), distinct between the roles
    expect(configs[0].hpkePublicKey).toBe(configs[1].hpkePublicKey);
    expect(configs[2].hpkePublicKey).toBe(configs[3].hpkePublicKey);
    expect(configs[0].hpkePublicKey).not.toBe(configs[2].hpkePublicKey);

    const epoch = Math.floor(Date.now() / EPOCH_MS);
    const tokens = attesterTokens(l1.url, TEST_ATTESTER);
    const r = rng(7);
    const devices = Array.from({ length: 16 }, () => Array.from({ length: 1 + Math.floor(r() * 8) }, () => configs[0].items[Math.floor(r() ** 2 * N_ITEMS)]));
    // each device's upload goes to both leaders at once (one token): exactly one is accepted
    const statuses: number[][] = [];
    for (const [i, recent] of devices.entries()) {
      const both: typeof fetch = async (input, init) => {
        const url = String(input);
        if (!url.endsWith(PRIO3_PATHS.upload)) return fetch(input, init);
        const path = new URL(url).pathname;
        const answers = await Promise.all([l1.url, l2.url].map((base) => fetch(`${base}${path}`, init)));
        statuses.push(answers.map((a) => a.status).sort());
        return answers[i % 2];
      };
      await sendPrio3Report({ leaderUrl: i % 2 ? l2.url : l1.url, helperUrl: i % 2 ? h2.url : h1.url, recent, epoch, tokens, fetch: both });
    }
    expect(statuses).toEqual(devices.map(() => [202, 403]));
    expect((await query<{ n: string }>(leaderDb, 'SELECT count(*) AS n FROM atomem_prio3_uploads'))[0].n).toBe(String(devices.length));

    // both leaders close the epoch at once: one aggregates (with its helper), the other waits for that release
    const [a, b] = await Promise.all([l1.svc.prio3!.close(epoch), l2.svc.prio3!.close(epoch)]);
    expect(a).toBeDefined();
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(a!.reports).toBe(devices.length);
    expect(a!.rejected).toBe(0);
    const truth = configs[0].items.map((_id, j) => devices.filter((d) => prio3Measurement(d, configs[0].items, configs[0].ell)[j] === 1).length);
    configs[0].items.forEach((id, j) => expect(Math.abs((a!.counts[id] ?? 0) - truth[j])).toBeLessThanOrEqual(15));
    // the helpers: each report counted once, collected once
    const agg = await query<{ n: string; collected: boolean }>(helperDb, `SELECT n, collected FROM atomem_prio3_aggregates WHERE epoch = ${epoch}`);
    expect(agg).toEqual([{ n: String(devices.length), collected: true }]);
    expect((await query<{ n: string }>(helperDb, 'SELECT count(*) AS n FROM atomem_prio3_seen'))[0].n).toBe(String(devices.length));
    // one noise draw across helper instances: asked again (a resuming leader), each repeats the stored answer; another count gets none
    const collect = (url: string, reports: number) =>
      fetch(`${url}${PRIO3_PATHS.collect}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${PEER_KEY}` },
        body: JSON.stringify({ epoch, reports }),
      });
    const answers = await Promise.all([h1, h2].map(async (h) => (await collect(h.url, devices.length)).text()));
    expect(answers[1]).toBe(answers[0]);
    expect((await query(helperDb, `SELECT epoch FROM atomem_prio3_collections WHERE epoch = ${epoch}`)).length).toBe(1);
    for (const h of [h1, h2]) expect((await collect(h.url, devices.length + 1)).status).toBe(409);
    // the same release bytes from both leaders; a closed epoch refuses uploads; a later close returns the stored release
    const bodies = await Promise.all([l1.url, l2.url].map(async (u) => (await fetch(`${u}/v2/prio3/releases/${epoch}`)).text()));
    expect(bodies[0]).toBe(bodies[1]);
    expect(JSON.parse(bodies[0]) as Prio3Release).toEqual(a);
    expect(await sendPrio3Report({ leaderUrl: l2.url, helperUrl: h2.url, recent: devices[0], epoch, tokens })).toMatchObject({ status: 403 });
    expect(JSON.stringify(await l2.svc.prio3!.close(epoch))).toBe(bodies[0]);
    expect((await query<{ n: string }>(leaderDb, 'SELECT count(*) AS n FROM atomem_prio3_releases'))[0].n).toBe('1');
    expect((await query<{ n: string }>(leaderDb, 'SELECT count(*) AS n FROM atomem_prio3_uploads'))[0].n).toBe('0');
  });

  it('the database down: uploads and release reads answer 503 with Retry-After (nothing stored, the token not spent); after its restart the same upload is taken', {
    timeout: 120_000,
  }, async (ctx) => {
    if (!cluster) ctx.skip();
    const leaderDb = await cluster!.createDatabase('prio3_leader_c');
    const helperDb = await cluster!.createDatabase('prio3_helper_c');
    const h = await start(helperDb, 'helper', 'http://127.0.0.1:9');
    const l = await start(leaderDb, 'leader', h.url);
    const epoch = Math.floor(Date.now() / EPOCH_MS);
    const tokens = attesterTokens(l.url, TEST_ATTESTER);
    const cfg = (await (await fetch(`${l.url}${PRIO3_PATHS.config}`)).json()) as Prio3Config;
    const token = await tokens.token(epoch);
    const once = { token: async () => token };
    let upload: RequestInit | undefined;
    const capture: typeof fetch = async (input, init) => {
      if (String(input).endsWith(PRIO3_PATHS.upload)) upload = init;
      return fetch(input, init);
    };
    await cluster!.halt();
    try {
      const down = await sendPrio3Report({ leaderUrl: l.url, helperUrl: h.url, recent: [cfg.items[0]], epoch, tokens: once, fetch: capture });
      expect(down.status).toBe(503);
      const res = await fetch(`${l.url}${PRIO3_PATHS.upload}`, upload);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(((await res.json()) as { error: string; message: string }).message).toMatch(/^prio3: .*cannot be reached/);
      expect((await fetch(`${l.url}${PRIO3_PATHS.latest}`)).status).toBe(503);
    } finally {
      cluster!.resume();
    }
    // the same upload (same token) once the database is back: taken, and only once
    expect((await fetch(`${l.url}${PRIO3_PATHS.upload}`, upload)).status).toBe(202);
    expect((await fetch(`${l.url}${PRIO3_PATHS.upload}`, upload)).status).toBe(403);
  });

  it('the helper counts a report once when two helper instances get the same batch at once', { timeout: 120_000 }, async (ctx) => {
    if (!cluster) ctx.skip();
    const leaderDb = await cluster!.createDatabase('prio3_leader_b');
    const helperDb = await cluster!.createDatabase('prio3_helper_b');
    const [h1, h2] = await Promise.all([start(helperDb, 'helper', 'http://127.0.0.1:9'), start(helperDb, 'helper', 'http://127.0.0.1:9')]);
    // the leader's peer is a fan-out: each of its aggregate requests reaches both helper instances at once
    const { createServer } = await import('node:http');
    const fan = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const init = {
        method: req.method,
        headers: { 'content-type': 'application/json', authorization: String(req.headers.authorization) },
        body: Buffer.concat(chunks),
      };
      const targets = req.url === PRIO3_PATHS.aggregate ? [h1.url, h2.url] : [h1.url];
      const answers = await Promise.all(
        targets.map(async (t) => {
          const x = await fetch(`${t}${req.url}`, init);
          return { s: x.status, b: await x.text() };
        }),
      );
      // answer with the instance whose answer carries the preparation messages (the other one's says replayed)
      const prepared = (b: string) => b.match(/prepMessage/g)?.length ?? 0;
      const best = answers.sort((p, q) => prepared(q.b) - prepared(p.b))[0];
      res.writeHead(best.s, { 'content-type': 'application/json' }).end(best.b);
    });
    await new Promise<void>((ok) => fan.listen(0, '127.0.0.1', ok));
    try {
      const fanUrl = `http://127.0.0.1:${(fan.address() as { port: number }).port}`;
      const l = await start(leaderDb, 'leader', fanUrl);
      const epoch = Math.floor(Date.now() / EPOCH_MS);
      const tokens = attesterTokens(l.url, TEST_ATTESTER);
      const cfg = (await (await fetch(`${l.url}${PRIO3_PATHS.config}`)).json()) as Prio3Config;
      for (let i = 0; i < 8; i++)
        expect((await sendPrio3Report({ leaderUrl: l.url, helperUrl: h1.url, recent: [cfg.items[i], cfg.items[i + 1]], epoch, tokens })).status).toBe(202);
      const release = await l.svc.prio3!.close(epoch);
      expect(release?.reports).toBe(8);
      const agg = await query<{ n: string }>(helperDb, `SELECT n FROM atomem_prio3_aggregates WHERE epoch = ${epoch}`);
      expect(agg).toEqual([{ n: '8' }]);
    } finally {
      await new Promise((ok) => fan.close(ok));
    }
  });
});
