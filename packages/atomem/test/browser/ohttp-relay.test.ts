import { afterEach, describe, expect, inject, it } from 'vitest';
import { createAtomem, type Atomem } from '../../src/client/index.js';
import { ReportClient } from '../../src/sync/report-client.js';
import { AttesterTokenProvider } from '../../src/sync/tokens.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { SYNC_CATALOG as catalog } from '../../../../test/fixtures/sync-catalog.js';

// Reports through an Oblivious HTTP relay in Chromium: HPKE (X25519, WebCrypto) and binary HTTP
// in the page and in the real worker, to the relay and the REAL index service of the project's
// global setup (the relay forwards at once, so the index's answer comes back encapsulated).
const url = inject('indexUrl');
const relay = inject('relayUrl');
const open: Atomem[] = [];
const profiles = profileTracker('relay-', `${Date.now()}`);

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await profiles.deleteAll();
});

type Wire = { method: string; path: string }[];
const wire = async (): Promise<Wire> => (await fetch(`${url}/test/wire`, { cache: 'no-store' })).json();
const health = async (): Promise<{ epoch: number }> => (await fetch(`${url}/v2/health`, { cache: 'no-store' })).json();

describe('reports through an Oblivious HTTP relay (Chromium)', () => {
  it('the page: a report encapsulated with WebCrypto X25519 reaches the index through the relay and is accepted', async () => {
    const before = (await wire()).length;
    // why: epochs last SYNC_EPOCH_MS (3 s) here and the token is bound to one. Read at a random
    // moment, the epoch could close (after its 300 ms grace) while a loaded machine is still
    // blinding the token and encapsulating the report: the index then rightly refuses the token
    // (HTTP 403 token_refused). Start at the beginning of a fresh epoch instead.
    const seen = (await health()).epoch;
    let epoch = seen;
    await expect
      .poll(
        async () => {
          epoch = (await health()).epoch;
          return epoch;
        },
        { timeout: 10_000, interval: 50 },
      )
      .toBeGreaterThan(seen);
    const client = new ReportClient({
      url,
      relay,
      tokens: new AttesterTokenProvider({ indexUrl: url, attesterUrl: `${url}/attester` }),
    });
    await client.send(epoch, { cohort: 0, bucket: 1 });
    expect(client.lastReport()?.relayed).toBe('forwarded');
    const log = (await wire()).slice(before);
    expect(log.filter((w) => w.path === '/v2/ohttp')).toHaveLength(1);
  }, 30_000);

  it('the worker with index.relay: its report goes through the relay (POST /v2/ohttp at the index), and counts', async () => {
    const before = (await wire()).length;
    const a = await createAtomem({
      profile: profiles.profile('w'),
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      index: { url, relay, privacy: 'contribute', syncEvery: 1000, attesterUrl: `${url}/attester`, reportDelay: 0 },
    });
    open.push(a);
    await a.track({ item: 'garden-1', action: 'purchase' });
    const { epoch } = await health();
    await a.sync();
    await expect.poll(async () => (await a.status()).sync?.reportedEpoch, { timeout: 15_000 }).toBeGreaterThan(epoch);
    expect((await a.status()).sync?.lastError ?? null).toBeNull();
    const log = (await wire()).slice(before);
    expect(log.filter((w) => w.path === '/v2/ohttp').length).toBeGreaterThan(0);
  }, 40_000);
});
