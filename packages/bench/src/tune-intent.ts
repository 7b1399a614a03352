/**
 * Fit the weights of atomem's intent signals (`config.intentWeights`) on VALIDATION items only
 * (the committed tuning command of setting `instruct`):
 *
 *   npm run tune:intent -- --data ../shared/data/ml-100k --users all [--privacy off] [--param k=v]… [--json FILE]
 *
 * 1. Runs the benchmark's `atomem` method in setting `instruct` on validation cases (target =
 *    each user's second-to-last interaction, its intent made from that item's categories;
 *    histories exclude the last two) with a feature dump (refused on test cases by the method).
 * 2. Coordinate search over the intent weights only (`intent`, `intentTerms`, `intentCategories`,
 *    `intentMemory`); the memory's own weights stay at `DEFAULT_CONFIG.weights` (tuned without an
 *    intent by `npm run tune`). Re-scored with the ranker's own rule (`combine`).
 * 3. Prints each improvement and the fitted weights (paste them into
 *    `DEFAULT_CONFIG.intentWeights`) and, with `--json`, writes them.
 *
 * It never reads a test item: the protocol is built with `target: 'validation'`.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG } from 'atomem/engine';
import { DEFAULT_KCORE, loadDataset } from './datasets.js';
import './methods.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { runBenchmark } from './run.js';
import { meanNdcg, type DumpedCase } from './tune-weights.js';
import type { DatasetFormat, Privacy } from './types.js';

/** The intent signals and the grid each weight is searched over (intent evidence is strong: the grid reaches far). */
export const INTENT_KEYS = ['intent', 'intentTerms', 'intentCategories', 'intentMemory'] as const;
export const INTENT_GRID = [0, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 16];

/** Coordinate search over `keys` of `start` only (others fixed); `log` gets one line per improvement. */
export function searchKeys(
  cases: readonly DumpedCase[],
  targets: ReadonlyMap<string, string>,
  start: Readonly<Record<string, number>>,
  keys: readonly string[],
  grid: readonly number[],
  log: (line: string) => void = () => {},
): { weights: Record<string, number>; ndcg10: number; start: number } {
  const w = { ...start };
  const first = meanNdcg(cases, targets, w);
  let best = first;
  for (let pass = 1; pass <= 8; pass++) {
    const before = best;
    for (const k of keys) {
      for (const v of grid) {
        if (v === w[k]) continue;
        const s = meanNdcg(cases, targets, { ...w, [k]: v });
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
    process.stdout.write(
      'usage: tune-intent --data DIR [--format movielens|agentcf|jsonl] [--users N|all] [--seed N] [--privacy off] [--param k=v]… [--json FILE]\n',
    );
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
  const dir = mkdtempSync(join(tmpdir(), 'atomem-tune-intent-'));
  const dump = join(dir, 'features.jsonl');
  try {
    process.stderr.write(`validation run of atomem in setting instruct (privacy ${values.privacy}), dumping features to ${dump}\n`);
    await runBenchmark({
      dataset,
      setting: 'instruct',
      users,
      seed,
      methods: ['atomem'],
      privacy: [values.privacy as Privacy],
      validation: true,
      params: { ...params, 'atomem.dumpFeatures': dump, 'atomem.fidelityUsers': '0' },
      onProgress: (e) => {
        if (e.done === e.total) process.stderr.write(`  ${e.label ?? e.phase}: ${e.total}\n`);
      },
    });
    const targets = new Map(buildProtocol(dataset, { setting: 'instruct', users, seed, target: 'validation' }).cases.map((c) => [c.user, c.test.item]));
    const cases = readFileSync(dump, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as DumpedCase);
    const base = DEFAULT_CONFIG.weights as unknown as Record<string, number>;
    const intentDefaults = DEFAULT_CONFIG.intentWeights as Record<string, number>;
    const start: Record<string, number> = { ...base };
    for (const [k, v] of Object.entries(params)) if (k.startsWith('atomem.w.')) start[k.slice('atomem.w.'.length)] = Number(v);
    for (const k of INTENT_KEYS) start[k] = Number(params[`atomem.iw.${k}`] ?? intentDefaults[k] ?? 0);
    const without = meanNdcg(
      cases,
      targets,
      Object.fromEntries(Object.entries(start).map(([k, v]) => [k, (INTENT_KEYS as readonly string[]).includes(k) ? 0 : v])),
    );
    const fit = searchKeys(cases, targets, start, INTENT_KEYS, INTENT_GRID, (l) => process.stdout.write(`${l}\n`));
    process.stdout.write(
      `\nvalidation NDCG@10 (${cases.length} users): ${without.toFixed(4)} without the intent, ${fit.start.toFixed(4)} with the starting intent weights → ${fit.ndcg10.toFixed(4)} fitted\n`,
    );
    process.stdout.write(
      `| intent signal | start | fitted |\n|---|---:|---:|\n${INTENT_KEYS.map((k) => `| ${k} | ${start[k]} | ${fit.weights[k]} |`).join('\n')}\n`,
    );
    // sensitivity: each intent weight over the grid, the others at their fitted values
    process.stdout.write(
      `\nsensitivity (validation NDCG@10, one weight varied):\n| weight | ${INTENT_GRID.join(' | ')} |\n|---|${INTENT_GRID.map(() => '---:').join('|')}|\n`,
    );
    for (const k of INTENT_KEYS) {
      const row = INTENT_GRID.map((v) => meanNdcg(cases, targets, { ...fit.weights, [k]: v }).toFixed(4));
      process.stdout.write(`| ${k} | ${row.join(' | ')} |\n`);
    }
    const fitted = Object.fromEntries(INTENT_KEYS.map((k) => [k, fit.weights[k]]));
    process.stdout.write(`\nintentWeights: ${JSON.stringify(fitted)}\n`);
    if (values.json)
      writeFileSync(
        values.json,
        `${JSON.stringify({ privacy: values.privacy, users: cases.length, seed, without, start: fit.start, ndcg10: fit.ndcg10, intentWeights: fitted }, null, 2)}\n`,
      );
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
