/**
 * `npm run bench:poisoning`: how far a few fake reports lift an item nobody holds, under the
 * local-DP report (community/ldp.ts, the shipped defaults) and under Prio3 verifiable aggregation
 * (sync/prio3-report.ts on the device, atomem-index's prio3-aggregator.ts for the two
 * aggregators), on the same population.
 *
 * Population: every user of the dataset is a device whose recent items are the last ℓ distinct
 * items of its history (ML-100K: every rating is a liked interaction). Honest devices report once.
 * The target: among the catalog items no device holds, the one at the median of their honest
 * local-DP ranks (a typical never-bought item). The attacker sends `--fakes` reports (default 20):
 * - local DP: each fake report is the (cohort, bucket) of the target's hash in a random cohort —
 *   the report that raises the target's estimate most (≈ ℓ / (p* − q) holders each);
 * - Prio3: each fake report is a well-formed vector with a 1 at the target (the most a report
 *   that passes the proof can add); `--forged` more reports (default 20) whose leader share
 *   encodes 20 at the target go through the proof check too and are counted when accepted.
 *
 * Every Prio3 report goes the whole way in-process: sharding, HPKE sealing to each aggregator,
 * opening, preparation by both aggregators, the proof decision, summing; then each aggregator's
 * discrete Laplace noise (ε per release, scale ℓ/ε), the sum, the release rule. Ranks: 1 + the
 * number of catalog items with a strictly larger released value (estimate or noisy count).
 * "Fakes to reach the top 10": the smallest number of such fake reports that puts the target's
 * value at rank ≤ 10 (local DP: the estimate is linear in the fakes; Prio3: each accepted fake
 * adds exactly 1, as the run checks for the first `--fakes`).
 *
 * "Fakes to be shown": the smallest number f of fake reports with which the service's release
 * (atomem-index `buildPrio3Release`, on the noisy counts with the target's count + f and the
 * epoch's reports + f) lists the target — under the threshold alone (`--min-share 0`) and under
 * the shipped rule (threshold + ⌈minShare × reports⌉, `PRIO3_MIN_SHARE`). A released item is an
 * example of its community, and in a community's top 10 when fewer than 10 of its items are
 * released (as here): being released is the attacker's whole cost, counted conservatively.
 * The honest cost of the rule: the items the release lists from the honest reports alone, under
 * either rule.
 *
 * Deterministic for a seed: the devices' randomization, the fake cohorts, the Prio3 shares and
 * the noise come from seeded generators (HPKE's own randomness does not change any figure).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_LDP, ReportHistogram, Rng, b64, encodePrio3Upload, estimateCounts, makeReport, prio3Measurement } from 'atomem/engine';
import { olhBucket } from 'atomem/protocol';
import { PRIO3_MIN_SHARE, Prio3Aggregator, buildPrio3Release, discreteLaplace, prio3MinCount, prio3Threshold, releaseNoiseStd } from 'atomem-index';
import { compareIds, loadDataset } from './datasets.js';
import type { DatasetFormat } from './types.js';

export interface PoisoningOptions {
  data: string;
  format?: DatasetFormat;
  /** k of the k-core filter (default: the format's, as every benchmark loads the dataset). */
  kcore?: number;
  seed?: number;
  fakes?: number;
  forged?: number;
  /** ε of each aggregator's noise per release (Prio3). Default 1. */
  epsilon?: number;
  /** The release's minimum share of the epoch's reports (atomem-index `PRIO3_MIN_SHARE` by default). */
  minShare?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface PoisoningResult {
  dataset: string;
  devices: number;
  items: number;
  target: string;
  fakes: number;
  fakeShare: number;
  ldp: { epsilon: number; rankBefore: number; rankAfter: number; fakesForTop10: number; shareForTop10: number };
  prio3: {
    epsilon: number;
    noiseStd: number;
    threshold: number;
    rankBefore: number;
    rankAfter: number;
    forged: number;
    forgedAccepted: number;
    fakesAccepted: number;
    targetCountAfter: number;
    releasedAfter: boolean;
    fakesForTop10: number;
    shareForTop10: number;
    /** The release's minimum share of the epoch's reports. */
    minShare: number;
    /** The count the honest release needs: threshold + ⌈minShare × devices⌉. */
    minCount: number;
    /** Fakes for the release to list the target under the threshold alone. */
    thresholdOnly: { fakes: number; share: number; releasedItems: number };
    /** Fakes for the release to list the target under the rule (threshold + minimum share): shown. */
    shown: { fakes: number; share: number; releasedItems: number };
    /** Largest honest (noiseless) count of an item. */
    maxTrueCount: number;
  };
  ms: number;
}

/** 1 + the number of values strictly larger than `values[i]`. */
function rankOf(values: ArrayLike<number>, i: number): number {
  let r = 1;
  for (let j = 0; j < values.length; j++) if (values[j] > values[i]) r++;
  return r;
}

/** Smallest k ≥ 0 with rank(values with `perFake`·k added at i) ≤ 10 (linear search on sorted values). */
function fakesForTop(values: ArrayLike<number>, i: number, perFake: number, top = 10): number {
  const others = Array.from(values)
    .filter((_, j) => j !== i)
    .sort((a, b) => b - a);
  // rank ≤ top ⟺ at most top − 1 values strictly above: need value ≥ the top-th largest other
  const bar = others[top - 1];
  return Math.max(0, Math.ceil((bar - values[i]) / perFake));
}

/** Seeded bytes for the Prio3 shares. */
function seededBytes(r: Rng): (n: number) => Uint8Array {
  return (n) => {
    const out = new Uint8Array(n);
    for (let k = 0; k < n; k++) out[k] = Math.floor(r.next() * 256);
    return out;
  };
}

export async function runPoisoning(o: PoisoningOptions): Promise<PoisoningResult> {
  const t0 = performance.now();
  const seed = o.seed ?? 1;
  const nFakes = o.fakes ?? 20;
  const nForged = o.forged ?? 20;
  const epsilon = o.epsilon ?? 1;
  const minShare = o.minShare ?? PRIO3_MIN_SHARE;
  prio3MinCount(0, 0, minShare);
  const dataset = loadDataset(o.format ?? 'movielens', o.data, o.kcore === undefined ? {} : { kcore: o.kcore });
  const items = [...dataset.items.keys()].sort(compareIds);
  const ldp = DEFAULT_LDP;
  const ell = ldp.ell;
  const users = [...dataset.sequences.keys()].sort(compareIds);
  const recent = users.map((u) => dataset.sequences.get(u)!.map((x) => x.item));
  const held = new Set(recent.flatMap((r) => prio3Measurement(r, items, ell).flatMap((x, i) => (x ? [items[i]] : []))));

  // ——— local DP ———
  const hist = new ReportHistogram(ldp);
  users.forEach((u, k) => {
    const r = Rng.derive(seed, 'ldp-device', u);
    hist.add(makeReport(recent[k], ldp, {}, () => r.next()));
  });
  const before = estimateCounts(hist, items, ldp);
  const ldpBefore = items.map((id) => before.get(id)!);
  // the target: median honest rank among the items nobody holds
  const cold = items.map((id, i) => ({ id, i, rank: rankOf(ldpBefore, i) })).filter((x) => !held.has(x.id));
  cold.sort((a, b) => a.rank - b.rank || compareIds(a.id, b.id));
  const target = cold[Math.floor(cold.length / 2)];
  const ti = target.i;
  const fr = Rng.derive(seed, 'ldp-fakes');
  const poisoned = new ReportHistogram(ldp);
  for (const [key, n] of hist.cells) poisoned.add({ cohort: Math.floor(key / ldp.g), bucket: key % ldp.g }, n);
  for (let k = 0; k < nFakes; k++) {
    const cohort = Math.min(ldp.cohorts - 1, Math.floor(fr.next() * ldp.cohorts));
    poisoned.add({ cohort, bucket: olhBucket(cohort, target.id, ldp.g) });
  }
  const after = estimateCounts(poisoned, items, ldp);
  const ldpAfter = items.map((id) => after.get(id)!);
  const perFakeLdp = (ldpAfter[ti] - ldpBefore[ti]) / Math.max(1, nFakes);
  const ldpTop = fakesForTop(ldpBefore, ti, perFakeLdp);

  // ——— Prio3 ———
  const seedOf = (label: string) => seededBytes(Rng.derive(seed, 'prio3-key', label))(32);
  const peerKey = 'poisoning-benchmark-peer-key';
  const leader = await Prio3Aggregator.create({ role: 'leader', length: items.length, peerKey, hpkeSeed: seedOf('leader') });
  const helper = await Prio3Aggregator.create({ role: 'helper', length: items.length, peerKey, hpkeSeed: seedOf('helper') });
  const keys = { leader: { hpkePublicKey: leader.publicKey }, helper: { hpkePublicKey: helper.publicKey } };
  const shareRng = Rng.derive(seed, 'prio3-shares');
  const random = seededBytes(shareRng);
  let la = leader.zero();
  let ha = helper.zero();
  const total = users.length + nFakes + nForged;
  let done = 0;
  /** One report through both aggregators; true when the proof holds (then summed). */
  const aggregate = async (measurement: number[], forge?: number): Promise<boolean> => {
    const up = await encodePrio3Upload({ measurement, epoch: 1, token: '', ...keys, random });
    const nonce = b64.decode(up.nonce);
    const pub = b64.decode(up.publicShare);
    const li = await leader.open(1, nonce, pub, up.leaderShare);
    if (forge !== undefined) li.measurementShare[forge] = (li.measurementShare[forge] + 19n) % leader.field.modulus;
    const hi = await helper.open(1, nonce, pub, up.helperShare);
    const lp = await leader.prepare(nonce, pub, li);
    const hp = await helper.prepare(nonce, pub, hi);
    const msg = await helper.combine([lp.share, hp.share]);
    const lo = msg && leader.finish(lp.state, msg);
    const ho = msg && helper.finish(hp.state, msg);
    o.onProgress?.(++done, total);
    if (!lo || !ho) return false;
    la = leader.sum(la, lo);
    ha = helper.sum(ha, ho);
    return true;
  };
  for (const r of recent) if (!(await aggregate(prio3Measurement(r, items, ell)))) throw new Error('an honest Prio3 report was refused');
  const noiseRng = Rng.derive(seed, 'prio3-noise');
  const uniform = () => noiseRng.next();
  const scale = ell / epsilon;
  // the same noise draws before and after (the attack is the only difference)
  const noise = items.map(() => discreteLaplace(scale, uniform) + discreteLaplace(scale, uniform));
  const release = (l: bigint[], h: bigint[]) => leader.unshard(l, h).map((x, i) => x + noise[i]);
  const prioBefore = release(la, ha);
  const honestCounts = leader.unshard(la, ha);
  const honestTarget = honestCounts[ti];
  const maxTrueCount = Math.max(...honestCounts);
  const one = new Array<number>(items.length).fill(0);
  one[ti] = 1;
  let fakesAccepted = 0;
  for (let k = 0; k < nFakes; k++) if (await aggregate(one)) fakesAccepted++;
  let forgedAccepted = 0;
  for (let k = 0; k < nForged; k++) if (await aggregate(one, ti)) forgedAccepted++;
  const prioAfter = release(la, ha);
  if (leader.unshard(la, ha)[ti] !== honestTarget + fakesAccepted + 20 * forgedAccepted) throw new Error('the aggregate does not add up');
  const noiseStd = releaseNoiseStd(scale);
  // the service's default rule (atomem-index prio3Threshold): ≥ 3σ, and no pure-noise item in ≥ 95 % of releases
  const threshold = prio3Threshold(scale, items.length);
  const prioTop = fakesForTop(prioBefore, ti, 1);
  const n = users.length;
  /** The service's release of the noisy counts with `f` fakes at the target (each adds exactly 1, as checked above). */
  const releaseWith = (f: number, share: number) =>
    buildPrio3Release({
      epoch: 1,
      epochMs: 1,
      items,
      noisy: prioBefore.map((x, i) => (i === ti ? x + f : x)),
      reports: n + f,
      rejected: 0,
      ell,
      epsilon,
      threshold,
      minShare: share,
    });
  /** The smallest f whose release lists the target (the release is monotone in f: count + f vs. a bar growing by < 1 per fake). */
  const fakesToShow = (share: number): { fakes: number; share: number; releasedItems: number } => {
    let f = 0;
    while (releaseWith(f, share).counts[target.id] === undefined) {
      if (++f > 100 * n) throw new Error('the target is never released');
    }
    return { fakes: f, share: f / (n + f), releasedItems: Object.keys(releaseWith(0, share).counts).length };
  };

  return {
    dataset: dataset.name,
    devices: n,
    items: items.length,
    target: target.id,
    fakes: nFakes,
    fakeShare: nFakes / (n + nFakes),
    ldp: {
      epsilon: ldp.epsilon,
      rankBefore: rankOf(ldpBefore, ti),
      rankAfter: rankOf(ldpAfter, ti),
      fakesForTop10: ldpTop,
      shareForTop10: ldpTop / (n + ldpTop),
    },
    prio3: {
      epsilon,
      noiseStd,
      threshold,
      rankBefore: rankOf(prioBefore, ti),
      rankAfter: rankOf(prioAfter, ti),
      forged: nForged,
      forgedAccepted,
      fakesAccepted,
      targetCountAfter: prioAfter[ti],
      releasedAfter: prioAfter[ti] >= prio3MinCount(threshold, n + fakesAccepted + forgedAccepted, minShare),
      fakesForTop10: prioTop,
      shareForTop10: prioTop / (n + prioTop),
      minShare,
      minCount: prio3MinCount(threshold, n, minShare),
      thresholdOnly: fakesToShow(0),
      shown: fakesToShow(minShare),
      maxTrueCount,
    },
    ms: performance.now() - t0,
  };
}

export function formatPoisoning(r: PoisoningResult, seed: number): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)} %`;
  const p = r.prio3;
  return [
    `Dataset ${r.dataset}: ${r.devices} devices, ${r.items} items; target ${r.target} (held by no device); ${r.fakes} fake reports (${pct(r.fakeShare)}); seed ${seed}.`,
    '',
    '| aggregation | target rank before | after fakes | fakes to reach the top 10 (share of reports) | … to be shown, threshold alone | … to be shown, threshold + minimum share (shipped) | notes |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    `| local DP (ε = ${r.ldp.epsilon.toFixed(2)} per report) | ${r.ldp.rankBefore} of ${r.items} | ${r.ldp.rankAfter} | ${r.ldp.fakesForTop10} (${pct(r.ldp.shareForTop10)}) | same (no threshold on popularity) | — | one fake report adds ≈ ℓ/(p* − q) holders |`,
    `| Prio3 (ε = ${p.epsilon} per release, noise std ${p.noiseStd.toFixed(1)}, threshold ${p.threshold}, minimum share ${p.minShare}) | ${p.rankBefore} | ${p.rankAfter} | ${p.fakesForTop10} (${pct(p.shareForTop10)}) | ${p.thresholdOnly.fakes} (${pct(p.thresholdOnly.share)}) | ${p.shown.fakes} (${pct(p.shown.share)}) | ${p.fakesAccepted}/${r.fakes} well-formed fakes counted (+1 each); ${p.forgedAccepted}/${p.forged} forged (20 at the target) accepted; target's noisy count after the fakes ${p.targetCountAfter} (${p.releasedAfter ? 'released' : 'withheld'}) |`,
    '',
    `Honest release (no fakes): largest true count ${p.maxTrueCount}; items released ${p.thresholdOnly.releasedItems} of ${r.items} under the threshold alone (${p.threshold}), ${p.shown.releasedItems} under the rule (a count needs ≥ ${p.minCount} = ${p.threshold} + ⌈${p.minShare} × ${r.devices}⌉).`,
    '',
    `(${(r.ms / 1000).toFixed(0)} s)`,
  ].join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      data: { type: 'string' },
      format: { type: 'string', default: 'movielens' },
      seed: { type: 'string', default: '1' },
      fakes: { type: 'string', default: '20' },
      forged: { type: 'string', default: '20' },
      epsilon: { type: 'string', default: '1' },
      'min-share': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const data = values.data ?? process.env.ATOMEM_ML100K ?? '../shared/data/ml-100k';
  const seed = Number(values.seed);
  const num = (name: string, v: string | undefined, min: number) => {
    const x = Number(v);
    if (!Number.isFinite(x) || x < min) throw new RangeError(`--${name} must be a number ≥ ${min}, got ${v}`);
    return x;
  };
  let last = 0;
  const r = await runPoisoning({
    data,
    format: values.format as DatasetFormat,
    seed: num('seed', values.seed, 0),
    fakes: num('fakes', values.fakes, 0),
    forged: num('forged', values.forged, 0),
    epsilon: num('epsilon', values.epsilon, 1e-6),
    minShare: values['min-share'] === undefined ? undefined : num('min-share', values['min-share'], 0),
    onProgress: (d, t) => {
      if (Date.now() - last > 5000 || d === t) {
        last = Date.now();
        process.stderr.write(`Prio3 reports through both aggregators: ${d}/${t}\n`);
      }
    },
  });
  process.stdout.write(`${values.json ? JSON.stringify(r, null, 2) : formatPoisoning(r, seed)}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`bench:poisoning: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
