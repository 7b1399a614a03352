import { describe, expect, it } from 'vitest';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import type { Embedder } from '../src/embed/types.js';
import { LazyEmbedder } from '../src/worker/embedders.js';

// The worker's lazy USE-lite wrapper (src/worker/embedders.ts), with a real (hashing) embedder
// behind it; which URLs a browser fetches is asserted in packages/atomem/test/dist-chromium.test.ts.
const real = (): Embedder => createHashingEmbedder({ dim: 32 });

describe('LazyEmbedder', () => {
  it('announces id and dim without loading, loads once on the first embed (concurrent callers share it)', async () => {
    const inner = real();
    let loads = 0;
    const lazy = new LazyEmbedder(inner.id, inner.dim, async () => {
      loads++;
      await new Promise((r) => setTimeout(r, 20));
      return inner;
    });
    expect([lazy.id, lazy.dim, lazy.state, loads]).toEqual([inner.id, 32, 'not loaded', 0]);
    expect(await lazy.embed([])).toEqual([]); // nothing to embed: no load
    await expect(lazy.embed([''])).rejects.toThrow(TypeError); // bad input: no load either
    expect(loads).toBe(0);
    const a = lazy.embed(['red shoes']);
    expect(lazy.state).toBe('loading');
    const [x, y] = await Promise.all([a, lazy.embed(['blue shoes'])]);
    expect(loads).toBe(1);
    expect(lazy.state).toBe('ready');
    expect(Array.from(x[0].vector)).toEqual(Array.from((await inner.embed(['red shoes']))[0].vector));
    expect(y[0].embedderId).toBe(inner.id);
  });

  it('a failed load rejects that call, is reported, and is tried again on the next need', async () => {
    const inner = real();
    let n = 0;
    const lazy = new LazyEmbedder(inner.id, inner.dim, async () => {
      if (++n === 1) throw new Error('GET /assets/use-lite/model.json returned HTTP 503');
      return inner;
    });
    await expect(lazy.embed(['a'])).rejects.toThrow(/HTTP 503/);
    expect(lazy.state).toBe('not loaded');
    expect(lazy.error).toMatch(/HTTP 503/);
    expect(await lazy.embed(['a'])).toHaveLength(1);
    expect([lazy.state, lazy.error, n]).toEqual(['ready', null, 2]);
  });

  it('refuses a model whose id differs from the announced one (its vectors would be mislabelled)', async () => {
    const inner = real();
    let disposed = false;
    const lazy = new LazyEmbedder('use-lite@0.2.0/uint8', 512, async () => ({
      ...inner,
      id: 'use-lite@0.2.0/float32',
      dim: 512,
      embed: inner.embed,
      dispose: async () => void (disposed = true),
    }));
    await expect(lazy.embed(['a'])).rejects.toThrow(/loaded as use-lite@0.2.0\/float32.*expected use-lite@0.2.0\/uint8/);
    expect(disposed).toBe(true);
  });

  it('dispose during a load frees the model once it arrives and refuses later calls', async () => {
    const inner = real();
    let freed = 0;
    const lazy = new LazyEmbedder(inner.id, inner.dim, async () => {
      await new Promise((r) => setTimeout(r, 20));
      return { id: inner.id, dim: inner.dim, embed: (t) => inner.embed(t), dispose: async () => void freed++ };
    });
    const pending = lazy.embed(['a']);
    await lazy.dispose();
    await expect(pending).rejects.toThrow(/disposed/);
    expect(freed).toBe(1);
    await expect(lazy.embed(['a'])).rejects.toThrow(/disposed/);
  });
});
