/**
 * Per-epoch cost of SASRec training on a `sequences` dataset (e.g. Amazon Beauty) for each loss,
 * measured on a few steps and scaled to one epoch (⌊users / batchSize⌋ steps): how long a
 * full-ranking baseline at published strength takes on this machine.
 *
 *   node -C atomem-source --import tsx packages/bench/src/sasrec-epoch-cost.ts --data DIR [--steps 8] [--maxLen 50] [--losses ce,sampled-softmax,bce]
 */
import { parseArgs } from 'node:util';
import { trainSasrec } from 'atomem/shop';
import { loadDataset } from './datasets.js';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    format: { type: 'string', default: 'sequences' },
    steps: { type: 'string', default: '8' },
    maxLen: { type: 'string', default: '50' },
    batchSize: { type: 'string', default: '128' },
    negatives: { type: 'string', default: '256' },
    losses: { type: 'string', default: 'ce,sampled-softmax,bce' },
  },
});
if (!values.data) {
  process.stderr.write('error: --data DIR is required (a folder with user_sequence.txt)\n');
  process.exit(2);
}
const ds = loadDataset(values.format as 'sequences', values.data);
const index = new Map<string, number>();
for (const id of ds.items.keys()) index.set(id, index.size + 1);
// the training split of loo-full: every sequence minus its last two items
const seqs = [...ds.sequences.values()].map((s) => Int32Array.from(s.slice(0, -2), (x) => index.get(x.item)!)).filter((s) => s.length > 0);
const batchSize = Number(values.batchSize);
const steps = Number(values.steps);
const stepsPerEpoch = Math.floor(seqs.length / batchSize);
process.stdout.write(
  `${ds.name}: ${seqs.length} training sequences, ${index.size} items, ${stepsPerEpoch} steps per epoch (batch ${batchSize}, maxLen ${values.maxLen})\n\n`,
);
process.stdout.write('| loss | seconds per step | seconds per epoch (scaled) |\n|---|---:|---:|\n');
for (const loss of values.losses!.split(',') as Array<'ce' | 'sampled-softmax' | 'bce'>) {
  // one "epoch" of `steps` steps: a training set of steps × batchSize sequences
  const part = seqs.slice(0, steps * batchSize);
  const r = await trainSasrec(part, index.size, { epochs: 1, batchSize, maxLen: Number(values.maxLen), loss, negatives: Number(values.negatives) });
  const perStep = r.seconds / r.steps;
  process.stdout.write(
    `| ${loss}${loss === 'sampled-softmax' ? ` (${values.negatives})` : ''} | ${perStep.toFixed(3)} | ${(perStep * stepsPerEpoch).toFixed(0)} |\n`,
  );
}
