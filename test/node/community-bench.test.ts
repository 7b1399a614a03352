/**
 * Opt-in timing of the in-process index at benchmark scale (skipped unless COMMUNITY_BENCH=1):
 *   COMMUNITY_BENCH=1 npx vitest run --project node test/node/community-bench
 * 943 "users" × 10 memories of 512-d, one batch per user, k1 = 2, tau = 0.5; then one
 * communities() call per user for their own ids. Random vectors (near-zero cosines) and
 * clustered ones (50 centres + noise of several magnitudes) to see the graph's shape.
 */
import { describe, expect, it } from 'vitest';
import { createInProcessIndex, type SharedMemoryUpload } from '../../packages/atomem/src/community/index.js';
import { rng } from '../fixtures/index-wire.js';

const EMB = 'bench@1/float32';
const DIM = 512;
const USERS = 943;
const PER_USER = 10;

function gaussian(r: () => number): number {
  return Math.sqrt(-2 * Math.log(r() + 1e-300)) * Math.cos(2 * Math.PI * r());
}

function unitNorm(v: Float32Array): Float32Array {
  let n = 0;
  for (const x of v) n += x * x;
  n = Math.sqrt(n);
  return v.map((x) => x / n);
}

function unitGauss(r: () => number): Float32Array {
  const v = new Float32Array(DIM);
  let n = 0;
  for (let i = 0; i < DIM; i++) n += (v[i] = gaussian(r)) ** 2;
  n = Math.sqrt(n);
  for (let i = 0; i < DIM; i++) v[i] /= n;
  return v;
}

/**
 * Each user has 1-3 interests (centres); a memory = centre + noise of norm `rho`. With
 * `spread`, centres are grouped under 5 topics (centre = topic + noise of norm `spread`), so
 * centres of one topic are similar — closer to real sentence embeddings than random centres.
 */
function makeUsers(seed: number, centres: number, rho: number | null, spread?: number): SharedMemoryUpload[][] {
  const r = rng(seed);
  const topics = Array.from({ length: 5 }, () => unitGauss(r));
  const cs = Array.from({ length: centres }, (_, i) => {
    if (spread === undefined) return unitGauss(r);
    const t = topics[i % 5];
    const g = unitGauss(r);
    return unitNorm(Float32Array.from(t, (x, j) => x + spread * g[j]));
  });
  let id = 0;
  return Array.from({ length: USERS }, () => {
    const interests = Array.from({ length: 1 + Math.floor(r() * 3) }, () => cs[Math.floor(r() * centres)]);
    return Array.from({ length: PER_USER }, () => {
      let vector: Float32Array;
      if (rho === null) vector = unitGauss(r);
      else {
        const c = interests[Math.floor(r() * interests.length)];
        const noise = unitGauss(r);
        vector = new Float32Array(DIM);
        for (let i = 0; i < DIM; i++) vector[i] = c[i] + rho * noise[i];
      }
      return { id: `m${id++}-${Math.floor(r() * 1e9).toString(36)}`, embedderId: EMB, vector };
    });
  });
}

describe.skipIf(!process.env.COMMUNITY_BENCH)('community index at benchmark scale', () => {
  const only = process.env.COMMUNITY_BENCH_ONLY; // substring filter on scenario names
  const scenarios: [string, number | null, number?][] = [
    ['random 512-d', null],
    ['50 centres, rho 0.5 (intra sim ~0.8)', 0.5],
    ['50 centres, rho 0.8 (intra sim ~0.6)', 0.8],
    ['50 centres, rho 1.0 (intra sim ~0.5)', 1.0],
    ['50 centres, rho 1.2 (intra sim ~0.4)', 1.2],
    // centre-centre sim within a topic ~0.6 / ~0.5; member pairs across centres ~0.4-0.45
    ['5 topics × 10 centres (spread 0.8), rho 0.6', 0.6, 0.8],
    ['5 topics × 10 centres (spread 1.0), rho 0.6', 0.6, 1.0],
    ['5 topics × 10 centres (spread 0.6), rho 0.8', 0.8, 0.6],
  ];
  for (const [name, rho, spread] of scenarios) {
    it.skipIf(only !== undefined && !name.includes(only))(name, () => {
      const users = makeUsers(1, 50, rho, spread);
      const ix = createInProcessIndex({ embedderId: EMB, k1: 2, tau: 0.5 });
      const t0 = performance.now();
      let worst = 0;
      for (const batch of users) {
        const t = performance.now();
        ix.upsertSync(batch);
        worst = Math.max(worst, performance.now() - t);
      }
      const insertMs = performance.now() - t0;
      const afterInsert = ix.stats();
      const t1 = performance.now();
      let views = 0;
      let members = 0;
      for (const batch of users) {
        const vs = ix.communitiesSync(batch.map((m) => m.id));
        views += vs.length;
        for (const v of vs) members += v.members.length;
      }
      const queryMs = performance.now() - t1;
      // upsert of one user's batch again (remove + add), and deletes
      const t2 = performance.now();
      for (const batch of users.slice(0, 100)) ix.upsertSync(batch);
      const reupMs = (performance.now() - t2) / 100;
      const t3 = performance.now();
      for (const batch of users.slice(100, 200)) ix.deleteSync(batch.map((m) => m.id));
      const delMs = (performance.now() - t3) / 100;
      const s = ix.stats();
      console.log(
        [
          `── ${name}`,
          `insert ${USERS * PER_USER} in batches of ${PER_USER}: ${(insertMs / 1000).toFixed(2)} s total, ${(insertMs / USERS).toFixed(2)} ms/batch avg, ${worst.toFixed(1)} ms worst`,
          `communities() for ${USERS} users: ${queryMs.toFixed(0)} ms total (${(queryMs / USERS).toFixed(2)} ms/user), ${views} views, ${(members / Math.max(1, views)).toFixed(0)} member vectors/view`,
          `re-upsert of a 10-batch: ${reupMs.toFixed(2)} ms; delete of a 10-batch: ${delMs.toFixed(2)} ms`,
          `stats after insert: ${JSON.stringify(afterInsert)}`,
          `stats after re-upserting 100 users and deleting 100 others: ${JSON.stringify(s)}`,
        ].join('\n'),
      );
      expect(s.memories).toBe((USERS - 100) * PER_USER);
    }, 600_000);
  }
});
