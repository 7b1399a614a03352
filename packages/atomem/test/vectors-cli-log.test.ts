import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sasrecSequences } from '../src/shop/publish.js';
import { runVectorsCli } from '../src/vectors-cli.js';
import { decodeCatalogFile } from '../src/protocol/catalog-vectors-v2.js';
import { ShopKnowledge } from '../src/shop/device.js';
import { Rng } from '@atomem/bench/rng';

// A small synthetic shop: 12 shoes, 12 pans, 60 shoppers who each stay in one department.
const items = Array.from({ length: 24 }, (_, i) => ({
  id: `sku-${i}`,
  title: `${i < 12 ? 'trail running shoe' : 'cast iron skillet'} model ${i}`,
  categories: [i < 12 ? 'Shoes' : 'Kitchen'],
}));

function syntheticLog(): string {
  const rng = new Rng(5);
  const rows: string[] = [];
  for (let u = 0; u < 60; u++) {
    const g = u % 2;
    for (let k = 0; k < 8; k++)
      rows.push(
        JSON.stringify({
          user: `u${u}`,
          item: `sku-${g * 12 + rng.int(12)}`,
          at: 1_700_000_000_000 + (u * 20 + k) * 60_000,
          action: k % 3 ? 'purchase' : 'view',
        }),
      );
  }
  rows.push(JSON.stringify({ user: 'u1', item: 'not-in-catalog', at: 1_700_000_000_000 }));
  rows.push(JSON.stringify({ user: 42, item: 'sku-3', at: new Date(1_700_000_000_000).toISOString(), action: 'dislike' }));
  return `${rows.join('\n')}\n`;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'atomem-vectors-log-'));
  process.env.XDG_CACHE_HOME = mkdtempSync(join(tmpdir(), 'atomem-vectors-cache-')); // the CLI's default disk cache, away from ~/.cache
  writeFileSync(join(dir, 'catalog.json'), JSON.stringify(items));
  writeFileSync(join(dir, 'interactions.jsonl'), syntheticLog());
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function run(...args: string[]) {
  let stdout = '';
  let stderr = '';
  const code = await runVectorsCli(['--catalog', join(dir, 'catalog.json'), '--out', join(dir, 'out.bin'), '--embedder', 'hashing', ...args], {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

describe('atomem-vectors --log', () => {
  it('the committed browser fixture (test/fixtures/shop-file) decodes and matches its catalog', async () => {
    const { createHashingEmbedder } = await import('../src/embed/hashing.js');
    const { itemText } = await import('../src/embed/cache.js');
    const { itemTextHash } = await import('../src/protocol/catalog-vectors-v1.js');
    const root = new URL('../../../test/fixtures/shop-file/', import.meta.url);
    const cat = JSON.parse(readFileSync(new URL('catalog.json', root), 'utf8')) as { id: string; title: string }[];
    const file = decodeCatalogFile(readFileSync(new URL('catalog-v2.bin', root)));
    const e = createHashingEmbedder({ dim: 256 });
    expect(file.embedder).toBe(e.id);
    const want = await e.embed(cat.map((it) => itemText(it)));
    cat.forEach((it, i) => {
      expect(file.vectors.get(it.id)?.hash).toBe(itemTextHash(it));
      expect(file.vectors.get(it.id)?.vector).toEqual(want[i].vector);
    });
    expect(file.shop!.model.items).toEqual(cat.map((it) => it.id));
    expect(file.shop!.sasrec!.items).toEqual(cat.map((it) => it.id));
  });

  it('trains the shop model and SASRec from the log and writes format v2 that ranks a shoe shopper towards shoes', async () => {
    const r = await run('--log', join(dir, 'interactions.jsonl'), '--sasrec-epochs', '5', '--seed', '3');
    expect(r.stderr).toMatch(/shop model: /);
    expect(r.stderr).toMatch(/SASRec .*100% step \d+, loss \d/);
    expect(r.code, r.stderr).toBe(0);
    // the budgeted trainer: 61 users of batch 128 = 1 step per epoch, 5 epochs at most, held-out last items of the users with ≥ 3 items
    expect(r.stdout).toMatch(
      /\(format v2\).*shop model from 481 log rows of 61 users \(1 rows of unknown items skipped\), no DP.*SASRec [1-5] steps in [\d.]+ s \(\d threads?, stopped by (the 5-epoch bound|early stopping); validation NDCG@10 [\d.]+ on 60 users, weights of step [1-5]\)/,
    );
    const file = decodeCatalogFile(readFileSync(join(dir, 'out.bin')));
    expect(file.version).toBe(2);
    expect(file.vectors.size).toBe(24);
    expect(file.shopInfo).toMatchObject({ logRows: 481, users: 61, skippedUnknownItems: 1, privacy: null, sequence: 'sasrec' });
    expect(file.shopInfo!.sasrec).toMatchObject({ validationUsers: 60 });
    expect((file.shopInfo!.sasrec as { steps: number }).steps).toBeLessThanOrEqual(5);
    const shop = file.shop!;
    expect(shop.model.items).toEqual(items.map((i) => i.id));
    expect(shop.sasrec!.items).toEqual(items.map((i) => i.id));
    expect(shop.model.contentMap?.embedder).toBe(file.embedder); // hybrid: content vectors from this run
    const k = new ShopKnowledge(shop.id, shop.model, { weights: shop.sasrec!.weights, items: shop.sasrec!.items });
    const history = [0, 2, 4].map((i, t) => ({ item: `sku-${i}`, action: 'purchase' as const, at: t }));
    const cands = ['sku-7', 'sku-9', 'sku-19', 'sku-21'];
    const s = k.signals(history, cands);
    for (const name of ['knn', 'vec']) expect(Math.min(s[name][0], s[name][1]), name).toBeGreaterThan(Math.max(s[name][2], s[name][3]));
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('--epsilon makes the shop model DP and leaves SASRec out (said on stdout and in the file); --no-sequence too', async () => {
    const r = await run('--log', join(dir, 'interactions.jsonl'), '--epsilon', '4', '--no-progress');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/\(ε 4, δ 0\.000001\)-DP.*SASRec left out: its training is not differentially private/);
    const file = decodeCatalogFile(readFileSync(join(dir, 'out.bin')));
    expect(file.shop!.model.privacy?.epsilon).toBe(4);
    expect(file.shop!.sasrec).toBeUndefined();
    const n = await run('--log', join(dir, 'interactions.jsonl'), '--no-sequence', '--no-progress');
    expect(n.code, n.stderr).toBe(0);
    expect(n.stdout).toMatch(/no SASRec \(--no-sequence\)/);
    expect(decodeCatalogFile(readFileSync(join(dir, 'out.bin'))).shop!.sasrec).toBeUndefined();
  });

  it('--sasrec-budget ends SASRec at the budget (said on stdout and in the file); SASRec flags need --log and a sequence model', async () => {
    const r = await run('--log', join(dir, 'interactions.jsonl'), '--no-progress', '--sasrec-budget', '0.001', '--sasrec-epochs', '10000');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/SASRec \d+ steps in [\d.]+ s \(\d threads?, stopped by the 0\.001 s budget; validation NDCG@10/);
    const file = decodeCatalogFile(readFileSync(join(dir, 'out.bin')));
    expect(file.shopInfo!.sasrec).toMatchObject({ stoppedBy: 'budget' });
    expect(file.shop!.sasrec).toBeDefined();
    const cases: [string[], RegExp][] = [
      [['--sasrec-budget', '30'], /--sasrec-budget applies with --log only/],
      [['--sasrec-epochs', '3'], /--sasrec-epochs applies with --log only/],
      [['--log', join(dir, 'interactions.jsonl'), '--no-sequence', '--sasrec-budget', '30'], /--sasrec-budget with --no-sequence/],
      [['--log', join(dir, 'interactions.jsonl'), '--sasrec-budget', '0'], /--sasrec-budget must be a number > 0/],
    ];
    for (const [args, why] of cases) {
      rmSync(join(dir, 'out.bin'), { force: true });
      const bad = await run(...args);
      expect(bad.code, args.join(' ')).toBe(2);
      expect(bad.stderr).toMatch(why);
      expect(existsSync(join(dir, 'out.bin'))).toBe(false);
    }
  });

  it('reads the log streamed, gzipped when it ends in .gz: the same rows and model as the plain file', async () => {
    const { gzipSync } = await import('node:zlib');
    writeFileSync(join(dir, 'interactions.jsonl.gz'), gzipSync(readFileSync(join(dir, 'interactions.jsonl'))));
    const plain = await run('--log', join(dir, 'interactions.jsonl'), '--no-sequence', '--no-progress', '--out', join(dir, 'plain.bin'));
    expect(plain.code, plain.stderr).toBe(0);
    const gz = await run('--log', join(dir, 'interactions.jsonl.gz'), '--no-sequence', '--no-progress', '--out', join(dir, 'gz.bin'));
    expect(gz.code, gz.stderr).toBe(0);
    const [a, b] = ['plain.bin', 'gz.bin'].map((f) => decodeCatalogFile(readFileSync(join(dir, f))));
    expect(b.shopInfo).toMatchObject({ logRows: 481, users: 61, skippedUnknownItems: 1 });
    expect(b.shop!.model.lists).toEqual(a.shop!.model.lists);
    expect(b.shop!.model.popularity).toEqual(a.shop!.model.popularity);
  });

  it('--until keeps only earlier rows; --help says SASRec is not DP', async () => {
    const r = await run('--log', join(dir, 'interactions.jsonl'), '--no-sequence', '--no-progress', '--until', String(1_700_000_000_000 + 600 * 60_000));
    expect(r.code, r.stderr).toBe(0);
    expect(decodeCatalogFile(readFileSync(join(dir, 'out.bin'))).shopInfo).toMatchObject({ logRows: 240 + 1, skippedAfterUntil: 240 });
    let help = '';
    expect(await runVectorsCli(['--help'], { stdout: { write: (s: string) => (help += s) }, stderr: { write: () => 0 } })).toBe(0);
    expect(help).toMatch(/--epsilon <x>.*SASRec is not DP and is then left out/s);
    expect(help).toMatch(/--no-sequence/);
  });

  it('a bad log is a usage error naming the line, and nothing is written', async () => {
    const cases: [string, RegExp][] = [
      ['{"user":"a","item":"sku-1","at":1}\nnot json\n', /line 2 is not valid JSON/],
      ['{"user":"a","item":"sku-1"}\n', /line 1: "at" must be epoch milliseconds or an ISO date/],
      ['{"user":"a","item":"sku-1","at":1,"action":"buy"}\n', /line 1: unknown action "buy"/],
      ['{"item":"sku-1","at":1}\n', /line 1: "user" is missing/],
      ['{"user":"a","item":"nope","at":1}\n', /no usable rows \(1 of items not in the catalog\)/],
    ];
    for (const [text, why] of cases) {
      writeFileSync(join(dir, 'bad.jsonl'), text);
      const r = await run('--log', join(dir, 'bad.jsonl'), '--no-progress');
      expect(r.code, text).toBe(2);
      expect(r.stderr).toMatch(why);
      expect(existsSync(join(dir, 'out.bin'))).toBe(false);
    }
    const missing = await run('--log', join(dir, 'none.jsonl'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/cannot read --log .*none\.jsonl: no such file/);
    const noLog = await run('--epsilon', '2');
    expect(noLog.code).toBe(2);
    expect(noLog.stderr).toMatch(/--epsilon applies with --log only/);
  });

  it('SASRec sequences hold positive actions in time order, as catalog indices', () => {
    const seqs = sasrecSequences(
      [
        { user: 'a', item: 'y', at: 3 },
        { user: 'a', item: 'x', at: 1 },
        { user: 'a', item: 'z', at: 2, action: 'dislike' },
        { user: 'b', item: 'z', at: 1, action: 'purchase' },
      ],
      ['x', 'y', 'z'],
    );
    expect(seqs.map((s) => [...s])).toEqual([[1, 2], [3]]);
  });
});
