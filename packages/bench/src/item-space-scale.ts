/**
 * Item-space scale benchmark (`npm run bench:index -- [--sizes 10k,100k,1m]`):
 * the index service's protocol-v2 clustering of a catalog (`clusterItemSpace` of
 * packages/atomem-index/src/clusters.ts) on synthetic clustered catalogs (`--catalog iso|mixed|lowdim`)
 * of `--dim` (default 128) unit vectors.
 *
 * Per size: the first start (kNN graph by `--knn` — the service's `auto` unless set —, Louvain,
 * both persisted in a temporary data dir), the restart (the persisted communities read back),
 * how the graph was built and the recall the service measured itself, recall@10 of the kNN
 * graph against the exact kNN (usearch's exact SIMD search) on `--sample` random items, the
 * resulting communities (count, largest), the CPU time of the first start (every thread) and the process's peak RSS by the end of the first start (catalog and clustering; the sizes run in order, so it is the largest so far). One size at a time, in this
 * process; progress on stderr, a Markdown table on stdout, `--json FILE`.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import usearch from 'usearch';
import { Command, InvalidArgumentError } from 'commander';
import { AUTO_HNSW_EF, clusterItemSpace, knnExpansion, readPersistedKnn } from 'atomem-index';
import type { ItemSpace } from 'atomem/engine';
import { mulberry32 } from './rng.js';

interface Row {
  items: number;
  dim: number;
  ef: number;
  /** How the kNN graph was built: `exact`, `cells`, `hnsw` or `cells+hnsw`. */
  method: string;
  /** The recall the service measured itself (its 100-item sample). */
  selfRecall: number;
  /** `cells+hnsw`: the cells' own measured recall before the HNSW complement (NaN otherwise). */
  cellsRecall: number;
  firstStartS: number;
  knnS: number;
  louvainS: number;
  /** Of which building the graphology graph. */
  louvainGraphS: number;
  louvainRuns: number;
  restartS: number;
  recallAt10: number;
  /** Mean over the sample of (mean cosine of the exact 10 nearest − mean cosine of the graph's 10): how much nearer the missed neighbours were. */
  simGap10: number;
  sample: number;
  communities: number;
  largest: number;
  rssMB: number;
  /** CPU time of the process (all threads, the worker's included) during the first start. */
  cpuS: number;
  worker: boolean;
}

function parseSizes(v: string): number[] {
  return v.split(',').map((s) => {
    const m = /^(\d+(?:\.\d+)?)([km]?)$/i.exec(s.trim());
    if (!m) throw new InvalidArgumentError(`bad size ${s}`);
    return Math.round(Number(m[1]) * (m[2].toLowerCase() === 'm' ? 1e6 : m[2].toLowerCase() === 'k' ? 1e3 : 1));
  });
}

/** Synthetic catalog shapes (`--catalog`). */
export type CatalogShape = 'iso' | 'mixed' | 'lowdim';

/**
 * n unit vectors (a catalog: products of a kind sit together), by `shape`:
 * - `iso`: n / 200 Gaussian clusters of isotropic noise 0.8 (cluster-mates' cosine ≈ 0.6 at 512-d);
 * - `mixed`: half the items in clusters of 50, half in clusters of 2,000 (smaller and larger than
 *   a 500-item cell), the same noise;
 * - `lowdim`: n / 200 clusters in a 16-d latent space (noise 0.8) mapped into `dim` by a random
 *   linear map, plus isotropic noise 0.05 (a low intrinsic dimension, as learned embeddings have).
 */
function catalog(n: number, dim: number, seed: number, shape: CatalogShape = 'iso'): ItemSpace {
  const u = mulberry32(seed);
  const gauss = () => Math.sqrt(-2 * Math.log(1 - u())) * Math.cos(2 * Math.PI * u());
  const latent = shape === 'lowdim' ? 16 : dim;
  const c = shape === 'mixed' ? Math.max(1, Math.round(n / 2 / 50)) + Math.max(1, Math.round(n / 2 / 2000)) : Math.max(8, Math.round(n / 200));
  const small = shape === 'mixed' ? Math.max(1, Math.round(n / 2 / 50)) : c;
  const centres = Array.from({ length: c }, () => Float32Array.from({ length: latent }, gauss));
  const map = shape === 'lowdim' ? Float32Array.from({ length: dim * latent }, () => gauss() / Math.sqrt(latent)) : undefined;
  const ids: string[] = new Array(n);
  const vectors: Float32Array[] = new Array(n);
  const z = new Float32Array(latent);
  for (let i = 0; i < n; i++) {
    // mixed: the first half of the items in the small clusters, the rest in the large ones
    const centre = shape === 'mixed' ? centres[i < n / 2 ? Math.floor(u() * small) : small + Math.floor(u() * (c - small))] : centres[Math.floor(u() * c)];
    const v = new Float32Array(dim);
    for (let d = 0; d < latent; d++) z[d] = centre[d] + 0.8 * gauss();
    if (map) {
      for (let d = 0; d < dim; d++) {
        let x = 0.05 * gauss();
        for (let l = 0; l < latent; l++) x += map[d * latent + l] * z[l];
        v[d] = x;
      }
    } else v.set(z);
    let norm = 0;
    for (let d = 0; d < dim; d++) norm += v[d] * v[d];
    norm = Math.sqrt(norm);
    for (let d = 0; d < dim; d++) v[d] /= norm;
    ids[i] = `sku-${i}`;
    vectors[i] = v;
  }
  return { embedderId: `bench-catalog@${dim}`, ids, vectors };
}

export async function itemSpaceMain(argv: string[]): Promise<number> {
  const o = new Command('bench:index')
    .option('--sizes <list>', 'catalog sizes, e.g. 10k,100k,1m', parseSizes, [10_000, 100_000, 1_000_000])
    .option('--dim <n>', 'vector dimension', (v) => Number(v), 128)
    .option('--sample <n>', 'items whose kNN is checked against the exact one', (v) => Number(v), 1000)
    .option('--seed <n>', 'seed', (v) => Number(v), 1)
    .option('--catalog <shape>', 'synthetic catalog: iso (n/200 isotropic clusters), mixed (clusters of 50 and 2,000), lowdim (16-d latent)', 'iso')
    .option('--knn <method>', "kNN graph: auto (the service's default: cells, HNSW added when the measured recall is below 0.95), cells or hnsw", 'auto')
    .option('--cell-size <n>', "items per k-means cell (default: the service's, 500)", (v) => Number(v))
    .option('--cell-overlap <n>', "cells each item is a data point in (default: the service's, 2)", (v) => Number(v))
    .option('--ef <n>', "HNSW ef of the kNN queries (default: the service's, growing with the catalog)", (v) => Number(v))
    .option('--threads <n>', "threads of the HNSW build and queries (0 = every core, the service's default)", (v) => Number(v), 0)
    .option('--quantization <kind>', "HNSW scalar kind: i8 (the service's default), bf16, f16, f32", 'i8')
    .option('--expansion-add <n>', "HNSW efConstruction of the kNN graph (default: the service's, 64)", (v) => Number(v))
    .option('--oversample <n>', "candidates per item as a multiple of k, re-ranked exactly (default: the service's, 2 when quantized, 1 with f32)", (v) =>
      Number(v),
    )
    .option('--no-symmetric', "kNN rows from each item's own query only (default: also offered the items that found them)")
    .option('--service', 'end to end instead: the service CLI started on a catalog vector file of each size, then restarted (./item-space-service.ts)')
    .option('--json <file>', 'write the rows as JSON')
    .parse(argv, { from: 'user' })
    .opts<{
      sizes: number[];
      dim: number;
      sample: number;
      seed: number;
      catalog: CatalogShape;
      knn: 'auto' | 'cells' | 'hnsw';
      cellSize?: number;
      cellOverlap?: number;
      ef?: number;
      threads: number;
      quantization: 'f32' | 'bf16' | 'f16' | 'i8';
      oversample?: number;
      expansionAdd?: number;
      symmetric: boolean;
      service?: boolean;
      json?: string;
    }>();
  if (!['iso', 'mixed', 'lowdim'].includes(o.catalog)) throw new InvalidArgumentError(`--catalog ${o.catalog}: iso, mixed or lowdim`);
  if (!['auto', 'cells', 'hnsw'].includes(o.knn)) throw new InvalidArgumentError(`--knn ${o.knn}: auto, cells or hnsw`);
  if (!['f32', 'bf16', 'f16', 'i8'].includes(o.quantization)) throw new InvalidArgumentError(`--quantization ${o.quantization}: i8, bf16, f16 or f32`);
  const options = {
    knn: o.knn,
    ...(o.cellSize ? { cellSize: o.cellSize } : {}),
    ...(o.cellOverlap ? { cellOverlap: o.cellOverlap } : {}),
    ...(o.ef ? { expansionSearch: o.ef } : {}),
    ...(o.oversample ? { oversample: o.oversample } : {}),
    ...(o.expansionAdd ? { expansionAdd: o.expansionAdd } : {}),
    ...(o.symmetric ? {} : { symmetric: false }),
    threads: o.threads,
    quantization: o.quantization,
  };
  const load0 = loadavg()[0];
  if (o.service) {
    const { serviceRows, reportServiceRows } = await import('./item-space-service.js');
    reportServiceRows(
      await serviceRows(
        o.sizes.map((n) => [n, () => catalog(n, o.dim, o.seed, o.catalog)] as [number, () => ItemSpace]),
        o.dim,
      ),
      load0,
      o.json,
    );
    return 0;
  }
  const rows: Row[] = [];
  for (const n of o.sizes) {
    process.stderr.write(`${n} items × ${o.dim}-d: generating…\n`);
    const space = catalog(n, o.dim, o.seed, o.catalog);
    const dir = mkdtempSync(join(tmpdir(), 'atomem-item-space-'));
    try {
      let last = -1;
      let lastPhase = '';
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      const first = await clusterItemSpace(space, options, {
        dir,
        onProgress: (share, phase) => {
          const pc = Math.floor(share * 10) * 10;
          if (pc !== last || phase !== lastPhase)
            process.stderr.write(`  ${(lastPhase = phase)} ${(last = pc)} % (${((performance.now() - t0) / 1000).toFixed(1)} s)\n`);
        },
      });
      const cpu = process.cpuUsage(cpu0);
      // why: the peak so far is the catalog plus the clustering (the exact search below adds its own)
      const peakMB = Math.round(process.resourceUsage().maxRSS / 1024);
      process.stderr.write(
        `  first start ${(first.ms / 1000).toFixed(1)} s (kNN ${(first.knnMs / 1000).toFixed(1)} s, Louvain ${(first.louvainMs / 1000).toFixed(1)} s); restart…\n`,
      );
      const again = await clusterItemSpace(space, options, { dir });
      if (again.source !== 'cache') throw new Error(`restart did not read the persisted communities (${again.source})`);
      const knn = readPersistedKnn(dir, space, options)!;
      // Exact kNN of the sample (usearch's exact SIMD search over the whole catalog).
      const u = mulberry32(o.seed + 99);
      const sample = Math.min(o.sample, n);
      const picks = Array.from({ length: sample }, () => Math.floor(u() * n));
      const flat = new Float32Array(n * o.dim);
      space.vectors.forEach((v, i) => flat.set(v, i * o.dim));
      const queries = new Float32Array(sample * o.dim);
      picks.forEach((p, i) => queries.set(space.vectors[p], i * o.dim));
      // why: in chunks of 100 queries (copies: exactSearch reads a subarray from its buffer's start): usearch's exactSearch holds two queries × items matrices of (offset, distance) pairs, 8 B each (1,000 × 1M: 16 GB)
      const exactKeys = new BigUint64Array(sample * (knn.k + 1));
      const exactDist = new Float32Array(sample * (knn.k + 1));
      for (let q0 = 0; q0 < sample; q0 += 100) {
        const q1 = Math.min(sample, q0 + 100);
        const part = usearch.exactSearch(flat, queries.slice(q0 * o.dim, q1 * o.dim), o.dim, knn.k + 1, usearch.MetricKind.Cos) as unknown as {
          keys: BigUint64Array;
          distances: Float32Array;
        };
        exactKeys.set(part.keys.subarray(0, (q1 - q0) * (knn.k + 1)), q0 * (knn.k + 1));
        exactDist.set(part.distances.subarray(0, (q1 - q0) * (knn.k + 1)), q0 * (knn.k + 1));
      }
      let hit = 0;
      let gap = 0;
      picks.forEach((p, q) => {
        const truth = new Set<number>();
        let exactSum = 0;
        for (let h = 0; h < knn.k + 1 && truth.size < knn.k; h++) {
          const key = Number(exactKeys[q * (knn.k + 1) + h]);
          if (key === p) continue;
          truth.add(key);
          exactSum += 1 - exactDist[q * (knn.k + 1) + h];
        }
        let graphSum = 0;
        for (let t = 0; t < knn.k; t++) {
          if (truth.has(knn.neighbours[p * knn.k + t])) hit++;
          graphSum += knn.sims[p * knn.k + t];
        }
        gap += (exactSum - graphSum) / knn.k;
      });
      const sizes = first.communities.communities.map((c) => c.items.length);
      rows.push({
        items: n,
        dim: o.dim,
        ef: knn.method === 'hnsw' ? (o.ef ?? knnExpansion(n, knn.k)) : knn.method === 'cells+hnsw' ? (o.ef ?? AUTO_HNSW_EF) : 0,
        method: first.knn.method,
        selfRecall: first.knn.recall,
        cellsRecall: first.knn.cellsRecall ?? Number.NaN,
        firstStartS: first.ms / 1000,
        knnS: first.knnMs / 1000,
        louvainS: first.louvainMs / 1000,
        louvainGraphS: first.louvainGraphMs / 1000,
        louvainRuns: first.louvainRuns,
        restartS: again.ms / 1000,
        recallAt10: hit / (sample * knn.k),
        simGap10: gap / sample,
        sample,
        communities: sizes.length,
        largest: Math.max(...sizes),
        rssMB: peakMB,
        cpuS: (cpu.user + cpu.system) / 1e6,
        worker: first.worker,
      });
      process.stderr.write(`  ${JSON.stringify(rows.at(-1))}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const la = `${load0.toFixed(1)} at the start; ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' / ')} (1 / 5 / 15 min) at the end`;
  const cellsText = `k-means cells of ${o.cellSize ?? 500}, overlap ${o.cellOverlap ?? 2} (exact i8 search within cells, re-ranked f32, symmetric)`;
  const hnswText = `usearch HNSW ${o.quantization}, oversample ${o.oversample ?? (o.quantization === 'f32' ? 1 : 2)}, M = 16, efConstruction ${o.expansionAdd ?? 64}${o.symmetric ? ', symmetric candidates' : ', own query only'}`;
  const method =
    o.knn === 'cells'
      ? `kNN from ${cellsText}`
      : o.knn === 'hnsw'
        ? `kNN from ${hnswText}`
        : `kNN auto: ${cellsText}; below a measured recall of 0.95 on 100 items, + ${hnswText.replace(`efConstruction ${o.expansionAdd ?? 64}`, `efConstruction ${o.expansionAdd ?? AUTO_HNSW_EF}, ef ${o.ef ?? AUTO_HNSW_EF}`)}`;
  process.stdout.write(
    `\n## item-space clustering, catalog ${o.catalog} (${method}, k = 10, threads ${o.threads || `0 = ${cpus().length}`}; Louvain; in a worker thread) — Node ${process.version}, ${cpus().length} cores, load average ${la}\n\n`,
  );
  process.stdout.write(
    '| items | dim | kNN | first start s | of which kNN s | Louvain s (graph build; runs) | CPU s | restart s | recall@10 (sample) | self-measured recall (100) | cosine gap@10 | communities | largest | peak RSS MB |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n',
  );
  for (const r of rows) {
    process.stdout.write(
      `| ${r.items.toLocaleString('en')} | ${r.dim} | ${r.method}${r.ef ? ` (ef ${r.ef})` : ''} | ${r.firstStartS.toFixed(1)} | ${r.knnS.toFixed(1)} | ${r.louvainS.toFixed(1)} (${r.louvainGraphS.toFixed(1)}; ${r.louvainRuns}) | ${r.cpuS.toFixed(0)} | ${r.restartS.toFixed(2)} | ${r.recallAt10.toFixed(4)} (${r.sample}) | ${Number.isFinite(r.selfRecall) ? r.selfRecall.toFixed(3) : '–'}${Number.isFinite(r.cellsRecall) ? ` (cells ${r.cellsRecall.toFixed(3)})` : ''} | ${r.simGap10.toFixed(4)} | ${r.communities} | ${r.largest} | ${r.rssMB} |\n`,
    );
  }
  if (o.json) writeFileSync(o.json, `${JSON.stringify({ config: { ...o, node: process.version, loadavg: la }, rows }, null, 2)}\n`);
  return 0;
}
