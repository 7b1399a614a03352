/**
 * Global setup of the browser project: a REAL atomem-index service (SQLite in a temp folder,
 * fastify on a loopback port) that the browser tests' workers talk to over HTTP, cross-origin
 * (the page is on vitest's port), exactly as a shop page would.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { createHashingEmbedder } from '../../packages/atomem/src/embed/hashing.js';
import { createIndexService } from '../../packages/atomem-index/src/service.js';

declare module 'vitest' {
  export interface ProvidedContext {
    indexUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-browser-index-'));
  const embedderIds = [createHashingEmbedder({ dim: 256 }).id];
  const service = createIndexService({ legacyV1: true, dataDir: dir, embedderIds, minCommunitySize: 2, itemNoise: 0, tau: 0.3, logger: false });
  const url = await service.listen({ port: 0, host: '127.0.0.1' });
  project.provide('indexUrl', url);
  return async () => {
    await service.close();
    rmSync(dir, { recursive: true, force: true });
  };
}
