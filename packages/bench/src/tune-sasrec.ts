/**
 * Chooses SASRec's epochs (and learning rate / batch size) on VALIDATION cases only:
 *
 *   node -C atomem-source --import tsx packages/bench/src/tune-sasrec.ts --data DIR [--epochs 150] [--every 10]
 *       [--grid lr=0.001,batchSize=128 --grid lr=0.002,batchSize=128 ...] [--seed 2026]
 *       [--param sasrec.KEY=VALUE ...] [--quantize] [--json FILE]
 *
 * For each grid point, one training run on the validation histories (every user's
 * interactions before their validation item) to `--epochs`, evaluated every `--every`
 * epochs on the validation cases of protocol `loo` (setting `full`, all users); prints a
 * markdown table and the best (epochs, grid point) by NDCG@10. The test item is never read.
 * `--quantize`: also evaluates each grid point's final weights after a round trip through
 * the binary format with float16 and int8 item embeddings (packages/atomem/src/shop/sasrec/model.ts).
 */
import { writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { loadDataset } from './datasets.js';
import { meanMetrics, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { SasrecMethod, sasrecOptions } from './sasrec-method.js';
import { resolveDataDir } from './cli.js';
import type { MethodContext } from './types.js';
import { deserializeSasrec, serializeSasrec, type ItemEmbeddingEncoding, type SasrecWeights } from 'atomem/shop';

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
    .option('--data <dir>', 'ml-100k folder (default: $ATOMEM_ML100K, else ../shared/data/ml-100k)')
    .option('--epochs <n>', 'train each grid point to this many epochs', (v) => Number(v), 150)
    .option('--every <n>', 'evaluate every n epochs', (v) => Number(v), 10)
    .option('--seed <n>', 'seed', (v) => Number(v), DEFAULT_SEED)
    .option('--grid <k=v,...>', 'a grid point of sasrec options (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--param <key=value>', 'a sasrec.* option for every grid point (repeatable)', (v: string, prev: string[] = []) => [...prev, v])
    .option('--quantize', 'evaluate the final weights with float16 and int8 item embeddings too')
    .option('--json <file>', 'write the rows as JSON');
  cmd.parse();
  const o = cmd.opts<{ data?: string; epochs: number; every: number; seed: number; grid?: string[]; param?: string[]; quantize?: boolean; json?: string }>();
  const dataset = loadDataset('movielens', resolveDataDir('movielens', o.data));
  const protocol = buildProtocol(dataset, { setting: 'full', users: 'all', seed: o.seed, target: 'validation' });
  const base: Record<string, string> = {};
  for (const kv of o.param ?? []) {
    const [k, v] = kv.split('=');
    base[k] = v;
  }
  const grid = o.grid ?? ['lr=0.001,batchSize=128'];
  const rows: Row[] = [];
  const quantized: Array<{ grid: string; encoding: ItemEmbeddingEncoding; bytes: number; ndcg1: number; ndcg5: number; ndcg10: number }> = [];
  console.error(`validation cases: ${protocol.cases.length}; grid: ${grid.join(' | ')}; epochs ${o.epochs}, every ${o.every}`);
  for (const point of grid) {
    const params = { ...base };
    for (const kv of point.split(',')) {
      const [k, v] = kv.split('=');
      params[`sasrec.${k}`] = v;
    }
    params['sasrec.epochs'] = String(o.epochs);
    const started = performance.now();
    let method: SasrecMethod;
    const evaluate = (epoch: number, loss: number, weights: SasrecWeights) => {
      if (epoch % o.every !== 0 && epoch !== o.epochs) return;
      const ranks = protocol.cases.map((c) => rankOf(method.rankWith(c, weights), c.test.item));
      const m = meanMetrics(ranks);
      const row: Row = {
        grid: point,
        epoch,
        loss,
        ndcg1: m.ndcg1,
        ndcg5: m.ndcg5,
        ndcg10: m.ndcg10,
        hr1: m.hr1,
        seconds: (performance.now() - started) / 1000,
      };
      rows.push(row);
      console.error(
        `${point} epoch ${epoch}: loss ${loss.toFixed(4)} NDCG@10 ${m.ndcg10.toFixed(4)} NDCG@1 ${m.ndcg1.toFixed(4)} (${row.seconds.toFixed(0)} s)`,
      );
    };
    method = new SasrecMethod({
      ...sasrecOptions(params),
      checkpoint: evaluate,
    });
    const ctx: MethodContext = {
      dataset,
      cases: protocol.cases,
      histories: protocol.histories,
      seed: o.seed,
      privacy: 'off',
      setting: 'full',
      target: 'validation',
      progress: () => {},
    };
    await method.prepare(ctx);
    if (o.quantize && method.model) {
      for (const encoding of ['f32', 'f16', 'int8'] as const) {
        const bytes = serializeSasrec(method.model, { itemEmbedding: encoding });
        const w = deserializeSasrec(bytes);
        const m = meanMetrics(protocol.cases.map((c) => rankOf(method.rankWith(c, w), c.test.item)));
        quantized.push({ grid: point, encoding, bytes: bytes.length, ndcg1: m.ndcg1, ndcg5: m.ndcg5, ndcg10: m.ndcg10 });
      }
    }
  }
  const f = (x: number) => x.toFixed(4);
  console.log('| grid | epoch | loss | NDCG@1 | NDCG@5 | NDCG@10 | HR@1 | seconds |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of rows)
    console.log(`| ${r.grid} | ${r.epoch} | ${f(r.loss)} | ${f(r.ndcg1)} | ${f(r.ndcg5)} | ${f(r.ndcg10)} | ${f(r.hr1)} | ${r.seconds.toFixed(0)} |`);
  if (quantized.length) {
    console.log('\n| grid | item embeddings | file bytes | NDCG@1 | NDCG@5 | NDCG@10 |\n|---|---|---:|---:|---:|---:|');
    for (const q of quantized) console.log(`| ${q.grid} | ${q.encoding} | ${q.bytes} | ${f(q.ndcg1)} | ${f(q.ndcg5)} | ${f(q.ndcg10)} |`);
  }
  const best = rows.reduce((a, b) => (b.ndcg10 > a.ndcg10 ? b : a));
  console.log(`\nbest on validation: ${best.grid}, epochs ${best.epoch}: NDCG@10 ${f(best.ndcg10)}`);
  if (o.json) writeFileSync(o.json, JSON.stringify({ seed: o.seed, epochs: o.epochs, every: o.every, grid, rows, best, quantized }, null, 2));
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
