import { afterEach, describe, expect, it } from 'vitest';
import { createAtomem, type Atomem, type SerializedError } from '../../src/client/index.js';
import type { Item } from '../../src/core/types.js';
import { itemText } from '../../src/embed/cache.js';
import { createHashingEmbedder } from '../../src/embed/hashing.js';
import { encodeCatalogVectors } from '../../src/protocol/catalog-vectors-v1.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { startHashingAtomem } from '../../../../test/fixtures/hashing-atomem.js';

// A shop's catalog embedded ahead of time (here in the page, with the same hashing embedder the
// worker builds), handed to the worker as `catalogVectors`: real worker, real fetch of a blob URL
// (same origin), real IndexedDB cache. Progress arrives on its own message channel, possibly
// after createAtomem resolved (a loaded machine): the checks on it poll.

const catalog: Item[] = ['trail', 'road', 'court', 'boot', 'skillet', 'wok', 'saucepan', 'griddle'].map((n, i) => ({
  id: `p-${n}`,
  title: `${n} ${i < 4 ? 'shoes' : 'pan'}`,
  categories: [i < 4 ? 'Shoes' : 'Kitchen'],
  description: i < 4 ? 'leather running shoes sneakers footwear' : 'cooking pan kitchen cookware stove',
}));

const profiles = profileTracker('catvec-');
const open: Atomem[] = [];
const urls: string[] = [];

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  for (const u of urls.splice(0)) URL.revokeObjectURL(u);
  await profiles.deleteAll();
});

async function vectorFile(items: Item[], embedder = createHashingEmbedder({ dim: 256 })): Promise<string> {
  // the worker embeds `itemText(item)`; the file must hold exactly that
  const vectors = (await embedder.embed(items.map((it) => itemText(it)))).map((e) => e.vector);
  const url = URL.createObjectURL(new Blob([encodeCatalogVectors(embedder, items, vectors) as BlobPart]));
  urls.push(url);
  return url;
}

async function start(name: string, catalogVectors?: string, items = catalog) {
  const { a, progress, errors, profile } = await startHashingAtomem(profiles.profile(name), items, catalogVectors);
  open.push(a);
  /** Items the worker embedded itself (the catalog stage's total; -1 until that progress event has arrived — it comes through its own callback channel, so poll it). */
  const embedded = (): number => progress.filter((p) => p.stage === 'catalog' && p.unit === 'items').at(-1)?.total ?? -1;
  return { a, progress, errors, embedded, profile };
}

describe('precomputed catalog vectors (catalogVectors)', () => {
  it('a first visit embeds nothing when every item is in the file, with download progress, and ranks as if it had embedded', async () => {
    const url = await vectorFile(catalog);
    const withFile = await start('all', url);
    await expect.poll(() => withFile.embedded()).toBe(0);
    expect(withFile.progress.some((p) => p.stage === 'catalog' && p.phase === 'download' && p.unit === 'bytes')).toBe(true);
    const plain = await start('plain');
    await expect.poll(() => plain.embedded()).toBe(catalog.length);
    for (const s of [withFile, plain]) {
      await s.a.track({ item: 'p-wok', action: 'purchase', at: 1_000 });
      await s.a.track({ item: 'p-skillet', action: 'click', at: 2_000 });
    }
    const ids = catalog.map((c) => c.id);
    const [got, want] = [await withFile.a.recommend(ids), await plain.a.recommend(ids)];
    expect(got.map((r) => [r.id, r.explanations])).toEqual(want.map((r) => [r.id, r.explanations]));
    got.forEach((r, i) => expect(r.score).toBeCloseTo(want[i].score, 9)); // the same vectors, summed in another order
    expect(withFile.errors).toEqual([]);
  });

  it('an item whose text changed since the file was made, or that is not in it, is embedded here', async () => {
    const url = await vectorFile(catalog.slice(0, 7)); // p-griddle missing
    const edited = catalog.map((c) => (c.id === 'p-wok' ? { ...c, title: 'carbon steel wok' } : c));
    const s = await start('partial', url, edited);
    await expect.poll(() => s.embedded()).toBe(2);
    expect(s.errors).toEqual([]);
  });

  it('a returning shopper does not fetch the file again: the vectors are in the IndexedDB cache', async () => {
    const url = await vectorFile(catalog);
    const first = await start('cache', url);
    await expect.poll(() => first.embedded()).toBe(0);
    first.a.dispose();
    URL.revokeObjectURL(url); // a fetch now would fail and raise an error event
    const errors: SerializedError[] = [];
    const again = await createAtomem({
      profile: first.profile,
      catalog,
      embedder: 'hashing',
      catalogVectors: url,
      config: { tau: 0.3 },
      onError: (e) => errors.push(e),
    });
    open.push(again);
    expect((await again.recommend(['p-trail', 'p-wok'])).length).toBe(2);
    expect(errors).toEqual([]);
  });

  it('a file of another embedder, a malformed file or a 404 is reported and ignored: everything is embedded here', async () => {
    const other = await vectorFile(catalog, createHashingEmbedder({ dim: 128 }));
    const garbage = URL.createObjectURL(new Blob(['not a vector file']));
    urls.push(garbage);
    for (const [name, url, pattern] of [
      ['other', other, /hashing.*128.*this engine embeds with hashing.*256/],
      ['garbage', garbage, /does not start with "ATMV"/],
      ['missing', `${location.origin}/no-such-file.bin`, /HTTP 404/],
    ] as const) {
      const s = await start(name, url);
      await expect.poll(() => s.embedded()).toBe(catalog.length);
      await expect.poll(() => s.errors.length).toBeGreaterThan(0);
      expect(s.errors[0]).toMatchObject({ name: 'CatalogVectorsError' });
      expect(s.errors[0].message).toMatch(pattern);
    }
  });
});
