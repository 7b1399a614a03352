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

  it('--budget: SASRec gets what the other stages left, and is skipped (exit 0, said so) when that is under 30 s', async () => {
    const base = ['--interactions', join(dir, 'interactions.jsonl'), '--items', join(dir, 'items.jsonl'), '--no-progress'];
    const tight = await run([...base, '--out', join(dir, 'b1.bin'), '--sasrec', join(dir, 'b1.sasrec'), '--budget', '20', '--stats', join(dir, 'b1.json')]);
    expect(tight.code, tight.err).toBe(0);
    expect(tight.err).toMatch(/SASRec not trained: --budget 20: \d+ s left for SASRec \(< 30 s\)/);
    expect(tight.out).toMatch(/SASRec not trained/);
    expect(() => readFileSync(join(dir, 'b1.sasrec'))).toThrow();
    expect(decodeShopModel(readFileSync(join(dir, 'b1.bin'))).items).toHaveLength(12);
    expect(JSON.parse(readFileSync(join(dir, 'b1.json'), 'utf8')).sasrec.skipped).toMatch(/--budget 20/);
    const roomy = await run([
      ...base,
      '--out',
      join(dir, 'b2.bin'),
      '--sasrec',
      join(dir, 'b2.sasrec'),
      '--sasrec-epochs',
      '1',
      '--budget',
      '60',
      '--stats',
      join(dir, 'b2.json'),
    ]);
    expect(roomy.code, roomy.err).toBe(0);
    const stats = JSON.parse(readFileSync(join(dir, 'b2.json'), 'utf8'));
    // 60 s less the seconds already spent, less the write reserve (5 s + 1 s per 100k items)
    expect(stats.sasrec.budgetSeconds).toBeLessThanOrEqual(55);
    expect(stats.sasrec.budgetSeconds).toBeGreaterThan(40);
    expect(stats.sasrec.bytes).toBe(readFileSync(join(dir, 'b2.sasrec')).length);
    expect(Object.keys(stats.stagesCpu)).toEqual(Object.keys(stats.stages));
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
