// Protocol v2 of the index service over real HTTP: Privacy Pass issuance for the attester,
// token-gated reports (spent tokens refused, one answer for every refusal), per-epoch
// aggregation into an immutable release, storage without per-report rows, secure deletion,
// the device client on the wire (no cookies, no custom header), and the property that no
// response ever carries another shopper's report.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { INDEX_V2_PATHS, type Release, type ReportRequest, type TokenKeyResponse } from 'atomem/protocol';
import { blindTokenRequest, type TokenProvider } from 'atomem/engine';
import { ReportClient } from 'atomem/engine';
import { makeReport, DEFAULT_LDP } from 'atomem/engine';
import type { ItemSpace } from 'atomem/engine';
import { mulberry32 as rng } from '@atomem/bench/rng';
import { attesterTokens } from '../../../test/fixtures/index-wire.js';
import { indexServices } from '../../../test/fixtures/index-service.js';

const ATTESTER = 'attester-secret-for-tests-0001';
const EPOCH_MS = 1_000_000;

const services = indexServices('atomem-v2-');

/** 120 items in 6 clusters of a 12-d space. */
function space(): ItemSpace {
  const r = rng(1);
  const ids: string[] = [];
  const vectors: Float32Array[] = [];
  for (let i = 0; i < 120; i++) {
    const v = new Float32Array(12);
    v[i % 6] = 3;
    for (let d = 0; d < 12; d++) v[d] += r() - 0.5;
    const n = Math.hypot(...v);
    ids.push(`item-${i}`);
    vectors.push(v.map((x) => x / n));
  }
  return { embedderId: 'test-space@1', ids, vectors };
}

async function start(extra: { minReports?: number; attesterKey?: string | null } = {}) {
  const clock = { now: 5 * EPOCH_MS + 1000 };
  const { svc, url, dataDir } = await services.start({
    rateLimit: false,
    v2: {
      space: space(),
      epochMs: EPOCH_MS,
      now: () => clock.now,
      tickMs: 0,
      minReports: extra.minReports ?? 5,
      minContributors: 0,
      ...(extra.attesterKey === null ? {} : { attesterKey: extra.attesterKey ?? ATTESTER }),
    },
  });
  return { svc, url, clock, dataDir };
}

function attester(url: string): TokenProvider {
  return attesterTokens(url, ATTESTER);
}

async function post(url: string, body: unknown) {
  const res = await fetch(`${url}${INDEX_V2_PATHS.report}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

describe('index service v2', () => {
  it("health names a release published straight through the store (a seeding script), not only the epoch job's", async () => {
    const { svc, url } = await start();
    const before = (await (await fetch(`${url}/v2/health`)).json()) as { latestRelease: number | null };
    expect(before.latestRelease).toBeNull();
    svc.v2!.store.publish(3, JSON.stringify({ v: 2, epoch: 3 }));
    const after = (await (await fetch(`${url}/v2/health`)).json()) as { latestRelease: number | null };
    expect(after.latestRelease).toBe(3);
    // `latest` must be revalidated (it changes with every epoch); an epoch's own release is immutable
    expect((await fetch(`${url}${INDEX_V2_PATHS.latest}`)).headers.get('cache-control')).toBe('public, no-cache');
    expect((await fetch(`${url}/v2/releases/3`)).headers.get('cache-control')).toMatch(/immutable/);
  });

  it('reports in, one immutable aggregate release per epoch out', async () => {
    const { svc, url, clock } = await start();
    const tokens = attester(url);
    const client = new ReportClient({ url, tokens });
    const epoch = svc.v2!.epoch();
    const r = rng(2);
    for (let d = 0; d < 12; d++) await client.send(epoch, makeReport([`item-${d % 3}`, `item-${6 + (d % 4)}`], DEFAULT_LDP, {}, r));
    expect(await client.latestRelease()).toBeUndefined();
    const health = (await client.health()) as { epoch: number; ldp: { epsilon: number }; graceMs: number };
    expect(health.epoch).toBe(epoch);
    expect(health.ldp.epsilon).toBeLessThanOrEqual(4);
    // v1 is not served
    expect((await fetch(`${url}/v1/health`)).status).toBe(404);
    // the epoch closes after its grace period; the job aggregates it and deletes its reports
    clock.now = (epoch + 1) * EPOCH_MS + health.graceMs;
    await svc.v2!.tick();
    expect(svc.v2!.store.openEpochs()).toEqual([]);
    const latest = await fetch(`${url}${INDEX_V2_PATHS.latest}`);
    expect(latest.headers.get('cache-control')).toMatch(/public/);
    const release = (await latest.json()) as Release;
    expect(release.epoch).toBe(epoch);
    expect(release.reports).toBe(12);
    const fixed = await fetch(`${url}${INDEX_V2_PATHS.release(epoch)}`);
    expect(fixed.headers.get('cache-control')).toMatch(/immutable/);
    expect(await fixed.text()).toBe(JSON.stringify(release));
    // only aggregates: no token, no report, no per-record field anywhere
    const text = JSON.stringify(release);
    expect(text).not.toMatch(/"token"|"cohort"|"bucket"|"nonce"/);
  });

  it('a replayed report, a forged token and a token of another epoch get the same refusal; the socket is closed after each report', async () => {
    const { svc, url } = await start();
    const epoch = svc.v2!.epoch();
    const token = await attester(url).token(epoch);
    const body: ReportRequest = { v: 2, epoch, token, report: { cohort: 3, bucket: 4 } };
    const first = await post(url, body);
    expect(first.status).toBe(202);
    expect(first.headers.get('connection')).toBe('close');
    expect(first.headers.get('cache-control')).toBe('no-store');
    const replay = await post(url, body);
    const forged = await post(url, { ...body, token: `${token.slice(0, -6)}AAAAAA` });
    const other = await post(url, { ...body, token: await attester(url).token(epoch), epoch: epoch - 1 });
    const future = await post(url, { ...body, epoch: epoch + 1 });
    for (const r of [replay, forged, other, future]) {
      expect(r.status).toBe(403);
      expect(r.text).toBe(replay.text);
    }
    expect(svc.v2!.store.reportCount(epoch)).toBe(1);
    // out-of-range reports are refused before the token is spent
    const bad = await post(url, { ...body, token: await attester(url).token(epoch), report: { cohort: DEFAULT_LDP.cohorts, bucket: 0 } });
    expect(bad.status).toBe(400);
    // no deletion endpoint: nothing answers differently for known and unknown handles
    expect((await fetch(`${url}/v2/reports/delete`, { method: 'POST' })).status).toBe(404);
  });

  it('issuance is for the attester only', async () => {
    const { svc, url } = await start();
    const key = (await (await fetch(`${url}${INDEX_V2_PATHS.tokenKey}`)).json()) as TokenKeyResponse;
    const blind = await blindTokenRequest(key, svc.v2!.epoch());
    const ask = (auth?: string) =>
      fetch(`${url}${INDEX_V2_PATHS.issue}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
        body: JSON.stringify({ v: 2, epoch: svc.v2!.epoch(), request: blind.request }),
      });
    expect((await ask()).status).toBe(401);
    expect((await ask('Bearer wrong-key-wrong-key-wrong')).status).toBe(401);
    expect((await ask(`Bearer ${ATTESTER}`)).status).toBe(200);
    const { url: url2 } = await start({ attesterKey: null });
    expect(
      (
        await fetch(`${url2}${INDEX_V2_PATHS.issue}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${ATTESTER}` },
          body: JSON.stringify({ v: 2, epoch: 1, request: blind.request }),
        })
      ).status,
    ).toBe(404);
  });

  it('storage: no row per report, no time, no order; reports and tombstones securely deleted after the release', async () => {
    const { svc, url, clock, dataDir } = await start();
    const epoch = svc.v2!.epoch();
    const tokens = attester(url);
    const nonces: string[] = [];
    for (let i = 0; i < 8; i++) {
      const t = await tokens.token(epoch);
      nonces.push(Buffer.from(t.replace(/-/g, '+').replace(/_/g, '/'), 'base64').subarray(2, 34).toString('hex'));
      expect((await post(url, { v: 2, epoch, token: t, report: { cohort: 7, bucket: i % 3 } })).status).toBe(202);
    }
    // while open: the histogram holds counts per (cohort, bucket), never a report
    expect(
      svc
        .v2!.store.cells(epoch)
        .map((c) => c.n)
        .sort(),
    ).toEqual([2, 3, 3]);
    clock.now = (epoch + 2) * EPOCH_MS;
    await svc.v2!.tick();
    await svc.close();
    const db = new Database(join(dataDir, 'reports.sqlite'), { readonly: true });
    try {
      const columns = (db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all() as { name: string; sql: string }[])
        .map((t) => `${t.name}: ${t.sql}`)
        .join('\n');
      expect(columns).not.toMatch(/time|seq|created|rowid INTEGER|autoincrement/i);
      expect((db.prepare('SELECT COUNT(*) AS n FROM cells').get() as { n: number }).n).toBe(0);
      expect((db.prepare('SELECT COUNT(*) AS n FROM spent').get() as { n: number }).n).toBe(0);
    } finally {
      db.close();
    }
    // secure_delete + WAL checkpoint: no spent nonce is left anywhere in the files
    for (const f of readdirSync(dataDir).filter((f) => f.startsWith('reports.sqlite'))) {
      const bytes = readFileSync(join(dataDir, f));
      for (const n of nonces) expect(bytes.includes(Buffer.from(n, 'hex'))).toBe(false);
    }
  });

  it('the device client sends no cookies and no custom header', async () => {
    const calls: { url: string; init: RequestInit }[] = [];
    const fake: typeof fetch = async (u, init) => {
      calls.push({ url: String(u), init: init ?? {} });
      return new Response(JSON.stringify({ accepted: true }), { status: 202 });
    };
    const client = new ReportClient({ url: 'https://index.example', tokens: { token: async () => 'T'.repeat(40) }, fetch: fake });
    await client.send(3, { cohort: 1, bucket: 2 });
    await client.latestRelease().catch(() => undefined);
    expect(calls).toHaveLength(2);
    for (const c of calls) {
      expect(c.init.credentials).toBe('omit');
      expect(Object.keys((c.init.headers as Record<string, string>) ?? {}).filter((h) => h !== 'content-type')).toEqual([]);
    }
    expect(calls[0].init.cache).toBe('no-store');
    expect(JSON.parse(String(calls[0].init.body))).toEqual({ v: 2, epoch: 3, token: 'T'.repeat(40), report: { cohort: 1, bucket: 2 } });
  });

  it("property: no response carries another shopper's report, and the release does not depend on arrival order", async () => {
    const { svc, url, clock } = await start({ minReports: 1 });
    const tokens = attester(url);
    let epochBase = svc.v2!.epoch();
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ cohort: fc.integer({ min: 0, max: DEFAULT_LDP.cohorts - 1 }), bucket: fc.integer({ min: 0, max: DEFAULT_LDP.g - 1 }) }), {
          minLength: 1,
          maxLength: 6,
        }),
        fc.array(fc.constantFrom('health', 'latest', 'release', 'tokenKey', 'bogus'), { maxLength: 4 }),
        async (reports, queries) => {
          const epoch = ++epochBase;
          clock.now = epoch * EPOCH_MS + 10;
          const sent: string[] = [];
          const bodies: string[] = [];
          for (const rep of reports) {
            const t = await tokens.token(epoch);
            sent.push(t);
            const r = await post(url, { v: 2, epoch, token: t, report: rep });
            bodies.push(r.text);
          }
          clock.now = (epoch + 1) * EPOCH_MS + EPOCH_MS / 10;
          await svc.v2!.tick();
          for (const q of queries) {
            const path =
              q === 'health'
                ? INDEX_V2_PATHS.health
                : q === 'latest'
                  ? INDEX_V2_PATHS.latest
                  : q === 'release'
                    ? INDEX_V2_PATHS.release(epoch)
                    : q === 'tokenKey'
                      ? INDEX_V2_PATHS.tokenKey
                      : '/v2/reports/0';
            bodies.push(await (await fetch(`${url}${path}`)).text());
          }
          const release = await (await fetch(`${url}${INDEX_V2_PATHS.release(epoch)}`)).text();
          bodies.push(release);
          for (const b of bodies) {
            for (const t of sent) expect(b.includes(t)).toBe(false);
            expect(b).not.toMatch(/"cohort"|"bucket"/);
          }
          // the same reports in reverse order give byte-identical aggregates
          const again = JSON.parse(release) as Release;
          const { buildRelease, ReportHistogram } = await import('atomem/engine');
          const hist = new ReportHistogram(svc.v2!.ldp);
          for (const rep of [...reports].reverse()) hist.add(rep);
          const rebuilt = buildRelease({
            epoch,
            epochMs: EPOCH_MS,
            space: space(),
            communities: svc.v2!.communities(),
            hist,
            ldp: svc.v2!.ldp,
            minContributors: 0,
          });
          expect(JSON.stringify(rebuilt)).toBe(JSON.stringify(again));
        },
      ),
      { numRuns: 12, seed: 13 },
    );
  }, 120_000);
});
