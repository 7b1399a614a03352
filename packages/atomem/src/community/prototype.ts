/**
 * Community prototypes (STEAM's `p_k`): the embedding `e_k` is the normalised mean of the
 * members' vectors; `items` counts, per catalog item, how many members list it. Text summaries
 * (`c_k`) are written on the device by the reasoner and are not this module's concern.
 * Pure, no I/O.
 */

/** Per-community running aggregates. */
interface Aggregate {
  /** Running sum of member vectors, in float64 so long add/subtract histories do not drift. */
  sum: Float64Array;
  /** Member count. */
  size: number;
  /** Members that uploaded an `items` list (possibly empty). */
  uploaders: number;
  /** item id → number of members whose `items` contain it. */
  items: Map<string, number>;
}

/** One member as the tracker sees it. */
export interface PrototypeMember {
  vector: ArrayLike<number>;
  /** Deduplicated item ids, or undefined when the member uploaded none. */
  items?: readonly string[];
}

/**
 * Running sums per community so a prototype costs O(d) per membership change (and O(d) per
 * merge: the absorbed community's sums are added wholesale), not O(size·d).
 */
export class PrototypeTracker {
  private readonly aggs = new Map<string, Aggregate>();

  constructor(readonly dim: number) {}

  private agg(id: string): Aggregate {
    let a = this.aggs.get(id);
    if (a === undefined) {
      a = { sum: new Float64Array(this.dim), size: 0, uploaders: 0, items: new Map() };
      this.aggs.set(id, a);
    }
    return a;
  }

  /** Add one member to community `id`. */
  add(id: string, m: PrototypeMember): void {
    const a = this.agg(id);
    const s = a.sum;
    const v = m.vector;
    for (let i = 0; i < s.length; i++) s[i] += v[i];
    a.size++;
    if (m.items !== undefined) {
      a.uploaders++;
      for (const it of m.items) a.items.set(it, (a.items.get(it) ?? 0) + 1);
    }
  }

  /** Remove one member from community `id`. */
  remove(id: string, m: PrototypeMember): void {
    const a = this.aggs.get(id);
    if (a === undefined) return;
    const s = a.sum;
    const v = m.vector;
    for (let i = 0; i < s.length; i++) s[i] -= v[i];
    a.size--;
    if (m.items !== undefined) {
      a.uploaders--;
      for (const it of m.items) {
        const c = (a.items.get(it) ?? 0) - 1;
        if (c > 0) a.items.set(it, c);
        else a.items.delete(it);
      }
    }
    if (a.size <= 0) this.aggs.delete(id);
  }

  /** Merge community `from` into `into` (O(d + distinct items of `from`)). */
  absorb(into: string, from: string): void {
    const b = this.aggs.get(from);
    if (b === undefined || from === into) return;
    const a = this.agg(into);
    for (let i = 0; i < a.sum.length; i++) a.sum[i] += b.sum[i];
    a.size += b.size;
    a.uploaders += b.uploaders;
    for (const [it, c] of b.items) a.items.set(it, (a.items.get(it) ?? 0) + c);
    this.aggs.delete(from);
  }

  /**
   * Split: community `to` is (re)computed from scratch from `members`, and those members are
   * subtracted from `from` (which keeps the rest). Cost O(|members|·d).
   */
  split(from: string, to: string, members: Iterable<PrototypeMember>): void {
    this.aggs.delete(to);
    const a = this.agg(to);
    for (const m of members) {
      this.add(to, m);
      this.remove(from, m);
    }
    if (a.size === 0) this.aggs.delete(to);
  }

  /** Recompute community `id` from scratch (drops accumulated rounding). */
  recompute(id: string, members: Iterable<PrototypeMember>): void {
    this.aggs.delete(id);
    for (const m of members) this.add(id, m);
  }

  /** Forget community `id`. */
  drop(id: string): void {
    this.aggs.delete(id);
  }

  /** Member count as tracked. */
  size(id: string): number {
    return this.aggs.get(id)?.size ?? 0;
  }

  /**
   * The prototype vector: normalised mean of member vectors (a zero vector only if the
   * members cancel out exactly), or undefined for an unknown community.
   */
  prototype(id: string): Float32Array | undefined {
    const a = this.aggs.get(id);
    if (a === undefined) return undefined;
    return normalizeSum(a.sum);
  }

  /**
   * item id → number of members listing it, or undefined when no member uploaded items.
   * The returned map is live: copy it before mutating the tracker.
   */
  items(id: string): ReadonlyMap<string, number> | undefined {
    const a = this.aggs.get(id);
    if (a === undefined || a.uploaders === 0) return undefined;
    return a.items;
  }
}

function normalizeSum(sum: ArrayLike<number>): Float32Array {
  let n = 0;
  for (let i = 0; i < sum.length; i++) n += sum[i] * sum[i];
  n = Math.sqrt(n);
  const out = new Float32Array(sum.length);
  if (n > 0) for (let i = 0; i < sum.length; i++) out[i] = sum[i] / n;
  return out;
}

/** From scratch: the normalised mean of `vectors` (what the tracker maintains incrementally). */
export function prototypeOf(vectors: Iterable<ArrayLike<number>>): Float32Array {
  let sum: Float64Array | undefined;
  for (const v of vectors) {
    sum ??= new Float64Array(v.length);
    for (let i = 0; i < v.length; i++) sum[i] += v[i];
  }
  return sum === undefined ? new Float32Array(0) : normalizeSum(sum);
}

/**
 * From scratch: item id → number of lists containing it (duplicates inside one list count
 * once, so each member contributes at most 1 per item — the sensitivity the noise assumes).
 * Undefined when every list is undefined (nobody uploaded items).
 */
export function aggregateItems(lists: Iterable<readonly string[] | undefined>): Map<string, number> | undefined {
  let out: Map<string, number> | undefined;
  for (const list of lists) {
    if (list === undefined) continue;
    out ??= new Map();
    for (const it of new Set(list)) out.set(it, (out.get(it) ?? 0) + 1);
  }
  return out;
}
