import { describe, expect, it } from 'vitest';
import { CatalogVectorsError, encodeCatalogVectors } from '../src/protocol/catalog-vectors-v1.js';
import { crc32, decodeCatalogFile, encodeCatalogFile } from '../src/protocol/catalog-vectors-v2.js';
import { encodeHistory, scoreItems } from '../src/shop/sasrec/model.js';
import { ShopKnowledge } from '../src/shop/device.js';
import { Rng } from '@atomem/bench/rng';
import { shopEmbedder, shopFileParts, twoDepartmentItems } from '../../../test/fixtures/shop-catalog.js';

const items = twoDepartmentItems(24);
const embedder = shopEmbedder;
const fixture = () => shopFileParts(items, { users: 40, perUser: 5, pick: (rng, half) => rng.int(half) });

describe('catalog vector file v2', () => {
  it("crc32 is zlib's", () => {
    expect(crc32(new TextEncoder().encode('123456789'))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array())).toBe(0);
  });

  it('round-trips content rows, the shop model and SASRec (f32 item embedding exactly); the shop part builds a ShopKnowledge', async () => {
    const { vectors, model, weights, sasrecItems } = await fixture();
    const bytes = encodeCatalogFile({
      embedder,
      items,
      vectors,
      shop: { model, sasrec: { weights, items: sasrecItems, itemEmbedding: 'f32' }, info: { logRows: 200 } },
      createdAt: '2026-01-01T00:00:00.000Z',
    });
    const file = decodeCatalogFile(bytes);
    expect(file.version).toBe(2);
    expect(file.embedder).toBe(embedder.id);
    expect(file.dim).toBe(32);
    expect(file.createdAt).toBe('2026-01-01T00:00:00.000Z');
    expect(file.shopInfo).toEqual({ logRows: 200 });
    items.forEach((it, i) => expect(file.vectors.get(it.id)!.vector).toEqual(vectors[i]));
    const shop = file.shop!;
    expect(shop.model.items).toEqual(model.items);
    expect(shop.model.vectors!.dim).toBe(4);
    expect(shop.sasrec!.items).toEqual(sasrecItems);
    expect(shop.sasrec!.weights.itemEmb).toEqual(weights.itemEmb);
    const hist = [1, 3, 5];
    expect(scoreItems(shop.sasrec!.weights, encodeHistory(shop.sasrec!.weights, hist), [2, 4])).toEqual(
      scoreItems(weights, encodeHistory(weights, hist), [2, 4]),
    );
    expect(shop.id).toMatch(/^[0-9a-f]{24}$/);
    const k = new ShopKnowledge(shop.id, shop.model, { weights: shop.sasrec!.weights, items: shop.sasrec!.items });
    const s = k.signals([{ item: 'sku-1', action: 'purchase', at: 1 }], ['sku-2', 'sku-20']);
    expect(Object.keys(s)).toContain('sasrec');
    // same models → same id; a different model → another id
    expect(
      decodeCatalogFile(encodeCatalogFile({ embedder, items, vectors, shop: { model, sasrec: { weights, items: sasrecItems, itemEmbedding: 'f32' } } })).shop!
        .id,
    ).toBe(shop.id);
    expect(decodeCatalogFile(encodeCatalogFile({ embedder, items, vectors, shop: { model } })).shop!.id).not.toBe(shop.id);
  });

  it('without a shop part it is v1 in a v2 container; v1 files read through the same entry', async () => {
    const { vectors } = await fixture();
    const v2 = decodeCatalogFile(encodeCatalogFile({ embedder, items, vectors }));
    expect(v2.version).toBe(2);
    expect(v2.shop).toBeUndefined();
    const v1 = decodeCatalogFile(encodeCatalogVectors(embedder, items, vectors));
    expect(v1.version).toBe(1);
    expect(v1.shop).toBeUndefined();
    items.forEach((it, i) => {
      expect(v1.vectors.get(it.id)).toEqual(v2.vectors.get(it.id));
      expect(v1.vectors.get(it.id)!.vector).toEqual(vectors[i]);
    });
  });

  it('every truncation and every single flipped byte is refused with a CatalogVectorsError that says why', async () => {
    const { vectors, model, weights, sasrecItems } = await fixture();
    const bytes = encodeCatalogFile({
      embedder,
      items: items.slice(0, 4),
      vectors: vectors.slice(0, 4),
      shop: { model, sasrec: { weights, items: sasrecItems } },
    });
    const messages = new Set<string>();
    for (let n = 0; n < bytes.length; n += Math.max(1, Math.floor(bytes.length / 400))) {
      let err: unknown;
      try {
        decodeCatalogFile(bytes.subarray(0, n));
      } catch (e) {
        err = e;
      }
      expect(err, `truncated to ${n} bytes`).toBeInstanceOf(CatalogVectorsError);
      messages.add((err as Error).message.replace(/[0-9]+/g, 'N'));
    }
    expect([...messages].some((m) => /truncated/.test(m))).toBe(true);
    const rng = new Rng(9);
    for (let t = 0; t < 300; t++) {
      const bad = bytes.slice();
      const at = rng.int(bad.length);
      bad[at] ^= 1 + rng.int(255);
      let err: unknown;
      try {
        decodeCatalogFile(bad);
      } catch (e) {
        err = e;
      }
      // a flip in the alignment padding is harmless (no data); anything else must be caught
      if (err === undefined) {
        const file = decodeCatalogFile(bad);
        expect(file.shop!.id).toBe(decodeCatalogFile(bytes).shop!.id);
        continue;
      }
      expect(err, `byte ${at} flipped`).toBeInstanceOf(CatalogVectorsError);
      expect((err as Error).message).toMatch(/not a valid catalog vector file: /);
    }
    const extra = new Uint8Array(bytes.length + 4);
    extra.set(bytes);
    expect(() => decodeCatalogFile(extra)).toThrow(/its sections end at/);
    const v9 = bytes.slice();
    v9[4] = 9;
    expect(() => decodeCatalogFile(v9)).toThrow(/format version 9, this atomem reads 1, 2 and 3/);
    expect(() => decodeCatalogFile(new TextEncoder().encode('hello world, not a file'))).toThrow(/does not start with "ATMV"/);
  });

  it('a section checksum mismatch names the section; a corrupt model behind a valid checksum is refused too', async () => {
    const { vectors, model } = await fixture();
    const bytes = encodeCatalogFile({ embedder, items, vectors, shop: { model } });
    const bad = bytes.slice();
    bad[bad.length - 5] ^= 0xff; // inside the shop section (the last one)
    expect(() => decodeCatalogFile(bad)).toThrow(/checksum of section "shop" does not match/);
    // a writer that put garbage in the shop section with a correct checksum
    const garbage = encodeCatalogFile({ embedder, items, vectors });
    const dv = new DataView(garbage.buffer);
    const hlen = dv.getUint32(8, true);
    const header = JSON.parse(new TextDecoder().decode(garbage.subarray(16, 16 + hlen)));
    const junk = new TextEncoder().encode('JUNKJUNK');
    const end = header.sections[0].bytes;
    header.sections.push({ name: 'shop', offset: end, bytes: junk.length, crc32: crc32(junk) });
    const json = new TextEncoder().encode(JSON.stringify(header));
    const start = (16 + json.length + 3) & ~3;
    const out = new Uint8Array(start + end + junk.length);
    out.set(garbage.subarray(0, 8));
    new DataView(out.buffer).setUint32(8, json.length, true);
    new DataView(out.buffer).setUint32(12, crc32(json), true);
    out.set(json, 16);
    out.set(garbage.subarray((16 + hlen + 3) & ~3, ((16 + hlen + 3) & ~3) + end), start);
    out.set(junk, start + end);
    expect(() => decodeCatalogFile(out)).toThrow(/its shop model does not decode: not a valid shop model file/);
  });

  it('the encoder refuses inconsistent input', async () => {
    const { vectors, model, weights } = await fixture();
    expect(() => encodeCatalogFile({ embedder, items, vectors: vectors.slice(1) })).toThrow(/24 items but 23 vectors/);
    expect(() => encodeCatalogFile({ embedder, items: [items[0], items[0]], vectors: [vectors[0], vectors[0]] })).toThrow(/appears twice/);
    expect(() => encodeCatalogFile({ embedder, items, vectors, shop: { model, sasrec: { weights, items: [...items.map((i) => i.id), 'extra'] } } })).toThrow(
      /25 SASRec item ids for a model of 24/,
    );
  });
});
