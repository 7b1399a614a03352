import { describe, expect, it } from 'vitest';
import { FULL_SOFTMAX_MAX_ITEMS, SAMPLED_NEGATIVES, SHORT_HISTORY, sasrecProfile } from '../src/shop/sasrec/profile.js';
import { trainSasrecBudgeted } from '../src/shop/sasrec/budgeted.js';

const seqs = (users: number, length: number, items: number): Int32Array[] =>
  Array.from({ length: users }, (_, u) => Int32Array.from({ length }, (_, t) => 1 + ((u * 7 + t) % items)));

describe('sasrecProfile', () => {
  it('full-softmax cross-entropy up to the threshold, sampled softmax over 1,024 items above', () => {
    expect(sasrecProfile(1349, seqs(10, 100, 1349)).loss).toBe('ce');
    expect(sasrecProfile(FULL_SOFTMAX_MAX_ITEMS, seqs(10, 100, 50)).loss).toBe('ce');
    expect(sasrecProfile(FULL_SOFTMAX_MAX_ITEMS, seqs(10, 100, 50)).negatives).toBeUndefined();
    const big = sasrecProfile(12_101, seqs(10, 100, 12_101));
    expect(big).toMatchObject({ loss: 'sampled-softmax', negatives: SAMPLED_NEGATIVES });
    expect(sasrecProfile(FULL_SOFTMAX_MAX_ITEMS + 1, seqs(10, 100, 50)).negatives).toBe(SAMPLED_NEGATIVES);
  });

  it("short histories take the original's sparse-data regularisation, long ones keep the defaults", () => {
    // Amazon Beauty: 12,101 items, 8.9 items per user on average
    expect(sasrecProfile(12_101, seqs(100, 9, 12_101))).toEqual({
      loss: 'sampled-softmax',
      negatives: SAMPLED_NEGATIVES,
      dropout: 0.5,
      maxLen: 50,
      lr: 0.001,
    });
    // ML-100K after the 5-core: 1,349 items, ≈ 100 items per user
    expect(sasrecProfile(1349, seqs(100, 100, 1349))).toEqual({ loss: 'ce' });
    expect(sasrecProfile(500, seqs(100, SHORT_HISTORY, 500)).dropout).toBeUndefined();
    expect(sasrecProfile(500, seqs(100, SHORT_HISTORY - 1, 500)).dropout).toBe(0.5);
    // empty sequences are not users; no users: no regularisation change
    expect(sasrecProfile(500, [new Int32Array(0), ...seqs(10, 30, 500)]).dropout).toBeUndefined();
    expect(sasrecProfile(500, [])).toEqual({ loss: 'ce' });
  });

  it('refuses a catalog without items', () => {
    expect(() => sasrecProfile(0, [])).toThrow(/numItems must be a positive integer/);
    expect(() => sasrecProfile(2.5, [])).toThrow(/numItems/);
  });
});

describe('trainSasrecBudgeted with the profile', () => {
  const small = { dim: 8, batchSize: 16, threads: 1, maxEpochs: 1, validationUsers: 0 } as const;

  it('trains with the catalog-scaled settings unless an option sets them, and reports them', async () => {
    const short = seqs(40, 6, 30);
    const r = await trainSasrecBudgeted(short, 30, small);
    expect(r.settings).toEqual({ loss: 'ce', dropout: 0.5, maxLen: 50, lr: 0.001 });
    expect(r.weights.config.maxLen).toBe(50);
    const given = await trainSasrecBudgeted(short, 30, { ...small, loss: 'sampled-softmax', negatives: 8, dropout: 0.1, maxLen: 12 });
    expect(given.settings).toEqual({ loss: 'sampled-softmax', negatives: 8, dropout: 0.1, maxLen: 12, lr: 0.001 });
    expect(given.weights.config.maxLen).toBe(12);
    const long = await trainSasrecBudgeted(seqs(40, 30, 30), 30, small);
    expect(long.settings).toEqual({ loss: 'ce', dropout: 0.2, maxLen: 100, lr: 0.002 });
  }, 60_000);
});
