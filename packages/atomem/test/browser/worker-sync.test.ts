import { afterEach, describe, expect, inject, it } from 'vitest';
import { createAtomem, type Atomem } from '../../src/client/index.js';
import type { PrivacyLevel } from '../../src/worker/protocol.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { SYNC_CATALOG as catalog, SYNC_EPOCH_MS } from '../../../../test/fixtures/sync-catalog.js';

// Protocol v2 from the real worker to the REAL index service (started by the project's global
// setup), cross-origin over HTTP: a Privacy Pass token from the attester, one local-DP report per
// epoch, the epoch's release fetched back and matched on the device.
const url = inject('indexUrl');
const open: Atomem[] = [];
const profiles = profileTracker('sync-', `${Date.now()}`);

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await profiles.deleteAll();
});

async function start(name: string, privacy: PrivacyLevel, budget?: { cap?: number; q?: number }): Promise<Atomem> {
  const profile = profiles.profile(name);
  const a = await createAtomem({
    profile,
    catalog,
    embedder: 'hashing',
    config: { tau: 0.3 },
    index: { url, privacy, syncEvery: 1000, attesterUrl: `${url}/attester`, reportDelay: 0, ...(budget ? { budget } : {}) },
  });
  open.push(a);
  return a;
}

const health = async (): Promise<{ epoch: number; latestRelease: number | null; ldp: { epsilon: number } }> =>
  (await fetch(`${url}/v2/health`, { cache: 'no-store' })).json();
type Wire = { method: string; path: string; port: number; ifNoneMatch: string | null; cookie: boolean }[];
const wire = async (): Promise<Wire> => (await fetch(`${url}/test/wire`, { cache: 'no-store' })).json();

describe('protocol v2 from the worker', () => {
  it("contribute: the token is fetched an epoch ahead, one report per epoch, then the epoch's release is matched locally; off stops everything", async () => {
    const [a, b] = await Promise.all([start('a', 'contribute'), start('b', 'contribute')]);
    for (const x of [a, b]) {
      await x.track({ item: 'garden-1', action: 'purchase' });
      await x.track({ item: 'garden-2', action: 'purchase' });
    }
    const { epoch } = await health();
    await Promise.all([a.sync(), b.sync()]);
    // the first epoch only fetches the next epoch's token; the report goes in the next epoch
    await expect.poll(async () => (await a.status()).sync?.reportedEpoch, { timeout: 15_000 }).toBeGreaterThan(epoch);
    await expect.poll(async () => (await b.status()).sync?.reportedEpoch, { timeout: 15_000 }).toBeGreaterThan(epoch);

    // on the wire: epoch, a Privacy Pass token, a randomized (cohort, bucket); no text, no item, no profile
    const payload = await a.lastPayload();
    expect(payload?.path).toBe('/v2/reports');
    const body = payload!.body as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['epoch', 'report', 'token', 'v']);
    expect(Object.keys(body.report as object).sort()).toEqual(['bucket', 'cohort']);
    const text = JSON.stringify(body);
    expect(text).not.toMatch(/garden|sync-a|Garden/);
    const sentAt = payload!.at;

    // a second sync in the same epoch sends nothing more
    await a.sync();
    if ((await health()).epoch === (body.epoch as number)) expect((await a.lastPayload())?.at).toBe(sentAt);

    // the epoch closes; the service publishes its release; a sync downloads and matches it
    await expect.poll(async () => (await health()).latestRelease, { timeout: 4 * SYNC_EPOCH_MS, interval: 250 }).toBeGreaterThanOrEqual(epoch);
    // (a device that fetched before the release was published fetches again at most once per 1/24 epoch)
    await expect.poll(async () => (await a.sync()).release ?? -1, { timeout: 4 * SYNC_EPOCH_MS, interval: 250 }).toBeGreaterThanOrEqual(epoch);
    const r = await a.sync();
    expect(r.error).toBeUndefined();
    expect(r.release).toBeGreaterThanOrEqual(epoch);
    await expect.poll(async () => (await a.sync()).communities, { timeout: 4 * SYNC_EPOCH_MS, interval: 250 }).toBeGreaterThan(0);
    expect((await a.memories()).some((m) => m.links.length > 0)).toBe(true);

    const off = await a.setPrivacy('off');
    expect(off).toMatchObject({ privacy: 'off', pending: 0, communities: 0, release: null });
    expect((await a.memories()).every((m) => m.links.length === 0)).toBe(true);
  }, 30_000);

  it('receive downloads the release and sends nothing', async () => {
    await expect.poll(async () => (await health()).latestRelease, { timeout: 4 * SYNC_EPOCH_MS, interval: 250 }).not.toBeNull();
    const a = await start('receive', 'receive');
    await a.track({ item: 'audio-1', action: 'purchase' });
    await a.track({ item: 'audio-5', action: 'purchase' });
    const r = await a.sync();
    expect(r).toMatchObject({ privacy: 'receive', sent: 0, pending: 0 });
    expect(r.release).not.toBeNull();
    expect(await a.lastPayload()).toBeNull();
    await expect(a.setPrivacy('contribute')).resolves.toMatchObject({ privacy: 'contribute' });
  }, 30_000);

  it("on the wire: no cookie, no planted ETag or date sent back (cache no-store), the release at most once per epoch, the report never on the attester's connection", async () => {
    const before = (await wire()).length;
    const a = await start('wire', 'contribute');
    await a.track({ item: 'garden-3', action: 'purchase' });
    const first = (await health()).epoch;
    await a.sync();
    // many syncs in one epoch (as many actions would trigger): no second release fetch
    for (let i = 0; i < 5; i++) await a.sync();
    await expect.poll(async () => (await a.status()).sync?.reportedEpoch, { timeout: 15_000 }).toBeGreaterThan(first);
    await expect.poll(async () => (await a.privacyBudget()).tokens.length, { timeout: 15_000 }).toBeGreaterThan(0);
    const log = (await wire()).slice(before);
    const mine = log.filter((w) => w.path.startsWith('/v2/') || w.path === '/attester');
    // the test service answers the release and health with an ETag, a Last-Modified and must-revalidate
    expect(mine.filter((w) => w.path.startsWith('/v2/releases')).length).toBeGreaterThan(1);
    expect(mine.filter((w) => w.ifNoneMatch !== null)).toEqual([]);
    expect(mine.filter((w) => w.cookie)).toEqual([]);
    // other profiles of this file share the service: count this device's epochs by the sequence of its requests
    const releases = mine.filter((w) => w.path.startsWith('/v2/releases'));
    const epochsSeen = (await health()).epoch - first + 1;
    expect(releases.length).toBeLessThanOrEqual(epochsSeen + 1);
    // every attester answer closes its connection: no later request rides on an attester's socket
    const attesterPorts = new Set(mine.filter((w) => w.path === '/attester').map((w) => w.port));
    const reports = mine.filter((w) => w.path === '/v2/reports');
    expect(reports.length).toBeGreaterThan(0);
    for (const r of reports) expect(attesterPorts.has(r.port)).toBe(false);
  }, 40_000);

  it('the lifetime budget: a full ledger stops tokens and reports; erase() keeps it, resetPrivacyBudget() clears it', async () => {
    const { ldp } = await health();
    // room for exactly one report
    const a = await start('budget', 'contribute', { cap: ldp.epsilon * 1.5 });
    await a.track({ item: 'audio-2', action: 'purchase' });
    const first = (await health()).epoch;
    await a.sync();
    await expect.poll(async () => (await a.privacyBudget()).reports, { timeout: 15_000 }).toBe(1);
    const b1 = await a.privacyBudget();
    expect(b1.spent).toBeCloseTo(ldp.epsilon, 9);
    expect(b1.perEpoch).toBeCloseTo(ldp.epsilon, 9);
    expect(b1).toMatchObject({ cap: ldp.epsilon * 1.5, windowDays: 365, q: 1 });
    const sentAt = (await a.lastPayload())!.at;
    await a.erase();
    // the memory is gone, the spent budget is not: no new token, no new report, over two more epochs
    expect(await a.memories()).toEqual([]);
    const b2 = await a.privacyBudget();
    expect(b2.spent).toBeCloseTo(ldp.epsilon, 9);
    expect(b2.tokens).toEqual([]);
    await a.track({ item: 'audio-3', action: 'purchase' });
    await a.sync();
    await new Promise((r) => setTimeout(r, 2 * SYNC_EPOCH_MS + 500));
    await a.sync();
    expect((await a.lastPayload())?.at ?? 0).toBeLessThanOrEqual(sentAt);
    expect((await a.privacyBudget()).tokens).toEqual([]);
    expect((await health()).epoch).toBeGreaterThan(first + 1);
    // the shopper resets it explicitly: tokens are fetched again
    await a.resetPrivacyBudget();
    expect((await a.privacyBudget()).spent).toBe(0);
    await a.setPrivacy('contribute');
    await expect.poll(async () => (await a.privacyBudget()).tokens.length, { timeout: 10_000 }).toBeGreaterThan(0);
  }, 40_000);

  it('subsampling: at q = 0.01 the epoch is charged ln(1 + q(e^ε − 1)) and a report goes out either way (a dummy when the lottery says no)', async () => {
    const { ldp } = await health();
    const a = await start('subsample', 'contribute', { q: 0.01 });
    await a.track({ item: 'garden-5', action: 'purchase' });
    await a.sync();
    await expect.poll(async () => (await a.privacyBudget()).spent, { timeout: 15_000 }).toBeGreaterThan(0);
    const b = await a.privacyBudget();
    const charge = Math.log1p(0.01 * Math.expm1(ldp.epsilon));
    expect(b.spent).toBeCloseTo(charge, 9);
    expect(b.perEpoch).toBeCloseTo(charge, 9);
    expect(b.q).toBe(0.01);
    // the index got a report of the same shape whatever the lottery said
    await expect.poll(async () => (await a.lastPayload())?.path ?? null, { timeout: 5_000 }).toBe('/v2/reports');
    const body = (await a.lastPayload())!.body as { report: object };
    expect(Object.keys(body.report).sort()).toEqual(['bucket', 'cohort']);
  }, 30_000);
});
