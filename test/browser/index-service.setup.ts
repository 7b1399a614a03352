/**
 * Global setup of the browser project: a REAL atomem-index service (protocol v2, SQLite in a
 * temp folder, fastify on a loopback port, 3-second epochs) that the browser tests' workers talk
 * to over HTTP, cross-origin (the page is on vitest's port), exactly as a shop page would; plus
 * the shop's attester on the same test server (`POST /attester`, one token per request here).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createHashingEmbedder } from '../../packages/atomem/src/embed/hashing.js';
import { ItemVectors } from '../../packages/atomem/src/agent/items.js';
import { createIndexService } from '../../packages/atomem-index/src/service.js';
import { SYNC_CATALOG, SYNC_EPOCH_MS } from '../fixtures/sync-catalog.js';

declare module 'vitest' {
  export interface ProvidedContext {
    indexUrl: string;
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
  // the test's attester (a shop would authenticate its shopper here)
  service.app.post<{ Body: { request: string } }>('/attester', async (req) => ({ response: await service.v2!.issuer().issue(req.body.request) }));
  const url = await service.listen({ port: 0, host: '127.0.0.1' });
  await service.ready;
  project.provide('indexUrl', url);
  return async () => {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  };
}
