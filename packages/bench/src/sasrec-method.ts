/**
 * Benchmark method `sasrec`: SASRec (Kang & McAuley 2018) trained centrally on
 * `ctx.histories` (every user's interactions before their own target) with
 * src/shop/sasrec/train.ts, each case ranked by score(candidate) = encodeHistory(history) ·
 * itemEmbedding(candidate). The case's history is the model input; the target is only
 * ever one of the candidates.
 *
 * Parameters (`--param sasrec.KEY=VALUE`): epochs, lr, batchSize, maxLen, dim, blocks,
 * heads, dropout, l2, threads, chunks, seed (default: the run's seed).
 */
import { registerMethod, paramNumber, type MethodOptions } from './registry.js';
import { rankByScore, tieRng } from './baselines.js';
import type { Method, MethodContext, RankCase } from './types.js';
import { publishedSequence } from './shop-publish.js';
import { encodeHistory, scoreItems, type SasrecWeights } from 'atomem/shop';
import { SASREC_DEFAULTS, trainSasrec, type SasrecTrainOptions } from 'atomem/shop';

const KEYS = ['epochs', 'lr', 'batchSize', 'maxLen', 'dim', 'blocks', 'heads', 'dropout', 'l2', 'threads', 'chunks', 'seed'] as const;

/** `sasrec.*` parameters as training options (absent keys stay undefined). */
export function sasrecOptions(params: Readonly<Record<string, string>>): SasrecTrainOptions {
  const out: Record<string, number | undefined> = {};
  for (const k of KEYS) out[k] = paramNumber(params, `sasrec.${k}`);
  const unknown = Object.keys(params).filter((k) => k.startsWith('sasrec.') && !KEYS.includes(k.slice(7) as (typeof KEYS)[number]));
  if (unknown.length) throw new Error(`sasrec: unknown parameter ${unknown.join(', ')} (known: ${KEYS.map((k) => `sasrec.${k}`).join(', ')})`);
  return out as SasrecTrainOptions;
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
    const s = scoreItems(weights, u, known.map((i) => (i >= 1 && i <= weights.numItems ? i : 1)));
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
    return { trainSeconds: Math.round(this.trainSeconds * 10) / 10, finalLoss: Math.round(this.lastLoss * 1e4) / 1e4 };
  }
}

registerMethod('sasrec', ({ params }: MethodOptions) => new SasrecMethod({ ...sasrecOptions(params), params }), {
  description: 'SASRec (Kang & McAuley 2018), L 100, d 64, 2 blocks, dropout 0.2, lr 0.002, 80 epochs (chosen on validation), centralized',
});
