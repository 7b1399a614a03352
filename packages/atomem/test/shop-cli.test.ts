import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../src/shop/cli.js';
import { decodeShopModel } from '../src/protocol/shop-model-v1.js';
import { encodeCatalogVectors } from '../src/protocol/catalog-vectors-v1.js';
import { encodeCatalogFile } from '../src/protocol/catalog-vectors-v2.js';
import type { Item } from '../src/core/types.js';

const dir = mkdtempSync(join(tmpdir(), 'atomem-shop-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  return main(args, { stdout: (s) => (out += s), stderr: (s) => (err += s) }).then((code) => ({ code, out, err }));
}

describe('atomem-shop CLI', () => {
  const items: Item[] = Array.from({ length: 12 }, (_, i) => ({ id: `sku-${i}`, title: `${i < 6 ? 'Jazz' : 'Metal'} record ${i}` }));
  writeFileSync(join(dir, 'items.jsonl'), items.map((x) => JSON.stringify(x)).join('\n'));
  const rows: string[] = [];
  for (let u = 0; u < 20; u++)
    for (let k = 0; k < 4; k++)
      rows.push(
        JSON.stringify({ user: `u${u}`, item: `sku-${(u % 2) * 6 + ((u + k) % 5)}`, at: new Date(Date.UTC(2025, 0, 1 + k)).toISOString(), action: 'purchase' }),
      );
  rows.push(JSON.stringify({ user: 'u1', item: 'not-in-catalog', at: 1 }));
  writeFileSync(join(dir, 'interactions.jsonl'), rows.join('\n'));
  // content vectors for every item, sku-5 and sku-11 never bought
  const vectors = items.map((_, i) => Float32Array.from({ length: 8 }, (_, d) => (d === (i < 6 ? 0 : 1) ? 1 : 0.05 * d)));
  writeFileSync(join(dir, 'vectors.bin'), encodeCatalogVectors({ id: 'toy@1', dim: 8 }, items, vectors));

  it('writes a model file from the export, with content vectors for the unsold items', async () => {
    const out = join(dir, 'model.bin');
    const r = await run([
      '--interactions',
      join(dir, 'interactions.jsonl'),
      '--items',
      join(dir, 'items.jsonl'),
      '--content',
      join(dir, 'vectors.bin'),
      '--out',
      out,
      '--dim',
      '4',
    ]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/12 items \(2 with content-only vectors\), 80 log rows \(1 of unknown items skipped\), no DP/);
    const model = decodeShopModel(readFileSync(out));
    expect(model.items).toHaveLength(12);
    expect(model.contentMap?.embedder).toBe('toy@1');
    expect(model.vectors!.cold[model.items.indexOf('sku-5')]).toBe(1);
    // the same content rows in a catalog vector file v2 (atomem-vectors --log writes v2)
    writeFileSync(join(dir, 'vectors-v2.bin'), encodeCatalogFile({ embedder: { id: 'toy@1', dim: 8 }, items, vectors }));
    const v2 = await run([
      '--interactions',
      join(dir, 'interactions.jsonl'),
      '--items',
      join(dir, 'items.jsonl'),
      '--content',
      join(dir, 'vectors-v2.bin'),
      '--out',
      join(dir, 'model2.bin'),
      '--dim',
      '4',
    ]);
    expect(v2.code, v2.err).toBe(0);
    expect(v2.out).toMatch(/12 items \(2 with content-only vectors\)/);
    expect(decodeShopModel(readFileSync(join(dir, 'model2.bin'))).contentMap?.embedder).toBe('toy@1');
  });

  it('publishes a DP file with --epsilon', async () => {
    const out = join(dir, 'dp.bin');
    const r = await run(['--interactions', join(dir, 'interactions.jsonl'), '--items', join(dir, 'items.jsonl'), '--out', out, '--epsilon', '4']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\(ε 4, δ 0\.000001\)-DP/);
    expect(decodeShopModel(readFileSync(out)).privacy?.epsilon).toBe(4);
  });

  it('exits 2 with one clear line on bad input', async () => {
    writeFileSync(join(dir, 'bad.jsonl'), '{"user": "u", "item": "sku-1", "at": "yesterday-ish"}\n');
    const bad = await run(['--interactions', join(dir, 'bad.jsonl'), '--items', join(dir, 'items.jsonl'), '--out', join(dir, 'x.bin')]);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/bad\.jsonl:1: "at" must be/);
    const missing = await run(['--interactions', join(dir, 'nope.jsonl'), '--items', join(dir, 'items.jsonl'), '--out', join(dir, 'x.bin')]);
    expect(missing.code).toBe(2);
    expect((await run(['--items', 'x'])).code).toBe(2);
    const vectors = await run([
      '--interactions',
      join(dir, 'interactions.jsonl'),
      '--items',
      join(dir, 'items.jsonl'),
      '--content',
      join(dir, 'items.jsonl'),
      '--out',
      join(dir, 'x.bin'),
    ]);
    expect(vectors.code).toBe(2);
    expect(vectors.err).toMatch(/--content/);
  });
});
