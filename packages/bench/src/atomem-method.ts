/**
 * atomem and its ablations as benchmark methods. Every user gets their own MemoryAgent that
 * learns only from that user's history (STEAM's training loop); at privacy `contribute` every
 * agent reports to the real index service (protocol v2) for one simulated epoch and then ranks
 * with its release; ranking is the agent's own `recommend()`.
 */
import { appendFileSync } from 'node:fs';
import { readVectorCache, vectorCacheFile, writeVectorCache } from './vector-cache.js';
import { MemoryAgent, type AgentMode, type AgentOptions } from 'atomem/engine';
import { ItemVectors } from 'atomem/engine';
import { LlmReasoner, addCosts, zeroCosts } from 'atomem/engine';
import { llmPlanner } from 'atomem/engine';
import { OPERATIONS } from 'atomem/engine';
import { createOpenAICompatibleModel } from 'atomem/engine';
import { createScriptedModel } from 'atomem/engine';
import type { LanguageModel } from 'atomem/engine';
import { resolveConfig, type AtomemConfig } from 'atomem/engine';
import type { MemoryState } from 'atomem/engine';
import { createCachedEmbedder, type CachedEmbedder } from 'atomem/engine';
import { createHashingEmbedder } from 'atomem/engine';
import { createUseLiteEmbedder } from 'atomem/engine';
import type { Embedder } from 'atomem/engine';
import { fidelity } from './metrics.js';
import { itemSpaceOf, runEpoch } from './v2-epoch.js';
import type { Release } from 'atomem/protocol';
import { paramNumber, registerMethod, type MethodOptions } from './registry.js';
import { idGenerator, negativeSampler, Rng } from './rng.js';
import { BenchUsageError } from './run.js';
import { fullRankingContext, publishedSequence, shopKnowledgeFor, shopUntil } from './shop-publish.js';
import type { ShopKnowledge } from 'atomem/shop';
import { DEFAULT_CONFIG, type LifecycleEvent } from 'atomem/engine';
import type { Dataset, Method, MethodContext, Privacy, RankCase } from './types.js';
import type { Interaction } from 'atomem/engine';

/**
 * The reasoner the benchmark's agents use: rules (default), or `atomem.reasoner=llm` with
 * `atomem.llm=openai-compatible` (`atomem.llmUrl`, `atomem.llmModel`: any local server, to
 * reproduce the papers' LLM rows) or `atomem.llm=scripted` (no model; plumbing and tests).
 */
function llmModelFrom(params: Readonly<Record<string, string>>): LanguageModel | undefined {
  const kind = params['atomem.reasoner'] ?? 'rules';
  if (kind === 'rules') return undefined;
  if (kind !== 'llm') throw new Error(`atomem.reasoner must be rules or llm, got ${kind}`);
  const llm = params['atomem.llm'] ?? 'scripted';
  if (llm === 'scripted') return createScriptedModel();
  if (llm === 'openai-compatible') {
    const url = params['atomem.llmUrl'];
    const model = params['atomem.llmModel'];
    if (!url || !model) throw new Error('--llm openai-compatible needs --llm-url and --llm-model');
    return createOpenAICompatibleModel({ baseUrl: url, model });
  }
  throw new Error(`atomem.llm must be scripted or openai-compatible, got ${llm}`);
}

const embedders = new Map<string, Promise<CachedEmbedder>>();

/** One user's trained memory, shared by the runs of one variant. */
interface Trained {
  state: MemoryState;
  correct: number;
  steps: number;
  lastAt: number;
  /** Lifecycle operations during training (op → count). */
  ops: Record<string, number>;
}
const trainedCache = new WeakMap<Dataset, Map<string, Promise<Map<string, Trained>>>>();
const catalogs = new WeakMap<Dataset, Map<string, Promise<ItemVectors>>>();

/** One embedder per kind per process, with a disk cache of item vectors in `.bench-cache/`. */
function embedderFor(kind: string): Promise<CachedEmbedder> {
  let e = embedders.get(kind);
  if (!e) {
    e = (async () => {
      let inner: Embedder;
      if (kind === 'use-lite') inner = await createUseLiteEmbedder();
      // the published float32 weights, for comparing against the shipped uint8 ones
      else if (kind === 'use-lite-float32') inner = await createUseLiteEmbedder({ weights: 'float32' });
      else if (kind === 'hashing') inner = createHashingEmbedder({ dim: 256 });
      else throw new Error(`atomem.embedder must be use-lite, use-lite-float32 or hashing, got ${kind}`);
      return createCachedEmbedder(inner, { maxEntries: 200_000 });
    })();
    embedders.set(kind, e);
  }
  return e;
}

/**
 * Item vectors of a dataset, embedded once per process (and cached on disk, binary): only the items
 * a run needs — every item of the dataset's sequences and every candidate of the context's cases;
 * other catalog items are embedded on first use. Centring uses the mean of the sequence items
 * (for a k-core-filtered catalog that is the whole catalog).
 */
async function catalogFor(ds: Dataset, kind: string, centre: boolean, ctx: Pick<MethodContext, 'progress' | 'cases'>): Promise<ItemVectors> {
  let byKind = catalogs.get(ds);
  if (!byKind) catalogs.set(ds, (byKind = new Map()));
  let p = byKind.get(`${kind}:${centre}`);
  if (!p) {
    p = (async () => {
      const emb = await embedderFor(kind);
      const warn = (m: string) => process.stderr.write(`warning: ${m}\n`);
      const file = vectorCacheFile(emb.id, ds.name);
      const items = new ItemVectors(emb, ds.items.values());
      const cached = readVectorCache(file, emb, ds.items, warn);
      for (const [id, v] of cached) items.seed(id, v);
      const seen = new Set<string>();
      for (const seq of ds.sequences.values()) for (const x of seq) if (ds.items.has(x.item)) seen.add(x.item);
      const needed = new Set(seen);
      for (const c of ctx.cases) for (const id of c.candidates) if (ds.items.has(id)) needed.add(id);
      const missing = [...needed].filter((id) => !cached.has(id));
      for (let i = 0; i < missing.length; i += 256) {
        await items.vectorsOf(missing.slice(i, i + 256));
        ctx.progress(Math.min(missing.length, i + 256), missing.length, 'embedding items');
      }
      if (missing.length) {
        const all = new Map(cached);
        for (const id of missing) all.set(id, items.raw(id)!);
        writeVectorCache(file, emb, ds.items, all, warn);
      }
      if (centre) {
        const ids = [...seen].sort();
        const vs = await items.vectorsOf(ids);
        const mean = new Float32Array(emb.dim);
        for (const e of vs) for (let d = 0; d < mean.length; d++) mean[d] += e.vector[d];
        for (let d = 0; d < mean.length; d++) mean[d] /= Math.max(1, vs.length);
        await items.centre(mean);
      }
      return items;
    })();
    byKind.set(`${kind}:${centre}`, p);
  }
  return p;
}

/** Raw (uncentred) USE-lite vectors of the given items, for diversity (ILD) of every method. */
export async function benchItemVectors(ds: Dataset, params: Readonly<Record<string, string>>, ids: readonly string[]): Promise<Map<string, Float32Array>> {
  const kind = params['atomem.embedder'] ?? 'use-lite';
  const items = await catalogFor(ds, kind, false, { progress() {}, cases: [] });
  const known = ids.filter((id) => ds.items.has(id));
  const vs = await items.vectorsOf(known);
  return new Map(known.map((id, i) => [id, vs[i].vector]));
}

/** Config overrides from `--param atomem.<knob>=value` (and `atomem.w.<weight>=value`). */
type ConfigPartial = NonNullable<Parameters<typeof resolveConfig>[0]>;
function configFrom(params: Readonly<Record<string, string>>): ConfigPartial {
  const partial: Record<string, unknown> = {};
  const weights: Record<string, number> = {};
  const shopWeights: Record<string, number> = {};
  const shopWeightsLive: Record<string, number> = {};
  const intentWeights: Record<string, number> = {};
  for (const key of Object.keys(params)) {
    if (key.startsWith('atomem.iw.')) {
      // intent weights (setting instruct): atomem.iw.intent, .intentTerms, .intentCategories, .intentMemory
      intentWeights[key.slice('atomem.iw.'.length)] = paramNumber(params, key)!;
      continue;
    }
    if (
      !key.startsWith('atomem.') ||
      [
        'atomem.itemVectors',
        'atomem.embedder',
        'atomem.centre',
        'atomem.reasoner',
        'atomem.planner',
        'atomem.llm',
        'atomem.llmUrl',
        'atomem.llmModel',
        'atomem.dumpFeatures',
        'atomem.wholeCatalog',
      ].includes(key)
    )
      continue;
    const knob = key.slice('atomem.'.length);
    if (knob === 'fidelityUsers') continue;
    if (knob === 'duplicateActions') {
      // a list of actions, e.g. atomem.duplicateActions=rate (every rated film counts as owned: the shelf rule's worst case on ratings)
      partial[knob] = params[key]
        .split(',')
        .map((a) => a.trim())
        .filter(Boolean);
      continue;
    }
    const n = paramNumber(params, key)!;
    if (knob.startsWith('w.')) weights[knob.slice(2)] = n;
    else if (knob.startsWith('sw.')) shopWeights[knob.slice(3)] = n;
    else if (knob.startsWith('swl.')) shopWeightsLive[knob.slice(4)] = n;
    else partial[knob] = n;
  }
  resolveConfig({ ...(partial as Partial<AtomemConfig>), weights, shopWeights, shopWeightsLive, intentWeights }); // validate early
  return {
    ...(partial as Partial<AtomemConfig>),
    weights,
    shopWeights,
    shopWeightsLive,
    ...(Object.keys(intentWeights).length ? { intentWeights } : {}),
  };
}

/** `atomem.itemVectors` (CLI `--item-vectors`): `hybrid` (default: the shop's published model) or `content`. */
export function itemVectorsKind(params: Readonly<Record<string, string>>): 'content' | 'hybrid' {
  const v = params['atomem.itemVectors'] ?? 'hybrid';
  if (v !== 'content' && v !== 'hybrid') throw new BenchUsageError(`--item-vectors (atomem.itemVectors) must be content or hybrid, got ${v}`);
  return v;
}

/** `atomem.wholeCatalog`: how the full-ranking protocols call `recommend()` (see {@link AtomemMethod.scoreAll}). */
export function wholeCatalogKind(params: Readonly<Record<string, string>>): 'candidates' | 'shortlist' {
  const v = params['atomem.wholeCatalog'] ?? 'candidates';
  if (v !== 'candidates' && v !== 'shortlist') throw new BenchUsageError(`atomem.wholeCatalog must be candidates or shortlist, got ${v}`);
  return v;
}

/**
 * Which parameters of the run change a shipped default of atomem, the shop model or SASRec
 * (empty = every component ran with its shipped defaults). The benchmark's own harness knobs
 * (the item-vector choice, cut-off, dumps, progress) are not defaults of a component.
 */
export function overriddenDefaults(params: Readonly<Record<string, string>>): string[] {
  const harness = new Set(['atomem.itemVectors', 'atomem.dumpFeatures', 'atomem.fidelityUsers', 'atomem.wholeCatalog', 'shop.until']);
  return Object.keys(params)
    .filter((k) => (k.startsWith('atomem.') || k.startsWith('shop.') || k.startsWith('sasrec.')) && !harness.has(k))
    .sort();
}

/** The item space of one shop file: the catalog moved to its collaborative vectors (one per file, shared by every agent). */
const shopSpaces = new WeakMap<ShopKnowledge, Promise<ItemVectors>>();
function shopSpaceFor(ds: Dataset, kind: string, shop: ShopKnowledge): Promise<ItemVectors> {
  let p = shopSpaces.get(shop);
  if (!p) {
    p = (async () => {
      const items = new ItemVectors(await embedderFor(kind), ds.items.values());
      items.useShop(shop);
      // every vector up front: the hot loops read them synchronously
      await items.vectorsOf([...ds.items.keys()]);
      return items;
    })();
    shopSpaces.set(shop, p);
  }
  return p;
}

/** atomem as a benchmark method. */
export class AtomemMethod implements Method {
  readonly name: string;
  private readonly privacy: Privacy;
  private readonly mode: AgentMode & { communities: boolean };
  private readonly params: Readonly<Record<string, string>>;
  private readonly config: ConfigPartial;
  private agents = new Map<string, MemoryAgent>();
  private ctx!: MethodContext;
  private llm: LanguageModel | undefined;
  private reasoners: LlmReasoner[] = [];
  private forwardCorrect = 0;
  private forwardSteps = 0;
  private dumpFile: string | undefined;
  /** Level `contribute`: the epoch's release (protocol v2). */
  private release: Release | undefined;
  private items!: ItemVectors;
  private readonly itemVectors: 'content' | 'hybrid';
  /** Full-ranking protocols: every catalog item as a candidate, or the library's whole-catalog shortlist. */
  private readonly wholeCatalog: 'candidates' | 'shortlist';
  private readonly withSasrec: boolean;
  private readonly ablation: AblationInfo | undefined;
  private ops: Record<string, number> = {};
  /** Agents let go after their one whole-catalog ranking (user → memories then). */
  private readonly retired = new Map<string, number>();
  private agentConfig: AtomemConfig | undefined;
  private trainingEvents = 0;

  private readonly afterPrepare: ((agents: ReadonlyMap<string, MemoryAgent>, ctx: MethodContext) => void | Promise<void>) | undefined;
  /** Setting `instruct`: rank with the case's stated intent (false for `atomem-no-intent`). */
  private readonly useIntent: boolean;
  /** Setting `evolving`: each simulated device's clock, moved to the interaction it just observed. */
  private readonly clocks = new Map<string, number>();

  /** Setting `evolving` with a language model: the cost counters at the first ranking of the current step. */
  private stepMark: { step: number; total: ReturnType<typeof zeroCosts> } | undefined;
  /** Setting `evolving` with a language model: model use per step (its rankings + the observations after it). */
  private llmPerStep: { step: number; calls: number; requests: number; promptTokens: number; outputTokens: number; ms: number }[] = [];
  /** Setting `evolving`: learn from each revealed interaction (false for `atomem-frozen`). */
  private readonly learnsOnline: boolean;

  /**
   * @param mode ablations of the memory's structure; `variant` ablations of what the method
   *   reads (item vectors, the SASRec model, ranking weights) — see {@link ABLATIONS}.
   */
  constructor(
    opts: MethodOptions,
    mode: Partial<AgentMode & { communities: boolean }> = {},
    variant: {
      itemVectors?: 'content';
      sasrec?: false;
      ablation?: AblationInfo;
      weights?: (cfg: WeightSets) => void;
      intent?: boolean;
      observe?: boolean;
      /** Called once every agent is trained (e.g. sharing-scenario.ts hands each the scenario's release). */
      afterPrepare?: (agents: ReadonlyMap<string, MemoryAgent>, ctx: MethodContext) => void | Promise<void>;
      wholeCatalog?: 'shortlist';
    } = {},
  ) {
    this.afterPrepare = variant.afterPrepare;
    this.useIntent = variant.intent ?? true;
    this.learnsOnline = variant.observe ?? true;
    this.name = opts.name;
    this.privacy = opts.privacy;
    this.params = opts.params;
    this.mode = { atomic: true, consolidation: true, communities: true, ...mode };
    this.itemVectors = variant.itemVectors ?? itemVectorsKind(opts.params);
    this.wholeCatalog = variant.wholeCatalog ?? wholeCatalogKind(opts.params);
    this.withSasrec = variant.sasrec ?? true;
    this.ablation = variant.ablation;
    const cfg = configFrom(opts.params);
    if (variant.weights) {
      const w = {
        weights: { ...DEFAULT_CONFIG.weights, ...cfg.weights } as Record<string, number>,
        shopWeights: { ...DEFAULT_CONFIG.shopWeights, ...cfg.shopWeights },
        shopWeightsLive: { ...DEFAULT_CONFIG.shopWeightsLive, ...cfg.shopWeightsLive },
      };
      variant.weights(w);
      cfg.weights = w.weights as Partial<AtomemConfig['weights']>;
      cfg.shopWeights = w.shopWeights;
      cfg.shopWeightsLive = w.shopWeightsLive;
    }
    this.config = cfg;
    this.llm = llmModelFrom(opts.params);
  }

  /** The item space of this run: the content embedder's (centred), or the shop's published model (`hybrid`). */
  private async itemSpace(ctx: MethodContext): Promise<ItemVectors> {
    const kind = this.params['atomem.embedder'] ?? 'use-lite';
    if (this.itemVectors === 'content') return catalogFor(ctx.dataset, kind, this.params['atomem.centre'] !== '0', ctx);
    // the content vectors first: the shop model's content map and new items need them (cached on disk)
    await catalogFor(ctx.dataset, kind, false, ctx);
    const shop = await shopKnowledgeFor(ctx, this.params, this.withSasrec);
    return shopSpaceFor(ctx.dataset, kind, shop);
  }

  /**
   * One simulated user's agent. With `atomem.reasoner=llm` it gets its own LLM reasoner (own
   * budget) and, unless `atomem.planner=rules`, ARS's LLM planner (sweeps chosen by the model).
   */
  private agent(opts: Omit<AgentOptions, 'config' | 'mode' | 'reasoner' | 'planner'>): MemoryAgent {
    const agent = new MemoryAgent({ ...opts, config: this.config, mode: this.mode });
    if (!this.llm) return agent;
    const r = new LlmReasoner({ model: this.llm });
    this.reasoners.push(r);
    const planner = this.params['atomem.planner'] ?? 'llm';
    if (planner !== 'llm' && planner !== 'rules') throw new Error(`atomem.planner must be llm or rules, got ${planner}`);
    agent.useReasoner(r, planner === 'llm' ? llmPlanner(r, (m) => agent.memoryView(m)) : undefined);
    return agent;
  }

  async prepare(ctx: MethodContext): Promise<void> {
    this.ctx = ctx;
    const dump = this.params['atomem.dumpFeatures'] ?? process.env.ATOMEM_DUMP_FEATURES;
    if (dump) {
      // why: ranking features are for fitting weights on validation items; a dump of test cases would invite tuning on test.
      if ((ctx.target ?? 'test') === 'test')
        throw new BenchUsageError('feature dumps (atomem.dumpFeatures / ATOMEM_DUMP_FEATURES) are refused on test cases: add --validation');
      this.dumpFile = dump;
    }
    const items = (this.items = await this.itemSpace(ctx));
    const v2 = this.mode.communities && this.privacy === 'contribute';
    const trained = await this.train(ctx, items);
    for (const [user, t] of trained) {
      // why: training does not depend on the privacy level, so runs share it; each run gets its own copy.
      const lastAt = t.lastAt;
      const agent = this.agent({
        items,
        state: structuredClone(t.state),
        clock: () => this.clocks.get(user) ?? lastAt,
        newId: idGenerator(ctx.seed, `${user}/${this.privacy}`),
      });
      this.forwardCorrect += t.correct;
      this.forwardSteps += t.steps;
      this.trainingEvents += t.steps;
      for (const [op, n] of Object.entries(t.ops)) this.ops[op] = (this.ops[op] ?? 0) + n;
      this.agents.set(user, agent);
    }
    if (v2) {
      // protocol v2 through the real service with its shipped defaults: one simulated epoch in
      // which every device reports from its training history; then each device ranks with the release
      const space = await itemSpaceOf(items, [...ctx.dataset.items.keys()]);
      const { release } = await runEpoch({ space, devices: this.agents, epoch: 1, seed: ctx.seed, onProgress: (d, t) => ctx.progress(d, t, 'v2 reports') });
      this.release = release;
      let done = 0;
      for (const c of ctx.cases) {
        await this.agents.get(c.user)?.useRelease(release);
        ctx.progress(++done, ctx.cases.length, 'matching the release');
      }
    }
    await this.afterPrepare?.(this.agents, ctx);
  }

  /** STEAM's training loop for every user (cached per dataset, variant and config). */
  private train(ctx: MethodContext, items: ItemVectors): Promise<Map<string, Trained>> {
    // why without the ranking weights: training never ranks with them (the forward step is memory-only), so rankings that differ only in weights share one training
    const { weights: _w, shopWeights: _sw, ...trainingConfig } = this.config;
    const key = JSON.stringify([
      ctx.seed,
      ctx.target ?? 'test',
      ctx.setting ?? 'full',
      items.embedderId,
      this.mode.atomic,
      this.mode.consolidation,
      this.mode.merge ?? true,
      trainingConfig,
      this.llm?.id ?? 'rules',
      this.params['atomem.planner'] ?? 'llm',
    ]);
    let byKey = trainedCache.get(ctx.dataset);
    if (!byKey) trainedCache.set(ctx.dataset, (byKey = new Map()));
    let p = byKey.get(key);
    if (!p) {
      p = (async () => {
        const out = new Map<string, Trained>();
        const catalog = [...ctx.dataset.items.keys()];
        const users = [...ctx.histories.keys()];
        let done = 0;
        for (const user of users) {
          const history = ctx.histories.get(user)!;
          if (history.length === 0) continue;
          const negativeFor = negativeSampler(ctx.seed, user, catalog, new Set(history.map((i) => i.item)));
          const lastAt = history[history.length - 1].at;
          const ops: Record<string, number> = {};
          const onLifecycle = (e: LifecycleEvent) => void (ops[e.op] = (ops[e.op] ?? 0) + 1);
          const agent = this.agent({ items, clock: () => lastAt, newId: idGenerator(ctx.seed, user), onLifecycle });
          const r = await agent.train(history, negativeFor);
          out.set(user, { state: agent.snapshot, correct: r.correct, steps: r.steps, lastAt, ops });
          ctx.progress(++done, users.length, 'training agents');
        }
        return out;
      })();
      byKey.set(key, p);
    }
    return p;
  }

  /** Every simulated device's model costs, summed. */
  private llmTotal(): ReturnType<typeof zeroCosts> {
    const total = zeroCosts();
    for (const r of this.reasoners) addCosts(total, r.costs().total);
    return total;
  }

  /** Close the current step's cost window (setting `evolving` with a model). */
  private closeStep(): void {
    if (!this.stepMark) return;
    const now = this.llmTotal();
    const m = this.stepMark.total;
    this.llmPerStep.push({
      step: this.stepMark.step,
      calls: now.calls - m.calls,
      requests: now.requests - m.requests,
      promptTokens: now.promptTokens - m.promptTokens,
      outputTokens: now.outputTokens - m.outputTokens,
      ms: now.ms - m.ms,
    });
    this.stepMark = undefined;
  }

  async rank(c: RankCase): Promise<string[]> {
    if (this.llm && c.step !== undefined && this.stepMark?.step !== c.step) {
      this.closeStep();
      this.stepMark = { step: c.step, total: this.llmTotal() };
    }
    const agent = this.agents.get(c.user);
    if (!agent) return [...c.candidates];
    const recs = await agent.recommend(c.candidates, { now: c.now, ...(this.useIntent && c.intent !== undefined ? { intent: c.intent } : {}) });
    if (this.dumpFile) {
      // why: offline tuning of the ranking weights on validation cases (refused on test in prepare).
      // in candidate (input) order, so re-scoring breaks ties the way rank() does
      const byId = new Map(recs.map((r) => [r.id, r.features]));
      appendFileSync(this.dumpFile, `${JSON.stringify({ user: c.user, candidates: c.candidates.map((id) => [id, byId.get(id)]) })}\n`);
    }
    return recs.map((r) => r.id);
  }

  /**
   * Full-ranking protocols: the agent's own `recommend()` over the whole catalog (its order is
   * the score: slot of the card at position i gets −i). Diversification and every signal as in
   * `rank`; nothing leaves the device. `atomem.wholeCatalog` (CLI `--param`): `candidates`
   * (default) passes every catalog item as a candidate, so the full scorer ranks all of them;
   * `shortlist` calls `recommend()` without candidates (`limit` = `config.shortlist`,
   * `exclude: 'interacted'`), the path a shop's whole-catalog shelf takes — its cost does not
   * grow with the catalog's size.
   */
  async scoreAll(c: RankCase, out: Float32Array): Promise<void> {
    const agent = this.agents.get(c.user);
    const catalog = this.ctx.catalog;
    const slot = this.ctx.catalogIndex;
    if (!agent || !catalog || !slot) return;
    const intent = this.useIntent && c.intent !== undefined ? { intent: c.intent } : {};
    // `shortlist`: the library's whole-catalog path (no candidates): retrieval shortlists
    // config.shortlist items the user has not interacted with, the full scorer ranks them; items
    // it did not list keep −∞ (tied last: pessimistic)
    const recs =
      this.wholeCatalog === 'shortlist'
        ? await agent.recommend(undefined, { now: c.now, limit: agent.config.shortlist, exclude: 'interacted', ...intent })
        : await agent.recommend(catalog, { now: c.now, ...intent });
    for (let i = 0; i < recs.length; i++) out[slot.get(recs[i].id)!] = -i;
    if (this.dumpFile && this.wholeCatalog === 'candidates') {
      // why: fitting the weights for whole-catalog ranking (validation only, refused on test in
      // prepare): every catalog item's signals, columnar (one array per signal, catalog order),
      // 6 significant digits; `tune-weights.ts --protocol` reads it
      const byId = new Map(recs.map((r) => [r.id, r.features]));
      const names = Object.keys(recs[0]?.features ?? {});
      const signals = Object.fromEntries(
        names.map((n) => [
          n,
          catalog.map((id) => {
            const v = byId.get(id)?.[n];
            return v === undefined || !Number.isFinite(v) ? 0 : Number(v.toPrecision(6));
          }),
        ]),
      );
      appendFileSync(this.dumpFile, `${JSON.stringify({ user: c.user, items: catalog, signals })}\n`);
    }
    if (this.wholeCatalog === 'shortlist') {
      // why: each agent's shelf keeps a table of the whole catalog's vectors for retrieval (1.5 MB
      // at 12k items); a full-ranking protocol ranks each user once, so the agent is let go
      this.retired.set(c.user, agent.snapshot.memories.length);
      this.agentConfig ??= agent.config;
      this.agents.delete(c.user);
    }
  }

  /** Setting `evolving`: the device observes the interaction it was just tested on (memory updated, planner run). */
  async observe(user: string, interaction: Interaction): Promise<void> {
    const agent = this.agents.get(user);
    // atomem-frozen: the evolving setting's control (does learning between steps help?)
    if (!agent || !this.learnsOnline) return;
    this.clocks.set(user, interaction.at);
    await agent.observe(interaction);
    // the LLM planner defers events to idle time; between two steps the device is idle (the worker's idleMs)
    if (agent.hasPending()) await agent.idle();
  }

  /**
   * Simulation fidelity (STEAM RQ2): for up to `atomem.fidelityUsers` evaluated users (default
   * 100), an agent trained on the history minus its last 10 interactions is shown 20 items at
   * 1:m positives (held-out real interactions) to negatives (random unseen items), m = 1, 3, 9,
   * and answers yes/no. It says yes when its personal score for the item beats the 80th
   * percentile of its scores for 50 random catalog items (self-calibrated: it never sees the ratio).
   * Only for the `items` level run (or `off` when the method never shares), to save time.
   */
  private async fidelity(): Promise<Record<string, unknown>> {
    const ctx = this.ctx;
    const limit = paramNumber(this.params, 'atomem.fidelityUsers') ?? 100;
    const items = this.items;
    const catalog = [...ctx.dataset.items.keys()];
    const out: Record<string, unknown> = {};
    const answers = new Map<number, { truth: boolean[]; said: boolean[] }>([
      [1, { truth: [], said: [] }],
      [3, { truth: [], said: [] }],
      [9, { truth: [], said: [] }],
    ]);
    for (const c of ctx.cases.slice(0, limit)) {
      const history = c.history;
      if (history.length < 15) continue;
      const train = history.slice(0, -10);
      const held = history.slice(-10).map((i) => i.item);
      const seen = new Set(history.map((i) => i.item));
      const rng = Rng.derive(ctx.seed, 'fidelity', c.user);
      const unseen = () => {
        for (;;) {
          const id = catalog[rng.int(catalog.length)];
          if (!seen.has(id)) return id;
        }
      };
      const agent = new MemoryAgent({
        items,
        config: this.config,
        mode: this.mode,
        clock: () => train[train.length - 1].at,
        newId: idGenerator(ctx.seed, `fid/${c.user}`),
      });
      await agent.train(train, unseen);
      const reference = Array.from({ length: 50 }, unseen);
      for (const m of [1, 3, 9]) {
        const p = 20 / (1 + m);
        const pos = held.slice(0, p);
        const neg = Array.from({ length: 20 - p }, unseen);
        const probe = [...pos, ...neg];
        const recs = await agent.recommend([...new Set([...probe, ...reference])]);
        const score = new Map(recs.map((r) => [r.id, r.score]));
        const ref = reference.map((id) => score.get(id)!).sort((a, b) => a - b);
        const threshold = ref[Math.floor(0.8 * ref.length)];
        const a = answers.get(m)!;
        probe.forEach((id, i) => {
          a.truth.push(i < p);
          a.said.push(score.get(id)! > threshold);
        });
      }
    }
    for (const [m, a] of answers) {
      if (a.truth.length === 0) {
        // why: a 0.000 here would read as a measured failure; no user had 15 interactions before the target.
        out[`fidelity1:${m}`] = { precision: null, f1: null, n: 0, note: 'not computable: no evaluated user has 15 interactions before the target' };
        continue;
      }
      const f = fidelity(a.truth, a.said);
      out[`fidelity1:${m}`] = { precision: f.precision, f1: f.f1, n: f.n };
    }
    return out;
  }

  /** The shop file's sequence model under a full-ranking protocol: loss, chosen epoch, epochs run. */
  private async sequenceTraining(): Promise<Record<string, unknown>> {
    const seq = await publishedSequence(this.ctx, this.params);
    const e = seq.earlyStopping;
    return e ? { loss: e.loss, bestEpoch: e.bestEpoch, epochsRun: e.epochsRun } : {};
  }

  async extras(): Promise<Record<string, unknown>> {
    const overridden = overriddenDefaults(this.params);
    const cfg = [...this.agents.values()][0]?.config ?? this.agentConfig;
    const out: Record<string, unknown> = {
      itemVectors: this.itemVectors,
      shopLogUntil: this.itemVectors === 'hybrid' ? shopUntil(this.params) : null,
      sasrecOnDevice: this.itemVectors === 'hybrid' && this.withSasrec,
      ...(fullRankingContext(this.ctx) ? { wholeCatalog: this.wholeCatalog } : {}),
      // the full-ranking protocols train the file's sequence model early-stopped (shop-publish.ts): which loss, which epoch
      ...(this.itemVectors === 'hybrid' && this.withSasrec && fullRankingContext(this.ctx) ? { sasrecTraining: await this.sequenceTraining() } : {}),
      // why: headline rows must use every component's shipped defaults; a row that does not says which knobs it changed
      defaults: overridden.length === 0 ? 'shipped' : { overridden },
      ...(this.ablation ? { ablationOf: 'atomem', removes: this.ablation.removes } : {}),
      tau: cfg?.tau,
      mergeThreshold: cfg?.mergeThreshold,
      forwardAccuracy: this.forwardSteps ? this.forwardCorrect / this.forwardSteps : 0,
      memoriesPerUser: mean([...[...this.agents.values()].map((a) => a.snapshot.memories.length), ...this.retired.values()]),
      trainingEvents: this.trainingEvents,
      // ARS's six operations per 1,000 training events (does the lifecycle act?)
      lifecyclePer1000: Object.fromEntries(
        ['extract', 'reinforce', 'weaken', 'merge', 'forget', 'resynthesize'].map((op) => [
          op,
          this.trainingEvents ? Number((((this.ops[op] ?? 0) * 1000) / this.trainingEvents).toFixed(2)) : 0,
        ]),
      ),
    };
    if (this.llm) {
      const total = zeroCosts();
      const byOperation = Object.fromEntries(OPERATIONS.map((op) => [op, zeroCosts()]));
      for (const r of this.reasoners) {
        const c = r.costs();
        addCosts(total, c.total);
        for (const op of OPERATIONS) addCosts(byOperation[op], c.byOperation[op]);
      }
      out.llm = { model: this.llm.id, ...total, byOperation };
      this.closeStep();
      if (this.llmPerStep.length) out.llmPerStep = this.llmPerStep;
    }
    if (this.release) {
      const r = this.release;
      out.release = {
        epsilon: r.ldp.epsilon,
        delta: r.ldp.delta,
        reports: r.reports,
        communities: r.communities.length,
        popularItems: Object.keys(r.popularity).length,
        ldp: r.ldp,
      };
    } else if (this.privacy === 'contribute') out.release = { published: false };
    if (this.privacy === 'off' && this.name === 'atomem' && this.params['atomem.fidelityUsers'] !== '0') Object.assign(out, await this.fidelity());
    return out;
  }
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

const levels: Privacy[] = ['off', 'contribute'];
registerMethod('atomem', (o) => new AtomemMethod(o), {
  privacyLevels: levels,
  description: 'atomem: atomic memories + communities (setting instruct: with the stated intent)',
});
registerMethod('atomem-no-intent', (o) => new AtomemMethod(o, {}, { intent: false }), {
  privacyLevels: levels,
  defaultIn: ['instruct'],
  description: 'ablation for setting instruct: atomem ignoring the stated intent',
});
registerMethod('atomem-shortlist', (o) => new AtomemMethod(o, {}, { wholeCatalog: 'shortlist' }), {
  privacyLevels: levels,
  // why no setting: run on request beside `atomem` (same agents, other call), never by default
  defaultIn: [],
  description:
    "atomem through the library's whole-catalog recommend() (protocols loo-full, temporal: no candidates, retrieval shortlists config.shortlist items); as atomem under loo",
});
registerMethod('atomem-frozen', (o) => new AtomemMethod(o, {}, { observe: false }), {
  privacyLevels: levels,
  defaultIn: ['evolving'],
  description: 'control for setting evolving: atomem whose memory does not learn between steps',
});

/** What an ablation row says it removed (`removes` in its JSON row, with `ablationOf: "atomem"`). */
export interface AblationInfo {
  removes: string;
}

/** The ranking signals atomem's memory engine computes (everything else in `shopWeights` comes from the shop's file). */
export const MEMORY_SIGNALS = Object.keys(DEFAULT_CONFIG.weights);

/** One ablation: a registered method that removes exactly `removes` from full atomem. */
export interface Ablation {
  name: string;
  removes: string;
  /** Item vectors it applies to (undefined = both). */
  only?: 'hybrid' | 'content';
  /** Privacy levels (default all of atomem's). */
  levels?: Privacy[];
  /** For per-signal ablations: the signal whose weight becomes 0. */
  signal?: string;
  make(o: MethodOptions, info: AblationInfo): AtomemMethod;
}

/** The weight sets a variant may edit (the content space's, the shop's replay and live sets). */
export interface WeightSets {
  weights: Record<string, number>;
  shopWeights: Record<string, number>;
  shopWeightsLive: Record<string, number>;
}

const zero = (names: readonly string[]) => (w: WeightSets) => {
  for (const n of names) {
    if (n in w.weights) w.weights[n] = 0;
    if (n in w.shopWeights) w.shopWeights[n] = 0;
    if (n in w.shopWeightsLive) w.shopWeightsLive[n] = 0;
  }
};

/** Every ablation, in table order. `--methods atomem,ablations` runs those that apply to the run's item vectors. */
export const ABLATIONS: Ablation[] = [
  {
    name: 'atomem-no-memory-signals',
    removes: `every ranking signal of the memory engine (${MEMORY_SIGNALS.join(', ')}): the shop file's signals alone, inside the agent`,
    only: 'hybrid',
    make: (o, ablation) => new AtomemMethod(o, {}, { ablation, weights: zero(MEMORY_SIGNALS) }),
  },
  {
    name: 'atomem-no-shop-model',
    removes: 'the shop model: content item vectors (centred USE-lite) and the content ranking weights, no shop signals, no SASRec',
    only: 'hybrid',
    make: (o, ablation) => new AtomemMethod(o, {}, { ablation, itemVectors: 'content' }),
  },
  {
    name: 'atomem-no-sasrec',
    removes: 'the SASRec sequence model from the published file (its signal; other weights unchanged)',
    only: 'hybrid',
    make: (o, ablation) => new AtomemMethod(o, {}, { ablation, sasrec: false }),
  },
  {
    name: 'atomem-no-consolidation',
    removes: 'consolidation: every interaction forms a new memory (no reinforce, no merge in sweeps)',
    make: (o, ablation) => new AtomemMethod(o, { consolidation: false, merge: false }, { ablation }),
  },
  {
    name: 'atomem-single-summary',
    removes: 'atomic memories: one summary memory holds every interaction',
    make: (o, ablation) => new AtomemMethod(o, { atomic: false }, { ablation }),
  },
  {
    name: 'atomem-no-communities',
    removes: 'the shared index: no communities pulled (own memories only)',
    levels: ['contribute'],
    make: (o, ablation) => new AtomemMethod(o, { communities: false }, { ablation }),
  },
  ...[...new Set([...MEMORY_SIGNALS, ...Object.keys(DEFAULT_CONFIG.shopWeights), ...Object.keys(DEFAULT_CONFIG.shopWeightsLive)])]
    .filter((n) => n !== 'sasrec')
    .map(
      (signal): Ablation => ({
        name: `atomem-no-signal-${signal}`,
        removes: `the ranking signal ${signal} (weight 0; the other weights unchanged)`,
        signal,
        make: (o, ablation) => new AtomemMethod(o, {}, { ablation, weights: zero([signal]) }),
      }),
    ),
];

for (const a of ABLATIONS) {
  registerMethod(a.name, (o) => a.make(o, { removes: a.removes }), {
    privacyLevels: a.levels ?? levels,
    description: `ablation: removes ${a.removes}`,
    ablation: true,
  });
}

/**
 * The ablations `--methods …,ablations` expands to for a run with these parameters: those that
 * apply to its item vectors and, per ranking signal, those whose weight in force is not 0.
 */
export function ablationsFor(params: Readonly<Record<string, string>>): string[] {
  const kind = itemVectorsKind(params);
  const cfg = resolveConfig(configFrom(params));
  const inForce = (kind === 'hybrid' ? [cfg.shopWeights, cfg.shopWeightsLive] : [cfg.weights]) as Readonly<Record<string, number>>[];
  return ABLATIONS.filter((a) => (!a.only || a.only === kind) && (a.signal === undefined || inForce.some((w) => (w[a.signal!] ?? 0) !== 0))).map((a) => a.name);
}
