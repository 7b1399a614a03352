import type { Embedding, Item } from '../core/types.js';
import type { Embedder } from '../embed/types.js';
import { itemText } from '../embed/cache.js';

/** Thrown for an item id the catalog does not know. */
export class UnknownItemError extends Error {
  override name = 'UnknownItemError';
  constructor(readonly itemId: string) {
    super(`unknown item "${itemId}": add it to the catalog before tracking or ranking it`);
  }
}

/**
 * The catalog plus item embeddings, memoised by item id. One instance may serve many agents
 * (the benchmark shares one across all simulated users).
 */
export class ItemVectors {
  private readonly items = new Map<string, Item>();
  private readonly vectors = new Map<string, Embedding>();

  constructor(readonly embedder: Embedder, items: Iterable<Item> = []) {
    this.add(items);
  }

  /** Add or replace catalog items (a changed item is re-embedded on next use). */
  add(items: Iterable<Item>): void {
    for (const it of items) {
      if (!it || typeof it.id !== 'string' || !it.id || typeof it.title !== 'string') {
        throw new TypeError('catalog item needs a non-empty string id and a string title');
      }
      const prev = this.items.get(it.id);
      if (prev && itemText(prev) !== itemText(it)) this.vectors.delete(it.id);
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

  /** Every catalog item. */
  all(): IterableIterator<Item> {
    return this.items.values();
  }

  /** Embeddings of the given items (embedding misses in one batch). */
  async vectorsOf(ids: readonly string[]): Promise<Embedding[]> {
    const missing = [...new Set(ids.filter((id) => !this.vectors.has(id)))];
    if (missing.length) {
      const texts = missing.map((id) => itemText(this.item(id)));
      const embs = await this.embedder.embed(texts);
      missing.forEach((id, i) => this.vectors.set(id, embs[i]));
    }
    return ids.map((id) => this.vectors.get(id)!);
  }

  /** Embedding of one item, if already computed (sync; for hot loops after a warm-up). */
  cached(id: string): Embedding | undefined {
    return this.vectors.get(id);
  }

  /** Embed the whole catalog (in batches), reporting progress. */
  async warm(onProgress?: (done: number, total: number) => void, batch = 256): Promise<void> {
    const ids = [...this.items.keys()].filter((id) => !this.vectors.has(id));
    for (let i = 0; i < ids.length; i += batch) {
      await this.vectorsOf(ids.slice(i, i + batch));
      onProgress?.(Math.min(ids.length, i + batch), ids.length);
    }
  }
}
