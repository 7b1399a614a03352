import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runVectorsCli } from '../src/vectors-cli.js';
import { VectorDiskCache } from '../src/embed/vectors-disk-cache.js';
import { decodeCatalogFile } from '../src/protocol/catalog-vectors-v2.js';
import { assembleCatalogFile, decodeCatalogHead, decodeCatalogShard, shardsFor } from '../src/protocol/catalog-vectors-v3.js';
import { ShopKnowledge } from '../src/shop/device.js';
import { Rng } from '@atomem/bench/rng';

const items = Array.from({ length: 30 }, (_, i) => ({
  id: `sku-${i}`,
  title: `${i < 15 ? 'trail running shoe' : 'cast iron skillet'} model ${i}`,
  categories: [i < 15 ? 'Shoes' : 'Kitchen'],
}));

function log(): string {
  const rng = new Rng(5);
  const rows: string[] = [];
  for (let u = 0; u < 60; u++) {
    const g = u % 2;
    for (let k = 0; k < 8; k++)
      rows.push(JSON.stringify({ user: `u${u}`, item: `sku-${g * 15 + rng.int(15)}`, at: 1_700_000_000_000 + (u * 20 + k) * 60_000, action: 'purchase' }));
  }
  return `${rows.join('\n')}\n`;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'atomem-vectors-shards-'));
  writeFileSync(join(dir, 'catalog.json'), JSON.stringify(items));
  writeFileSync(join(dir, 'interactions.jsonl'), log());
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runVectorsCli(args, { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } });
  return { code, stdout, stderr };
}

describe('atomem-vectors: disk cache', () => {
  it('a second run embeds nothing; an edited and a new item are embedded; vectors are bit-identical to a run without cache', async () => {
    const cache = join(dir, 'cache.bin');
    const base = ['--catalog', join(dir, 'catalog.json'), '--embedder', 'hashing', '--cache', cache, '--no-progress'];
    let r = await run(...base, '--out', join(dir, 'a.bin'));
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/; 0 from the cache, 30 embedded at [0-9]+ items\/s \(cache /);
    r = await run(...base, '--out', join(dir, 'b.bin'));
    expect(r.stdout).toMatch(/\(model not loaded: every item cached\); 30 from the cache, 0 embedded at - items\/s/);
    const [a, b] = ['a.bin', 'b.bin'].map((f) => decodeCatalogFile(readFileSync(join(dir, f))));
    for (const it of items) expect(b.vectors.get(it.id)).toEqual(a.vectors.get(it.id));
    const edited = [...items.slice(0, 29), { ...items[29], title: 'enamel dutch oven' }, { id: 'sku-new', title: 'wool socks' }];
    writeFileSync(join(dir, 'catalog.json'), JSON.stringify(edited));
    r = await run(...base, '--out', join(dir, 'c.bin'));
    expect(r.stdout).toMatch(/; 29 from the cache, 2 embedded at /);
    const plain = await run('--catalog', join(dir, 'catalog.json'), '--embedder', 'hashing', '--no-cache', '--no-progress', '--out', join(dir, 'd.bin'));
    expect(plain.stdout).toMatch(/0 from the cache, 31 embedded .*\(no cache\)/);
    const c = decodeCatalogFile(readFileSync(join(dir, 'c.bin')));
    const d = decodeCatalogFile(readFileSync(join(dir, 'd.bin')));
    for (const it of edited) expect(c.vectors.get(it.id)).toEqual(d.vectors.get(it.id));
  });

  it('an interrupted append (partial last record) is cut off; a cache of another embedder is replaced', async () => {
    const cache = join(dir, 'cache.bin');
    const base = ['--catalog', join(dir, 'catalog.json'), '--embedder', 'hashing', '--cache', cache, '--no-progress', '--out', join(dir, 'a.bin')];
    await run(...base);
    truncateSync(cache, statSync(cache).size - 100);
    let r = await run(...base);
    expect(r.stderr).toMatch(/partial record .* cut off/);
    expect(r.stdout).toMatch(/; 29 from the cache, 1 embedded/);
    expect((await VectorDiskCache.open(cache, 'hashing-256@1', 256)).info.records).toBe(30);
    r = await run(...base, '--dim', '64');
    expect(r.stderr).toMatch(/made for hashing-256@1 \(256-d\); it is replaced/);
    expect(r.stdout).toMatch(/; 0 from the cache, 30 embedded/);
    expect((await VectorDiskCache.open(cache, 'hashing-64@1', 64)).info.records).toBe(30);
  });
});

describe('atomem-vectors --shards (format v3)', () => {
  it('writes a head and checksum-named shards that assemble into the trained model', async () => {
    const out = join(dir, 'catalog.bin');
    const args = [
      '--catalog',
      join(dir, 'catalog.json'),
      '--log',
      join(dir, 'interactions.jsonl'),
      '--embedder',
      'hashing',
      '--sasrec-epochs',
      '3',
      '--no-progress',
      '--cache',
      join(dir, 'cache.bin'),
      '--shards',
      '8',
      '--out',
      out,
    ];
    const r = await run(...args);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\(format v3: head [0-9]+ bytes, 4 shards of [0-9]+ bytes in .*catalog\.bin\.shards\/, 4 new\)/);
    const head = decodeCatalogHead(readFileSync(out));
    expect(head.header.shards.map((s) => s.name)).toEqual(
      readdirSync(join(dir, 'catalog.bin.shards'))
        .sort()
        .map((f) => `catalog.bin.shards/${f}`),
    );
    const shards = head.header.shards.map((s, k) => decodeCatalogShard(head, k, readFileSync(join(dir, s.name))));
    const file = assembleCatalogFile(head, shards);
    expect(file.vectors.size).toBe(30);
    const k = new ShopKnowledge(file.shop!.id, file.shop!.model, { weights: file.shop!.sasrec!.weights, items: file.shop!.sasrec!.items });
    const sig = k.signals([{ item: 'sku-1', action: 'purchase', at: 1_700_000_000_000 }], ['sku-2', 'sku-20']);
    expect(sig.knn[0]).toBeGreaterThan(sig.knn[1]); // a shoe buyer's neighbours are shoes
  });

  it('a nightly re-run after one edited title writes one new shard; the others keep their names (and stay cached on phones)', async () => {
    const out = join(dir, 'catalog.bin');
    const args = [
      '--catalog',
      join(dir, 'catalog.json'),
      '--embedder',
      'hashing',
      '--no-progress',
      '--cache',
      join(dir, 'cache.bin'),
      '--shards',
      '8',
      '--out',
      out,
    ];
    expect((await run(...args)).code).toBe(0);
    const head = decodeCatalogHead(readFileSync(out));
    writeFileSync(join(dir, 'catalog.json'), JSON.stringify(items.map((it) => (it.id === 'sku-20' ? { ...it, title: 'enamel dutch oven' } : it))));
    const r = await run(...args);
    expect(r.stdout).toMatch(/4 shards .*, 1 new, 1 of earlier releases left/);
    expect(r.stdout).toMatch(/29 from the cache, 1 embedded/);
    const head2 = decodeCatalogHead(readFileSync(out));
    const changed = head2.header.shards.filter((s, i) => s.name !== head.header.shards[i].name).map((s) => s.name);
    expect(changed).toEqual(shardsFor(head2, ['sku-20']).map((k) => head2.header.shards[k].name));
  });

  it("--shop-model publishes a v2 file's shop part as v3 without training", async () => {
    const v2 = join(dir, 'v2.bin');
    expect(
      (
        await run(
          '--catalog',
          join(dir, 'catalog.json'),
          '--log',
          join(dir, 'interactions.jsonl'),
          '--embedder',
          'hashing',
          '--sasrec-epochs',
          '2',
          '--no-progress',
          '--no-cache',
          '--out',
          v2,
        )
      ).code,
    ).toBe(0);
    const out = join(dir, 'c.bin');
    const r = await run(
      '--catalog',
      join(dir, 'catalog.json'),
      '--shop-model',
      v2,
      '--embedder',
      'hashing',
      '--no-progress',
      '--no-cache',
      '--shards',
      '--out',
      out,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/format v3: head .* 2 shards .*; shop model from /); // 30 items, 16 per shard by default
    const head = decodeCatalogHead(readFileSync(out));
    expect(head.header.shop!.sasrec).toBeTruthy();
    const want = decodeCatalogFile(readFileSync(v2)).shop!.model;
    const got = assembleCatalogFile(
      head,
      head.header.shards.map((s, k) => decodeCatalogShard(head, k, readFileSync(join(dir, s.name)))),
    ).shop!.model;
    expect([...got.items].sort()).toEqual([...want.items].sort());
    expect(
      (await run('--catalog', join(dir, 'catalog.json'), '--shop-model', v2, '--log', join(dir, 'interactions.jsonl'), '--embedder', 'hashing', '--out', out))
        .code,
    ).toBe(2);
    expect(
      (await run('--catalog', join(dir, 'catalog.json'), '--shop-model', join(dir, 'catalog.json'), '--embedder', 'hashing', '--out', out)).stderr,
    ).toMatch(/--shop-model .*catalog\.json: /);
  });

  it("--shop-model with --sasrec publishes atomem-shop's two files (shop model v1 and SASRec) as v3, SASRec rows in the shards", async () => {
    writeFileSync(join(dir, 'items.jsonl'), `${items.map((it) => JSON.stringify(it)).join('\n')}\n`);
    const { main } = await import('../src/shop/cli.js');
    const quiet = { stdout: () => undefined, stderr: () => undefined };
    const shopArgs = ['--interactions', join(dir, 'interactions.jsonl'), '--items', join(dir, 'items.jsonl'), '--no-progress'];
    expect(
      await main([...shopArgs, '--out', join(dir, 'shop.bin'), '--sasrec', join(dir, 'sasrec.bin'), '--sasrec-budget', '5', '--sasrec-epochs', '2'], quiet),
    ).toBe(0);
    const out = join(dir, 'c.bin');
    const common = ['--catalog', join(dir, 'catalog.json'), '--embedder', 'hashing', '--no-progress', '--no-cache', '--shards', '--out', out];
    const r = await run(...common, '--shop-model', join(dir, 'shop.bin'), '--sasrec', join(dir, 'sasrec.bin'));
    expect(r.code, r.stderr).toBe(0);
    const head = decodeCatalogHead(readFileSync(out));
    expect(head.header.shop!.sasrec).toEqual({ dim: 64 });
    expect(head.header.shopInfo).toMatchObject({ sequence: 'sasrec', sasrecModel: 'sasrec.bin' });
    const file = assembleCatalogFile(
      head,
      head.header.shards.map((s, k) => decodeCatalogShard(head, k, readFileSync(join(dir, s.name)))),
    );
    expect([...file.shop!.sasrec!.items].sort()).toEqual(items.map((it) => it.id).sort());
    // the wrong SASRec file (another shop's size), --sasrec without --shop-model
    writeFileSync(
      join(dir, 'few.jsonl'),
      `${items
        .slice(0, 20)
        .map((it) => JSON.stringify(it))
        .join('\n')}\n`,
    );
    expect(
      await main(
        [
          '--interactions',
          join(dir, 'interactions.jsonl'),
          '--items',
          join(dir, 'few.jsonl'),
          '--no-progress',
          '--out',
          join(dir, 'few.bin'),
          '--sasrec',
          join(dir, 'few-sasrec.bin'),
          '--sasrec-budget',
          '5',
          '--sasrec-epochs',
          '1',
        ],
        quiet,
      ),
    ).toBe(0);
    const wrong = await run(...common, '--shop-model', join(dir, 'shop.bin'), '--sasrec', join(dir, 'few-sasrec.bin'));
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/--sasrec .*few-sasrec\.bin: a model of \d+ items, the shop model has 30/);
    const alone = await run(...common, '--sasrec', join(dir, 'sasrec.bin'));
    expect(alone.code).toBe(2);
    expect(alone.stderr).toMatch(/--sasrec applies with --shop-model only/);
  });
});
