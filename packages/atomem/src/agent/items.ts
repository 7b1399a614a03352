import type { Embedding, Item } from '../core/types.js';
import type { Embedder } from '../embed/types.js';
import { itemText } from '../embed/cache.js';
import { isFiniteVector, normalize } from '../core/vector.js';
import type { ShopKnowledge } from '../shop/device.js';
import { mapContent } from '../shop/score.js';
import { UnknownItemError } from '../errors.js';

/** FNV-1a over the float bits: a short, stable name for a centring mean. */
function hashVector(v: Float32Array): string {
  const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  let h = 0x811c9dc5;
  for (let i = 0; i < bytes.length; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return (h >>> 0).toString(16).padStart(8, '0');
}

/**
 * A deterministic unit direction from an item id (xorshift seeded by FNV-1a): the position of an
 * item the shop's file can neither find nor place — in 32 dimensions it is similar to nothing in
 * particular (|cosine| ≈ 0.18 to anything), and memories keep their unit vectors.
 */
function idDirection(id: string, dim: number): Float32Array {
  let h = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  let x = h >>> 0 || 1;
  const v = new Float32Array(dim);
  for (let d = 0; d < dim; d++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    v[d] = ((x >>> 0) / 4294967296) * 2 - 1;
  }
  return normalize(v);
}

/** Thrown for an item id the catalog does not know (defined in `src/errors.ts`, the page's copy of the class). */
export { UnknownItemError };

/**
 * The catalog plus item embeddings, memoised by item id. One instance may serve many agents
 * (the benchmark shares one across all simulated users).
 */
export class ItemVectors {
  private readonly items = new Map<string, Item>();
  private readonly vectors = new Map<string, Embedding>();
  /** Item vectors in the shop's collaborative space (with {@link useShop}). */
  private readonly shopVectors = new Map<string, Embedding>();
  private mean: Float32Array | undefined;
  private spaceId: string;
  private contentId: string;
  private shopKnowledge: ShopKnowledge | undefined;
  /** {@link contentMean}'s last answer, for the content space and catalog size it was computed for. */
  private meanCache: { spaceId: string; count: number; vector: Float32Array } | undefined;
  /** See {@link version}. */
  private changes = 0;

  constructor(
    readonly embedder: Embedder,
    items: Iterable<Item> = [],
  ) {
    this.spaceId = embedder.id;
    this.contentId = embedder.id;
    this.add(items);
  }

  /**
   * Id of the vector space item and memory vectors live in: the embedder's id, plus
   * `~c<hash>` once centred on a catalog mean. Vectors of two spaces never meet.
   */
  get embedderId(): string {
    return this.spaceId;
  }

  /**
   * Changes whenever the catalog or a computed item vector may have changed (items added or
   * replaced, centring, the shop's space, a seeded vector); not when a missing vector is computed.
   * While it is unchanged, an item's vector stays the same object ({@link cached}).
   */
  get version(): number {
    return this.changes;
  }

  /** The shop's published model, when {@link useShop} moved the item space to it. */
  get shop(): ShopKnowledge | undefined {
    return this.shopKnowledge;
  }

  /** Dimension of the item space (the embedder's, or the shop's collaborative vectors'). */
  get dim(): number {
    return this.shopKnowledge?.model.vectors?.dim ?? this.embedder.dim;
  }

  /**
   * Move the item space to the shop's collaborative vectors (the published model of its order
   * log), where "near" means "liked by the same people": from now on {@link vectorsOf} returns
   * them, and memories, retrieval and communities live there. Items the file has no vector for
   * are placed through its content map from their content embedding (new products), else they
   * get a deterministic random direction from their id (similar to nothing in particular). {@link contentVectorsOf} keeps the
   * content space (for text such as a stated intent). The space id is `shop:<file id>`.
   */
  useShop(shop: ShopKnowledge): void {
    if (!shop.model.vectors) throw new RangeError('useShop: the shop model has no item vectors');
    this.shopKnowledge = shop;
    this.shopVectors.clear();
    this.changes++;
    this.spaceId = `shop:${shop.id}`;
  }

  /** The catalog mean subtracted from every vector (undefined before centring). */
  get center(): Float32Array | undefined {
    return this.mean;
  }

  /**
   * Centre the space on a mean vector (by default the mean of the whole catalog, embedding
   * it first) and re-normalise. Why: sentence encoders put all texts of one domain in a
   * narrow cone (USE-lite: half of all movie pairs above cosine 0.74), which drowns the
   * differences between interests; removing the common direction spreads similarities
   * around 0 and makes them discriminative (ML-100K validation: history-similarity NDCG@10
   * 0.55 → 0.62). Every device of one shop must use the same mean (pass it explicitly).
   */
  async centre(mean?: ArrayLike<number>, onProgress?: (done: number, total: number) => void): Promise<void> {
    if (this.mean) throw new Error('item space is already centred');
    if (this.shopKnowledge) throw new Error("centre: the item space is the shop's; centre the content space before useShop");
    let m: Float32Array;
    if (mean) {
      if (mean.length !== this.embedder.dim) throw new RangeError(`centre: mean has dimension ${mean.length}, embedder ${this.embedder.dim}`);
      m = Float32Array.from(mean);
    } else {
      await this.warm(onProgress);
      if (this.vectors.size === 0) throw new Error('centre: the catalog is empty');
      m = new Float32Array(this.embedder.dim);
      for (const e of this.vectors.values()) for (let i = 0; i < m.length; i++) m[i] += e.vector[i];
      for (let i = 0; i < m.length; i++) m[i] /= this.vectors.size;
    }
    if (!isFiniteVector(m)) throw new RangeError('centre: mean contains NaN or Infinity');
    this.mean = m;
    this.spaceId = this.contentId = `${this.embedder.id}~c${hashVector(m)}`;
    for (const [id, e] of this.vectors) this.vectors.set(id, this.project(e.vector));
    this.changes++;
  }

  private project(v: Float32Array): Embedding {
    if (!this.mean) return { embedderId: this.contentId, vector: v };
    const out = new Float32Array(v.length);
    for (let i = 0; i < v.length; i++) out[i] = v[i] - this.mean[i];
    return { embedderId: this.contentId, vector: normalize(out) };
  }

  /** Add or replace catalog items (a changed item is re-embedded on next use). */
  add(items: Iterable<Item>): void {
    this.changes++;
    for (const it of items) {
      if (!it || typeof it.id !== 'string' || !it.id || typeof it.title !== 'string') {
        throw new TypeError('catalog item needs a non-empty string id and a string title');
      }
      const prev = this.items.get(it.id);
      this.meanCache = undefined;
      if (prev && itemText(prev) !== itemText(it)) {
        this.vectors.delete(it.id);
        this.shopVectors.delete(it.id);
      }
      this.items.set(it.id, it);
    }
  }

  /** The item, or throw UnknownItemError. */
  item(id: string): Item {
    const it = this.items.get(id);
    if (!it) throw new UnknownItemError(id);
    return it;
  }

  has(id: string): boolean {
    return this.items.has(id);
  }

  /** Number of catalog items. */
  get size(): number {
    return this.items.size;
  }

  /** Every catalog item. */
  all(): IterableIterator<Item> {
    return this.items.values();
  }

  /** Vectors of the given items in the item space (the shop's after {@link useShop}, else the content space). */
  async vectorsOf(ids: readonly string[]): Promise<Embedding[]> {
    if (this.shopKnowledge) return this.shopVectorsOf(ids);
    return this.contentVectorsOf(ids);
  }

  private async shopVectorsOf(ids: readonly string[]): Promise<Embedding[]> {
    const shop = this.shopKnowledge!;
    const dim = this.dim;
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      if (this.shopVectors.has(id)) continue;
      const v = shop.vectorOf(id);
      if (v) this.shopVectors.set(id, { embedderId: this.spaceId, vector: Float32Array.from(v) });
      else missing.push(id);
    }
    if (missing.length) {
      const map = shop.model.contentMap;
      // why: the content map expects the embedder's raw output (it subtracts its own mean); centred vectors cannot be uncentred.
      const raw = map && map.embedder === this.embedder.id ? await this.embedder.embed(missing.map((id) => itemText(this.item(id)))) : undefined;
      missing.forEach((id, i) => {
        const mapped = raw ? mapContent(map!, raw[i].vector, dim) : undefined;
        const vector = mapped?.some((x) => x !== 0) ? mapped : idDirection(id, dim);
        this.shopVectors.set(id, { embedderId: this.spaceId, vector });
      });
    }
    return ids.map((id) => this.shopVectors.get(id)!);
  }

  /** Embeddings of the given items in the content space (embedding misses in one batch). */
  async contentVectorsOf(ids: readonly string[]): Promise<Embedding[]> {
    let absent: string[] | undefined;
    for (const id of ids) if (!this.vectors.has(id)) (absent ??= []).push(id);
    if (absent) {
      const missing = [...new Set(absent)];
      const texts = missing.map((id) => itemText(this.item(id)));
      const embs = await this.embedder.embed(texts);
      missing.forEach((id, i) => this.vectors.set(id, this.project(embs[i].vector)));
    }
    const out = new Array<Embedding>(ids.length);
    for (let i = 0; i < ids.length; i++) out[i] = this.vectors.get(ids[i])!;
    return out;
  }

  /**
   * Embed a free text (e.g. the shopper's stated intent) into the content space, centred like the
   * items: comparable with {@link contentVectorsOf}, whatever the item space is. Nothing is cached
   * or stored (the embedder's own in-memory cache, if it has one, aside).
   */
  async embedText(text: string): Promise<Embedding> {
    const [e] = await this.embedder.embed([text]);
    return this.project(e.vector);
  }

  /**
   * The mean of every catalog item's content vector (not normalised): its dot product with a unit
   * text vector is that text's average cosine to a catalog item. Embeds what is missing first;
   * recomputed after the catalog or the centring changed.
   */
  async contentMean(): Promise<Float32Array> {
    if (this.meanCache && this.meanCache.spaceId === this.contentId && this.meanCache.count === this.items.size) return this.meanCache.vector;
    const ids = [...this.items.keys()];
    const acc = new Float32Array(this.embedder.dim);
    for (let i = 0; i < ids.length; i += 256) {
      for (const e of await this.contentVectorsOf(ids.slice(i, i + 256))) for (let d = 0; d < acc.length; d++) acc[d] += e.vector[d];
    }
    for (let d = 0; d < acc.length; d++) acc[d] /= Math.max(1, ids.length);
    this.meanCache = { spaceId: this.contentId, count: this.items.size, vector: acc };
    return acc;
  }

  /** The content space's id (the embedder's, `~c<hash>` once centred), whatever the item space is. */
  get contentSpaceId(): string {
    return this.contentId;
  }

  /**
   * Give an item its embedder output computed earlier (e.g. from a persistent cache), so it is
   * not embedded again. `raw` must come from this embedder for the item's current text.
   */
  seed(id: string, raw: Float32Array): void {
    if (!this.items.has(id)) return;
    if (raw.length !== this.embedder.dim) throw new RangeError(`seed: vector of ${id} has dimension ${raw.length}, embedder ${this.embedder.dim}`);
    this.vectors.set(id, this.project(raw));
    this.changes++;
  }

  /** The embedder's own output for an item (undone centring is not possible, so only before `centre`). */
  raw(id: string): Float32Array | undefined {
    if (this.mean) return undefined;
    return this.vectors.get(id)?.vector;
  }

  /** Embedding of one item in the item space, if already computed (sync; for hot loops after a warm-up). */
  cached(id: string): Embedding | undefined {
    return this.shopKnowledge ? this.shopVectors.get(id) : this.vectors.get(id);
  }

  /** Embed the whole catalog in the content space (in batches), reporting progress. */
  async warm(onProgress?: (done: number, total: number) => void, batch = 256): Promise<void> {
    const ids = [...this.items.keys()].filter((id) => !this.vectors.has(id));
    for (let i = 0; i < ids.length; i += batch) {
      await this.contentVectorsOf(ids.slice(i, i + batch));
      onProgress?.(Math.min(ids.length, i + batch), ids.length);
    }
  }
}
