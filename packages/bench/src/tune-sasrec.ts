/**
 * Chooses SASRec's settings (epochs, learning rate, loss, ...) on VALIDATION cases only:
 *
 *   node -C atomem-source --import tsx packages/bench/src/tune-sasrec.ts --data DIR [--format movielens|sequences]
 *       [--protocol loo|loo-full] [--users N|all] [--epochs 150] [--every 10]
 *       [--grid lr=0.001,batchSize=128 --grid lr=0.002,batchSize=128 ...] [--seed 2026]
 *       [--param sasrec.KEY=VALUE ...] [--quantize] [--json FILE]
 *
 * For each grid point, one training run on the validation histories (every user's
 * interactions before their validation item) to `--epochs`, evaluated every `--every`
 * epochs on the validation cases; prints a markdown table and the best (epochs, grid point) by
 * NDCG@10. The test item is never read.
 * - `--protocol loo` (the default for `--format movielens`): the validation cases of protocol
 *   `loo` (setting `full`, the target among 9 sampled negatives); grid points start from
 *   `SASREC_DEFAULTS`.
 * - `--protocol loo-full` (the default for `--format sequences`, e.g. Amazon Beauty's
 *   `user_sequence.txt`): the validation item ranked among every item the user has not had
 *   (`--users`, default 2000, a seeded sample); grid points start from the catalog-scaled
 *   `sasrecProfile` (packages/atomem/src/shop/sasrec/profile.ts), as the full-ranking benchmark
 *   and `atomem-shop --sasrec` do, so `--grid loss=ce` or `--grid negatives=256` measure a
 *   departure from the shipped choice.
 * `--quantize`: also evaluates each grid point's final weights after a round trip through
 * the binary format with float16 and int8 item embeddings (packages/atomem/src/shop/sasrec/model.ts).
 */
import { writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { DEFAULT_KCORE, loadDataset } from './datasets.js';
import { buildFullProtocol } from './full-protocol.js';
import { meanMetrics, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { fullRankNdcg10, itemIndex, SasrecMethod, sasrecOptions } from './sasrec-method.js';
import { resolveDataDir } from './cli.js';
import type { DatasetFormat, MethodContext } from './types.js';
import { deserializeSasrec, sasrecProfile, serializeSasrec, type ItemEmbeddingEncoding, type SasrecWeights } from 'atomem/shop';

interface Row {
  grid: string;
  epoch: number;
  loss: number;
  ndcg1: number;
  ndcg5: number;
  ndcg10: number;
  hr1: number;
  seconds: number;
}

async function main(): Promise<void> {
  const cmd = new Command()
    .option('--data <dir>', 'dataset folder (default for movielens: $ATOMEM_ML100K, else ../shared/data/ml-100k)')
    .option('--format <format>', 'movielens | sequences (user_sequence.txt: user item item ... per line, oldest first)', 'movielens')
    .option('--protocol <name>', 'loo (10 candidates) | loo-full (all items ranked); default loo for movielens, loo-full for sequences')
    .option('--users <n>', 'loo-full: validation users (a seeded sample) or "all"', '2000')
    .option('--kcore <k>', 'k-core filter (default 5 for movielens, 0 otherwise)', (v) => Number(v))
    .option('--epochs <n>', 'train each grid point to this many epochs', (v) => Number(v), 150)
    .option('--every <n>', 'evaluate every n epochs', (v) => Number(v), 10)
    .option('--seed <n>', 'seed', (v) => Number(v), DEFAULT_SEED)
    .option('--grid <k=v,...>', 'a grid point of sasrec options (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--param <key=value>', 'a sasrec.* option for every grid point (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--quantize', 'evaluate the final weights with float16 and int8 item embeddings too')
    .option('--json <file>', 'write the rows as JSON');
  cmd.parse();
  const o = cmd.opts<{
    data?: string;
    format: string;
    protocol?: string;
    users: string;
    kcore?: number;
    epochs: number;
    every: number;
    seed: number;
    grid?: string[];
    param?: string[];
    quantize?: boolean;
    json?: string;
  }>();
  if (o.format !== 'movielens' && o.format !== 'sequences') throw new Error(`--format must be movielens or sequences, got ${o.format}`);
  const format = o.format as DatasetFormat;
  const protocolName = o.protocol ?? (format === 'sequences' ? 'loo-full' : 'loo');
  if (protocolName !== 'loo' && protocolName !== 'loo-full') throw new Error(`--protocol must be loo or loo-full, got ${protocolName}`);
  const full = protocolName === 'loo-full';
  const users = o.users === 'all' ? 'all' : Number(o.users);
  if (users !== 'all' && !(Number.isInteger(users) && users >= 1)) throw new Error(`--users must be a positive integer or "all", got ${o.users}`);
  const dataset = loadDataset(format, resolveDataDir(format, o.data), { kcore: o.kcore ?? DEFAULT_KCORE[format] });
  const protocol = full
    ? buildFullProtocol(dataset, 'loo-full', { users, seed: o.seed, target: 'validation' })
    : buildProtocol(dataset, { setting: 'full', users: 'all', seed: o.seed, target: 'validation' });
  const base: Record<string, string> = {};
  for (const kv of o.param ?? []) {
    const [k, v] = kv.split('=');
    base[k] = v;
  }
  const ctx: MethodContext = {
    dataset,
    cases: protocol.cases,
    histories: protocol.histories,
    seed: o.seed,
    privacy: 'off',
    setting: 'full',
    target: 'validation',
    ...(full ? { protocol: 'loo-full' as const } : {}),
    progress: () => {},
  };
  // loo-full: the catalog-scaled starting point of the shipped training, and the cases as item indices
  const index = itemIndex(ctx);
  const profile = full
    ? sasrecProfile(
        index.size,
        [...protocol.histories.values()].map((h) => h.map((x) => index.get(x.item)!)),
      )
    : undefined;
  const fullCases = full ? protocol.cases.map((c) => ({ input: Int32Array.from(c.history, (x) => index.get(x.item)!), target: index.get(c.test.item)! })) : [];
  const grid = o.grid ?? ['lr=0.001,batchSize=128'];
  const rows: Row[] = [];
  const quantized: Array<{ grid: string; encoding: ItemEmbeddingEncoding; bytes: number; ndcg1: number; ndcg5: number; ndcg10: number }> = [];
  console.error(
    `${dataset.name}: ${index.size} items, protocol ${protocolName}, validation cases: ${protocol.cases.length}; ${profile ? `starting point ${JSON.stringify(profile)}; ` : ''}grid: ${grid.join(' | ')}; epochs ${o.epochs}, every ${o.every}`,
  );
  for (const point of grid) {
    const params: Record<string, string> = {};
    for (const [k, v] of Object.entries(profile ?? {})) if (v !== undefined) params[`sasrec.${k}`] = String(v);
    Object.assign(params, base);
    for (const kv of point.split(',')) {
      const [k, v] = kv.split('=');
      params[`sasrec.${k}`] = v;
    }
    if (params['sasrec.loss'] !== 'sampled-softmax' && base['sasrec.negatives'] === undefined && !point.includes('negatives='))
      delete params['sasrec.negatives'];
    params['sasrec.epochs'] = String(o.epochs);
    const started = performance.now();
    let method: SasrecMethod;
    const evaluate = (epoch: number, loss: number, weights: SasrecWeights) => {
      if (epoch % o.every !== 0 && epoch !== o.epochs) return;
      const row: Row = { grid: point, epoch, loss, ndcg1: NaN, ndcg5: NaN, ndcg10: NaN, hr1: NaN, seconds: 0 };
      if (full) row.ndcg10 = fullRankNdcg10(weights, index.size, fullCases);
      else {
        const m = meanMetrics(protocol.cases.map((c) => rankOf(method.rankWith(c, weights), c.test.item)));
        Object.assign(row, { ndcg1: m.ndcg1, ndcg5: m.ndcg5, ndcg10: m.ndcg10, hr1: m.hr1 });
      }
      row.seconds = (performance.now() - started) / 1000;
      rows.push(row);
      console.error(
        `${point} epoch ${epoch}: loss ${loss.toFixed(4)} NDCG@10 ${row.ndcg10.toFixed(4)}${full ? ' (all items)' : ` NDCG@1 ${row.ndcg1.toFixed(4)}`} (${row.seconds.toFixed(0)} s)`,
      );
    };
    method = new SasrecMethod({
      ...sasrecOptions(params),
      checkpoint: evaluate,
    });
    await method.prepare(ctx);
    if (o.quantize && method.model) {
      for (const encoding of ['f32', 'f16', 'int8'] as const) {
        const bytes = serializeSasrec(method.model, { itemEmbedding: encoding });
        const w = deserializeSasrec(bytes);
        if (full) {
          const ndcg10 = fullRankNdcg10(w, index.size, fullCases);
          quantized.push({ grid: point, encoding, bytes: bytes.length, ndcg1: NaN, ndcg5: NaN, ndcg10 });
        } else {
          const m = meanMetrics(protocol.cases.map((c) => rankOf(method.rankWith(c, w), c.test.item)));
          quantized.push({ grid: point, encoding, bytes: bytes.length, ndcg1: m.ndcg1, ndcg5: m.ndcg5, ndcg10: m.ndcg10 });
        }
      }
    }
  }
  const f = (x: number) => x.toFixed(4);
  if (full) {
    // loo-full measures NDCG@10 over all items only
    console.log('| grid | epoch | loss | NDCG@10 (all items) | seconds |');
    console.log('|---|---:|---:|---:|---:|');
    for (const r of rows) console.log(`| ${r.grid} | ${r.epoch} | ${f(r.loss)} | ${f(r.ndcg10)} | ${r.seconds.toFixed(0)} |`);
  } else {
    console.log('| grid | epoch | loss | NDCG@1 | NDCG@5 | NDCG@10 | HR@1 | seconds |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows)
      console.log(`| ${r.grid} | ${r.epoch} | ${f(r.loss)} | ${f(r.ndcg1)} | ${f(r.ndcg5)} | ${f(r.ndcg10)} | ${f(r.hr1)} | ${r.seconds.toFixed(0)} |`);
  }
  if (quantized.length) {
    console.log('\n| grid | item embeddings | file bytes | NDCG@1 | NDCG@5 | NDCG@10 |\n|---|---|---:|---:|---:|---:|');
    for (const q of quantized) console.log(`| ${q.grid} | ${q.encoding} | ${q.bytes} | ${f(q.ndcg1)} | ${f(q.ndcg5)} | ${f(q.ndcg10)} |`);
  }
  const best = rows.reduce((a, b) => (b.ndcg10 > a.ndcg10 ? b : a));
  console.log(`\nbest on validation: ${best.grid}, epochs ${best.epoch}: NDCG@10 ${f(best.ndcg10)}`);
  if (o.json)
    writeFileSync(
      o.json,
      JSON.stringify({ seed: o.seed, protocol: protocolName, profile, epochs: o.epochs, every: o.every, grid, rows, best, quantized }, null, 2),
    );
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
