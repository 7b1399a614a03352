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
 *
 * Device-side attacks ({@link measureDeviceAttacks}, printed first; `--device-only` for them
 * alone, no dataset needed): issuance-to-report linkage by timing from the attester's and the
 * index's joint view, Sybil token farming against the reference attester, lifetime ε by the
 * device's ledger at 30 / 365 days, memo-loss averaging under the ledger, and in Chromium ETag
 * tracking and socket reuse — each beside a baseline measured in the same run. With a dataset,
 * also poisoning ({@link poisoningRows}: bench:poisoning's run on the same data and seed).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import {
  DAY_MS,
  DEFAULT_LDP,
  MemoryAgent,
  ReportHistogram,
  WIRE_INIT,
  blindTokenRequest,
  buildRelease,
  estimateCounts,
  makeReport,
  planEpoch,
  privacyBudget,
  randomMomentIn,
  refusal,
  spentEpsilon,
  subsampledEpsilon,
  type ItemVectors,
  type LedgerEntry,
  type PermanentMemo,
  type PrivacyBudget,
} from 'atomem/engine';
import { Attester, PrivacyPassIssuer, generateIssuerKey, issueInProcess } from 'atomem-index';
import { DEFAULT_EPOCH_MS, olhBucket, type LdpParams } from 'atomem/protocol';
import { compareIds, loadDataset } from './datasets.js';
import { bootstrapCI, ndcgAt, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { catalogVectors } from './vector-cache.js';
import { idGenerator, negativeSampler, Rng } from './rng.js';
import type { Dataset, DatasetFormat } from './types.js';
import type { Interaction } from 'atomem/engine';
import { itemSpaceOf, openBenchService, runEpoch, type LoggedReport } from './v2-epoch.js';
import { runPoisoning, type PoisoningResult } from './poisoning.js';

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
    const e1 = await runEpoch({
      space,
      devices: v2Devices(sharing),
      epoch: 1,
      seed,
      service: bench,
      onProgress: (d, t) => progress('v2 reports (epoch 1)', d, t),
    });
    done = 0;
    for (const u of users) {
      progress('training agents (epoch 2)', ++done, users.length);
      const h = protocol.histories.get(u)!;
      const agent = agents.get(u)!;
      clocks.get(u)!.at = h[h.length - 1].at;
      await agent.train(splits.get(u)!.second, negativeSampler(seed, `${u}/2`, catalog, new Set(h.map((i) => i.item))));
    }
    const e2 = await runEpoch({
      space,
      devices: v2Devices(users),
      epoch: 2,
      seed,
      service: bench,
      onProgress: (d, t) => progress('v2 reports (epoch 2)', d, t),
    });
    const release2 = e2.release;
    if (!release2) throw new Error('v2: epoch 2 published no release (too few reports for minReports)');
    const ldp = bench.service.v2!.ldp;
    const rows: AttackRow[] = [];

    const v1Of = (attack: string): number => V1_FROZEN.figures[attack] ?? NaN;
    // ——— linkage ———
    // one report per device per epoch; the attacker scores pairs by cohort / bucket and arrival time
    const r1 = new Map(e1.log.map((l) => [l.device, l]));
    const r2s = e2.log.filter((l) => r1.has(l.device));
    const v2Score = (a: LoggedReport, b: LoggedReport) =>
      (a.body.report.cohort === b.body.report.cohort ? 1 + (a.body.report.bucket === b.body.report.bucket ? 1 : 0) : 0) -
      Math.abs(((a.at % DEFAULT_EPOCH_MS) - (b.at % DEFAULT_EPOCH_MS)) / DEFAULT_EPOCH_MS) * 1e-3;
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
    const v2Stored = auc(
      v2Pos.map(() => 0),
      v2Neg.map(() => 0),
    );
    const row = (attack: string, measure: string, v2: number, chance: number) => rows.push({ attack, measure, v1: v1Of(attack), v2, chance });
    row('linkage of two records of one shopper (stored data)', "AUC (v1: cosine of a memory's two versions)", v2Stored, 0.5);
    row('linkage of two records of one shopper (request log)', 'AUC (v1: same connection; v2: cohort, bucket, time)', v2Link, 0.5);

    // ——— n−1 ———
    // the attacker's own two reports on an item of the victim; it cannot know the others' noise.
    // World 1: the victim reports; world 0: it does not. Each world redraws every other device's randomization.
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
      return buildRelease({
        epoch: 2,
        epochMs: bench.service.v2!.epochMs,
        space,
        communities: bench.service.v2!.communities(),
        hist,
        ldp,
        minContributors: release2.minContributors,
      });
    })();
    const estM = new Map(Object.entries(memberRelease.popularity));
    void est2;
    const miaV2 = (u: string) =>
      agents
        .get(u)!
        .reportItems()
        .reduce((s, it) => s + (estM.get(it) ?? 0), 0);
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
    row(
      `noise averaging: 30 linked reports of one device (v2 memoized; without memo ${(freshHits / memoTrials).toFixed(2)})`,
      'top-1 guess of the item',
      memoHits / memoTrials,
      1 / catalog.length,
    );

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
    row(
      'set recovery: items of one record with the public catalog',
      `precision@10 (10 most popular items: ${(basePrec / e2.log.length).toFixed(3)})`,
      v2Prec / e2.log.length,
      basePrec / e2.log.length,
    );

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
      offN.push(
        ndcgAt(
          rankOf(
            (await a.recommend(c.candidates, { now: c.test.at })).map((r) => r.id),
            c.test.item,
          ),
          10,
        ),
      );
      await a.useRelease(release2);
      v2N.push(
        ndcgAt(
          rankOf(
            (await a.recommend(c.candidates, { now: c.test.at })).map((r) => r.id),
            c.test.item,
          ),
          10,
        ),
      );
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

// ———————————————————————— device-side attacks (no dataset needed) ————————————————————————

/** One device-side attack: measured figure, the baseline measured in the same run, chance and target. */
export interface DeviceAttackRow {
  attack: string;
  measure: string;
  /** The shipped device / attester. */
  measured: number;
  /** The baseline of the same run (named in `baselineName`). */
  baseline: number;
  baselineName: string;
  chance: number;
  /** The target (NaN: none stated; the row is descriptive). */
  target: number;
  /** `≤` or `≥`: which side of the target passes. */
  pass: '≤' | '≥';
}

export interface DeviceAttackOptions {
  seed?: number;
  /** Devices per epoch in the linkage simulation. Default 2000. */
  devices?: number;
  /** Requests of the Sybil. Default 300. */
  sybilRequests?: number;
  /** Shoppers of the memo-loss attack. Default 30. */
  memoTrials?: number;
  /** Run the Chromium rows (ETag, socket). Default true; needs `/usr/bin/chromium` (or CHROMIUM_PATH). */
  chromium?: boolean;
  onProgress?: (label: string, done: number, total: number) => void;
}

/**
 * Issuance-to-report linkage from the attester's and the index's joint view (both run by the
 * shop): the attester logs (account, issuance time), the index logs report arrival times. Every
 * device visits once per epoch; `habit` = 0 draws the first visit of each epoch independently
 * (uniform over the first 90 % of the epoch), `habit` > 0 keeps a device's time of day (its
 * habitual phase ± `habit` of an epoch, Gaussian). Schedules: the shipped one (sync/schedule.ts:
 * token for the next epoch at a random moment of this one, report at another random moment) and
 * the removed one (token fetched 34–83 ms before the report). The attacker scores a pair
 * (issuance, report) by closeness of report time to issuance time + 58 ms (the removed
 * schedule's gap) and, for the shipped one, by closeness of their times of day (what a habit
 * leaks); AUC of true pairs vs random pairs, and the hit rate of the best-scored issuance for
 * each report vs chance 1/N.
 *
 * `relayFlushMs`: reports go through a batching Oblivious HTTP relay (`atomem-relay`) that
 * forwards what it holds at each multiple of `relayFlushMs`, shuffled, 4 at a time; the index's
 * arrival time of a report is then its flush moment plus its place in the shuffled batch
 * (`relayGapMs` per request, default 2 ms). The devices' draws are the same as without the
 * relay (same seed → same visits, issuances and sending times): a paired comparison.
 *
 * `buildMs` [min, max]: a Prio3 upload leaves the device this long after its random moment
 * (sharding and sealing over the catalog, uniform per report, from a stream of its own so the
 * other draws stay paired); the leader sees the upload's arrival (directly, or the relay's flush).
 */
export function linkageByTiming(o: {
  seed: number;
  devices: number;
  habit: number;
  schedule: 'shipped' | 'removed';
  epochMs?: number;
  relayFlushMs?: number;
  relayGapMs?: number;
  buildMs?: readonly [number, number];
}): {
  auc: number;
  hitRate: number;
  chance: number;
} {
  const epochMs = o.epochMs ?? DEFAULT_EPOCH_MS;
  const e = 1000;
  const rng = Rng.derive(o.seed, 'linkage', o.schedule, o.habit);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
  const visit = (epoch: number, phase: number) => {
    const p = o.habit > 0 ? Math.min(0.9, Math.max(0, phase + o.habit * gauss())) : rng.next() * 0.9;
    return epoch * epochMs + p * epochMs;
  };
  const issued: number[] = [];
  const reported: number[] = [];
  for (let d = 0; d < o.devices; d++) {
    const phase = rng.next() * 0.9;
    if (o.schedule === 'shipped') {
      const v0 = visit(e, phase);
      issued.push(v0 + planEpoch({ now: v0, epochMs, held: [], random: () => rng.next() }).fetchToken!.delay);
      const v1 = visit(e + 1, phase);
      reported.push(v1 + planEpoch({ now: v1, epochMs, held: [e + 1, e + 2], random: () => rng.next() }).report!.delay);
    } else {
      const v1 = visit(e + 1, phase);
      const r = v1 + randomMomentIn(v1, e + 1, epochMs, () => rng.next());
      reported.push(r);
      issued.push(r - (34 + rng.next() * 49));
    }
  }
  if (o.buildMs !== undefined) {
    const [lo, hi] = o.buildMs;
    if (!(lo >= 0 && hi >= lo)) throw new RangeError(`linkageByTiming: buildMs must be [min, max] with 0 ≤ min ≤ max, got [${lo}, ${hi}]`);
    const build = Rng.derive(o.seed, 'linkage-build', o.schedule, o.habit);
    for (let d = 0; d < o.devices; d++) reported[d] += lo + build.next() * (hi - lo);
  }
  if (o.relayFlushMs !== undefined) {
    const flush = o.relayFlushMs;
    const shuffle = Rng.derive(o.seed, 'linkage-relay', o.schedule, o.habit, flush);
    const batches = new Map<number, number[]>();
    for (let d = 0; d < o.devices; d++) {
      const at = (Math.floor(reported[d] / flush) + 1) * flush;
      batches.set(at, [...(batches.get(at) ?? []), d]);
    }
    for (const [at, batch] of batches) {
      for (let i = batch.length - 1; i > 0; i--) {
        const j = shuffle.int(i + 1);
        [batch[i], batch[j]] = [batch[j], batch[i]];
      }
      batch.forEach((d, place) => {
        reported[d] = at + Math.floor(place / 4) * (o.relayGapMs ?? 2);
      });
    }
  }
  const phaseOf = (t: number) => (t % epochMs) / epochMs;
  const score = (i: number, r: number) =>
    o.schedule === 'removed' ? -Math.abs(reported[r] - issued[i] - 58.5) : -Math.abs(phaseOf(reported[r]) - phaseOf(issued[i]));
  const pos: number[] = [];
  const neg: number[] = [];
  let hits = 0;
  for (let r = 0; r < o.devices; r++) {
    pos.push(score(r, r));
    let other = rng.int(o.devices - 1);
    if (other >= r) other++;
    neg.push(score(other, r));
    let best = -Infinity;
    let arg = -1;
    let ties = 0;
    for (let i = 0; i < o.devices; i++) {
      const s = score(i, r);
      if (s > best) (best = s), (arg = i), (ties = 1);
      else if (s === best && rng.next() < 1 / ++ties) arg = i;
    }
    if (arg === r) hits++;
  }
  return { auc: auc(pos, neg), hitRate: hits / o.devices, chance: 1 / o.devices };
}

/**
 * Memo-loss averaging: a shopper with 10 items loses the memoized randomization before every
 * report (erase(), a new device or a private window: the worst case) and the attacker links all
 * its reports of a year; it guesses the 10 items with the most votes (report's hash support).
 * Reports in the year: `reports`. Returns the share of the shopper's items among the guesses.
 */
export function memoLossRecovery(o: { seed: number; trials: number; reports: number; catalogSize: number; ldp: LdpParams }): number {
  const catalog = Array.from({ length: o.catalogSize }, (_, i) => `item-${i}`);
  let found = 0;
  for (let t = 0; t < o.trials; t++) {
    const r = Rng.derive(o.seed, 'memo-loss', t);
    const own = r.sampleWithoutReplacement(catalog, 10);
    const votes = new Float64Array(catalog.length);
    for (let k = 0; k < o.reports; k++) {
      const rep = makeReport(own, o.ldp, {}, () => r.next());
      for (let c = 0; c < catalog.length; c++) if (olhBucket(rep.cohort, catalog[c], o.ldp.g) === rep.bucket) votes[c]++;
    }
    const order = catalog.map((_, i) => i).sort((a, b) => votes[b] - votes[a] || a - b);
    const guess = new Set(order.slice(0, 10).map((i) => catalog[i]));
    found += own.filter((x) => guess.has(x)).length / 10;
  }
  return found / o.trials;
}

/** ε charged by the ledger over `days` daily epochs of a device that contributes every day. */
export function ledgerEpsilon(o: { days: number; epsilon: number; q: number; budget?: Partial<PrivacyBudget> }): { spent: number; reports: number } {
  const budget = privacyBudget({ ...o.budget, q: o.q });
  const charge = subsampledEpsilon(o.epsilon, o.q);
  const entries: LedgerEntry[] = [];
  const t0 = 1000 * DAY_MS;
  let reports = 0;
  for (let d = 0; d < o.days; d++) {
    const now = t0 + d * DAY_MS + DAY_MS / 2;
    if (refusal(entries, 1000 + d, charge, now, budget) !== undefined) continue;
    entries.push({ at: now, epoch: 1000 + d, epsilon: charge, q: o.q, sent: true });
    reports++;
  }
  return { spent: spentEpsilon(entries, t0 + o.days * DAY_MS, budget.windowMs), reports };
}

/** Sybil token farming against the reference attester (a real Privacy Pass issuer behind it). */
async function sybil(o: {
  seed: number;
  requests: number;
  onProgress: (d: number, t: number) => void;
}): Promise<{ account: number; anonymous: number; pool: number; poolSize: number; cookieKeyed: number }> {
  const issuer = await PrivacyPassIssuer.load(await generateIssuerKey(), 'bench-attester');
  const key = issuer.key();
  const epoch = 7;
  const reqs: string[] = [];
  for (let i = 0; i < o.requests; i++) {
    o.onProgress(i + 1, o.requests);
    reqs.push((await blindTokenRequest(key, epoch)).request);
  }
  const farm = async (a: Attester, accountOf: (i: number) => string | undefined) => {
    const got = await Promise.allSettled(reqs.map((request, i) => a.attest(accountOf(i), { v: 2, epoch, request })));
    return got.filter((g) => g.status === 'fulfilled').length;
  };
  const make = (extra: Partial<ConstructorParameters<typeof Attester>[0]> = {}) =>
    new Attester({ issue: issueInProcess(issuer), epoch: () => epoch, ...extra });
  const poolSize = 50;
  return {
    account: await farm(make(), () => 'sybil-account'),
    anonymous: await farm(make(), () => undefined),
    pool: await farm(make({ anonymousPerEpoch: poolSize }), () => undefined),
    poolSize,
    // baseline: an attester keyed on a cookie it (or the page) mints: every dropped cookie is a new "account"
    cookieKeyed: await farm(make(), (i) => `cookie-${o.seed}-${i}`),
  };
}

/**
 * ETag tracking and socket reuse in real Chromium: a server plants an ETag and a Last-Modified
 * date on every answer (`private, max-age=0, must-revalidate`, the strongest invitation to
 * revalidate); the page fetches the release 9 times with the device's options ({@link WIRE_INIT})
 * and, as the baseline, with `cache: 'default'`. Then the socket: an identified token request
 * (same-origin credentials) to an attester that closes its connection (the reference attester)
 * or keeps it alive (baseline), followed by a report with the device's options.
 */
async function chromiumRows(): Promise<{
  etagShipped: number;
  etagDefault: number;
  fetches: number;
  socketShipped: number;
  socketKeepAlive: number;
  trials: number;
}> {
  const { createServer } = await import('node:http');
  const { chromium } = await import('playwright');
  const seen: { path: string; inm: boolean; port: number }[] = [];
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    seen.push({ path, inm: req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined, port: req.socket.remotePort ?? -1 });
    if (path === '/') return res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>bench</title>');
    if (path.startsWith('/release')) {
      if (req.headers['if-none-match'] === '"planted-42"') return res.writeHead(304, { etag: '"planted-42"' }).end();
      return res
        .writeHead(200, {
          'content-type': 'application/json',
          etag: '"planted-42"',
          'last-modified': 'Wed, 01 Jan 2025 00:00:00 GMT',
          'cache-control': 'private, max-age=0, must-revalidate',
        })
        .end('{"epoch":1}');
    }
    if (path === '/attest-close') return res.writeHead(200, { 'content-type': 'application/json', connection: 'close', 'cache-control': 'no-store' }).end('{}');
    if (path === '/attest-keepalive') return res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end('{}');
    if (path === '/report') return res.writeHead(202, { 'content-type': 'application/json', connection: 'close' }).end('{}');
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
  try {
    const fetches = 9;
    const trials = 10;
    const etag = async (init: RequestInit, tag: string) => {
      const ctx = await browser.newContext();
      const page = await ctx.newPage();
      await page.goto(`http://127.0.0.1:${port}/`);
      await page.evaluate(
        async ({ init, n, tag }) => {
          for (let i = 0; i < n; i++) await (await fetch(`/release-${tag}`, init)).text();
        },
        { init: init as Record<string, unknown>, n: fetches, tag },
      );
      await ctx.close();
      return seen.filter((s) => s.path === `/release-${tag}` && s.inm).length;
    };
    const etagShipped = await etag({ ...WIRE_INIT }, 'shipped');
    const etagDefault = await etag({ ...WIRE_INIT, cache: 'default' }, 'default');
    const socket = async (attest: string) => {
      let shared = 0;
      for (let t = 0; t < trials; t++) {
        const ctx = await browser.newContext();
        const page = await ctx.newPage();
        await page.goto(`http://127.0.0.1:${port}/`);
        const from = seen.length;
        await page.evaluate(
          async ({ attest, init }) => {
            await (await fetch(attest, { method: 'POST', credentials: 'same-origin', cache: 'no-store', body: '{}' })).text();
            await (await fetch('/report', { ...init, method: 'POST', body: '{}' })).text();
          },
          { attest, init: { ...WIRE_INIT } as Record<string, unknown> },
        );
        const mine = seen.slice(from);
        const a = mine.find((s) => s.path === attest)!;
        const r = mine.find((s) => s.path === '/report')!;
        if (a.port === r.port) shared++;
        await ctx.close();
      }
      return shared / trials;
    };
    return { etagShipped, etagDefault, fetches, socketShipped: await socket('/attest-close'), socketKeepAlive: await socket('/attest-keepalive'), trials };
  } finally {
    await browser.close();
    server.close();
  }
}

/** Every device-side attack (see each function), deterministic for a seed (the Chromium rows are counts of requests). */
export async function measureDeviceAttacks(
  opts: DeviceAttackOptions = {},
): Promise<{ seed: number; devices: number; ldp: LdpParams; rows: DeviceAttackRow[] }> {
  const seed = opts.seed ?? DEFAULT_SEED;
  const n = opts.devices ?? 2000;
  const progress = opts.onProgress ?? (() => {});
  const ldp = DEFAULT_LDP;
  const rows: DeviceAttackRow[] = [];
  const row = (r: DeviceAttackRow) => rows.push(r);

  progress('linkage (issuance ↔ report)', 0, 5);
  const shippedIndep = linkageByTiming({ seed, devices: n, habit: 0, schedule: 'shipped' });
  const removedIndep = linkageByTiming({ seed, devices: n, habit: 0, schedule: 'removed' });
  progress('linkage (issuance ↔ report)', 2, 4);
  const shippedHabit = linkageByTiming({ seed, devices: n, habit: 0.02, schedule: 'shipped' });
  const removedHabit = linkageByTiming({ seed, devices: n, habit: 0.02, schedule: 'removed' });
  progress('linkage (issuance ↔ report)', 4, 5);
  const relayHabit = linkageByTiming({ seed, devices: n, habit: 0.02, schedule: 'shipped', relayFlushMs: DEFAULT_EPOCH_MS });
  progress('linkage (issuance ↔ report)', 5, 5);
  const rem = 'removed schedule (token 34–83 ms before the report)';
  row({
    attack: `issuance-to-report linkage, ${n} devices/epoch, independent visits`,
    measure: 'AUC true vs random pair',
    measured: shippedIndep.auc,
    baseline: removedIndep.auc,
    baselineName: rem,
    chance: 0.5,
    target: 0.55,
    pass: '≤',
  });
  row({
    attack: `issuance-to-report linkage, ${n} devices/epoch, independent visits`,
    measure: 'hit rate of the best-scored issuance',
    measured: shippedIndep.hitRate,
    baseline: removedIndep.hitRate,
    baselineName: rem,
    chance: shippedIndep.chance,
    target: 2 * shippedIndep.chance,
    pass: '≤',
  });
  row({
    attack: `issuance-to-report linkage, ${n} devices/epoch, habitual visits (same time of day ± 2 % of the epoch)`,
    measure: 'AUC true vs random pair',
    measured: shippedHabit.auc,
    baseline: removedHabit.auc,
    baselineName: rem,
    chance: 0.5,
    target: 0.55,
    pass: '≤',
  });
  row({
    attack: `issuance-to-report linkage, ${n} devices/epoch, habitual visits (same time of day ± 2 % of the epoch)`,
    measure: 'hit rate of the best-scored issuance',
    measured: shippedHabit.hitRate,
    baseline: removedHabit.hitRate,
    baselineName: rem,
    chance: shippedHabit.chance,
    target: 2 * shippedHabit.chance,
    pass: '≤',
  });

  const direct = 'the same devices, reports sent to the index directly';
  row({
    attack: `issuance-to-report linkage, ${n} devices/epoch, habitual visits, reports through a batching relay (flush at each epoch's end)`,
    measure: 'AUC true vs random pair',
    measured: relayHabit.auc,
    baseline: shippedHabit.auc,
    baselineName: direct,
    chance: 0.5,
    target: 0.55,
    pass: '≤',
  });
  row({
    attack: `issuance-to-report linkage, ${n} devices/epoch, habitual visits, reports through a batching relay (flush at each epoch's end)`,
    measure: 'hit rate of the best-scored issuance',
    measured: relayHabit.hitRate,
    baseline: shippedHabit.hitRate,
    baselineName: direct,
    chance: relayHabit.chance,
    target: 2 * relayHabit.chance,
    pass: '≤',
  });

  // Prio3 uploads: the attester sees the token fetches, the leader the uploads' arrivals (each
  // upload leaves the device after sharding and sealing: 0.3–3 s), directly or through the relay
  progress('linkage (issuance ↔ Prio3 upload)', 0, 4);
  const build = [300, 3000] as const;
  const prio3 = (habit: number, relayFlushMs?: number) => linkageByTiming({ seed, devices: n, habit, schedule: 'shipped', buildMs: build, relayFlushMs });
  const prio3Cases = [
    { habit: 0, name: 'independent visits' },
    { habit: 0.02, name: 'habitual visits (same time of day ± 2 % of the epoch)' },
  ];
  prio3Cases.forEach(({ habit, name }, k) => {
    const relayed = prio3(habit, DEFAULT_EPOCH_MS);
    const leader = prio3(habit);
    progress('linkage (issuance ↔ Prio3 upload)', 2 * k + 2, 4);
    const direct = 'the same devices, uploads sent to the leader directly';
    const attack = `Prio3 upload-timing linkage: attester's token fetches vs the leader's upload arrivals, ${n} devices/epoch, ${name}, uploads through a batching relay (flush at each epoch's end)`;
    row({
      attack,
      measure: 'AUC true vs random pair',
      measured: relayed.auc,
      baseline: leader.auc,
      baselineName: direct,
      chance: 0.5,
      target: 0.55,
      pass: '≤',
    });
    row({
      attack,
      measure: 'hit rate of the best-scored issuance',
      measured: relayed.hitRate,
      baseline: leader.hitRate,
      baselineName: direct,
      chance: relayed.chance,
      target: 2 * relayed.chance,
      pass: '≤',
    });
  });

  const requests = opts.sybilRequests ?? 300;
  const s = await sybil({ seed, requests, onProgress: (d, t) => progress('Sybil token farming (blinding requests)', d, t) });
  const cookie = 'attester keyed on a cookie the client can drop';
  row({
    attack: `Sybil token farming: ${requests} requests from one signed-in account, one epoch`,
    measure: 'tokens issued',
    measured: s.account,
    baseline: s.cookieKeyed,
    baselineName: cookie,
    chance: NaN,
    target: 1,
    pass: '≤',
  });
  row({
    attack: `Sybil token farming: ${requests} requests without an account (cookie dropped), one epoch`,
    measure: 'tokens issued',
    measured: s.anonymous,
    baseline: s.cookieKeyed,
    baselineName: cookie,
    chance: NaN,
    target: 0,
    pass: '≤',
  });
  row({
    attack: `Sybil token farming: ${requests} anonymous requests, shop opened a pool of ${s.poolSize}`,
    measure: 'tokens issued',
    measured: s.pool,
    baseline: s.cookieKeyed,
    baselineName: cookie,
    chance: NaN,
    target: s.poolSize,
    pass: '≤',
  });

  progress('lifetime ε by the ledger', 1, 1);
  const noLedger = (days: number) => days * ldp.epsilon;
  for (const days of [30, 365]) {
    const l = ledgerEpsilon({ days, epsilon: ldp.epsilon, q: 1 });
    row({
      attack: `lifetime ε of a shopper contributing daily for ${days} days (q = 1; ${l.reports} reports)`,
      measure: 'ε by the ledger (basic composition)',
      measured: l.spent,
      baseline: noLedger(days),
      baselineName: 'no ledger (ε per epoch, composed)',
      chance: NaN,
      target: 10,
      pass: '≤',
    });
  }
  const lq = ledgerEpsilon({ days: 365, epsilon: ldp.epsilon, q: 0.1 });
  row({
    attack: `lifetime ε, 365 days, q = 0.1 (charged ln(1 + q(e^ε − 1)) = ${subsampledEpsilon(ldp.epsilon, 0.1).toFixed(2)} per epoch; ${lq.reports} lotteries)`,
    measure: 'ε by the ledger',
    measured: lq.spent,
    baseline: noLedger(365),
    baselineName: 'no ledger',
    chance: NaN,
    target: 10,
    pass: '≤',
  });

  // Prio3 reports: the ledger charges the release's central ε per report (default 1, either aggregator's noise alone)
  const prio3Epsilon = 1;
  for (const days of [30, 365]) {
    const l = ledgerEpsilon({ days, epsilon: prio3Epsilon, q: 1 });
    row({
      attack: `lifetime ε of a shopper contributing daily for ${days} days, Prio3 reports (ε = ${prio3Epsilon} per release; ${l.reports} reports)`,
      measure: 'ε by the ledger (basic composition)',
      measured: l.spent,
      baseline: days * prio3Epsilon,
      baselineName: 'no ledger (ε per epoch, composed)',
      chance: NaN,
      target: 10,
      pass: '≤',
    });
  }

  const trials = opts.memoTrials ?? 30;
  const catalogSize = 1682;
  const capped = ledgerEpsilon({ days: 365, epsilon: ldp.epsilon, q: 1 }).reports;
  progress('memo-loss averaging', 0, 2);
  const withLedger = memoLossRecovery({ seed, trials, reports: capped, catalogSize, ldp });
  progress('memo-loss averaging', 1, 2);
  const without = memoLossRecovery({ seed, trials, reports: 365, catalogSize, ldp });
  progress('memo-loss averaging', 2, 2);
  row({
    attack: `memo-loss averaging: memo lost before every report, a year of linked reports (${capped} under the ledger)`,
    measure: 'share of the 10 items among the top-10 votes',
    measured: withLedger,
    baseline: without,
    baselineName: '365 reports (no ledger)',
    chance: 10 / catalogSize,
    target: NaN,
    pass: '≤',
  });

  if (opts.chromium !== false) {
    progress('Chromium: ETag, socket', 0, 1);
    const c = await chromiumRows();
    row({
      attack: `ETag tracking: a planted ETag + Last-Modified on the release, ${c.fetches} fetches (Chromium)`,
      measure: 'fetches that sent it back',
      measured: c.etagShipped,
      baseline: c.etagDefault,
      baselineName: "cache: 'default'",
      chance: 0,
      target: 0,
      pass: '≤',
    });
    row({
      attack: `socket reuse: identified token request then report, ${c.trials} visits (Chromium)`,
      measure: "share of reports on the token request's connection",
      measured: c.socketShipped,
      baseline: c.socketKeepAlive,
      baselineName: 'attester keeps its connection alive (Chromium still keeps credentialed and uncredentialed requests on separate connections)',
      chance: 0,
      target: 0,
      pass: '≤',
    });
  }
  return { seed, devices: n, ldp, rows };
}

const pctText = (x: number) => `${(100 * x).toFixed(1)} %`;

/**
 * Poisoning as rows of the device-side table (from `npm run bench:poisoning`'s run on the same
 * dataset and seed): the share of fake reports that makes the Prio3 release list a never-held
 * item (target ≥ 10 %, or withheld), beside the threshold alone and local DP in the same run;
 * and what the release rule costs the honest release (items listed).
 */
export function poisoningRows(r: PoisoningResult): DeviceAttackRow[] {
  const p = r.prio3;
  return [
    {
      attack: `poisoning: fake reports lifting a never-held item into the release (a community's examples), Prio3 (ε = ${p.epsilon} per release, threshold ${p.threshold} + ${p.minShare} of the reports), ${r.devices} devices`,
      measure: `share of reports needed to be shown (${p.shown.fakes} fakes)`,
      measured: p.shown.share,
      baseline: p.thresholdOnly.share,
      baselineName: `threshold alone: ${p.thresholdOnly.fakes} fakes; local DP: ${pctText(r.ldp.shareForTop10)} (${r.ldp.fakesForTop10} fakes)`,
      chance: NaN,
      target: 0.1,
      pass: '≥',
    },
    {
      attack: `poisoning: forged Prio3 reports (20 at the target) accepted, of ${p.forged}`,
      measure: 'reports accepted',
      measured: p.forgedAccepted,
      baseline: NaN,
      baselineName: 'local DP has no proof to check',
      chance: NaN,
      target: 0,
      pass: '≤',
    },
    {
      attack: `poisoning rule's honest cost: items the honest release lists (largest true count ${p.maxTrueCount}, ${r.items} items)`,
      measure: `items released (count ≥ ${p.minCount})`,
      measured: p.shown.releasedItems,
      baseline: p.thresholdOnly.releasedItems,
      baselineName: `threshold alone (count ≥ ${p.threshold})`,
      chance: NaN,
      target: NaN,
      pass: '≥',
    },
  ];
}

/** The device-side table (markdown). */
export function formatDeviceAttacks(r: { seed: number; rows: DeviceAttackRow[] }, title = 'Device-side attacks'): string {
  const g = (x: number) => (Number.isFinite(x) ? (Number.isInteger(x) ? String(x) : Math.abs(x) < 0.01 ? x.toPrecision(2) : x.toFixed(3)) : '—');
  return [
    `${title} (seed ${r.seed}; deterministic for a seed).`,
    '',
    '| attack | measure | measured (shipped) | baseline (same run) | chance | target | met |',
    '|---|---|---:|---:|---:|---:|:-:|',
    ...r.rows.map(
      (x) =>
        `| ${x.attack} | ${x.measure} | ${g(x.measured)} | ${g(x.baseline)} (${x.baselineName}) | ${g(x.chance)} | ${Number.isFinite(x.target) ? `${x.pass} ${g(x.target)}` : '—'} | ${Number.isFinite(x.target) ? ((x.pass === '≤' ? x.measured <= x.target + 1e-12 : x.measured >= x.target) ? 'yes' : 'no') : '—'} |`,
    ),
  ].join('\n');
}

/** CLI: `npm run bench:privacy -- --data DIR [--trials N] [--json FILE] [--device-only] [--devices N] [--no-chromium]`. */
export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      data: { type: 'string' },
      format: { type: 'string', default: 'movielens' },
      seed: { type: 'string', default: String(DEFAULT_SEED) },
      trials: { type: 'string', default: '100' },
      embedder: { type: 'string', default: 'use-lite' },
      json: { type: 'string' },
      'device-only': { type: 'boolean', default: false },
      devices: { type: 'string', default: '2000' },
      'no-chromium': { type: 'boolean', default: false },
    },
    strict: true,
  });
  const seed = Number(values.seed);
  if (!Number.isInteger(seed)) throw new TypeError(`--seed must be an integer, got ${values.seed}`);
  let lastDevice = '';
  const device = await measureDeviceAttacks({
    seed,
    devices: Number(values.devices),
    chromium: !values['no-chromium'],
    onProgress: (label, _d, t) => {
      if (label !== lastDevice) process.stderr.write(`${label} (${t})\n`);
      lastDevice = label;
    },
  });
  process.stdout.write(`${formatDeviceAttacks(device)}\n\n`);
  if (values['device-only']) {
    if (values.json) writeFileSync(values.json, `${JSON.stringify({ command: `npm run bench:privacy -- ${argv.join(' ')}`, device }, null, 2)}\n`);
    return 0;
  }
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
  // poisoning on the same dataset and seed (bench:poisoning's run; ≈ 0.3 s per Prio3 report)
  let lastPoison = -1;
  const poisoning = await runPoisoning({
    data,
    format: values.format as DatasetFormat,
    seed,
    onProgress: (d, t) => {
      const step = Math.floor((10 * d) / t);
      if (step !== lastPoison) process.stderr.write(`poisoning: Prio3 reports through both aggregators ${d}/${t}\n`);
      lastPoison = step;
    },
  });
  device.rows.push(...poisoningRows(poisoning));
  process.stdout.write(`\n${formatDeviceAttacks({ seed, rows: poisoningRows(poisoning) }, 'Poisoning (bench:poisoning on the same data)')}\n`);
  if (values.json)
    writeFileSync(values.json, `${JSON.stringify({ command: `npm run bench:privacy -- ${argv.join(' ')}`, device, poisoning, ...report }, null, 2)}\n`);
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
