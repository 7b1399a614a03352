import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import '../../packages/bench/src/methods.js';
import { runBenchmark } from '../../packages/bench/src/run.js';
import { ItemVectors } from '../../packages/atomem/src/agent/items.js';
import { createHashingEmbedder } from '../../packages/atomem/src/embed/hashing.js';
import { createIndexService, type IndexService } from '../../packages/atomem-index/src/service.js';
import { twoGroupDataset } from '../fixtures/synthetic.js';

// The benchmark's `--index-url` path: every simulated device talks HTTP (its own client and
// secret) to a REAL running index service, and the result matches the in-process index.
describe('benchmark through the wire (atomem.indexUrl)', () => {
  const dataset = twoGroupDataset({ usersPerGroup: 20, itemsPerGroup: 25, len: 16 });
  // content vectors: the service is started for one embedder id before the run (a shop file's space id is only known once trained)
  const params = { 'atomem.itemVectors': 'content', 'atomem.embedder': 'hashing', 'atomem.centre': '0', 'atomem.tau': '0.3', 'atomem.fidelityUsers': '0', 'atomem.minCommunitySize': '2', 'atomem.maxMembers': '200' };
  let service: IndexService;
  let url = '';
  let dir = '';

  beforeAll(async () => {
    process.env.ATOMEM_BENCH_CACHE = mkdtempSync(join(tmpdir(), 'atomem-bench-'));
    dir = mkdtempSync(join(tmpdir(), 'atomem-index-'));
    // the bench's embedder id for this dataset (hashing, not centred), as the service must be started with
    const embedderId = new ItemVectors(createHashingEmbedder({ dim: 256 }), []).embedderId;
    service = createIndexService({ legacyV1: true, dataDir: dir, embedderIds: [embedderId], embedderDims: { [embedderId]: 256 }, minCommunitySize: 2, itemNoise: 0, tau: 0.3, maxMembers: 200, logger: false, rateLimit: false });
    url = await service.listen({ port: 0, host: '127.0.0.1' });
  });

  afterAll(async () => {
    await service?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives the in-process NDCG within noise, and leaves the service empty afterwards', async () => {
    const local = await runBenchmark({ dataset, methods: ['atomem'], privacy: ['embeddings', 'items'], params, seed: 5 });
    const remote = await runBenchmark({ dataset, methods: ['atomem'], privacy: ['embeddings', 'items'], params: { ...params, 'atomem.indexUrl': url }, seed: 5 });
    for (const level of ['embeddings', 'items']) {
      const a = local.results.find((r) => r.privacy === level)!;
      const b = remote.results.find((r) => r.privacy === level)!;
      console.log(`${level}: in-process NDCG@10 ${a.ndcg10.toFixed(4)}, over HTTP ${b.ndcg10.toFixed(4)}`);
      // int8 quantization on the wire moves vectors by < 0.4%; rankings may swap a near-tie.
      // Since v1 links mutual top-k1 (DECISIONS 39) the rounding also flips near-tie candidate
      // lists of this small synthetic set, so communities differ a little: measured 0.7386 vs
      // 0.7697 at `embeddings`; with the in-process vectors rounded like the wire's, both paths
      // gave identical NDCG (0.7697, 0.7212): the service adds nothing else.
      expect(Math.abs(a.ndcg10 - b.ndcg10)).toBeLessThan(0.05);
    }
    const health = await (await fetch(`${url}/v1/health`)).json();
    expect(health.memories).toBe(0); // each run deleted its copies (with its devices' tokens)
  }, 120_000);
});
