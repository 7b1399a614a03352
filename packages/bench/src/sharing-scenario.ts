/**
 * Does sharing pay for itself? `npm run bench:sharing` measures `contribute − off` (NDCG@10,
 * paired bootstrap over users) in one named scenario where the devices hold what the shop's
 * file does not:
 *
 * **A stale shop file.** The shop rebuilds its model file (`atomem-vectors --log`) every few
 * weeks; between two builds the file knows nothing of what shoppers did since, while each
 * device keeps its own events. The index releases, per epoch, what devices turned to (the
 * verifiable Prio3 release: each device's distinct items of the epoch, at most ℓ, summed by the
 * two aggregators with central discrete-Laplace noise, counts under the release rule withheld:
 * the threshold plus a minimum share of the epoch's reports).
 *
 * Built from ML-100K under the full-ranking `temporal` protocol (EVAL.md): one global cut T at
 * the `--cut` quantile of event times; each user is tested on their first event after T, every
 * catalog item ranked; the device's history is everything before T. The shop's file is trained
 * on the log before T − `--lag-days` (the `shop.until` quantile that falls there); the release is
 * that of the epoch [T − `--epoch-days`, T): every user with a history reports (zeros when
 * nothing new), with the aggregators' noise drawn from the seed. `off` ranks with atomem's
 * shipped defaults and the stale file; `contribute` is the same agents with the release in use
 * (the `crowd` signal at its shipped weight, `shopWeights.crowd`).
 *
 * The release is computed here as the aggregators compute it: the sum of the devices' 0/1
 * vectors (what Prio3 reveals once both aggregate shares are added; the proof check and the
 * sharing leave the sum exact, packages/atomem-index/test/prio3-service.test.ts) plus each
 * aggregator's discrete Laplace noise of scale ℓ/ε, through `buildPrio3Release` of atomem-index.
 *
 *   npm run bench:sharing -- --data ../shared/data/ml-100k
 *   npm run bench:sharing -- --data ../shared/data/ml-100k --setting 1,10,7 --setting 4,1,28 --setting inf,10,7
 *
 * (`--setting ε,ℓ,days[,threshold[,minShare]]`, repeatable, all against one `off` run; ε = inf
 * releases the exact counts: what the scenario could give without noise; minShare 0 releases by
 * the threshold alone.)
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_CONFIG, DEFAULT_LDP, Rng, type Interaction } from 'atomem/engine';
import { PRIO3_MIN_SHARE, buildPrio3Release, discreteLaplace, prio3Threshold, type Prio3Release } from 'atomem-index';
import { AtomemMethod } from './atomem-method.js';
import { loadDataset } from './datasets.js';
import { buildFullProtocol } from './full-protocol.js';
import { runBenchmark } from './run.js';
import type { MethodFactory } from './registry.js';
import type { DatasetFormat, Dataset } from './types.js';

const DAY_MS = 86_400_000;

/** One mechanism setting of the release (a `contribute` row). */
export interface SharingSetting {
  /** Central ε per release (each aggregator's noise). Default 1 (the shipped `--prio3-epsilon`). */
  epsilon?: number;
  /** Items a device reports at most. Default the shipped ℓ (10). */
  ell?: number;
  /** The release's epoch, days (the epoch [T − this, T)). Default 7. */
  epochDays?: number;
  /** Counts below this are withheld. Default atomem-index's rule ({@link prio3Threshold}). */
  threshold?: number;
  /** The release's minimum share of the epoch's reports on top of the threshold. Default atomem-index's `PRIO3_MIN_SHARE`. */
  minShare?: number;
}

export interface SharingScenarioOptions {
  data: string;
  format?: DatasetFormat;
  kcore?: number;
  seed?: number;
  /** Quantile of event times of the temporal cut T. Default 0.9. */
  cut?: number;
  /** Age of the shop's file at T, days (its log ends at T − lag). Default 28. */
  lagDays?: number;
  /** The `contribute` rows (all against one `off` run). Default one row of shipped defaults. */
  settings?: SharingSetting[];
  /** Weight of the `crowd` signal. Default the shipped `shopWeights.crowd`. */
  weight?: number;
  /** Evaluate on validation cases (a cut inside the pre-T log) instead of test cases. */
  validation?: boolean;
  resamples?: number;
  users?: number | 'all';
  onProgress?: (label: string, done: number, total: number) => void;
}

export interface SharingRow {
  setting: Required<Omit<SharingSetting, 'threshold'>> & { threshold: number; minCount: number; scale: number; noiseStd: number };
  epoch: { from: string; to: string };
  release: { reports: number; activeDevices: number; released: number; maxTrueCount: number };
  contribute: number;
  diff: number;
  ci: [number, number];
}

export interface SharingScenarioResult {
  scenario: string;
  dataset: string;
  target: 'test' | 'validation';
  cutTime: string;
  shopLogUntil: string;
  shopUntilQuantile: number;
  items: number;
  weight: number;
  users: number;
  off: number;
  rows: SharingRow[];
}

const iso = (t: number) => new Date(t).toISOString().slice(0, 10);

/** The release of the epoch [from, to): every device reports its distinct items of the epoch (at most the last ℓ), noise from `seed`. */
export function scenarioRelease(
  histories: ReadonlyMap<string, readonly Interaction[]>,
  items: readonly string[],
  o: { from: number; to: number; epsilon: number; ell: number; threshold?: number; minShare?: number; seed: number; epochMs: number },
): { release: Prio3Release; activeDevices: number; maxTrueCount: number } {
  const index = new Map(items.map((id, i) => [id, i]));
  const sum = new Array<number>(items.length).fill(0);
  let reports = 0;
  let active = 0;
  for (const [, seq] of histories) {
    reports++;
    const distinct: string[] = [];
    for (const x of seq) {
      if (x.at < o.from || x.at >= o.to || !index.has(x.item)) continue;
      const i = distinct.indexOf(x.item);
      if (i >= 0) distinct.splice(i, 1);
      distinct.push(x.item);
    }
    if (distinct.length) active++;
    for (const id of distinct.slice(-o.ell)) sum[index.get(id)!]++;
  }
  const scale = o.ell / o.epsilon;
  const rng = Rng.derive(o.seed, 'sharing-scenario', 'noise');
  const uniform = () => rng.next();
  // the leader's and the helper's noise, each of scale ℓ/ε (ε = ∞: the exact counts, an upper bound of what the scenario can give)
  const exact = o.epsilon === Infinity;
  const noisy = sum.map((c) => (exact ? c : c + discreteLaplace(scale, uniform) + discreteLaplace(scale, uniform)));
  const threshold = o.threshold ?? (exact ? 1 : prio3Threshold(scale, items.length));
  const release = buildPrio3Release({
    epoch: Math.floor(o.from / o.epochMs),
    epochMs: o.epochMs,
    items,
    noisy,
    reports,
    rejected: 0,
    ell: o.ell,
    epsilon: o.epsilon,
    threshold,
    minShare: o.minShare ?? PRIO3_MIN_SHARE,
  });
  return { release, activeDevices: active, maxTrueCount: Math.max(0, ...sum) };
}

/** The `shop.until` quantile of the log before `cutTime` that falls at `until`. */
function shopQuantile(dataset: Dataset, cutTime: number, until: number): number {
  let before = 0;
  let kept = 0;
  for (const seq of dataset.sequences.values())
    for (const x of seq) {
      if (x.at >= cutTime) continue;
      before++;
      if (x.at < until) kept++;
    }
  return Math.min(1, Math.max(1e-6, kept / before));
}

export async function runSharingScenario(o: SharingScenarioOptions): Promise<SharingScenarioResult> {
  const seed = o.seed ?? 2026;
  const cut = o.cut ?? 0.9;
  const lagDays = o.lagDays ?? 28;
  const weight = o.weight ?? DEFAULT_CONFIG.shopWeights.crowd ?? 0;
  const settings = (o.settings?.length ? o.settings : [{}]).map((x) => ({
    epsilon: x.epsilon ?? 1,
    ell: x.ell ?? DEFAULT_LDP.ell,
    epochDays: x.epochDays ?? 7,
    threshold: x.threshold,
    minShare: x.minShare ?? PRIO3_MIN_SHARE,
  }));
  for (const x of settings) {
    if (!(lagDays > 0) || !(x.epochDays > 0) || x.epochDays > lagDays) throw new RangeError('need 0 < epoch days ≤ --lag-days');
    if (!(x.epsilon > 0) || !(Number.isInteger(x.ell) && x.ell >= 1)) throw new RangeError('need ε > 0 and an integer ℓ ≥ 1');
  }
  const dataset = loadDataset(o.format ?? 'movielens', o.data, o.kcore === undefined ? {} : { kcore: o.kcore });
  const target = o.validation ? 'validation' : 'test';
  const { cutTime } = buildFullProtocol(dataset, 'temporal', { cut, seed, target });
  const T = cutTime!;
  const until = T - lagDays * DAY_MS;
  const q = shopQuantile(dataset, T, until);
  const items = [...dataset.items.keys()].sort();
  const built = new Map<string, ReturnType<typeof scenarioRelease>>();
  const nameOf = (i: number) => `contribute-${i}`;
  const factory = (setting?: (typeof settings)[number], name?: string): MethodFactory =>
    ((opts) =>
      new AtomemMethod(
        { ...opts, privacy: 'off' },
        {},
        {
          weights: (w) => {
            w.shopWeights.crowd = setting ? weight : 0;
            w.shopWeightsLive.crowd = setting ? weight : 0;
          },
          afterPrepare: (agents, ctx) => {
            if (!setting || !name) return;
            const epochMs = setting.epochDays * DAY_MS;
            const r = scenarioRelease(ctx.histories, items, {
              from: T - epochMs,
              to: T,
              epsilon: setting.epsilon,
              ell: setting.ell,
              threshold: setting.threshold,
              minShare: setting.minShare,
              seed,
              epochMs,
            });
            built.set(name, r);
            for (const a of agents.values()) a.useCrowd(r.release);
          },
        },
      )) as MethodFactory;
  const factories = new Map<string, MethodFactory>([
    ['off', factory()],
    ...settings.map((x, i) => [nameOf(i), factory(x, nameOf(i))] as [string, MethodFactory]),
  ]);
  const result = await runBenchmark({
    dataset,
    protocol: 'temporal',
    cut,
    seed,
    users: o.users ?? 'all',
    validation: o.validation,
    methods: [...factories.keys()],
    reference: 'off',
    factories,
    resamples: o.resamples,
    params: { 'shop.until': String(q), 'atomem.fidelityUsers': '0' },
    onProgress: (e) => o.onProgress?.(`${e.method} ${e.label ?? e.phase}`, e.done, e.total),
  });
  const ndcg = (m: string) => result.results.find((r) => r.method === m)!.ndcg10;
  const rows: SharingRow[] = settings.map((x, i) => {
    const c = result.contrasts.find((d) => d.a === nameOf(i) && d.b === 'off' && d.metric === 'ndcg10')!;
    const r = built.get(nameOf(i))!;
    const m = r.release.mechanism;
    return {
      setting: {
        epsilon: x.epsilon,
        ell: x.ell,
        epochDays: x.epochDays,
        threshold: m.threshold,
        minShare: m.minShare,
        minCount: m.minCount,
        scale: m.scale,
        noiseStd: m.noiseStd,
      },
      epoch: { from: iso(T - x.epochDays * DAY_MS), to: iso(T) },
      release: { reports: r.release.reports, activeDevices: r.activeDevices, released: Object.keys(r.release.counts).length, maxTrueCount: r.maxTrueCount },
      contribute: ndcg(nameOf(i)),
      diff: c.diff,
      ci: c.ci,
    };
  });
  const users = result.contrasts[0]?.n ?? 0;
  return {
    scenario: `stale shop file: the file is ${lagDays} days old at the cut; the index releases the last epoch before it`,
    dataset: dataset.name,
    target,
    cutTime: iso(T),
    shopLogUntil: iso(until),
    shopUntilQuantile: q,
    items: items.length,
    weight,
    users,
    off: ndcg('off'),
    rows,
  };
}

/** `--setting eps,ell,days[,threshold[,minShare]]` → a setting. */
function parseSetting(v: string): SharingSetting {
  const [epsilon, ell, epochDays, threshold, minShare] = v.split(',').map((x) => (x === '' ? undefined : x === 'inf' ? Infinity : Number(x)));
  if ([ell, epochDays, threshold, minShare].some((x) => x !== undefined && !Number.isFinite(x)) || Number.isNaN(epsilon))
    throw new RangeError(`--setting must be ε,ℓ,days[,threshold[,minShare]] (ε may be inf: exact counts), got ${v}`);
  return { epsilon, ell, epochDays, threshold, minShare };
}

function numberArg(v: string | undefined, name: string): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new RangeError(`${name} must be a number, got ${v}`);
  return n;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const { values } = parseArgs({
    options: {
      data: { type: 'string' },
      seed: { type: 'string' },
      cut: { type: 'string' },
      'lag-days': { type: 'string' },
      setting: { type: 'string', multiple: true },
      weight: { type: 'string' },
      validation: { type: 'boolean' },
      resamples: { type: 'string' },
      json: { type: 'string' },
    },
  });
  const data = values.data ?? process.env.ATOMEM_ML100K ?? '../shared/data/ml-100k';
  let last = '';
  const r = await runSharingScenario({
    data,
    seed: numberArg(values.seed, '--seed'),
    cut: numberArg(values.cut, '--cut'),
    lagDays: numberArg(values['lag-days'], '--lag-days'),
    settings: (values.setting ?? []).map(parseSetting),
    weight: numberArg(values.weight, '--weight'),
    validation: values.validation,
    resamples: numberArg(values.resamples, '--resamples'),
    onProgress: (label, done, total) => {
      if (label !== last || done === total || done % 50 === 0) process.stderr.write(`\r${label} ${done}/${total}${done === total ? '\n' : ''}`);
      last = label;
    },
  });
  const f = (x: number) => (x >= 0 ? '+' : '') + x.toFixed(4);
  console.log(`scenario: ${r.scenario} (${r.dataset}, ${r.target} cases, temporal cut ${r.cutTime}, ${r.users} users)`);
  console.log(
    `shop file: log until ${r.shopLogUntil} (shop.until = ${r.shopUntilQuantile.toFixed(4)} of the pre-cut log); crowd weight ${r.weight}; off NDCG@10 ${r.off.toFixed(4)}`,
  );
  console.log('');
  console.log(
    '| ε per release | ℓ | epoch | threshold | minimum share | count released from | active devices / reports | largest true count | items released | contribute NDCG@10 | contribute − off [95% CI] |',
  );
  console.log('| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const x of r.rows)
    console.log(
      `| ${x.setting.epsilon === Infinity ? '∞ (exact counts)' : x.setting.epsilon} | ${x.setting.ell} | ${x.epoch.from} – ${x.epoch.to} | ${x.setting.threshold} | ${x.setting.minShare} | ${x.setting.minCount} | ${x.release.activeDevices} / ${x.release.reports} | ${x.release.maxTrueCount} | ${x.release.released} of ${r.items} | ${x.contribute.toFixed(4)} | ${f(x.diff)} [${f(x.ci[0])}, ${f(x.ci[1])}] |`,
    );
  if (values.json) {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(values.json, `${JSON.stringify(r, null, 2)}\n`);
  }
}
