import { afterEach, describe, expect, inject, it } from 'vitest';
import { createAtomem, type Atomem } from '../../packages/atomem/src/client/index.js';
import type { PrivacyLevel } from '../../packages/atomem/src/worker/protocol.js';
import { profileTracker } from '../fixtures/idb.js';
import { SYNC_CATALOG as catalog, SYNC_EPOCH_MS } from '../fixtures/sync-catalog.js';

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

async function start(name: string, privacy: PrivacyLevel): Promise<Atomem> {
  const profile = profiles.profile(name);
  const a = await createAtomem({ profile, catalog, embedder: 'hashing', config: { tau: 0.3 }, index: { url, privacy, syncEvery: 1000, attesterUrl: `${url}/attester`, reportDelay: 0 } });
  open.push(a);
  return a;
}

const health = async (): Promise<{ epoch: number; latestRelease: number | null }> => (await fetch(`${url}/v2/health`)).json();

describe('protocol v2 from the worker', () => {
  it('contribute: one report per epoch, then the epoch\'s release is matched locally; off stops everything', async () => {
    const [a, b] = await Promise.all([start('a', 'contribute'), start('b', 'contribute')]);
    for (const x of [a, b]) {
      await x.track({ item: 'garden-1', action: 'purchase' });
      await x.track({ item: 'garden-2', action: 'purchase' });
    }
    const { epoch } = await health();
    await Promise.all([a.sync(), b.sync()]);
    await expect.poll(async () => (await a.status()).sync?.reportedEpoch, { timeout: 10_000 }).toBeGreaterThanOrEqual(epoch);
    await expect.poll(async () => (await b.status()).sync?.reportedEpoch, { timeout: 10_000 }).toBeGreaterThanOrEqual(epoch);

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
    const r = await a.sync();
    expect(r.error).toBeUndefined();
    expect(r.release).toBeGreaterThanOrEqual(epoch);
    expect(r.communities).toBeGreaterThan(0);
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
});
