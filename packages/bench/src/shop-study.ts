/**
 * Measurements behind the shop model's design choices (validation cases only; no test reads):
 *
 *   node -C atomem-source --import tsx packages/bench/src/shop-study.ts sparsity --data DIR   top-k per list, EASE on the top-N items, quantisation
 *   node -C atomem-source --import tsx packages/bench/src/shop-study.ts cold --data DIR       new items: hybrid (content → collaborative) vectors
 *   node -C atomem-source --import tsx packages/bench/src/shop-study.ts scale [--items 64000 --users 100000 --per-user 30 --ease-items 10000]
 *                                                          build time and file size on a synthetic catalog
 *
 * Markdown tables on stdout, progress on stderr. `sparsity` and `cold` need ML-100K.
 */
import { gzipSync } from 'node:zlib';
import { Command } from 'commander';
import { compareIds, loadDataset } from './datasets.js';
import { mean } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { Rng } from './rng.js';
import { fitWeights, type FitCase } from 'atomem/shop';
import { encodeShopModel, shopModelSizes, type ShopModel } from 'atomem/shop';
import { invertSpd } from 'atomem/shop';
import { combineSignals as combine, SHOP_WEIGHTS as DEFAULT_WEIGHTS } from 'atomem/shop';
import { trainShopModel, type ShopInteraction } from 'atomem/shop';
import { caseSignals, contextFor, ndcgs, presentSignals } from './shop-eval.js';
import { contentVectorsFor } from './shop-content.js';
import { trainForContext } from './shop-method.js';
import type { EvalCase } from './types.js';
import type { Interaction } from 'atomem/engine';

const out = (s: string) => process.stdout.write(`${s}\n`);
const err = (s: string) => process.stderr.write(`${s}\n`);
const f3 = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : '—');
const kb = (b: number) => `${(b / 1024).toFixed(0)} KB`;

/** 5-fold cross-validated NDCG@10 of the refitted combination over `names`. */
function cvCombined(cases: readonly EvalCase[], fit: readonly FitCase[], names: string[], seed: number): number {
  const v = new Float64Array(cases.length);
  for (let f = 0; f < 5; f++) {
    const w = fitWeights(
      fit.filter((_, k) => k % 5 !== f),
      names,
    );
    const idx = cases.map((_, k) => k).filter((k) => k % 5 === f);
    const r = ndcgs(
      idx.map((k) => cases[k]),
      idx.map((k) => combine(fit[k].signals, w, cases[k].candidates.length)),
      seed,
      'shop',
    );
    idx.forEach((k, t) => (v[k] = r[t]));
  }
  return mean(v);
}

function alone(cases: readonly EvalCase[], fit: readonly FitCase[], name: string, seed: number): number {
  return mean(
    ndcgs(
      cases,
      fit.map((f) => f.signals[name]),
      seed,
      `shop-${name}`,
    ),
  );
}

// ── sparsity ───────────────────────────────────────────────────────────────────────────

async function sparsity(data: string, seed: number): Promise<void> {
  const ds = loadDataset('movielens', data, {});
  const val = buildProtocol(ds, { seed, target: 'validation' });
  const ctx = contextFor(ds, val, seed, 'validation');
  const n = ds.items.size;
  const run = async (params: Record<string, string>) => {
    const t = await trainForContext(ctx, params);
    const fit = caseSignals(t.model, val.cases);
    return { ...t, fit, names: presentSignals(t.model), sizes: shopModelSizes(t.bytes) };
  };
  out('### Top-k per list (ML-100K validation, NDCG@10; the other lists at their defaults)\n');
  out('| list | selection | k | list bytes | file bytes | list signal alone | its recent variant alone | combined (5-fold CV) |');
  out('|---|---|---:|---:|---:|---:|---:|---:|');
  const grids: Array<[string, number[]]> = [
    ['ease', [8, 16, 32, 64, 128, 256, n]],
    ['knn', [8, 16, 32, 64, 128, 256, n]],
    ['markov', [4, 8, 16, 32, 64]],
  ];
  const recentOf = (list: string) => (list === 'markov' ? undefined : `${list}Recent`);
  const cell = (fit: FitCase[], name: string | undefined) => (name ? f3(alone(val.cases, fit, name, seed)) : '—');
  for (const [list, ks] of grids) {
    for (const k of ks) {
      const r = await run({ [`shop.k.${list}`]: String(k) });
      const sel = list === 'markov' ? 'out' : 'in';
      out(
        `| ${list} | ${sel} | ${k === n ? `all (${n})` : k} | ${kb(r.sizes[`list.${list}`])} | ${kb(r.bytes.length)} | ${cell(r.fit, list)} | ${cell(r.fit, recentOf(list))} | ${f3(cvCombined(val.cases, r.fit, r.names, seed))} |`,
      );
      err(`sparsity ${list} k=${k} done`);
    }
  }
  for (const [list, k] of [
    ['ease', 64],
    ['knn', 64],
    ['markov', 16],
  ] as const) {
    const other = list === 'markov' ? 'in' : 'out';
    const r = await run({ [`shop.orient.${list}`]: other, [`shop.k.${list}`]: String(k) });
    out(
      `| ${list} | ${other} | ${k} | ${kb(r.sizes[`list.${list}`])} | ${kb(r.bytes.length)} | ${cell(r.fit, list)} | ${cell(r.fit, recentOf(list))} | ${f3(cvCombined(val.cases, r.fit, r.names, seed))} |`,
    );
  }
  {
    const r = await run({ 'shop.k.ease': String(n), 'shop.easeSigned': '1' });
    out(
      `| ease | dense (signed, every weight) | all (${n}) | ${kb(r.sizes['list.ease'])} | ${kb(r.bytes.length)} | ${cell(r.fit, 'ease')} | ${cell(r.fit, 'easeRecent')} | ${f3(cvCombined(val.cases, r.fit, r.names, seed))} |`,
    );
  }
  out('\n### EASE on the top-N items only (kNN covers the tail)\n');
  out('| N (EASE items) | share of interactions covered | ease alone | knn alone | combined (5-fold CV) | file bytes |');
  out('|---:|---:|---:|---:|---:|---:|');
  const pop = new Map<string, number>();
  let total = 0;
  for (const seq of val.histories.values())
    for (const x of seq) {
      pop.set(x.item, (pop.get(x.item) ?? 0) + 1);
      total++;
    }
  const byPop = [...pop.values()].sort((a, b) => b - a);
  for (const N of [100, 250, 500, 1000, n]) {
    const r = await run({ 'shop.easeItems': String(N) });
    const covered = byPop.slice(0, N).reduce((a, b) => a + b, 0) / total;
    out(
      `| ${N === n ? `all (${n})` : N} | ${(100 * covered).toFixed(0)}% | ${f3(alone(val.cases, r.fit, 'ease', seed))} | ${f3(alone(val.cases, r.fit, 'knn', seed))} | ${f3(cvCombined(val.cases, r.fit, r.names, seed))} | ${kb(r.bytes.length)} |`,
    );
    err(`sparsity N=${N} done`);
  }
  out("\n### Quantisation (the file vs the trainer's float model, defaults)\n");
  out('| model | ease alone | vecRecent alone | combined (5-fold CV) |');
  out('|---|---:|---:|---:|');
  const r = await run({});
  const raw = caseSignals(r.trained, val.cases);
  out(
    `| trainer (float32/float64) | ${f3(alone(val.cases, raw, 'ease', seed))} | ${f3(alone(val.cases, raw, 'vecRecent', seed))} | ${f3(cvCombined(val.cases, raw, r.names, seed))} |`,
  );
  out(
    `| file (i8 weights, i8 vectors) | ${f3(alone(val.cases, r.fit, 'ease', seed))} | ${f3(alone(val.cases, r.fit, 'vecRecent', seed))} | ${f3(cvCombined(val.cases, r.fit, r.names, seed))} |`,
  );
  out('\n### File size by part (defaults, ML-100K)\n');
  out('| part | bytes |\n|---|---:|');
  for (const [k, v] of Object.entries(r.sizes)) out(`| ${k} | ${v.toLocaleString('en')} |`);
  out(`| total, gzip -9 | ${gzipSync(r.bytes, { level: 9 }).length.toLocaleString('en')} |`);
}

// ── cold start ─────────────────────────────────────────────────────────────────────────

/** Centred, normalised content vectors (the atomem catalog space). */
function centredContent(vectors: ReadonlyMap<string, ArrayLike<number>>): Map<string, Float64Array> {
  let dim = 0;
  for (const v of vectors.values()) dim = v.length;
  const m = new Float64Array(dim);
  for (const v of vectors.values()) for (let d = 0; d < dim; d++) m[d] += v[d] / vectors.size;
  const res = new Map<string, Float64Array>();
  for (const [id, v] of vectors) {
    const x = Float64Array.from(v, (a, d) => a - m[d]);
    const nrm = Math.hypot(...x) || 1;
    res.set(
      id,
      x.map((a) => a / nrm),
    );
  }
  return res;
}

/** Cosine of each candidate's content vector with the recency-weighted mean of the last 5 history items'. */
function contentScores(c: EvalCase, vec: Map<string, Float64Array>): Float64Array {
  const seen = new Set<string>();
  const recent: string[] = [];
  for (let t = c.history.length - 1; t >= 0 && recent.length < 5; t--) {
    if (seen.has(c.history[t].item)) continue;
    seen.add(c.history[t].item);
    recent.push(c.history[t].item);
  }
  const dim = vec.values().next().value!.length;
  const u = new Float64Array(dim);
  recent.forEach((id, r) => {
    const x = vec.get(id);
    if (x) for (let d = 0; d < dim; d++) u[d] += 0.7 ** r * x[d];
  });
  return Float64Array.from(c.candidates, (id) => {
    const x = vec.get(id);
    if (!x) return 0;
    let s = 0;
    for (let d = 0; d < dim; d++) s += u[d] * x[d];
    return s;
  });
}

async function cold(data: string, seed: number, share: number): Promise<void> {
  const ds = loadDataset('movielens', data, {});
  const val = buildProtocol(ds, { seed, target: 'validation' });
  const catalog = [...ds.items.keys()].sort(compareIds);
  const held = new Set(Rng.derive(seed, 'shop-cold').sampleWithoutReplacement(catalog, Math.round(share * catalog.length)));
  const strip = (seq: readonly Interaction[]) => seq.filter((x) => !held.has(x.item));
  const histories = new Map([...val.histories].map(([u, seq]) => [u, strip(seq)]));
  // Every validation case with the held-out (new) items removed from its history (nobody, the
  // shopper included, has interacted with a new item); candidates unchanged, so ~20% are new.
  const all: EvalCase[] = val.cases.map((c) => ({ ...c, history: strip(c.history) })).filter((c) => c.history.length > 0);
  const mixed = all.filter((c) => held.has(c.test.item));
  const warmTargets = all.filter((c) => !held.has(c.test.item));
  const heldList = [...held].sort(compareIds);
  const coldOnly: EvalCase[] = mixed.map((c) => {
    const own = new Set(ds.sequences.get(c.user)!.map((x) => x.item));
    const pool = heldList.filter((id) => !own.has(id));
    const negatives = Rng.derive(seed, 'shop-cold-negatives', c.user).sampleWithoutReplacement(pool, 9);
    return { ...c, candidates: Rng.derive(seed, 'shop-cold-shuffle', c.user).shuffle([c.test.item, ...negatives]) };
  });
  const removed = [...val.histories.values()].reduce((a, s) => a + s.length, 0) - [...histories.values()].reduce((a, s) => a + s.length, 0);
  err(`cold: ${held.size} of ${catalog.length} items held out (${removed} interactions removed), ${mixed.length} validation cases target one`);
  const ctxCold = contextFor(ds, { cases: all, histories }, seed, 'validation');
  const ctxFull = contextFor(ds, val, seed, 'validation');
  const hybrid = (await trainForContext(ctxCold, {})).model;
  const oracle = (await trainForContext(ctxFull, {})).model;
  const noContent = (await trainForContext(ctxCold, { 'shop.content': 'none' })).model;
  const content = centredContent((await contentVectorsFor(ds, 'use-lite', ctxFull)).vectors);
  out(`### New items (${held.size} of ${catalog.length} ML-100K items, ${Math.round(100 * share)}%, held out of the whole log)\n`);
  out(
    `NDCG@10 on validation cases. *all*: every case (${all.length}), the usual candidates (about 20% new items); *warm target* (${warmTargets.length}) and *new target* (${mixed.length}) split it; *new only*: the new-target cases with 9 negatives also drawn from the new items. A method that merely favours new items gains on *new target* and loses on *warm target*.\n`,
  );
  out('| item vectors of the new items | signal | all | warm target | new target | new only |');
  out('|---|---|---:|---:|---:|---:|');
  const row = (label: string, signal: string, model: ShopModel | undefined, weights?: Record<string, number>) => {
    const cells = [all, warmTargets, mixed, coldOnly].map((cs) => {
      const fit = model ? caseSignals(model, cs) : undefined;
      const scores = cs.map((c, k) =>
        !fit ? contentScores(c, content) : weights ? combine(fit[k].signals, weights, c.candidates.length) : fit[k].signals[signal],
      );
      return f3(mean(ndcgs(cs, scores, seed, `cold-${signal}`)));
    });
    out(`| ${label} | ${signal} | ${cells.join(' | ')} |`);
  };
  row('hybrid: ridge map content → collaborative (shipped)', 'vecRecent', hybrid);
  row('hybrid', 'combined (default weights)', hybrid, DEFAULT_WEIGHTS);
  row('none (no content vectors: new items have no vector)', 'vecRecent', noContent);
  row('none', 'combined (default weights)', noContent, DEFAULT_WEIGHTS);
  row('content only (centred USE-lite cosine, last 5)', 'content', undefined);
  row('oracle: the same items trained with their data', 'vecRecent', oracle);
  row('oracle', 'combined (default weights)', oracle, DEFAULT_WEIGHTS);
  out('| random | — | 0.454 | 0.454 | 0.454 | 0.454 |');
  out('\n### Ridge α of the content map (hybrid, vecRecent, new only)\n');
  out('| α | NDCG@10 |\n|---:|---:|');
  for (const alpha of [0.01, 0.1, 1, 10, 100]) {
    const m = (await trainForContext(ctxCold, { 'shop.ridge': String(alpha) })).model;
    out(
      `| ${alpha} | ${f3(
        mean(
          ndcgs(
            coldOnly,
            caseSignals(m, coldOnly).map((f) => f.signals.vecRecent),
            seed,
            'cold-vecRecent',
          ),
        ),
      )} |`,
    );
  }
}

// ── scale ──────────────────────────────────────────────────────────────────────────────

/**
 * A synthetic shop log: items in `clusters` taste groups with Zipf popularity, users with one to
 * three favourite groups (70% of their picks), history lengths log-normal around `perUser`.
 */
export function syntheticShop(
  items: number,
  users: number,
  perUser: number,
  seed: number,
  clusters = 500,
): { log: ShopInteraction[]; catalog: string[]; content: Map<string, Float32Array> } {
  const rng = new Rng(`shop-scale-${seed}`);
  const catalog = Array.from({ length: items }, (_, i) => `p${i}`);
  const cluster = Int32Array.from({ length: items }, () => rng.int(clusters));
  const byCluster: number[][] = Array.from({ length: clusters }, () => []);
  cluster.forEach((c, i) => byCluster[c].push(i));
  // Zipf(1) draws by inverse CDF over ranks (an item's rank = its index: popularity falls with it).
  const zipf = (n: number) => Math.min(n - 1, Math.floor(Math.exp(rng.next() * Math.log(n + 1))) - 1);
  const log: ShopInteraction[] = [];
  let t = Date.UTC(2025, 0, 1);
  for (let u = 0; u < users; u++) {
    const favs = Array.from({ length: 1 + rng.int(3) }, () => rng.int(clusters));
    const len = Math.max(2, Math.round(perUser * Math.exp(0.8 * rng.normal() - 0.32)));
    for (let k = 0; k < len; k++) {
      let i: number;
      if (rng.next() < 0.7) {
        const g = byCluster[favs[rng.int(favs.length)]];
        i = g.length ? g[zipf(g.length)] : zipf(items);
      } else i = zipf(items);
      t += 1000 + rng.int(60_000);
      log.push({ user: `u${u}`, item: catalog[i], at: t, action: 'purchase' });
    }
  }
  // Content: 512-d, the item's group centroid plus noise (content predicts taste only partly).
  const centroids = Array.from({ length: clusters }, () => Float32Array.from({ length: 512 }, () => rng.normal()));
  const content = new Map(catalog.map((id, i) => [id, Float32Array.from(centroids[cluster[i]], (x) => x + 1.5 * rng.normal())]));
  return { log, catalog, content };
}

async function scale(items: number, users: number, perUser: number, easeItems: number, seed: number): Promise<void> {
  out('### Dense EASE inverse (Cholesky, this machine, one core)\n');
  out('| N | seconds | N³/2 multiply-adds per second |\n|---:|---:|---:|');
  let rate = 0;
  for (const N of [500, 1000, 2000]) {
    const rng = new Rng(N);
    const A = new Float64Array(N * N);
    for (let i = 0; i < N; i++) for (let j = 0; j <= i; j++) A[i * N + j] = A[j * N + i] = rng.next() * 0.01;
    for (let i = 0; i < N; i++) A[i * N + i] += N;
    const t0 = performance.now();
    invertSpd(A, N);
    const s = (performance.now() - t0) / 1000;
    rate = N ** 3 / 2 / s;
    out(`| ${N} | ${s.toFixed(2)} | ${(rate / 1e9).toFixed(2)} G |`);
  }
  out('\nExtrapolated (N³/2 at the rate of N = 2000; memory 2 N² float64 plus the Gram copy):\n');
  out('| N | time | memory |\n|---:|---:|---:|');
  for (const N of [8000, 10000, 16000, 64000, 100000]) {
    const s = N ** 3 / 2 / rate;
    out(`| ${N} | ${s < 3600 ? `${(s / 60).toFixed(0)} min` : `${(s / 3600).toFixed(0)} h`} | ${((3 * N * N * 8) / 2 ** 30).toFixed(1)} GiB |`);
  }
  err(`scale: generating ${users} users × ~${perUser} picks over ${items} items`);
  const t0 = performance.now();
  const { log, catalog, content } = syntheticShop(items, users, perUser, seed);
  err(`scale: ${log.length} interactions in ${((performance.now() - t0) / 1000).toFixed(1)} s; training`);
  // why: a stage's work comes before its progress calls, so the time since the previous call
  // (of any stage) is charged to the stage of this call.
  const stages = new Map<string, number>();
  let last = performance.now();
  let current = '';
  const rng = new Rng(seed);
  const model = trainShopModel(log, {
    catalog,
    easeItems,
    content: { embedder: 'synthetic', vectors: content },
    random: () => rng.next(),
    onProgress: (stage) => {
      const now = performance.now();
      stages.set(stage, (stages.get(stage) ?? 0) + (now - last) / 1000);
      last = now;
      if (stage !== current) err(`  ${stage}… (${(stages.get(stage)! + 0).toFixed(0)} s so far)`);
      current = stage;
    },
  });
  const bytes = encodeShopModel(model);
  const sizes = shopModelSizes(bytes);
  out(
    `\n### Synthetic shop: ${items.toLocaleString('en')} items, ${users.toLocaleString('en')} users, ${log.length.toLocaleString('en')} interactions, EASE on the top ${Math.min(easeItems, items).toLocaleString('en')}\n`,
  );
  out('| stage | seconds |\n|---|---:|');
  for (const [s, t] of stages) out(`| ${s} | ${t.toFixed(1)} |`);
  out(`| total (trainShopModel) | ${Number(model.info.trainSeconds).toFixed(1)} |`);
  out('\n| part | bytes |\n|---|---:|');
  for (const [k, v] of Object.entries(sizes)) out(`| ${k} | ${v.toLocaleString('en')} |`);
  out(`| total, gzip -9 | ${gzipSync(bytes, { level: 9 }).length.toLocaleString('en')} |`);
  const rowsOf = (l: string) => model.lists[l].offsets.length - 1;
  out(
    `\nentries: ease ${model.lists.ease.targets.length.toLocaleString('en')} (${rowsOf('ease')} rows), knn ${model.lists.knn.targets.length.toLocaleString('en')}, markov ${model.lists.markov.targets.length.toLocaleString('en')}; bytes per entry ${((sizes['list.ease'] + sizes['list.knn'] + sizes['list.markov']) / (model.lists.ease.targets.length + model.lists.knn.targets.length + model.lists.markov.targets.length)).toFixed(2)}`,
  );
}

async function main(): Promise<void> {
  const program = new Command().name('shop-study');
  program
    .command('sparsity')
    .requiredOption('--data <dir>')
    .option('--seed <n>', 'seed', Number, DEFAULT_SEED)
    .action((o) => sparsity(o.data, o.seed));
  program
    .command('cold')
    .requiredOption('--data <dir>')
    .option('--seed <n>', 'seed', Number, DEFAULT_SEED)
    .option('--share <x>', 'share of items held out', Number, 0.2)
    .action((o) => cold(o.data, o.seed, o.share));
  program
    .command('scale')
    .option('--items <n>', 'catalog size', Number, 64000)
    .option('--users <n>', 'users', Number, 100000)
    .option('--per-user <n>', 'mean picks per user', Number, 30)
    .option('--ease-items <n>', 'EASE on the top N', Number, 10000)
    .option('--seed <n>', 'seed', Number, DEFAULT_SEED)
    .action((o) => scale(o.items, o.users, o.perUser, o.easeItems, o.seed));
  await program.parseAsync();
}

main().catch((e: Error) => {
  process.stderr.write(`${e.stack ?? e.message}\n`);
  process.exit(1);
});
