/**
 * Exploration (the service's path is packages/atomem-index/src/knn-cells.ts): the item-space kNN graph from a k-means
 * partition instead of HNSW — k-means cells of about `LEAF` items (centroids trained on a sample,
 * `ITERS` rounds; `BRANCH` cells per level), each item a data point in its `OVER` nearest cells
 * and a query in its nearest, and the exact 21 nearest within a cell (usearch `exactSearch` on
 * per-vector-scaled i8 copies) re-ranked by exact f32 cosine, each pair offered to both rows
 * (the service's symmetric candidates). `MODE=tree2`: two levels (√cells top centroids, each item
 * routed through its `BEAM` nearest top cells). Same synthetic catalog as item-space-kinds.ts
 * (clustered unit vectors, n / 200 clusters, noise 0.8; 512-d unless `DIM`); recall@10 against
 * usearch's exact search on 1,000 random items. Command:
 * `BRANCH=200 LEAF=500 OVER=2 node -C atomem-source --import tsx packages/bench/src/item-space-partition.ts 100000`
 * (figures in BENCHMARKS.md, "Item-space clustering at scale").
 */
import usearch, { type BatchMatches } from 'usearch';
import { mulberry32 } from './rng.js';
const n = Number(process.argv[2] ?? 100000),
  dim = Number(process.env.DIM ?? 512);
const L = Number(process.env.LEAF ?? 1000),
  B = Number(process.env.BRANCH ?? 32),
  OVER = Number(process.env.OVER ?? 2),
  ITERS = Number(process.env.ITERS ?? 6);
const u = mulberry32(1);
const gauss = () => Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
const c = Math.max(8, Math.round(n / 200));
const centres = Array.from({ length: c }, () => Float32Array.from({ length: dim }, gauss));
const flat = new Float32Array(n * dim);
for (let i = 0; i < n; i++) {
  const ce = centres[Math.floor(u() * c)];
  let no = 0;
  for (let d = 0; d < dim; d++) {
    const x = ce[d] + 0.8 * gauss();
    flat[i * dim + d] = x;
    no += x * x;
  }
  no = Math.sqrt(no);
  for (let d = 0; d < dim; d++) flat[i * dim + d] /= no;
}
const sample = 1000;
const picks = Array.from({ length: sample }, () => Math.floor(u() * n));
const truth: Set<number>[] = [];
for (let s0 = 0; s0 < sample; s0 += 100) {
  const q = new Float32Array(100 * dim);
  for (let i = 0; i < 100; i++) q.set(flat.subarray(picks[s0 + i] * dim, picks[s0 + i] * dim + dim), i * dim);
  const ex = usearch.exactSearch(flat, q, dim, 11, usearch.MetricKind.Cos) as BatchMatches;
  for (let i = 0; i < 100; i++) {
    const p = picks[s0 + i];
    const s = new Set<number>();
    for (let h = 0; h < 11 && s.size < 10; h++) {
      const k = Number(ex.keys[i * 11 + h]);
      if (k !== p) s.add(k);
    }
    truth.push(s);
  }
}
const cpu = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1e6;
};
const t0 = performance.now();
const c0 = cpu();
// i8 copy, per-vector scaled to the full range
const q8 = new Int8Array(n * dim);
for (let i = 0; i < n; i++) {
  let m = 0;
  for (let d = 0; d < dim; d++) m = Math.max(m, Math.abs(flat[i * dim + d]));
  const s = m > 0 ? 127 / m : 0;
  for (let d = 0; d < dim; d++) q8[i * dim + d] = Math.round(flat[i * dim + d] * s);
}
const gather8 = (ids: Int32Array | number[]) => {
  const o = new Int8Array(ids.length * dim);
  for (let j = 0; j < ids.length; j++) o.set(q8.subarray(ids[j] * dim, ids[j] * dim + dim), j * dim);
  return o;
};
const K = 10;
const nb = new Int32Array(n * K).fill(-1),
  sm = new Float32Array(n * K).fill(-Infinity),
  fill = new Int32Array(n);
function offer(i: number, j: number, s: number) {
  const b = i * K;
  if (fill[i] === K && s <= sm[b + K - 1]) return;
  for (let t = 0; t < fill[i]; t++) if (nb[b + t] === j) return;
  let t = fill[i] < K ? fill[i]++ : K - 1;
  while (t > 0 && sm[b + t - 1] < s) {
    sm[b + t] = sm[b + t - 1];
    nb[b + t] = nb[b + t - 1];
    t--;
  }
  sm[b + t] = s;
  nb[b + t] = j;
}
let distEvals = 0,
  leaves = 0,
  kmeansMs = 0,
  leafMs = 0;
function centroidsOf(ids: Int32Array, cc: number): Int8Array {
  // k-means on a sample (f32 means, i8 for the assignment search)
  const ns = Math.min(ids.length, cc * 40);
  const smp = new Int32Array(ns);
  for (let j = 0; j < ns; j++) smp[j] = ids[Math.floor(u() * ids.length)];
  const cent = new Float32Array(cc * dim);
  for (let j = 0; j < cc; j++) {
    const p0 = smp[Math.floor(u() * ns)];
    cent.set(flat.subarray(p0 * dim, p0 * dim + dim), j * dim);
  }
  const d8 = gather8(smp);
  const c8 = new Int8Array(cc * dim);
  const quant = () => {
    for (let j = 0; j < cc; j++) {
      let m = 0;
      for (let d = 0; d < dim; d++) m = Math.max(m, Math.abs(cent[j * dim + d]));
      const s = m > 0 ? 127 / m : 0;
      for (let d = 0; d < dim; d++) c8[j * dim + d] = Math.round(cent[j * dim + d] * s);
    }
  };
  for (let it = 0; it < ITERS; it++) {
    quant();
    const r = usearch.exactSearch(c8, d8, dim, 1, usearch.MetricKind.Cos, 0) as BatchMatches;
    distEvals += ns * cc;
    cent.fill(0);
    const cnt = new Int32Array(cc);
    for (let j = 0; j < ns; j++) {
      const a = Number(r.keys[j]);
      cnt[a]++;
      const o = smp[j] * dim;
      for (let d = 0; d < dim; d++) cent[a * dim + d] += flat[o + d];
    }
    for (let a = 0; a < cc; a++)
      if (cnt[a] === 0) {
        const p = smp[Math.floor(u() * ns)];
        cent.set(flat.subarray(p * dim, p * dim + dim), a * dim);
      }
  }
  quant();
  return c8;
}
function leafKnn(qids: Int32Array, dids: Int32Array) {
  const t = performance.now();
  const r = usearch.exactSearch(gather8(dids), gather8(qids), dim, Math.min(dids.length, 2 * K + 1), usearch.MetricKind.Cos, 0) as BatchMatches;
  distEvals += qids.length * dids.length;
  const want = Math.min(dids.length, 2 * K + 1);
  for (let a = 0; a < qids.length; a++) {
    const i = qids[a];
    for (let h = 0; h < want; h++) {
      const j = dids[Number(r.keys[a * want + h])];
      if (j === i || j === undefined) continue;
      let s = 0;
      const x = i * dim,
        y = j * dim;
      for (let d = 0; d < dim; d++) s += flat[x + d] * flat[y + d];
      offer(i, j, s);
      offer(j, i, s);
    }
  }
  leafMs += performance.now() - t;
  leaves++;
}
/** Each id's `W` nearest centroids, queried in chunks (usearch's exactSearch holds a queries × dataset matrix: 1M × 2,000 would not fit). */
function nearest(c8: Int8Array, ids: Int32Array, W: number): { keys: BigUint64Array } {
  const keys = new BigUint64Array(ids.length * W);
  const chunk = 50_000;
  for (let a = 0; a < ids.length; a += chunk) {
    const r = usearch.exactSearch(c8, gather8(ids.subarray(a, Math.min(ids.length, a + chunk))), dim, W, usearch.MetricKind.Cos, 0) as BatchMatches;
    keys.set(r.keys, a * W);
  }
  return { keys };
}
function split(ids: Int32Array) {
  if (ids.length <= L) {
    leafKnn(ids, ids);
    return;
  }
  const cc = Math.min(B, Math.ceil(ids.length / L));
  const tk = performance.now();
  const c8 = centroidsOf(ids, cc);
  const W = Math.max(1, Math.min(OVER, cc));
  const r = nearest(c8, ids, W);
  distEvals += ids.length * cc;
  kmeansMs += performance.now() - tk;
  const parts: number[][] = Array.from({ length: cc }, () => []);
  const extra: number[][] = Array.from({ length: cc }, () => []);
  for (let j = 0; j < ids.length; j++) {
    parts[Number(r.keys[W * j])].push(ids[j]);
    for (let w = 1; w < W; w++) extra[Number(r.keys[W * j + w])].push(ids[j]);
  }
  const childrenAreLeaves = ids.length <= L * B;
  for (let a = 0; a < cc; a++) {
    const p = Int32Array.from(parts[a]);
    if (p.length === ids.length) {
      const h = p.length >> 1;
      split(p.subarray(0, h).slice());
      split(p.subarray(h).slice());
      continue;
    }
    if (p.length === 0) continue;
    if (childrenAreLeaves && p.length <= L && OVER > 1) leafKnn(p, Int32Array.from([...parts[a], ...extra[a]]));
    else split(p);
  }
}
const all = new Int32Array(n);
for (let i = 0; i < n; i++) all[i] = i;
if (process.env.MODE === 'tree2') {
  const P = Math.ceil(n / L),
    c1 = Math.ceil(Math.sqrt(P)),
    BEAM = Number(process.env.BEAM ?? 3);
  const tk = performance.now();
  const top8 = centroidsOf(all, c1);
  const rt = usearch.exactSearch(top8, q8, dim, BEAM, usearch.MetricKind.Cos, 0) as BatchMatches;
  distEvals += n * c1;
  const prim: number[][] = Array.from({ length: c1 }, () => []),
    beam: number[][] = Array.from({ length: c1 }, () => []);
  for (let i = 0; i < n; i++) {
    prim[Number(rt.keys[BEAM * i])].push(i);
    for (let w = 0; w < BEAM; w++) beam[Number(rt.keys[BEAM * i + w])].push(i);
  }
  // leaf centroids per top cell, and each item's best OVER leaves over its beam
  const bestD = new Float32Array(n * OVER).fill(Infinity),
    bestL = new Int32Array(n * OVER).fill(-1);
  let leafCount = 0;
  for (let t = 0; t < c1; t++) {
    if (prim[t].length === 0) continue;
    const c2 = Math.max(1, Math.ceil(prim[t].length / L));
    const l8 = c2 === 1 ? null : centroidsOf(Int32Array.from(prim[t]), c2);
    const members = Int32Array.from(beam[t]);
    const W = Math.min(OVER, c2);
    const r = l8 ? (usearch.exactSearch(l8, gather8(members), dim, W, usearch.MetricKind.Cos, 0) as BatchMatches) : null;
    distEvals += members.length * c2;
    for (let a = 0; a < members.length; a++) {
      const i = members[a];
      for (let w = 0; w < W; w++) {
        const leaf = leafCount + (r ? Number(r.keys[W * a + w]) : 0);
        const dd = r ? r.distances[W * a + w] : 0;
        // insert into the item's best-OVER list
        let pos = OVER;
        while (pos > 0 && bestD[i * OVER + pos - 1] > dd) pos--;
        if (pos >= OVER) continue;
        for (let z = OVER - 1; z > pos; z--) {
          bestD[i * OVER + z] = bestD[i * OVER + z - 1];
          bestL[i * OVER + z] = bestL[i * OVER + z - 1];
        }
        bestD[i * OVER + pos] = dd;
        bestL[i * OVER + pos] = leaf;
      }
    }
    leafCount += c2;
  }
  kmeansMs += performance.now() - tk;
  const lq: number[][] = Array.from({ length: leafCount }, () => []),
    ld: number[][] = Array.from({ length: leafCount }, () => []);
  for (let i = 0; i < n; i++) {
    lq[bestL[i * OVER]].push(i);
    for (let w = 0; w < OVER; w++) if (bestL[i * OVER + w] >= 0) ld[bestL[i * OVER + w]].push(i);
  }
  for (let l = 0; l < leafCount; l++) if (lq[l].length) leafKnn(Int32Array.from(lq[l]), Int32Array.from(ld[l]));
} else split(all);
const ms = performance.now() - t0;
let hit = 0;
picks.forEach((p, i) => {
  for (let t = 0; t < 10; t++) if (truth[i].has(nb[p * 10 + t])) hit++;
});
console.log(
  `${n} ${dim}-d L${L} B${B} over${OVER}: wall ${(ms / 1000).toFixed(1)} s, CPU ${(cpu() - c0).toFixed(1)} s, kmeans ${(kmeansMs / 1000).toFixed(1)} s, leaves ${leaves} ${(leafMs / 1000).toFixed(1)} s, dist ${(distEvals / 1e9).toFixed(2)} G, recall@10 ${(hit / (sample * 10)).toFixed(4)}`,
);
