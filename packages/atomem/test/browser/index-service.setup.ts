/**
 * Global setup of the browser project: a REAL atomem-index service (protocol v2, SQLite in a
 * temp folder, fastify on a loopback port, 3-second epochs) that the browser tests' workers talk
 * to over HTTP, cross-origin (the page is on vitest's port), exactly as a shop page would; plus
 * the shop's attester on the same test server (`POST /attester`, one token per request here);
 * plus an Oblivious HTTP relay (`atomem-relay`'s `createRelay`, forwarding at once) in front of
 * the service's gateway; plus a Prio3 leader and helper (two more services in process, the
 * leader with the same reference attester), for the worker's Prio3 reports.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createHashingEmbedder } from '../../src/embed/hashing.js';
import { ItemVectors } from '../../src/agent/items.js';
import { Attester, createIndexService, createRelay, issueInProcess, registerAttester } from 'atomem-index';
import { SYNC_CATALOG, SYNC_EPOCH_MS } from '../../../../test/fixtures/sync-catalog.js';

declare module 'vitest' {
  export interface ProvidedContext {
    indexUrl: string;
    relayUrl: string;
    prio3LeaderUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-browser-index-'));
  const items = new ItemVectors(createHashingEmbedder({ dim: 256 }), SYNC_CATALOG);
  await items.warm();
  const ids = SYNC_CATALOG.map((i) => i.id).sort();
  const vectors = (await items.vectorsOf(ids)).map((v) => v.vector);
  const service = createIndexService({
    dataDir: dir,
    logger: false,
    // why: the test page is served by vitest from another origin
    corsOrigins: '*',
    v2: { space: { embedderId: items.embedderId, ids, vectors }, epochMs: SYNC_EPOCH_MS, graceMs: 300, tickMs: 100, minReports: 1, minContributors: -1e9 },
  });
  // the reference attester; the test page has no account (cross-origin, no cookie), so the test
  // opens an anonymous pool (a shop would key it on its sign-in)
  const attester = new Attester({ issue: issueInProcess(() => service.v2!.issuer()), epoch: () => service.v2!.epoch(), anonymousPerEpoch: 10_000 });
  registerAttester(service.app, { path: '/attester', attester, accountOf: () => undefined });
  // the test's view of the wire: every request with the client port of its connection
  const wire: { method: string; path: string; port: number; ifNoneMatch: string | null; cookie: boolean }[] = [];
  service.app.addHook('onRequest', async (req) => {
    if (!req.url.startsWith('/test/'))
      wire.push({
        method: req.method,
        path: req.url.split('?')[0],
        port: req.socket.remotePort ?? -1,
        ifNoneMatch: (req.headers['if-none-match'] as string | undefined) ?? null,
        cookie: req.headers.cookie !== undefined,
      });
  });
  service.app.get('/test/wire', async () => wire);
  // a planted ETag: the release answers with one; a browser cache would send it back
  service.app.addHook('onSend', async (req, reply, payload) => {
    if (req.url.startsWith('/v2/releases') || req.url.startsWith('/v2/health'))
      reply
        .header('etag', '"planted-tracker-42"')
        .header('last-modified', 'Wed, 01 Jan 2025 00:00:00 GMT')
        .header('cache-control', 'private, max-age=0, must-revalidate');
    return payload;
  });
  const url = await service.listen({ port: 0, host: '127.0.0.1' });
  await service.ready;
  project.provide('indexUrl', url);
  const relay = createRelay({ gateway: url, flushEveryMs: 0, rateLimit: false, corsOrigins: '*' });
  project.provide('relayUrl', await relay.listen({ port: 0, host: '127.0.0.1' }));
  // Prio3: ε = 20 per release and no threshold (the test reads the counts), one report enough
  const prio3Dirs = [mkdtempSync(join(tmpdir(), 'atomem-browser-helper-')), mkdtempSync(join(tmpdir(), 'atomem-browser-leader-'))];
  const peerKey = 'peer-key-of-the-browser-prio3-pair';
  const pair = (dataDir: string, prio3: { role: 'leader' | 'helper'; peerUrl: string }) =>
    createIndexService({
      dataDir,
      logger: false,
      corsOrigins: '*',
      v2: { space: { embedderId: items.embedderId, ids, vectors }, epochMs: SYNC_EPOCH_MS, graceMs: 300, tickMs: 100, minReports: 1, minContributors: -1e9 },
      prio3: { ...prio3, peerKey, epsilon: 20, threshold: 0, minReports: 1, graceMs: 300, tickMs: 100 },
    });
  const helper = pair(prio3Dirs[0], { role: 'helper', peerUrl: 'http://127.0.0.1:9' });
  const helperUrl = await helper.listen({ port: 0, host: '127.0.0.1' });
  await helper.ready;
  const leader = pair(prio3Dirs[1], { role: 'leader', peerUrl: helperUrl });
  const leaderAttester = new Attester({ issue: issueInProcess(() => leader.v2!.issuer()), epoch: () => leader.v2!.epoch(), anonymousPerEpoch: 10_000 });
  registerAttester(leader.app, { path: '/attester', attester: leaderAttester, accountOf: () => undefined });
  project.provide('prio3LeaderUrl', await leader.listen({ port: 0, host: '127.0.0.1' }));
  await leader.ready;
  return async () => {
    await relay.close();
    await service.close();
    await leader.close();
    await helper.close();
    for (const d of [dir, ...prio3Dirs]) rmSync(d, { recursive: true, force: true });
  };
}
