/**
 * atomem and its ablations as benchmark methods. Every user gets their own MemoryAgent that
 * learns only from that user's history (STEAM's training loop); at privacy `embeddings` or
 * `items` each agent shares its memories with one in-process shared index, then pulls its
 * communities; ranking is the agent's own `recommend()`.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryAgent, type AgentMode } from '../agent/agent.js';
import { ItemVectors } from '../agent/items.js';
import { createInProcessIndex, type InProcessIndex } from '../community/index.js';
import { resolveConfig, tauFor, type AtomemConfig } from '../core/config.js';
import type { Item } from '../core/types.js';
import { createCachedEmbedder, type CachedEmbedder } from '../embed/cache.js';
import { createHashingEmbedder } from '../embed/hashing.js';
import { createUseLiteEmbedder } from '../embed/use-lite.js';
import type { Embedder } from '../embed/types.js';
import { fidelity } from './metrics.js';
import { registerMethod, type MethodOptions } from './registry.js';
import { Rng } from './rng.js';
import type { Dataset, EvalCase, Method, MethodContext, Privacy } from './types.js';

const embedders = new Map<string, Promise<CachedEmbedder>>();
const catalogs = new WeakMap<Dataset, Map<string, Promise<ItemVectors>>>();

/** One embedder per kind per process, with a disk cache of item vectors in `.bench-cache/`. */
function embedderFor(kind: string): Promise<CachedEmbedder> {
  let e = embedders.get(kind);
  if (!e) {
    e = (async () => {
      let inner: Embedder;
      if (kind === 'use-lite') inner = await createUseLiteEmbedder();
      else if (kind === 'hashing') inner = createHashingEmbedder({ dim: 256 });
      else throw new Error(`atomem.embedder must be use-lite or hashing, got ${kind}`);
      return createCachedEmbedder(inner, { maxEntries: 200_000 });
    })();
    embedders.set(kind, e);
  }
  return e;
}

function cacheFile(embedderId: string, dataset: string): string {
  return join(process.env.ATOMEM_BENCH_CACHE ?? '.bench-cache', `${dataset}-${embedderId.replace(/[^a-z0-9.-]+/gi, '_')}.json`);
}

/** Item vectors of a dataset's catalog, embedded once per process (and cached on disk). */
async function catalogFor(ds: Dataset, kind: string, ctx: MethodContext): Promise<ItemVectors> {
  let byKind = catalogs.get(ds);
  if (!byKind) catalogs.set(ds, (byKind = new Map()));
  let p = byKind.get(kind);
  if (!p) {
    p = (async () => {
      const emb = await embedderFor(kind);
      const file = cacheFile(emb.id, ds.name);
      if (existsSync(file)) {
        try {
          emb.load(JSON.parse(readFileSync(file, 'utf8')) as [string, number[]][]);
        } catch {
          /* a damaged cache is only a slower start */
        }
      }
      const items = new ItemVectors(emb, ds.items.values());
      await items.warm((done, total) => ctx.progress(done, total, 'embedding catalog'));
      try {
        mkdirSync(join(file, '..'), { recursive: true });
        writeFileSync(file, JSON.stringify(emb.snapshot().map(([k, v]) => [k, Array.from(v)])));
      } catch {
        /* read-only checkout: fine */
      }
      return items;
    })();
    byKind.set(kind, p);
  }
  return p;
}

/** Deterministic random-looking ids (the benchmark must be reproducible). */
function idGenerator(seed: number, user: string): () => string {
  const rng = Rng.derive(seed, 'ids', user);
  return () => rng.nextUint32().toString(16).padStart(8, '0') + rng.nextUint32().toString(16).padStart(8, '0');
}

function paramNumber(params: Readonly<Record<string, string>>, key: string): number | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`parameter ${key} must be a number, got ${JSON.stringify(v)}`);
  return n;
}

/** Config overrides from `--param atomem.<knob>=value` (and `atomem.w.<weight>=value`). */
function configFrom(params: Readonly<Record<string, string>>): Parameters<typeof resolveConfig>[0] {
  const partial: Record<string, unknown> = {};
  const weights: Record<string, number> = {};
  for (const key of Object.keys(params)) {
    if (!key.startsWith('atomem.') || key === 'atomem.embedder') continue;
    const knob = key.slice('atomem.'.length);
    if (['communityTau', 'minCommunitySize', 'itemNoise', 'maxMembers', 'fidelityUsers'].includes(knob)) continue;
    const n = paramNumber(params, key)!;
    if (knob.startsWith('w.')) weights[knob.slice(2)] = n;
    else partial[knob] = n;
  }
  resolveConfig({ ...(partial as Partial<AtomemConfig>), weights }); // validate early
  return { ...(partial as Partial<AtomemConfig>), weights };
}

/** atomem as a benchmark method. */
export class AtomemMethod implements Method {
  readonly name: string;
  private readonly privacy: Privacy;
  private readonly mode: AgentMode & { communities: boolean };
  private readonly params: Readonly<Record<string, string>>;
  private readonly config: Parameters<typeof resolveConfig>[0];
  private agents = new Map<string, MemoryAgent>();
  private index: InProcessIndex | undefined;
  private ctx!: MethodContext;
  private forwardCorrect = 0;
  private forwardSteps = 0;

  constructor(opts: MethodOptions, mode: Partial<AgentMode & { communities: boolean }> = {}) {
    this.name = opts.name;
    this.privacy = opts.privacy;
    this.params = opts.params;
    this.mode = { atomic: true, consolidation: true, communities: true, ...mode };
    this.config = configFrom(opts.params);
  }

  async prepare(ctx: MethodContext): Promise<void> {
    this.ctx = ctx;
    const items = await catalogFor(ctx.dataset, this.params['atomem.embedder'] ?? 'use-lite', ctx);
    const share = this.mode.communities && this.privacy !== 'off';
    const cfg = resolveConfig({ tau: tauFor(items.embedder.id), ...this.config });
    if (share) {
      this.index = createInProcessIndex({
        embedderId: items.embedder.id,
        k1: cfg.k1,
        tau: paramNumber(this.params, 'atomem.communityTau') ?? cfg.tau,
        maxMembers: paramNumber(this.params, 'atomem.maxMembers') ?? 200,
        minCommunitySize: paramNumber(this.params, 'atomem.minCommunitySize') ?? 3,
        itemNoise: paramNumber(this.params, 'atomem.itemNoise') ?? 0,
        seed: ctx.seed,
      });
    }
    const catalog = [...ctx.dataset.items.keys()];
    const users = [...ctx.histories.keys()];
    let done = 0;
    for (const user of users) {
      const history = ctx.histories.get(user)!;
      if (history.length === 0) continue;
      const seen = new Set(history.map((i) => i.item));
      const rng = Rng.derive(ctx.seed, 'atomem-negatives', user);
      const negativeFor = () => {
        for (let tries = 0; tries < 100; tries++) {
          const id = catalog[rng.int(catalog.length)];
          if (!seen.has(id)) return id;
        }
        return undefined;
      };
      let lastAt = history[history.length - 1].at;
      const agent = new MemoryAgent({ items, config: this.config, mode: this.mode, clock: () => lastAt, newId: idGenerator(ctx.seed, user) });
      const r = await agent.train(history, negativeFor);
      this.forwardCorrect += r.correct;
      this.forwardSteps += r.steps;
      if (this.index) await agent.sync(this.index, this.privacy, { pull: false });
      this.agents.set(user, agent);
      lastAt = history[history.length - 1].at;
      ctx.progress(++done, users.length, 'training agents');
    }
    if (this.index) {
      let pulled = 0;
      for (const c of ctx.cases) {
        await this.agents.get(c.user)?.pullCommunities(this.index);
        ctx.progress(++pulled, ctx.cases.length, 'pulling communities');
      }
    }
  }

  async rank(c: EvalCase): Promise<string[]> {
    const agent = this.agents.get(c.user);
    if (!agent) return [...c.candidates];
    const recs = await agent.recommend(c.candidates, { now: c.test.at });
    if (process.env.ATOMEM_DUMP_FEATURES) {
      // why: offline tuning of the ranking weights on validation cases (never on test items).
      appendFileSync(process.env.ATOMEM_DUMP_FEATURES, JSON.stringify({ user: c.user, target: c.test.item, recs: recs.map((r) => [r.id, r.features]) }) + '\n');
    }
    return recs.map((r) => r.id);
  }

  async extras(): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {
      forwardAccuracy: this.forwardSteps ? this.forwardCorrect / this.forwardSteps : 0,
      memoriesPerUser: mean([...this.agents.values()].map((a) => a.snapshot.memories.length)),
    };
    if (this.index) {
      const s = this.index.stats();
      out.index = { memories: s.memories, edges: s.edges, communities: s.communities, largestCommunity: s.largestCommunity, largestShare: s.largestShare, sizeHistogram: s.sizeHistogram, releasable: s.releasableCommunities };
    }
    return out;
  }
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

const levels: Privacy[] = ['off', 'embeddings', 'items'];
registerMethod('atomem', (o) => new AtomemMethod(o), { privacyLevels: levels, description: 'atomem: atomic memories + communities' });
registerMethod('atomem-single-summary', (o) => new AtomemMethod(o, { atomic: false }), {
  privacyLevels: levels,
  description: 'ablation: one summary memory instead of atomic memories',
});
registerMethod('atomem-no-consolidation', (o) => new AtomemMethod(o, { consolidation: false }), {
  privacyLevels: levels,
  description: 'ablation: every interaction forms a new memory',
});
registerMethod('atomem-no-communities', (o) => new AtomemMethod(o, { communities: false }), {
  privacyLevels: levels,
  description: 'ablation: no shared index (own memories only)',
});

export type { Item };
