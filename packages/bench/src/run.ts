/**
 * Runs protocol `loo` for a list of methods on one dataset: the same users and candidates for
 * every method, each method prepared on its own copy of the context, every case ranked,
 * metrics with bootstrap intervals, wall-clock seconds.
 */
import type { Interaction } from 'atomem/engine';
import { categoryCoverage, categoryEntropy, bootstrapCI, caseMetrics, ild, mean, meanMetrics, METRIC_KEYS, rankOf, type RankMetrics } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { buildFullProtocol, catalogOrder, fullRank, type ProtocolName } from './full-protocol.js';
import { methodFactories as registry, type MethodFactory } from './registry.js';
import type { Dataset, EvalCase, Method, MethodContext, Privacy, RankCase, Setting } from './types.js';

/** A caller mistake (unknown method, bad option): the CLI exits with code 2. */
export class BenchUsageError extends Error {
  override name = 'BenchUsageError';
}

export interface ProgressEvent {
  method: string;
  privacy: Privacy | null;
  phase: 'prepare' | 'rank';
  done: number;
  total: number;
  label?: string;
}

export interface RunOptions {
  dataset: Dataset;
  /** Default `full`. */
  setting?: Setting;
  /** `loo` (default: 10 candidates), `loo-full` or `temporal` (all items ranked; setting `full` only). */
  protocol?: ProtocolName;
  /** `temporal`: quantile of event times for the cut (default 0.9). */
  cut?: number;
  /** `temporal` with `validation`: quantile of the pre-cut events for the validation cut (default `cut`). */
  validationCut?: number;
  /**
   * `loo-full` / `temporal`: every other method is compared with this one (paired bootstrap
   * over users, NDCG@10, Recall@10, MRR). Default: `sasrec` when it runs, else the first method.
   */
  reference?: string;
  /** Default `all`. */
  users?: number | 'all';
  /** Setting `evolving`: steps per user (default 5). */
  steps?: number;
  /** Default 2026. */
  seed?: number;
  /** Method names; default every registered method (registration order). */
  methods?: readonly string[];
  /**
   * Privacy levels to run for methods that declare `privacyLevels` (intersection with the
   * declared ones); default: every level the method declares.
   */
  privacy?: readonly Privacy[];
  /** Evaluate on validation cases (tuning) instead of test cases. */
  validation?: boolean;
  /** Bootstrap resamples for the intervals (default 1000). */
  resamples?: number;
  /**
   * Item vectors for the ILD of top-5 lists (omitted → no `ild5` column): a map, or a function
   * giving the vectors of the items a method put in its top 5 (so only those are embedded).
   */
  itemVectors?: ReadonlyMap<string, ArrayLike<number>> | ((ids: string[]) => Promise<ReadonlyMap<string, ArrayLike<number>>>);
  /** Passed to every factory as `opts.params`. */
  params?: Readonly<Record<string, string>>;
  /** Default: the global registry of `registry.ts`. */
  factories?: ReadonlyMap<string, MethodFactory>;
  /**
   * Paired differences to report (`a − b` per user, with a paired bootstrap interval): method
   * names or `method/privacy`. Default in setting `instruct`: atomem − bm25 and
   * atomem − atomem-no-intent; in `evolving`: atomem − atomem-frozen (those that ran); none otherwise.
   */
  paired?: ReadonlyArray<readonly [string, string]>;
  onProgress?: (e: ProgressEvent) => void;
  /** Called with each row as soon as it is computed. */
  onResult?: (row: ResultRow) => void;
  /**
   * Paired NDCG@10 differences to report as `[a, b]` method names (a − b, same privacy level or
   * b without one); default: atomem − shop, atomem − sasrec. Rows with `ablationOf` always get
   * theirs (`diffToFull`: ablation − full, same level).
   */
  pairs?: ReadonlyArray<readonly [string, string]>;
}

/** A paired difference of mean NDCG@10 over the same users, with a 95% paired bootstrap interval. */
export interface PairedDiff {
  a: string;
  b: string;
  privacyA: Privacy | null;
  privacyB: Privacy | null;
  /** mean(a) − mean(b) of NDCG@10 over users. */
  mean: number;
  ci: [number, number];
  /** Users where a ranks the target better / worse / the same. */
  better: number;
  worse: number;
  ties: number;
}

export interface ResultRow extends RankMetrics {
  method: string;
  /** `null` for methods that take no privacy level. */
  privacy: Privacy | null;
  /** `loo`, `loo-full` or `temporal`. */
  protocol: ProtocolName;
  /** Recall@10 = HR@10 (one relevant item). */
  recall10: number;
  /** Number of evaluated cases. */
  n: number;
  /** 95% percentile-bootstrap intervals over users (paired: same resamples for every method). */
  ci: Record<keyof RankMetrics, [number, number]>;
  /** prepare + ranking, wall clock. */
  seconds: number;
  prepareSeconds: number;
  rankSeconds: number;
  /** Mean over cases of the category entropy (bits) of the top 5. */
  entropy5: number;
  /** Mean over cases of distinct categories in the top 5 / 5. */
  coverage5: number;
  /** Mean over cases of the ILD of the top 5 (only with `itemVectors`). */
  ild5?: number;
  /** Whatever `method.extras()` returned. */
  [extra: string]: unknown;
}

export interface BenchmarkConfig {
  dataset: string;
  format?: string;
  setting: Setting;
  protocol: ProtocolName;
  /** `temporal`: the cut quantile and time (ms or the dataset's unit). */
  cut?: number;
  cutTime?: number;
  /** Full-ranking protocols: the reference of the paired differences. */
  reference?: string;
  target: 'test' | 'validation';
  users: number | 'all';
  seed: number;
  methods: string[];
  privacy: Privacy[] | null;
  catalogItems: number;
  datasetUsers: number;
  interactions: number;
  evaluableUsers: number;
  cases: number;
}

/** One paired difference `a − b` (same users, same candidates). */
export interface PairedDifference {
  /** Row keys: `method` or `method/privacy`. */
  a: string;
  b: string;
  metric: 'ndcg10' | 'mrr' | 'hr1' | 'hr10';
  /** Users (the bootstrap's units). */
  n: number;
  /** Mean over users of a − b. */
  diff: number;
  /** 95% percentile-bootstrap interval of the mean difference, resampling users (the rows' own resamples: paired). */
  ci: [number, number];
}

export interface BenchmarkResult {
  config: BenchmarkConfig;
  results: ResultRow[];
  /** The setting's contrasts on NDCG@10, MRR and HR@1 (see {@link RunOptions.paired}). */
  contrasts: PairedDifference[];
  warnings: string[];
  /** Paired differences (see {@link RunOptions.pairs}). */
  paired: PairedDiff[];
  /**
   * Row key (`method/privacy`) → per-user NDCG@10, users in one fixed order (first case order),
   * so two runs with the same data, users and seed can be compared pairwise (`npm run bench:paired`).
   */
  perUser: Record<string, number[]>;
}

/** Paired difference of per-user NDCG@10 values `a` − `b` (same users, same order). */
export function pairedDiff(
  a: readonly number[],
  b: readonly number[],
  seed: number,
  resamples?: number,
): Pick<PairedDiff, 'mean' | 'ci' | 'better' | 'worse' | 'ties'> {
  if (a.length !== b.length) throw new Error(`pairedDiff: ${a.length} vs ${b.length} users`);
  const d = a.map((x, i) => x - b[i]);
  return {
    mean: mean(d),
    ci: bootstrapCI(d, { seed, resamples }),
    better: d.filter((x) => x > 1e-12).length,
    worse: d.filter((x) => x < -1e-12).length,
    ties: d.filter((x) => Math.abs(x) <= 1e-12).length,
  };
}

/** `method/privacy` (or `method` for methods without levels). */
export function rowKey(r: Pick<ResultRow, 'method' | 'privacy'>): string {
  return r.privacy ? `${r.method}/${r.privacy}` : r.method;
}

function cloneHistory(seq: readonly Interaction[]): Interaction[] {
  return seq.map((x) => ({ ...x }));
}

/**
 * What a method may see of the cases: a fresh copy (a method that mutates its input cannot change
 * what the next method sees) without the target, and "now" = the case's moment (the last history
 * timestamp; the cut under `temporal`).
 */
export function rankCases(cases: readonly EvalCase[]): RankCase[] {
  return cases.map((c) => ({
    user: c.user,
    history: cloneHistory(c.history),
    candidates: c.candidates.slice(),
    now: c.now,
    ...(c.intent !== undefined ? { intent: c.intent } : {}),
    ...(c.step !== undefined ? { step: c.step } : {}),
  }));
}

function checkRanking(method: string, c: RankCase, ranking: unknown): string[] {
  if (!Array.isArray(ranking) || ranking.length !== c.candidates.length) {
    throw new Error(
      `${method}: rank() for user ${c.user} must return the ${c.candidates.length} candidates, got ${Array.isArray(ranking) ? ranking.length : typeof ranking}`,
    );
  }
  const want = new Set(c.candidates);
  const got = new Set(ranking as string[]);
  if (got.size !== want.size || [...got].some((id) => !want.has(id))) {
    throw new Error(`${method}: rank() for user ${c.user} returned items that are not exactly its candidates`);
  }
  return ranking as string[];
}

/** Resolves which (method, privacy) pairs run; throws {@link BenchUsageError} on unknown names. */
export function planRuns(
  methods: readonly string[],
  privacy: readonly Privacy[] | undefined,
  factories: ReadonlyMap<string, MethodFactory>,
): { runs: Array<{ method: string; privacy: Privacy | null }>; warnings: string[] } {
  const unknown = methods.filter((m) => !factories.has(m));
  if (unknown.length) {
    throw new BenchUsageError(`unknown method${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} (known: ${[...factories.keys()].join(', ')})`);
  }
  const runs: Array<{ method: string; privacy: Privacy | null }> = [];
  const warnings: string[] = [];
  for (const method of methods) {
    const levels = factories.get(method)!.privacyLevels;
    if (!levels || levels.length === 0) {
      runs.push({ method, privacy: null });
      continue;
    }
    const chosen = privacy ? levels.filter((p) => privacy.includes(p)) : levels;
    if (chosen.length === 0) warnings.push(`${method} skipped: it runs at privacy ${levels.join('/')}, none of ${privacy!.join(',')}`);
    for (const p of chosen) runs.push({ method, privacy: p });
  }
  return { runs, warnings };
}

/** Per-case metrics averaged per user (one unit per user, in first-seen order). */
function perUserMeans(users: readonly string[], per: readonly RankMetrics[]): RankMetrics[] {
  const groups = new Map<string, RankMetrics[]>();
  users.forEach((u, i) => {
    const g = groups.get(u) ?? [];
    g.push(per[i]);
    groups.set(u, g);
  });
  return [...groups.values()].map((g) => {
    const m = {} as RankMetrics;
    for (const key of METRIC_KEYS) m[key] = g.reduce((s, x) => s + x[key], 0) / g.length;
    return m;
  });
}

/** Runs the benchmark; see {@link RunOptions}. */
export async function runBenchmark(options: RunOptions): Promise<BenchmarkResult> {
  const factories = options.factories ?? registry;
  const seed = options.seed ?? DEFAULT_SEED;
  const setting = options.setting ?? 'full';
  const users = options.users ?? 'all';
  const target = options.validation ? 'validation' : 'test';
  const methods = options.methods ? [...options.methods] : [...factories.keys()];
  const { runs, warnings } = planRuns(methods, options.privacy, factories);
  const { dataset } = options;
  const protocolName: ProtocolName = options.protocol ?? 'loo';
  const full = protocolName !== 'loo';
  if (full && setting !== 'full') throw new BenchUsageError(`protocol ${protocolName} runs in setting full only (got ${setting})`);
  const catalog = catalogOrder(dataset);

  let protocol;
  let cutTime: number | undefined;
  try {
    if (full) {
      const p = buildFullProtocol(dataset, protocolName, { users, seed, target, cut: options.cut, validationCut: options.validationCut });
      protocol = p;
      cutTime = p.cutTime;
    } else protocol = buildProtocol(dataset, { setting, users, seed, target, steps: options.steps });
  } catch (e) {
    if (e instanceof RangeError) throw new BenchUsageError(e.message);
    throw e;
  }
  warnings.push(...(dataset.warnings ?? []), ...protocol.warnings);

  let interactions = 0;
  for (const seq of dataset.sequences.values()) interactions += seq.length;
  const reference = full ? (options.reference ?? (methods.includes('sasrec') ? 'sasrec' : methods[0])) : undefined;
  if (reference !== undefined && !methods.includes(reference))
    throw new BenchUsageError(`reference ${reference} is not among the methods run (${methods.join(', ')})`);
  const config: BenchmarkConfig = {
    dataset: dataset.name,
    format: dataset.format,
    setting,
    protocol: protocolName,
    ...(protocolName === 'temporal' ? { cut: options.cut ?? 0.9, cutTime } : {}),
    ...(reference !== undefined ? { reference } : {}),
    target,
    users,
    seed,
    methods,
    privacy: options.privacy ? [...options.privacy] : null,
    catalogItems: dataset.items.size,
    datasetUsers: dataset.sequences.size,
    interactions,
    evaluableUsers: protocol.evaluable,
    cases: protocol.cases.length,
  };

  const results: ResultRow[] = [];
  /** Per-user NDCG@10 of every row (same user order), for paired differences. */
  const perUser = new Map<ResultRow, number[]>();
  /** Row key → per-user metric means (same user order for every row). */
  const unitsOf = new Map<string, RankMetrics[]>();
  for (const { method, privacy } of runs) {
    const report = (phase: ProgressEvent['phase'], done: number, total: number, label?: string) =>
      options.onProgress?.({ method, privacy, phase, done, total, label });
    const cases = rankCases(protocol.cases);
    const histories = new Map<string, Interaction[]>();
    for (const [u, seq] of protocol.histories) histories.set(u, cloneHistory(seq));
    const ctx: MethodContext = {
      dataset,
      cases,
      histories,
      seed,
      privacy: privacy ?? 'off',
      setting,
      target,
      protocol: protocolName,
      catalog: catalog.ids,
      catalogIndex: catalog.index,
      progress: (done, total, label) => report('prepare', done, total, label),
    };

    const t0 = performance.now();
    const instance: Method = await factories.get(method)!({ name: method, privacy: privacy ?? 'off', seed, params: options.params ?? {} });
    if (full && !instance.scoreAll) throw new BenchUsageError(`${method} cannot rank the whole catalog (no scoreAll); protocol ${protocolName} needs it`);
    await instance.prepare(ctx);
    const t1 = performance.now();
    const ranks: number[] = [];
    const tops: string[][] = [];
    const every = Math.max(1, Math.floor(cases.length / 200));
    const scores = new Float32Array(full ? catalog.ids.length : 0);
    const exclude = new Uint8Array(full ? catalog.ids.length : 0);
    for (let k = 0; full && k < cases.length; k++) {
      const c = cases[k];
      scores.fill(-Infinity);
      await instance.scoreAll!(c, scores);
      const hist = protocol.cases[k].history;
      for (const x of hist) {
        const i = catalog.index.get(x.item);
        if (i !== undefined) exclude[i] = 1;
      }
      const t = catalog.index.get(protocol.cases[k].test.item);
      // a target outside the catalog can never be recommended: ranked below every candidate
      ranks.push(t === undefined ? catalog.ids.length + 1 : fullRank(scores, t, exclude));
      for (const x of hist) {
        const i = catalog.index.get(x.item);
        if (i !== undefined) exclude[i] = 0;
      }
      if ((k + 1) % every === 0 || k + 1 === cases.length) report('rank', k + 1, cases.length, 'ranking all items');
    }
    for (let k = 0; !full && k < cases.length; k++) {
      const c = cases[k];
      // why: rank from a pristine copy; the target stays with us, the method only sees candidates.
      const ranking = checkRanking(method, c, await instance.rank(c));
      ranks.push(rankOf(ranking, protocol.cases[k].test.item));
      tops.push(ranking.slice(0, 5));
      if ((k + 1) % every === 0 || k + 1 === cases.length) report('rank', k + 1, cases.length, 'ranking');
      // evolving: once every user's step is ranked, each user makes the interaction that was the target
      const next = cases[k + 1];
      if (c.step !== undefined && (!next || next.step !== c.step) && instance.observe) {
        for (let i = 0; i <= k; i++) if (cases[i].step === c.step) await instance.observe(cases[i].user, { ...protocol.cases[i].test });
      }
    }
    const t2 = performance.now();
    const extras = (await instance.extras?.()) ?? {};
    await instance.dispose?.();

    const metrics = meanMetrics(ranks);
    const per = ranks.map(caseMetrics);
    const ci = {} as ResultRow['ci'];
    // why: in `evolving` a user's steps are not independent: resample users (their mean over steps).
    const units = perUserMeans(
      cases.map((c) => c.user),
      per,
    );
    unitsOf.set(rowKey({ method, privacy }), units);
    for (const key of METRIC_KEYS)
      ci[key] = bootstrapCI(
        units.map((m) => m[key]),
        { seed, resamples: options.resamples },
      );
    const cats = (ids: string[]) => ids.map((id) => dataset.items.get(id)?.categories);
    const row: ResultRow = {
      method,
      privacy,
      protocol: protocolName,
      n: cases.length,
      ...metrics,
      recall10: metrics.hr10,
      ci,
      seconds: (t2 - t0) / 1000,
      prepareSeconds: (t1 - t0) / 1000,
      rankSeconds: (t2 - t1) / 1000,
      // full-ranking protocols keep no top lists (no per-case arrays of ids): no diversity columns
      entropy5: full ? NaN : mean(tops.map((t) => categoryEntropy(cats(t)))),
      coverage5: full ? NaN : mean(tops.map((t) => categoryCoverage(cats(t), 5))),
      setting,
    };
    if (setting === 'evolving') {
      const bySteps = new Map<number, number[]>();
      cases.forEach((c, i) => {
        const list = bySteps.get(c.step!) ?? [];
        list.push(ranks[i]);
        bySteps.set(c.step!, list);
      });
      row.perStep = [...bySteps].map(([step, rs]) => ({ step, n: rs.length, ...meanMetrics(rs) }));
    }
    const given = options.itemVectors;
    const vectors = full ? undefined : typeof given === 'function' ? await given([...new Set(tops.flat())]) : given;
    if (vectors) {
      row.ild5 = mean(tops.map((t) => ild(t.map((id) => vectors.get(id)).filter((v): v is ArrayLike<number> => v !== undefined))));
    }
    Object.assign(row, extras);
    perUser.set(
      row,
      units.map((m) => m.ndcg10),
    );
    results.push(row);
    options.onResult?.(row);
  }
  const paired: PairedDiff[] = [];
  const find = (name: string, privacy: Privacy | null) =>
    results.find((r) => r.method === name && r.privacy === privacy) ?? results.find((r) => r.method === name && r.privacy === null);
  for (const row of results) {
    const of = row.ablationOf;
    if (typeof of !== 'string') continue;
    const full = find(of, row.privacy);
    if (!full) {
      warnings.push(`${row.method}${row.privacy ? `@${row.privacy}` : ''}: no ${of} row at the same level in this run, so no paired difference`);
      continue;
    }
    const d = pairedDiff(perUser.get(row)!, perUser.get(full)!, seed, options.resamples);
    row.diffToFull = d;
    paired.push({ a: row.method, b: full.method, privacyA: row.privacy, privacyB: full.privacy, ...d });
  }
  for (const [a, b] of options.pairs ??
    (full
      ? [['atomem', 'shop']]
      : [
          ['atomem', 'shop'],
          ['atomem', 'sasrec'],
        ])) {
    for (const ra of results.filter((r) => r.method === a)) {
      const rb = find(b, ra.privacy);
      if (!rb) continue;
      paired.push({ a, b, privacyA: ra.privacy, privacyB: rb.privacy, ...pairedDiff(perUser.get(ra)!, perUser.get(rb)!, seed, options.resamples) });
    }
  }
  const defaults: Partial<Record<Setting, ReadonlyArray<readonly [string, string]>>> = {
    instruct: [
      ['atomem', 'bm25'],
      ['atomem', 'atomem-no-intent'],
    ],
    evolving: [['atomem', 'atomem-frozen']],
  };
  const contrastPairs = options.paired ?? (full ? methods.filter((m) => m !== reference).map((m) => [m, reference!] as const) : (defaults[setting] ?? []));
  const contrastMetrics = full ? (['ndcg10', 'hr10', 'mrr'] as const) : (['ndcg10', 'mrr', 'hr1'] as const);
  const contrasts: PairedDifference[] = [];
  /** A name: an exact row key, else the method's `off` row, else its first row. */
  const findKey = (name: string) =>
    results.find((r) => rowKey(r) === name) ?? results.find((r) => r.method === name && r.privacy === 'off') ?? results.find((r) => r.method === name);
  for (const [a, b] of contrastPairs) {
    const ra = findKey(a);
    const rb = findKey(b);
    if (!ra || !rb) continue;
    const ua = unitsOf.get(rowKey(ra))!;
    const ub = unitsOf.get(rowKey(rb))!;
    for (const metric of contrastMetrics) {
      const d = ua.map((u, i) => u[metric] - ub[i][metric]);
      contrasts.push({ a: rowKey(ra), b: rowKey(rb), metric, n: d.length, diff: mean(d), ci: bootstrapCI(d, { seed, resamples: options.resamples }) });
    }
  }
  return { config, results, warnings, paired, contrasts, perUser: Object.fromEntries(results.map((r) => [rowKey(r), perUser.get(r)!])) };
}

/** The paired differences as a markdown table. */
export function pairedTable(paired: readonly PairedDiff[]): string {
  const lines = ['| a − b | NDCG@10 difference | 95% paired bootstrap CI | users a better / worse / same |', '|---|---:|---|---:|'];
  const name = (m: string, p: Privacy | null) => (p ? `${m}@${p}` : m);
  for (const d of paired) {
    lines.push(
      `| ${name(d.a, d.privacyA)} − ${name(d.b, d.privacyB)} | ${d.mean >= 0 ? '+' : ''}${d.mean.toFixed(4)} | [${d.ci[0].toFixed(4)}, ${d.ci[1].toFixed(4)}] | ${d.better} / ${d.worse} / ${d.ties} |`,
    );
  }
  return lines.join('\n');
}

/** Paired differences as a markdown table (NDCG@10, MRR, HR@1 — or with `full`, NDCG@10, Recall@10, MRR — with 95% paired intervals). */
export function contrastsTable(paired: readonly PairedDifference[], full = false): string {
  const metrics: PairedDifference['metric'][] = full ? ['ndcg10', 'hr10', 'mrr'] : ['ndcg10', 'mrr', 'hr1'];
  const label = { ndcg10: 'NDCG@10', mrr: 'MRR', hr1: 'HR@1', hr10: 'Recall@10' };
  const lines = [`| difference | users | ${metrics.map((m) => `Δ ${label[m]} | 95% CI`).join(' | ')} |`, '|---|---:|---:|---|---:|---|---:|---|'];
  const groups = new Map<string, PairedDifference[]>();
  for (const p of paired) groups.set(`${p.a} − ${p.b}`, [...(groups.get(`${p.a} − ${p.b}`) ?? []), p]);
  const digits = full ? 4 : 3;
  const f = (x: number) => (x >= 0 ? '+' : '') + x.toFixed(digits);
  for (const [name, ps] of groups) {
    const by = (m: PairedDifference['metric']) => ps.find((p) => p.metric === m);
    const cell = (p?: PairedDifference) => (p ? `${f(p.diff)} | [${f(p.ci[0])}, ${f(p.ci[1])}]` : '— | —');
    lines.push(`| ${name} | ${ps[0].n} | ${metrics.map((m) => cell(by(m))).join(' | ')} |`);
  }
  return lines.join('\n');
}

const fmt = (x: unknown, digits = 3) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '—');

/** The results as a markdown table (NDCG@10 with its 95% interval). */
export function markdownTable(result: BenchmarkResult): string {
  if (result.config.protocol !== undefined && result.config.protocol !== 'loo') return fullTable(result);
  const head = ['method', 'privacy', 'n', 'NDCG@1', 'NDCG@5', 'NDCG@10', '95% CI NDCG@10', 'HR@1', 'MRR', 'cat. entropy@5', 'coverage@5'];
  const hasIld = result.results.some((r) => r.ild5 !== undefined);
  if (hasIld) head.push('ILD@5');
  head.push('seconds');
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i < 2 ? '---' : '---:')).join('|')}|`];
  for (const r of result.results) {
    const cells = [
      r.method,
      r.privacy ?? '—',
      String(r.n),
      fmt(r.ndcg1),
      fmt(r.ndcg5),
      fmt(r.ndcg10),
      `[${fmt(r.ci.ndcg10[0])}, ${fmt(r.ci.ndcg10[1])}]`,
      fmt(r.hr1),
      fmt(r.mrr),
      fmt(r.entropy5, 2),
      fmt(r.coverage5, 2),
    ];
    if (hasIld) cells.push(fmt(r.ild5));
    cells.push(fmt(r.seconds, 1));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** Full-ranking protocols: NDCG@10, Recall@10 and MRR, each with its 95% bootstrap interval over users. */
export function fullTable(result: BenchmarkResult): string {
  const lines = [
    '| method | privacy | users | NDCG@10 | 95% CI | Recall@10 | 95% CI | MRR | 95% CI | seconds |',
    '|---|---|---:|---:|---|---:|---|---:|---|---:|',
  ];
  const ci = (c: [number, number]) => `[${fmt(c[0], 4)}, ${fmt(c[1], 4)}]`;
  for (const r of result.results) {
    lines.push(
      `| ${r.method} | ${r.privacy ?? '—'} | ${r.n} | ${fmt(r.ndcg10, 4)} | ${ci(r.ci.ndcg10)} | ${fmt(r.hr10, 4)} | ${ci(r.ci.hr10)} | ${fmt(r.mrr, 4)} | ${ci(r.ci.mrr)} | ${fmt(r.seconds, 1)} |`,
    );
  }
  return lines.join('\n');
}
