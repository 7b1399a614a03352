/**
 * `npm run bench:privacy`: the attacks of docs/PRIVACY.md against the shared index (protocol v2
 * through the real service with its shipped defaults), from the server's full view
 * (everything stored plus every request as it arrived), and the quality it buys (NDCG@10 with a
 * paired bootstrap interval against `off`). Beside each figure, the "before" column: what the
 * same attack achieved against the removed protocol v1, frozen ({@link V1_FROZEN}: measured on
 * ML-100K at the commit it names; v1 no longer exists to run).
 *
 * Population: every user of the dataset trains an agent on their history minus the last
 * `laterEvents` interactions (epoch 1), reports, then trains on those last events (epoch 2:
 * the same device later) and reports again. `holdOut` devices do not report in epoch 1 and are
 * left out of the membership release: they are the non-members of membership inference.
 *
 * Attacks (see docs/PRIVACY.md for the threat model):
 * - linkage: pairs (report of epoch 1, report of epoch 2); AUC of the attacker's score for
 *   same-device pairs against other-device pairs, from the request log (cohort and bucket of
 *   the reports, arrival times) — v2 stores no per-report row.
 * - n−1: two probe reports on an item of the victim; can the attacker tell the epoch where the
 *   victim reported from one where it did not (AUC)? Also the worst case: an attacker who knows
 *   every other report exactly.
 * - membership inference: the release's estimates on the candidate's items; AUC members vs
 *   held-out devices.
 * - noise averaging: 30 re-reads of the immutable release, and 30 epochs of linked reports of a
 *   one-item device (memoized permanent randomization).
 * - set recovery: the report's hash support ranked by public popularity, against the 10 most
 *   popular items.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { MemoryAgent, ReportHistogram, buildRelease, composedChannel, estimateCounts, makeReport, type ItemVectors, type PermanentMemo } from 'atomem/engine';
import { DEFAULT_EPOCH_MS, olhBucket, type LdpParams, type Release } from 'atomem/protocol';
import { compareIds, loadDataset } from './datasets.js';
import { bootstrapCI, ndcgAt, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { catalogVectors } from './vector-cache.js';
import { idGenerator, negativeSampler, Rng } from './rng.js';
import type { Dataset, DatasetFormat } from './types.js';
import type { Interaction } from 'atomem/engine';
import { itemSpaceOf, openBenchService, runEpoch, type LoggedReport } from './v2-epoch.js';

/** Options of {@link measureAttacks}. */
export interface AttackOptions {
  dataset: Dataset;
  /** `use-lite` (default) or `hashing` (tests). */
  embedder?: 'use-lite' | 'hashing';
  seed?: number;
  /** Interactions of epoch 2 (the last ones before the test item). Default 5. */
  laterEvents?: number;
  /** Devices that never share (membership inference's non-members). Default 100. */
  holdOut?: number;
  /** Victims / candidates per attack. Default 100. */
  trials?: number;
  /** v2 service overrides (default: the shipped defaults). */
  v2?: { minReports?: number; minContributors?: number };
  cacheDir?: string | null;
  onProgress?: (label: string, done: number, total: number) => void;
}

/**
 * Protocol v1's figures on these attacks, frozen when v1 was removed: the v1 column of
 * `npm run bench:privacy -- --data ../shared/data/ml-100k` at commit a17e0e3 (all 943 users,
 * 100 held out, seed 2026, USE-lite, the service's v1 defaults: k = 3, Laplace b = 1, 64
 * members, mutual top-2 links at the agents' tau (0.35: centred USE-lite), communities of at most
 * 128 records). Keyed by
 * {@link AttackRow.attack}; NaN where the attack had no v1 form.
 */
export const V1_FROZEN = {
  commit: 'a17e0e3',
  dataset: 'ml-100k',
  figures: {
    'linkage of two records of one shopper (stored data)': 0.9617470592949773,
    'linkage of two records of one shopper (request log)': 1,
    'n−1: probes next to a victim, read the victim back': 0.94,
    'membership inference (is this shopper in the index?)': 1,
    'noise averaging: 30 re-queries recover the exact count': 1,
    'set recovery: items of one record with the public catalog': 0.4151336560724111,
  } as Readonly<Record<string, number>>,
} as const;

/** One attack's before (frozen v1) / after (measured v2) figures. */
export interface AttackRow {
  attack: string;
  measure: string;
  /** Protocol v1's figure ({@link V1_FROZEN}; NaN: no v1 form). Not measured by this run. */
  v1: number;
  v2: number;
  /** What chance (no information) gives. */
  chance: number;
}

export interface AttackReport {
  dataset: string;
  users: number;
  devicesSharing: number;
  embedderId: string;
  seed: number;
  ldp: LdpParams;
  rows: AttackRow[];
  /** Quality: NDCG@10 per level (all users ranked), with ε, and the paired interval of v2 − off. */
  quality: { level: string; protocol: string; epsilon: string; ndcg10: number }[];
  pairedDiff: { mean: number; ci: [number, number] };
  v2Release: { communities: number; reports: number };
  seconds: number;
}

/** AUC of scores: P(positive > negative) + ½ P(tie), over all pairs (O(n log n)). */
export function auc(pos: readonly number[], neg: readonly number[]): number {
  if (pos.length === 0 || neg.length === 0) return NaN;
  const all = [...pos.map((s) => ({ s, p: 1 })), ...neg.map((s) => ({ s, p: 0 }))].sort((a, b) => a.s - b.s);
  let rankSum = 0;
  for (let i = 0; i < all.length; ) {
    let j = i;
    while (j < all.length && all[j].s === all[i].s) j++;
    const avg = (i + 1 + j) / 2;
    for (let t = i; t < j; t++) if (all[t].p) rankSum += avg;
    i = j;
  }
  return (rankSum - (pos.length * (pos.length + 1)) / 2) / (pos.length * neg.length);
}

/** Run every attack (see the module comment). */
export async function measureAttacks(opts: AttackOptions): Promise<AttackReport> {
  const t0 = performance.now();
  const seed = opts.seed ?? DEFAULT_SEED;
  const later = opts.laterEvents ?? 5;
  const trials = opts.trials ?? 100;
  const progress = opts.onProgress ?? (() => {});
  const { dataset } = opts;
  const protocol = buildProtocol(dataset, { users: 'all', seed });
  const items: ItemVectors = await catalogVectors({ dataset, embedder: opts.embedder ?? 'use-lite', cacheDir: opts.cacheDir }, progress);
  const catalog = [...dataset.items.keys()].sort(compareIds);
  const space = await itemSpaceOf(items, catalog);
  const rng = Rng.derive(seed, 'attacks');

  // ——— population: epoch 1 = history minus the last events, epoch 2 = the same device later ———
  const users = [...protocol.histories.keys()].filter((u) => protocol.histories.get(u)!.length > later + 2).sort(compareIds);
  const held = new Set(rng.sampleWithoutReplacement(users, Math.min(opts.holdOut ?? 100, Math.floor(users.length / 4))));
  const agents = new Map<string, MemoryAgent>();
  const splits = new Map<string, { first: Interaction[]; second: Interaction[] }>();
  const clocks = new Map<string, { at: number }>();
  let done = 0;
  for (const u of users) {
    progress('training agents (epoch 1)', ++done, users.length);
    const h = protocol.histories.get(u)!;
    const split = { first: h.slice(0, -later), second: h.slice(-later) };
    splits.set(u, split);
    const clock = { at: split.first[split.first.length - 1].at };
    clocks.set(u, clock);
    const agent = new MemoryAgent({ items, clock: () => clock.at, newId: idGenerator(seed, `attack/${u}`) });
    await agent.train(split.first, negativeSampler(seed, u, catalog, new Set(h.map((i) => i.item))));
    agents.set(u, agent);
  }
  const sharing = users.filter((u) => !held.has(u));

  // v2 epoch 1 needs the epoch-1 state: run it before the agents train on epoch 2
  const bench = await openBenchService(space, opts.v2);
  try {
    const v2Devices = (list: string[]) => new Map(list.map((u) => [u, agents.get(u)!] as const));
    const e1 = await runEpoch({ space, devices: v2Devices(sharing), epoch: 1, seed, service: bench, onProgress: (d, t) => progress('v2 reports (epoch 1)', d, t) });
    done = 0;
    for (const u of users) {
      progress('training agents (epoch 2)', ++done, users.length);
      const h = protocol.histories.get(u)!;
      const agent = agents.get(u)!;
      clocks.get(u)!.at = h[h.length - 1].at;
      await agent.train(splits.get(u)!.second, negativeSampler(seed, `${u}/2`, catalog, new Set(h.map((i) => i.item))));
    }
    const e2 = await runEpoch({ space, devices: v2Devices(users), epoch: 2, seed, service: bench, onProgress: (d, t) => progress('v2 reports (epoch 2)', d, t) });
    const release2 = e2.release;
    if (!release2) throw new Error('v2: epoch 2 published no release (too few reports for minReports)');
    const ldp = bench.service.v2!.ldp;
    const rows: AttackRow[] = [];

    const v1Of = (attack: string): number => V1_FROZEN.figures[attack] ?? NaN;
    // ——— linkage ———
    // one report per device per epoch; the attacker scores pairs by cohort / bucket and arrival time
    const r1 = new Map(e1.log.map((l) => [l.device, l]));
    const r2s = e2.log.filter((l) => r1.has(l.device));
    const v2Score = (a: LoggedReport, b: LoggedReport) => (a.body.report.cohort === b.body.report.cohort ? 1 + (a.body.report.bucket === b.body.report.bucket ? 1 : 0) : 0) - Math.abs(((a.at % DEFAULT_EPOCH_MS) - (b.at % DEFAULT_EPOCH_MS)) / DEFAULT_EPOCH_MS) * 1e-3;
    const v2Pos: number[] = [];
    const v2Neg: number[] = [];
    const e1List = [...r1.values()];
    for (const b of r2s) {
      v2Pos.push(v2Score(r1.get(b.device)!, b));
      for (;;) {
        const a = e1List[rng.int(e1List.length)];
        if (a.device !== b.device) {
          v2Neg.push(v2Score(a, b));
          break;
        }
      }
    }
    const v2Link = auc(v2Pos, v2Neg);
    // v2 stores no row per report (a histogram of counts, deleted with the epoch): the stored data
    // offers no pair to score, every pair gets the same score
    const v2Stored = auc(v2Pos.map(() => 0), v2Neg.map(() => 0));
    const row = (attack: string, measure: string, v2: number, chance: number) => rows.push({ attack, measure, v1: v1Of(attack), v2, chance });
    row('linkage of two records of one shopper (stored data)', 'AUC (v1: cosine of a memory\'s two versions)', v2Stored, 0.5);
    row('linkage of two records of one shopper (request log)', 'AUC (v1: same connection; v2: cohort, bucket, time)', v2Link, 0.5);

    // ——— n−1 ———
    // the attacker's own two reports on an item of the victim; it cannot know the others' noise.
    // World 1: the victim reports; world 0: it does not. Each world redraws every other device's randomization.
    const { same } = composedChannel(ldp.epsPermanent, ldp.epsInstant, ldp.g);
    const worldEstimate = (devs: string[], item: string, salt: string, extra: { cohort: number; bucket: number }[]) => {
      const hist = new ReportHistogram(ldp);
      for (const u of devs) {
        const r = Rng.derive(seed, 'world', salt, u);
        hist.add(makeReport(agents.get(u)!.reportItems(), ldp, {}, () => r.next()));
      }
      for (const e of extra) hist.add(e);
      return estimateCounts(hist, [item], ldp).get(item)!;
    };
    const nm1Pos: number[] = [];
    const nm1Neg: number[] = [];
    let omniscientPos = 0;
    let omniscientNeg = 0;
    const nm1Trials = Math.min(trials, 40);
    const others = users.filter((u) => !held.has(u));
    for (let t = 0; t < nm1Trials; t++) {
      progress('n−1 (v2)', t + 1, nm1Trials);
      const victim = others[rng.int(others.length)];
      const its = agents.get(victim)!.reportItems();
      const x = its[rng.int(its.length)];
      const probes = [0, 1].map((k) => {
        const c = Rng.derive(seed, 'attacker', t, k).int(ldp.cohorts);
        return { cohort: c, bucket: olhBucket(c, x, ldp.g) };
      });
      const rest = others.filter((u) => u !== victim);
      nm1Pos.push(worldEstimate([...rest, victim], x, `w1-${t}`, probes));
      nm1Neg.push(worldEstimate(rest, x, `w0-${t}`, probes));
      // worst case: the attacker knows every other report exactly and isolates the victim's
      const r = Rng.derive(seed, 'victim', t);
      const rep = makeReport(its, ldp, {}, () => r.next());
      if (rep.bucket === olhBucket(rep.cohort, x, ldp.g)) omniscientPos++;
      const notIts = catalog.filter((c) => !its.includes(c));
      const y = notIts[rng.int(notIts.length)];
      if (rep.bucket === olhBucket(rep.cohort, y, ldp.g)) omniscientNeg++;
    }
    row('n−1: probes next to a victim, read the victim back', 'success rate (v1) / AUC victim present vs absent (v2)', auc(nm1Pos, nm1Neg), 0.5);
    const omniAuc = 0.5 + (omniscientPos - omniscientNeg) / (2 * nm1Trials);
    row('n−1 worst case: attacker knows every other report (v2 bound: ε)', 'AUC item of the victim vs not', omniAuc, 0.5);

    // ——— membership inference ———
    const heldList = [...held];
    const members = rng.sampleWithoutReplacement(sharing, Math.min(trials, heldList.length, sharing.length));
    const nonMembers = heldList.slice(0, members.length);
    const est2 = new Map(Object.entries(release2.popularity));
    const memberRelease = (() => {
      // the release of epoch 2 without the held-out devices (the service's own aggregation code on that subset)
      const hist = new ReportHistogram(ldp);
      for (const l of e2.log) if (!held.has(l.device)) hist.add(l.body.report);
      return buildRelease({ epoch: 2, epochMs: bench.service.v2!.epochMs, space, communities: bench.service.v2!.communities(), hist, ldp, minContributors: release2.minContributors });
    })();
    const estM = new Map(Object.entries(memberRelease.popularity));
    void est2;
    const miaV2 = (u: string) => agents.get(u)!.reportItems().reduce((s, it) => s + (estM.get(it) ?? 0), 0);
    row('membership inference (is this shopper in the index?)', 'AUC members vs held-out', auc(members.map(miaV2), nonMembers.map(miaV2)), 0.5);

    // ——— noise averaging across re-queries ———
    // v2: re-reading the release returns the same bytes
    const reread = await Promise.all(Array.from({ length: 30 }, () => bench.service.app.inject({ method: 'GET', url: '/v2/releases/2' })));
    const identical = reread.every((r) => r.body === reread[0].body);
    row('noise averaging: 30 re-queries recover the exact count', 'share of counts recovered exactly (30 queries; 1 query: v1 0.50)', identical ? 0 : NaN, 0);
    // v2 across epochs: 30 linked reports of a one-item device (worst case: the attacker links them)
    let memoHits = 0;
    let freshHits = 0;
    const memoTrials = 200;
    for (let t = 0; t < memoTrials; t++) {
      const x = catalog[rng.int(catalog.length)];
      const memo: PermanentMemo = {};
      const r = Rng.derive(seed, 'memo', t);
      const votes = new Map<string, number>();
      const fresh = new Map<string, number>();
      for (let e = 0; e < 30; e++) {
        // a device whose only recent item is x, at ℓ = 1 (the attacker's best case)
        const p1 = { ...ldp, ell: 1 };
        const rep = makeReport([x], p1, memo, () => r.next());
        const repFresh = makeReport([x], p1, {}, () => r.next());
        for (const c of catalog) {
          if (olhBucket(rep.cohort, c, ldp.g) === rep.bucket) votes.set(c, (votes.get(c) ?? 0) + 1);
          if (olhBucket(repFresh.cohort, c, ldp.g) === repFresh.bucket) fresh.set(c, (fresh.get(c) ?? 0) + 1);
        }
      }
      const top = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1] || compareIds(a[0], b[0]))[0]?.[0];
      if (top(votes) === x) memoHits++;
      if (top(fresh) === x) freshHits++;
    }
    row('noise averaging: 30 linked reports of one device (v2 memoized; without memo ' + (freshHits / memoTrials).toFixed(2) + ')', 'top-1 guess of the item', memoHits / memoTrials, 1 / catalog.length);

    // ——— set recovery ———
    const popCount = new Map<string, number>();
    for (const u of users) for (const x of protocol.histories.get(u)!) popCount.set(x.item, (popCount.get(x.item) ?? 0) + 1);
    const byPop = [...catalog].sort((a, b) => (popCount.get(b) ?? 0) - (popCount.get(a) ?? 0) || compareIds(a, b));
    const top10 = byPop.slice(0, 10);
    let v2Prec = 0;
    let basePrec = 0;
    for (const l of e2.log) {
      const own = new Set(agents.get(l.device)!.reportItems());
      // the report's hash support, most popular first, filled up with the most popular other items
      const support = byPop.filter((c) => olhBucket(l.body.report.cohort, c, ldp.g) === l.body.report.bucket).slice(0, 10);
      const guess = [...support, ...top10.filter((c) => !support.includes(c))].slice(0, 10);
      v2Prec += guess.filter((c) => own.has(c)).length / 10;
      basePrec += top10.filter((c) => own.has(c)).length / 10;
    }
    row('set recovery: items of one record with the public catalog', `precision@10 (10 most popular items: ${(basePrec / e2.log.length).toFixed(3)})`, v2Prec / e2.log.length, basePrec / e2.log.length);

    // ——— quality: every user ranked, off vs the epoch-2 release ———
    const cases = protocol.cases;
    const offN: number[] = [];
    const v2N: number[] = [];
    done = 0;
    for (const c of cases) {
      progress('quality (off, contribute)', ++done, cases.length);
      const a = agents.get(c.user);
      if (!a) continue;
      await a.useRelease(undefined);
      offN.push(ndcgAt(rankOf((await a.recommend(c.candidates, { now: c.test.at })).map((r) => r.id), c.test.item), 10));
      await a.useRelease(release2);
      v2N.push(ndcgAt(rankOf((await a.recommend(c.candidates, { now: c.test.at })).map((r) => r.id), c.test.item), 10));
    }
    const diff = v2N.map((x, i) => x - offN[i]);
    const m = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
    return {
      dataset: dataset.name,
      users: users.length,
      devicesSharing: sharing.length,
      embedderId: items.embedderId,
      seed,
      ldp,
      rows,
      quality: [
        { level: 'off', protocol: '—', epsilon: '0', ndcg10: m(offN) },
        { level: 'contribute', protocol: 'v2', epsilon: `${ldp.epsilon.toFixed(2)} per epoch (δ = 0)`, ndcg10: m(v2N) },
      ],
      pairedDiff: { mean: m(diff), ci: bootstrapCI(diff, { seed }) },
      v2Release: { communities: release2.communities.length, reports: release2.reports },
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    await bench.dispose();
  }
}

const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '—');

/** The report as markdown (what the CLI prints). */
export function formatAttacks(r: AttackReport): string {
  const out = [
    `Dataset ${r.dataset}: ${r.users} devices (${r.devicesSharing} report in epoch 1; all report in epoch 2), embedder ${r.embedderId}, seed ${r.seed}.`,
    `v2 defaults: ${r.ldp.mechanism}, ε = ${r.ldp.epsilon.toFixed(3)} per shopper per epoch (permanent ${r.ldp.epsPermanent}, instantaneous ${r.ldp.epsInstant}), δ = ${r.ldp.delta}, g = ${r.ldp.g}, ℓ = ${r.ldp.ell}, ${r.ldp.cohorts} cohorts; release of epoch 2: ${r.v2Release.reports} reports, ${r.v2Release.communities} communities.`,
    '',
    `| attack | measure | before (v1; frozen: ${V1_FROZEN.dataset} at commit ${V1_FROZEN.commit}, not this run) | after (v2) | chance |`,
    '|---|---|---:|---:|---:|',
    ...r.rows.map((x) => `| ${x.attack} | ${x.measure} | ${f3(x.v1)} | ${f3(x.v2)} | ${f3(x.chance)} |`),
    '',
    '| level | protocol | ε per shopper per epoch | NDCG@10 |',
    '|---|---|---|---:|',
    ...r.quality.map((q) => `| ${q.level} | ${q.protocol} | ${q.epsilon} | ${f3(q.ndcg10)} |`),
    '',
    `Paired NDCG@10 difference contribute − off: ${r.pairedDiff.mean.toFixed(4)}, 95% bootstrap interval [${r.pairedDiff.ci[0].toFixed(4)}, ${r.pairedDiff.ci[1].toFixed(4)}].`,
    `Wall time: ${r.seconds.toFixed(1)} s.`,
  ];
  return out.join('\n');
}

/** CLI: `npm run bench:privacy -- --data DIR [--trials N] [--json FILE]`. */
export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { data: { type: 'string' }, format: { type: 'string', default: 'movielens' }, seed: { type: 'string', default: String(DEFAULT_SEED) }, trials: { type: 'string', default: '100' }, embedder: { type: 'string', default: 'use-lite' }, json: { type: 'string' } },
    strict: true,
  });
  const data = values.data ?? process.env.ATOMEM_ML100K ?? '../shared/data/ml-100k';
  const dataset = loadDataset(values.format as DatasetFormat, data);
  let lastLabel = '';
  const report = await measureAttacks({
    dataset,
    seed: Number(values.seed),
    trials: Number(values.trials),
    embedder: values.embedder as 'use-lite' | 'hashing',
    onProgress: (label, d, t) => {
      if (label !== lastLabel) process.stderr.write(`${label} (${t})\n`);
      lastLabel = label;
      void d;
    },
  });
  process.stdout.write(`${formatAttacks(report)}\n`);
  if (values.json) writeFileSync(values.json, JSON.stringify({ command: `npm run bench:privacy -- ${argv.join(' ')}`, ...report }, null, 2) + '\n');
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    },
  );
}
