import { describe, expect, it } from 'vitest';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import { itemText } from '../src/embed/cache.js';
import { CatalogVectorsError, itemTextHash } from '../src/protocol/catalog-vectors-v1.js';
import { decodeCatalogFile, encodeCatalogFile } from '../src/protocol/catalog-vectors-v2.js';
import { assembleCatalogFile, decodeCatalogHead, decodeCatalogShard, encodeCatalogFileV3, shardOfId, shardsFor } from '../src/protocol/catalog-vectors-v3.js';
import { encodeHistory, scoreItems } from '../src/shop/sasrec/model.js';
import { ShopKnowledge } from '../src/shop/device.js';
import { shopEmbedder, shopFileParts, twoDepartmentItems } from '../../../test/fixtures/shop-catalog.js';

const items = twoDepartmentItems(40);
const embedder = shopEmbedder;
const fixture = () => shopFileParts(items, { users: 60, perUser: 6, pick: (rng, half) => Math.min(rng.int(half), rng.int(half)) });

const cos = (a: Float32Array, b: Float32Array): number => {
  let s = 0,
    na = 0,
    nb = 0;
  for (let i = 0; i < a.length; i++) (s += a[i] * b[i]), (na += a[i] * a[i]), (nb += b[i] * b[i]);
  return s / Math.sqrt(na * nb);
};

describe('catalog vector file v3 (head + shards)', () => {
  it('all shards assembled give the v2 file within int8 rounding: content vectors, lists, collaborative vectors, SASRec scores', async () => {
    const { vectors, model, weights, sasrecItems } = await fixture();
    const input = {
      embedder,
      items,
      vectors,
      shop: { model, sasrec: { weights, items: sasrecItems, itemEmbedding: 'f32' as const }, info: { logRows: 360 } },
      createdAt: '2026-01-01T00:00:00.000Z',
    };
    const v2 = decodeCatalogFile(encodeCatalogFile(input));
    const enc = encodeCatalogFileV3({ ...input, shardSize: 8, shardPrefix: 'cat.shards/' });
    expect(enc.shards).toHaveLength(5);
    expect(enc.shards[0].name).toMatch(/^cat\.shards\/00000-[0-9a-f]{8}\.bin$/);
    const head = decodeCatalogHead(enc.head);
    expect(head.header.shards.map((s) => s.name)).toEqual(enc.shards.map((s) => s.name));
    // every item sits in the shard its id hashes to (shardOfId), most popular first within a shard
    const pop = (id: string) => model.popularity[model.items.indexOf(id)];
    for (let k = 0; k < 5; k++) {
      const inShard = enc.order.slice(head.starts[k], head.starts[k + 1]);
      for (const id of inShard) expect(shardOfId(id, 5)).toBe(k);
      for (let i = 1; i < inShard.length; i++) expect(pop(inShard[i - 1])).toBeGreaterThanOrEqual(pop(inShard[i]));
    }
    expect([...enc.order].sort()).toEqual(items.map((i) => i.id).sort());
    expect(() => decodeCatalogFile(enc.head)).toThrow(/format v3 head/);
    const shards = enc.shards.map((s, k) => decodeCatalogShard(head, k, s.bytes));
    const file = assembleCatalogFile(head, shards);
    expect(file.version).toBe(3);
    expect(file.shopInfo).toEqual({ logRows: 360 });
    items.forEach((it, i) => {
      const row = file.vectors.get(it.id)!;
      expect(row.hash).toBe(itemTextHash(it));
      expect(cos(row.vector, vectors[i])).toBeGreaterThan(0.999);
    });
    const m3 = file.shop!.model;
    const m2 = v2.shop!.model;
    const idx3 = new Map(m3.items.map((id, i) => [id, i]));
    for (const L of Object.keys(m2.lists)) {
      for (let i = 0; i < m2.items.length; i++) {
        const a = new Map<string, number>();
        for (let e = m2.lists[L].offsets[i]; e < m2.lists[L].offsets[i + 1]; e++) a.set(m2.items[m2.lists[L].targets[e]], m2.lists[L].weights[e]);
        const j = idx3.get(m2.items[i])!;
        const b = new Map<string, number>();
        for (let e = m3.lists[L].offsets[j]; e < m3.lists[L].offsets[j + 1]; e++) b.set(m3.items[m3.lists[L].targets[e]], m3.lists[L].weights[e]);
        expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
        for (const [t, w] of a) expect(b.get(t)!).toBeCloseTo(w, 5);
      }
    }
    const d = m2.vectors!.dim;
    for (const id of m2.items) {
      const i = m2.items.indexOf(id);
      const j = idx3.get(id)!;
      for (let c = 0; c < d; c++) expect(m3.vectors!.values[j * d + c]).toBeCloseTo(m2.vectors!.values[i * d + c], 2);
      expect(m3.vectors!.cold[j]).toBe(m2.vectors!.cold[i]);
    }
    // SASRec: int8 item rows score like f32 ones
    const s3 = file.shop!.sasrec!;
    const w3 = s3.weights;
    const hist = ['sku-1', 'sku-3', 'sku-5'];
    const user2 = encodeHistory(
      weights,
      hist.map((id) => sasrecItems.indexOf(id) + 1),
    );
    const user3 = encodeHistory(
      w3,
      hist.map((id) => s3.items.indexOf(id) + 1),
    );
    const cands = ['sku-2', 'sku-4', 'sku-30'];
    const a = scoreItems(
      weights,
      user2,
      cands.map((id) => sasrecItems.indexOf(id) + 1),
    );
    const b = scoreItems(
      w3,
      user3,
      cands.map((id) => s3.items.indexOf(id) + 1),
    );
    cands.forEach((_, k) => expect(b[k]).toBeCloseTo(a[k], 1));
    // the engine's scorer builds from it and scores like the v2 model
    const k3 = new ShopKnowledge(file.shop!.id, m3, { weights: w3, items: s3.items });
    const k2 = new ShopKnowledge(v2.shop!.id, m2, { weights: v2.shop!.sasrec!.weights, items: v2.shop!.sasrec!.items });
    const h = [
      { item: 'sku-1', action: 'purchase' as const, at: 1 },
      { item: 'sku-7', action: 'view' as const, at: 2 },
    ];
    const sig3 = k3.signals(h, cands);
    const sig2 = k2.signals(h, cands);
    for (const name of Object.keys(sig2)) if (name !== 'sasrec') cands.forEach((_, c) => expect(sig3[name][c]).toBeCloseTo(sig2[name][c], 2));
  });

  it('a subset of shards gives the rows of those items only; shardsFor names the shards of given ids', async () => {
    const { vectors, model, weights, sasrecItems } = await fixture();
    const enc = encodeCatalogFileV3({ embedder, items, vectors, shop: { model, sasrec: { weights, items: sasrecItems } }, shardSize: 8, shardPrefix: 's/' });
    const head = decodeCatalogHead(enc.head);
    const K = head.header.shardCount;
    const want = ['sku-0', 'sku-17'];
    const ks = shardsFor(head, want);
    expect(ks).toEqual([...new Set(want.map((id) => shardOfId(id, K)))].sort((a, b) => a - b));
    // an id the file lacks still names the shard it would hash to (the request depends on the ids given only)
    expect(shardsFor(head, ['not-an-item'])).toEqual([shardOfId('not-an-item', K)]);
    const file = assembleCatalogFile(
      head,
      ks.map((k) => decodeCatalogShard(head, k, enc.shards[k].bytes)),
    );
    const loaded = ks.flatMap((k) => enc.order.slice(head.starts[k], head.starts[k + 1]));
    expect(loaded).toEqual(expect.arrayContaining(want));
    expect(file.vectors.size).toBe(loaded.length);
    const other = enc.order.find((id) => !loaded.includes(id))!;
    expect(file.vectors.has(other)).toBe(false);
    const m = file.shop!.model;
    // only the loaded items, in file order, every array sized to them; list targets outside them dropped
    expect(m.items).toEqual(enc.order.filter((id) => loaded.includes(id)));
    expect(m.popularity).toHaveLength(loaded.length);
    expect(m.vectors!.values).toHaveLength(loaded.length * m.vectors!.dim);
    expect(m.items).not.toContain(other);
    const j = m.items.indexOf('sku-0');
    expect(m.popularity[j]).toBeCloseTo(model.popularity[model.items.indexOf('sku-0')], 3);
    const all = assembleCatalogFile(
      head,
      enc.shards.map((x, k) => decodeCatalogShard(head, k, x.bytes)),
    ).shop!.model;
    for (const L of Object.keys(m.lists)) {
      expect(m.lists[L].offsets).toHaveLength(loaded.length + 1);
      m.items.forEach((id, r) => {
        const g = all.items.indexOf(id);
        const want: Array<[string, number]> = [];
        for (let p = all.lists[L].offsets[g]; p < all.lists[L].offsets[g + 1]; p++)
          if (loaded.includes(all.items[all.lists[L].targets[p]])) want.push([all.items[all.lists[L].targets[p]], all.lists[L].weights[p]]);
        const got: Array<[string, number]> = [];
        for (let p = m.lists[L].offsets[r]; p < m.lists[L].offsets[r + 1]; p++) got.push([m.items[m.lists[L].targets[p]], m.lists[L].weights[p]]);
        expect(got).toEqual(want);
      });
    }
    // the same scores for loaded candidates as from the whole file
    const hist = [{ item: 'sku-0', at: 1, action: 'click' as const }];
    const cands = m.items.filter((id) => id !== 'sku-0');
    expect(new ShopKnowledge('part', m).signals(hist, cands)).toEqual(new ShopKnowledge('all', all).signals(hist, cands));
    expect(file.shop!.sasrec!.items.sort()).toEqual(loaded.filter((id) => sasrecItems.includes(id)).sort());
    // tau's pair quantile is the whole catalog's, shipped in the head, not the loaded subset's
    const full = new ShopKnowledge('full', model);
    expect(new ShopKnowledge('part', m).pairQuantile(0.9)).toBe(full.pairQuantile(0.9));
    // the shop part id names the release, not the loaded subset
    expect(file.shop!.id).toBe(assembleCatalogFile(head, []).shop!.id);
  });

  it('without a shop model: catalog order within each shard, content only', async () => {
    const { vectors } = await fixture();
    const enc = encodeCatalogFileV3({ embedder, items, vectors, shardSize: 16, shardPrefix: 'x/' });
    const K = Math.ceil(items.length / 16);
    for (let k = 0; k < K; k++) expect(enc.order.filter((id) => shardOfId(id, K) === k)).toEqual(items.map((i) => i.id).filter((id) => shardOfId(id, K) === k));
    const head = decodeCatalogHead(enc.head);
    const file = assembleCatalogFile(
      head,
      enc.shards.map((s, k) => decodeCatalogShard(head, k, s.bytes)),
    );
    expect(file.shop).toBeUndefined();
    expect(file.vectors.size).toBe(items.length);
  });

  it('int8 content rows are 4× smaller than float32', async () => {
    const { vectors } = await fixture();
    const big = items.map((it, i) => ({ it, v: vectors[i] }));
    const e512 = createHashingEmbedder({ dim: 512 });
    const v512 = (await e512.embed(big.map(({ it }) => itemText(it)))).map((e) => e.vector);
    const v2 = encodeCatalogFile({ embedder: e512, items, vectors: v512 }).length;
    const enc = encodeCatalogFileV3({ embedder: e512, items, vectors: v512, shardSize: 64, shardPrefix: 'x/' });
    const v3 = enc.head.length + enc.shards.reduce((s, x) => s + x.bytes.length, 0);
    expect(v3).toBeLessThan(v2 / 3);
  });

  it('refuses a shard of another release, a flipped byte, truncations and a shard where the head is expected', async () => {
    const { vectors, model } = await fixture();
    const enc = encodeCatalogFileV3({ embedder, items, vectors, shop: { model }, shardSize: 8, shardPrefix: 's/' });
    const head = decodeCatalogHead(enc.head);
    expect(() => decodeCatalogShard(head, 1, enc.shards[0].bytes)).toThrow(CatalogVectorsError);
    expect(() => decodeCatalogShard(head, 1, enc.shards[0].bytes)).toThrow(/another release or is corrupt/);
    expect(() => decodeCatalogHead(enc.shards[0].bytes)).toThrow(/not a v3 head/);
    for (let n = 0; n < enc.head.length; n += 37) expect(() => decodeCatalogHead(enc.head.subarray(0, n))).toThrow(CatalogVectorsError);
    for (let p = 0; p < enc.head.length; p += 13) {
      const bad = enc.head.slice();
      bad[p] ^= 0x40;
      expect(() => decodeCatalogHead(bad)).toThrow(CatalogVectorsError);
    }
    // a shard with a right length/crc in a forged head is still checked inside (section checksums)
    const bytes = enc.shards[2].bytes.slice();
    bytes[bytes.length - 1] ^= 1;
    expect(() => decodeCatalogShard(head, 2, bytes)).toThrow(CatalogVectorsError);
    // the writer refuses ids with NUL (the assembled file's ids of unloaded items hold one) and a prefix outside the head's folder
    expect(() => encodeCatalogFileV3({ embedder, items: [{ id: 'a\u0000b', title: 'x' }], vectors: [vectors[0]], shardPrefix: 's/' })).toThrow(/NUL/);
    expect(() => encodeCatalogFileV3({ embedder, items, vectors, shardPrefix: '../s/' })).toThrow(/relative path below/);
  });

  it('the head holds no per-item data: its size grows with the shard count, not with the ids', async () => {
    const { vectors } = await fixture();
    const long = items.map((it) => ({ ...it, id: `${it.id}-${'x'.repeat(200)}` }));
    const a = encodeCatalogFileV3({ embedder, items, vectors, shardSize: 8, shardPrefix: 's/', createdAt: '2026-01-01T00:00:00.000Z' });
    const b = encodeCatalogFileV3({ embedder, items: long, vectors, shardSize: 8, shardPrefix: 's/', createdAt: '2026-01-01T00:00:00.000Z' });
    expect(b.head.length).toBe(a.head.length);
    const head = decodeCatalogHead(b.head);
    expect(head.header.shards).toHaveLength(5);
    expect(decodeCatalogShard(head, 0, b.shards[0].bytes).ids.every((id) => id.endsWith('x'.repeat(200)))).toBe(true);
  });
});
