/**
 * Node microbenchmarks of the memory engine (`npm run bench:micro`): prints p50/p95 of
 * observe → memory updated (item embedding cached), of ranking 10 candidates (also split into
 * calls whose cards were all ranked before in the run — the shelf keeps their item–item cosines —
 * and calls with a card new to it), of a
 * whole-catalog `recommend` (no candidates), memory per 1,000 atomic memories, and a new card's
 * dot products with ~200 linked items from one contiguous matrix (against `dot` pair by pair),
 * each beside a baseline measured in the same run.
 * Uses a synthetic catalog (no dataset needed) and the real USE-lite embedder.
 * Run with `node --expose-gc` (the npm script does) for the memory figure.
 */
import { MemoryAgent } from 'atomem/engine';
import { ItemVectors } from 'atomem/engine';
import type { Item } from 'atomem/engine';
import { createCachedEmbedder } from 'atomem/engine';
import { createUseLiteEmbedder } from 'atomem/engine';
import { Rng } from './rng.js';

const DEPARTMENTS: Record<string, string[]> = {
  Shoes: ['running shoe', 'leather boot', 'trail sneaker', 'sandal', 'hiking boot'],
  Kitchen: ['chef knife', 'cast iron pan', 'espresso maker', 'cutting board', 'stand mixer'],
  Books: ['crime novel', 'space opera', 'cookbook', 'poetry collection', 'history of rome'],
  Garden: ['pruning shears', 'watering can', 'seed kit', 'raised bed', 'compost bin'],
  Toys: ['wooden train', 'puzzle', 'building blocks', 'plush bear', 'kite'],
};
const ADJ = ['classic', 'compact', 'premium', 'eco', 'vintage', 'lightweight', 'deluxe', 'handmade'];

function catalog(n: number, rng: Rng): Item[] {
  const deps = Object.keys(DEPARTMENTS);
  return Array.from({ length: n }, (_, i) => {
    const d = deps[i % deps.length];
    const noun = DEPARTMENTS[d][rng.int(DEPARTMENTS[d].length)];
    const adj = ADJ[rng.int(ADJ.length)];
    return { id: `p${i}`, title: `${adj} ${noun} ${i}`, categories: [d], description: `A ${adj} ${noun} from our ${d.toLowerCase()} department.` };
  });
}

/** The loop of `core/vector.ts` `dot`: summed in index order, unrolled by four. */
function dot(a: Float32Array, b: Float32Array): number {
  let s = 0;
  let i = 0;
  for (; i + 3 < a.length; i += 4) {
    s += a[i] * b[i];
    s += a[i + 1] * b[i + 1];
    s += a[i + 2] * b[i + 2];
    s += a[i + 3] * b[i + 3];
  }
  for (; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** `out[r]` = the dot product of row `r` of `m` (`rows` × `dim`) with `v`, 4 rows at a time, each summed in index order (the bits of `dot`). */
function matrixDots(m: Float32Array, rows: number, dim: number, v: Float32Array, out: Float64Array): void {
  let r = 0;
  for (; r + 3 < rows; r += 4) {
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    const o = r * dim;
    for (let d = 0; d < dim; d++) {
      const x = v[d];
      s0 += m[o + d] * x;
      s1 += m[o + dim + d] * x;
      s2 += m[o + 2 * dim + d] * x;
      s3 += m[o + 3 * dim + d] * x;
    }
    out[r] = s0;
    out[r + 1] = s1;
    out[r + 2] = s2;
    out[r + 3] = s3;
  }
  for (; r < rows; r++) {
    let s = 0;
    for (let d = 0; d < dim; d++) s += m[r * dim + d] * v[d];
    out[r] = s;
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

function fmt(ms: number): string {
  return ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`;
}

async function main(): Promise<void> {
  const rng = new Rng(2026);
  const items = catalog(500, rng);
  const use = await createUseLiteEmbedder();
  const embedder = createCachedEmbedder(use);
  const vectors = new ItemVectors(embedder, items);
  await vectors.warm();
  await vectors.centre();

  // 1. observe → memory updated, item embedding cached.
  let n = 0;
  const agent = new MemoryAgent({ items: vectors, clock: () => 1e12, newId: () => `m${++n}` });
  const observe: number[] = [];
  for (let i = 0; i < 600; i++) {
    const item = items[(i * 7 + rng.int(3)) % items.length];
    const t0 = performance.now();
    await agent.observe({ item: item.id, at: 1e12 + i * 60_000, action: i % 5 === 0 ? 'purchase' : 'click' });
    if (i >= 100) observe.push(performance.now() - t0);
  }
  // Baseline: embedding one uncached item text with USE-lite (what caching avoids).
  const embedOne: number[] = [];
  for (let i = 0; i < 30; i++) {
    const t0 = performance.now();
    await use.embed([`uncached product ${i} ${ADJ[i % ADJ.length]} gift`]);
    embedOne.push(performance.now() - t0);
  }

  // 2. ranking 10 candidates (with explanations).
  const rank: number[] = [];
  const scan: number[] = [];
  // calls whose cards were all ranked before in this run (their cosines with the linked and recent items are kept) and the others
  const rankedBefore = new Set<string>();
  const warmCalls: number[] = [];
  const coldCalls: number[] = [];
  for (let i = 0; i < 300; i++) {
    const picked = new Set<string>();
    while (picked.size < 10) picked.add(items[rng.int(items.length)].id);
    const cands = [...picked];
    const t0 = performance.now();
    await agent.recommend(cands);
    rank.push(performance.now() - t0);
    (cands.every((id) => rankedBefore.has(id)) ? warmCalls : coldCalls).push(rank[rank.length - 1]);
    for (const id of cands) rankedBefore.add(id);
    // Baseline: the bare cost of cosine of 10 candidates against every memory (no retrieval, no reasons).
    const vs = await vectors.vectorsOf(cands);
    const t1 = performance.now();
    let acc = 0;
    for (const v of vs) for (const m of agent.snapshot.memories) for (let k = 0; k < v.vector.length; k++) acc += v.vector[k] * m.embedding.vector[k];
    scan.push(performance.now() - t1);
    if (acc === 42) console.log(''); // keeps the loop from being optimised away
  }

  // 2b. whole-catalog recommend (no candidates: shortlist, then the full scorer and reasons on it).
  const whole: number[] = [];
  const wholeScan: number[] = [];
  const all = await vectors.vectorsOf(items.map((it) => it.id));
  for (let i = 0; i < 60; i++) {
    const t0 = performance.now();
    await agent.recommend(undefined, { limit: 20 });
    whole.push(performance.now() - t0);
    // Baseline: every catalog item's dot product with every memory (no shortlist, no reasons).
    const t1 = performance.now();
    let acc = 0;
    for (const v of all) for (const m of agent.snapshot.memories) for (let k = 0; k < v.vector.length; k++) acc += v.vector[k] * m.embedding.vector[k];
    wholeScan.push(performance.now() - t1);
    if (acc === 42) console.log('');
  }

  // 3. memory per 1,000 atomic memories (512-d).
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  // why: typed-array storage lives outside the JS heap; count both.
  const used = () => process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  const before = used();
  let k = 0;
  // 10,000 memories, reported per 1,000, so allocator noise averages out.
  const big = new MemoryAgent({ items: vectors, config: { tau: 0.999, maxMemories: 20_000 }, clock: () => 1e12, newId: () => `b${++k}` });
  for (let i = 0; i < 10_000; i++) {
    const [v] = await vectors.vectorsOf([items[i % items.length].id]);
    big.snapshot.memories.push({
      id: `b${i}`,
      content: `Enjoys ${items[i % items.length].title} and similar items`,
      category: items[i % items.length].categories![0],
      embedding: { embedderId: v.embedderId, vector: new Float32Array(v.vector) },
      items: Array.from({ length: 8 }, (_, j) => items[(i + j) % items.length].id),
      strength: 0.5,
      evidence: 3,
      links: [],
      createdAt: 1e12,
      updatedAt: 1e12,
    });
  }
  gc?.();
  const after = used();
  const heapKB = (after - before) / 1024 / 10;
  const rawKB = (1000 * 512 * 4) / 1024;
  const measured = big.snapshot.memories.length; // keeps `big` alive until after the measurement

  // 4. embedder throughput: USE-lite vs the hashing embedder (tests only), batches of 64.
  const texts = Array.from({ length: 640 }, (_, i) => `${ADJ[i % ADJ.length]} product ${i}. ${Object.keys(DEPARTMENTS)[i % 5]}`);
  const throughput = async (embed: (t: string[]) => Promise<unknown>) => {
    const t0 = performance.now();
    for (let i = 0; i < texts.length; i += 64) await embed(texts.slice(i, i + 64));
    return texts.length / ((performance.now() - t0) / 1000);
  };
  const useRate = await throughput((t) => use.embed(t));
  const { createHashingEmbedder } = await import('atomem/engine');
  const hashing = createHashingEmbedder({ dim: 512 });
  const hashRate = await throughput((t) => hashing.embed(t));

  // 5. a card new to the shelf: its dot products with ~200 linked items (to name each memory reason's closest one),
  // summed pair by pair with `dot`, or from one contiguous matrix 4 rows at a time (each row still in index order: the same bits)
  const linkedVecs = all.slice(0, 200).map((e) => e.vector);
  const dim = linkedVecs[0].length;
  const matrix = new Float32Array(linkedVecs.length * dim);
  linkedVecs.forEach((v, r) => matrix.set(v, r * dim));
  const sums = new Float64Array(linkedVecs.length);
  const perPair: number[] = [];
  const byMatrix: number[] = [];
  for (let t = 0; t < 200; t++) {
    const card = all[200 + (t % 300)].vector;
    let t0 = performance.now();
    for (let r = 0; r < linkedVecs.length; r++) sums[r] = dot(linkedVecs[r], card);
    perPair.push(performance.now() - t0);
    t0 = performance.now();
    matrixDots(matrix, linkedVecs.length, dim, card, sums);
    byMatrix.push(performance.now() - t0);
  }

  const rows = [
    [
      'observe → memory updated (cached embedding)',
      fmt(pct(observe, 50)),
      fmt(pct(observe, 95)),
      `embed 1 uncached text: ${fmt(pct(embedOne, 50))}`,
      `${(pct(embedOne, 50) / pct(observe, 50)).toFixed(0)}× faster than one embedding`,
    ],
    [
      'rank 10 candidates + explanations',
      fmt(pct(rank, 50)),
      fmt(pct(rank, 95)),
      `bare cosine scan: ${fmt(pct(scan, 50))}`,
      `${(pct(rank, 50) / Math.max(1e-6, pct(scan, 50))).toFixed(1)}× the bare scan`,
    ],
    [
      `… of which calls whose 10 cards were all ranked before (${warmCalls.length} calls)`,
      fmt(pct(warmCalls, 50)),
      fmt(pct(warmCalls, 95)),
      `bare cosine scan: ${fmt(pct(scan, 50))}`,
      `${(pct(warmCalls, 50) / Math.max(1e-6, pct(scan, 50))).toFixed(1)}× the bare scan`,
    ],
    [
      `… of which calls with a card never ranked before (${coldCalls.length} calls)`,
      fmt(pct(coldCalls, 50)),
      fmt(pct(coldCalls, 95)),
      `bare cosine scan: ${fmt(pct(scan, 50))}`,
      `${(pct(coldCalls, 50) / Math.max(1e-6, pct(scan, 50))).toFixed(1)}× the bare scan`,
    ],
    [
      `whole-catalog recommend (${items.length} items, limit 20)`,
      fmt(pct(whole, 50)),
      fmt(pct(whole, 95)),
      `bare scan of every item: ${fmt(pct(wholeScan, 50))}`,
      `${(pct(whole, 50) / Math.max(1e-6, pct(wholeScan, 50))).toFixed(1)}× the bare scan`,
    ],
    [
      `memory per 1,000 atomic memories (512-d, heap + array buffers, measured on ${measured})${gc ? '' : ' (run with --expose-gc)'}`,
      `${(heapKB / 1024).toFixed(2)} MB`,
      '',
      `raw float32 vectors: ${(rawKB / 1024).toFixed(2)} MB`,
      `${(heapKB / rawKB).toFixed(2)}× the raw vectors`,
    ],
    [
      `a new card's dot products with ${linkedVecs.length} linked items (${dim}-d), one contiguous matrix, 4 rows at a time`,
      fmt(pct(byMatrix, 50)),
      fmt(pct(byMatrix, 95)),
      `\`dot\` pair by pair: ${fmt(pct(perPair, 50))}`,
      `${(pct(byMatrix, 50) / Math.max(1e-6, pct(perPair, 50))).toFixed(2)}× pair by pair`,
    ],
    [
      'USE-lite embedding, batches of 64 item texts',
      `${useRate.toFixed(0)} texts/s`,
      '',
      `hashing embedder: ${hashRate.toFixed(0)} texts/s`,
      `${(hashRate / useRate).toFixed(0)}× slower than hashing`,
    ],
  ];
  console.log(`atomem microbenchmarks — ${items.length} synthetic items, USE-lite centred, ${agent.snapshot.memories.length} memories after 600 events\n`);
  console.log('| what | p50 | p95 | baseline (same run) | ratio |');
  console.log('|---|---:|---:|---|---|');
  for (const r of rows) console.log(`| ${r.join(' | ')} |`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
