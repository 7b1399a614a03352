/**
 * `shop`: the shop model as a benchmark method. `prepare` trains a {@link ShopModel} on
 * `ctx.histories` (the same log the centralized baselines learn from), writes it to the binary
 * file format and reads it back (so every figure is of the file a browser would download), and
 * `rank` scores each case with `packages/atomem/src/shop/score.ts` from that user's own history only.
 *
 * Parameters (`--param key=value`):
 * - `shop.epsilon` (∞), `shop.delta` (1e-6), `shop.m` (16), `shop.dpItems` (100), `shop.budget.<stat>`:
 *   user-level DP of the file; `shop.noiseSeed`: another noise draw (seeded, for averaging);
 * - `shop.until=0.8`: the shop keeps only log rows before the 80th percentile of all timestamps;
 * - `shop.lambda`, `shop.easeItems`, `shop.ease=dense|local|auto`, `shop.easeNeighbours`, `shop.denseEaseMax`, `shop.k.ease|knn|markov`, `shop.easeSigned`, `shop.dim`,
 *   `shop.vectorPower`, `shop.orient.ease|knn|markov=in|out`, `shop.coldBelow`, `shop.ridge`, `shop.trend=1`, `shop.trendWindow`, `shop.trendBucketMs`:
 *   training options (`TrainOptions`);
 * - `shop.recent`, `shop.recentDecay`, `shop.markovItems`, `shop.markovDecay`, `shop.neutralCold=0|1`:
 *   scorer options;
 * - `shop.w.<signal>=x`: a combiner weight (others keep their default); `shop.only=<signal>`:
 *   rank by one signal alone (per-signal figures);
 * - `shop.content=use-lite|none` (use-lite): content vectors for the hybrid item vectors;
 * - `shop.extra=a,b`: extra signals registered with {@link registerShopSignal} (e.g. a sequence
 *   model), combined with the built-in ones; weight `shop.w.<name>` (default 1).
 */
import type { Interaction } from 'atomem/engine';
import { decodeShopModel, encodeShopModel, type ShopModel } from 'atomem/shop';
import { SHOP_WEIGHTS as DEFAULT_WEIGHTS, SHOP_SIGNALS as SIGNALS, ShopScorer, type ScorerOptions } from 'atomem/shop';
import { trainShopModel, type ShopInteraction, type TrainOptions } from 'atomem/shop';
import { rankByScore, tieRng } from './baselines.js';
import { paramNumber, registerMethod, type MethodOptions } from './registry.js';
import { Rng } from './rng.js';
import { contentVectorsFor } from './shop-content.js';
import { publishedShop } from './shop-publish.js';
import type { Method, MethodContext, RankCase } from './types.js';

/** A per-candidate signal computed outside the shop model (e.g. SASRec on the device). */
export interface ShopSignalProvider {
  prepare(ctx: MethodContext): Promise<void> | void;
  /** One score per candidate of `c`, same order; larger = better. */
  scores(c: RankCase): ArrayLike<number> | Promise<ArrayLike<number>>;
}

/** name → factory of extra signals for `shop.extra`. */
export const shopSignals = new Map<string, (opts: MethodOptions) => ShopSignalProvider>();

/** Makes an extra signal available to `--param shop.extra=<name>`. */
export function registerShopSignal(name: string, factory: (opts: MethodOptions) => ShopSignalProvider): void {
  if (shopSignals.has(name)) throw new Error(`registerShopSignal: ${name} is already registered`);
  shopSignals.set(name, factory);
}

/** The shop's log as the trainer reads it: every (user, interaction) of `histories`. */
export function shopLog(histories: ReadonlyMap<string, readonly Interaction[]>): ShopInteraction[] {
  const out: ShopInteraction[] = [];
  for (const [user, seq] of histories) for (const x of seq) out.push({ user, item: x.item, at: x.at, action: x.action });
  return out;
}

/** The `q`-quantile of every timestamp of the log (a retention cut-off). */
export function timeQuantile(log: readonly ShopInteraction[], q: number): number {
  if (!(q > 0 && q <= 1)) throw new RangeError(`shop.until must be in (0, 1], got ${q}`);
  const at = Float64Array.from(log, (x) => x.at).sort();
  return at.length ? at[Math.min(at.length - 1, Math.floor(q * at.length))] : Infinity;
}

/** Training options from `shop.*` parameters. */
export function trainOptionsFrom(params: Readonly<Record<string, string>>): TrainOptions {
  const num = (k: string) => paramNumber(params, k);
  const opts: TrainOptions = {};
  const set = <K extends keyof TrainOptions>(key: K, v: TrainOptions[K] | undefined) => {
    if (v !== undefined) opts[key] = v;
  };
  set('epsilon', num('shop.epsilon'));
  set('delta', num('shop.delta'));
  set('maxItemsPerUser', num('shop.m'));
  set('dpItems', num('shop.dpItems'));
  set('lambda', num('shop.lambda'));
  set('easeItems', num('shop.easeItems'));
  set('easeNeighbours', num('shop.easeNeighbours'));
  set('denseEaseMax', num('shop.denseEaseMax'));
  if (params['shop.easeNeighbourhood'] !== undefined) opts.easeNeighbourhood = params['shop.easeNeighbourhood'] === 'cosine' ? 'cosine' : 'count';
  if (params['shop.ease'] !== undefined) {
    const v = params['shop.ease'];
    if (v !== 'dense' && v !== 'local' && v !== 'auto') throw new Error(`shop.ease must be dense, local or auto, got ${v}`);
    opts.ease = v;
  }
  set('dim', num('shop.dim'));
  set('vectorPower', num('shop.vectorPower'));
  set('vectorDegree', num('shop.vectorDegree'));
  set('coldBelow', num('shop.coldBelow'));
  set('ridgeAlpha', num('shop.ridge'));
  set('trendWindow', num('shop.trendWindow'));
  set('recentDays', num('shop.recentDays'));
  set('trendBucketMs', num('shop.trendBucketMs'));
  set('dpLambdaScale', num('shop.dpLambdaScale'));
  if (params['shop.trend'] !== undefined) opts.trend = params['shop.trend'] === '1' || params['shop.trend'] === 'true';
  if (params['shop.easeSigned'] !== undefined) opts.easeSigned = params['shop.easeSigned'] === '1' || params['shop.easeSigned'] === 'true';
  const orientation: NonNullable<TrainOptions['orientation']> = {};
  for (const name of ['ease', 'knn', 'markov'] as const) {
    const v = params[`shop.orient.${name}`];
    if (v === undefined) continue;
    if (v !== 'in' && v !== 'out') throw new Error(`shop.orient.${name} must be in or out, got ${v}`);
    orientation[name] = v;
  }
  if (Object.keys(orientation).length) opts.orientation = orientation;
  const k: NonNullable<TrainOptions['k']> = {};
  for (const name of ['ease', 'knn', 'markov'] as const) {
    const v = num(`shop.k.${name}`);
    if (v !== undefined) k[name] = v;
  }
  if (Object.keys(k).length) opts.k = k;
  const budget: NonNullable<TrainOptions['budget']> = {};
  for (const name of ['popularity', 'gram', 'transitions', 'trend'] as const) {
    const v = num(`shop.budget.${name}`);
    if (v !== undefined) budget[name] = v;
  }
  if (Object.keys(budget).length) opts.budget = budget;
  return opts;
}

/** Scorer options from `shop.*` parameters. */
export function scorerOptionsFrom(params: Readonly<Record<string, string>>): ScorerOptions {
  const out: ScorerOptions = {};
  for (const key of ['recent', 'recentDecay', 'markovItems', 'markovDecay', 'trendWindow'] as const) {
    const v = paramNumber(params, `shop.${key}`);
    if (v !== undefined) out[key] = v;
  }
  if (params['shop.neutralCold'] !== undefined) out.neutralCold = params['shop.neutralCold'] !== '0' && params['shop.neutralCold'] !== 'false';
  return out;
}

/** Combiner weights: defaults, `shop.w.*` overrides, or one signal alone with `shop.only`. */
export function weightsFrom(params: Readonly<Record<string, string>>, base: Readonly<Record<string, number>> = DEFAULT_WEIGHTS): Record<string, number> {
  const only = params['shop.only'];
  if (only) return { [only]: 1 };
  const w: Record<string, number> = { ...base };
  for (const key of Object.keys(params)) if (key.startsWith('shop.w.')) w[key.slice('shop.w.'.length)] = paramNumber(params, key)!;
  for (const name of (params['shop.extra'] ?? '').split(',').filter(Boolean)) if (w[name] === undefined) w[name] = 1;
  return w;
}

/**
 * Trains the model of one benchmark context: log = `ctx.histories` (cut at `until` if asked),
 * catalog = the dataset's items, content vectors unless `shop.content=none`, noise seeded from
 * (seed, `shop-noise`, ε) so runs are reproducible. Returns the model decoded from its file
 * (`model`), the trainer's own (`trained`, unquantised) and the file.
 */
export async function trainForContext(
  ctx: MethodContext,
  params: Readonly<Record<string, string>>,
  extra: Partial<TrainOptions> = {},
): Promise<{ model: ShopModel; trained: ShopModel; bytes: Uint8Array; seconds: number }> {
  const log = shopLog(ctx.histories);
  const opts: TrainOptions = { ...trainOptionsFrom(params), ...extra };
  const until = paramNumber(params, 'shop.until');
  if (until !== undefined && until < 1) opts.until = timeQuantile(log, until);
  // why: with the order of events only (no timestamps) there are no days to count back
  if (ctx.dataset.ordinalTime && opts.recentDays === undefined) opts.recentDays = 0;
  const kind = params['shop.content'] ?? 'use-lite';
  if (kind !== 'none') opts.content = await contentVectorsFor(ctx.dataset, kind, ctx);
  // why: one noise draw per (seed, ε, shop.noiseSeed): reproducible, and DP figures can be
  // averaged over several draws (they vary by about ±0.02 NDCG@10 with the draw alone).
  const rng = Rng.derive(ctx.seed, 'shop-noise', String(opts.epsilon ?? 'inf'), ...(params['shop.noiseSeed'] ? [params['shop.noiseSeed']] : []));
  opts.random = () => rng.next();
  opts.catalog = [...ctx.dataset.items.keys()];
  opts.onProgress = (stage, done, total) => ctx.progress(done, total, stage);
  const t0 = performance.now();
  const trained = trainShopModel(log, opts);
  const seconds = (performance.now() - t0) / 1000;
  const bytes = encodeShopModel(trained);
  return { model: decodeShopModel(bytes), trained, bytes, seconds };
}

/** The `shop` method (see the module comment). */
export class ShopMethod implements Method {
  readonly name: string;
  private scorer!: ShopScorer;
  private weights!: Record<string, number>;
  private providers: Array<[string, ShopSignalProvider]> = [];
  private ctx!: MethodContext;
  private bytes = 0;
  private trainSeconds = 0;

  constructor(private readonly opts: MethodOptions) {
    this.name = opts.name;
    for (const name of (opts.params['shop.extra'] ?? '').split(',').filter(Boolean)) {
      const f = shopSignals.get(name);
      if (!f) throw new Error(`shop.extra: unknown signal ${name} (registered: ${[...shopSignals.keys()].join(', ') || 'none'})`);
      this.providers.push([name, f(opts)]);
    }
    const only = opts.params['shop.only'];
    if (only && !(SIGNALS as readonly string[]).includes(only) && !this.providers.some(([n]) => n === only)) {
      throw new Error(`shop.only: unknown signal ${only} (${SIGNALS.join(', ')})`);
    }
  }

  async prepare(ctx: MethodContext): Promise<void> {
    this.ctx = ctx;
    // why shared: `shop`, `sasrec` and atomem's hybrid item vectors of one run read one trained model
    const { model, fileBytes, trainSeconds } = await publishedShop(ctx, this.opts.params);
    this.bytes = fileBytes;
    this.trainSeconds = trainSeconds;
    this.scorer = new ShopScorer(model, scorerOptionsFrom(this.opts.params));
    this.weights = weightsFrom(this.opts.params, model.weights);
    for (const [, p] of this.providers) await p.prepare(ctx);
  }

  async rank(c: RankCase): Promise<string[]> {
    const extra: Record<string, ArrayLike<number>> = {};
    for (const [name, p] of this.providers) extra[name] = await p.scores(c);
    const scores = this.scorer.score(c.history, c.candidates, { weights: this.weights, extra, now: lastAt(c) });
    return rankByScore(c.candidates, scores, tieRng(this.ctx.seed, this.name, c.user));
  }

  /** Every catalog item scored from the user's own history (the same scorer as `rank`). */
  async scoreAll(c: RankCase, out: Float32Array): Promise<void> {
    const catalog = this.ctx.catalog ?? [];
    const all: RankCase = { ...c, candidates: catalog as string[] };
    const extra: Record<string, ArrayLike<number>> = {};
    for (const [name, p] of this.providers) extra[name] = await p.scores(all);
    out.set(this.scorer.score(c.history, catalog, { weights: this.weights, extra, now: lastAt(c) }));
  }

  extras(): Record<string, unknown> {
    return { fileBytes: this.bytes, trainSeconds: Number(this.trainSeconds.toFixed(2)) };
  }
}

/** The device's clock at ranking time: its latest event (the benchmark has no wall clock). */
export function lastAt(c: RankCase): number {
  let t = -Infinity;
  for (const x of c.history) if (x.at > t) t = x.at;
  return t;
}

registerMethod('shop', (opts) => new ShopMethod(opts), {
  description: 'shop model: trained on the log, published as a file, ranked on the device from its own history (packages/atomem/src/shop/)',
});
