/**
 * Privacy-leak measurement: how often a shared memory vector gives away the memory's own
 * catalog items to anyone who holds the public catalog (the index operator, or anyone who
 * receives member vectors in a released community).
 *
 * What it does, per user:
 * 1. trains the user's agent exactly as the benchmark's `atomem` method does (same negatives,
 *    same seeded ids, same config, USE-lite item vectors centred on the catalog mean);
 * 2. runs `agent.sync(…, 'embeddings')` against a recording {@link SharedIndex}: only what the
 *    agent's own sharing rules send is attacked (memories with `minShareEvidence`, positive
 *    strength, plus the shared profile record);
 * 3. puts each uploaded vector through the wire: optional `addGaussianNoise(v, sigma)` (what
 *    `HttpIndex` does with its `noise` option), then `encodeVector` / `decodeVector` (int8);
 * 4. the attacker ranks every catalog item by cosine to that vector and guesses the top 1 / 10.
 *
 * Reported: hit@1, hit@10 (a shared vector counts as a hit when its top-1 / top-10 guesses
 * contain at least one of the memory's own items), precision@10, the same for a random guess
 * (closed form and measured) and for a popularity guess, the mean cosine between the wire
 * vector and the clean one, and optionally NDCG@10 of `atomem` at `embeddings` with each noise
 * level (the whole index rebuilt from noised uploads). The same agents are also synced at level
 * `items`, and each shared item-id list gets its anonymity set: how many users of the dataset
 * have every item of it.
 *
 * CLI: `tsx src/bench/privacy-leak.ts --data ../shared/data/ml-100k [--users N] [--noise 0,0.02]
 * [--utility-users N|all|0] [--json FILE]`. The data is read from its path and never copied:
 * the output holds aggregate figures only (no item ids, no titles).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { MemoryAgent } from 'atomem/engine';
import { ItemVectors } from 'atomem/engine';
import { createInProcessIndex } from 'atomem/engine';
import type { CommunityView, SharedIndex, SharedMemoryUpload } from 'atomem/engine';
import { resolveConfig, tauFor } from 'atomem/engine';
import { actionWeight } from 'atomem/engine';
import type { MemoryState } from 'atomem/engine';
import { meanNormalized } from 'atomem/engine';
import { createCachedEmbedder, type CachedEmbedder } from 'atomem/engine';
import { createHashingEmbedder } from 'atomem/engine';
import type { Embedder } from 'atomem/engine';
import { decodeVector, encodeVector } from 'atomem/protocol';
import { addGaussianNoise } from 'atomem/engine';
import { compareIds, loadDataset } from './datasets.js';
import { ndcgAt, rankOf } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { idGenerator, negativeSampler, Rng } from './rng.js';
import type { Dataset, DatasetFormat, EvalCase } from './types.js';

/** Noise levels (Gaussian sigma per component, before re-normalising) measured by default. */
export const DEFAULT_NOISE_LEVELS: readonly number[] = [0, 0.02, 0.05, 0.1];

/** Number of guesses of the attacker (top-K nearest catalog items). */
export const ATTACK_K = 10;

/** Options of {@link measurePrivacyLeak}. */
export interface PrivacyLeakOptions {
  /** The public catalog and the shoppers' histories (loaded from a path; never copied). */
  dataset: Dataset;
  /**
   * Item embedder: `use-lite` (default, as the benchmark), `hashing` (256-d, tests only) or any
   * {@link Embedder}.
   */
  embedder?: 'use-lite' | 'hashing' | Embedder;
  /** Centre the item space on the catalog mean, as the benchmark does. Default true. */
  centre?: boolean;
  /** Attacked users (drawn like the benchmark's evaluated users): a count or `all` (default). */
  users?: number | 'all';
  /** Gaussian sigmas to measure. Default {@link DEFAULT_NOISE_LEVELS}. */
  noise?: readonly number[];
  /** Seed of the protocol, the agents' negatives and ids, and the random guess. Default 2026. */
  seed?: number;
  /** Agent config overrides (default: atomem's defaults, as `npm run bench`). */
  config?: Parameters<typeof resolveConfig>[0];
  /**
   * Users on whom NDCG@10 of `atomem` at `embeddings` is measured per noise level (drawn from
   * the attacked users; `all` = every attacked user). 0 (default) skips it: it trains every
   * user of the dataset (they all feed the index) and rebuilds the index once per level.
   */
  utilityUsers?: number | 'all';
  /** Random guesses per shared vector for the measured random baseline. Default 20. */
  randomTrials?: number;
  /**
   * Folder of the benchmark's item-vector disk cache (`.bench-cache/`, or `ATOMEM_BENCH_CACHE`);
   * `null` for none. Only used for `use-lite` / `hashing`.
   */
  cacheDir?: string | null;
  /** Progress (label, done, total), e.g. for a stderr line. */
  onProgress?: (label: string, done: number, total: number) => void;
}

/** hit@1, hit@10 and precision@10 over a set of shared vectors. */
export interface LeakFigures {
  /** Shared vectors counted. */
  n: number;
  /** Fraction whose top-1 guess is one of the memory's own items. */
  hit1: number;
  /** Fraction whose top-10 guesses contain at least one own item. */
  hit10: number;
  /** Mean fraction of the top-10 guesses that are own items. */
  precision10: number;
}

/** Attack figures of one kind of shared record. */
export interface LeakByKind {
  /** Every shared vector. */
  all: LeakFigures;
  /** Atomic memories only. */
  memory: LeakFigures;
  /** The shared profile record only (mean of the last liked items). */
  profile: LeakFigures;
}

/** One noise level. */
export interface LeakLevel {
  /** Gaussian sigma per component (0 = quantization only). */
  sigma: number;
  /** Mean cosine between the wire vector (noised, int8) and the clean memory vector. */
  cosine: number;
  /** The nearest-neighbour attacker. */
  attack: LeakByKind;
  /** NDCG@10 of atomem at `embeddings`, index built from these wire vectors (when measured). */
  ndcg10?: number;
}

/**
 * How identifying the item-id lists shared at level `items` are: the anonymity set of a list
 * is the number of the dataset's users whose history contains every item of it (the owner
 * included), i.e. who an attacker with everyone's histories could not tell apart.
 */
export interface ItemListFigures {
  /** Shared records carrying item ids. */
  n: number;
  /** Mean list length. */
  meanLength: number;
  /** Fraction of lists whose anonymity set is 1: only the owner has all these items. */
  unique: number;
  /** Fraction of lists whose anonymity set is below 5. */
  below5: number;
  /** Median anonymity set size. */
  medianSet: number;
}

/** Everything {@link measurePrivacyLeak} measured. Aggregates only. */
export interface PrivacyLeakReport {
  dataset: string;
  /** Catalog items the attacker ranks (the benchmark's catalog, after its k-core). */
  catalogItems: number;
  /** Users whose shared vectors were attacked. */
  users: number;
  embedderId: string;
  seed: number;
  /** Shared vectors attacked: total, atomic memories, profile records. */
  shared: { vectors: number; memories: number; profiles: number; usersSharing: number };
  /** Mean number of own items per shared vector (the ground truth size). */
  meanItems: { all: number; memory: number; profile: number };
  /** Baselines that ignore the vector. */
  baselines: {
    /** A uniform guess of 10 distinct catalog items: expected value in closed form. */
    randomExpected: LeakByKind;
    /** The same guess, drawn ({@link PrivacyLeakOptions.randomTrials} per vector). */
    randomMeasured: LeakByKind;
    /** The 10 most popular items (interaction counts in the training histories). */
    popularity: LeakByKind;
  };
  levels: LeakLevel[];
  /** The same agents synced at level `items`: anonymity sets of the shared item lists. */
  itemLists: { memory: ItemListFigures; profile: ItemListFigures };
  /** Utility: NDCG@10 users, and the no-sharing reference (`off`); or why it was skipped. */
  utility: { users: number; off: number } | { skipped: string };
  seconds: number;
}

/** One shared vector with its ground truth (indices into the catalog). */
interface SharedRecord {
  kind: 'memory' | 'profile';
  vector: Float32Array;
  items: Int32Array;
}

/** A {@link SharedIndex} that only records uploads (pulls return nothing). */
class RecordingIndex implements SharedIndex {
  readonly uploads: SharedMemoryUpload[] = [];
  constructor(readonly embedderId: string) {}
  async upsert(batch: readonly SharedMemoryUpload[]): Promise<void> {
    this.uploads.push(...batch);
  }
  async delete(): Promise<void> {}
  async communities(): Promise<CommunityView[]> {
    return [];
  }
}

/**
 * A vector as the service receives it from `HttpIndex`: Gaussian noise of `sigma` (then
 * re-normalised) when `sigma > 0`, then int8 quantization and back.
 */
export function toWire(v: Float32Array, sigma: number): Float32Array {
  return decodeVector(encodeVector(addGaussianNoise(v, sigma)));
}

/**
 * A {@link SharedIndex} that puts every uploaded vector through {@link toWire} before `inner`
 * sees it: the in-process index then holds what a networked service would.
 */
export function wireIndex(inner: SharedIndex, sigma: number): SharedIndex {
  return {
    embedderId: inner.embedderId,
    upsert: (batch) => inner.upsert(batch.map((u) => ({ ...u, vector: toWire(u.vector, sigma) }))),
    delete: (ids) => inner.delete(ids),
    communities: (ids) => inner.communities(ids),
  };
}

/**
 * Expected hit@k of a uniform guess of `k` distinct items out of `catalog`, for a memory with
 * `own` items: 1 − C(catalog − own, k) / C(catalog, k). For k = 1 that is own / catalog.
 */
export function expectedRandomHit(own: number, catalog: number, k: number): number {
  if (!(catalog >= 1) || own < 0 || own > catalog || k < 0 || k > catalog) throw new RangeError(`expectedRandomHit: need 0 ≤ own, k ≤ catalog, got own ${own}, k ${k}, catalog ${catalog}`);
  let miss = 1;
  for (let i = 0; i < k; i++) {
    if (catalog - own - i <= 0) return 1;
    miss *= (catalog - own - i) / (catalog - i);
  }
  return 1 - miss;
}

/** Running sums of hit@1, hit@10, precision@10 per kind. */
class Tally {
  private readonly sums = { memory: [0, 0, 0, 0], profile: [0, 0, 0, 0] };
  add(kind: SharedRecord['kind'], hit1: number, hit10: number, p10: number): void {
    const s = this.sums[kind];
    s[0]++;
    s[1] += hit1;
    s[2] += hit10;
    s[3] += p10;
  }
  result(): LeakByKind {
    const fig = (s: number[]): LeakFigures => ({ n: s[0], hit1: s[0] ? s[1] / s[0] : NaN, hit10: s[0] ? s[2] / s[0] : NaN, precision10: s[0] ? s[3] / s[0] : NaN });
    const m = this.sums.memory;
    const p = this.sums.profile;
    return { all: fig(m.map((x, i) => x + p[i])), memory: fig(m), profile: fig(p) };
  }
}

/** Hits of a ranked guess list against a sorted set of own item indices. */
function score(guess: ArrayLike<number>, own: ReadonlySet<number>): [hit1: number, hit10: number, p10: number] {
  let found = 0;
  for (let i = 0; i < guess.length; i++) if (own.has(guess[i])) found++;
  return [own.has(guess[0]) ? 1 : 0, found > 0 ? 1 : 0, found / guess.length];
}

/** Row-major catalog matrix (unit rows) for the attacker. */
interface CatalogMatrix {
  ids: string[];
  dim: number;
  data: Float32Array;
}

/** Indices of the `k` rows with the largest dot product with `q`, best first (ties: lower index). */
function nearest(m: CatalogMatrix, q: Float32Array, k: number, out: Int32Array, scores: Float64Array): void {
  const { dim, data } = m;
  const n = m.ids.length;
  let filled = 0;
  for (let r = 0; r < n; r++) {
    let s = 0;
    const off = r * dim;
    for (let j = 0; j < dim; j++) s += data[off + j] * q[j];
    if (filled === k && s <= scores[k - 1]) continue;
    let pos = filled < k ? filled++ : k - 1;
    while (pos > 0 && scores[pos - 1] < s) {
      scores[pos] = scores[pos - 1];
      out[pos] = out[pos - 1];
      pos--;
    }
    scores[pos] = s;
    out[pos] = r;
  }
}

function dotf(a: Float32Array, b: Float32Array): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

function normOf(a: Float32Array): number {
  return Math.sqrt(dotf(a, a));
}


function cacheFile(dir: string, embedderId: string, dataset: string): string {
  return join(dir, `${dataset}-${embedderId.replace(/[^a-z0-9.-]+/gi, '_')}.json`);
}

/** The catalog's item vectors, as the benchmark's `catalogFor` builds them (same disk cache file). */
export async function catalogVectors(opts: PrivacyLeakOptions, progress: (label: string, done: number, total: number) => void): Promise<ItemVectors> {
  const kind = opts.embedder ?? 'use-lite';
  let emb: Embedder;
  let cached: CachedEmbedder | undefined;
  if (typeof kind === 'string') {
    let inner: Embedder;
    if (kind === 'use-lite') inner = await (await import('atomem/engine')).createUseLiteEmbedder();
    else if (kind === 'hashing') inner = createHashingEmbedder({ dim: 256 });
    else throw new RangeError(`embedder must be use-lite, hashing or an Embedder, got ${String(kind)}`);
    emb = cached = createCachedEmbedder(inner, { maxEntries: 200_000 });
  } else {
    emb = kind;
  }
  const dir = opts.cacheDir === undefined ? (process.env.ATOMEM_BENCH_CACHE ?? '.bench-cache') : opts.cacheDir;
  const file = cached && dir ? cacheFile(dir, cached.id, opts.dataset.name) : undefined;
  let loaded = 0;
  if (file && cached && existsSync(file)) {
    try {
      loaded = cached.load(JSON.parse(readFileSync(file, 'utf8')) as [string, number[]][]).loaded;
    } catch {
      /* a damaged cache is only a slower start */
    }
  }
  const items = new ItemVectors(emb, opts.dataset.items.values());
  await items.warm((done, total) => progress('embedding catalog', done, total));
  if (opts.centre !== false) await items.centre();
  if (file && cached && cached.cache.size > loaded) {
    try {
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, JSON.stringify(cached.snapshot().map(([k, v]) => [k, Array.from(v)])));
    } catch {
      /* read-only checkout: fine */
    }
  }
  return items;
}

/** One trained user, as the benchmark keeps it. */
interface Trained {
  state: MemoryState;
  lastAt: number;
}

/**
 * Measure how often shared vectors reveal their memory's items (see the module comment).
 * Deterministic for a seed except the Gaussian noise, which uses the platform's CSPRNG exactly
 * like `HttpIndex` (so figures at sigma > 0 vary slightly between runs).
 */
export async function measurePrivacyLeak(opts: PrivacyLeakOptions): Promise<PrivacyLeakReport> {
  const t0 = performance.now();
  const seed = opts.seed ?? DEFAULT_SEED;
  const noise = [...(opts.noise ?? DEFAULT_NOISE_LEVELS)];
  for (const s of noise) if (!(s >= 0) || !Number.isFinite(s)) throw new RangeError(`noise levels must be finite and ≥ 0, got ${s}`);
  const trials = opts.randomTrials ?? 20;
  if (!Number.isInteger(trials) || trials < 1) throw new RangeError(`randomTrials must be a positive integer, got ${trials}`);
  const progress = opts.onProgress ?? (() => {});
  const { dataset } = opts;
  const protocol = buildProtocol(dataset, { users: opts.users ?? 'all', seed });
  const items = await catalogVectors(opts, progress);
  const config = opts.config ?? {};
  const cfg = resolveConfig({ tau: tauFor(items.embedderId), ...config });

  // The attacker's catalog: every item of the shop, in a stable order.
  const ids = [...dataset.items.keys()].sort(compareIds);
  const indexOf = new Map(ids.map((id, i) => [id, i]));
  const vecs = await items.vectorsOf(ids);
  const dim = vecs[0].vector.length;
  const matrix: CatalogMatrix = { ids, dim, data: new Float32Array(ids.length * dim) };
  vecs.forEach((v, i) => matrix.data.set(v.vector, i * dim));
  const K = Math.min(ATTACK_K, ids.length);

  // Train agents exactly like AtomemMethod.train (same negatives and ids).
  const utilityN = opts.utilityUsers ?? 0;
  const attacked = protocol.cases.map((c) => c.user);
  const trainUsers = utilityN === 0 ? attacked : [...protocol.histories.keys()];
  const trained = new Map<string, Trained>();
  const catalog = [...dataset.items.keys()];
  let done = 0;
  for (const user of trainUsers) {
    const history = protocol.histories.get(user)!;
    progress('training agents', ++done, trainUsers.length);
    if (history.length === 0) continue;
    const negativeFor = negativeSampler(seed, user, catalog, new Set(history.map((i) => i.item)));
    const lastAt = history[history.length - 1].at;
    const agent = new MemoryAgent({ items, config, clock: () => lastAt, newId: idGenerator(seed, user) });
    await agent.train(history, negativeFor);
    trained.set(user, { state: agent.snapshot, lastAt });
  }
  const agentFor = (user: string, purpose: string): MemoryAgent => {
    const t = trained.get(user)!;
    return new MemoryAgent({ items, config, state: structuredClone(t.state), clock: () => t.lastAt, newId: idGenerator(seed, `${user}/${purpose}`) });
  };

  // What each attacked user's agent shares at `embeddings`, with each vector's own items.
  const records: SharedRecord[] = [];
  let usersSharing = 0;
  done = 0;
  for (const user of attacked) {
    progress('collecting shared vectors', ++done, attacked.length);
    if (!trained.has(user)) continue;
    const agent = agentFor(user, 'embeddings');
    const rec = new RecordingIndex(items.embedderId);
    await agent.sync(rec, 'embeddings', { pull: false });
    if (rec.uploads.length) usersSharing++;
    const byVector = new Map(agent.snapshot.memories.map((m) => [m.embedding.vector, m]));
    for (const u of rec.uploads) {
      if (u.items) throw new Error('privacy-leak: an upload at level `embeddings` carried item ids');
      const m = byVector.get(u.vector);
      let own: string[];
      let kind: SharedRecord['kind'];
      if (m) {
        own = m.items;
        kind = 'memory';
      } else {
        // The profile record (built inside sync): the distinct last liked items, as the agent does.
        const st = agent.snapshot;
        const liked = st.events.filter((e) => !e.pending && actionWeight(e.action) > 0).slice(-cfg.profileShareEvents);
        own = [...new Set(liked.map((e) => e.item))].filter((id) => items.has(id));
        const expect = meanNormalized((await items.vectorsOf(own)).map((v) => v.vector));
        if (own.length < 2 || dotf(expect, u.vector) < 0.9999) throw new Error(`privacy-leak: cannot attribute an upload of user ${user} to a memory or the profile record`);
        kind = 'profile';
      }
      records.push({ kind, vector: u.vector, items: Int32Array.from(new Set(own.filter((id) => indexOf.has(id)).map((id) => indexOf.get(id)!))) });
    }
  }

  // The same agents at level `items`: how many users share each uploaded item list.
  const usersOf = new Map<string, Set<string>>();
  for (const [user, seq] of dataset.sequences) {
    for (const x of seq) {
      let set = usersOf.get(x.item);
      if (!set) usersOf.set(x.item, (set = new Set()));
      set.add(user);
    }
  }
  const anonymity = (list: readonly string[]): number => {
    const sets = [...new Set(list)].map((id) => usersOf.get(id) ?? new Set<string>()).sort((a, b) => a.size - b.size);
    let n = 0;
    for (const u of sets[0]) if (sets.every((x) => x.has(u))) n++;
    return n;
  };
  const lists = { memory: [] as { length: number; set: number }[], profile: [] as { length: number; set: number }[] };
  done = 0;
  for (const user of attacked) {
    progress('collecting item lists (level items)', ++done, attacked.length);
    if (!trained.has(user)) continue;
    const agent = agentFor(user, 'items');
    const rec = new RecordingIndex(items.embedderId);
    await agent.sync(rec, 'items', { pull: false });
    const memoryVectors = new Set(agent.snapshot.memories.map((m) => m.embedding.vector));
    for (const u of rec.uploads) {
      if (!u.items || u.items.length === 0) continue;
      const set = anonymity(u.items);
      if (set < 1) throw new Error(`privacy-leak: user ${user} shared items that their own history lacks`);
      lists[memoryVectors.has(u.vector) ? 'memory' : 'profile'].push({ length: u.items.length, set });
    }
  }
  const listFigures = (xs: { length: number; set: number }[]): ItemListFigures => {
    const sets = xs.map((x) => x.set).sort((a, b) => a - b);
    const mid = sets.length >> 1;
    return {
      n: xs.length,
      meanLength: xs.length ? xs.reduce((a, x) => a + x.length, 0) / xs.length : NaN,
      unique: xs.length ? sets.filter((x) => x === 1).length / xs.length : NaN,
      below5: xs.length ? sets.filter((x) => x < 5).length / xs.length : NaN,
      medianSet: sets.length === 0 ? NaN : sets.length % 2 ? sets[mid] : (sets[mid - 1] + sets[mid]) / 2,
    };
  };

  // Baselines (independent of the vector): closed-form random, drawn random, popularity.
  const N = ids.length;
  const expected = new Tally();
  const drawn = new Tally();
  const popular = new Tally();
  const counts = new Float64Array(N);
  for (const seq of protocol.histories.values()) for (const x of seq) counts[indexOf.get(x.item)!]++;
  const popOrder = Int32Array.from(ids.keys()).sort((a, b) => counts[b] - counts[a] || a - b).slice(0, K);
  const guess = new Int32Array(K);
  const rng = Rng.derive(seed, 'privacy-random-guess');
  records.forEach((r) => {
    const own = new Set(r.items);
    const n = own.size;
    expected.add(r.kind, n / N, expectedRandomHit(n, N, K), n / N);
    let h1 = 0;
    let h10 = 0;
    let p10 = 0;
    for (let t = 0; t < trials; t++) {
      const taken = new Set<number>();
      for (let g = 0; g < K; ) {
        const x = rng.int(N);
        if (taken.has(x)) continue;
        taken.add(x);
        guess[g++] = x;
      }
      const [a, b, c] = score(guess, own);
      h1 += a;
      h10 += b;
      p10 += c;
    }
    drawn.add(r.kind, h1 / trials, h10 / trials, p10 / trials);
    popular.add(r.kind, ...score(popOrder, own));
  });

  // The nearest-neighbour attacker at each noise level.
  const levels: LeakLevel[] = [];
  const top = new Int32Array(K);
  const scores = new Float64Array(K);
  for (const sigma of noise) {
    const tally = new Tally();
    let cos = 0;
    records.forEach((r, i) => {
      if (i % 256 === 0) progress(`attacking (sigma ${sigma})`, i, records.length);
      const wire = toWire(r.vector, sigma);
      cos += dotf(wire, r.vector) / (normOf(wire) * normOf(r.vector) || 1);
      nearest(matrix, wire, K, top, scores);
      tally.add(r.kind, ...score(top, new Set(r.items)));
    });
    levels.push({ sigma, cosine: records.length ? cos / records.length : NaN, attack: tally.result() });
  }

  // Utility: NDCG@10 of atomem at `embeddings`, the index fed with wire vectors.
  let utility: PrivacyLeakReport['utility'] = { skipped: 'not asked (utilityUsers = 0)' };
  if (utilityN !== 0) {
    const pool = protocol.cases.filter((c) => trained.has(c.user));
    const cases: EvalCase[] =
      utilityN === 'all' || utilityN >= pool.length ? pool : Rng.derive(seed, 'privacy-utility').sampleWithoutReplacement(pool, utilityN).sort((a, b) => compareIds(a.user, b.user));
    const ndcgOf = async (agents: Map<string, MemoryAgent>): Promise<number> => {
      let s = 0;
      for (const c of cases) {
        const recs = await agents.get(c.user)!.recommend(c.candidates, { now: c.test.at });
        s += ndcgAt(rankOf(recs.map((r) => r.id), c.test.item), 10);
      }
      return s / cases.length;
    };
    const offAgents = new Map(cases.map((c) => [c.user, agentFor(c.user, 'off')]));
    const off = await ndcgOf(offAgents);
    for (const level of levels) {
      // Same index as the benchmark's atomem method at `embeddings`.
      const index = createInProcessIndex({ embedderId: items.embedderId, k1: cfg.k1, tau: cfg.tau, maxMembers: 200, memberSelection: 'similar', minCommunitySize: 3, itemNoise: 0, seed });
      const wire = wireIndex(index, level.sigma);
      const agents = new Map<string, MemoryAgent>();
      const wanted = new Set(cases.map((c) => c.user));
      done = 0;
      for (const user of trained.keys()) {
        progress(`index at sigma ${level.sigma}`, ++done, trained.size);
        const agent = agentFor(user, 'embeddings');
        await agent.sync(wire, 'embeddings', { pull: false });
        if (wanted.has(user)) agents.set(user, agent);
      }
      done = 0;
      for (const c of cases) {
        progress(`pulling communities (sigma ${level.sigma})`, ++done, cases.length);
        await agents.get(c.user)!.pullCommunities(index);
      }
      level.ndcg10 = await ndcgOf(agents);
    }
    utility = { users: cases.length, off };
  }

  const kindMean = (k?: SharedRecord['kind']) => {
    const rs = k ? records.filter((r) => r.kind === k) : records;
    return rs.length ? rs.reduce((a, r) => a + r.items.length, 0) / rs.length : NaN;
  };
  return {
    dataset: dataset.name,
    catalogItems: N,
    users: attacked.length,
    embedderId: items.embedderId,
    seed,
    shared: {
      vectors: records.length,
      memories: records.filter((r) => r.kind === 'memory').length,
      profiles: records.filter((r) => r.kind === 'profile').length,
      usersSharing,
    },
    meanItems: { all: kindMean(), memory: kindMean('memory'), profile: kindMean('profile') },
    baselines: { randomExpected: expected.result(), randomMeasured: drawn.result(), popularity: popular.result() },
    levels,
    itemLists: { memory: listFigures(lists.memory), profile: listFigures(lists.profile) },
    utility,
    seconds: (performance.now() - t0) / 1000,
  };
}

const f3 = (x: number | undefined) => (typeof x === 'number' && Number.isFinite(x) ? x.toFixed(3) : '—');

/** The report as markdown tables (what the CLI prints). */
export function formatPrivacyLeak(r: PrivacyLeakReport): string {
  const out: string[] = [];
  out.push(
    `Dataset ${r.dataset}: ${r.users} users attacked, catalog ${r.catalogItems} items, embedder ${r.embedderId}, seed ${r.seed}.`,
    `Shared vectors at \`embeddings\`: ${r.shared.vectors} (${r.shared.memories} atomic memories, ${r.shared.profiles} profile records; ${r.shared.usersSharing} users share anything).`,
    `Own items per shared vector (mean): all ${r.meanItems.all.toFixed(2)}, memories ${r.meanItems.memory.toFixed(2)}, profile records ${r.meanItems.profile.toFixed(2)}.`,
    '',
    '| attacker | sigma | cos(wire, clean) | hit@1 | hit@10 | precision@10 | NDCG@10 (atomem, embeddings) |',
    '|---|---:|---:|---:|---:|---:|---:|',
  );
  const ndcgOff = 'off' in r.utility ? r.utility.off : undefined;
  for (const l of r.levels) {
    const a = l.attack.all;
    out.push(`| nearest catalog items | ${l.sigma} | ${f3(l.cosine)} | ${f3(a.hit1)} | ${f3(a.hit10)} | ${f3(a.precision10)} | ${f3(l.ndcg10)} |`);
  }
  const b = r.baselines;
  out.push(`| random guess, closed form | — | — | ${f3(b.randomExpected.all.hit1)} | ${f3(b.randomExpected.all.hit10)} | ${f3(b.randomExpected.all.precision10)} | — |`);
  out.push(`| random guess, drawn | — | — | ${f3(b.randomMeasured.all.hit1)} | ${f3(b.randomMeasured.all.hit10)} | ${f3(b.randomMeasured.all.precision10)} | — |`);
  out.push(`| 10 most popular items | — | — | ${f3(b.popularity.all.hit1)} | ${f3(b.popularity.all.hit10)} | ${f3(b.popularity.all.precision10)} | — |`);
  if (ndcgOff !== undefined) out.push(`| (no sharing: privacy \`off\`) | — | — | — | — | — | ${f3(ndcgOff)} |`);
  out.push('');
  out.push('By kind of shared record (hit@1 / hit@10 / precision@10):', '');
  out.push('| attacker | sigma | atomic memories | profile records |', '|---|---:|---|---|');
  const trio = (x: LeakFigures) => `${f3(x.hit1)} / ${f3(x.hit10)} / ${f3(x.precision10)}`;
  for (const l of r.levels) out.push(`| nearest catalog items | ${l.sigma} | ${trio(l.attack.memory)} | ${trio(l.attack.profile)} |`);
  out.push(`| random guess, closed form | — | ${trio(b.randomExpected.memory)} | ${trio(b.randomExpected.profile)} |`);
  out.push(`| 10 most popular items | — | ${trio(b.popularity.memory)} | ${trio(b.popularity.profile)} |`);
  out.push('');
  out.push(
    'Item lists shared at level `items` (same agents): anonymity set = users of the dataset whose history holds every item of the list.',
    '',
    '| shared record | lists | mean length | anonymity set 1 (unique) | anonymity set < 5 | median anonymity set |',
    '|---|---:|---:|---:|---:|---:|',
  );
  for (const [name, x] of [
    ['atomic memories', r.itemLists.memory],
    ['profile records', r.itemLists.profile],
  ] as const) {
    out.push(`| ${name} | ${x.n} | ${x.meanLength.toFixed(2)} | ${f3(x.unique)} | ${f3(x.below5)} | ${Number.isFinite(x.medianSet) ? x.medianSet : '—'} |`);
  }
  out.push('');
  out.push('skipped' in r.utility ? `NDCG@10 skipped: ${r.utility.skipped}.` : `NDCG@10 on ${r.utility.users} users (protocol loo, full setting, test items).`);
  out.push(`Wall time of the measurement: ${r.seconds.toFixed(1)} s.`);
  return out.join('\n');
}

function parseCount(value: string, name: string, allowZero: boolean): number | 'all' {
  if (value === 'all') return 'all';
  if (!/^[0-9]+$/.test(value) || (!allowZero && Number(value) < 1)) throw new RangeError(`${name}: expected ${allowZero ? 'a non-negative' : 'a positive'} integer or "all", got ${value}`);
  return Number(value);
}

const USAGE = `usage: tsx src/bench/privacy-leak.ts --data DIR [--format movielens|agentcf|jsonl] [--users N|all]
       [--noise 0,0.02,0.05,0.1] [--utility-users N|all|0] [--seed N] [--embedder use-lite|hashing] [--json FILE]`;

/** CLI entry: prints markdown on stdout, progress on stderr; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        data: { type: 'string' },
        format: { type: 'string', default: 'movielens' },
        users: { type: 'string', default: 'all' },
        noise: { type: 'string', default: DEFAULT_NOISE_LEVELS.join(',') },
        'utility-users': { type: 'string', default: '0' },
        seed: { type: 'string', default: String(DEFAULT_SEED) },
        embedder: { type: 'string', default: 'use-lite' },
        json: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let users: number | 'all';
  let utilityUsers: number | 'all';
  let noise: number[];
  let seed: number;
  try {
    if (!values.data) throw new RangeError('--data is required');
    users = parseCount(values.users!, '--users', false);
    utilityUsers = parseCount(values['utility-users']!, '--utility-users', true);
    noise = values.noise!.split(',').map((s) => {
      const x = Number(s.trim());
      if (s.trim() === '' || !Number.isFinite(x) || x < 0) throw new RangeError(`--noise: expected comma-separated numbers ≥ 0, got ${JSON.stringify(values.noise)}`);
      return x;
    });
    if (!/^-?[0-9]+$/.test(values.seed!)) throw new RangeError(`--seed: expected an integer, got ${values.seed}`);
    seed = Number(values.seed);
    if (values.embedder !== 'use-lite' && values.embedder !== 'hashing') throw new RangeError(`--embedder: use-lite or hashing, got ${values.embedder}`);
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  let dataset: Dataset;
  try {
    dataset = loadDataset(values.format as DatasetFormat, values.data!);
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    return 2;
  }
  let last = 0;
  let lastLabel = '';
  const tty = process.stderr.isTTY === true;
  const onProgress = (label: string, done: number, total: number) => {
    if (!tty) {
      // why: a redirected stderr gets one line per phase, not a stream of carriage returns
      if (label !== lastLabel) process.stderr.write(`${label} (${total})\n`);
      lastLabel = label;
      return;
    }
    const now = Date.now();
    if (now - last < 500 && done < total) return;
    last = now;
    process.stderr.write(`\r${label}: ${done}/${total}\x1b[K`);
  };
  const report = await measurePrivacyLeak({
    dataset,
    embedder: values.embedder as 'use-lite' | 'hashing',
    users,
    noise,
    seed,
    utilityUsers,
    onProgress,
  });
  if (tty) process.stderr.write('\r\x1b[K');
  process.stdout.write(`${formatPrivacyLeak(report)}\n`);
  if (values.json) {
    const command = `tsx src/bench/privacy-leak.ts ${argv.join(' ')}`;
    writeFileSync(values.json, JSON.stringify({ command, ...report }, null, 2) + '\n');
  }
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
