/**
 * A {@link VectorSearch} over a usearch HNSW index with int8 storage only, for the scale
 * benchmark (`src/bench/index-scale.ts`). Self-contained alternative to the service's
 * `HnswVectorSearch` (src/server/vector-index.ts), which keeps a float32 master copy.
 *
 * - Vectors are quantized with the wire encoding of `src/protocol/index-v1.ts` (unit vector
 *   × 127, rounded) and kept twice: inside usearch (its HNSW nodes) and in a dense int8 slab
 *   here, because usearch's JS API cannot read a vector back and the community graph needs
 *   `vector(id)` for prototypes. 512-d: 2 × 512 B + the HNSW links per memory.
 * - HNSW candidates (`oversample` × k) are re-scored with the exact cosine of the int8 rows:
 *   usearch's i8 kernel is off by up to ~0.01, enough to swap near-tied neighbours; the int8
 *   cosine ranks like the float one (measured: identical top-2 on 300 queries at 10k).
 * - Ids are mapped to slots of the slab; a freed slot is reused by the next new id. Each insert
 *   gets a fresh u64 key (`slotOfKey` maps it to its slot); a replace or a removal only unmaps
 *   the old key, which stays in the graph as a stale node that searches skip. usearch's own
 *   `remove` is never called: in usearch 2.25.3 it can spin forever after a few hundred
 *   removals (unum-cloud/USearch#753; see packages/atomem-index/src/vector-index.ts).
 * - Single queries and inserts run on the caller's thread; `threads` applies to batched
 *   searches only (on the 2-vCPU benchmark machine 2 threads were ~2× slower than 1: the two
 *   vCPUs share about one core's throughput, and usearch spawns its threads per call).
 */
import { BatchMatches, Index, Matches, MetricKind, ScalarKind } from 'usearch';
import type { VectorHit, VectorSearch } from 'atomem/engine';
import { quantize } from 'atomem/protocol';

/** HNSW parameters of {@link UsearchVectorSearch}; 0 means usearch's default. */
export interface UsearchOptions {
  /** Links per node (HNSW `M`). Default 16. */
  connectivity?: number;
  /** Candidate list size while inserting (`efConstruction`). Default 128. */
  expansionAdd?: number;
  /** Candidate list size while searching (`ef`). Default 64. */
  expansionSearch?: number;
  /** HNSW candidates fetched per wanted hit, then re-scored exactly (≥ 1). Default 4. */
  oversample?: number;
  /** Threads for batched searches (0 = all cores). Default 1. */
  threads?: number;
  /** Slots allocated up front (the slab doubles when full). Default 1024. */
  initialCapacity?: number;
}

/**
 * usearch HNSW (cosine, int8) behind the community graph's {@link VectorSearch} seam.
 * Not thread-safe (neither is the graph); every method is synchronous.
 */
export class UsearchVectorSearch implements VectorSearch {
  readonly dim: number;
  private readonly index: Index;
  private readonly threads: number;
  private readonly oversample: number;
  private slab: Int8Array;
  /** Inverse L2 norm of each slot's int8 row. */
  private invNorm: Float32Array;
  private capacity: number;
  private readonly slotOf = new Map<string, number>();
  private readonly idOf: (string | undefined)[] = [];
  private readonly free: number[] = [];
  /** The slot of each live usearch key (stale keys are absent). */
  private readonly slotOfKey = new Map<number, number>();
  /** The live key of each slot. */
  private keyOfSlot: number[] = [];
  private nextKey = 1;

  /** @param dim vector dimension; @param options HNSW parameters. */
  constructor(dim: number, options: UsearchOptions = {}) {
    if (!Number.isInteger(dim) || dim <= 0) throw new RangeError(`dim must be a positive integer, got ${dim}`);
    this.dim = dim;
    this.threads = options.threads ?? 1;
    this.oversample = Math.max(1, Math.floor(options.oversample ?? 4));
    this.capacity = Math.max(16, options.initialCapacity ?? 1024);
    this.slab = new Int8Array(this.capacity * dim);
    this.invNorm = new Float32Array(this.capacity);
    this.index = new Index({
      dimensions: dim,
      metric: MetricKind.Cos,
      quantization: ScalarKind.I8,
      connectivity: options.connectivity ?? 0,
      expansion_add: options.expansionAdd ?? 0,
      expansion_search: options.expansionSearch ?? 0,
      multi: false,
    });
  }

  get size(): number {
    return this.slotOf.size;
  }

  /** Bytes of the int8 slab and norms kept here (usearch's native memory not included). */
  get slabBytes(): number {
    return this.slab.byteLength + this.invNorm.byteLength;
  }

  has(id: string): boolean {
    return this.slotOf.has(id);
  }

  add(id: string, vector: ArrayLike<number>): void {
    if (vector.length !== this.dim) throw new RangeError(`vector has ${vector.length} dimensions, store has ${this.dim}`);
    let slot = this.slotOf.get(id);
    if (slot !== undefined) {
      this.slotOfKey.delete(this.keyOfSlot[slot]); // replace: the old node goes stale
    } else {
      slot = this.free.pop() ?? this.idOf.length;
      if (slot === this.idOf.length) this.idOf.push(undefined);
      if (slot >= this.capacity) this.grow();
      this.slotOf.set(id, slot);
      this.idOf[slot] = id;
    }
    const q = quantize(vector);
    this.slab.set(q, slot * this.dim);
    let n = 0;
    for (let j = 0; j < q.length; j++) n += q[j] * q[j];
    this.invNorm[slot] = n > 0 ? 1 / Math.sqrt(n) : 0;
    const key = this.nextKey++;
    this.keyOfSlot[slot] = key;
    this.slotOfKey.set(key, slot);
    this.index.add(BigInt(key), q, 1);
  }

  remove(id: string): boolean {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return false;
    this.slotOfKey.delete(this.keyOfSlot[slot]);
    this.slotOf.delete(id);
    this.idOf[slot] = undefined;
    this.free.push(slot);
    return true;
  }

  /** A fresh unit Float32Array decoded from the stored int8 row (safe to keep). */
  vector(id: string): Float32Array | undefined {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return undefined;
    const d = this.dim;
    const out = new Float32Array(d);
    const s = this.invNorm[slot];
    const o = slot * d;
    for (let j = 0; j < d; j++) out[j] = this.slab[o + j] * s;
    return out;
  }

  search(query: ArrayLike<number>, k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[] {
    return this.searchMany([query], k, minSim, filter)[0];
  }

  searchMany(queries: readonly ArrayLike<number>[], k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[][] {
    const d = this.dim;
    const want = Math.min(Math.floor(k), this.size);
    if (!(want > 0)) return queries.map(() => []);
    const qs = queries.map((q) => {
      if (q.length !== d) throw new RangeError(`query has ${q.length} dimensions, store has ${d}`);
      return quantize(q);
    });
    const out: VectorHit[][] = new Array(qs.length);
    // why: stale nodes are still in the graph, so its size bounds what a search can return
    const graphSize = this.nextKey - 1;
    let fetch = Math.min(graphSize, want * this.oversample);
    let pending = qs.map((_, i) => i);
    while (pending.length > 0) {
      const found: { keys: BigUint64Array; distances: Float32Array }[] = [];
      if (pending.length === 1) {
        found.push(this.index.search(qs[pending[0]], fetch, 1) as unknown as Matches);
      } else {
        const block = new Int8Array(pending.length * d);
        pending.forEach((qi, j) => block.set(qs[qi], j * d));
        const m = this.index.search(block, fetch, this.threads) as unknown as BatchMatches;
        for (let j = 0; j < pending.length; j++) found.push(m.get(j));
      }
      const retry: number[] = [];
      pending.forEach((qi, j) => {
        const { keys, distances } = found[j];
        const hits = this.rescore(qs[qi], keys, want, minSim, filter);
        // Done: enough hits, the whole store seen, or the candidates already fell clearly
        // below minSim (usearch's i8 cosine is within ~0.01 of the exact one).
        const last = keys.length === 0 ? -Infinity : 1 - distances[keys.length - 1];
        if (hits.length >= want || keys.length < fetch || fetch >= graphSize || last < minSim - 0.02) out[qi] = hits;
        else retry.push(qi);
      });
      pending = retry;
      fetch = Math.min(graphSize, fetch * 4);
    }
    return out;
  }

  /** Exact int8 cosine of the candidates, bound and filter applied, best `k` first. */
  private rescore(q: Int8Array, keys: BigUint64Array, k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[] {
    const d = this.dim;
    let qn = 0;
    for (let j = 0; j < d; j++) qn += q[j] * q[j];
    const qs = qn > 0 ? 1 / Math.sqrt(qn) : 0;
    const hits: VectorHit[] = [];
    for (let i = 0; i < keys.length; i++) {
      const slot = this.slotOfKey.get(Number(keys[i]));
      if (slot === undefined) continue;
      const id = this.idOf[slot]!;
      const o = slot * d;
      let dot = 0;
      for (let j = 0; j < d; j++) dot += q[j] * this.slab[o + j];
      const sim = dot * qs * this.invNorm[slot];
      if (sim < minSim) continue;
      if (filter !== undefined && !filter(id)) continue;
      hits.push({ id, sim });
    }
    hits.sort((a, b) => b.sim - a.sim || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return hits.length > k ? hits.slice(0, k) : hits;
  }

  private grow(): void {
    const capacity = this.capacity * 2;
    const slab = new Int8Array(capacity * this.dim);
    slab.set(this.slab);
    const inv = new Float32Array(capacity);
    inv.set(this.invNorm);
    this.slab = slab;
    this.invNorm = inv;
    this.capacity = capacity;
  }
}
