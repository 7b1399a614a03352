import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUseLiteEmbedder, type UseLiteEmbedder } from '../src/embed/use-lite.js';
import { perElementPlan } from '../src/embed/use-lite-kernels.js';

/** SplitV by coordinates, independent of the kernel's row arithmetic. */
function referenceSplit(values: ArrayLike<number>, shape: number[], sizes: number[], axis: number): number[][] {
  const strides = shape.map((_, d) => shape.slice(d + 1).reduce((a, b) => a * b, 1));
  const parts: number[][] = sizes.map(() => []);
  const starts = sizes.map((_, i) => sizes.slice(0, i).reduce((a, b) => a + b, 0));
  const total = shape.reduce((a, b) => a * b, 1);
  for (let flat = 0; flat < total; flat++) {
    const c = Math.floor(flat / strides[axis]) % shape[axis];
    let part = 0;
    for (let i = 0; i < sizes.length; i++) if (sizes[i] > 0 && c >= starts[i]) part = i;
    parts[part].push(values[flat]);
  }
  return parts;
}

/** a · b (or a · bᵀ) over equal batch dimensions, in float64. */
function referenceMatMul(a: Float32Array, b: Float32Array, batch: number, m: number, k: number, n: number, transposeB: boolean): Float64Array {
  const out = new Float64Array(batch * m * n);
  for (let e = 0; e < batch; e++) {
    for (let i = 0; i < m; i++) {
      for (let j = 0; j < n; j++) {
        let sum = 0;
        for (let t = 0; t < k; t++) sum += a[e * m * k + i * k + t] * (transposeB ? b[e * n * k + j * k + t] : b[e * k * n + t * n + j]);
        out[e * m * n + i * n + j] = sum;
      }
    }
  }
  return out;
}

describe('the WASM kernels that USE-lite installs', () => {
  let use: UseLiteEmbedder;
  beforeAll(async () => {
    use = await createUseLiteEmbedder();
  }, 120_000);
  afterAll(async () => {
    await use?.dispose?.();
  });

  it('replaces the backend kernels once the embedder has started', () => {
    expect(tf.getBackend()).toBe('wasm');
    expect(tf.getKernel(tf.SplitV, 'wasm')?.kernelFunc.toString()).toContain('splitVFromHeap');
    expect(tf.getKernel(tf.BatchMatMul, 'wasm')?.kernelFunc.toString()).toContain('batchMatMulPerElement');
  });

  it('sends only equal-batch float32 products of some size element by element', () => {
    const f = (shape: number[]) => ({ shape, dtype: 'float32' as const, dataId: {} });
    const no = { transposeA: false, transposeB: false };
    expect(perElementPlan(f([64, 4, 50, 128]), f([64, 4, 50, 128]), { ...no, transposeB: true })).toEqual({
      batch: 256,
      m: 50,
      k: 128,
      n: 50,
      transposeB: true,
    });
    expect(perElementPlan(f([64, 4, 50, 50]), f([64, 4, 50, 128]), no)).toEqual({ batch: 256, m: 50, k: 50, n: 128, transposeB: false });
    expect(perElementPlan(f([1, 50, 128]), f([1, 128, 50]), no)).toBeNull(); // batch 1: already XNNPACK
    expect(perElementPlan(f([4, 50, 128]), f([1, 128, 50]), no)).toBeNull(); // broadcast
    expect(perElementPlan(f([4, 128, 50]), f([4, 128, 50]), { ...no, transposeA: true })).toBeNull();
    expect(perElementPlan(f([4, 3, 5]), f([4, 5, 3]), no)).toBeNull(); // too small to pay its overhead
    expect(perElementPlan({ ...f([4, 50, 128]), dtype: 'int32' as const }, f([4, 128, 50]), no)).toBeNull();
  });

  const products: Array<{ a: number[]; b: number[]; transposeB: boolean }> = [
    { a: [2, 3, 20, 32], b: [2, 3, 20, 32], transposeB: true }, // Q · Kᵀ
    { a: [2, 3, 20, 20], b: [2, 3, 20, 48], transposeB: false }, // A · V
    { a: [5, 33, 17], b: [5, 17, 41], transposeB: false },
    { a: [3, 4, 5], b: [3, 5, 6], transposeB: false }, // small: the backend's own loop
  ];
  for (const { a, b, transposeB } of products) {
    it(`multiplies [${a}] by [${b}]${transposeB ? 'ᵀ' : ''} like a float64 reference`, async () => {
      const rank = a.length;
      const batch = a.slice(0, -2).reduce((x, y) => x * y, 1);
      const [m, k] = a.slice(-2);
      const n = transposeB ? b[rank - 2] : b[rank - 1];
      const av = Float32Array.from({ length: batch * m * k }, (_, i) => Math.sin(i * 0.37) * 3);
      const bv = Float32Array.from({ length: batch * k * n }, (_, i) => Math.cos(i * 0.11) * 2);
      const x = tf.tensor(av, a);
      const y = tf.tensor(bv, b);
      const z = tf.matMul(x, y, false, transposeB);
      expect(z.shape).toEqual([...a.slice(0, -2), m, n]);
      const got = await z.data();
      const want = referenceMatMul(av, bv, batch, m, k, n, transposeB);
      let worst = 0;
      for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]) / (1 + Math.abs(want[i])));
      expect(worst).toBeLessThan(1e-5);
      tf.dispose([x, y, z]);
    });
  }

  it('leaves no tensor behind in the heap', () => {
    const before = tf.memory();
    const x = tf.ones([4, 2, 30, 64]);
    const z = tf.matMul(x, x, false, true);
    tf.dispose([x, z]);
    // why: numDataBuffers counts the backend's own data ids, which the per-element operands use.
    expect(tf.memory().numDataBuffers).toBe(before.numDataBuffers);
    expect(tf.memory().numTensors).toBe(before.numTensors);
  });

  const cases: Array<{ shape: number[]; sizes: number[]; axis: number; dtype: 'float32' | 'int32' }> = [
    { shape: [4, 5, 12], sizes: [4, 4, 4], axis: 2, dtype: 'float32' }, // USE-lite's Q/K/V split
    { shape: [4, 5, 12], sizes: [3, 0, 9], axis: -1, dtype: 'float32' },
    { shape: [6, 7], sizes: [1, 4, 1], axis: 0, dtype: 'int32' },
    { shape: [3, 8, 2, 5], sizes: [2, 6], axis: 1, dtype: 'float32' },
    { shape: [9], sizes: [2, 3, 4], axis: 0, dtype: 'int32' },
  ];
  for (const { shape, sizes, axis, dtype } of cases) {
    it(`splits [${shape}] into [${sizes}] on axis ${axis} (${dtype}) exactly`, async () => {
      const n = shape.reduce((a, b) => a * b, 1);
      const values = Array.from({ length: n }, (_, i) => (dtype === 'int32' ? i * 7 - 50 : Math.sin(i) * 1e3));
      const x = tf.tensor(values, shape, dtype);
      const parts = tf.split(x, sizes, axis);
      const expected = referenceSplit(dtype === 'float32' ? Float32Array.from(values) : values, shape, sizes, axis < 0 ? shape.length + axis : axis);
      const a = axis < 0 ? shape.length + axis : axis;
      for (let i = 0; i < sizes.length; i++) {
        const want = shape.slice();
        want[a] = sizes[i];
        expect(parts[i].shape).toEqual(want);
        expect(parts[i].dtype).toBe(dtype);
        expect(Array.from(await parts[i].data())).toEqual(expected[i]);
      }
      tf.dispose([x, ...parts]);
    });
  }

  it('still gives the same embedding after many splits (no stale heap views)', async () => {
    const [before] = await use.embed(['a warm wool scarf for winter']);
    const big = tf.zeros([64, 95, 1536]);
    tf.dispose(tf.split(big, 3, 2));
    big.dispose();
    const [after] = await use.embed(['a warm wool scarf for winter']);
    expect(Array.from(after.vector)).toEqual(Array.from(before.vector));
  });
});
