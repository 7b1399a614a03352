/**
 * Cross-check against EVAL.md's reference figures on the real MovieLens-100K. The data is
 * never in the repository: set ATOMEM_ML100K to the ml-100k folder (or keep it at
 * ../shared/data/ml-100k next to the repository). Skipped, visibly, when absent.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadMovieLens } from '../src/datasets.js';
import '../src/methods.js';
import { runBenchmark } from '../src/run.js';

const candidates = [process.env.ATOMEM_ML100K, resolve(import.meta.dirname, '../../../../shared/data/ml-100k')];
const dir = candidates.find((d): d is string => !!d && existsSync(resolve(d, 'u.data')));

describe.skipIf(!dir)(`bench on ML-100K ${dir ? '' : '(SKIPPED: set ATOMEM_ML100K to the ml-100k folder)'}`, () => {
  it('loads 943 users, 5-core catalog, sequences sorted by (time, item)', () => {
    const d = loadMovieLens(dir!);
    expect(d.sequences.size).toBe(943);
    expect(d.items.size).toBeGreaterThan(1300);
    expect(d.items.size).toBeLessThan(1682);
    let n = 0;
    for (const seq of d.sequences.values()) n += seq.length;
    expect(n).toBeGreaterThan(99_000);
    expect([...d.items.values()].some((i) => i.title.includes('Misérables'))).toBe(true);
  });

  it('pop and itemknn NDCG@10 on all users within ±0.02 of EVAL.md (0.597, 0.653); random ≈ 0.454', async () => {
    const r = await runBenchmark({ dataset: loadMovieLens(dir!), methods: ['random', 'pop', 'itemknn'], resamples: 200 });
    const ndcg = Object.fromEntries(r.results.map((x) => [x.method, x.ndcg10]));
    expect(r.config.cases).toBe(943);
    expect(Math.abs(ndcg.pop - 0.597)).toBeLessThanOrEqual(0.02);
    expect(Math.abs(ndcg.itemknn - 0.653)).toBeLessThanOrEqual(0.02);
    expect(Math.abs(ndcg.random - 0.454)).toBeLessThanOrEqual(0.03);
  });
});
