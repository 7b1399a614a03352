/**
 * Microbenchmark of SASRec inference (packages/atomem/src/shop/sasrec/model.ts):
 *
 *   node -C atomem-source --import tsx packages/bench/src/sasrec-micro.ts [--runs 2000] [--len 100] [--items 1349]
 *
 * L 100, d 64, 2 blocks, 1 head (the benchmark's model), weights from the trainer's
 * initialisation (speed does not depend on the values). Prints p50/p95/mean µs of one
 * `encodeHistory` of a `--len`-item history (with the WebAssembly SIMD products, then with
 * plain JS) and of `scoreItems` on 10 candidates.
 */
import { Rng } from './rng.js';
import { makeLayout, weightsView } from 'atomem/shop';
import { encodeHistory, sasrecKernel, scoreItems, setSasrecKernel } from 'atomem/shop';
import { initWeights } from 'atomem/shop';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

const runs = arg('runs', 2000);
const len = arg('len', 100);
const items = arg('items', 1349);
const layout = makeLayout({ maxLen: 100, dim: 64, blocks: 2, heads: 1 }, items);
const weights = weightsView(layout, initWeights(layout, 2026));
const rng = new Rng('sasrec-micro');
const histories = Array.from({ length: 64 }, () => Int32Array.from({ length: len }, () => 1 + rng.int(items)));
const candidates = Int32Array.from({ length: 10 }, () => 1 + rng.int(items));

/** Wall-clock p50/p95/mean of single calls, and CPU time per call (robust to a busy machine). */
function measure(f: (k: number) => void): { p50: number; p95: number; mean: number; cpu: number } {
  for (let k = 0; k < Math.min(500, runs); k++) f(k); // warm-up (JIT)
  const t = new Float64Array(runs);
  const c0 = process.cpuUsage();
  for (let k = 0; k < runs; k++) {
    const t0 = performance.now();
    f(k);
    t[k] = (performance.now() - t0) * 1000;
  }
  const c = process.cpuUsage(c0);
  const sorted = Float64Array.from(t).sort();
  return {
    p50: sorted[Math.floor(runs / 2)],
    p95: sorted[Math.floor(runs * 0.95)],
    mean: t.reduce((a, b) => a + b, 0) / runs,
    cpu: (c.user + c.system) / runs,
  };
}

let sink = 0;
const rowsOut: string[] = [];
const f = (x: number) => x.toFixed(1).padStart(8);
for (const kernel of ['auto', 'js'] as const) {
  setSasrecKernel(kernel);
  const enc = measure((k) => {
    sink += encodeHistory(weights, histories[k % histories.length])[0];
  });
  rowsOut.push(`| encodeHistory (${sasrecKernel(weights.config)}) | ${f(enc.p50)} | ${f(enc.p95)} | ${f(enc.mean)} | ${f(enc.cpu)} |`);
}
setSasrecKernel('auto');
const u = encodeHistory(weights, histories[0]);
const score = measure(() => {
  sink += scoreItems(weights, u, candidates)[0];
});
rowsOut.push(`| scoreItems (10 candidates) | ${f(score.p50)} | ${f(score.p95)} | ${f(score.mean)} | ${f(score.cpu)} |`);
const os = await import('node:os');
console.log(`SASRec inference, L 100, d 64, 2 blocks, 1 head, history of ${len}, ${runs} runs (node ${process.version})`);
console.log(`| what | p50 µs | p95 µs | mean µs | CPU µs per call |\n|---|---:|---:|---:|---:|`);
for (const r of rowsOut) console.log(r);
console.log(
  `load average ${os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')} on ${os.availableParallelism()} cores`,
);
if (!Number.isFinite(sink)) console.log('(non-finite output)');
