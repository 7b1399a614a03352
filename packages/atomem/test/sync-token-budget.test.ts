// The lifetime budget against the token prefetch: the engine fetches the next epoch's token an
// epoch ahead, at a moment planned before this epoch's report is charged. When that report fills
// the ledger while the fetch is in flight, the token that arrives must be dropped (and a fetch
// that has not started must not go out): a full ledger means no token and no report. The REAL
// index service in process (protocol v2, 2-second epochs), the shop's reference attester on
// its own fastify server whose issuance the test holds, the engine on fake IndexedDB.
import 'fake-indexeddb/auto';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { Attester, issueInProcess, registerAttester } from 'atomem-index';
import { Engine } from '../src/worker/engine.js';
import { ItemVectors } from '../src/agent/items.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import { indexServices } from '../../../test/fixtures/index-service.js';
import { SYNC_CATALOG as catalog } from '../../../test/fixtures/sync-catalog.js';

const EPOCH_MS = 2000;
const services = indexServices('atomem-token-budget-');
const engines: Engine[] = [];
const servers: FastifyInstance[] = [];

afterEach(async () => {
  for (const e of engines.splice(0)) await e.closeSession();
  for (const s of servers.splice(0)) await s.close();
});

describe('engine at contribute: the lifetime budget against the token fetched an epoch ahead', () => {
  it('a token in flight when the report fills the ledger is dropped; no later fetch goes out', { timeout: 60_000 }, async () => {
    const items = new ItemVectors(createHashingEmbedder({ dim: 256 }), catalog);
    await items.warm();
    const ids = catalog.map((i) => i.id).sort();
    const vectors = (await items.vectorsOf(ids)).map((v) => v.vector);
    const { svc, url } = await services.start({
      logger: false,
      v2: { space: { embedderId: items.embedderId, ids, vectors }, epochMs: EPOCH_MS, graceMs: 200, tickMs: 100, minReports: 1, minContributors: -1e9 },
    });
    // the attester answers the first token request at once and holds every later one until released
    const issue = issueInProcess(() => svc.v2!.issuer());
    const requested: number[] = [];
    let answered = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const attester = new Attester({
      issue: async (req) => {
        requested.push(req.epoch);
        if (requested.length > 1) await held;
        const out = await issue(req);
        answered++;
        return out;
      },
      epoch: () => svc.v2!.epoch(),
      anonymousPerEpoch: 1000,
    });
    const app = Fastify();
    registerAttester(app, { path: '/attester', attester, accountOf: () => undefined });
    servers.push(app);
    const attesterUrl = `${await app.listen({ port: 0, host: '127.0.0.1' })}/attester`;

    const epsilon = ((await (await fetch(`${url}/v2/health`)).json()) as { ldp: { epsilon: number } }).ldp.epsilon;
    const e = new Engine();
    engines.push(e);
    await e.init({
      profile: `token-budget-${Date.now()}`,
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      // room for exactly one report
      index: { url, attesterUrl, privacy: 'contribute', reportDelay: 0, syncEvery: 500, budget: { cap: epsilon * 1.5 } },
    });
    await e.track({ item: 'audio-2', action: 'purchase' });
    await e.sync();
    // epoch e: the token of e + 1; epoch e + 1: its report (which fills the ledger) and, planned at the same moment, the fetch of e + 2
    await expect.poll(async () => (await e.privacyBudget()).reports, { timeout: 20_000, interval: 100 }).toBe(1);
    const inFlight = requested.length - answered;
    release();
    // whatever was in flight has come back and been handled
    await expect.poll(() => answered, { timeout: 10_000, interval: 50 }).toBe(requested.length);
    await new Promise((r) => setTimeout(r, 300));
    expect((await e.privacyBudget()).tokens).toEqual([]);
    // two more epochs: the full ledger plans no fetch and holds no token
    const after = requested.length;
    await new Promise((r) => setTimeout(r, 2 * EPOCH_MS + 200));
    expect(requested.length).toBe(after);
    expect((await e.privacyBudget()).tokens).toEqual([]);
    expect((await e.privacyBudget()).reports).toBe(1);
    // at most the one planned before the charge went out
    expect(inFlight).toBeLessThanOrEqual(1);
  });
});
