import { describe, expect, it } from 'vitest';
import type { Embedding } from '../src/core/types.js';
import { cacheKey, createCachedEmbedder, EmbeddingCache, itemText, parseCacheKey } from '../src/embed/cache.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import type { Embedder } from '../src/embed/types.js';

/** A hashing embedder that records every batch it is asked to embed. */
function spy(dim = 16): Embedder & { calls: string[][] } {
  const base = createHashingEmbedder({ dim });
  const calls: string[][] = [];
  return {
    id: base.id,
    dim,
    calls,
    async embed(texts) {
      calls.push([...texts]);
      return base.embed(texts);
    },
  };
}

const same = (a: Float32Array, b: Float32Array) => expect(Array.from(a)).toEqual(Array.from(b));

describe('createCachedEmbedder', () => {
  it('keeps the inner id and dim, and tags vectors with it', async () => {
    const inner = spy();
    const c = createCachedEmbedder(inner);
    expect(c.id).toBe(inner.id);
    expect(c.dim).toBe(inner.dim);
    const out = await c.embed(['a', 'b']);
    expect(out.map((e) => e.embedderId)).toEqual([inner.id, inner.id]);
  });

  it('sends misses to the inner embedder once; hits never', async () => {
    const inner = spy();
    const c = createCachedEmbedder(inner);
    const first = await c.embed(['alpha', 'beta']);
    const second = await c.embed(['beta', 'gamma', 'alpha']);
    expect(inner.calls).toEqual([['alpha', 'beta'], ['gamma']]);
    same(second[0].vector, first[1].vector);
    same(second[2].vector, first[0].vector);
    await c.embed(['alpha', 'beta', 'gamma']);
    expect(inner.calls).toHaveLength(2);
    expect(c.stats()).toMatchObject({ hits: 5, misses: 3, size: 3 });
  });

  it('deduplicates within a call and preserves order, duplicates included', async () => {
    const inner = spy();
    const direct = createHashingEmbedder({ dim: 16 });
    const c = createCachedEmbedder(inner);
    await c.embed(['x']);
    const texts = ['b', 'a', 'x', 'b', 'c', 'a', 'x'];
    const out = await c.embed(texts);
    expect(inner.calls[1]).toEqual(['b', 'a', 'c']);
    const want = await direct.embed(texts);
    out.forEach((e, i) => same(e.vector, want[i].vector));
    // duplicates are separate arrays: mutating one result never touches another or the cache
    expect(out[0].vector).not.toBe(out[3].vector);
    out[0].vector.fill(0);
    same((await c.embed(['b']))[0].vector, want[0].vector);
  });

  it('does not call the inner embedder for an empty or all-hit call', async () => {
    const inner = spy();
    const c = createCachedEmbedder(inner);
    expect(await c.embed([])).toEqual([]);
    await c.embed(['a']);
    await c.embed(['a', 'a']);
    expect(inner.calls).toEqual([['a']]);
  });

  it('shares one in-flight request between concurrent calls', async () => {
    const inner = spy();
    const c = createCachedEmbedder(inner);
    const [x, y] = await Promise.all([c.embed(['p', 'q']), c.embed(['q', 'r'])]);
    expect(inner.calls).toEqual([['p', 'q'], ['r']]);
    same(x[1].vector, y[0].vector);
  });

  it('evicts the least recently used entry when full', async () => {
    const inner = spy();
    const c = createCachedEmbedder(inner, { maxEntries: 2 });
    await c.embed(['a', 'b']);
    await c.embed(['a']); // a is now more recent than b
    await c.embed(['c']); // evicts b
    expect(c.cache.has(inner.id, 'a')).toBe(true);
    expect(c.cache.has(inner.id, 'b')).toBe(false);
    expect(c.cache.has(inner.id, 'c')).toBe(true);
    await c.embed(['b']);
    expect(inner.calls.at(-1)).toEqual(['b']);
    expect(c.stats()).toMatchObject({ size: 2, maxEntries: 2, evictions: 2 });
  });

  it('answers correctly when one call has more misses than the cache holds', async () => {
    const inner = spy();
    const c = createCachedEmbedder(inner, { maxEntries: 2 });
    const texts = ['a', 'b', 'c', 'd', 'a'];
    const out = await c.embed(texts);
    const want = await createHashingEmbedder({ dim: 16 }).embed(texts);
    out.forEach((e, i) => same(e.vector, want[i].vector));
  });

  it('rejects an inner embedder that returns the wrong dimension, caching nothing', async () => {
    const liar: Embedder = {
      id: 'liar@1',
      dim: 8,
      async embed(texts): Promise<Embedding[]> {
        return texts.map(() => ({ embedderId: 'liar@1', vector: new Float32Array(4).fill(0.5) }));
      },
    };
    const c = createCachedEmbedder(liar);
    await expect(c.embed(['a'])).rejects.toThrow(/dimension 4.*expected 8/);
    expect(c.cache.size).toBe(0);
  });

  it('propagates inner errors and does not cache them', async () => {
    let fail = true;
    const base = createHashingEmbedder({ dim: 16 });
    const flaky: Embedder = {
      id: base.id,
      dim: 16,
      async embed(texts) {
        if (fail) throw new Error('model unavailable');
        return base.embed(texts);
      },
    };
    const c = createCachedEmbedder(flaky);
    await expect(c.embed(['a'])).rejects.toThrow('model unavailable');
    fail = false;
    await expect(c.embed(['a'])).resolves.toHaveLength(1);
  });

  it('validates texts even when they would all be hits', async () => {
    const c = createCachedEmbedder(spy());
    await c.embed(['a']);
    await expect(c.embed(['a', ''])).rejects.toThrow(/texts\[1\]/);
  });

  it('snapshots and warms another cache; other embedders are skipped', async () => {
    const inner = spy();
    const c1 = createCachedEmbedder(inner);
    await c1.embed(['a', 'b']);
    const snap = c1.snapshot();
    expect(snap.map(([k]) => parseCacheKey(k))).toEqual([
      { embedderId: inner.id, text: 'a' },
      { embedderId: inner.id, text: 'b' },
    ]);
    const inner2 = spy();
    const c2 = createCachedEmbedder(inner2);
    const foreign: [string, Float32Array] = [cacheKey('other@1', 'z'), new Float32Array(3)];
    // a JSON round trip gives plain arrays; those are accepted too
    const fromJson = JSON.parse(JSON.stringify(snap.map(([k, v]) => [k, Array.from(v)]))) as Array<[string, number[]]>;
    expect(c2.load([...fromJson, foreign])).toEqual({ loaded: 2, skipped: 1 });
    await c2.embed(['a', 'b']);
    expect(inner2.calls).toEqual([]);
  });

  it('rejects snapshot entries whose dimension disagrees with the embedder', () => {
    const c = createCachedEmbedder(spy(16));
    const good: [string, Float32Array] = [cacheKey(c.id, 'ok'), new Float32Array(16).fill(0.25)];
    const bad: [string, Float32Array] = [cacheKey(c.id, 'bad'), new Float32Array(8).fill(Math.SQRT1_2 / 2)];
    expect(() => c.load([good, bad])).toThrow(/entry 1 .*dimension 8, expected 16/);
    expect(c.cache.size).toBe(0); // all-or-nothing
    expect(() => c.load([[cacheKey(c.id, 'nan'), new Float32Array(16).fill(NaN)]])).toThrow(/non-finite/);
    expect(() => c.load([[cacheKey(c.id, 'big'), new Float32Array(16).fill(1)]])).toThrow(/unit norm/);
    expect(() => c.load([['no-separator', new Float32Array(16)]])).toThrow(/key/);
  });
});

describe('EmbeddingCache', () => {
  it('keys by (embedderId, text), so two embedders never share a vector', () => {
    const cache = new EmbeddingCache({ maxEntries: 10 });
    cache.set('m1@1', 'text', [1, 0]);
    cache.set('m2@1', 'text', [0, 1]);
    expect(Array.from(cache.get('m1@1', 'text')!)).toEqual([1, 0]);
    expect(Array.from(cache.get('m2@1', 'text')!)).toEqual([0, 1]);
    expect(cache.get('m3@1', 'text')).toBeUndefined();
    cache.clear('m1@1');
    expect(cache.size).toBe(1);
  });

  it('defaults to 50 000 entries and rejects a bad capacity', () => {
    expect(new EmbeddingCache().maxEntries).toBe(50_000);
    expect(() => new EmbeddingCache({ maxEntries: 0 })).toThrow(RangeError);
  });
});

describe('itemText', () => {
  it('joins title, categories and description', () => {
    expect(itemText({ id: '1', title: 'Fargo (1996)', categories: ['Crime', 'Drama', 'Thriller'] })).toBe('Fargo (1996). Crime, Drama, Thriller');
    expect(itemText({ id: '2', title: 'Heat', categories: ['Crime'], description: 'A heist  goes\nwrong.' })).toBe('Heat. Crime. A heist goes wrong.');
    expect(itemText({ id: '3', title: 'Toy Story (1995)' })).toBe('Toy Story (1995)');
  });

  it('does not double sentence punctuation and drops blank or repeated categories', () => {
    expect(itemText({ id: '1', title: 'Airplane!', categories: ['Comedy', ' ', 'Comedy'] })).toBe('Airplane! Comedy');
  });

  it('falls back to the id, and truncates at a word boundary', () => {
    expect(itemText({ id: 'sku-42', title: '  ' })).toBe('sku-42');
    const long = itemText({ id: '1', title: 'T', description: 'word '.repeat(500) });
    expect(long.length).toBeLessThanOrEqual(512);
    expect(long.endsWith('word')).toBe(true);
    expect(itemText({ id: '1', title: 'abcdef ghij' }, 8)).toBe('abcdef');
  });
});
