/**
 * What the shop publishes in one benchmark context, trained once and shared by every method of a
 * run: the shop model (`trainForContext`, the file of `protocol/shop-model-v1.ts`) and the SASRec
 * sequence model, both learned from `ctx.histories` — exactly the log the centralized baselines
 * train on — optionally cut at a global time quantile (`shop.until`: a shop with a retention
 * limit). `shop`, `sasrec` and atomem's hybrid item vectors in one run therefore read the same
 * trained models (memoised per dataset, target, setting, seed, training parameters and cut-off).
 * Under protocol `loo` SASRec trains for a fixed number of epochs (BCE, one negative: the shipped
 * defaults of `trainSasrec`); under `loo-full` and `temporal` it trains as the `sasrec` baseline
 * does there (the catalog-scaled loss of `sasrecProfile`, packages/atomem/src/shop/sasrec/profile.ts:
 * cross-entropy over all items on small catalogs, 1,024-negative sampled softmax on large ones;
 * early-stopped on held-out last items: `trainEarlyStopped` in sasrec-method.ts), so the file carries the sequence model at the
 * strength the baseline is measured at.
 */
import type { Interaction } from 'atomem/engine';
import { assembleCatalogFile, decodeCatalogHead, decodeCatalogShard, encodeCatalogFileV3 } from 'atomem/protocol';
import { ShopKnowledge, type PublishedSasrec, type ShopModel, type SasrecWeights } from 'atomem/shop';
import { SASREC_DEFAULTS, trainSasrec } from 'atomem/shop';
import { paramNumber } from './registry.js';
import { sasrecOptions, itemIndex, trainEarlyStopped, type EarlyStoppedSasrec } from './sasrec-method.js';
import { scorerOptionsFrom, shopLog, timeQuantile, trainForContext } from './shop-method.js';
import type { Dataset, MethodContext } from './types.js';

/** A trained shop model of one context. */
export interface PublishedShop {
  model: ShopModel;
  fileBytes: number;
  trainSeconds: number;
}

/** A trained SASRec of one context, with its item index (id → 1..n). */
export interface PublishedSequence {
  weights: SasrecWeights;
  index: Map<string, number>;
  trainSeconds: number;
  finalLoss: number;
  /** Full-ranking protocols: how the early stopping went (loss, validation curve, chosen epoch). */
  earlyStopping?: Pick<EarlyStoppedSasrec, 'loss' | 'settings' | 'validation' | 'bestEpoch' | 'epochsRun'>;
}

/** How many trainings this process ran (the memo's check: one per context and key). */
export const trainings = { shop: 0, sasrec: 0 };

const shops = new WeakMap<Dataset, Map<string, Promise<PublishedShop>>>();
const sequences = new WeakMap<Dataset, Map<string, Promise<PublishedSequence>>>();
const knowledge = new WeakMap<Dataset, Map<string, Promise<ShopKnowledge>>>();

/** `shop.until` as a number in (0, 1] (1 = the whole log). */
export function shopUntil(params: Readonly<Record<string, string>>): number {
  const q = paramNumber(params, 'shop.until') ?? 1;
  if (!(q > 0 && q <= 1)) throw new RangeError(`shop.until (--shop-log-until) must be in (0, 1], got ${q}`);
  return q;
}

function paramsWith(params: Readonly<Record<string, string>>, prefix: string): [string, string][] {
  return Object.entries(params)
    .filter(([k]) => k.startsWith(prefix))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const fingerprints = new WeakMap<ReadonlyMap<string, readonly Interaction[]>, string>();

/** A hash of every (user, item, time) of the log: contexts with the same key but other logs (e.g. `sample`) never share. */
function logFingerprint(histories: ReadonlyMap<string, readonly Interaction[]>): string {
  let f = fingerprints.get(histories);
  if (f === undefined) {
    let h = 0x811c9dc5;
    let n = 0;
    const mix = (s: string) => {
      for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
    };
    for (const [u, seq] of histories) {
      mix(u);
      for (const x of seq) {
        mix(x.item);
        mix(String(x.at));
        n++;
      }
    }
    f = `${n}:${(h >>> 0).toString(16)}`;
    fingerprints.set(histories, f);
  }
  return f;
}

/** Protocols whose shared SASRec is trained early-stopped, at the `sasrec` baseline's strength. */
export function fullRankingContext(ctx: Pick<MethodContext, 'protocol'>): boolean {
  return ctx.protocol === 'loo-full' || ctx.protocol === 'temporal';
}

function contextKey(ctx: MethodContext, params: Readonly<Record<string, string>>, prefix: string): string {
  return JSON.stringify([
    // why only for full ranking: protocol loo's keys (and so its shop-knowledge ids) stay as they were
    ...(fullRankingContext(ctx) ? [ctx.protocol] : []),
    ctx.target ?? 'test',
    ctx.setting ?? 'full',
    ctx.seed,
    logFingerprint(ctx.histories),
    shopUntil(params),
    paramsWith(params, prefix).filter(([k]) => k !== 'shop.until'),
  ]);
}

/** The context's shop model (trained once per key; `shop.*` parameters as in the `shop` method). */
export function publishedShop(ctx: MethodContext, params: Readonly<Record<string, string>>): Promise<PublishedShop> {
  let byKey = shops.get(ctx.dataset);
  if (!byKey) shops.set(ctx.dataset, (byKey = new Map()));
  const key = contextKey(ctx, params, 'shop.');
  let p = byKey.get(key);
  if (!p) {
    trainings.shop++;
    p = trainForContext(ctx, params).then(({ model, bytes, seconds }) => ({ model, fileBytes: bytes.length, trainSeconds: seconds }));
    byKey.set(key, p);
    p.catch(() => byKey!.delete(key));
  }
  return p;
}

/** The histories the shop keeps when it retains only log rows before the `q`-quantile of all timestamps. */
export function retainedHistories(histories: ReadonlyMap<string, readonly Interaction[]>, q: number): Map<string, Interaction[]> {
  if (q >= 1) return new Map([...histories].map(([u, s]) => [u, [...s]]));
  const cut = timeQuantile(shopLog(histories), q);
  const out = new Map<string, Interaction[]>();
  for (const [u, s] of histories) {
    const kept = s.filter((x) => x.at < cut);
    if (kept.length) out.set(u, kept);
  }
  return out;
}

/** The context's SASRec (trained once per key; `sasrec.*` parameters as in the `sasrec` method). */
export function publishedSequence(ctx: MethodContext, params: Readonly<Record<string, string>>): Promise<PublishedSequence> {
  let byKey = sequences.get(ctx.dataset);
  if (!byKey) sequences.set(ctx.dataset, (byKey = new Map()));
  const key = contextKey(ctx, params, 'sasrec.');
  let p = byKey.get(key);
  if (!p) {
    trainings.sasrec++;
    p = (async () => {
      const opts = sasrecOptions(params);
      const train = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined));
      const kept = retainedHistories(ctx.histories, shopUntil(params));
      if (fullRankingContext(ctx)) {
        // the full-ranking protocols: trained as the `sasrec` baseline is (cross-entropy unless
        // sasrec.loss says otherwise, early-stopped on held-out last items), so the shop file
        // carries the sequence model at its published strength
        const r = await trainEarlyStopped(ctx, kept, train, params);
        const { loss, settings, validation, bestEpoch, epochsRun } = r;
        return {
          weights: r.weights,
          index: r.index,
          trainSeconds: r.trainSeconds,
          finalLoss: r.finalLoss,
          earlyStopping: { loss, settings, validation, bestEpoch, epochsRun },
        };
      }
      // the item index covers the whole catalog (and every id of the full histories), so a cut log keeps the same ids
      const index = itemIndex(ctx);
      const seqs = [...kept.values()].map((seq) => Int32Array.from(seq, (x) => index.get(x.item)!));
      const epochs = opts.epochs ?? SASREC_DEFAULTS.epochs;
      let finalLoss = NaN;
      const r = await trainSasrec(seqs, index.size, {
        seed: ctx.seed,
        ...train,
        onEpoch: (epoch, loss) => {
          finalLoss = loss;
          ctx.progress(epoch, epochs, `sasrec epochs, loss ${loss.toFixed(4)}`);
        },
      });
      return { weights: r.weights, index, trainSeconds: r.seconds, finalLoss };
    })();
    byKey.set(key, p);
    p.catch(() => byKey!.delete(key));
  }
  return p;
}

/**
 * The device-side view of the published files: {@link ShopKnowledge} over the shop model and,
 * unless `withSasrec` is false, the SASRec model with its item ids. Memoised like the models.
 */
export function shopKnowledgeFor(ctx: MethodContext, params: Readonly<Record<string, string>>, withSasrec = true): Promise<ShopKnowledge> {
  let byKey = knowledge.get(ctx.dataset);
  if (!byKey) knowledge.set(ctx.dataset, (byKey = new Map()));
  const key = JSON.stringify([contextKey(ctx, params, 'shop.'), withSasrec ? contextKey(ctx, params, 'sasrec.') : null]);
  let p = byKey.get(key);
  if (!p) {
    p = (async () => {
      const shop = await publishedShop(ctx, params);
      let sasrec: PublishedSasrec | undefined;
      if (withSasrec) {
        const seq = await publishedSequence(ctx, params);
        const items: string[] = [];
        for (const [id, i] of seq.index) items[i - 1] = id;
        sasrec = { weights: seq.weights, items };
      }
      // why: the space id names the trained file, so memories of different contexts/cut-offs never meet
      const id = `bench-${ctx.seed}-${ctx.target ?? 'test'}-${ctx.setting ?? 'full'}-u${shopUntil(params)}-${hashString(key)}`;
      const file = params['shop.file'] ?? 'v2';
      if (file === 'v3') {
        // the models as a phone gets them from a format v3 file: int8 SASRec item rows and collaborative vectors, re-encoded lists
        const enc = encodeCatalogFileV3({
          embedder: { id: 'bench-none', dim: 1 },
          items: [],
          vectors: [],
          shop: { model: shop.model, ...(sasrec ? { sasrec } : {}) },
          shardPrefix: 'shards/',
        });
        const head = decodeCatalogHead(enc.head);
        const part = assembleCatalogFile(
          head,
          enc.shards.map((x, k) => decodeCatalogShard(head, k, x.bytes)),
        ).shop!;
        return new ShopKnowledge(
          id,
          part.model,
          part.sasrec ? { weights: part.sasrec.weights, items: part.sasrec.items } : undefined,
          scorerOptionsFrom(params),
        );
      }
      if (file !== 'v2') throw new Error(`shop.file must be v2 or v3, got ${file}`);
      return new ShopKnowledge(id, shop.model, sasrec, scorerOptionsFrom(params));
    })();
    byKey.set(key, p);
    p.catch(() => byKey!.delete(key));
  }
  return p;
}

function hashString(s: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return (h >>> 0).toString(16).padStart(8, '0');
}
