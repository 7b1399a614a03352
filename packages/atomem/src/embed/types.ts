import type { Embedding } from '../core/types.js';

/**
 * A sentence embedder. Every vector it returns carries its {@link Embedder.id}, so vectors of
 * two models never meet in one index, and a change of embedder forces a re-embed.
 */
export interface Embedder {
  /** Model, dtype and version, e.g. `use-lite@1.3.3/float32`. */
  readonly id: string;
  /** Output dimension. */
  readonly dim: number;
  /** Embed texts; vectors are L2-normalised. Rejects empty input strings with a clear error. */
  embed(texts: readonly string[]): Promise<Embedding[]>;
  /** Release model memory. */
  dispose?(): Promise<void>;
}
