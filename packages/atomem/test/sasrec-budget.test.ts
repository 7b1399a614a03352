import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../src/shop/cli.js';
import { sequencesFromColumns, trainSasrecBudgeted, validationSplit } from '../src/shop/sasrec/budgeted.js';
import { deserializeSasrec } from '../src/shop/sasrec/model.js';
import { initWeights, trainSasrec } from '../src/shop/sasrec/train.js';
import { makeLayout } from '../src/shop/sasrec/layout.js';
import { Rng } from '../src/core/rng.js';

/** Users walking a ring of `items` items (item k → k + 1) with some noise: a learnable sequence signal. */
function ringSequences(users: number, items: number, seed = 1): Int32Array[] {
  const rng = new Rng(seed);
  return Array.from({ length: users }, () => {
    const len = 4 + rng.int(12);
    let it = 1 + rng.int(items);
    return Int32Array.from({ length: len }, () => {
      const cur = it;
      it = rng.next() < 0.9 ? (it % items) + 1 : 1 + rng.int(items);
      return cur;
    });
  });
}

const small = { maxLen: 16, dim: 16, batchSize: 32, threads: 1 } as const;

describe('trainSasrecBudgeted', () => {
  it('stops at the time budget', async () => {
    const seqs = ringSequences(400, 60);
    const r = await trainSasrecBudgeted(seqs, 60, { ...small, budgetSeconds: 1.5, maxEpochs: 100_000, patience: 1_000_000, validationUsers: 50 });
    expect(r.stoppedBy).toBe('budget');
    expect(r.seconds).toBeGreaterThanOrEqual(1.5);
    // one step of this model takes milliseconds; the budget is checked after every step
    expect(r.seconds).toBeLessThan(3);
    expect(r.steps).toBeLessThan(100_000 * Math.floor(350 / 32));
  });

  it('stops early when validation stops improving, and returns the best weights', async () => {
    const seqs = ringSequences(400, 60);
    // lr 0: the weights never change, so the second validation pass cannot beat the first
    const r = await trainSasrecBudgeted(seqs, 60, { ...small, lr: 0, budgetSeconds: 600, maxEpochs: 1000, evalEvery: 5, patience: 2, validationUsers: 50 });
    expect(r.stoppedBy).toBe('early-stopping');
    expect(r.validation.map((v) => v.step)).toEqual([5, 10, 15]);
    expect(r.bestStep).toBe(5);
    expect(r.steps).toBe(15);
  });

  it('learns a sequence signal: validation NDCG@10 rises well above chance', async () => {
    const seqs = ringSequences(600, 60);
    const r = await trainSasrecBudgeted(seqs, 60, { ...small, lr: 0.005, budgetSeconds: 60, maxEpochs: 30, evalEvery: 20, patience: 3, validationUsers: 100 });
    const first = r.validation[0].ndcg10;
    const best = Math.max(...r.validation.map((v) => v.ndcg10));
    // 1 positive among 59 others (every other item): chance NDCG@10 ≈ 0.08
    expect(best).toBeGreaterThan(0.5);
    expect(best).toBeGreaterThan(first);
    expect(r.validation.find((v) => v.step === r.bestStep)?.ndcg10).toBe(best);
  }, 60_000);

  it('holds out the last item of sampled users with ≥ 3 items, with negatives they never had', () => {
    const seqs = [Int32Array.of(1, 2), Int32Array.of(3, 4, 5), Int32Array.of(6, 7, 8, 9)];
    const { train, cases } = validationSplit(seqs, 30, 10, 5, 1);
    expect(train.map((s) => [...s])).toEqual([
      [1, 2],
      [3, 4],
      [6, 7, 8],
    ]);
    expect(cases).toHaveLength(2);
    for (const c of cases) {
      expect(c.candidates).toHaveLength(6);
      const own = new Set([...c.history, c.candidates[0]]);
      for (const n of c.candidates.subarray(1)) expect(own.has(n)).toBe(false);
      expect(new Set(c.candidates).size).toBe(6);
    }
  });
});

describe('trainSasrec sparse embeddings', () => {
  it('equals the dense updates bit for bit when every step touches every item (full softmax), on 1 and 2 threads', async () => {
    const seqs = ringSequences(96, 30);
    const dense = await trainSasrec(seqs, 30, { ...small, epochs: 2, loss: 'ce', seed: 5 });
    const sparse = await trainSasrec(seqs, 30, { ...small, epochs: 2, loss: 'ce', seed: 5, sparseEmbeddings: true });
    const sparse2 = await trainSasrec(seqs, 30, { ...small, threads: 2, epochs: 2, loss: 'ce', seed: 5, sparseEmbeddings: true });
    expect(sparse.losses).toEqual(dense.losses);
    expect(Buffer.from(sparse.weights.itemEmb.buffer).equals(Buffer.from(dense.weights.itemEmb.buffer))).toBe(true);
    expect(Buffer.from(sparse2.weights.itemEmb.buffer).equals(Buffer.from(dense.weights.itemEmb.buffer))).toBe(true);
  });

  it('leaves the item rows no step touched at their initial values, and moves the touched ones', async () => {
    const n = 2000;
    // sequences over items 1..20 only; BCE negatives touch a few random rows per step
    const seqs = ringSequences(64, 20);
    const r = await trainSasrec(seqs, n, { ...small, epochs: 2, sparseEmbeddings: true, seed: 3 });
    const init = initWeights(makeLayout(r.weights.config, n), 3);
    const d = r.weights.config.dim;
    let same = 0;
    for (let row = 21; row <= n; row++) {
      let eq = true;
      for (let k = 0; k < d; k++) if (r.weights.itemEmb[row * d + k] !== init[row * d + k]) eq = false;
      if (eq) same++;
    }
    expect(same).toBeGreaterThan(n / 2);
    for (let row = 1; row <= 20; row++) expect(r.weights.itemEmb[row * d]).not.toBe(init[row * d]);
  });
});

describe('sequencesFromColumns', () => {
  it('orders each user by time (log order among ties), keeps positive weights, 1-based items', () => {
    const cols = {
      user: Int32Array.of(0, 1, 0, 0, 1, 0),
      item: Int32Array.of(5, 1, 2, 3, 4, 0),
      at: Float64Array.of(30, 1, 10, 10, 2, 99),
      weight: Float32Array.of(1, 1, 1, 1, 0, 1),
    };
    expect(sequencesFromColumns(cols, 2).map((s) => [...s])).toEqual([[3, 4, 6, 1], [2]]);
    expect(sequencesFromColumns(cols, 2, 50).map((s) => [...s])).toEqual([[3, 4, 6], [2]]);
  });
});

describe('atomem-shop --sasrec', () => {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-sasrec-cli-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('trains the sequence model within the budget and writes it with stats and progress', async () => {
    const items = 40;
    writeFileSync(join(dir, 'items.jsonl'), Array.from({ length: items }, (_, i) => JSON.stringify({ id: `p${i}`, title: `item ${i}` })).join('\n'));
    const seqs = ringSequences(300, items, 7);
    const rows: string[] = [];
    seqs.forEach((s, u) =>
      s.forEach((it, t) => rows.push(JSON.stringify({ user: `u${u}`, item: `p${it - 1}`, at: 1_700_000_000_000 + t * 1000, action: 'view' }))),
    );
    writeFileSync(join(dir, 'log.jsonl'), rows.join('\n'));
    let out = '';
    let err = '';
    const code = await main(
      [
        '--interactions',
        join(dir, 'log.jsonl'),
        '--items',
        join(dir, 'items.jsonl'),
        '--out',
        join(dir, 'shop.bin'),
        '--sasrec',
        join(dir, 'sasrec.bin'),
        '--sasrec-budget',
        '2',
        '--sasrec-epochs',
        '100000',
        '--stats',
        join(dir, 'stats.json'),
      ],
      { stdout: (s) => (out += s), stderr: (s) => (err += s) },
    );
    expect(err).not.toMatch(/Error/);
    expect(code).toBe(0);
    expect(out).toMatch(/SASRec \d+ bytes, \d+ steps/);
    // 40 items, 4–15 per user: the catalog-scaled settings (sasrec/profile.ts)
    expect(out).toMatch(/; ce, dropout 0\.5, L 50, lr 0\.001\)/);
    const w = deserializeSasrec(readFileSync(join(dir, 'sasrec.bin')));
    expect(w.numItems).toBe(items);
    const stats = JSON.parse(readFileSync(join(dir, 'stats.json'), 'utf8'));
    expect(['budget', 'early-stopping']).toContain(stats.sasrec.stoppedBy);
    expect(stats.sasrec.seconds).toBeLessThan(4);
    expect(stats.sasrec.validationUsers).toBeGreaterThan(0);
    expect(stats.sasrec.settings).toEqual({ loss: 'ce', dropout: 0.5, maxLen: 50, lr: 0.001 });
    expect(stats.stages.sasrec).toBeGreaterThan(0);
    expect(err).toMatch(/sasrec step \d+\/\d+ .*validation NDCG@10/);
  }, 60_000);

  it('refuses --sasrec with --epsilon', async () => {
    let err = '';
    const code = await main(
      [
        '--interactions',
        join(dir, 'log.jsonl'),
        '--items',
        join(dir, 'items.jsonl'),
        '--out',
        join(dir, 'x.bin'),
        '--sasrec',
        join(dir, 's.bin'),
        '--epsilon',
        '1',
      ],
      { stdout: () => {}, stderr: (s) => (err += s) },
    );
    expect(code).toBe(2);
    expect(err).toMatch(/--sasrec with --epsilon/);
  });
});
