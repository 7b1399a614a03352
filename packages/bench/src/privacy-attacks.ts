/**
 * `npm run bench:privacy`: the attacks of issue 13 against the shared index, each before
 * (protocol v1, the deprecated service mode, with its service defaults) and after (protocol
 * v2 through the real service with its shipped defaults), in one run, from the server's full
 * view (everything stored plus every request as it arrived), and the quality each protocol
 * buys (NDCG@10 with a paired bootstrap interval against `off`).
 *
 * Population: every user of the dataset trains an agent on their history minus the last
 * `laterEvents` interactions (epoch 1), shares / reports, then trains on those last events
 * (epoch 2: the same device later) and shares / reports again. `holdOut` devices never
 * share: they are the non-members of membership inference.
 *
 * Attacks (see docs/PRIVACY.md for the threat model):
 * - linkage: pairs (record of epoch 1, record of epoch 2); AUC of the attacker's score for
 *   same-device pairs against other-device pairs. v1 from stored vectors (cosine) and from the
 *   request log (batches and the `communities` id lists); v2 from the request log (cohort and
 *   bucket of the reports, arrival times) — v2 stores no per-report row.
 * - n−1: v1: two probes next to a victim's record, then a `communities` query: success when a
 *   released member is the victim's vector. v2: two probe reports on an item of the victim;
 *   can the attacker tell the epoch where the victim reported from one where it did not (AUC)?
 *   Also v2's worst case: an attacker who knows every other report exactly.
 * - membership inference: v1: three copies of a candidate's memory vector, then a query (score:
 *   best member cosine); v2: the release's estimates on the candidate's items. AUC members vs
 *   held-out devices.
 * - noise averaging: v1: 30 re-queries after toggling a probe (fresh Laplace noise per
 *   community version); v2: 30 re-reads of the immutable release, and 30 epochs of linked
 *   reports of a one-item device (memoized permanent randomization).
 * - set recovery: v1: nearest catalog items of each shared vector; v2: the report's hash
 *   support ranked by public popularity; against the 10 most popular items.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { MemoryAgent, ReportHistogram, buildRelease, composedChannel, createInProcessIndex, estimateCounts, makeReport, resolveConfig, tauFor, type CommunityView, type InProcessIndex, type ItemVectors, type SharedIndex, type SharedMemoryUpload, type PermanentMemo } from 'atomem/engine';
import { clusterItems } from 'atomem-index';
import { DEFAULT_EPOCH_MS, olhBucket, type LdpParams, type Release } from 'atomem/protocol';
import { compareIds, loadDataset } from './datasets.js';
import { bootstrapCI, ndcgAt, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { catalogVectors, toWire } from './privacy-leak.js';
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

/** One attack's before / after figures. */
export interface AttackRow {
  attack: string;
  measure: string;
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

function cos(a: Float32Array, b: Float32Array): number {
  let s = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    s += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return s / (Math.sqrt(na * nb) || 1);
}

/**
 * A v1 request as the operator logs it. `connection`: v1 clients keep one connection for a
 * sync's requests (delete old copies → upload new ones → `communities`), so the operator sees
 * which requests came together.
 */
type V1Request = { kind: 'upsert' | 'communities' | 'delete'; connection: string; ids: string[] };

/** The v1 index as the service holds it (int8 wire vectors), with every request logged. */
function loggingIndex(inner: InProcessIndex, log: V1Request[], connection: () => string): SharedIndex {
  return {
    embedderId: inner.embedderId,
    async upsert(batch) {
      // HttpIndex sends up to 256 memories per request
      for (let i = 0; i < batch.length; i += 256) {
        const part = batch.slice(i, i + 256);
        log.push({ kind: 'upsert', connection: connection(), ids: part.map((u) => u.id) });
        inner.upsertSync(part.map((u) => ({ ...u, vector: toWire(u.vector, 0) })));
      }
    },
    async delete(ids) {
      log.push({ kind: 'delete', connection: connection(), ids: [...ids] });
      inner.deleteSync(ids);
    },
    async communities(ids) {
      log.push({ kind: 'communities', connection: connection(), ids: [...ids] });
      return inner.communitiesSync(ids);
    },
  };
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
  const cfg = resolveConfig({ tau: tauFor(items.embedderId) });
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

  // ——— v1: two syncs at level `items` through a logging in-process index with the service's v1 defaults ———
  const v1 = createInProcessIndex({ embedderId: items.embedderId, k1: cfg.k1, tau: cfg.tau, minCommunitySize: 3, itemNoise: 1, seed, maxMembers: 64, memberSelection: 'similar' });
  const log1: V1Request[] = [];
  let current = '';
  let syncNo = 0;
  const wire1 = loggingIndex(v1, log1, () => `${current}#${syncNo}`);
  const uploads = new Map<string, { device: string; epoch: number; vector: Float32Array; items: string[]; memory: string }>();
  const capture = (epoch: number): SharedIndex => ({
    embedderId: wire1.embedderId,
    async upsert(batch: readonly SharedMemoryUpload[]) {
      for (const u of batch) {
        const m = agents.get(current)!.snapshot.memories.find((x) => x.embedding.vector === u.vector);
        uploads.set(u.id, { device: current, epoch, vector: toWire(u.vector, 0), items: m ? m.items : [], memory: m ? m.id : 'profile' });
      }
      return wire1.upsert(batch);
    },
    delete: (ids) => wire1.delete(ids),
    communities: (ids) => wire1.communities(ids),
  });
  // v2 epoch 1 needs the epoch-1 state: run it before the agents train on epoch 2
  const bench = await openBenchService(space, opts.v2);
  try {
    const v2Devices = (list: string[]) => new Map(list.map((u) => [u, agents.get(u)!] as const));
    done = 0;
    syncNo = 1;
    // uploads first, then every device's `communities` request (as the benchmark does; a pull
    // after each upload would keep one copy of a giant community's vectors per version alive)
    for (const u of sharing) {
      progress('v1 sync (epoch 1)', ++done, sharing.length);
      current = u;
      await agents.get(u)!.sync(capture(1), 'items', { pull: false });
    }
    for (const u of sharing) {
      current = u;
      await agents.get(u)!.pullCommunities(capture(1));
    }
    const e1 = await runEpoch({ space, devices: v2Devices(sharing), epoch: 1, seed, service: bench, onProgress: (d, t) => progress('v2 reports (epoch 1)', d, t) });
    done = 0;
    for (const u of users) {
      progress('training agents (epoch 2)', ++done, users.length);
      const h = protocol.histories.get(u)!;
      const agent = agents.get(u)!;
      clocks.get(u)!.at = h[h.length - 1].at;
      await agent.train(splits.get(u)!.second, negativeSampler(seed, `${u}/2`, catalog, new Set(h.map((i) => i.item))));
    }
    done = 0;
    syncNo = 2;
    for (const u of sharing) {
      progress('v1 sync (epoch 2)', ++done, sharing.length);
      current = u;
      await agents.get(u)!.sync(capture(2), 'items', { pull: false });
    }
    for (const u of sharing) {
      current = u;
      await agents.get(u)!.pullCommunities(capture(2));
    }
    const e2 = await runEpoch({ space, devices: v2Devices(users), epoch: 2, seed, service: bench, onProgress: (d, t) => progress('v2 reports (epoch 2)', d, t) });
    const release2 = e2.release;
    if (!release2) throw new Error('v2: epoch 2 published no release (too few reports for minReports)');
    const ldp = bench.service.v2!.ldp;
    const rows: AttackRow[] = [];

    // ——— linkage ———
    const recs1 = [...uploads].filter(([, r]) => r.epoch === 1);
    const recs2 = [...uploads].filter(([, r]) => r.epoch === 2);
    const byDevice1 = new Map<string, string[]>();
    for (const [id, r] of recs1) (byDevice1.get(r.device) ?? byDevice1.set(r.device, []).get(r.device)!).push(id);
    const ids1 = recs1.map(([id]) => id);
    // a record of epoch 2 and the previous version of the same memory (or the profile record),
    // against a record of another device
    const prevVersion = new Map<string, string>();
    for (const [id, r] of recs1) prevVersion.set(`${r.device}\u0000${r.memory}`, id);
    const pairsV1: { a: string; b: string; same: boolean }[] = [];
    for (const [id2, r2] of recs2) {
      const prev = prevVersion.get(`${r2.device}\u0000${r2.memory}`) ?? (byDevice1.get(r2.device)?.length ? byDevice1.get(r2.device)![rng.int(byDevice1.get(r2.device)!.length)] : undefined);
      if (!prev) continue;
      pairsV1.push({ a: prev, b: id2, same: true });
      for (;;) {
        const other = ids1[rng.int(ids1.length)];
        if (uploads.get(other)!.device !== r2.device) {
          pairsV1.push({ a: other, b: id2, same: false });
          break;
        }
      }
    }
    const cosScore = (p: { a: string; b: string }) => cos(uploads.get(p.a)!.vector, uploads.get(p.b)!.vector);
    // request log: two ids are linked when one connection carried both (an upload batch, the
    // deletion of the old copies before the upload of the new ones, a `communities` id list)
    const together = new Map<string, Set<string>>();
    for (const req of log1) for (const id of req.ids) (together.get(id) ?? together.set(id, new Set()).get(id)!).add(req.connection);
    const logScore = (p: { a: string; b: string }) => {
      const A = together.get(p.a);
      const B = together.get(p.b);
      if (!A || !B) return 0;
      for (const x of A) if (B.has(x)) return 1;
      return 0;
    };
    const v1LinkCos = auc(pairsV1.filter((p) => p.same).map(cosScore), pairsV1.filter((p) => !p.same).map(cosScore));
    const v1LinkLog = auc(pairsV1.filter((p) => p.same).map(logScore), pairsV1.filter((p) => !p.same).map(logScore));
    // v2: one report per device per epoch; the attacker scores pairs by cohort / bucket and arrival time
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
    rows.push({ attack: 'linkage of two records of one shopper (stored data)', measure: 'AUC (v1: cosine of a memory\'s two versions)', v1: v1LinkCos, v2: v2Stored, chance: 0.5 });
    rows.push({ attack: 'linkage of two records of one shopper (request log)', measure: 'AUC (v1: same connection; v2: cohort, bucket, time)', v1: v1LinkLog, v2: v2Link, chance: 0.5 });

    // ——— n−1 ———
    let v1Hits = 0;
    const victims = rng.sampleWithoutReplacement(recs2.filter(([id]) => v1.graph.has(id)), Math.min(trials, recs2.length));
    for (const [i, [, rec]] of victims.entries()) {
      progress('n−1 (v1)', i + 1, victims.length);
      const probes = [0, 1].map((k) => {
        const v = new Float32Array(rec.vector);
        const r = Rng.derive(seed, 'probe', i, k);
        // why 0.002: v1 links mutual top-k1 (DECISIONS 39), so a probe must be closer to the
        // victim than the victim's own nearest records (cos ≈ 0.97 here); 0.02 gave cos ≈ 0.95
        for (let d = 0; d < v.length; d++) v[d] += 0.002 * r.normal();
        return { id: `probe-${i}-${k}`, embedderId: items.embedderId, vector: toWire(v, 0) };
      });
      v1.upsertSync(probes);
      const views: CommunityView[] = v1.communitiesSync(probes.map((p) => p.id));
      if (views.some((c) => c.members.some((m) => cos(m, rec.vector) >= 0.999))) v1Hits++;
      v1.deleteSync(probes.map((p) => p.id));
    }
    // v2, the issue's attacker: its own two reports on an item of the victim; it cannot know the others' noise.
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
    rows.push({ attack: 'n−1: probes next to a victim, read the victim back', measure: 'success rate (v1) / AUC victim present vs absent (v2)', v1: v1Hits / Math.max(1, victims.length), v2: auc(nm1Pos, nm1Neg), chance: 0.5 });
    const omniAuc = 0.5 + (omniscientPos - omniscientNeg) / (2 * nm1Trials);
    rows.push({ attack: 'n−1 worst case: attacker knows every other report (v2 bound: ε)', measure: 'AUC item of the victim vs not', v1: NaN, v2: omniAuc, chance: 0.5 });

    // ——— membership inference ———
    const heldList = [...held];
    const members = rng.sampleWithoutReplacement(sharing, Math.min(trials, heldList.length, sharing.length));
    const nonMembers = heldList.slice(0, members.length);
    // v1: three copies of the candidate's strongest shared memory vector (held-out: their strongest memory)
    const candidateVector = (u: string): Float32Array | undefined => {
      const ms = agents.get(u)!.snapshot.memories.filter((m) => m.strength > 0 && m.evidence >= cfg.minShareEvidence).sort((a, b) => b.evidence - a.evidence);
      return ms[0] ? toWire(ms[0].embedding.vector, 0) : undefined;
    };
    const miaV1 = (u: string, i: number): number => {
      const v = candidateVector(u);
      if (!v) return 0;
      const probes = [0, 1, 2].map((k) => ({ id: `mia-${i}-${k}`, embedderId: items.embedderId, vector: v }));
      v1.upsertSync(probes);
      const views = v1.communitiesSync(probes.map((p) => p.id));
      v1.deleteSync(probes.map((p) => p.id));
      let best = -1;
      for (const c of views) for (const m of c.members) best = Math.max(best, cos(m, v));
      return best;
    };
    const miaV1Pos = members.map((u, i) => miaV1(u, i));
    const miaV1Neg = nonMembers.map((u, i) => miaV1(u, i + members.length));
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
    rows.push({ attack: 'membership inference (is this shopper in the index?)', measure: 'AUC members vs held-out', v1: auc(miaV1Pos, miaV1Neg), v2: auc(members.map(miaV2), nonMembers.map(miaV2)), chance: 0.5 });

    // ——— noise averaging across re-queries ———
    // v1: a community's item count, re-queried after toggling a probe (each version redraws the noise)
    let v1Single = 0;
    let v1Avg = 0;
    let v1N = 0;
    const targets = rng.sampleWithoutReplacement(recs2.filter(([id]) => v1.graph.has(id)), Math.min(30, recs2.length));
    for (const [ti, [id, rec]] of targets.entries()) {
      progress('noise averaging (v1)', ti + 1, targets.length);
      const cid = v1.graph.communityOf(id);
      if (cid === undefined || v1.graph.communitySize(cid) < 3) continue;
      const truth = v1.graph.itemCounts(cid);
      const item = rec.items.find((it) => truth?.has(it));
      if (!truth || !item) continue;
      const draws: number[] = [];
      for (let q = 0; q < 30; q++) {
        const probe = { id: `avg-${ti}-${q}`, embedderId: items.embedderId, vector: rec.vector };
        v1.upsertSync([probe]);
        const view = v1.communitiesSync([probe.id])[0];
        v1.deleteSync([probe.id]);
        draws.push(view?.items?.[item] ?? 0);
      }
      const t = truth.get(item)!;
      v1Single += Math.round(draws[0]) === t ? 1 : 0;
      v1Avg += Math.round(draws.reduce((a, b) => a + b, 0) / draws.length) === t ? 1 : 0;
      v1N++;
    }
    // v2: re-reading the release returns the same bytes
    const reread = await Promise.all(Array.from({ length: 30 }, () => bench.service.app.inject({ method: 'GET', url: '/v2/releases/2' })));
    const identical = reread.every((r) => r.body === reread[0].body);
    rows.push({ attack: 'noise averaging: 30 re-queries recover the exact count', measure: 'share of counts recovered exactly (30 queries; 1 query: v1 ' + (v1Single / Math.max(1, v1N)).toFixed(2) + ')', v1: v1Avg / Math.max(1, v1N), v2: identical ? 0 : NaN, chance: 0 });
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
    rows.push({ attack: 'noise averaging: 30 linked reports of one device (v2 memoized; without memo ' + (freshHits / memoTrials).toFixed(2) + ')', measure: 'top-1 guess of the item', v1: NaN, v2: memoHits / memoTrials, chance: 1 / catalog.length });

    // ——— set recovery ———
    const popCount = new Map<string, number>();
    for (const u of users) for (const x of protocol.histories.get(u)!) popCount.set(x.item, (popCount.get(x.item) ?? 0) + 1);
    const byPop = [...catalog].sort((a, b) => (popCount.get(b) ?? 0) - (popCount.get(a) ?? 0) || compareIds(a, b));
    const top10 = byPop.slice(0, 10);
    const catVecs = space.vectors;
    let v1Prec = 0;
    let v1N2 = 0;
    for (const [, r] of recs2) {
      if (r.items.length === 0) continue;
      const scored = catVecs.map((v, i) => ({ i, s: cos(v, r.vector) })).sort((a, b) => b.s - a.s).slice(0, 10);
      const own = new Set(r.items);
      v1Prec += scored.filter((x) => own.has(space.ids[x.i])).length / 10;
      v1N2++;
    }
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
    rows.push({ attack: 'set recovery: items of one record with the public catalog', measure: `precision@10 (10 most popular items: ${(basePrec / e2.log.length).toFixed(3)})`, v1: v1Prec / Math.max(1, v1N2), v2: v2Prec / e2.log.length, chance: basePrec / e2.log.length });

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
    `Dataset ${r.dataset}: ${r.users} devices (${r.devicesSharing} share in v1; all report in v2 epoch 2), embedder ${r.embedderId}, seed ${r.seed}.`,
    `v2 defaults: ${r.ldp.mechanism}, ε = ${r.ldp.epsilon.toFixed(3)} per shopper per epoch (permanent ${r.ldp.epsPermanent}, instantaneous ${r.ldp.epsInstant}), δ = ${r.ldp.delta}, g = ${r.ldp.g}, ℓ = ${r.ldp.ell}, ${r.ldp.cohorts} cohorts; release of epoch 2: ${r.v2Release.reports} reports, ${r.v2Release.communities} communities.`,
    '',
    '| attack | measure | before (v1) | after (v2) | chance |',
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
