/**
 * Embedding rate of `atomem-vectors` with the real USE-lite: a generated catalog of product
 * texts (title, department, two-sentence description: ~40 tokens, like the demo shop's) embedded
 * on 1 thread and on `--threads` threads, in the same run; prints items/s, the ratio, the CPU
 * time (items per CPU-second: the rate one free core gives, whatever else the machine runs) and
 * the machine's load (a shared machine's wall-clock figures depend on it).
 *
 *   node -C atomem-source --import tsx packages/atomem/scripts/bench-vectors.ts [--items 2000] [--threads 2]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { runVectorsCli } from '../src/vectors-cli.js';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const N = arg('items', 2000);
const THREADS = arg('threads', availableParallelism());

const DEPARTMENTS: Record<string, [nouns: string[], uses: string[]]> = {
  Outdoor: [
    ['tent', 'sleeping bag', 'backpack', 'headlamp', 'trekking poles', 'camping stove'],
    ['camping under the stars', 'cold mountain nights', 'multi-day hiking trips', 'steep mountain trails'],
  ],
  Kitchen: [
    ['frying pan', "chef's knife", 'kettle', 'blender', 'stock pot', 'cutting board'],
    ['searing steaks', 'chopping vegetables', 'morning coffee', 'weeknight pasta'],
  ],
  Books: [
    ['mystery novel', 'cookbook', 'world atlas', 'poetry collection', 'biography', 'trail guide'],
    ['long train journeys', 'rainy weekends', 'curious readers', 'gift giving'],
  ],
  Beauty: [
    ['face cream', 'shampoo', 'lip balm', 'perfume', 'nail polish', 'hair dryer'],
    ['dry winter skin', 'everyday care', 'evening outings', 'sensitive skin'],
  ],
};
const ADJECTIVES = ['Classic', 'Compact', 'Premium', 'Lightweight', 'Essential', 'Deluxe', 'Rugged', 'Organic'];

/** A deterministic catalog of `n` items. */
function catalog(n: number): object[] {
  const depts = Object.entries(DEPARTMENTS);
  return Array.from({ length: n }, (_, i) => {
    const [dept, [nouns, uses]] = depts[i % depts.length];
    const noun = nouns[(i >> 2) % nouns.length];
    const adj = ADJECTIVES[(i * 7) % ADJECTIVES.length];
    const use = uses[(i * 3) % uses.length];
    return {
      id: `sku-${i}`,
      title: `${adj} ${noun} ${i}`,
      categories: [dept],
      description: `${dept}: ${noun} for ${use}. ${adj} quality, chosen by our staff and loved by customers.`,
    };
  });
}

const dir = mkdtempSync(join(tmpdir(), 'atomem-bench-vectors-'));
try {
  writeFileSync(join(dir, 'catalog.json'), JSON.stringify(catalog(N)));
  console.log(
    `atomem-vectors (use-lite) on ${N} generated items, ${availableParallelism()} cores, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  const rates: number[] = [];
  for (const threads of [...new Set([1, THREADS])]) {
    let out = '';
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const code = await runVectorsCli(
      ['--catalog', join(dir, 'catalog.json'), '--out', join(dir, `v${threads}.bin`), '--threads', String(threads), '--no-progress'],
      { stdout: { write: (s: string) => (out += s) }, stderr: process.stderr },
    );
    if (code !== 0) throw new Error(`atomem-vectors exited ${code}`);
    const rate = Number(/([\d.]+) items\/s/.exec(out)?.[1]);
    const cpu = process.cpuUsage(cpu0);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6; // every thread of the process, model loads included
    const wall = (performance.now() - t0) / 1000;
    rates.push(rate);
    console.log(
      `  ${threads} thread${threads > 1 ? 's' : ''}: ${rate} items/s while embedding; whole run ${wall.toFixed(1)} s wall, ${cpuSeconds.toFixed(1)} s CPU = ${(N / cpuSeconds).toFixed(0)} items per CPU-second, ${(cpuSeconds / wall).toFixed(2)} cores busy (${out.trim().replace(/^.*?: \d+ items, /, '')})`,
    );
  }
  if (rates.length > 1)
    console.log(
      `  ratio ${THREADS} threads / 1 thread: ${(rates[1] / rates[0]).toFixed(2)}; load average after ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
    );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
