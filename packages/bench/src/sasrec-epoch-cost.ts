/**
 * Per-epoch cost of SASRec training on a `sequences` dataset (e.g. Amazon Beauty) for each loss,
 * measured on a few steps after a warm-up and scaled to one epoch (⌊users / batchSize⌋ steps):
 * how long a full-ranking baseline at published strength takes on this machine.
 *
 *   node -C atomem-source --import tsx packages/bench/src/sasrec-epoch-cost.ts --data DIR [--steps 30] [--warmup 3]
 *       [--maxLen 50] [--dropout 0.5] [--threads 2] [--losses ce,sampled-softmax,bce] [--negatives 256,1024]
 *
 * The training split of `loo-full` (every sequence minus its last two items), the trainer's
 * defaults otherwise (d 64, 2 blocks, 1 head, batch 128, dense Adam). The first `--warmup`
 * steps (worker start-up, WebAssembly compilation, first-touch allocation) are left out: they
 * cost seconds once per training, not per step. CPU seconds are the whole process's (every
 * thread), so on a shared machine they are the better guide; wall seconds are what a run takes.
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { trainSasrec } from 'atomem/shop';
import { loadDataset } from './datasets.js';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    format: { type: 'string', default: 'sequences' },
    steps: { type: 'string', default: '30' },
    warmup: { type: 'string', default: '3' },
    maxLen: { type: 'string', default: '50' },
    batchSize: { type: 'string', default: '128' },
    dropout: { type: 'string', default: '0.5' },
    threads: { type: 'string', default: '2' },
    negatives: { type: 'string', default: '256,1024' },
    losses: { type: 'string', default: 'ce,sampled-softmax,bce' },
  },
});
if (!values.data) {
  process.stderr.write('error: --data DIR is required (a folder with user_sequence.txt)\n');
  process.exit(2);
}
const num = (k: keyof typeof values, min: number) => {
  const v = Number(values[k]);
  if (!Number.isFinite(v) || v < min) {
    process.stderr.write(`error: --${k} must be a number ≥ ${min}, got ${values[k]}\n`);
    process.exit(2);
  }
  return v;
};
const ds = loadDataset(values.format as 'sequences', values.data);
const index = new Map<string, number>();
for (const id of ds.items.keys()) index.set(id, index.size + 1);
// the training split of loo-full: every sequence minus its last two items
const seqs = [...ds.sequences.values()].map((s) => Int32Array.from(s.slice(0, -2), (x) => index.get(x.item)!)).filter((s) => s.length > 0);
const batchSize = num('batchSize', 1);
const steps = num('steps', 1);
const warmup = num('warmup', 1);
const maxLen = num('maxLen', 1);
const dropout = num('dropout', 0);
const threads = num('threads', 1);
const stepsPerEpoch = Math.floor(seqs.length / batchSize);
process.stdout.write(
  `${ds.name}: ${seqs.length} training sequences, ${index.size} items, ${stepsPerEpoch} steps per epoch (batch ${batchSize}, maxLen ${maxLen}, dropout ${dropout}, ${threads} threads); ${steps} steps timed after ${warmup} warm-up steps\n\n`,
);
process.stdout.write('| loss | wall s/step | CPU s/step (all threads) | wall s/epoch (scaled) | load average |\n|---|---:|---:|---:|---:|\n');
const runs: Array<{ loss: 'ce' | 'sampled-softmax' | 'bce'; negatives?: number }> = [];
for (const loss of values.losses!.split(',') as Array<'ce' | 'sampled-softmax' | 'bce'>) {
  if (loss === 'sampled-softmax') for (const n of values.negatives!.split(',')) runs.push({ loss, negatives: Number(n) });
  else runs.push({ loss });
}
for (const { loss, negatives } of runs) {
  const marks: Array<{ wall: number; cpu: number }> = [];
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  };
  await trainSasrec(seqs, index.size, {
    epochs: 1000,
    batchSize,
    maxLen,
    dropout,
    threads,
    loss,
    negatives,
    onStep: (step) => {
      if (step >= warmup) marks.push({ wall: performance.now() / 1000, cpu: cpu() });
      return step < warmup + steps;
    },
  });
  const a = marks[0];
  const b = marks[marks.length - 1];
  const wall = (b.wall - a.wall) / (marks.length - 1);
  const c = (b.cpu - a.cpu) / (marks.length - 1);
  process.stdout.write(
    `| ${loss}${negatives ? ` (${negatives} negatives per chunk)` : ''} | ${wall.toFixed(3)} | ${c.toFixed(3)} | ${(wall * stepsPerEpoch).toFixed(1)} | ${loadavg()[0].toFixed(1)} on ${cpus().length} cores |\n`,
  );
}
