/**
 * Ranking identity check (`npm run bench:rank-identity`): the full output of 204 seeded
 * `recommend()` calls — ids, scores, features, reasons with their named items and alternatives,
 * `why` — written as JSON, one call per line, so two builds of the ranker can be compared byte
 * for byte (scores are printed in the shortest round-trip form, so equal bytes mean equal bits).
 *
 * 3 seeded shoppers (histories over a 600-product catalog, `bench/browser/products.ts`), each
 * with and without a shop model (collaborative vectors, EASE/kNN/Markov lists, SASRec) and with
 * a community release (department communities, popularity estimates); per agent 34 calls: 10 to
 * 300 candidates with and without diversification and `limit`, matched and unmatched stated
 * intents, and whole-catalog calls with each exclusion rule. The hashing embedder (256-d,
 * centred) keeps it fast; nothing is downloaded.
 *
 *   node -C atomem-source --import tsx packages/bench/src/rank-identity.ts --out FILE [--check REFERENCE]
 *
 * `--check`: compare with an earlier `--out` file and exit 1 at the first differing call.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { Command } from 'commander';
import { DEFAULT_LDP, ItemVectors, MemoryAgent, ReportHistogram, Rng, buildRelease, createHashingEmbedder, itemText, makeReport } from 'atomem/engine';
import type { Action, Item } from 'atomem/engine';
import { ShopKnowledge, trainSasrec, trainShopModel, type ShopInteraction } from 'atomem/shop';
import { productCatalog } from '../browser/products.js';

const CATALOG_SIZE = 600;
const T0 = Date.UTC(2026, 0, 1);
const MIN = 60_000;

/** A seeded order log and the shop's files trained on it (as `atomem-vectors --log` would). */
async function shopParts(items: Item[]) {
  const embedder = createHashingEmbedder({ dim: 256 });
  const vectors = (await embedder.embed(items.map((it) => itemText(it)))).map((e) => e.vector);
  const rng = new Rng(7);
  const depts = groups(items);
  const log: ShopInteraction[] = [];
  for (let u = 0; u < 300; u++) {
    const fav = [depts[rng.int(depts.length)], depts[rng.int(depts.length)]];
    const len = 8 + rng.int(15);
    for (let k = 0; k < len; k++) {
      const pool = rng.next() < 0.85 ? fav[k % 2] : depts[rng.int(depts.length)];
      log.push({ user: `u${u}`, item: pool[rng.int(pool.length)], at: T0 + (u * 40 + k) * MIN, action: k % 4 === 0 ? 'purchase' : 'click' });
    }
  }
  const catalog = items.map((it) => it.id);
  const r = new Rng(8);
  const model = trainShopModel(log, {
    catalog,
    content: { embedder: embedder.id, vectors: new Map(items.map((it, i) => [it.id, vectors[i]])) },
    random: () => r.next(),
  });
  const index = new Map(catalog.map((id, i) => [id, i + 1]));
  const seqs = new Map<string, number[]>();
  for (const x of log) seqs.set(x.user, [...(seqs.get(x.user) ?? []), index.get(x.item)!]);
  const { weights } = await trainSasrec(
    [...seqs.values()].map((q) => Int32Array.from(q)),
    catalog.length,
    { epochs: 1, seed: 2026 },
  );
  return { model, sasrec: { weights, items: catalog } };
}

/** Item ids per department, in catalog order. */
function groups(items: readonly Item[]): string[][] {
  const by = new Map<string, string[]>();
  for (const it of items) by.set(it.categories![0], [...(by.get(it.categories![0]) ?? []), it.id]);
  return [...by.values()];
}

/** One seeded shopper's history: three favourite departments, purchases, carts, clicks and views. */
function history(items: readonly Item[], seed: number): { item: string; at: number; action: Action }[] {
  const rng = new Rng(seed);
  const depts = groups(items);
  const fav = [0, 1, 2].map(() => depts[rng.int(depts.length)]);
  const actions: Action[] = ['purchase', 'cart', 'click', 'click', 'view', 'like'];
  const out: { item: string; at: number; action: Action }[] = [];
  for (let k = 0; k < 70; k++) {
    const pool = rng.next() < 0.8 ? fav[k % 3] : depts[rng.int(depts.length)];
    out.push({ item: pool[rng.int(pool.length)], at: T0 + k * 7 * MIN, action: actions[rng.int(actions.length)] });
  }
  return out;
}

/** The calls of one agent: [candidates or undefined, options]. */
function calls(ids: readonly string[], seed: number): [string[] | undefined, Record<string, unknown>][] {
  const rng = new Rng(seed * 31 + 5);
  const pick = (n: number) => rng.sampleWithoutReplacement([...ids], n);
  const out: [string[] | undefined, Record<string, unknown>][] = [];
  for (const n of [10, 30, 100, 300]) {
    out.push([pick(n), {}]);
    out.push([pick(n), { diversify: false }]);
    out.push([pick(n), { limit: 8 }]);
    out.push([pick(n), { limit: 8, diversify: false }]);
    out.push([pick(n), { exclude: [] }]);
  }
  for (const n of [10, 100]) {
    out.push([pick(n), { intent: 'a waterproof tent for a hiking trip' }]);
    out.push([pick(n), { intent: 'a gift for my sister, she loves cooking', limit: 6 }]);
    out.push([pick(n), { intent: 'zqxj vbnm plokij' }]);
  }
  out.push([undefined, {}]);
  out.push([undefined, { limit: 10 }]);
  out.push([undefined, { limit: 50, diversify: false }]);
  out.push([undefined, { limit: 20, exclude: 'interacted' }]);
  out.push([undefined, { limit: 20, exclude: 'seen' }]);
  out.push([undefined, { limit: 20, exclude: ['bought', 'seen'] }]);
  out.push([undefined, { limit: 12, intent: 'headphones for running' }]);
  out.push([undefined, { limit: 12, intent: 'zqxj vbnm plokij' }]);
  return out;
}

/** An agent for seed `seed`, with or without the shop's files, after its history and with a community release. */
async function agentFor(items: Item[], seed: number, shop: Awaited<ReturnType<typeof shopParts>> | undefined): Promise<MemoryAgent> {
  const vectors = new ItemVectors(createHashingEmbedder({ dim: 256 }), items);
  await vectors.warm();
  await vectors.centre();
  if (shop) vectors.useShop(new ShopKnowledge('rank-identity', shop.model, shop.sasrec));
  let n = 0;
  const agent = new MemoryAgent({ items: vectors, clock: () => T0 + 1_000 * MIN, newId: () => `m${++n}` });
  for (const e of history(items, seed)) await agent.observe(e);
  await agent.processPending();
  // a release: the departments as communities, popularity from 3,000 seeded reports
  const ids = items.map((it) => it.id);
  const space = { embedderId: vectors.embedderId, ids, vectors: (await vectors.vectorsOf(ids)).map((v) => v.vector) };
  const depts = groups(items);
  const communities = { communities: depts.map((g, i) => ({ id: `k${i}`, items: g })) };
  const ldp = { ...DEFAULT_LDP, ell: 1 };
  const hist = new ReportHistogram(ldp);
  const rng = new Rng(seed + 100);
  for (let d = 0; d < 3000; d++) {
    const g = depts[d % 3];
    hist.add(makeReport([g[rng.int(g.length)]], ldp, {}, () => rng.next()));
  }
  await agent.useRelease(buildRelease({ epoch: 1, epochMs: 1000, space, communities, hist, ldp, minContributors: -1e9 }));
  return agent;
}

async function main(): Promise<void> {
  const opts = new Command()
    .name('rank-identity')
    .description('write the full output of 204 seeded recommend() calls as JSON lines (compare two builds byte for byte)')
    .requiredOption('--out <file>', 'where to write the outputs (one JSON line per call)')
    .option('--check <file>', 'an earlier --out file: exit 1 at the first call whose output differs')
    .parse()
    .opts<{ out: string; check?: string }>();
  const t0 = performance.now();
  const items = productCatalog(CATALOG_SIZE);
  const ids = items.map((it) => it.id);
  const shop = await shopParts(items);
  const lines: string[] = [];
  for (const seed of [1, 2, 3]) {
    for (const withShop of [false, true]) {
      const agent = await agentFor(items, seed, withShop ? shop : undefined);
      for (const [cands, o] of calls(ids, seed)) {
        const out = await agent.recommend(cands, o);
        lines.push(JSON.stringify({ seed, shop: withShop, candidates: cands?.length ?? null, opts: o, out }));
      }
      process.stderr.write(`[rank-identity] seed ${seed}, ${withShop ? 'shop model' : 'content space'}: ${lines.length} calls\n`);
    }
  }
  const text = `${lines.join('\n')}\n`;
  writeFileSync(opts.out, text);
  const sha = createHash('sha256').update(text).digest('hex');
  console.log(
    `${lines.length} recommend() calls, ${(text.length / 1e6).toFixed(1)} MB, sha256 ${sha}, ${((performance.now() - t0) / 1000).toFixed(0)} s → ${opts.out}`,
  );
  if (opts.check) {
    const ref = readFileSync(opts.check, 'utf8').split('\n');
    const diff = lines.findIndex((l, i) => l !== ref[i]);
    if (diff >= 0 || ref.length !== lines.length + 1) {
      const at = diff >= 0 ? diff : lines.length;
      const a = lines[at] ?? '';
      const b = ref[at] ?? '';
      let c = 0;
      while (c < a.length && a[c] === b[c]) c++;
      console.error(
        `call ${at} differs from ${opts.check} at character ${c}:\n  now: …${a.slice(Math.max(0, c - 120), c + 120)}\n  ref: …${b.slice(Math.max(0, c - 120), c + 120)}`,
      );
      process.exit(1);
    }
    console.log(`identical to ${opts.check}`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
