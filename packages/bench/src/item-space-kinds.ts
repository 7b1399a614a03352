/**
 * Scalar kinds of the item-space kNN graph, one thread (`node -C atomem-source --import tsx
 * packages/bench/src/item-space-kinds.ts 100000 f32:64:67:1,i8:64:67:3`; `DIM=512` for another
 * dimension, kind `b1` = sign bits under the Hamming metric, `JOIN=1` adds a round of
 * neighbours-of-neighbours refinement by exact cosine after the queries): for each
 * `kind:efConstruction:ef:oversample`, the CPU seconds of adding every item of a synthetic
 * catalog (the item-space benchmark's distribution, 128-d unless `DIM`) to a usearch HNSW index and of
 * querying every item (k = 10; with oversample > 1, k·oversample candidates re-ranked by their
 * exact f32 cosine, as clusters.ts does), and recall@10 against usearch's exact search on 1,000
 * random items. The exploration behind the service's default (i8, oversample 2); the service
 * path itself is measured by `npm run bench:index -- --item-space`.
 */
import usearch, { type BatchMatches, type ScalarKind } from 'usearch';
import { mulberry32 } from './rng.js';
const n = Number(process.argv[2] ?? 100000),
  dim = Number(process.env.DIM ?? 128);
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
const q = new Float32Array(sample * dim);
picks.forEach((p, i) => q.set(flat.subarray(p * dim, p * dim + dim), i * dim));
const ex = usearch.exactSearch(flat, q, dim, 11, usearch.MetricKind.Cos) as BatchMatches;
const truth = picks.map((p, i) => {
  const s = new Set<number>();
  for (let h = 0; h < 11 && s.size < 10; h++) {
    const k = Number(ex.keys[i * 11 + h]);
    if (k !== p) s.add(k);
  }
  return s;
});
const cpu = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1e6;
};
for (const spec of process.argv[3].split(',')) {
  const [qz, efc, ef, over] = spec.split(':');
  const threads = 1;
  const os = Number(over ?? 1);
  const idx = new usearch.Index({
    dimensions: dim,
    metric: qz === 'b1' ? usearch.MetricKind.Hamming : usearch.MetricKind.Cos,
    quantization: qz as ScalarKind,
    connectivity: 16,
    expansion_add: Number(efc),
    expansion_search: Number(ef),
    multi: false,
  });
  const c0 = cpu();
  const t0 = performance.now();
  const step = 16384;
  for (let i = 0; i < n; i += step) {
    const e = Math.min(n, i + step);
    const keys = new BigUint64Array(e - i);
    for (let j = i; j < e; j++) keys[j - i] = BigInt(j);
    idx.add(keys, flat.subarray(i * dim, e * dim), threads);
  }
  const c1 = cpu();
  const K = 10 * os + 1;
  const rows = new Int32Array(n * 10);
  for (let i = 0; i < n; i += step) {
    const e = Math.min(n, i + step);
    const m = idx.search(flat.subarray(i * dim, e * dim), K, threads) as BatchMatches;
    for (let qq = 0; qq < e - i; qq++) {
      const self = i + qq;
      const cand: [number, number][] = [];
      for (let h = 0; h < K; h++) {
        if (h >= Number(m.counts[qq])) break;
        const key = Number(m.keys[qq * K + h]);
        if (key === self) continue;
        let s: number;
        if (os > 1) {
          s = 0;
          const a = self * dim,
            b = key * dim;
          for (let d = 0; d < dim; d++) s += flat[a + d] * flat[b + d];
        } else s = 1 - m.distances[qq * K + h];
        cand.push([s, key]);
      }
      if (os > 1) cand.sort((x, y) => y[0] - x[0]);
      for (let t = 0; t < 10; t++) rows[self * 10 + t] = cand[t]?.[1] ?? -1;
    }
  }
  const c2 = cpu();
  const recall = () => {
    let hit = 0;
    picks.forEach((p, i) => {
      for (let t = 0; t < 10; t++) if (truth[i].has(rows[p * 10 + t])) hit++;
    });
    return (hit / (sample * 10)).toFixed(4);
  };
  console.log(
    `${n} ${dim}-d ${spec}: add ${(c1 - c0).toFixed(1)} CPU-s, queries(+rerank) ${(c2 - c1).toFixed(1)} CPU-s, total ${(c2 - c0).toFixed(1)} CPU-s, wall ${((performance.now() - t0) / 1000).toFixed(1)} s, recall@10 ${recall()}`,
  );
  for (let r = 0; r < Number(process.env.JOIN ?? 0); r++) {
    // each row's candidates: its neighbours and their neighbours, scored by exact cosine, best 10 kept
    const next = new Int32Array(n * 10);
    const seen = new Int32Array(n).fill(-1);
    for (let i = 0; i < n; i++) {
      const cand: number[] = [];
      seen[i] = i;
      for (let t = 0; t < 10; t++) {
        const j = rows[i * 10 + t];
        if (j < 0) continue;
        if (seen[j] !== i) {
          seen[j] = i;
          cand.push(j);
        }
        for (let t2 = 0; t2 < 10; t2++) {
          const l = rows[j * 10 + t2];
          if (l >= 0 && seen[l] !== i) {
            seen[l] = i;
            cand.push(l);
          }
        }
      }
      const sc = cand.map((j): [number, number] => {
        let s2 = 0;
        const a = i * dim,
          b = j * dim;
        for (let d = 0; d < dim; d++) s2 += flat[a + d] * flat[b + d];
        return [s2, j];
      });
      sc.sort((x, y) => y[0] - x[0]);
      for (let t = 0; t < 10; t++) next[i * 10 + t] = sc[t]?.[1] ?? -1;
    }
    rows.set(next);
    console.log(`  + local join round ${r + 1}: ${(cpu() - c2).toFixed(1)} CPU-s so far, recall@10 ${recall()}`);
  }
}
