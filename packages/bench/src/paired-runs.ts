/**
 * Paired difference of two benchmark runs (`npm run bench:paired -- A.json B.json`): per-user
 * NDCG@10 of row `--row` (default: each row key present in both) of run A minus run B, with a
 * paired bootstrap interval over users. Both runs must have the same data, users, seed and
 * split (checked on the config); written by `npm run bench -- … --json FILE`.
 */
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { pairedDiff } from './run.js';

interface RunFile {
  config: Record<string, unknown>;
  perUser?: Record<string, number[]>;
}

function load(path: string): RunFile {
  const f = JSON.parse(readFileSync(path, 'utf8')) as RunFile;
  if (!f.perUser) throw new Error(`${path} has no perUser field: re-run it with this version of the benchmark`);
  return f;
}

const o = new Command('bench:paired')
  .argument('<a>', 'run A (--json output)')
  .argument('<b>', 'run B (--json output)')
  .option('--row <key>', 'row key in both, e.g. atomem/off (default: every common key)')
  .option('--row-b <key>', 'row key in B when it differs from --row')
  .parse();
const [pa, pb] = o.args;
const opts = o.opts<{ row?: string; rowB?: string }>();
const a = load(pa);
const b = load(pb);
for (const k of ['data', 'seed', 'users', 'target', 'setting', 'cases'] as const) {
  if (JSON.stringify(a.config[k]) !== JSON.stringify(b.config[k]))
    throw new Error(`the runs differ in config.${k}: ${JSON.stringify(a.config[k])} vs ${JSON.stringify(b.config[k])}`);
}
const keys = opts.row
  ? [[opts.row, opts.rowB ?? opts.row]]
  : Object.keys(a.perUser!)
      .filter((k) => k in b.perUser!)
      .map((k) => [k, k]);
if (keys.length === 0) throw new Error('no common row key');
const seed = Number(a.config.seed ?? 2026);
console.log('| row A | row B | users | A − B NDCG@10 | 95% CI (paired bootstrap) | better / worse |');
console.log('|---|---|---:|---:|---|---|');
for (const [ka, kb] of keys) {
  const ua = a.perUser![ka];
  const ub = b.perUser![kb];
  if (!ua || !ub) throw new Error(`row ${!ua ? ka : kb} missing`);
  const d = pairedDiff(ua, ub, seed);
  console.log(
    `| ${ka} | ${kb} | ${ua.length} | ${d.mean >= 0 ? '+' : ''}${d.mean.toFixed(4)} | [${d.ci[0].toFixed(4)}, ${d.ci[1].toFixed(4)}] | ${d.better} / ${d.worse} |`,
  );
}
