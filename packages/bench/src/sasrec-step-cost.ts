/**
 * SASRec's cost per training step against the catalog size, with the shipped dense updates and
 * with the shop's lazy embedding updates (`sparseEmbeddings`, as `atomem-shop --sasrec` trains):
 *
 *   node -C atomem-source --import tsx packages/bench/src/sasrec-step-cost.ts [--items 10000,100000,1000000] [--steps 6]
 *
 * The same synthetic batch stream for every size (1,000 users × 40 items drawn uniformly from
 * the catalog), sampled softmax with 256 negatives, batch 128, L 50, d 64, one thread; the first
 * step (allocation, wasm compile) is left out. CPU seconds of this process per step.
 */
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command } from 'commander';
import { trainSasrec } from 'atomem/shop';
import { Rng } from './rng.js';

function cpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function perStep(n: number, steps: number, sparse: boolean): Promise<{ cpu: number; wall: number }> {
  const rng = new Rng(1);
  const seqs = Array.from({ length: 1000 }, () => Int32Array.from({ length: 40 }, () => 1 + rng.int(n)));
  const marks: Array<{ c: number; w: number }> = [];
  await trainSasrec(seqs, n, {
    maxLen: 50,
    threads: 1,
    loss: 'sampled-softmax',
    sparseEmbeddings: sparse,
    epochs: 1000,
    onStep: (step) => {
      marks.push({ c: cpu(), w: performance.now() });
      return step < steps + 1;
    },
  });
  const a = marks[0];
  const b = marks[marks.length - 1];
  return { cpu: (b.c - a.c) / (marks.length - 1), wall: (b.w - a.w) / 1000 / (marks.length - 1) };
}

async function main(): Promise<void> {
  const o = new Command()
    .option('--items <list>', 'catalog sizes', '10000,100000,1000000')
    .option('--steps <n>', 'timed steps per run', '6')
    .parse()
    .opts<{ items: string; steps: string }>();
  const steps = Number(o.steps);
  const rows: string[] = [];
  for (const n of o.items.split(',').map(Number)) {
    const dense = await perStep(n, steps, false);
    const sparse = await perStep(n, steps, true);
    rows.push(
      `| ${n.toLocaleString('en')} | ${dense.cpu.toFixed(3)} | ${sparse.cpu.toFixed(3)} | ${(dense.cpu / sparse.cpu).toFixed(1)}× | ${dense.wall.toFixed(3)} | ${sparse.wall.toFixed(3)} |`,
    );
    process.stderr.write(`sasrec-step-cost: ${n} items done\n`);
  }
  process.stdout.write(`\nSASRec step cost, ${steps} steps per run, one thread; load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores\n\n`);
  process.stdout.write(
    '| items | dense CPU s/step | lazy (sparse) CPU s/step | ratio | dense wall s/step | lazy wall s/step |\n|---:|---:|---:|---:|---:|---:|\n',
  );
  process.stdout.write(`${rows.join('\n')}\n`);
}

const invoked = process.argv[1] ? pathToFileURL(resolve(process.argv[1])).href : '';
if (import.meta.url === invoked)
  main().catch((e: Error) => {
    process.stderr.write(`sasrec-step-cost: ${e.stack ?? e.message}\n`);
    process.exit(1);
  });
