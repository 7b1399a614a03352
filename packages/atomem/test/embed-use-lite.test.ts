import { readFile } from 'node:fs/promises';
import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosine, norm } from '../src/core/vector.js';
import { createUseLiteEmbedder, USE_LITE_DIM, USE_LITE_ID, type UseLiteEmbedder } from '../src/embed/use-lite.js';
import { nodeAssetSource } from '../src/embed/use-lite-node.js';

const SCI_FI = 'loves space adventure science fiction movies';

describe('USE-lite embedder (real weights, tfjs wasm)', () => {
  let use: UseLiteEmbedder;

  beforeAll(async () => {
    use = await createUseLiteEmbedder();
  }, 120_000);

  afterAll(async () => {
    await use?.dispose?.();
  });

  it('has the documented id and dimension', () => {
    expect(use.id).toBe(USE_LITE_ID);
    expect(use.id).toBe('use-lite@0.2.0/uint8');
    expect(use.dim).toBe(512);
    expect(tf.getBackend()).toBe('wasm');
  });

  it('tokenizes a pinned sentence exactly (guards UTF-8 decoding of "▁")', () => {
    // "▁love" "s" "▁space" "▁adventure" "▁science" "▁fiction" "▁movies"
    expect(use.tokenize(SCI_FI)).toEqual([241, 7, 1016, 6797, 2313, 6290, 2468]);
  });

  it('ranks a paraphrase above an unrelated taste', async () => {
    const [a, b, c] = await use.embed([SCI_FI, 'enjoys sci-fi films set in outer space', 'prefers romantic comedies']);
    const close = cosine(a.vector, b.vector);
    const far = cosine(a.vector, c.vector);
    expect(close).toBeGreaterThan(far);
    expect(close - far).toBeGreaterThan(0.1);
  });

  it('returns 512-d finite unit vectors tagged with the embedder id', async () => {
    const out = await use.embed(['Fargo (1996). Crime, Drama, Thriller', 'Toy Story (1995). Animation, Children, Comedy']);
    expect(out).toHaveLength(2);
    for (const e of out) {
      expect(e.embedderId).toBe(USE_LITE_ID);
      expect(e.vector).toBeInstanceOf(Float32Array);
      expect(e.vector).toHaveLength(USE_LITE_DIM);
      expect(e.vector.every(Number.isFinite)).toBe(true);
      expect(norm(e.vector)).toBeCloseTo(1, 5);
    }
  });

  it('is deterministic: the same text twice gives the same vector', async () => {
    const [a] = await use.embed([SCI_FI]);
    const [b] = await use.embed([SCI_FI]);
    expect(Array.from(b.vector)).toEqual(Array.from(a.vector));
    // within one call, and regardless of batch companions (up to float noise)
    const [c, , d] = await use.embed([SCI_FI, 'a much longer sentence that pads the batch to many more tokens than the other', SCI_FI]);
    expect(cosine(c.vector, a.vector)).toBeGreaterThan(0.99999);
    expect(cosine(d.vector, a.vector)).toBeGreaterThan(0.99999);
  });

  it('embeds a batch of 100 (several forward passes) in input order without leaking tensors', async () => {
    const texts = Array.from({ length: 100 }, (_, i) => `Movie ${i} (${1950 + i}). ${i % 2 ? 'Crime, Drama' : 'Comedy, Romance'}`);
    const before = tf.memory().numTensors;
    const out = await use.embed(texts);
    expect(tf.memory().numTensors).toBe(before);
    expect(out).toHaveLength(100);
    // order: each output matches embedding its own text alone
    const [solo] = await use.embed([texts[37]]);
    expect(cosine(out[37].vector, solo.vector)).toBeGreaterThan(0.99999);
    expect(cosine(out[36].vector, solo.vector)).toBeLessThan(0.9999);
  });

  it('returns [] for no texts', async () => {
    await expect(use.embed([])).resolves.toEqual([]);
  });

  it('rejects empty, blank and non-string texts, naming the index', async () => {
    await expect(use.embed(['ok', ''])).rejects.toThrow(TypeError);
    await expect(use.embed(['ok', ''])).rejects.toThrow(/texts\[1\].*empty/);
    await expect(use.embed(['   '])).rejects.toThrow(/texts\[0\].*blank/);
    await expect(use.embed(['ok', 'fine', 42 as unknown as string])).rejects.toThrow(/texts\[2\] is number/);
    // the embedder still works afterwards
    await expect(use.embed(['still fine'])).resolves.toHaveLength(1);
  });

  it('names the path it tried when assets are missing', async () => {
    await expect(createUseLiteEmbedder({ assetsPath: '/nonexistent/use-lite' })).rejects.toThrow(/\/nonexistent\/use-lite\/(vocab|model)\.json/);
  });

  it('refuses a vocabulary that was not decoded as UTF-8', async () => {
    const real = nodeAssetSource();
    const latin1 = {
      ...real,
      text: async (file: string) => (file === 'vocab.json' ? (await readFile(real.locate(file))).toString('latin1') : real.text(file)),
    };
    await expect(createUseLiteEmbedder({ assets: latin1 })).rejects.toThrow(/not decoded as UTF-8/);
  });

  it('dispose() frees the weights and refuses later calls', async () => {
    const before = tf.memory().numTensors;
    const second = await createUseLiteEmbedder();
    expect(tf.memory().numTensors).toBeGreaterThan(before);
    await second.dispose?.();
    expect(tf.memory().numTensors).toBe(before);
    await expect(second.embed(['hello'])).rejects.toThrow(/disposed/);
    await expect(use.embed(['the first embedder is unaffected'])).resolves.toHaveLength(1);
  });

  it('rejects bad options', async () => {
    await expect(createUseLiteEmbedder({ batchSize: 0 })).rejects.toThrow(RangeError);
  });
});
