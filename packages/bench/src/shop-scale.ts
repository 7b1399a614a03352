/**
 * Scale benchmark of the shop model's training (`npm run bench:shop-scale`):
 *
 *   npm run bench:shop-scale -- --items 10000 --events 1000000 [--seed 1] [--json FILE] [--keep DIR [--reuse]] [--visits 200]
 *
 * 1. Generates a seeded synthetic long-tail shop: `items` products with titles and one of
 *    √items/2 categories, global Zipf popularity (exponent 1.0), users with 1–200 events (log-uniform), who
 *    pick 70% of their items from one to three favourite categories (Zipf within the category)
 *    and the rest from the whole catalog, in time order; written as items.jsonl and
 *    interactions.jsonl until `events` rows.
 * 2. Trains it with the shipped CLI (`atomem-shop`, a child process: `--stats` gives seconds per
 *    stage, peak RSS from getrusage and the file's bytes).
 *    `--engine duckdb` runs its counting stages as SQL on embedded DuckDB (`--engine` of the CLI).
 *    With `--sasrec-budget S` (default 600; 0 = none) the CLI also trains the sequence model
 *    (`--sasrec`, SASRec within S seconds, early stopping on validation); its bytes, steps and
 *    validation NDCG@10 go into the row's `sasrec`.
 * 3. The baseline, in the same run: a plain item-kNN (cosine over distinct users, top-k per item
 *    from inverted lists; the log read with the same streaming reader) in its own child process.
 * 4. The file a phone fetches: the shipped `atomem-vectors --shards` publishes the trained shop
 *    model (and SASRec) with the catalog's content vectors as format v3 (the `hashing` embedder
 *    at 512 dimensions, USE-lite's size: USE-lite itself would take hours at 1M items). The head's
 *    bytes by section, the shards', and the bytes of `--visits` simulated visits
 *    (`simulateVisits` of shop-file.ts: a first visit — a 24-product listing page — and a
 *    20-event visit, shards touched computed from the head as the worker fetches them,
 *    `packages/atomem/test/browser/shop-file.test.ts`).
 *
 * 5. In Chromium (`/usr/bin/chromium`, `--chromium-runs` fresh contexts after a discarded
 *    warm-up; 0 skips it): a page of the 24 most popular products loads the BUILT package (run
 *    `npm run build` first) and the v3 file from a loopback server that counts the bytes it
 *    sends; time to the first `recommend(10)` from navigation start, then the median of 30
 *    `recommend(10)` after 5 tracked events (`measureShopFileVisits`, first-visit.ts).
 *
 * `--keep DIR --reuse`: the files of an earlier run in DIR (log, model, stats, baseline) are used
 * instead of generating and training again, e.g. to measure the file stage of a new format.
 *
 * Markdown on stdout, progress on stderr; `--json FILE`: one row per run with `items`, `events`,
 * `trainSeconds`, `peakRssBytes`, `fileBytes`, `stages`, `baseline`, `head` (bytes, by section),
 * `shards`, `firstVisitBytes`, `visitBytes` (the file's bytes, means over the simulated visits;
 * p90 beside them), `firstRecommendationMs`, `recommendP50Ms` (medians over the Chromium runs,
 * null with `--chromium-runs 0`) and `chromium` (per run: bytes sent in all, head, shards, package).
 */
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { assembleCatalogFile, decodeCatalogHead, decodeCatalogShard, shardsFor } from 'atomem/protocol';
import { decodeShopModel, readLogFile } from 'atomem/shop';
import { chromium } from 'playwright';
import { measureShopFileVisits, type ShopFileVisit } from './first-visit.js';
import { Rng } from './rng.js';
import { mean, quantile, simulateVisits } from './shop-file.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../..');
const err = (s: string) => process.stderr.write(`${s}\n`);

function positiveInt(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer`);
    return n;
  };
}

/** Cumulative Zipf weights 1/r^s over ranks 1..n. */
function zipfCdf(n: number, s: number): Float64Array {
  const c = new Float64Array(n);
  let acc = 0;
  for (let r = 0; r < n; r++) c[r] = acc += 1 / (r + 1) ** s;
  for (let r = 0; r < n; r++) c[r] /= acc;
  return c;
}

function sample(cdf: Float64Array, u: number, from = 0, to = cdf.length): number {
  let lo = from;
  let hi = to - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cdf[mid] < u) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const WORDS = ['organic', 'classic', 'travel', 'mini', 'pro', 'soft', 'matte', 'bright', 'daily', 'deep', 'light', 'rich', 'pure', 'fresh', 'bold', 'gentle'];

/** Writes the seeded shop; returns the files. */
export async function generateShop(dir: string, items: number, events: number, seed: number): Promise<{ itemsPath: string; logPath: string; users: number }> {
  const rng = new Rng(seed);
  const categories = Math.max(2, Math.round(Math.sqrt(items) / 2));
  const itemsPath = join(dir, 'items.jsonl');
  const logPath = join(dir, 'interactions.jsonl');
  // Item r (global popularity rank r) belongs to a random category; per category its items in rank order.
  const cat = new Int32Array(items);
  const perCat: number[][] = Array.from({ length: categories }, () => []);
  const lines: string[] = [];
  for (let r = 0; r < items; r++) {
    cat[r] = Math.floor(rng.next() * categories);
    perCat[cat[r]].push(r);
    const title = `${WORDS[Math.floor(rng.next() * WORDS.length)]} ${WORDS[Math.floor(rng.next() * WORDS.length)]} item ${r}`;
    lines.push(JSON.stringify({ id: `p${r}`, title, categories: [`c${cat[r]}`] }));
  }
  writeFileSync(itemsPath, `${lines.join('\n')}\n`);
  const global = zipfCdf(items, 1.0);
  const catCdf = perCat.map((l) => zipfCdf(Math.max(1, l.length), 1.0));
  const out = createWriteStream(logPath, { highWaterMark: 1 << 20 });
  let written = 0;
  let users = 0;
  let buf = '';
  let t = Date.UTC(2026, 0, 1);
  const span = 90 * 86_400_000;
  while (written < events) {
    const n = Math.min(events - written, Math.max(1, Math.round(Math.exp(rng.next() * Math.log(200)))));
    const favs = Array.from({ length: 1 + Math.floor(rng.next() * 3) }, () => cat[sample(global, rng.next())]);
    let at = t + Math.floor(rng.next() * span);
    const user = `u${users++}`;
    for (let e = 0; e < n; e++) {
      let item: number;
      if (rng.next() < 0.7) {
        const c = favs[Math.floor(rng.next() * favs.length)];
        item = perCat[c].length ? perCat[c][sample(catCdf[c], rng.next())] : sample(global, rng.next());
      } else item = sample(global, rng.next());
      const action = rng.next() < 0.1 ? 'purchase' : rng.next() < 0.2 ? 'cart' : 'view';
      buf += `{"user":"${user}","item":"p${item}","at":${at},"action":"${action}"}\n`;
      at += 1000 + Math.floor(rng.next() * 600_000);
    }
    written += n;
    if (buf.length > 1 << 20) {
      if (!out.write(buf)) await new Promise<void>((r) => out.once('drain', () => r()));
      buf = '';
    }
    if ((users & 16383) === 0) err(`shop-scale: generated ${written.toLocaleString('en')} / ${events.toLocaleString('en')} events`);
    t += 1;
  }
  out.write(buf);
  await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r())));
  return { itemsPath, logPath, users };
}

/** Runs a child process with the same Node flags as the CLI's npm script (its stdout to this one's stderr); resolves with its exit code. */
function run(args: string[]): Promise<number> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', ...args], { cwd: root, stdio: ['ignore', process.stderr, 'inherit'] });
    child.on('error', rej);
    child.on('exit', (code) => res(code ?? 1));
  });
}

/**
 * The baseline: plain item-kNN (top `k` by cosine over distinct users) from the log file, in this
 * process; writes { seconds, peakRssBytes, pairs } to `statsPath`.
 */
async function baselineKnn(itemsPath: string, logPath: string, k: number, statsPath: string): Promise<void> {
  const t0 = performance.now();
  const catalog = readFileSync(itemsPath, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => String((JSON.parse(l) as { id: string }).id));
  const log = await readLogFile(logPath, { catalog });
  const { user, item } = log.columns();
  const n = log.items.length;
  const U = log.users.length;
  // distinct items per user, users per item (CSR)
  const uStart = new Int32Array(U + 1);
  for (let r = 0; r < log.length; r++) uStart[user[r] + 1]++;
  for (let u = 0; u < U; u++) uStart[u + 1] += uStart[u];
  const uItems = new Int32Array(log.length);
  const fill = uStart.slice(0, U);
  for (let r = 0; r < log.length; r++) uItems[fill[user[r]]++] = item[r];
  const seen = new Int32Array(n).fill(-1);
  const lists: number[][] = Array.from({ length: U }, () => []);
  for (let u = 0; u < U; u++)
    for (let p = uStart[u]; p < uStart[u + 1]; p++) {
      const i = uItems[p];
      if (seen[i] !== u) {
        seen[i] = u;
        lists[u].push(i);
      }
    }
  const iStart = new Int32Array(n + 1);
  for (const l of lists) for (const i of l) iStart[i + 1]++;
  for (let i = 0; i < n; i++) iStart[i + 1] += iStart[i];
  const iUsers = new Int32Array(iStart[n]);
  const f2 = iStart.slice(0, n);
  lists.forEach((l, u) => {
    for (const i of l) iUsers[f2[i]++] = u;
  });
  const counts = new Float64Array(n);
  const touched: number[] = [];
  let pairs = 0;
  const top = new Int32Array(n * k).fill(-1);
  for (let i = 0; i < n; i++) {
    for (let p = iStart[i]; p < iStart[i + 1]; p++)
      for (const j of lists[iUsers[p]]) {
        if (counts[j] === 0) touched.push(j);
        counts[j]++;
      }
    const di = iStart[i + 1] - iStart[i];
    const scored = touched.filter((j) => j !== i).map((j) => [j, counts[j] / Math.sqrt(di * (iStart[j + 1] - iStart[j]))] as const);
    scored.sort((a, b) => b[1] - a[1]);
    for (let q = 0; q < Math.min(k, scored.length); q++) top[i * k + q] = scored[q][0];
    pairs += touched.length;
    for (const j of touched) counts[j] = 0;
    touched.length = 0;
  }
  writeFileSync(statsPath, JSON.stringify({ seconds: (performance.now() - t0) / 1000, peakRssBytes: process.resourceUsage().maxRSS * 1024, pairs }));
}

interface Row {
  items: number;
  events: number;
  engine: string;
  users: number;
  logBytes: number;
  trainSeconds: number;
  cpuSeconds: number;
  loadAverage: number;
  /** The 1-minute load average sampled every 10 s while atomem-shop ran (null when reused). */
  loadDuringTraining: { min: number; mean: number; max: number } | null;
  peakRssBytes: number;
  fileBytes: number;
  stages: Record<string, number>;
  /** CPU seconds per stage (the CLI's process, SASRec's threads included). */
  stagesCpu: Record<string, number> | null;
  baseline: { method: string; seconds: number; peakRssBytes: number };
  /** The sequence model, when trained: file bytes, steps, seconds, why it stopped, validation NDCG@10 of the kept weights. */
  sasrec: { bytes: number; steps: number; seconds: number; stoppedBy: string; bestStep: number; validationNdcg10: number | null } | null;
  /** The v3 head: bytes, and bytes per part (`json`: prefix, header JSON and padding; then each section). */
  head: { bytes: number; sections: Record<string, number> };
  shards: { count: number; bytes: number };
  /** Wall seconds of `atomem-vectors --shards` (embedding with `hashing`, encoding, writing). */
  fileSeconds: number;
  firstVisitBytes: number;
  firstVisitP90Bytes: number;
  visitBytes: number;
  visitP90Bytes: number;
  visitShards: number;
  /** The shop model a first visit decodes on the device: its items and the bytes of its typed arrays (sized to the loaded shards). */
  deviceModel: { items: number; typedBytes: number };
  firstRecommendationMs: number | null;
  recommendP50Ms: number | null;
  chromium: Array<Omit<ShopFileVisit, 'catalog'>>;
  note: string;
}

const ELEMENT_BYTES: Record<string, number> = { u8: 1, i8: 1, u16: 2, u32: 4, f32: 4 };

/** Bytes of a v3 head by part: the prefix + JSON header (padded to 4), then each section (padded to 4). */
function headParts(bytes: Uint8Array): Record<string, number> {
  const json = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true);
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(16, 16 + json))) as { sections: Array<{ name: string; type: string; count: number }> };
  const out: Record<string, number> = { json: (16 + json + 3) & ~3 };
  for (const s of header.sections) out[s.name] = (s.count * ELEMENT_BYTES[s.type] + 3) & ~3;
  return out;
}

async function main(): Promise<void> {
  const program = new Command()
    .name('bench:shop-scale')
    .requiredOption('--items <n>', 'catalog size', positiveInt('--items'))
    .requiredOption('--events <n>', 'log rows', positiveInt('--events'))
    .option('--seed <n>', 'generator seed', positiveInt('--seed'), 1)
    .option('--json <file>', 'append the row to this JSON file ({ rows: [...] })')
    .option('--keep <dir>', 'generate into (and keep) this folder instead of a temp one')
    .option('--reuse', 'with --keep: use the log, model, stats and baseline an earlier run left there')
    .option('--visits <n>', 'simulated visits for the first-visit and 20-event bytes', positiveInt('--visits'), 200)
    .option(
      '--chromium-runs <n>',
      'first visits in Chromium (0: none)',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('--chromium-runs must be an integer ≥ 0');
        return n;
      },
      3,
    )
    .option('--ease <method>', 'passed to atomem-shop --ease (default: its auto choice)')
    .option('--engine <name>', 'passed to atomem-shop --engine (duckdb: counting stages as SQL)')
    .option('--engine-memory <size>', 'passed to atomem-shop --engine-memory (DuckDB memory limit, e.g. 8GB)')
    .option(
      '--sasrec-budget <seconds>',
      'train the sequence model too, within this many seconds (0: no sequence model)',
      (v) => {
        const n = Number(v);
        if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError('--sasrec-budget must be a number ≥ 0');
        return n;
      },
      600,
    )
    .option(
      '--budget <seconds>',
      'passed to atomem-shop --budget (the whole training within this many seconds; SASRec gets what is left)',
      positiveInt('--budget'),
    )
    .option('--baseline-only', 'internal: run the baseline item-kNN')
    .option('--baseline-args <json>', 'internal');
  program.parse(process.argv.slice(2), { from: 'user' });
  const o = program.opts<{
    items: number;
    events: number;
    seed: number;
    json?: string;
    keep?: string;
    ease?: string;
    engine?: string;
    engineMemory?: string;
    sasrecBudget: number;
    budget?: number;
    reuse?: boolean;
    visits: number;
    chromiumRuns: number;
    baselineOnly?: boolean;
    baselineArgs?: string;
  }>();
  if (o.baselineOnly) {
    const a = JSON.parse(o.baselineArgs!) as { itemsPath: string; logPath: string; k: number; stats: string };
    await baselineKnn(a.itemsPath, a.logPath, a.k, a.stats);
    return;
  }
  if (o.reuse && !o.keep) throw new InvalidArgumentError('--reuse needs --keep DIR');
  const dir = o.keep ? resolve(o.keep) : mkdtempSync(join(tmpdir(), 'atomem-shop-scale-'));
  mkdirSync(dir, { recursive: true });
  try {
    const t0 = performance.now();
    const marker = join(dir, 'shop.json');
    const same = (): boolean => {
      if (!o.reuse || !existsSync(marker)) return false;
      const m = JSON.parse(readFileSync(marker, 'utf8')) as { items: number; events: number; seed: number };
      return m.items === o.items && m.events === o.events && m.seed === o.seed;
    };
    let shop: { itemsPath: string; logPath: string; users: number };
    const reused = same();
    if (reused) {
      shop = {
        itemsPath: join(dir, 'items.jsonl'),
        logPath: join(dir, 'interactions.jsonl'),
        users: (JSON.parse(readFileSync(marker, 'utf8')) as { users: number }).users,
      };
      err(`shop-scale: reusing the shop in ${dir}`);
    } else {
      if (o.reuse) err(`shop-scale: no shop of these --items/--events/--seed in ${dir}; generating it`);
      shop = await generateShop(dir, o.items, o.events, o.seed);
      writeFileSync(marker, JSON.stringify({ items: o.items, events: o.events, seed: o.seed, users: shop.users }));
    }
    const logBytes = statSync(shop.logPath).size;
    err(
      `shop-scale: ${o.items} items, ${o.events} events, ${shop.users} users, log ${(logBytes / 2 ** 20).toFixed(0)} MB, ready in ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    );
    const statsPath = join(dir, 'stats.json');
    const out = join(dir, 'shop-model.bin');
    const sasrecPath = join(dir, 'sasrec.bin');
    const trained = reused && existsSync(statsPath) && existsSync(out) && (o.sasrecBudget === 0 || existsSync(sasrecPath));
    if (trained) err('shop-scale: reusing the trained shop model and its stats');
    // Load average (1 min) every 10 s while atomem-shop runs: the machine may be shared.
    const loads: number[] = [];
    const sampler = setInterval(() => loads.push(loadavg()[0]), 10_000);
    const code = trained
      ? 0
      : await run([
          'packages/atomem/src/shop/cli.ts',
          '--interactions',
          shop.logPath,
          '--items',
          shop.itemsPath,
          '--out',
          out,
          '--stats',
          statsPath,
          ...(o.ease ? ['--ease', o.ease] : []),
          ...(o.engine ? ['--engine', o.engine] : []),
          ...(o.engineMemory ? ['--engine-memory', o.engineMemory] : []),
          ...(o.sasrecBudget > 0 ? ['--sasrec', sasrecPath, '--sasrec-budget', String(o.sasrecBudget)] : []),
          ...(o.budget ? ['--budget', String(o.budget)] : []),
        ]);
    clearInterval(sampler);
    if (code !== 0) throw new Error(`atomem-shop exited with ${code}`);
    const stats = JSON.parse(readFileSync(statsPath, 'utf8')) as {
      trainSeconds: number;
      cpuSeconds: number;
      peakRssBytes: number;
      fileBytes: number;
      stages: Record<string, number>;
      stagesCpu?: Record<string, number>;
      sasrec?: Partial<NonNullable<Row['sasrec']>> & Record<string, unknown>;
    };
    const sasrecTrained = o.sasrecBudget > 0 && stats.sasrec?.bytes !== undefined && existsSync(sasrecPath);
    const bStats = join(dir, 'baseline.json');
    const bCode =
      reused && existsSync(bStats)
        ? 0
        : await run([
            'packages/bench/src/shop-scale.ts',
            '--items',
            '1',
            '--events',
            '1',
            '--baseline-only',
            '--baseline-args',
            JSON.stringify({ itemsPath: shop.itemsPath, logPath: shop.logPath, k: 32, stats: bStats }),
          ]);
    if (bCode !== 0) throw new Error(`baseline item-kNN exited with ${bCode}`);
    const base = JSON.parse(readFileSync(bStats, 'utf8')) as { seconds: number; peakRssBytes: number };
    // the file a phone fetches: format v3 by the shipped CLI
    const catalogFile = join(dir, 'catalog.bin');
    rmSync(`${catalogFile}.shards`, { recursive: true, force: true });
    err('shop-scale: atomem-vectors --shards (format v3)…');
    const tf = performance.now();
    const vCode = await run([
      'packages/atomem/src/vectors-cli.ts',
      '--catalog',
      shop.itemsPath,
      '--shop-model',
      out,
      ...(sasrecTrained ? ['--sasrec', sasrecPath] : []),
      '--embedder',
      'hashing',
      '--dim',
      '512',
      '--no-cache',
      '--no-progress',
      '--shards',
      '--out',
      catalogFile,
    ]);
    if (vCode !== 0) throw new Error(`atomem-vectors exited with ${vCode}`);
    const fileSeconds = (performance.now() - tf) / 1000;
    const headBytes = new Uint8Array(readFileSync(catalogFile));
    const head = decodeCatalogHead(headBytes);
    const model = decodeShopModel(readFileSync(out));
    const byRank = Int32Array.from(model.items.keys()).sort((a, b) => model.popularity[b] - model.popularity[a] || a - b);
    const visits = simulateVisits(head, headBytes.length, { ids: model.items, byRank, knn: model.lists.knn }, o.visits, o.seed);
    // The shop model a first visit decodes on the device (the 24 most popular products' shards,
    // assembled as the worker does): items held and bytes of its typed arrays.
    const firstPage = Array.from(byRank.subarray(0, 24), (i) => model.items[i]);
    const firstShards = shardsFor(head, firstPage).map((k) =>
      decodeCatalogShard(head, k, new Uint8Array(readFileSync(join(dirname(catalogFile), head.header.shards[k].name)))),
    );
    const onDevice = assembleCatalogFile(head, firstShards).shop!.model;
    const arrays = [
      ...Object.values(onDevice.lists).flatMap((l) => [l.offsets, l.targets, l.weights]),
      onDevice.popularity,
      ...(onDevice.vectors ? [onDevice.vectors.values, onDevice.vectors.cold] : []),
      ...(onDevice.trend ? [onDevice.trend.counts.offsets, onDevice.trend.counts.targets, onDevice.trend.counts.weights] : []),
    ];
    const deviceModel = { items: onDevice.items.length, typedBytes: arrays.reduce((t, a) => t + a.byteLength, 0) };
    let browserRuns: ShopFileVisit[] = [];
    if (o.chromiumRuns > 0) {
      const top = new Set(Array.from(byRank.subarray(0, 24), (i) => model.items[i]));
      const page: unknown[] = [];
      for (const line of readFileSync(shop.itemsPath, 'utf8').split('\n')) {
        if (!line) continue;
        const it = JSON.parse(line) as { id: string };
        if (top.has(it.id)) page.push(it);
      }
      page.sort((a, b) => model.popularity[model.items.indexOf((b as { id: string }).id)] - model.popularity[model.items.indexOf((a as { id: string }).id)]);
      err(`shop-scale: ${o.chromiumRuns} first visits in Chromium (${page.length}-product page)…`);
      const browser = await chromium.launch({
        executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
        args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
      });
      try {
        browserRuns = await measureShopFileVisits(browser, { dir, items: page, dim: 512, runs: o.chromiumRuns });
      } finally {
        await browser.close();
      }
      for (const v of browserRuns)
        err(
          `  ${(v.bytes / 1e6).toFixed(2)} MB (head ${(v.headBytes / 1e6).toFixed(2)}, ${v.shardRequests} shards ${(v.shardBytes / 1e6).toFixed(2)}, package ${(v.packageBytes / 1e6).toFixed(2)}), first recommendation ${v.firstRecommendationMs.toFixed(0)} ms, recommend p50 ${v.recommendP50Ms.toFixed(1)} ms; ${JSON.stringify(v.catalog)}`,
        );
    }
    const median = (xs: number[]): number | null => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] : null);
    const row: Row = {
      items: o.items,
      events: o.events,
      engine: o.engine ?? 'in-memory',
      users: shop.users,
      logBytes,
      trainSeconds: stats.trainSeconds,
      cpuSeconds: stats.cpuSeconds,
      loadAverage: loadavg()[0],
      loadDuringTraining: loads.length ? { min: Math.min(...loads), mean: loads.reduce((a, b) => a + b, 0) / loads.length, max: Math.max(...loads) } : null,
      peakRssBytes: stats.peakRssBytes,
      fileBytes: stats.fileBytes,
      stages: stats.stages,
      stagesCpu: stats.stagesCpu ?? null,
      baseline: { method: 'item-kNN top-32 (cosine, inverted lists)', seconds: base.seconds, peakRssBytes: base.peakRssBytes },
      sasrec:
        stats.sasrec && sasrecTrained
          ? {
              bytes: stats.sasrec.bytes!,
              steps: stats.sasrec.steps!,
              seconds: stats.sasrec.seconds!,
              stoppedBy: stats.sasrec.stoppedBy!,
              bestStep: stats.sasrec.bestStep!,
              validationNdcg10: stats.sasrec.validationNdcg10 ?? null,
            }
          : null,
      head: { bytes: headBytes.length, sections: headParts(headBytes) },
      shards: { count: head.header.shards.length, bytes: head.header.shards.reduce((t, x) => t + x.bytes, 0) },
      fileSeconds,
      firstVisitBytes: Math.round(mean(visits.first)),
      firstVisitP90Bytes: quantile(visits.first, 0.9),
      visitBytes: Math.round(mean(visits.visit)),
      visitP90Bytes: quantile(visits.visit, 0.9),
      visitShards: Math.round(mean(visits.shards)),
      deviceModel,
      firstRecommendationMs: median(browserRuns.map((v) => v.firstRecommendationMs)),
      recommendP50Ms: median(browserRuns.map((v) => v.recommendP50Ms)),
      chromium: browserRuns.map(({ catalog: _, ...v }) => v),
      note: `visits: ${o.visits} simulated (shards touched computed from the head); Chromium: ${browserRuns.length} first visits to a page of the 24 most popular products${trained ? '; model and stats reused from an earlier run in --keep' : ''}`,
    };
    const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MB`;
    const out2 = (s: string) => process.stdout.write(`${s}\n`);
    out2(
      `\n### Shop model training: ${o.items.toLocaleString('en')} items, ${o.events.toLocaleString('en')} events, ${shop.users.toLocaleString('en')} users (seed ${o.seed}, log ${mb(logBytes)}, counting stages ${o.engine ?? 'in memory'})\n`,
    );
    out2('| stage | seconds (wall) | CPU seconds |\n|---|---:|---:|');
    for (const [s, v] of Object.entries(stats.stages)) out2(`| ${s} | ${v.toFixed(1)} | ${stats.stagesCpu?.[s]?.toFixed(1) ?? '—'} |`);
    out2(`| **total (atomem-shop)** | **${stats.trainSeconds.toFixed(1)}** | ${stats.cpuSeconds.toFixed(1)} |`);
    out2(`| baseline: plain item-kNN top-32 | ${base.seconds.toFixed(1)} |`);
    out2(`\n| | atomem-shop | item-kNN baseline | ratio |\n|---|---:|---:|---:|`);
    out2(`| train seconds | ${stats.trainSeconds.toFixed(1)} | ${base.seconds.toFixed(1)} | ${(stats.trainSeconds / base.seconds).toFixed(2)}× |`);
    out2(`| CPU seconds (atomem-shop) | ${stats.cpuSeconds.toFixed(1)} | — | load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores |`);
    out2(`| peak RSS | ${mb(stats.peakRssBytes)} | ${mb(base.peakRssBytes)} | ${(stats.peakRssBytes / base.peakRssBytes).toFixed(2)}× |`);
    out2(`| file bytes | ${stats.fileBytes.toLocaleString('en')} | — | — |`);
    if (row.sasrec)
      out2(
        `| SASRec | ${row.sasrec.bytes.toLocaleString('en')} bytes, ${row.sasrec.steps} steps in ${row.sasrec.seconds.toFixed(0)} s (${row.sasrec.stoppedBy}), validation NDCG@10 ${row.sasrec.validationNdcg10?.toFixed(4) ?? '—'} | — | — |`,
      );
    const dmb = (b: number) => `${(b / 1e6).toFixed(2)} MB`;
    out2(`\n#### The file a phone fetches (format v3, atomem-vectors --shards, ${fileSeconds.toFixed(0)} s)\n`);
    out2('| head part | bytes |\n|---|---:|');
    for (const [name, b] of Object.entries(row.head.sections)) out2(`| ${name} | ${b.toLocaleString('en')} |`);
    out2(`| **head** | **${row.head.bytes.toLocaleString('en')}** (${dmb(row.head.bytes)}) |`);
    out2(
      `| shards | ${row.shards.count.toLocaleString('en')} × ≈${(row.shards.bytes / Math.max(1, row.shards.count) / 1e3).toFixed(1)} kB = ${dmb(row.shards.bytes)} |`,
    );
    out2(
      `\n| visit (${o.visits} simulated) | mean | p90 |\n|---|---:|---:|\n| first visit (24-product page) | ${dmb(row.firstVisitBytes)} | ${dmb(row.firstVisitP90Bytes)} |\n| 20-event visit (${row.visitShards} shards) | ${dmb(row.visitBytes)} | ${dmb(row.visitP90Bytes)} |\n\nThe shop model a first visit decodes on the device: ${row.deviceModel.items.toLocaleString('en')} items, ${(row.deviceModel.typedBytes / 1024).toFixed(1)} kB of typed arrays.`,
    );
    if (browserRuns.length) {
      out2(`\n| Chromium, first visit (${browserRuns.length} runs, median) | |\n|---|---:|`);
      out2(`| bytes sent (page, package, head, shards) | ${dmb(median(browserRuns.map((v) => v.bytes))!)} |`);
      out2(
        `| of which head + shards | ${dmb(median(browserRuns.map((v) => v.headBytes + v.shardBytes))!)} (${median(browserRuns.map((v) => v.shardRequests))} shards) |`,
      );
      out2(`| first recommendation (navigation → recommend(10)) | ${row.firstRecommendationMs!.toFixed(0)} ms |`);
      out2(`| recommend(10) p50 after 5 events | ${row.recommendP50Ms!.toFixed(1)} ms |`);
    }
    if (o.json) {
      let prev: { rows: Row[] } = { rows: [] };
      try {
        prev = JSON.parse(readFileSync(o.json, 'utf8')) as { rows: Row[] };
      } catch {
        /* new file */
      }
      prev.rows.push(row);
      writeFileSync(o.json, JSON.stringify(prev, null, 1));
    }
  } finally {
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }
}

const invoked = process.argv[1] ? pathToFileURL(resolve(process.argv[1])).href : '';
if (import.meta.url === invoked) {
  main().catch((e: Error) => {
    err(`bench:shop-scale: ${e.message}`);
    process.exit(1);
  });
}
