// The device's engine with an index that runs Prio3: two REAL `atomem-index` processes (the
// leader and the helper, on loopback), the shop's reference attester in this process, the
// engine on fake IndexedDB. At `contribute` the engine sends Prio3 uploads (not local-DP
// reports), directly or through a real Oblivious HTTP relay; the ledger charges the release's
// central ε per report; the leader and the helper aggregate, the device reads the release once
// per epoch and ranks with it (the `crowd` signal).
import 'fake-indexeddb/auto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { PRIO3_PATHS, type Prio3Config, type Prio3Upload } from 'atomem/engine';
import { encodeCatalogVectors } from 'atomem/protocol';
import { Attester, createRelay, issueViaIndex, prio3RelayBytes, registerAttester, type Relay } from 'atomem-index';
import { Engine } from '../src/worker/engine.js';
import type { CrowdRelease } from '../src/community/crowd.js';
import { indexServices, TEST_ATTESTER } from '../../../test/fixtures/index-service.js';
import { SYNC_CATALOG as catalog } from '../../../test/fixtures/sync-catalog.js';
import { rng, unit } from '../../../test/fixtures/index-wire.js';

const PEER_KEY = 'peer-key-of-the-engine-prio3-test';
const EPOCH_MS = 4000;
const services = indexServices('atomem-engine-prio3-');
const engines: Engine[] = [];
const servers: (FastifyInstance | Relay)[] = [];

afterEach(async () => {
  for (const e of engines.splice(0)) await e.closeSession();
  for (const s of servers.splice(0)) await s.close();
});

/** The catalog's ids with random vectors (the leader's item list is the catalog's). */
function catalogFile(): string {
  const r = rng(5);
  const file = join(services.tempDir('atomem-engine-prio3-cat-'), 'catalog.bin');
  writeFileSync(
    file,
    encodeCatalogVectors(
      { id: 'engine-prio3@1', dim: 8 },
      catalog.map((c) => ({ id: c.id, title: c.title })),
      catalog.map(() => unit(Array.from({ length: 8 }, () => r() - 0.5))),
    ),
  );
  return file;
}

/** Leader and helper processes, ε = 20 per release (small noise: the test reads the counts), threshold 0 and no minimum share, one report enough. */
async function aggregators(): Promise<{ leader: string; helper: string }> {
  process.env.ATOMEM_PRIO3_PEER_KEY = PEER_KEY;
  const common = ['--port', '0', '--rate-max', '0', '--log-level', 'warn', '--catalog-vectors', catalogFile(), '--epoch-ms', String(EPOCH_MS)];
  const prio3 = ['--prio3-epsilon', '20', '--prio3-threshold', '0', '--prio3-min-share', '0', '--prio3-min-reports', '1'];
  const helper = await services.spawn(['--data', services.tempDir(), ...common, ...prio3, '--prio3-role', 'helper', '--prio3-peer', 'http://127.0.0.1:9'])
    .ready;
  const leader = await services.spawn([
    '--data',
    services.tempDir(),
    ...common,
    ...prio3,
    '--prio3-role',
    'leader',
    '--prio3-peer',
    helper,
    '--prio3-tick-ms',
    '200',
  ]).ready;
  return { leader, helper };
}

/** The shop's reference attester (anonymous visitors allowed here: the test has no accounts), issuing through the leader. */
async function attester(leader: string): Promise<string> {
  const app = Fastify();
  const a = new Attester({
    issue: issueViaIndex(leader, TEST_ATTESTER),
    epoch: () => Math.floor(Date.now() / EPOCH_MS),
    anonymousPerEpoch: 1000,
  });
  registerAttester(app, { path: '/attester', attester: a, accountOf: () => undefined });
  servers.push(app);
  return `${await app.listen({ port: 0, host: '127.0.0.1' })}/attester`;
}

async function device(name: string, index: { url: string; attesterUrl: string; relay?: string }, bought: string[]): Promise<Engine> {
  const e = new Engine();
  engines.push(e);
  await e.init({
    profile: `${name}-${Date.now()}`,
    catalog,
    embedder: 'hashing',
    config: { tau: 0.3, weights: { crowd: 50 } },
    index: { ...index, privacy: 'contribute', reportDelay: 0, syncEvery: 1000, budget: { cap: 100 } },
  });
  for (const item of bought) await e.track({ item, action: 'purchase' });
  return e;
}

const epochNow = () => Math.floor(Date.now() / EPOCH_MS);

describe('engine at contribute, index with Prio3 (leader + helper processes)', () => {
  it('sends Prio3 uploads (not local-DP reports), charges ε per report in the ledger, and ranks with the release', { timeout: 120_000 }, async () => {
    const { leader, helper } = await aggregators();
    const cfg = (await (await fetch(`${leader}${PRIO3_PATHS.config}`)).json()) as Prio3Config;
    expect(cfg.helperUrl).toBe(helper);
    expect(cfg.epsilon).toBe(20);
    const attesterUrl = await attester(leader);
    const a = await device('a', { url: leader, attesterUrl }, ['garden-1', 'garden-2', 'audio-3']);
    const b = await device('b', { url: leader, attesterUrl }, ['audio-5']);
    const start = epochNow();
    for (const e of [a, b]) await e.sync();
    // the token of the next epoch is fetched now; the report goes in that epoch (the engine's rollover sync)
    for (const e of [a, b])
      await expect.poll(async () => (await e.status()).sync?.reportedEpoch ?? -1, { timeout: 20_000, interval: 200 }).toBeGreaterThan(start);
    for (const e of [a, b]) {
      const sent = (await e.lastPayload())!;
      expect(sent.path).toBe(PRIO3_PATHS.upload);
      const body = sent.body as Prio3Upload;
      expect(Object.keys(body).sort()).toEqual(['epoch', 'helperShare', 'leaderShare', 'nonce', 'publicShare', 'token']);
      const budget = await e.privacyBudget();
      // each report charged the release's central ε (20 here), not the local-DP ε (a slow
      // machine may see a second epoch's report already)
      expect(budget.perEpoch).toBe(20);
      expect(budget.reports).toBeGreaterThanOrEqual(1);
      expect(budget.spent).toBe(20 * budget.reports);
    }
    const reported = Math.min((await a.status()).sync!.reportedEpoch!, (await b.status()).sync!.reportedEpoch!);
    // the leader aggregates the epoch with the helper once it ended; the next epoch's sync reads it
    let release: CrowdRelease | undefined;
    await expect
      .poll(
        async () => {
          const res = await fetch(`${leader}${PRIO3_PATHS.latest}`, { cache: 'no-store' });
          release = res.ok ? ((await res.json()) as CrowdRelease) : undefined;
          return release?.epoch;
        },
        { timeout: 30_000, interval: 250 },
      )
      .toBeGreaterThanOrEqual(reported);
    expect(release!.reports).toBeGreaterThanOrEqual(1);
    expect(release!.rejected).toBe(0);
    // b ranks with the release: with `crowd` weighing most, its first card is an item the release counts highest
    await expect
      .poll(
        async () => {
          await b.sync();
          return (await b.status()).sync?.crowdRelease ?? -1;
        },
        { timeout: 15_000, interval: 300 },
      )
      .toBeGreaterThanOrEqual(release!.epoch);
    expect((await b.status()).sync).toMatchObject({ reports: 'prio3', lastError: null });
    const ranked = await b.recommend(undefined, { diversify: false, limit: 5 });
    // the counts of the release b ranks with (a later epoch than the one read above on a slow machine)
    const used = (await b.status()).sync!.crowdRelease!;
    const counts = ((await (await fetch(`${leader}/v2/prio3/releases/${used}`, { cache: 'no-store' })).json()) as CrowdRelease).counts;
    const best = Math.max(...catalog.filter((c) => c.id !== 'audio-5').map((c) => counts[c.id] ?? 0));
    expect(counts[ranked[0].id] ?? 0).toBe(best);
  });

  it('with index.relay the upload goes through a real Oblivious HTTP relay (encapsulated to the leader) and counts', { timeout: 120_000 }, async () => {
    const { leader } = await aggregators();
    const relay = createRelay({ gateway: leader, flushEveryMs: 0, rateLimit: false, maxBodyBytes: prio3RelayBytes(catalog.length), logger: false });
    servers.push(relay);
    const relayUrl = await relay.listen({ port: 0, host: '127.0.0.1' });
    const attesterUrl = await attester(leader);
    const a = await device('relayed', { url: leader, attesterUrl, relay: relayUrl }, ['garden-4']);
    const start = epochNow();
    await a.sync();
    await expect.poll(async () => (await a.status()).sync?.reportedEpoch ?? -1, { timeout: 20_000, interval: 200 }).toBeGreaterThan(start);
    expect((await a.status()).sync?.lastError ?? null).toBeNull();
    const sent = (await a.lastPayload()) as { path: string; relayed?: string } | null;
    expect(sent?.path).toBe(PRIO3_PATHS.upload);
    expect(sent?.relayed).toBe('forwarded');
    const reported = (await a.status()).sync!.reportedEpoch!;
    await expect
      .poll(
        async () => {
          const res = await fetch(`${leader}/v2/prio3/releases/${reported}`, { cache: 'no-store' });
          return res.ok ? ((await res.json()) as CrowdRelease) : undefined;
        },
        { timeout: 30_000, interval: 250 },
      )
      .toMatchObject({ epoch: reported, reports: 1, rejected: 0 });
  });

  it('when @divviup/prio3 cannot be loaded (index.prio3Module): an error event naming the option, nothing charged or pending', {
    timeout: 120_000,
  }, async () => {
    const { leader } = await aggregators();
    const attesterUrl = await attester(leader);
    const e = new Engine();
    engines.push(e);
    const errors: string[] = [];
    e.subscribe((ev) => {
      if (ev.type === 'error') errors.push(String((ev.payload as { message?: string }).message));
    });
    await e.init({
      profile: `nolib-${Date.now()}`,
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      index: {
        url: leader,
        attesterUrl,
        privacy: 'contribute',
        reportDelay: 0,
        syncEvery: 1000,
        budget: { cap: 100 },
        prio3Module: 'file:///nowhere/atomem-prio3.js',
      },
    });
    await e.track({ item: 'audio-1', action: 'purchase' });
    await e.sync();
    await expect.poll(() => errors.find((m) => /index\.prio3Module/.test(m)), { timeout: 20_000, interval: 200 }).toBeDefined();
    const status = (await e.status()).sync!;
    expect(status.pending).toBe(0);
    expect(status.reportedEpoch).toBeNull();
    const budget = await e.privacyBudget();
    expect(budget.spent).toBe(0);
    expect(budget.tokens.length).toBeGreaterThan(0);
    expect(await e.lastPayload()).toBeNull();
  });
});
