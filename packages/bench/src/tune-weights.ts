/**
 * Fit atomem's ranking weights on VALIDATION items only (the committed tuning command).
 *
 *   npm run tune -- --data ../shared/data/ml-100k --users all [--privacy off] [--param k=v]… [--json FILE]
 *
 * 1. Runs the benchmark's `atomem` method on validation cases (each user's second-to-last
 *    interaction is the target; histories exclude the last two) with a feature dump: the
 *    per-candidate ranking signals of every case, in candidate order. The dump is refused on
 *    test cases by the method itself.
 * 2. Coordinate search over the weights: for each signal in turn, every value of a grid, keeping
 *    the best mean NDCG@10 (re-scored with the ranker's own rule, `combine` from atomem/engine:
 *    z-scored within the list, weighted, ties in candidate order as in `rank`), until a full
 *    pass improves by less than 1e-4.
 * 3. Prints each step and the fitted weights (paste them into `DEFAULT_CONFIG.weights` with the
 *    command in a comment) and, with `--json`, writes them.
 *
 * It never reads a test item: the protocol is built with `target: 'validation'`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { combine, DEFAULT_CONFIG } from 'atomem/engine';
import { DEFAULT_KCORE, loadDataset } from './datasets.js';
import './methods.js';
import { ndcgAt, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { runBenchmark } from './run.js';
import type { DatasetFormat, Privacy } from './types.js';

/** One dumped case: candidate id → features, in candidate order. */
export interface DumpedCase {
  user: string;
  candidates: [string, Record<string, number>][];
}

/** Mean NDCG@10 of `weights` over dumped cases with known targets. */
export function meanNdcg(cases: readonly DumpedCase[], targets: ReadonlyMap<string, string>, weights: Readonly<Record<string, number>>): number {
  let sum = 0;
  for (const c of cases) {
    const scores = combine(c.candidates.map(([, f]) => f), weights);
    const order = c.candidates.map(([id], i) => ({ id, i, s: scores[i] })).sort((a, b) => b.s - a.s || a.i - b.i);
    sum += ndcgAt(rankOf(order.map((o) => o.id), targets.get(c.user)!), 10);
  }
  return cases.length ? sum / cases.length : 0;
}

/** Grid of values tried for each weight. */
export const WEIGHT_GRID = [0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5];

/** Coordinate search from `start`; `log` gets one line per improvement. */
export function coordinateSearch(
  cases: readonly DumpedCase[],
  targets: ReadonlyMap<string, string>,
  start: Readonly<Record<string, number>>,
  log: (line: string) => void = () => {},
  grid: readonly number[] = WEIGHT_GRID,
): { weights: Record<string, number>; ndcg10: number; start: number } {
  const w = { ...start };
  const first = meanNdcg(cases, targets, w);
  let best = first;
  for (let pass = 1; pass <= 8; pass++) {
    const before = best;
    for (const k of Object.keys(w)) {
      for (const v of grid) {
        if (v === w[k]) continue;
        const trial = { ...w, [k]: v };
        const s = meanNdcg(cases, targets, trial);
        if (s > best + 1e-9) {
          best = s;
          w[k] = v;
          log(`pass ${pass}: ${k} = ${v} → NDCG@10 ${best.toFixed(4)}`);
        }
      }
    }
    if (best - before < 1e-4) break;
  }
  return { weights: w, ndcg10: best, start: first };
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      format: { type: 'string', default: 'movielens' },
      users: { type: 'string', default: 'all' },
      seed: { type: 'string', default: String(DEFAULT_SEED) },
      privacy: { type: 'string', default: 'off' },
      param: { type: 'string', multiple: true, default: [] },
      json: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write('usage: tune-weights --data DIR [--format movielens|agentcf|jsonl] [--users N|all] [--seed N] [--privacy off] [--param k=v]… [--json FILE]\n');
    return 0;
  }
  const data = values.data ?? process.env.ATOMEM_ML100K ?? resolve('../shared/data/ml-100k');
  const format = values.format as DatasetFormat;
  const dataset = loadDataset(format, data, { kcore: DEFAULT_KCORE[format] });
  const users = values.users === 'all' ? 'all' : Number(values.users);
  const seed = Number(values.seed);
  const params: Record<string, string> = {};
  for (const p of values.param ?? []) {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new Error(`--param ${p}: expected key=value`);
    params[p.slice(0, eq)] = p.slice(eq + 1);
  }
  const dir = mkdtempSync(join(tmpdir(), 'atomem-tune-'));
  const dump = join(dir, 'features.jsonl');
  try {
    process.stderr.write(`validation run of atomem (privacy ${values.privacy}), dumping features to ${dump}\n`);
    await runBenchmark({
      dataset,
      users,
      seed,
      methods: ['atomem'],
      privacy: [values.privacy as Privacy],
      validation: true,
      params: { ...params, 'atomem.dumpFeatures': dump },
      onProgress: (e) => {
        if (e.done === e.total) process.stderr.write(`  ${e.label ?? e.phase}: ${e.total}\n`);
      },
    });
    const targets = new Map(buildProtocol(dataset, { users, seed, target: 'validation' }).cases.map((c) => [c.user, c.test.item]));
    const cases = readFileSync(dump, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as DumpedCase);
    const keys = Object.keys(cases[0]?.candidates[0]?.[1] ?? {});
    const defaults = DEFAULT_CONFIG.weights as unknown as Record<string, number>;
    const start: Record<string, number> = Object.fromEntries(keys.map((k) => [k, Number(params[`atomem.w.${k}`] ?? defaults[k] ?? 0)]));
    const fit = coordinateSearch(cases, targets, start, (l) => process.stdout.write(`${l}\n`));
    process.stdout.write(`\nvalidation NDCG@10: ${fit.start.toFixed(4)} with the starting weights → ${fit.ndcg10.toFixed(4)} fitted (${cases.length} users)\n`);
    process.stdout.write(`| signal | start | fitted |\n|---|---:|---:|\n${keys.map((k) => `| ${k} | ${start[k]} | ${fit.weights[k]} |`).join('\n')}\n`);
    process.stdout.write(`\nweights: ${JSON.stringify(fit.weights)}\n`);
    if (values.json) writeFileSync(values.json, `${JSON.stringify({ privacy: values.privacy, users: cases.length, seed, ...fit }, null, 2)}\n`);
    return 0;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      process.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
