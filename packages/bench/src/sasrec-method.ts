/**
 * Benchmark method `sasrec`: SASRec (Kang & McAuley 2018) trained centrally on
 * `ctx.histories` (every user's interactions before their own target) with
 * packages/atomem/src/shop/sasrec/train.ts, each case ranked by score(candidate) = encodeHistory(history) ·
 * itemEmbedding(candidate). The case's history is the model input; the target is only
 * ever one of the candidates.
 *
 * Parameters (`--param sasrec.KEY=VALUE`): epochs, lr, batchSize, maxLen, dim, blocks,
 * heads, dropout, l2, threads, chunks, seed (default: the run's seed); loss (bce | ce |
 * sampled-softmax), negatives (sampled-softmax), and for early stopping evalEvery, patience,
 * validUsers.
 *
 * Protocol `loo` (the papers' tables): the run's shared model (one sampled negative, BCE, 80
 * epochs), as before. Protocols `loo-full` and `temporal`: SASRec at its published strength —
 * by default the catalog-scaled settings of `sasrecProfile` (packages/atomem/src/shop/sasrec/profile.ts:
 * full-softmax cross-entropy up to 4,096 items, sampled softmax over 1,024 negatives above;
 * dropout 0.5, L 50, lr 0.001 when histories average under 20 items), any `sasrec.*` option
 * overriding them — early-stopped on validation:
 * each user's last learnable interaction is held out (for `loo-full` that is the
 * second-to-last item, the original SASRec split), the model trains on the rest, every
 * `evalEvery` epochs (default 5) NDCG@10 over all items (history excluded, pessimistic ties) of
 * up to `validUsers` (default 2000) held-out items is measured, training stops after `patience`
 * (default 3) evaluations without a gain or at `maxEpochs` (else `epochs`, else 200), and the best checkpoint ranks the test cases.
 * That model ({@link trainEarlyStopped}) is the run's shared one there too: the shop file's
 * sequence model that atomem's agents read is trained the same way, once per run.
 */
import { registerMethod, paramNumber, type MethodOptions } from './registry.js';
import { rankByScore, tieRng } from './baselines.js';
import type { Method, MethodContext, RankCase } from './types.js';
import { Rng } from './rng.js';
import { publishedSequence } from './shop-publish.js';
import { encodeHistory, scoreItems, type SasrecWeights } from 'atomem/shop';
import { SASREC_DEFAULTS, sasrecProfile, trainSasrec, type SasrecTrainOptions } from 'atomem/shop';

/** `trainSasrec`'s negatives per chunk when `sampled-softmax` is asked for without a count. */
const SASREC_NEGATIVES_DEFAULT = 256;

const KEYS = ['epochs', 'lr', 'batchSize', 'maxLen', 'dim', 'blocks', 'heads', 'dropout', 'l2', 'threads', 'chunks', 'seed', 'negatives'] as const;
/** Early-stopping parameters of the full-ranking protocols (not training options). */
const STOP_KEYS = ['evalEvery', 'patience', 'validUsers', 'maxEpochs'] as const;
const LOSSES = ['bce', 'ce', 'sampled-softmax'] as const;

/** `sasrec.*` parameters as training options (absent keys stay undefined). */
export function sasrecOptions(params: Readonly<Record<string, string>>): SasrecTrainOptions {
  const out: Record<string, unknown> = {};
  for (const k of KEYS) out[k] = paramNumber(params, `sasrec.${k}`);
  const loss = params['sasrec.loss'];
  if (loss !== undefined) {
    if (!(LOSSES as readonly string[]).includes(loss)) throw new Error(`sasrec.loss must be ${LOSSES.join(', ')}, got ${loss}`);
    out.loss = loss;
  }
  const known = [...KEYS, ...STOP_KEYS, 'loss'] as readonly string[];
  const unknown = Object.keys(params).filter((k) => k.startsWith('sasrec.') && !known.includes(k.slice(7)));
  if (unknown.length) throw new Error(`sasrec: unknown parameter ${unknown.join(', ')} (known: ${known.map((k) => `sasrec.${k}`).join(', ')})`);
  return out as SasrecTrainOptions;
}

/** Early stopping of the full-ranking protocols, from `sasrec.evalEvery|patience|validUsers`. */
export function earlyStopOptions(params: Readonly<Record<string, string>>): { evalEvery: number; patience: number; validUsers: number; maxEpochs?: number } {
  const evalEvery = paramNumber(params, 'sasrec.evalEvery') ?? 5;
  const patience = paramNumber(params, 'sasrec.patience') ?? 3;
  const validUsers = paramNumber(params, 'sasrec.validUsers') ?? 2000;
  const maxEpochs = paramNumber(params, 'sasrec.maxEpochs');
  for (const [k, v] of Object.entries({ evalEvery, patience, validUsers, maxEpochs: maxEpochs ?? 1 })) {
    if (!Number.isInteger(v) || v < 1) throw new Error(`sasrec.${k} must be a positive integer, got ${v}`);
  }
  return { evalEvery, patience, validUsers, maxEpochs };
}

/** Item id ↔ index 1..n over the catalog (then any id seen only in histories). */
export function itemIndex(ctx: MethodContext): Map<string, number> {
  const index = new Map<string, number>();
  for (const id of ctx.dataset.items.keys()) index.set(id, index.size + 1);
  for (const seq of ctx.histories.values()) for (const x of seq) if (!index.has(x.item)) index.set(x.item, index.size + 1);
  return index;
}

export class SasrecMethod implements Method {
  readonly name: string;
  private ctx!: MethodContext;
  private index = new Map<string, number>();
  private weights?: SasrecWeights;
  trainSeconds = 0;
  lastLoss = NaN;
  /** Full-ranking protocols: the validation curve and the chosen epoch. */
  private validation?: { epoch: number; ndcg10: number }[];
  private bestEpoch?: number;
  private epochsRun = 0;
  private loss: SasrecTrainOptions['loss'] = 'ce';
  private settings?: EarlyStoppedSasrec['settings'];
  private slotIdx?: Int32Array;

  /**
   * @param opts training options; `name` (default `sasrec`); `checkpoint` is called after
   *   every epoch with the live weights (the tuning script evaluates validation cases there).
   */
  constructor(
    private readonly opts: SasrecTrainOptions & {
      name?: string;
      checkpoint?: (epoch: number, loss: number, weights: SasrecWeights) => void | Promise<void>;
      /**
       * The run's `--param`s: when given (and no `checkpoint`), the model is the run's shared one
       * (`shop-publish.ts`: trained once per context, also used by atomem's hybrid item vectors),
       * always on the whole log (a centralized baseline has no retention limit).
       */
      params?: Readonly<Record<string, string>>;
    } = {},
  ) {
    this.name = opts.name ?? 'sasrec';
  }

  async prepare(ctx: MethodContext): Promise<void> {
    this.ctx = ctx;
    const fullRanking = ctx.protocol === 'loo-full' || ctx.protocol === 'temporal';
    if (fullRanking && !this.opts.checkpoint) return this.prepareEarlyStopped(ctx);
    if (this.opts.params && !this.opts.checkpoint) {
      const shared = await publishedSequence(ctx, { ...this.opts.params, 'shop.until': '1' });
      this.index = shared.index;
      this.weights = shared.weights;
      this.trainSeconds = shared.trainSeconds;
      this.lastLoss = shared.finalLoss;
      return;
    }
    this.index = itemIndex(ctx);
    const seqs = [...ctx.histories.values()].map((seq) => Int32Array.from(seq, (x) => this.index.get(x.item)!));
    const epochs = this.opts.epochs ?? SASREC_DEFAULTS.epochs;
    const { name: _name, checkpoint: _checkpoint, params: _params, ...rest } = this.opts;
    // why filtered: an absent `sasrec.seed` arrives as undefined and must not hide the run's seed
    const train = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as SasrecTrainOptions;
    const r = await trainSasrec(seqs, this.index.size, {
      seed: ctx.seed,
      ...train,
      onEpoch: (epoch, loss, weights) => {
        this.lastLoss = loss;
        ctx.progress(epoch, epochs, `epochs, loss ${loss.toFixed(4)}`);
        return this.opts.checkpoint?.(epoch, loss, weights);
      },
    });
    this.weights = r.weights;
    this.trainSeconds = r.seconds;
  }

  /** Full-ranking protocols: the run's shared early-stopped model, or (without `params`) its own. */
  private async prepareEarlyStopped(ctx: MethodContext): Promise<void> {
    const params = this.opts.params;
    let r: EarlyStoppedSasrec;
    if (params) {
      // why shared: the shop file's sequence model (atomem's `sasrec` signal) is this very model under the full-ranking protocols
      const shared = await publishedSequence(ctx, { ...params, 'shop.until': '1' });
      if (!shared.earlyStopping) throw new Error('sasrec: the shared model of a full-ranking run was not early-stopped');
      r = { ...shared, ...shared.earlyStopping };
    } else {
      const { name: _n, checkpoint: _c, params: _p, ...rest } = this.opts;
      const train = Object.fromEntries(Object.entries(rest).filter(([, v]) => v !== undefined)) as SasrecTrainOptions;
      r = await trainEarlyStopped(ctx, ctx.histories, train, {});
    }
    this.index = r.index;
    this.weights = r.weights;
    this.trainSeconds = r.trainSeconds;
    this.lastLoss = r.finalLoss;
    this.validation = r.validation;
    this.bestEpoch = r.bestEpoch;
    this.epochsRun = r.epochsRun;
    this.loss = r.loss;
    this.settings = r.settings;
  }

  /** Every catalog item's score (−∞ for items the model does not know). */
  scoreAll(c: RankCase, out: Float32Array): void {
    const w = this.weights!;
    const catalog = this.ctx.catalog ?? [];
    const slots = (this.slotIdx ??= Int32Array.from(catalog, (id) => {
      const i = this.index.get(id) ?? 0;
      return i >= 1 && i <= w.numItems ? i : 0;
    }));
    const hist: number[] = [];
    for (const x of c.history) {
      const i = this.index.get(x.item);
      if (i !== undefined && i <= w.numItems) hist.push(i);
    }
    const u = encodeHistory(w, hist);
    const s = scoreItems(
      w,
      u,
      slots.map((i) => (i === 0 ? 1 : i)),
    );
    for (let k = 0; k < slots.length; k++) out[k] = slots[k] === 0 ? -Infinity : s[k];
  }

  /** The trained model (after `prepare`). */
  get model(): SasrecWeights | undefined {
    return this.weights;
  }

  /** Scores of a case's candidates (−∞ for items the model does not know). */
  scores(c: RankCase, weights: SasrecWeights = this.weights!): Float64Array {
    const hist: number[] = [];
    for (const x of c.history) {
      const i = this.index.get(x.item);
      if (i !== undefined && i <= weights.numItems) hist.push(i);
    }
    const u = encodeHistory(weights, hist);
    const known = c.candidates.map((id) => this.index.get(id) ?? 0);
    const s = scoreItems(
      weights,
      u,
      known.map((i) => (i >= 1 && i <= weights.numItems ? i : 1)),
    );
    return Float64Array.from(s, (v, k) => (known[k] >= 1 && known[k] <= weights.numItems ? v : -Infinity));
  }

  rank(c: RankCase): string[] {
    return this.rankWith(c, this.weights!);
  }

  /** `rank` with other weights of the same catalog (e.g. a checkpoint during training). */
  rankWith(c: RankCase, weights: SasrecWeights): string[] {
    return rankByScore(c.candidates, this.scores(c, weights), tieRng(this.ctx.seed, this.name, c.user));
  }

  extras(): Record<string, unknown> {
    const out: Record<string, unknown> = { trainSeconds: Math.round(this.trainSeconds * 10) / 10, finalLoss: Math.round(this.lastLoss * 1e4) / 1e4 };
    if (this.validation)
      Object.assign(out, { loss: this.loss, settings: this.settings, epochsRun: this.epochsRun, bestEpoch: this.bestEpoch, validation: this.validation });
    return out;
  }
}

/** A SASRec trained with early stopping on held-out last items (the full-ranking protocols' training). */
export interface EarlyStoppedSasrec {
  weights: SasrecWeights;
  /** Item id → 1..n (`itemIndex`). */
  index: Map<string, number>;
  trainSeconds: number;
  finalLoss: number;
  loss: NonNullable<SasrecTrainOptions['loss']>;
  /** The loss and regularisation the model trained with (catalog-scaled defaults, then explicit options). */
  settings: { loss: NonNullable<SasrecTrainOptions['loss']>; negatives?: number; dropout: number; maxLen: number; lr: number };
  /** NDCG@10 over all items of the held-out items, per evaluated epoch. */
  validation: { epoch: number; ndcg10: number }[];
  /** The epoch of the returned checkpoint. */
  bestEpoch?: number;
  epochsRun: number;
}

/**
 * SASRec at its published strength, as the full-ranking protocols train it (the `sasrec`
 * baseline and the shop file's sequence model alike): loss `ce` unless `train.loss` says
 * otherwise; each history of at least 3 interactions holds out its last one, the model trains
 * on the rest, every `evalEvery` epochs NDCG@10 over all items (history excluded, pessimistic
 * ties) of up to `validUsers` held-out items (a seeded sample) is measured, training stops after
 * `patience` evaluations without a gain or at `maxEpochs` (else `train.epochs`, else 200), and
 * the best checkpoint is returned. Only `histories` is read (never a test item).
 */
export async function trainEarlyStopped(
  ctx: MethodContext,
  histories: ReadonlyMap<string, readonly { item: string }[]>,
  train: SasrecTrainOptions,
  params: Readonly<Record<string, string>>,
): Promise<EarlyStoppedSasrec> {
  const stop = earlyStopOptions(params);
  // why maxEpochs: `sasrec.epochs` is also the fixed epoch count of protocol loo's shared model (80 by default)
  const epochs = stop.maxEpochs ?? train.epochs ?? 200;
  const index = itemIndex(ctx);
  const seqs: Int32Array[] = [];
  const held: Array<{ input: Int32Array; target: number }> = [];
  for (const seq of histories.values()) {
    const ids = Int32Array.from(seq, (x) => index.get(x.item)!);
    if (ids.length >= 3) {
      seqs.push(ids.subarray(0, ids.length - 1));
      held.push({ input: ids.subarray(0, ids.length - 1), target: ids[ids.length - 1] });
    } else if (ids.length > 0) seqs.push(ids);
  }
  // the catalog-scaled defaults (full CE on small catalogs, 1,024-negative sampled softmax on large
  // ones, sparse-data regularisation for short histories); explicit `sasrec.*` options win
  const profile = sasrecProfile(index.size, seqs);
  const settings: SasrecTrainOptions = { ...profile, ...train };
  if (train.loss !== undefined && train.loss !== 'sampled-softmax' && train.negatives === undefined) delete settings.negatives;
  const loss = settings.loss ?? 'ce';
  const rng = Rng.derive(ctx.seed, 'sasrec-validation');
  const valid = held.length > stop.validUsers ? rng.sampleWithoutReplacement(held, stop.validUsers) : held;
  const n = index.size;
  const validate = (w: SasrecWeights): number => fullRankNdcg10(w, n, valid);
  let best = -Infinity;
  let bestWeights: SasrecWeights | undefined;
  let bestEpoch: number | undefined;
  let since = 0;
  let finalLoss = NaN;
  let epochsRun = 0;
  const validation: { epoch: number; ndcg10: number }[] = [];
  const r = await trainSasrec(seqs, n, {
    seed: ctx.seed,
    ...settings,
    loss,
    epochs,
    onEpoch: (epoch, l, weights) => {
      finalLoss = l;
      epochsRun = epoch;
      if (epoch % stop.evalEvery !== 0 && epoch !== epochs) {
        ctx.progress(epoch, epochs, `sasrec epochs (${loss}), loss ${l.toFixed(4)}`);
        return;
      }
      const ndcg = validate(weights);
      validation.push({ epoch, ndcg10: Math.round(ndcg * 1e5) / 1e5 });
      ctx.progress(
        epoch,
        epochs,
        `sasrec epochs (${loss}), loss ${l.toFixed(4)}, validation NDCG@10 ${ndcg.toFixed(4)} (best ${Math.max(best, ndcg).toFixed(4)})`,
      );
      if (ndcg > best) {
        best = ndcg;
        bestEpoch = epoch;
        bestWeights = copyWeights(weights);
        since = 0;
      } else if (++since >= stop.patience) return false;
    },
  });
  const chosen = {
    loss,
    negatives: loss === 'sampled-softmax' ? (settings.negatives ?? SASREC_NEGATIVES_DEFAULT) : undefined,
    dropout: settings.dropout ?? SASREC_DEFAULTS.dropout,
    maxLen: settings.maxLen ?? SASREC_DEFAULTS.maxLen,
    lr: settings.lr ?? SASREC_DEFAULTS.lr,
  };
  return { weights: bestWeights ?? r.weights, index, trainSeconds: r.seconds, finalLoss, loss, settings: chosen, validation, bestEpoch, epochsRun };
}

/**
 * Mean NDCG@10 of held-out items ranked among every item 1..`numItems` not in their input
 * (pessimistic ties: an item scored equal to the target ranks above it).
 */
export function fullRankNdcg10(w: SasrecWeights, numItems: number, cases: ReadonlyArray<{ input: Int32Array; target: number }>): number {
  const all = Int32Array.from({ length: numItems }, (_, i) => i + 1);
  const seen = new Uint8Array(numItems + 1);
  let sum = 0;
  for (const v of cases) {
    const s = scoreItems(w, encodeHistory(w, v.input), all);
    const t = s[v.target - 1];
    for (const i of v.input) seen[i] = 1;
    let rank = 1;
    for (let i = 1; i <= numItems && rank <= 10; i++) if (i !== v.target && !seen[i] && s[i - 1] >= t) rank++;
    for (const i of v.input) seen[i] = 0;
    if (rank <= 10) sum += 1 / Math.log2(rank + 1);
  }
  return cases.length ? sum / cases.length : 0;
}

/** A deep copy of a model's weights (a checkpoint: the trainer's live view changes every step). */
export function copyWeights(w: SasrecWeights): SasrecWeights {
  // why slice, not structuredClone: the live tensors are views of a SharedArrayBuffer, which a clone would share
  const copy = (o: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v instanceof Float32Array ? v.slice() : v]));
  return {
    ...(copy(w as unknown as Record<string, unknown>) as unknown as SasrecWeights),
    config: { ...w.config },
    blocks: w.blocks.map((b) => copy(b as unknown as Record<string, unknown>) as unknown as SasrecWeights['blocks'][number]),
  };
}

registerMethod('sasrec', ({ params }: MethodOptions) => new SasrecMethod({ ...sasrecOptions(params), params }), {
  description: 'SASRec (Kang & McAuley 2018), L 100, d 64, 2 blocks, dropout 0.2, lr 0.002, 80 epochs (chosen on validation), centralized',
});
