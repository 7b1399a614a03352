import { afterEach, describe, expect, inject, it } from 'vitest';
import { createAtomem, type Atomem } from '../../src/client/index.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { SYNC_CATALOG as catalog } from '../../../../test/fixtures/sync-catalog.js';

// The real worker in Chromium against a Prio3 leader and helper (the project's global setup:
// two services on loopback, the leader with the reference attester): at `contribute` the worker
// shards its vector with @divviup/prio3, seals the shares with WebCrypto HPKE, uploads them,
// is charged the release's ε, and once the pair has aggregated the epoch reads the release.
const leader = inject('prio3LeaderUrl');
const open: Atomem[] = [];
const profiles = profileTracker('prio3-', `${Date.now()}`);

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await profiles.deleteAll();
});

describe('Prio3 reports from the worker (Chromium)', () => {
  it('contribute sends a Prio3 upload, the ledger charges ε = 20 per report, the release comes back', async () => {
    const a = await createAtomem({
      profile: profiles.profile('w'),
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      index: { url: leader, privacy: 'contribute', syncEvery: 1000, attesterUrl: `${leader}/attester`, reportDelay: 0, budget: { cap: 100 } },
    });
    open.push(a);
    const cfg = await fetch(`${leader}/v2/prio3/config`, { cache: 'no-store' });
    // the leader's configuration names the helper (the device reads the helper's key there)
    expect(((await cfg.json()) as { helperUrl?: string }).helperUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await a.track({ item: 'garden-2', action: 'purchase' });
    const { epoch } = (await (await fetch(`${leader}/v2/health`, { cache: 'no-store' })).json()) as { epoch: number };
    await a.sync();
    await expect.poll(async () => (await a.status()).sync?.reportedEpoch ?? -1, { timeout: 20_000 }).toBeGreaterThan(epoch);
    const status = (await a.status()).sync!;
    expect(status).toMatchObject({ reports: 'prio3', lastError: null });
    expect((await a.lastPayload())?.path).toBe('/v2/prio3/upload');
    const budget = await a.privacyBudget();
    // each report charged the release's ε (a slow machine may see a second epoch's report already)
    expect(budget.perEpoch).toBe(20);
    expect(budget.reports).toBeGreaterThanOrEqual(1);
    expect(budget.spent).toBe(20 * budget.reports);
    const reported = status.reportedEpoch!;
    await expect
      .poll(
        async () => {
          await a.sync();
          return (await a.status()).sync?.crowdRelease ?? -1;
        },
        { timeout: 20_000, interval: 500 },
      )
      .toBeGreaterThanOrEqual(reported);
  }, 60_000);
});
