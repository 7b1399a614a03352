/**
 * SASRec on the real MovieLens-100K (never in the repository: set ATOMEM_ML100K to the
 * ml-100k folder, or keep it at ../shared/data/ml-100k next to the repository). Skipped,
 * visibly, when absent. A short run on VALIDATION cases: the full configuration's test figure
 * is measured by the benchmark CLI (see packages/atomem/src/shop/sasrec/README.md).
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadMovieLens } from '../src/datasets.js';
import '../src/methods.js';
import { runBenchmark } from '../src/run.js';

const candidates = [process.env.ATOMEM_ML100K, resolve(import.meta.dirname, '../../../../shared/data/ml-100k')];
const dir = candidates.find((d): d is string => !!d && existsSync(resolve(d, 'u.data')));

describe.skipIf(!dir)(`SASRec on ML-100K ${dir ? '' : '(SKIPPED: set ATOMEM_ML100K to the ml-100k folder)'}`, () => {
  it('10 epochs already beat popularity by far on validation cases', async () => {
    const r = await runBenchmark({
      dataset: loadMovieLens(dir!),
      methods: ['pop', 'sasrec'],
      validation: true,
      resamples: 100,
      params: { 'sasrec.epochs': '10' },
    });
    const ndcg = Object.fromEntries(r.results.map((x) => [x.method, x.ndcg10]));
    expect(r.config.cases).toBe(943);
    expect(ndcg.sasrec).toBeGreaterThan(0.74);
    expect(ndcg.sasrec - ndcg.pop).toBeGreaterThan(0.1);
  }, 600_000);
});
