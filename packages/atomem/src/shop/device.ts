/**
 * What a device knows from the shop's published file, and the signals it computes from it over
 * the shopper's own history (pure: no I/O, runs in the engine worker). The file carries the
 * shop model (lists, popularity, collaborative vectors, content map; `protocol/shop-model-v1.ts`)
 * and, optionally, a SASRec sequence model with its item ids.
 */
import { pairQuantileOf, type ShopModel } from '../protocol/shop-model-v1.js';
import { encodeHistory, scoreItems, type SasrecWeights } from './sasrec/model.js';
import { ShopScorer, type DeviceEvent, type ScorerOptions } from './score.js';

/** A published SASRec model and the item ids of its indices (`items[i - 1]` is index i). */
export interface PublishedSasrec {
  weights: SasrecWeights;
  items: readonly string[];
}

/** Names of the signals {@link ShopKnowledge.signals} may return beyond the shop scorer's. */
export const SEQUENCE_SIGNAL = 'sasrec';

/** The decoded published file, ready to score. Build once per file. */
export class ShopKnowledge {
  readonly scorer: ShopScorer;
  private readonly sasrecIndex = new Map<string, number>();
  private cache: { key: string; history: readonly DeviceEvent[]; user: Float32Array } | undefined;
  private readonly quantiles = new Map<number, number>();

  /**
   * @param id a stable id of the file (e.g. a hash of its bytes): part of the item space's id,
   *   so memories made with another file are recognised and moved.
   */
  constructor(
    readonly id: string,
    readonly model: ShopModel,
    readonly sasrec?: PublishedSasrec,
    opts: ScorerOptions = {},
  ) {
    this.scorer = new ShopScorer(model, opts);
    if (sasrec) {
      if (sasrec.items.length > sasrec.weights.numItems)
        throw new RangeError(`sasrec: ${sasrec.items.length} item ids for a model of ${sasrec.weights.numItems} items`);
      sasrec.items.forEach((item, i) => this.sasrecIndex.set(item, i + 1));
    }
  }

  /**
   * The `q`-quantile of cosine similarity between random pairs of items with data (deterministic:
   * up to 20,000 pairs drawn by a fixed xorshift). atomem sets STEAM's `tau` in this space at the
   * 0.9 quantile — where the paper's 0.5 sits for all-MiniLM-L6-v2 on catalog text. Memoised.
   * A model whose `info.pairQuantiles` holds the figure for `q` (format v3: computed by the
   * writer over every item, `PAIR_QUANTILES`) returns it.
   */
  pairQuantile(q: number): number {
    const hit = this.quantiles.get(q);
    if (hit !== undefined) return hit;
    // a format v3 file ships the quantiles over all its items (the device holds only some items' vectors)
    const shipped = (this.model.info.pairQuantiles as Record<string, unknown> | undefined)?.[String(q)];
    if (typeof shipped === 'number' && Number.isFinite(shipped)) {
      this.quantiles.set(q, shipped);
      return shipped;
    }
    const out = pairQuantileOf(this.model, q);
    this.quantiles.set(q, out);
    return out;
  }

  /** Whether `now` is a live moment for the file ({@link ShopScorer.live}): the agent then ranks with `shopWeightsLive`. */
  live(now: number): boolean {
    return this.scorer.live(now);
  }

  /** The item's collaborative vector (unit for items with data, shorter for content-predicted ones), if the file has one. */
  vectorOf(id: string): Float32Array | undefined {
    const v = this.model.vectors;
    if (!v) return undefined;
    const i = this.scorer.indexOf(id);
    if (i === undefined) return undefined;
    const row = v.values.subarray(i * v.dim, (i + 1) * v.dim);
    for (let d = 0; d < v.dim; d++) if (row[d] !== 0) return row;
    return undefined;
  }

  /**
   * Every signal for `candidates` (same order) from the shopper's `history` (oldest first):
   * the shop scorer's (ease, knn, markov, pop, vec, … and their recent variants) plus `sasrec`
   * when the file has a sequence model. `key` (e.g. the history's last sequence number) lets a
   * repeated call on the same history reuse the sequence model's user vector.
   */
  signals(history: readonly DeviceEvent[], candidates: readonly string[], now?: number, key?: string): Record<string, Float64Array> {
    const out: Record<string, Float64Array> = { ...this.scorer.signals(history, candidates, now) };
    if (this.sasrec) out[SEQUENCE_SIGNAL] = this.sequenceScores(history, candidates, key);
    return out;
  }

  /**
   * For explanations: per signal, the shopper's item that moved each candidate most (see
   * {@link ShopScorer.sources}); `sasrec`'s is the last positive event (the sequence model reads
   * what came last).
   */
  sources(history: readonly DeviceEvent[], candidates: readonly string[]): Record<string, Array<string | undefined>> {
    const out = this.scorer.sources(history, candidates);
    if (this.sasrec) {
      const last = [...history].reverse().find((e) => e.action !== 'dislike' && e.action !== 'skip')?.item;
      out[SEQUENCE_SIGNAL] = candidates.map((id) => (id === last ? undefined : last));
    }
    return out;
  }

  private sequenceScores(history: readonly DeviceEvent[], candidates: readonly string[], key?: string): Float64Array {
    const { weights } = this.sasrec!;
    let user: Float32Array;
    // why the history too: one file may serve many agents (the benchmark's simulated shoppers), whose keys can coincide
    if (key !== undefined && this.cache?.key === key && this.cache.history === history) user = this.cache.user;
    else {
      // why: SASRec reads a sequence of positive interactions; dislikes and skips are not "next items".
      const seq: number[] = [];
      for (const e of history) {
        if (e.action === 'dislike' || e.action === 'skip') continue;
        const i = this.sasrecIndex.get(e.item);
        if (i !== undefined) seq.push(i);
      }
      user = encodeHistory(weights, seq.slice(-weights.config.maxLen));
      if (key !== undefined) this.cache = { key, history, user };
    }
    const idx = candidates.map((id) => this.sasrecIndex.get(id) ?? 0);
    const s = scoreItems(
      weights,
      user,
      idx.map((i) => (i > 0 ? i : 1)),
    );
    // why: an item the sequence model never saw gets the list's mean, not −∞ (it must not sink below everything).
    let sum = 0;
    let n = 0;
    for (let k = 0; k < idx.length; k++) if (idx[k] > 0) (sum += s[k]), n++;
    const mean = n ? sum / n : 0;
    return Float64Array.from(s, (v, k) => (idx[k] > 0 ? v : mean));
  }
}
