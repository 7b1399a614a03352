import { describe, expect, it } from 'vitest';
import { cosine, norm } from '../src/core/vector.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';

describe('hashing embedder (unit-test double)', () => {
  it('has id hashing-<dim>@1 and the requested dimension', () => {
    expect(createHashingEmbedder().id).toBe('hashing-64@1');
    expect(createHashingEmbedder().dim).toBe(64);
    const e = createHashingEmbedder({ dim: 128 });
    expect(e.id).toBe('hashing-128@1');
    expect(e.dim).toBe(128);
    expect(createHashingEmbedder({ seed: 7 }).id).toBe('hashing-64@1/seed-7');
  });

  it('is deterministic, across calls and instances', async () => {
    const t = ['Fargo (1996). Crime, Drama, Thriller'];
    const [a] = await createHashingEmbedder().embed(t);
    const [b] = await createHashingEmbedder().embed(t);
    expect(Array.from(b.vector)).toEqual(Array.from(a.vector));
    const [c] = await createHashingEmbedder({ seed: 1 }).embed(t);
    expect(Array.from(c.vector)).not.toEqual(Array.from(a.vector));
  });

  it('returns unit-norm Float32Arrays tagged with its id, even for one word or punctuation', async () => {
    const e = createHashingEmbedder({ dim: 32 });
    const out = await e.embed(['Fargo', 'a b', '!!!', 'Crime, Drama, Thriller', 'x'.repeat(10_000)]);
    for (const v of out) {
      expect(v.embedderId).toBe('hashing-32@1');
      expect(v.vector).toBeInstanceOf(Float32Array);
      expect(v.vector).toHaveLength(32);
      expect(norm(v.vector)).toBeCloseTo(1, 5);
    }
  });

  it('is case- and punctuation-insensitive', async () => {
    const [a, b] = await createHashingEmbedder().embed(['Science Fiction!', 'science fiction']);
    expect(cosine(a.vector, b.vector)).toBeCloseTo(1, 6);
  });

  it('puts texts sharing words closer than unrelated texts', async () => {
    const e = createHashingEmbedder({ dim: 256 });
    const [q, near, far] = await e.embed([
      'loves space adventure science fiction movies',
      'science fiction movies about space',
      'prefers romantic comedies and period dramas',
    ]);
    expect(cosine(q.vector, near.vector)).toBeGreaterThan(cosine(q.vector, far.vector) + 0.3);
  });

  it('counts bigrams: word order matters a little', async () => {
    const [a, b] = await createHashingEmbedder({ dim: 256 }).embed(['dark crime thriller', 'thriller crime dark']);
    const c = cosine(a.vector, b.vector);
    expect(c).toBeGreaterThan(0.3);
    expect(c).toBeLessThan(0.99);
  });

  it('embeds 10 000 item texts in one call: one unit vector each, distinct texts distinct vectors', async () => {
    const texts = Array.from({ length: 10_000 }, (_, i) => `Movie ${i} (${1900 + (i % 120)}). Crime, Drama, Thriller`);
    const out = await createHashingEmbedder().embed(texts);
    expect(out).toHaveLength(10_000);
    for (const e of [out[0], out[5000], out[9999]]) expect(Math.hypot(...e.vector)).toBeCloseTo(1, 5);
    expect(out[1].vector).not.toEqual(out[2].vector);
  });

  it('rejects empty and non-string texts, naming the index, and bad options', async () => {
    const e = createHashingEmbedder();
    await expect(e.embed(['ok', ''])).rejects.toThrow(/texts\[1\]/);
    await expect(e.embed([null as unknown as string])).rejects.toThrow(TypeError);
    expect(() => createHashingEmbedder({ dim: 0 })).toThrow(RangeError);
    expect(() => createHashingEmbedder({ dim: 3.5 })).toThrow(RangeError);
    expect(() => createHashingEmbedder({ seed: -1 })).toThrow(RangeError);
  });
});
