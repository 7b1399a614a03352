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
 * With `--protocol loo-full,temporal[,loo]` (whole-catalog ranking, `--item-vectors hybrid`) it
 * fits `shopWeights` for the full-ranking protocols instead: one validation run of `atomem` per
 * protocol (`loo-full`: each user's second-to-last item against every catalog item; `temporal`:
 * the cut inside the pre-cut log; `loo`: the 10-candidate lists), each dumping every candidate's
 * signals; then listwise softmax fits (`fitWeights`; the shopper's own items are standardised
 * with the list but do not compete, as in the full ranking) per protocol and pooled, each scored
 * on every protocol's validation cases (NDCG@10 with the benchmark's pessimistic rank; 2-fold CV
 * over users for the pooled fit). `--pool loo-full=1,temporal=4` weighs a protocol's cases in the
 * pooled fit (repeats). Prints the table and the chosen weights (`--choose`, default `pooled`).
 * Then `shopWeightsLive`, for the cases the agent ranks with it (`liveWeightsCase`: returning
 * visits at a live moment): all weights refitted on those cases (the shipped form; STEAM's retrieval
 * `memory` at 0 unless the users' paired interval of its 2-fold CV gain excludes 0), beside `shopWeights` plus
 * `popRecent`'s weight by a line search on them, each with its 2-fold CV (users split in two).
 * `--temporal-cuts 0.6,0.65,…,0.9` gives `temporal` several validation origins inside the
 * pre-cut log (rolling-origin validation: the cut V at each quantile of the pre-cut events, learn
 * before V, the first event in [V, T) the target), one validation run each, their cases pooled:
 * on ML-100K 772 cases (759 of them returning visits) instead of the 71 of one origin.
 *
 * It never reads a test item: the protocol is built with `target: 'validation'`.
 */
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { combine, DEFAULT_CONFIG, withinSession } from 'atomem/engine';
import { combineSignals, fitWeights, type FitCase } from 'atomem/shop';
import { compareIds, DEFAULT_KCORE, loadDataset } from './datasets.js';
import './methods.js';
import { ndcgAt, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { buildFullProtocol, type FullProtocol, type ProtocolName } from './full-protocol.js';
import { pairedDiff, runBenchmark } from './run.js';
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
      protocol: { type: 'string' },
      pool: { type: 'string' },
      choose: { type: 'string', default: 'pooled' },
      'dump-dir': { type: 'string' },
      'temporal-cuts': { type: 'string' },
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
  if (values.protocol !== undefined) {
    if (kind !== 'hybrid') throw new Error('--protocol fits shopWeights: it needs --item-vectors hybrid');
    const protocols = values.protocol.split(',') as ProtocolName[];
    for (const p of protocols)
      if (p !== 'loo' && p !== 'loo-full' && p !== 'temporal') throw new Error(`--protocol: unknown protocol ${p} (loo, loo-full, temporal)`);
    const pool: Record<string, number> = {};
    for (const kv of (values.pool ?? '').split(',').filter(Boolean)) {
      const [k, v] = kv.split('=');
      if (!protocols.includes(k as ProtocolName) || !(Number(v) >= 0) || !Number.isInteger(Number(v)))
        throw new Error(`--pool ${kv}: expected protocol=integer repeats`);
      pool[k] = Number(v);
    }
    const temporalCuts = values['temporal-cuts'] === undefined ? [undefined] : parseGrid(values['temporal-cuts'], []);
    return tuneFull(
      dataset,
      protocols,
      users,
      seed,
      values.privacy as Privacy,
      params,
      pool,
      values.choose ?? 'pooled',
      values.json,
      values['dump-dir'],
      temporalCuts,
    );
  }
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

/** A validation case of a protocol as a fitting case: every dumped signal per candidate, the target, the excluded own items. */
interface ProtocolCases {
  protocol: ProtocolName;
  cases: FitCase[];
  /** Per case: does the agent rank it with `shopWeightsLive` (a returning visit at a live moment: {@link liveWeightsCase})? */
  live: boolean[];
  /**
   * Per case: its half (0 or 1) of the 2-fold cross-validation, by user: the parity of the user's
   * place among the set's users (sorted), so a user with cases at several validation origins is
   * always in one half.
   */
  half: Uint8Array;
  /** Per case: the user. */
  users: string[];
  names: string[];
}

/**
 * Whether a case's ranking moment is live for the file trained on `histories` (`ShopScorer.live`):
 * at or after the log's last event, where the file's recent window ends.
 */
export function liveMoment(now: number, histories: ReadonlyMap<string, readonly { at: number }[]>): boolean {
  let end = -Infinity;
  for (const seq of histories.values()) for (const x of seq) if (x.at > end) end = x.at;
  return now >= end;
}

/**
 * Whether the agent ranks a case with `shopWeightsLive`, as `recommend` does: a live moment
 * ({@link liveMoment}) and a returning visit (the shopper's last event at least
 * `sessionGapMinutes` before it; within a session the agent ranks with `shopWeights`).
 */
export function liveWeightsCase(now: number, history: readonly { at: number }[], histories: ReadonlyMap<string, readonly { at: number }[]>): boolean {
  return liveMoment(now, histories) && !withinSession(history, now, DEFAULT_CONFIG.sessionGapMinutes);
}

/** Whole-catalog dumps (`scoreAll`, columnar) or 10-candidate dumps (`rank`) of one protocol's validation run, as fitting cases. */
async function protocolCases(
  dataset: ReturnType<typeof loadDataset>,
  protocol: ProtocolName,
  users: number | 'all',
  seed: number,
  privacy: Privacy,
  params: Record<string, string>,
  dumpDir: string | undefined,
  validationCut?: number,
): Promise<ProtocolCases> {
  const dir = dumpDir ?? mkdtempSync(join(tmpdir(), 'atomem-tune-'));
  const dump = join(dir, `${protocol}-${users}-${seed}${validationCut === undefined ? '' : `-v${validationCut}`}.jsonl`);
  try {
    if (dumpDir && existsSync(dump)) process.stderr.write(`protocol ${protocol}: reading the validation dump ${dump}\n`);
    else {
      process.stderr.write(
        `validation run of atomem, protocol ${protocol}${validationCut === undefined ? '' : `, validation cut at the ${validationCut} quantile of the pre-cut events`}\n`,
      );
      if (dumpDir) rmSync(`${dump}.part`, { force: true });
      await runBenchmark({
        dataset,
        users,
        seed,
        methods: ['atomem'],
        privacy: [privacy],
        validation: true,
        protocol,
        validationCut,
        params: { ...params, 'atomem.dumpFeatures': dumpDir ? `${dump}.part` : dump, 'atomem.fidelityUsers': '0' },
        onProgress: (e) => {
          if (e.done === e.total) process.stderr.write(`  ${e.label ?? e.phase}: ${e.total}\n`);
        },
      });
      if (dumpDir) renameSync(`${dump}.part`, dump);
    }
    const lines = readFileSync(dump, 'utf8').trim().split('\n');
    const cases: FitCase[] = [];
    const live: boolean[] = [];
    const caseUsers: string[] = [];
    const names = new Set<string>();
    if (protocol === 'loo') {
      const p = buildProtocol(dataset, { users, seed, target: 'validation' });
      const targets = new Map(p.cases.map((c) => [c.user, c.test.item]));
      const moments = new Map(p.cases.map((c) => [c.user, liveWeightsCase(c.now, c.history, p.histories)]));
      const dumped = lines.map((l) => JSON.parse(l) as DumpedCase);
      const all = signalNames(dumped);
      for (const n of all) names.add(n);
      fitCases(dumped, targets, all).forEach((c, i) => {
        if (c.positive < 0) return;
        cases.push(c);
        live.push(moments.get(dumped[i].user) ?? false);
        caseUsers.push(dumped[i].user);
      });
    } else {
      const p = buildFullProtocol(dataset, protocol as FullProtocol, { users, seed, target: 'validation', validationCut });
      const byUser = new Map(p.cases.map((c) => [c.user, c]));
      const moments = new Map(p.cases.map((c) => [c.user, liveWeightsCase(c.now, c.history, p.histories)]));
      for (const line of lines) {
        const d = JSON.parse(line) as { user: string; items: string[]; signals: Record<string, number[]> };
        const c = byUser.get(d.user);
        if (!c) continue;
        const index = new Map(d.items.map((id, i) => [id, i]));
        const positive = index.get(c.test.item);
        if (positive === undefined) continue;
        const exclude = new Uint8Array(d.items.length);
        for (const x of c.history) {
          const i = index.get(x.item);
          if (i !== undefined && i !== positive) exclude[i] = 1;
        }
        const signals: Record<string, Float32Array> = {};
        for (const [n, v] of Object.entries(d.signals)) {
          signals[n] = Float32Array.from(v);
          names.add(n);
        }
        cases.push({ signals, positive, exclude });
        live.push(moments.get(d.user) ?? false);
        caseUsers.push(d.user);
      }
    }
    // a signal constant in every list cannot be fitted
    const varying = [...names].filter((n) =>
      cases.some((c) => {
        const v = c.signals[n];
        if (!v) return false;
        for (let i = 1; i < v.length; i++) if (v[i] !== v[0]) return true;
        return false;
      }),
    );
    process.stderr.write(`  ${protocol}: ${cases.length} validation cases (${live.filter(Boolean).length} at a live moment), signals ${varying.join(', ')}\n`);
    return { protocol, cases, live, names: varying, users: caseUsers, half: halvesByUser(caseUsers) };
  } finally {
    if (!dumpDir) rmSync(dir, { recursive: true, force: true });
  }
}

/** The 2-fold split by user: each case gets the parity of its user's place among the distinct users (sorted). */
export function halvesByUser(users: readonly string[]): Uint8Array {
  const place = new Map([...new Set(users)].sort(compareIds).map((u, k) => [u, k % 2]));
  return Uint8Array.from(users, (u) => place.get(u)!);
}

/** Mean NDCG@10 of `weights` on fitting cases: the pessimistic rank (ties count against the positive) among the non-excluded candidates. */
export function fitCaseNdcg(cases: readonly FitCase[], weights: Readonly<Record<string, number>>): number {
  let sum = 0;
  for (const c of cases) {
    const m = Object.values(c.signals)[0]?.length ?? 0;
    const z = combineSignals(c.signals, weights, m);
    const t = z[c.positive];
    let rank = 1;
    for (let i = 0; i < m; i++) if (i !== c.positive && !c.exclude?.[i] && z[i] >= t) rank++;
    sum += ndcgAt(rank, 10);
  }
  return cases.length ? sum / cases.length : 0;
}

/** The weights of `popRecent` tried when only it is fitted on top of `shopWeights` (whose largest |w| is 1). */
const POP_RECENT_GRID = [0, 0.125, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 8, 16, 32];

/** `--protocol`: fits per protocol and pooled, each scored on every protocol's validation cases (see the module comment). */
async function tuneFull(
  dataset: ReturnType<typeof loadDataset>,
  protocols: ProtocolName[],
  users: number | 'all',
  seed: number,
  privacy: Privacy,
  params: Record<string, string>,
  pool: Record<string, number>,
  choose: string,
  json: string | undefined,
  dumpDir: string | undefined,
  temporalCuts: readonly (number | undefined)[] = [undefined],
): Promise<number> {
  const sets: ProtocolCases[] = [];
  for (const p of protocols) {
    if (p !== 'temporal') {
      sets.push(await protocolCases(dataset, p, users, seed, privacy, params, dumpDir));
      continue;
    }
    // rolling-origin validation: one validation origin per cut, their cases pooled as one protocol
    const parts: ProtocolCases[] = [];
    for (const v of temporalCuts) parts.push(await protocolCases(dataset, p, users, seed, privacy, params, dumpDir, v));
    const caseUsers = parts.flatMap((x) => x.users);
    sets.push({
      protocol: p,
      cases: parts.flatMap((x) => x.cases),
      live: parts.flatMap((x) => x.live),
      names: [...new Set(parts.flatMap((x) => x.names))],
      users: caseUsers,
      half: halvesByUser(caseUsers),
    });
  }
  const names = [...new Set(sets.flatMap((s) => s.names))].sort();
  const shipped = { ...DEFAULT_CONFIG.shopWeights };
  const fits: Record<string, Record<string, number>> = { shipped };
  const t0 = performance.now();
  for (const s of sets) fits[`fit ${s.protocol}`] = fitWeights(s.cases, names);
  const pooledCases = (which: (i: number, s: ProtocolCases) => boolean) =>
    sets.flatMap((s) => {
      const r = pool[s.protocol] ?? 1;
      const own = s.cases.filter((_, i) => which(i, s));
      return Array.from({ length: r }, () => own).flat();
    });
  fits.pooled = fitWeights(
    pooledCases(() => true),
    names,
  );
  // 2-fold CV of the pooled fit over users (per protocol, users split in two halves: ProtocolCases.half)
  const cv: Record<string, number> = {};
  {
    const half = [0, 1].map((h) =>
      fitWeights(
        pooledCases((i, s) => s.half[i] === h),
        names,
      ),
    );
    for (const s of sets) {
      let sum = 0;
      for (const h of [0, 1]) {
        const test = s.cases.filter((_, i) => s.half[i] === 1 - h);
        sum += fitCaseNdcg(test, half[h]) * test.length;
      }
      cv[s.protocol] = sum / Math.max(1, s.cases.length);
    }
  }
  process.stderr.write(`fits: ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  const table: Record<string, Record<string, number>> = {};
  for (const [label, w] of Object.entries(fits)) {
    table[label] = {};
    for (const s of sets) table[label][s.protocol] = fitCaseNdcg(s.cases, w);
  }
  process.stdout.write(
    `\nvalidation NDCG@10 (users: ${sets.map((s) => `${s.protocol} ${s.cases.length}`).join(', ')}; pool repeats ${JSON.stringify(pool)})\n`,
  );
  process.stdout.write(`| weights | ${sets.map((s) => s.protocol).join(' | ')} |\n|---|${sets.map(() => '---:').join('|')}|\n`);
  for (const [label, row] of Object.entries(table)) process.stdout.write(`| ${label} | ${sets.map((s) => row[s.protocol].toFixed(4)).join(' | ')} |\n`);
  process.stdout.write(`| pooled, 2-fold CV | ${sets.map((s) => cv[s.protocol].toFixed(4)).join(' | ')} |\n`);
  process.stdout.write(
    `\n| signal | ${Object.keys(fits).join(' | ')} |\n|---|${Object.keys(fits)
      .map(() => '---:')
      .join('|')}|\n`,
  );
  for (const n of [...new Set([...names, ...Object.keys(shipped)])])
    process.stdout.write(
      `| ${n} | ${Object.values(fits)
        .map((w) => (w[n] ?? 0).toString())
        .join(' | ')} |\n`,
    );
  // the live set: fitted on the cases at a live moment only (the agent ranks every other moment
  // with shopWeights), each protocol scored with the set its cases' moments select; 2-fold CV as above
  const liveCases = (which: (i: number, s: ProtocolCases) => boolean) =>
    sets.flatMap((s) => {
      const own = s.cases.filter((_, i) => s.live[i] && which(i, s));
      return Array.from({ length: pool[s.protocol] ?? 1 }, () => own).flat();
    });
  let live: Record<string, number> | undefined;
  let popRecentOnly: number | undefined;
  if (liveCases(() => true).length > 0) {
    // STEAM's retrieval `memory` stays in the live set only if it measurably matters (decision 37):
    // its users' paired interval of the cross-validated NDCG@10 (with − without) must exclude 0
    const liveCvByUser = (subset: readonly string[]) => {
      const fitted = [0, 1].map((h) =>
        fitWeights(
          liveCases((i, s) => s.half[i] === h),
          subset,
        ),
      );
      const byUser = new Map<string, { sum: number; n: number }>();
      let sum = 0;
      let n = 0;
      for (const s of sets)
        s.cases.forEach((c, i) => {
          if (!s.live[i]) return;
          const v = fitCaseNdcg([c], fitted[1 - s.half[i]]);
          const key = `${s.protocol}\u0000${s.users[i]}`;
          const u = byUser.get(key) ?? { sum: 0, n: 0 };
          u.sum += v;
          u.n++;
          byUser.set(key, u);
          sum += v;
          n++;
        });
      const keys = [...byUser.keys()].sort();
      return { fitted, mean: n ? sum / n : 0, perUser: keys.map((k) => byUser.get(k)!.sum / byUser.get(k)!.n) };
    };
    const withoutMemory = names.filter((n) => n !== 'memory');
    const cvAll = liveCvByUser(names);
    const cvNoMemory = liveCvByUser(withoutMemory);
    const memoryGain = pairedDiff(cvAll.perUser, cvNoMemory.perUser, seed);
    const keepMemory = memoryGain.ci[0] > 0;
    process.stdout.write(
      `\nlive cases, 2-fold CV by user: every weight refitted ${cvAll.mean.toFixed(4)}; without STEAM's retrieval \`memory\` ${cvNoMemory.mean.toFixed(4)}; ` +
        `with − without over ${cvAll.perUser.length} users ${memoryGain.mean >= 0 ? '+' : ''}${memoryGain.mean.toFixed(4)} [${memoryGain.ci[0].toFixed(4)}, ${memoryGain.ci[1].toFixed(4)}] ` +
        `(${memoryGain.better} better / ${memoryGain.worse} worse): \`memory\` ${keepMemory ? 'kept' : 'at 0'}\n`,
    );
    const liveNames = keepMemory ? names : withoutMemory;
    live = {
      ...fitWeights(
        liveCases(() => true),
        liveNames,
      ),
      ...(keepMemory ? {} : { memory: 0 }),
    };
    // the halves' fits of the chosen signal set (for the 2-fold CV rows below)
    const half = (keepMemory ? cvAll : cvNoMemory).fitted;
    const scored = (s: ProtocolCases, w: (i: number) => Readonly<Record<string, number>>, which: (i: number, s: ProtocolCases) => boolean = () => true) => {
      let sum = 0;
      let n = 0;
      s.cases.forEach((c, i) => {
        if (!which(i, s)) return;
        sum += fitCaseNdcg([c], s.live[i] ? w(i) : shipped);
        n++;
      });
      return { sum, n };
    };
    const row = (label: string, f: (s: ProtocolCases) => number) => process.stdout.write(`| ${label} | ${sets.map((s) => f(s).toFixed(4)).join(' | ')} |\n`);
    process.stdout.write(
      `\nwith shopWeightsLive at live moments (cases at a live moment: ${sets.map((s) => `${s.protocol} ${s.live.filter(Boolean).length}`).join(', ')})\n`,
    );
    process.stdout.write(`| weights | ${sets.map((s) => s.protocol).join(' | ')} |\n|---|${sets.map(() => '---:').join('|')}|\n`);
    row('shipped, live refit at live moments', (s) => {
      const r = scored(s, () => live!);
      return r.sum / Math.max(1, r.n);
    });
    row('the same, 2-fold CV', (s) => {
      let sum = 0;
      for (const h of [0, 1])
        sum += scored(
          s,
          () => half[h],
          (i, s) => s.half[i] === 1 - h,
        ).sum;
      return sum / Math.max(1, s.cases.length);
    });
    row('live cases only: popRecent alone', (s) => {
      const r = scored(
        s,
        () => ({ popRecent: 1 }),
        (i) => s.live[i],
      );
      return r.sum / Math.max(1, r.n);
    });
    row('live cases only: shipped', (s) => {
      const r = scored(
        s,
        () => shipped,
        (i) => s.live[i],
      );
      return r.sum / Math.max(1, r.n);
    });
    row('live cases only: live fit, 2-fold CV', (s) => {
      let sum = 0;
      let n = 0;
      for (const h of [0, 1]) {
        const r = scored(
          s,
          () => half[h],
          (i, s) => s.live[i] && s.half[i] === 1 - h,
        );
        sum += r.sum;
        n += r.n;
      }
      return sum / Math.max(1, n);
    });
    // the constrained alternative: shopWeights as they are plus one fitted number, popRecent's
    // weight, by a line search on the live cases (2-fold CV: chosen on one half, scored on the other)
    const liveOnly = (w: Readonly<Record<string, number>>, which: (i: number, s: ProtocolCases) => boolean) => {
      let sum = 0;
      let n = 0;
      for (const s of sets)
        s.cases.forEach((c, i) => {
          if (!s.live[i] || !which(i, s)) return;
          const r = pool[s.protocol] ?? 1;
          sum += r * fitCaseNdcg([c], w);
          n += r;
        });
      return n ? sum / n : 0;
    };
    const best = (which: (i: number, s: ProtocolCases) => boolean) => {
      let top = { w: 0, ndcg: -1 };
      for (const w of POP_RECENT_GRID) {
        const ndcg = liveOnly({ ...shipped, popRecent: w }, which);
        if (ndcg > top.ndcg) top = { w, ndcg };
      }
      return top.w;
    };
    popRecentOnly = best(() => true);
    const halfW = [0, 1].map((h) => best((i, s) => s.half[i] === h));
    process.stdout.write(
      `\npopRecent line search (shopWeights fixed; live cases, pooled): ${POP_RECENT_GRID.map((w) => `${w} → ${liveOnly({ ...shipped, popRecent: w }, () => true).toFixed(4)}`).join(', ')}\n`,
    );
    row('live cases only: shipped + popRecent line search, 2-fold CV', (s) => {
      let sum = 0;
      let n = 0;
      for (const h of [0, 1]) {
        const r = scored(
          s,
          () => ({ ...shipped, popRecent: halfW[h] }),
          (i, s) => s.live[i] && s.half[i] === 1 - h,
        );
        sum += r.sum;
        n += r.n;
      }
      return sum / Math.max(1, n);
    });
    process.stdout.write(
      `\nthe constrained alternative, shopWeights + popRecent by the line search (halves chose ${halfW.join(' and ')}): ${JSON.stringify({ ...shipped, popRecent: popRecentOnly })}\n`,
    );
    process.stdout.write(
      `shopWeightsLive (the shipped form: every weight refitted on the live cases${keepMemory ? '' : ', `memory` at 0'}): ${JSON.stringify({ ...shipped, ...live })}\n`,
    );
  }
  const chosen = fits[choose];
  if (!chosen) throw new Error(`--choose ${choose}: one of ${Object.keys(fits).join(', ')}`);
  // signals no dump carries (e.g. crowd, which needs a Prio3 release) keep their shipped weight
  const out = { ...shipped, ...chosen };
  process.stdout.write(`\nshopWeights (${choose}): ${JSON.stringify(out)}\n`);
  if (json)
    writeFileSync(
      json,
      `${JSON.stringify({ privacy, seed, users, protocols, pool, table, cv, fits, chosen: { name: choose, shopWeights: out }, ...(live ? { shopWeightsLive: { ...shipped, ...live }, shopWeightsLiveLineSearch: { ...shipped, popRecent: popRecentOnly } } : {}) }, null, 2)}\n`,
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
