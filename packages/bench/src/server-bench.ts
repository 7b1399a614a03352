/**
 * Measurements behind the service's defaults (not part of the test suite):
 *
 *   npx tsx src/server/bench.ts vectors [dim] [maxN] [batch]   exact vs HNSW (i8, f32): per-insert
 *                                   cost (search top-k1 + add, queries batched) and link recall
 *   npx tsx src/server/bench.ts http [n] [batch] [dim] [normal|full]   upsert throughput over real
 *                                   HTTP (sequential requests), then the restart (rebuild) time
 *
 * Data: clustered unit vectors (centre + noise), which is closer to sentence embeddings than
 * uniform random directions (on which every HNSW is at its worst).
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import { FlatVectorStore, type VectorSearch } from 'atomem/engine';
import { encodeVector, hashToken, INDEX_PATHS } from 'atomem/protocol';
import { HnswVectorSearch } from 'atomem-index';
import { createIndexService } from 'atomem-index';
import { mulberry32 } from './rng.js';

const rng = mulberry32;

function unit(v: Float32Array): Float32Array {
  let n = 0;
  for (let i = 0; i < v.length; i++) n += v[i] * v[i];
  n = Math.sqrt(n);
  for (let i = 0; i < v.length; i++) v[i] /= n;
  return v;
}

/** Clustered unit vectors: `centres` directions, each point = centre + gaussian-ish noise. */
function clustered(seed: number, dim: number, centres: number, noise: number): () => Float32Array {
  const r = rng(seed);
  const cs = Array.from({ length: centres }, () => unit(Float32Array.from({ length: dim }, () => r() - 0.5)));
  return () => {
    const c = cs[Math.floor(r() * centres)];
    const v = new Float32Array(dim);
    for (let i = 0; i < dim; i++) v[i] = c[i] + (noise * (r() + r() + r() - 1.5)) / Math.sqrt(dim / 12);
    return unit(v);
  };
}

async function vectors(dim: number, maxN: number, batch: number): Promise<void> {
  const k1 = 2;
  const tau = 0.5;
  const gen = clustered(7, dim, Math.max(16, Math.round(maxN / 50)), 0.5);
  const probesN = 256;
  const data = Array.from({ length: maxN + probesN }, gen);
  const kinds: [string, (d: number) => VectorSearch][] = [
    ['exact', (d) => new FlatVectorStore(d)],
    ['hnsw-i8', (d) => new HnswVectorSearch(d, { exactBelow: 0, quantization: 'i8' })],
    ['hnsw-f32', (d) => new HnswVectorSearch(d, { exactBelow: 0, quantization: 'f32' })],
  ];
  const checkpoints = [64, 128, 256, 512, 1000, 2000, 4000, 8000, 16000, 32000, 64000].filter((n) => n <= maxN);
  console.log(`dim ${dim}, k1 ${k1}, tau ${tau}, batches of ${batch}; per inserted memory: search(top-k1) + add, mean over ${probesN} inserts at size n`);
  console.log('n\tkind\tsearch µs\tadd µs\ttotal µs\trecall@k1');
  for (const n of checkpoints) {
    const exact = new FlatVectorStore(dim);
    for (let i = 0; i < n; i++) exact.add(`m${i}`, data[i]);
    const probes = data.slice(maxN, maxN + probesN);
    const truth = probes.map((q) => exact.search(q, k1, tau).map((h) => h.id));
    for (const [name, make] of kinds) {
      const s = make(dim);
      if (s instanceof HnswVectorSearch) s.suspend();
      for (let i = 0; i < n; i++) s.add(`m${i}`, data[i]);
      if (s instanceof HnswVectorSearch) s.resume();
      // warm-up (JIT) outside the timing
      s.searchMany!(probes.slice(0, batch), k1, tau);
      let tSearch = 0;
      let tAdd = 0;
      let found = 0;
      let total = 0;
      for (let b = 0; b < probes.length; b += batch) {
        const qs = probes.slice(b, b + batch);
        const t0 = performance.now();
        const hits = s.searchMany!(qs, k1, tau);
        const t1 = performance.now();
        qs.forEach((q, j) => s.add(`p${b + j}`, q));
        const t2 = performance.now();
        qs.forEach((_, j) => s.remove(`p${b + j}`));
        tSearch += t1 - t0;
        tAdd += t2 - t1;
        hits.forEach((h, j) => {
          const got = new Set(h.map((x) => x.id));
          for (const id of truth[b + j]) if (got.has(id)) found++;
          total += truth[b + j].length;
        });
      }
      const us = (ms: number) => ((ms * 1000) / probes.length).toFixed(0);
      console.log(`${n}\t${name}\t${us(tSearch)}\t${us(tAdd)}\t${us(tSearch + tAdd)}\t${total === 0 ? '-' : (found / total).toFixed(3)}`);
      if (s instanceof HnswVectorSearch) s.dispose();
    }
  }
}

async function http(n: number, batch: number, dim: number, sync: 'normal' | 'full'): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-bench-'));
  const svc = createIndexService({ legacyV1: true, dataDir: dir, embedderIds: ['bench@1'], embedderDims: { 'bench@1': dim }, logger: false, rateLimit: { max: 1e9, timeWindow: 60_000 }, synchronous: sync });
  await svc.ready;
  const url = await svc.listen({ port: 0, host: '127.0.0.1' });
  const gen = clustered(3, dim, Math.max(16, Math.round(n / 50)), 0.5);
  const token = randomBytes(16).toString('base64url');
  const tokenHash = await hashToken(token);
  const bodies: string[] = [];
  for (let i = 0; i < n; i += batch) {
    const memories = [];
    for (let j = i; j < Math.min(n, i + batch); j++) {
      memories.push({ id: `bench-${j.toString().padStart(8, '0')}`, tokenHash, embedderId: 'bench@1', dim, vector: encodeVector(gen()) });
    }
    bodies.push(JSON.stringify({ v: 1, memories }));
  }
  const t0 = performance.now();
  const lat: number[] = [];
  for (const body of bodies) {
    const s = performance.now();
    const res = await fetch(url + INDEX_PATHS.upsert, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    if (res.status !== 200) throw new Error(`upsert failed: ${res.status} ${await res.text()}`);
    await res.arrayBuffer();
    lat.push(performance.now() - s);
  }
  const secs = (performance.now() - t0) / 1000;
  lat.sort((a, b) => a - b);
  const health = await (await fetch(url + INDEX_PATHS.health)).json();
  console.log(`${n} memories, batch ${batch}, dim ${dim}, synchronous ${sync}: ${(n / secs).toFixed(0)} memories/s, ${(bodies.length / secs).toFixed(1)} requests/s, ` +
    `p50 ${lat[Math.floor(lat.length / 2)].toFixed(1)} ms, p99 ${lat[Math.floor(lat.length * 0.99)].toFixed(1)} ms; health ${JSON.stringify(health)}`);
  await svc.close();
  const t1 = performance.now();
  const again = createIndexService({ legacyV1: true, dataDir: dir, embedderIds: ['bench@1'], embedderDims: { 'bench@1': dim }, logger: false });
  await again.ready;
  console.log(`restart (rebuild from SQLite incl. links): ${(performance.now() - t1).toFixed(0)} ms`);
  await again.close();
  rmSync(dir, { recursive: true, force: true });
}

const [mode = 'vectors', a, b, c, d] = process.argv.slice(2);
if (mode === 'vectors') await vectors(Number(a ?? 512), Number(b ?? 16000), Number(c ?? 1));
else if (mode === 'http') await http(Number(a ?? 5000), Number(b ?? 32), Number(c ?? 512), d === 'full' ? 'full' : 'normal');
else throw new Error(`unknown mode ${mode}`);
