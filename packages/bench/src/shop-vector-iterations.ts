/**
 * The collaborative vectors' subspace iterations against their next-item quality, on the seeded
 * synthetic shop of `bench:shop-scale`:
 *
 *   npm run bench:shop-vector-iterations -- --items 100000 --events 1000000 [--iterations 30,10] [--tests 3000] [--seed 1] [--keep DIR]
 *
 * Held out: the last event of up to `--tests` sampled users (each user with at least three events
 * is drawn with probability 0.2, seeded), removed from the log the model is trained on. Each
 * held-out item is ranked by the shipped trainer's collaborative vectors alone (`trainShopModel`
 * with `iterations` set, the lists cut to k 2 and local EASE to 2 neighbours so that the other
 * stages cost little; the vectors do not depend on them): the query is the user's previous
 * distinct item, the candidates every other item with a vector, the score the dot product.
 * Prints HR@10 and NDCG@10 with a 95% interval (normal approximation) and the vectors stage's CPU
 * seconds per setting; the held-out items that have no vector (never bought in the training log)
 * are left out and counted.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import { LogColumns, readCatalogFile, readLogFile, trainShopModel } from 'atomem/shop';
import { Rng } from './rng.js';
import { generateShop } from './shop-scale.js';

const err = (s: string) => process.stderr.write(`${s}\n`);

function positiveInt(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer`);
    return n;
  };
}

async function main(): Promise<void> {
  const program = new Command()
    .name('shop-vector-iterations')
    .requiredOption('--items <n>', 'catalog size', positiveInt('--items'))
    .requiredOption('--events <n>', 'log rows', positiveInt('--events'))
    .option('--iterations <list>', 'comma-separated subspace iteration counts', '30,10')
    .option('--tests <n>', 'held-out users at most', positiveInt('--tests'), 3000)
    .option('--seed <n>', 'generator seed', positiveInt('--seed'), 1)
    .option('--keep <dir>', 'generate into (and keep) this folder; an earlier shop of the same size there is reused');
  program.parse(process.argv.slice(2), { from: 'user' });
  const o = program.opts<{ items: number; events: number; iterations: string; tests: number; seed: number; keep?: string }>();
  const settings = o.iterations.split(',').map((x) => positiveInt('--iterations')(x.trim()));
  const dir = o.keep ? resolve(o.keep) : mkdtempSync(join(tmpdir(), 'atomem-vector-iterations-'));
  mkdirSync(dir, { recursive: true });
  try {
    const itemsPath = join(dir, 'items.jsonl');
    const logPath = join(dir, 'interactions.jsonl');
    const marker = join(dir, 'shop.json');
    const { existsSync, readFileSync, writeFileSync } = await import('node:fs');
    const same = existsSync(marker) && (JSON.parse(readFileSync(marker, 'utf8')) as { items: number; events: number; seed: number });
    if (!(same && same.items === o.items && same.events === o.events && same.seed === o.seed)) {
      const shop = await generateShop(dir, o.items, o.events, o.seed);
      writeFileSync(marker, JSON.stringify({ items: o.items, events: o.events, seed: o.seed, users: shop.users }));
    }
    const catalog = await readCatalogFile(itemsPath);
    const full = await readLogFile(logPath, { catalog });
    const { user, item, at, weight } = full.columns();
    // rows by user in time order (the trainer's order: time, then log position)
    const start = new Int32Array(full.users.length + 1);
    for (let r = 0; r < full.length; r++) start[user[r] + 1]++;
    for (let u = 0; u < full.users.length; u++) start[u + 1] += start[u];
    const rows = new Int32Array(full.length);
    {
      const fill = start.slice(0, full.users.length);
      for (let r = 0; r < full.length; r++) rows[fill[user[r]]++] = r;
    }
    const rng = new Rng(o.seed + 1000);
    const heldOut = new Uint8Array(full.length);
    const tests: Array<{ query: string; target: string }> = [];
    for (let u = 0; u < full.users.length && tests.length < o.tests; u++) {
      const rs = Array.from(rows.subarray(start[u], start[u + 1])).sort((x, y) => at[x] - at[y] || x - y);
      if (rs.length < 3 || rng.next() >= 0.2) continue;
      const target = item[rs[rs.length - 1]];
      const earlier = rs.slice(0, -1).map((r) => item[r]);
      if (earlier.includes(target)) continue; // a repeat is not a next item
      heldOut[rs[rs.length - 1]] = 1;
      tests.push({ query: full.items[earlier[earlier.length - 1]], target: full.items[target] });
    }
    // why no action: the vectors read which items each user met (every generated action counts), not how
    const log = new LogColumns(catalog, true);
    for (let r = 0; r < full.length; r++) if (!heldOut[r] && weight[r] > 0) log.add(full.users[user[r]], full.items[item[r]], at[r]);
    err(`shop-vector-iterations: ${o.items} items, ${o.events} events, ${tests.length} held-out next items`);
    const out = (s: string) => process.stdout.write(`${s}\n`);
    out(
      `\n### Collaborative vectors against subspace iterations: ${o.items.toLocaleString('en')} items, ${o.events.toLocaleString('en')} events (seed ${o.seed})\n`,
    );
    out('| iterations | vectors stage, CPU s | held-out items with a vector | HR@10 [95%] | NDCG@10 |\n|---:|---:|---:|---:|---:|');
    for (const iterations of settings) {
      const cpu = () => {
        const c = process.cpuUsage();
        return (c.user + c.system) / 1e6;
      };
      let vectorsCpu = 0;
      let last = cpu();
      const draw = new Rng(o.seed + 7);
      const model = trainShopModel(log, {
        catalog,
        iterations,
        k: { ease: 2, knn: 2, markov: 2 },
        easeNeighbours: 2,
        random: () => draw.next(),
        onProgress: (stage) => {
          const now = cpu();
          if (stage === 'vectors') vectorsCpu += now - last;
          last = now;
        },
      });
      const V = model.vectors!;
      const d = V.dim;
      const index = new Map(model.items.map((id, i) => [id, i]));
      const has = (i: number) => {
        for (let c = 0; c < d; c++) if (V.values[i * d + c] !== 0) return true;
        return false;
      };
      const withVector = Int32Array.from(Array.from(model.items.keys()).filter((i) => has(i) && !V.cold[i]));
      let hits = 0;
      let ndcg = 0;
      let n = 0;
      for (const t of tests) {
        const q = index.get(t.query)!;
        const g = index.get(t.target)!;
        if (!has(q) || !has(g) || V.cold[g]) continue;
        n++;
        const dot = (a: number, b: number) => {
          let s = 0;
          for (let c = 0; c < d; c++) s += V.values[a * d + c] * V.values[b * d + c];
          return s;
        };
        const sg = dot(q, g);
        let rank = 0;
        for (const j of withVector) {
          if (j === q || j === g) continue;
          if (dot(q, j) > sg && ++rank >= 10) break;
        }
        if (rank < 10) {
          hits++;
          ndcg += 1 / Math.log2(rank + 2);
        }
      }
      const hr = hits / Math.max(1, n);
      const half = 1.96 * Math.sqrt((hr * (1 - hr)) / Math.max(1, n));
      out(
        `| ${iterations} | ${vectorsCpu.toFixed(1)} | ${n.toLocaleString('en')} of ${tests.length.toLocaleString('en')} | ${hr.toFixed(4)} [${Math.max(0, hr - half).toFixed(4)}, ${(hr + half).toFixed(4)}] | ${(ndcg / Math.max(1, n)).toFixed(4)} |`,
      );
    }
  } finally {
    if (!o.keep) rmSync(dir, { recursive: true, force: true });
  }
}

const invoked = process.argv[1] ? pathToFileURL(resolve(process.argv[1])).href : '';
if (import.meta.url === invoked) {
  main().catch((e) => {
    err(`shop-vector-iterations: ${(e as Error).message}`);
    process.exit(1);
  });
}
