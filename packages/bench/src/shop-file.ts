/**
 * `npm run bench:shop-file -- --items 10000,100000 [--shard-size 16,32,128] [--visits 200] [--k 24] [--seed 1] [--json FILE]`
 * (`--shard-size`: items per shard, one or more; default the CLI's, 16)
 *
 * The bytes a shopper's phone downloads from a shop of N items: the catalog vector file as
 * format v2 (one file, float32 content vectors: what every first visit downloaded) against
 * format v3 (a head and item shards, `packages/atomem/src/protocol/catalog-vectors-v3.ts`), both written by the
 * shipped CLI (`atomem-vectors`, spawned as `npm run vectors` runs it) from the same seeded
 * synthetic shop:
 * - catalog: N products with titles and categories, embedded with the `hashing` embedder at 512
 *   dimensions (USE-lite's size, so the bytes are a USE-lite shop's; USE-lite itself would take
 *   hours to embed 100k items here);
 * - shop model (`--shop-model`): Zipf popularity (s = 1) over a shuffled catalog, `ease`, `knn`
 *   and `markov` neighbour lists of `--k` popularity-biased targets mostly in the item's
 *   category, 32-d collaborative vectors (30 % cold), a 512 → 32 content map, and a SASRec model
 *   of the shipped shape (SASREC_DEFAULTS: 64-d, 2 blocks) over every item — random values:
 *   the bench measures bytes, not quality (quality: the ML-100K run in BENCHMARKS.md).
 *
 * Visits are simulated by computing which shards they touch (not in Chromium: the browser test
 * `packages/atomem/test/browser/shop-file.test.ts` checks that the worker fetches exactly the shards of its
 * page's items, which is what is counted here):
 * - first visit: a category page of 24 products drawn by popularity → the head and their shards;
 * - 20-event visit: the landing page, then 20 product pages — the next product is one of the
 *   current one's `knn` neighbours (70 %) or a new popularity draw — each giving the engine the
 *   product and its 20 strongest neighbours to rank (a "related products" widget): the head once
 *   and the union of the shards of every page's items (the worker caches shards across pages).
 * Figures: mean and p90 over `--visits` seeded visits.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DEFAULT_SHARD_SIZE, encodeCatalogFile, decodeCatalogHead, shardsFor, type CatalogHead } from 'atomem/protocol';
import { SASREC_DEFAULTS, makeLayout, weightsView, type ShopModel } from 'atomem/shop';
import { Rng } from './rng.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

interface Options {
  items: number[];
  shardSizes: number[];
  visits: number;
  seed: number;
  k: number;
  json?: string;
}

function parseArgs(argv: string[]): Options {
  const o: Options = { items: [10_000, 100_000], shardSizes: [DEFAULT_SHARD_SIZE], visits: 200, seed: 1, k: 24 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    const int = (name: string, min: number): number => {
      const n = Number(v);
      if (!Number.isInteger(n) || n < min) throw new Error(`${name} needs an integer ≥ ${min}, got ${v}`);
      i++;
      return n;
    };
    if (a === '--items') {
      o.items = (v ?? '').split(',').map(Number);
      if (!o.items.length || o.items.some((n) => !Number.isInteger(n) || n < 100)) throw new Error(`--items needs comma-separated integers ≥ 100, got ${v}`);
      i++;
    } else if (a === '--shard-size') {
      o.shardSizes = (v ?? '').split(',').map(Number);
      if (!o.shardSizes.length || o.shardSizes.some((n) => !Number.isInteger(n) || n < 1 || n > 65536))
        throw new Error(`--shard-size needs comma-separated integers in 1..65536, got ${v}`);
      i++;
    } else if (a === '--visits') o.visits = int(a, 1);
    else if (a === '--seed') o.seed = int(a, 0);
    else if (a === '--k') o.k = int(a, 1);
    else if (a === '--json') {
      if (!v) throw new Error('--json needs a file');
      o.json = v;
      i++;
    } else if (a === '--help') {
      process.stdout.write('npm run bench:shop-file -- [--items 10000,100000] [--shard-size 32[,128,…]] [--visits 200] [--k 24] [--seed 1] [--json FILE]\n');
      process.exit(0);
    } else throw new Error(`unknown option ${a} (see --help)`);
  }
  return o;
}

const WORDS = ['trail', 'road', 'wool', 'linen', 'cast iron', 'enamel', 'oak', 'steel', 'ceramic', 'leather', 'canvas', 'bamboo'];
const NOUNS = ['shoe', 'jacket', 'pan', 'pot', 'lamp', 'chair', 'mug', 'bag', 'scarf', 'knife', 'bowl', 'sock'];
const CATEGORIES = 200;

/** Zipf(s = 1) sampler over ranks 0..n−1 (inverse CDF over a cumulative table). */
function zipf(n: number): (r: Rng) => number {
  const cdf = new Float64Array(n);
  let s = 0;
  for (let i = 0; i < n; i++) cdf[i] = s += 1 / (i + 1);
  return (r) => {
    const x = r.next() * s;
    let lo = 0;
    let hi = n - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cdf[mid] < x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

interface Shop {
  ids: string[];
  /** byRank[r] = item index of popularity rank r. */
  byRank: Int32Array;
  model: ShopModel;
  sasrec: ReturnType<typeof weightsView>;
}

function syntheticShop(n: number, k: number, seed: number): { catalog: string; shop: Shop } {
  const r = new Rng(seed);
  const ids = Array.from({ length: n }, (_, i) => `p${i}`);
  const category = Int32Array.from({ length: n }, () => r.int(CATEGORIES));
  const lines = ids.map((id, i) =>
    JSON.stringify({ id, title: `${WORDS[r.int(WORDS.length)]} ${NOUNS[r.int(NOUNS.length)]} ${i}`, categories: [`category ${category[i]}`] }),
  );
  const byRank = Int32Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = r.int(i + 1);
    [byRank[i], byRank[j]] = [byRank[j], byRank[i]];
  }
  const rankOf = new Int32Array(n);
  byRank.forEach((item, rank) => (rankOf[item] = rank));
  const popularity = Float32Array.from({ length: n }, (_, i) => Math.max(1, Math.round((50 * n) / 10 / (rankOf[i] + 1))));
  // items per category by popularity rank, for same-category draws
  const inCategory: number[][] = Array.from({ length: CATEGORIES }, () => []);
  for (const item of byRank) inCategory[category[item]].push(item);
  const draw = zipf(n);
  const drawIn = new Map<number, (r: Rng) => number>();
  const list = (kk: number): ShopModel['lists'][string] => {
    const offsets = new Uint32Array(n + 1);
    const targets: number[] = [];
    const weights: number[] = [];
    for (let i = 0; i < n; i++) {
      const row = new Map<number, number>();
      const cat = inCategory[category[i]];
      let f = drawIn.get(category[i]);
      if (!f) drawIn.set(category[i], (f = zipf(cat.length)));
      for (let t = 0; t < kk * 3 && row.size < kk; t++) {
        const j = r.next() < 0.8 ? cat[f(r)] : byRank[draw(r)];
        if (j !== i && !row.has(j)) row.set(j, 1 / (row.size + 1) + 0.01 * r.next());
      }
      for (const [j, w] of [...row].sort((a, b) => a[0] - b[0])) targets.push(j), weights.push(w);
      offsets[i + 1] = targets.length;
    }
    return { offsets, targets: Uint32Array.from(targets), weights: Float32Array.from(weights) };
  };
  const dim = 32;
  const values = new Float32Array(n * dim);
  for (let i = 0; i < values.length; i++) values[i] = r.next() * 2 - 1;
  const cold = Uint8Array.from({ length: n }, (_, i) => (rankOf[i] > 0.7 * n ? 1 : 0));
  const inDim = 512;
  const rnd = (len: number, scale: number) => Float32Array.from({ length: len }, () => (r.next() * 2 - 1) * scale);
  const model: ShopModel = {
    items: ids,
    lists: { ease: list(k), knn: list(k), markov: list(Math.max(1, k >> 1)) },
    popularity,
    vectors: { dim, values, cold },
    contentMap: { embedder: 'hashing-512@1', inDim, mean: rnd(inDim, 0.01), matrix: rnd(inDim * dim, 0.05), bias: rnd(dim, 0.1) },
    weights: { ease: 0.5, knn: 0.3, markov: 0.1, pop: 0.1 },
    info: { bench: 'bench:shop-file synthetic shop model' },
  };
  const config = {
    maxLen: SASREC_DEFAULTS.maxLen,
    dim: SASREC_DEFAULTS.dim,
    blocks: SASREC_DEFAULTS.blocks,
    heads: SASREC_DEFAULTS.heads,
    dropout: SASREC_DEFAULTS.dropout,
  };
  const layout = makeLayout(config, n);
  const flat = new Float32Array(layout.size);
  for (let i = 0; i < flat.length; i++) flat[i] = (r.next() * 2 - 1) * 0.1;
  const sasrec = weightsView(layout, flat);
  sasrec.itemEmb.fill(0, 0, config.dim); // the padding row
  return { catalog: `${lines.join('\n')}\n`, shop: { ids, byRank, model, sasrec } };
}

/** Run the shipped CLI (as `npm run vectors` does); resolves with its summary line and wall time. */
function runCli(args: string[]): Promise<{ stdout: string; seconds: number }> {
  return new Promise((res, rej) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', join(ROOT, 'packages/atomem/src/vectors-cli.ts'), ...args], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', rej);
    child.on('close', (code) =>
      code === 0
        ? res({ stdout: stdout.trim(), seconds: (performance.now() - t0) / 1000 })
        : rej(new Error(`atomem-vectors exited ${code}: ${stderr.trim().split('\n').slice(-3).join(' | ')}`)),
    );
  });
}

/** What a simulated visit reads of a shop model: its item ids, items by popularity rank, its `knn` lists. */
export interface VisitModel {
  ids: readonly string[];
  /** byRank[r] = item index of popularity rank r. */
  byRank: Int32Array;
  knn: ShopModel['lists'][string];
}

/**
 * Bytes of `visits` seeded visits to a v3 file (see the module comment): per visit, a first
 * visit (a 24-product listing page drawn by Zipf popularity rank: the head and its shards) and a
 * 20-event visit (that page, then 20 product pages each with its 20 strongest `knn` neighbours:
 * the head once and the union of their shards), with the shards per 20-event visit.
 */
export function simulateVisits(
  head: CatalogHead,
  headBytes: number,
  m: VisitModel,
  visits: number,
  seed: number,
): { first: number[]; visit: number[]; shards: number[] } {
  const n = m.ids.length;
  const shardBytes = head.header.shards.map((s) => s.bytes);
  const r = new Rng(seed + 1);
  const draw = zipf(n);
  const knn = m.knn;
  const related = (i: number): string[] => {
    const row: Array<[number, number]> = [];
    for (let e = knn.offsets[i]; e < knn.offsets[i + 1]; e++) row.push([knn.targets[e], knn.weights[e]]);
    return [
      m.ids[i],
      ...row
        .sort((a, b) => b[1] - a[1])
        .slice(0, 20)
        .map(([t]) => m.ids[t]),
    ];
  };
  const bytesOf = (ks: Iterable<number>): number => {
    let s = headBytes;
    for (const k of ks) s += shardBytes[k];
    return s;
  };
  const first: number[] = [];
  const visit: number[] = [];
  const shards: number[] = [];
  for (let v = 0; v < visits; v++) {
    const landing = Array.from({ length: 24 }, () => m.ids[m.byRank[draw(r)]]);
    const touched = new Set(shardsFor(head, landing));
    first.push(bytesOf(touched));
    let cur = m.byRank[draw(r)];
    for (let e = 0; e < 20; e++) {
      for (const k of shardsFor(head, related(cur))) touched.add(k);
      const a = knn.offsets[cur];
      const b = knn.offsets[cur + 1];
      cur = r.next() < 0.7 && b > a ? knn.targets[a + r.int(b - a)] : m.byRank[draw(r)];
    }
    visit.push(bytesOf(touched));
    shards.push(touched.size);
  }
  return { first, visit, shards };
}

const mb = (b: number): string => `${(b / 1e6).toFixed(2)} MB`;
export const quantile = (xs: number[], q: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
export const mean = (xs: number[]): number => xs.reduce((s, x) => s + x, 0) / xs.length;

export interface ShopFileRow {
  items: number;
  shardSize: number;
  v2Bytes: number;
  headBytes: number;
  shards: number;
  shardBytes: number;
  firstVisitBytes: number;
  firstVisitP90Bytes: number;
  visitBytes: number;
  visitP90Bytes: number;
  visitShards: number;
  cliSecondsV2: number;
  cliSecondsV3: number;
}

async function measure(n: number, o: Options): Promise<ShopFileRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-bench-shop-file-'));
  try {
    process.stderr.write(`bench:shop-file: ${n} items: synthetic shop…\n`);
    const { catalog, shop } = syntheticShop(n, o.k, o.seed);
    writeFileSync(join(dir, 'catalog.jsonl'), catalog);
    // the shop part as a v2 file without content rows: what --shop-model reads
    writeFileSync(
      join(dir, 'shop.bin'),
      encodeCatalogFile({
        embedder: { id: 'hashing-512@1', dim: 512 },
        items: [],
        vectors: [],
        shop: { model: shop.model, sasrec: { weights: shop.sasrec, items: shop.ids }, info: { bench: 'bench:shop-file' } },
      }),
    );
    const common = [
      '--catalog',
      join(dir, 'catalog.jsonl'),
      '--shop-model',
      join(dir, 'shop.bin'),
      '--embedder',
      'hashing',
      '--dim',
      '512',
      '--no-progress',
      '--cache',
      join(dir, 'cache.bin'),
    ];
    process.stderr.write(`bench:shop-file: ${n} items: atomem-vectors (format v2)…\n`);
    const v2 = await runCli([...common, '--out', join(dir, 'v2.bin')]);
    const v2Bytes = statSync(join(dir, 'v2.bin')).size;
    rmSync(join(dir, 'v2.bin'));
    const rows: ShopFileRow[] = [];
    for (const shardSize of o.shardSizes) {
      rmSync(join(dir, 'catalog.bin.shards'), { recursive: true, force: true });
      process.stderr.write(`bench:shop-file: ${n} items: atomem-vectors --shards ${shardSize} (format v3)…\n`);
      const v3 = await runCli([...common, '--shards', String(shardSize), '--out', join(dir, 'catalog.bin')]);
      process.stderr.write(`  ${v3.stdout}\n`);
      const headBytes = statSync(join(dir, 'catalog.bin')).size;
      const head = decodeCatalogHead(readFileSync(join(dir, 'catalog.bin')));
      const shardBytes = head.header.shards.map((s) => s.bytes);
      const {
        first,
        visit,
        shards: visitShards,
      } = simulateVisits(head, headBytes, { ids: shop.ids, byRank: shop.byRank, knn: shop.model.lists.knn }, o.visits, o.seed);
      rows.push({
        items: n,
        shardSize,
        v2Bytes,
        headBytes,
        shards: shardBytes.length,
        shardBytes: shardBytes.reduce((s, x) => s + x, 0),
        firstVisitBytes: Math.round(mean(first)),
        firstVisitP90Bytes: quantile(first, 0.9),
        visitBytes: Math.round(mean(visit)),
        visitP90Bytes: quantile(visit, 0.9),
        visitShards: Math.round(mean(visitShards)),
        cliSecondsV2: v2.seconds,
        cliSecondsV3: v3.seconds,
      });
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const rows: ShopFileRow[] = [];
  for (const n of o.items) rows.push(...(await measure(n, o)));
  const out: string[] = [];
  out.push(
    `bench:shop-file — seed ${o.seed}, ${o.visits} simulated visits per size, lists of ${o.k} (markov ${Math.max(1, o.k >> 1)}) per item, 512-d content vectors, SASRec ${SASREC_DEFAULTS.dim}-d over every item`,
  );
  out.push('');
  out.push(
    '| items | shard items | v2 file (every first visit today) | v3 head | v3 shards (all) | first visit (mean / p90) | 20-event visit (mean / p90) | shards per visit | first visit vs v2 |',
  );
  out.push('|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const x of rows) {
    out.push(
      `| ${x.items} | ${x.shardSize} | ${mb(x.v2Bytes)} | ${mb(x.headBytes)} | ${x.shards} × ≈${(x.shardBytes / x.shards / 1e3).toFixed(0)} kB = ${mb(x.shardBytes)} | ${mb(x.firstVisitBytes)} / ${mb(x.firstVisitP90Bytes)} | ${mb(x.visitBytes)} / ${mb(x.visitP90Bytes)} | ${x.visitShards} | ${(x.firstVisitBytes / x.v2Bytes).toFixed(4)}× |`,
    );
  }
  out.push('');
  out.push(
    'Visits: shards touched computed from the head (the worker fetches exactly those: packages/atomem/test/browser/shop-file.test.ts), not replayed in Chromium.',
  );
  process.stdout.write(`${out.join('\n')}\n`);
  if (o.json) writeFileSync(o.json, `${JSON.stringify(rows, null, 2)}\n`);
}

const invoked = process.argv[1] ? pathToFileURL(resolve(process.argv[1])).href : '';
if (import.meta.url === invoked) {
  main().catch((e: unknown) => {
    process.stderr.write(`bench:shop-file: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  });
}
