/**
 * SASRec training (src/shop/sasrec/train*.ts): the manual backprop against finite
 * differences for every parameter tensor, the WASM SIMD product against the JS one, the
 * training forward pass against `encodeHistory`, a synthetic sequential task, determinism.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '@atomem/bench/rng';
import { makeLayout, weightsView } from '../src/shop/sasrec/layout.js';
import { encodeHistory, scoreItems, type SasrecConfig } from '../src/shop/sasrec/model.js';
import { mmNT, transpose } from '../src/shop/sasrec/kernels.js';
import { simdKernels, simdMmNT, simdSupported } from '../src/shop/sasrec/simd.js';
import { GradCore } from '../src/shop/sasrec/train-core.js';
import { adam, adamSum, initWeights, Sampler, trainSasrec } from '../src/shop/sasrec/train.js';
import { gradientCheck, perturbedWeights, randomChunk } from '../../../test/fixtures/sasrec.js';

describe('SASRec backprop', () => {
  const cfg: SasrecConfig = { maxLen: 5, dim: 8, blocks: 2, heads: 2 };
  const n = 7;
  const lay = makeLayout(cfg, n);
  const rng = new Rng('gradcheck');
  const p = perturbedWeights(lay, 1, rng);
  const data = randomChunk(rng, [3, 5, 1, 2], n);

  for (const dropout of [0, 0.3]) {
    it(`matches central finite differences for every parameter tensor (float64, dropout ${dropout})`, () => {
      const core = new GradCore(lay, 16, 4, { Arr: Float64Array, kernel: 'js' });
      const seed = [11, 22, 33, 44];
      const g = new Float64Array(lay.size);
      core.lossAndGrad(p, g, data, 1 / data.rows, dropout, seed);
      const scratch = new Float64Array(lay.size);
      const lossAt = (q: Float64Array) => core.lossAndGrad(q, scratch.fill(0), data, 1 / data.rows, dropout, seed);
      const report = gradientCheck(lay, p, g, lossAt);
      for (const [name, { worst, largest }] of Object.entries(report)) {
        expect(worst, name).toBeLessThan(1e-5);
        // every tensor but the key bias (softmax is invariant to it) must get a real gradient
        if (!name.endsWith('.bk')) expect(largest, `${name} has no gradient`).toBeGreaterThan(1e-4);
      }
    });
  }

  it('padding row 0 of the item embedding gets no gradient', () => {
    const core = new GradCore(lay, 16, 4, { Arr: Float64Array, kernel: 'js' });
    const g = new Float64Array(lay.size);
    core.lossAndGrad(p, g, data, 1, 0.2, [1, 2, 3, 4]);
    expect([...g.subarray(lay.itemEmb, lay.itemEmb + cfg.dim)].every((v) => v === 0)).toBe(true);
  });
});

describe.skipIf(!simdSupported())('WASM SIMD product', () => {
  it('equals the JS kernel on ragged shapes, with and without accumulation', () => {
    const memory = new WebAssembly.Memory({ initial: 16 });
    const mm = simdMmNT(memory);
    const rng = new Rng('simd');
    let at = 0;
    const alloc = (len: number) => {
      const v = new Float32Array(memory.buffer, at * 4, len);
      at += len + 1; // odd offsets: unaligned loads must work
      return v;
    };
    for (const [M, N, K] of [
      [1, 1, 1],
      [2, 4, 4],
      [3, 5, 7],
      [16, 64, 64],
      [17, 13, 101],
      [6, 3, 2],
      [5, 9, 3],
    ]) {
      const A = alloc(M * K + 3);
      const B = alloc(N * K + 3);
      const C = alloc(M * N);
      for (const x of [A, B]) for (let i = 0; i < x.length; i++) x[i] = rng.next() - 0.5;
      for (const acc of [false, true]) {
        for (let i = 0; i < C.length; i++) C[i] = rng.next();
        const D = Float32Array.from(C);
        mm(M, N, K, A, 1, K, B, 3, K, C, 0, N, acc);
        mmNT(M, N, K, A, 1, K, B, 3, K, D, 0, N, acc);
        for (let i = 0; i < C.length; i++) expect(Math.abs(C[i] - D[i]), `${M}×${N}×${K} acc ${acc} at ${i}`).toBeLessThan(1e-5);
      }
    }
  });

  it('the wasm transpose copies exactly, on ragged shapes and offsets', () => {
    const memory = new WebAssembly.Memory({ initial: 16 });
    const { transpose: tr } = simdKernels(memory);
    const rng = new Rng('transpose');
    for (const [M, N] of [
      [1, 1],
      [4, 4],
      [5, 7],
      [64, 64],
      [13, 100],
      [3, 2],
      [8, 5],
    ]) {
      const A = new Float32Array(memory.buffer, 4, M * N + 3);
      const B = new Float32Array(memory.buffer, 4 * (M * N + 8), M * N + 2);
      for (let i = 0; i < A.length; i++) A[i] = rng.next() - 0.5;
      const C = new Float32Array(B.length);
      tr(M, N, A, 1, N, B, 2, M);
      transpose(M, N, A, 1, N, C, 2, M);
      expect(B.subarray(2), `${M}×${N}`).toEqual(C.subarray(2));
      for (let i = 0; i < M; i++) for (let j = 0; j < N; j++) expect(B[2 + j * M + i]).toBe(A[1 + i * N + j]);
    }
  });

  it('the wasm and the JS core give the same loss and gradient (float32)', () => {
    const cfg: SasrecConfig = { maxLen: 12, dim: 16, blocks: 2, heads: 2 };
    const lay = makeLayout(cfg, 40);
    const p = initWeights(lay, 3);
    const data = randomChunk(new Rng('cores'), [12, 7, 1, 9], 40);
    const res = (['wasm', 'js'] as const).map((kernel) => {
      const core = new GradCore(lay, 64, 4, { kernel });
      const g = new Float32Array(lay.size);
      const loss = core.lossAndGrad(p, g, data, 1 / data.rows, 0.2, [5, 6, 7, 8]);
      return { loss, g, kernel: core.kernel };
    });
    expect(res.map((r) => r.kernel)).toEqual(['wasm', 'js']);
    expect(Math.abs(res[0].loss - res[1].loss)).toBeLessThan(1e-5);
    let worst = 0;
    for (let k = 0; k < lay.size; k++) worst = Math.max(worst, Math.abs(res[0].g[k] - res[1].g[k]));
    expect(worst).toBeLessThan(1e-5);
  });
});

describe('SASRec gradient slots and the fused Adam step', () => {
  const cfg: SasrecConfig = { maxLen: 12, dim: 16, blocks: 2, heads: 1 };
  const lay = makeLayout(cfg, 40);
  const p = initWeights(lay, 3);

  it('assign writes exactly the gradient that adding into a zeroed slot gives, over any stale values', () => {
    for (const softmax of [undefined, Int32Array.from({ length: 40 }, (_, i) => i + 1), Int32Array.of(3, 17, 29, 8)]) {
      const data = { ...randomChunk(new Rng('assign'), [12, 7, 1, 9], 40), softmax };
      const core = new GradCore(lay, 64, 4, { softmaxItems: softmax ? 40 : 0 });
      const added = new Float32Array(lay.size);
      const l1 = core.lossAndGrad(p, added, data, 1 / data.rows, 0.2, [5, 6, 7, 8]);
      const stale = new Float32Array(lay.size).fill(123.5);
      const l2 = core.lossAndGrad(p, stale, data, 1 / data.rows, 0.2, [5, 6, 7, 8], true);
      expect(l2).toBe(l1);
      expect(stale).toEqual(added);
    }
  });

  it('adamSum gives bit-identical parameters and moments to summing the slots into a float32 array, then adam', () => {
    const rng = new Rng('adam-sum');
    for (const parts of [1, 2, 3]) {
      const grads = Array.from({ length: parts }, () => Float32Array.from({ length: 257 }, () => (rng.next() - 0.5) * 1e-3));
      const p0 = Float32Array.from({ length: 257 }, () => rng.next() - 0.5);
      const m0 = Float32Array.from({ length: 257 }, () => (rng.next() - 0.5) * 1e-4);
      const v0 = Float32Array.from({ length: 257 }, () => rng.next() * 1e-7);
      const [pa, ma, va, pb, mb, vb] = [p0, m0, v0, p0, m0, v0].map((a) => a.slice());
      const g = grads[0].slice();
      for (let c = 1; c < parts; c++) for (let k = 0; k < g.length; k++) g[k] += grads[c][k];
      adam(pa, g, ma, va, 7, 0.001, 0.9, 0.98, 1e-8);
      adamSum(pb, grads, parts, mb, vb, 7, 0.001, 0.9, 0.98, 1e-8);
      expect(pb).toEqual(pa);
      expect(mb).toEqual(ma);
      expect(vb).toEqual(va);
    }
  });
});

describe('SASRec training forward = inference', () => {
  for (const [kernel, heads, blocks] of [
    ['wasm', 1, 2],
    ['js', 2, 2],
    ['wasm', 4, 3],
    ['js', 1, 1],
  ] as const) {
    it(`encodeHistory equals the last row of the training forward pass without dropout (${kernel}, ${heads} heads, ${blocks} blocks)`, () => {
      const cfg: SasrecConfig = { maxLen: 10, dim: 16, blocks, heads };
      const n = 50;
      const lay = makeLayout(cfg, n);
      const rng = new Rng(`fwd-${kernel}-${heads}`);
      const p = Float32Array.from(initWeights(lay, 7), (x) => x + (rng.next() - 0.5) * 0.1);
      p.fill(0, lay.itemEmb, lay.itemEmb + cfg.dim);
      const w = weightsView(lay, p);
      const lens = [10, 1, 6, 3];
      const data = randomChunk(rng, lens, n);
      const core = new GradCore(lay, 40, 4, { kernel });
      const Z = core.forward(p, data, false);
      let o = 0;
      for (const T of lens) {
        const hist = data.inputs.subarray(o, o + T);
        const u = encodeHistory(w, hist);
        for (let c = 0; c < cfg.dim; c++) expect(Math.abs(u[c] - Z[(o + T - 1) * cfg.dim + c])).toBeLessThan(1e-4);
        o += T;
      }
      // a history longer than maxLen reads only its last maxLen items
      const long = Int32Array.from({ length: 25 }, () => 1 + rng.int(n));
      expect(encodeHistory(w, long)).toEqual(encodeHistory(w, long.subarray(15)));
      // dropout changes the training forward pass (so the comparison above is not vacuous)
      const Zd = Float32Array.from(core.forward(p, data, true, 0.5, [1, 2, 3, 4]));
      const Z0 = Float32Array.from(core.forward(p, data, false));
      expect(Zd).not.toEqual(Z0);
    });
  }
});

describe('SASRec sampler', () => {
  it("inputs are each user's last maxLen items before the last, targets the next ones, negatives unseen", () => {
    const seqs = [Int32Array.of(1, 2, 3, 4, 5, 6), Int32Array.of(7), Int32Array.of(8, 9)];
    const s = new Sampler(seqs, 12, 4, 1);
    expect(s.users).toBe(2);
    const [c] = s.batch(6, 1);
    let r = 0;
    for (let k = 0; k < c.seqs; k++) {
      const T = c.lens[k];
      const ins = [...c.inputs.subarray(r, r + T)];
      const tgs = [...c.targets.subarray(r, r + T)];
      if (T === 4) {
        expect(ins).toEqual([2, 3, 4, 5]);
        expect(tgs).toEqual([3, 4, 5, 6]);
        for (const x of c.negatives.subarray(r, r + T)) expect([1, 2, 3, 4, 5, 6]).not.toContain(x);
      } else {
        expect(T).toBe(1);
        expect(ins).toEqual([8]);
        expect(tgs).toEqual([9]);
        expect([8, 9]).not.toContain(c.negatives[r]);
      }
      r += T;
    }
  });
});

describe('SASRec learns a synthetic sequential task', () => {
  // Sequences of pairs: a random odd item a is always followed by a + 1. As in the paper and
  // the benchmark protocol, negatives never come from the user's own sequence, so the model
  // is asked to rank the next item among the items NOT in the history (chance ≈ 1/35).
  const n = 40;
  const pairs = (r: Rng, k: number) => {
    const out: number[] = [];
    for (let i = 0; i < k; i++) {
      const a = 1 + 2 * r.int(n / 2);
      out.push(a, a + 1);
    }
    return out;
  };
  const rng = new Rng('synthetic');
  const seqs = Array.from({ length: 200 }, () => Int32Array.from(pairs(rng, 2 + rng.int(7))));

  it('ranks the true next item first among the unseen items far above chance', async () => {
    const { weights, losses } = await trainSasrec(seqs, n, {
      maxLen: 10,
      dim: 16,
      blocks: 2,
      epochs: 30,
      batchSize: 32,
      lr: 0.005,
      dropout: 0.1,
      threads: 1,
      seed: 1,
    });
    expect(losses[losses.length - 1]).toBeLessThan(losses[0]);
    const test = new Rng('synthetic-test');
    let hits = 0;
    const trials = 200;
    for (let t = 0; t < trials; t++) {
      const hist = pairs(test, test.int(5));
      let x = 1 + 2 * test.int(n / 2);
      while (hist.includes(x + 1)) x = 1 + 2 * test.int(n / 2);
      hist.push(x);
      const candidates = Array.from({ length: n }, (_, i) => i + 1).filter((i) => !hist.includes(i));
      const s = scoreItems(weights, encodeHistory(weights, hist), candidates);
      let best = 0;
      for (let i = 1; i < candidates.length; i++) if (s[i] > s[best]) best = i;
      if (candidates[best] === x + 1) hits++;
    }
    expect(hits / trials).toBeGreaterThan(0.9);
  }, 120_000);
});

describe('SASRec training is deterministic', () => {
  const n = 30;
  const rng = new Rng('det');
  const seqs = Array.from({ length: 40 }, () => Int32Array.from({ length: 3 + rng.int(15) }, () => 1 + rng.int(n)));
  const opts = { maxLen: 10, dim: 16, blocks: 2, epochs: 3, batchSize: 8, chunks: 2 };

  it('same seed → bit-identical weights and losses; another seed → different', async () => {
    const a = await trainSasrec(seqs, n, { ...opts, threads: 1, seed: 5 });
    const b = await trainSasrec(seqs, n, { ...opts, threads: 1, seed: 5 });
    const c = await trainSasrec(seqs, n, { ...opts, threads: 1, seed: 6 });
    expect(b.losses).toEqual(a.losses);
    expect(b.weights.itemEmb).toEqual(a.weights.itemEmb);
    expect(b.weights.blocks[1].w2).toEqual(a.weights.blocks[1].w2);
    expect(c.weights.itemEmb).not.toEqual(a.weights.itemEmb);
  });

  it('one thread and two worker threads give bit-identical weights', async () => {
    const a = await trainSasrec(seqs, n, { ...opts, threads: 1, seed: 5 });
    const b = await trainSasrec(seqs, n, { ...opts, threads: 2, seed: 5 });
    expect(b.threads).toBe(2);
    expect(b.losses).toEqual(a.losses);
    expect(b.weights.itemEmb).toEqual(a.weights.itemEmb);
    expect(b.weights.posEmb).toEqual(a.weights.posEmb);
    expect(b.weights.lnfB).toEqual(a.weights.lnfB);
  }, 60_000);

  it('rejects bad options and item indices', async () => {
    await expect(trainSasrec([Int32Array.of(1, 31)], n, { epochs: 1 })).rejects.toThrow(RangeError);
    await expect(trainSasrec(seqs, n, { dropout: 1 })).rejects.toThrow(/dropout/);
    await expect(trainSasrec(seqs, n, { dim: 10, heads: 3 })).rejects.toThrow(/multiple/);
  });
});
