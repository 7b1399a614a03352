/**
 * SASRec trained with softmax cross-entropy (`loss: 'ce' | 'sampled-softmax'`, the benchmark's
 * SASRec at published strength): the manual backprop of the softmax loss against finite
 * differences, the sampler's softmax items, and a tiny sequential task learned with each loss.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '../src/rng.js';
import { makeLayout } from '../../atomem/src/shop/sasrec/layout.js';
import { encodeHistory, scoreItems, type SasrecConfig } from '../../atomem/src/shop/sasrec/model.js';
import { GradCore, type ChunkData } from '../../atomem/src/shop/sasrec/train-core.js';
import { Sampler, trainSasrec } from '../../atomem/src/shop/sasrec/train.js';
import { gradientCheck, perturbedWeights, randomChunk } from '../../../test/fixtures/sasrec.js';

describe('SASRec softmax cross-entropy backprop', () => {
  const cfg: SasrecConfig = { maxLen: 5, dim: 8, blocks: 1, heads: 2 };
  const n = 9;
  const lay = makeLayout(cfg, n);
  const rng = new Rng('softmax-gradcheck');
  const p = perturbedWeights(lay, 3, rng);
  const base = randomChunk(rng, [3, 5, 1], n);
  const rows = base.rows;
  const cases: Array<[string, ChunkData]> = [
    ['full softmax', { ...base, softmax: Int32Array.from({ length: n }, (_, i) => i + 1) }],
    // sampled: includes some rows' positives (masked for those rows), misses others
    ['sampled softmax', { ...base, softmax: Int32Array.of(2, 5, 7, base.targets[0]) }],
  ];
  for (const [name, data] of cases) {
    it(`${name}: analytic gradient = central finite differences for every tensor (float64, dropout 0.3)`, () => {
      const core = new GradCore(lay, 16, 4, { Arr: Float64Array, kernel: 'js', softmaxItems: n });
      const seed = [5, 6, 7, 8];
      const g = new Float64Array(lay.size);
      const loss = core.lossAndGrad(p, g, data, 1 / rows, 0.3, seed);
      expect(loss).toBeGreaterThan(0);
      const scratch = new Float64Array(lay.size);
      const lossAt = (q: Float64Array) => core.lossAndGrad(q, scratch.fill(0), data, 1 / rows, 0.3, seed);
      for (const [tensor, { worst }] of Object.entries(gradientCheck(lay, p, g, lossAt))) expect(worst, tensor).toBeLessThan(1e-5);
    });
  }

  it('the loss of a row is −log softmax of its positive (checked by hand on one row)', () => {
    const one: ChunkData = {
      seqs: 1,
      lens: Int32Array.of(1),
      rows: 1,
      inputs: Int32Array.of(3),
      targets: Int32Array.of(4),
      negatives: Int32Array.of(1),
      softmax: Int32Array.from({ length: n }, (_, i) => i + 1),
    };
    const core = new GradCore(lay, 16, 4, { Arr: Float64Array, kernel: 'js', softmaxItems: n });
    const loss = core.lossAndGrad(p, new Float64Array(lay.size), one, 1, 0, [1, 2, 3, 4]);
    const z = core.forward(p, one, false);
    const logits = Array.from({ length: n }, (_, i) => {
      let s = 0;
      for (let c = 0; c < cfg.dim; c++) s += z[c] * p[lay.itemEmb + (i + 1) * cfg.dim + c];
      return s;
    });
    const lse = Math.log(logits.reduce((a, x) => a + Math.exp(x), 0));
    expect(loss).toBeCloseTo(lse - logits[3], 10);
  });
});

describe('Sampler softmax items', () => {
  const seqs = [Int32Array.of(1, 2, 3, 4), Int32Array.of(5, 6, 7), Int32Array.of(8, 9, 10, 11, 12)];
  it('full cross-entropy: every item 1..n; sampled: distinct uniform draws; BCE: none', () => {
    const full = new Sampler(seqs, 12, 4, 1, 12).batch(4, 2);
    for (const c of full) expect([...c.softmax!]).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    const sampled = new Sampler(seqs, 12, 4, 1, 5).batch(4, 2);
    for (const c of sampled) {
      expect(c.softmax!.length).toBe(5);
      expect(new Set(c.softmax!).size).toBe(5);
      for (const it of c.softmax!) expect(it >= 1 && it <= 12).toBe(true);
    }
    for (const c of new Sampler(seqs, 12, 4, 1).batch(4, 2)) expect(c.softmax).toBeUndefined();
  });
});

describe('SASRec learns a deterministic next-item rule with each loss', () => {
  // items 1..20; every sequence walks i → i+1 (mod 20): the next item is fully determined
  const n = 20;
  const rng = new Rng('walks');
  const seqs = Array.from({ length: 120 }, () => {
    const start = rng.int(n);
    return Int32Array.from({ length: 8 }, (_, k) => ((start + k) % n) + 1);
  });
  for (const loss of ['ce', 'sampled-softmax'] as const) {
    it(`${loss}: the true next item ranks first for most test walks`, async () => {
      const r = await trainSasrec(seqs, n, {
        maxLen: 8,
        dim: 16,
        blocks: 1,
        heads: 1,
        dropout: 0,
        epochs: 25,
        lr: 0.01,
        batchSize: 32,
        threads: 1,
        chunks: 1,
        loss,
        negatives: 8,
        seed: 7,
      });
      let top1 = 0;
      for (let s = 0; s < n; s++) {
        const hist = Array.from({ length: 5 }, (_, k) => ((s + k) % n) + 1);
        const scores = scoreItems(
          r.weights,
          encodeHistory(r.weights, hist),
          Array.from({ length: n }, (_, i) => i + 1),
        );
        const want = ((s + 5) % n) + 1;
        const best = scores.indexOf(Math.max(...scores)) + 1;
        if (best === want) top1++;
      }
      expect(top1 / n).toBeGreaterThan(0.8);
      expect(r.losses[r.losses.length - 1]).toBeLessThan(r.losses[0]);
    }, 60_000);
  }
});
