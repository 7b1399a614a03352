/**
 * Fit atomem's ranking weights on VALIDATION items only (the committed tuning command).
 *
 *   npm run tune -- --data ../shared/data/ml-100k --users all [--item-vectors hybrid|content] [--privacy off]
 *     [--tau-q 0.9] [--merge-q 0.99,0.995,0.999] [--param k=v]… [--json FILE]
 *
 * With `--item-vectors hybrid` (default: the shop's published model on the device, trained on the
 * validation context's log) every `shopWeights` entry — the memory's signals and the file's —
 * is fitted jointly by listwise softmax regression (`fitWeights` of atomem/shop) on the dumped
 * validation features, and `shopTauQuantile` × `shopMergeQuantile` (tau and the merge threshold
 * in the shop's space) are chosen on a grid: one validation training per point, the merge rate
 * per 1,000 events printed, the point with the best 2-fold cross-validated NDCG@10 (users split
 * in two; fit on one half, score the other) among those where merge acts (> 0) wins. With
 * `--item-vectors content` the content weights are fitted by the coordinate search below.
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
import { fitWeights, type FitCase } from 'atomem/shop';
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
    const scores = combine(
      c.candidates.map(([, f]) => f),
      weights,
    );
    const order = c.candidates.map(([id], i) => ({ id, i, s: scores[i] })).sort((a, b) => b.s - a.s || a.i - b.i);
    sum += ndcgAt(
      rankOf(
        order.map((o) => o.id),
        targets.get(c.user)!,
      ),
      10,
    );
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

/** Dumped cases as fitting cases (`names` signals; the positive is the validation target). */
export function fitCases(cases: readonly DumpedCase[], targets: ReadonlyMap<string, string>, names: readonly string[]): FitCase[] {
  return cases.map((c) => ({
    signals: Object.fromEntries(names.map((n) => [n, c.candidates.map(([, f]) => (Number.isFinite(f[n]) ? f[n] : 0))])),
    positive: c.candidates.findIndex(([id]) => id === targets.get(c.user)),
  }));
}

/** Signals that vary within at least one dumped list (a constant signal cannot be fitted). */
export function signalNames(cases: readonly DumpedCase[]): string[] {
  const names = new Set<string>();
  for (const c of cases) for (const [, f] of c.candidates) for (const k of Object.keys(f)) names.add(k);
  return [...names].filter((n) => cases.some((c) => c.candidates.some(([, f]) => f[n] !== c.candidates[0][1][n])));
}

/**
 * Listwise fit of every signal in `names` with 2-fold cross-validation over users: returns the
 * weights fitted on all cases, and the mean NDCG@10 of weights fitted on one half scored on the other.
 */
export function fitListwise(
  cases: readonly DumpedCase[],
  targets: ReadonlyMap<string, string>,
  names: readonly string[],
): { weights: Record<string, number>; cvNdcg10: number; inSample: number } {
  const fc = fitCases(cases, targets, names);
  const weights = fitWeights(fc, names);
  const halves = [0, 1].map((h) => cases.map((c, i) => ({ c, i })).filter((x) => x.i % 2 === h));
  let sum = 0;
  for (const h of [0, 1]) {
    const train = halves[h];
    const test = halves[1 - h];
    const w = fitWeights(
      train.map((x) => fc[x.i]),
      names,
    );
    sum +=
      meanNdcg(
        test.map((x) => x.c),
        targets,
        w,
      ) * test.length;
  }
  return { weights, cvNdcg10: sum / Math.max(1, cases.length), inSample: meanNdcg(cases, targets, weights) };
}

function parseGrid(v: string | undefined, fallback: number[]): number[] {
  if (!v) return fallback;
  const out = v.split(',').map(Number);
  if (out.some((x) => !(x > 0 && x < 1))) throw new Error(`grid ${v}: quantiles must be in (0, 1)`);
  return out;
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
      'item-vectors': { type: 'string', default: 'hybrid' },
      'tau-q': { type: 'string' },
      'merge-q': { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (values.help) {
    process.stdout.write(
      'usage: tune-weights --data DIR [--format movielens|agentcf|jsonl] [--users N|all] [--seed N] [--privacy off] [--item-vectors hybrid|content] [--tau-q Q,…] [--merge-q Q,…] [--param k=v]… [--json FILE]\n',
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
  const kind = values['item-vectors'];
  if (kind !== 'hybrid' && kind !== 'content') throw new Error(`--item-vectors must be hybrid or content, got ${kind}`);
  params['atomem.itemVectors'] = kind;
  if (kind === 'hybrid')
    return tuneHybrid(
      dataset,
      users,
      seed,
      values.privacy as Privacy,
      params,
      parseGrid(values['tau-q'], [DEFAULT_CONFIG.shopTauQuantile]),
      parseGrid(values['merge-q'], [0.99, 0.995, 0.999]),
      values.json,
    );
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
    const cases = readFileSync(dump, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as DumpedCase);
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

/** One validation run of atomem with a feature dump; returns the dumped cases and the row. */
async function validationDump(dataset: ReturnType<typeof loadDataset>, users: number | 'all', seed: number, privacy: Privacy, params: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-tune-'));
  const dump = join(dir, 'features.jsonl');
  try {
    const res = await runBenchmark({
      dataset,
      users,
      seed,
      methods: ['atomem'],
      privacy: [privacy],
      validation: true,
      params: { ...params, 'atomem.dumpFeatures': dump, 'atomem.fidelityUsers': '0' },
      onProgress: (e) => {
        if (e.done === e.total) process.stderr.write(`  ${e.label ?? e.phase}: ${e.total}\n`);
      },
    });
    const cases = readFileSync(dump, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as DumpedCase);
    return { cases, row: res.results[0] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `--item-vectors hybrid`: the calibration grid of tau / merge quantiles, then the joint listwise fit (see the module comment). */
async function tuneHybrid(
  dataset: ReturnType<typeof loadDataset>,
  users: number | 'all',
  seed: number,
  privacy: Privacy,
  params: Record<string, string>,
  tauGrid: number[],
  mergeGrid: number[],
  json: string | undefined,
): Promise<number> {
  const targets = new Map(buildProtocol(dataset, { users, seed, target: 'validation' }).cases.map((c) => [c.user, c.test.item]));
  const start = { ...DEFAULT_CONFIG.shopWeights };
  const points: Array<{
    tauQ: number;
    mergeQ: number;
    tau: number;
    mergeThreshold: number;
    lifecycle: Record<string, number>;
    memoriesPerUser: number;
    startNdcg10: number;
    cvNdcg10: number;
    inSample: number;
    weights: Record<string, number>;
    shopOnlyCv: number;
  }> = [];
  for (const tauQ of tauGrid) {
    for (const mergeQ of mergeGrid) {
      process.stderr.write(`validation run: shopTauQuantile ${tauQ}, shopMergeQuantile ${mergeQ}\n`);
      const { cases, row } = await validationDump(dataset, users, seed, privacy, {
        ...params,
        'atomem.shopTauQuantile': String(tauQ),
        'atomem.shopMergeQuantile': String(mergeQ),
      });
      const names = signalNames(cases);
      const fit = fitListwise(cases, targets, names);
      const shopNames = names.filter((n) => !(n in DEFAULT_CONFIG.weights));
      const shopOnly = fitListwise(cases, targets, shopNames);
      const p = {
        tauQ,
        mergeQ,
        tau: row.tau as number,
        mergeThreshold: row.mergeThreshold as number,
        lifecycle: row.lifecyclePer1000 as Record<string, number>,
        memoriesPerUser: row.memoriesPerUser as number,
        startNdcg10: meanNdcg(cases, targets, start),
        cvNdcg10: fit.cvNdcg10,
        inSample: fit.inSample,
        weights: fit.weights,
        shopOnlyCv: shopOnly.cvNdcg10,
      };
      points.push(p);
      process.stdout.write(
        `tauQ ${tauQ} (tau ${p.tau.toFixed(3)}), mergeQ ${mergeQ} (threshold ${p.mergeThreshold.toFixed(3)}): merge ${p.lifecycle.merge}/1000, forget ${p.lifecycle.forget}/1000, ` +
          `${p.memoriesPerUser.toFixed(1)} memories/user; validation NDCG@10 start weights ${p.startNdcg10.toFixed(4)}, fitted (2-fold CV) ${p.cvNdcg10.toFixed(4)}, shop signals only (2-fold CV) ${p.shopOnlyCv.toFixed(4)}\n`,
      );
    }
  }
  const acting = points.filter((p) => p.lifecycle.merge > 0);
  const best = (acting.length ? acting : points).reduce((a, b) => (b.cvNdcg10 > a.cvNdcg10 ? b : a));
  process.stdout.write(
    `\n| tau q | tau | merge q | merge threshold | extract | reinforce | weaken | merge | forget | resynthesize (per 1,000 events) | memories/user | val NDCG@10 start | fitted (CV) | shop signals only (CV) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n`,
  );
  for (const p of points) {
    const l = p.lifecycle;
    process.stdout.write(
      `| ${p.tauQ} | ${p.tau.toFixed(3)} | ${p.mergeQ} | ${p.mergeThreshold.toFixed(3)} | ${l.extract} | ${l.reinforce} | ${l.weaken} | ${l.merge} | ${l.forget} | ${l.resynthesize} | ${p.memoriesPerUser.toFixed(1)} | ${p.startNdcg10.toFixed(4)} | ${p.cvNdcg10.toFixed(4)} | ${p.shopOnlyCv.toFixed(4)} |\n`,
    );
  }
  process.stdout.write(
    `\nchosen: shopTauQuantile ${best.tauQ}, shopMergeQuantile ${best.mergeQ} (merge ${best.lifecycle.merge}/1000 events); fitted shopWeights (in-sample validation NDCG@10 ${best.inSample.toFixed(4)}):\n`,
  );
  process.stdout.write(`shopWeights: ${JSON.stringify(best.weights)}\n`);
  if (json)
    writeFileSync(
      json,
      `${JSON.stringify({ privacy, users: targets.size, seed, itemVectors: 'hybrid', points, chosen: { shopTauQuantile: best.tauQ, shopMergeQuantile: best.mergeQ, shopWeights: best.weights } }, null, 2)}\n`,
    );
  return 0;
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
