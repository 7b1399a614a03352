/** Small, pure vector helpers. Vectors are Float32Array; similarity assumes unit norm. */

/** Throw a clear error when two vectors' dimensions differ. */
export function assertSameDim(a: ArrayLike<number>, b: ArrayLike<number>): void {
  if (a.length !== b.length) throw new RangeError(`vector dimension mismatch: ${a.length} vs ${b.length}`);
}

/** Dot product, summed in index order (unrolled by four; the same additions in the same order). */
export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  assertSameDim(a, b);
  return sumProducts(a, b, 0, a.length, 0);
}

/** `s` plus the products of `a` and `b` from `from` to `to` (exclusive), added one by one in index order. */
export function sumProducts(a: ArrayLike<number>, b: ArrayLike<number>, from: number, to: number, s: number): number {
  let i = from;
  for (; i + 3 < to; i += 4) {
    s += a[i] * b[i];
    s += a[i + 1] * b[i + 1];
    s += a[i + 2] * b[i + 2];
    s += a[i + 3] * b[i + 3];
  }
  for (; i < to; i++) s += a[i] * b[i];
  return s;
}

/**
 * `out[r]` = the dot product of row `r` of `m` (`rows` rows of `dim` numbers, one after the
 * other) with `v`: 4 rows at a time (independent sums run side by side), each summed in index
 * order — the same bits as {@link dot} of that row and `v`.
 */
export function rowDots(m: Float32Array, rows: number, dim: number, v: ArrayLike<number>, out: Float64Array): void {
  if (v.length !== dim || m.length < rows * dim || out.length < rows) throw new RangeError(`rowDots: ${rows} rows of ${dim} against a vector of ${v.length}`);
  let r = 0;
  for (; r + 3 < rows; r += 4) {
    let s0 = 0;
    let s1 = 0;
    let s2 = 0;
    let s3 = 0;
    const o0 = r * dim;
    const o1 = o0 + dim;
    const o2 = o1 + dim;
    const o3 = o2 + dim;
    for (let d = 0; d < dim; d++) {
      const x = v[d];
      s0 += m[o0 + d] * x;
      s1 += m[o1 + d] * x;
      s2 += m[o2 + d] * x;
      s3 += m[o3 + d] * x;
    }
    out[r] = s0;
    out[r + 1] = s1;
    out[r + 2] = s2;
    out[r + 3] = s3;
  }
  for (; r < rows; r++) {
    let s = 0;
    const o = r * dim;
    for (let d = 0; d < dim; d++) s += m[o + d] * v[d];
    out[r] = s;
  }
}

/** Euclidean norm. */
export function norm(a: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * a[i];
  return Math.sqrt(s);
}

/** Return a new unit-norm copy; throws on a zero, NaN or infinite vector. */
export function normalize(a: ArrayLike<number>): Float32Array {
  const n = norm(a);
  if (!Number.isFinite(n)) throw new RangeError('vector contains NaN or Infinity');
  if (n === 0) throw new RangeError('cannot normalise a zero vector');
  const out = new Float32Array(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] / n;
  return out;
}

/** Cosine similarity (safe for non-unit vectors; 0 when either is zero). */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const na = norm(a);
  const nb = norm(b);
  if (na === 0 || nb === 0) return 0;
  return dot(a, b) / (na * nb);
}

/** `acc += w * v` in place. */
export function addScaled(acc: Float32Array, v: ArrayLike<number>, w = 1): Float32Array {
  assertSameDim(acc, v);
  for (let i = 0; i < acc.length; i++) acc[i] += w * v[i];
  return acc;
}

/** Normalised (weighted) mean of vectors; throws on an empty list. */
export function meanNormalized(vectors: readonly ArrayLike<number>[], weights?: readonly number[]): Float32Array {
  if (vectors.length === 0) throw new RangeError('mean of zero vectors');
  const acc = new Float32Array(vectors[0].length);
  vectors.forEach((v, i) => addScaled(acc, v, weights ? weights[i] : 1));
  return normalize(acc);
}

/** True when every component is finite. */
export function isFiniteVector(a: ArrayLike<number>): boolean {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) return false;
  return true;
}

/** Numbers one {@link PairCache} row holds before the row grows (doubling). */
const ROW_START = 64;

/**
 * A number per pair of stable objects (e.g. item vectors: stable until the catalog or the item
 * space changes; a changed vector is a new object, so it misses), kept across calls: a row per
 * card, a column per "other" (the memories' linked items, the recent events' items, the items
 * the shopper owns); each pair's `pair(card, other)` is computed once and then read back.
 * Bounded: at most `maxCells` numbers in all (the least recently used rows are dropped first) and
 * `maxColumns` columns (beyond them the cache starts over); never an items × items matrix. Keyed
 * by object identity: never mutate a key in place while it is cached.
 */
export class PairCache<K extends object> {
  private readonly columns = new Map<K, number>();
  /** Card → its numbers by column (NaN: not computed yet). */
  private readonly rows = new Map<K, Float64Array>();
  /** Card → when its row was last used (a tick of {@link clock}): the least recently used rows leave first. */
  private readonly used = new Map<K, number>();
  private clock = 0;
  private cells = 0;
  /** Bumped by {@link clear}: a row handle of an earlier generation reads its row again. */
  private generation = 0;

  constructor(
    private readonly pair: (card: K, other: K) => number,
    readonly maxCells = 1 << 19,
    readonly maxColumns = 4096,
  ) {
    if (!(maxCells >= ROW_START) || !(maxColumns >= 1)) throw new RangeError(`PairCache: maxCells ≥ ${ROW_START} and maxColumns ≥ 1 needed`);
  }

  /** Numbers held, computed or not (for tests and memory figures). */
  get size(): number {
    return this.cells;
  }

  /** Forget everything. */
  clear(): void {
    this.columns.clear();
    this.rows.clear();
    this.used.clear();
    this.cells = 0;
    this.generation++;
  }

  /** The numbers of `card` with others: `get(other)` equals `pair(card, other)`. */
  row(card: K): PairRow<K> {
    const r = this.rows.get(card);
    if (r) this.used.set(card, ++this.clock);
    return new PairRow(this, card, r);
  }

  /** {@link PairRow.get}: the column of `other` (added when new; the cache starts over first when full). */
  columnOf(other: K): number {
    let c = this.columns.get(other);
    if (c === undefined) {
      if (this.columns.size >= this.maxColumns) this.clear();
      c = this.columns.size;
      this.columns.set(other, c);
    }
    return c;
  }

  /** `card`'s row as held now (undefined: none). */
  heldRow(card: K): Float64Array | undefined {
    return this.rows.get(card);
  }

  /**
   * The numbers of cards with a fixed list of others (e.g. one call's linked and recent items),
   * their columns looked up once: `frame(others).row(card).at(j)` equals `pair(card, others[j])`.
   * More others than `maxColumns`: computed, not cached.
   */
  frame(others: readonly K[]): PairFrame<K> {
    return new PairFrame(this, others);
  }

  /** Columns of `others` (added when new; the cache starts over first when they would not fit), or undefined when they never fit. */
  columnsOf(others: readonly K[]): Int32Array | undefined {
    if (others.length > this.maxColumns) return undefined;
    let fresh = 0;
    for (const o of others) if (!this.columns.has(o)) fresh++;
    if (this.columns.size + fresh > this.maxColumns) this.clear();
    const cols = new Int32Array(others.length);
    others.forEach((o, j) => {
      let c = this.columns.get(o);
      if (c === undefined) {
        c = this.columns.size;
        this.columns.set(o, c);
      }
      cols[j] = c;
    });
    return cols;
  }

  /** The current generation (see {@link clear}). */
  get epoch(): number {
    return this.generation;
  }

  /** `card`'s row with room for `column`, entered most recently used. */
  rowFor(card: K, column: number): Float64Array {
    const r = this.rows.get(card);
    if (r && r.length > column) {
      this.used.set(card, ++this.clock);
      return r;
    }
    return this.grow(card, r, column);
  }

  /** Compute one pair (no caching). */
  compute(card: K, other: K): number {
    return this.pair(card, other);
  }

  /**
   * A row for `card` with room for `column` (the old one's numbers kept), entered most recent;
   * beyond `maxCells`, the least recently used rows are dropped down to 3/4 of it (so that
   * dropping, which sorts the rows by use, is rare).
   */
  private grow(card: K, old: Float64Array | undefined, column: number): Float64Array {
    let len = old?.length || ROW_START;
    while (len <= column) len *= 2;
    const r = new Float64Array(len).fill(Number.NaN);
    if (old) r.set(old);
    const held = this.rows.get(card);
    if (held) this.cells -= held.length;
    this.rows.set(card, r);
    this.used.set(card, ++this.clock);
    this.cells += len;
    if (this.cells > this.maxCells) {
      const byUse = [...this.used].sort((a, b) => a[1] - b[1]);
      for (const [v] of byUse) {
        if (this.cells <= (this.maxCells * 3) / 4) break;
        if (v === card) continue;
        this.cells -= this.rows.get(v)!.length;
        this.rows.delete(v);
        this.used.delete(v);
      }
    }
    return r;
  }
}

/** One card's numbers in a {@link PairCache} (see {@link PairCache.row}). */
export class PairRow<K extends object> {
  private gen: number;

  constructor(
    private readonly cache: PairCache<K>,
    private readonly card: K,
    private r: Float64Array | undefined,
  ) {
    this.gen = cache.epoch;
  }

  /** `pair(card, other)`, computed once. */
  get(other: K): number {
    const cache = this.cache;
    const c = cache.columnOf(other);
    if (this.gen !== cache.epoch) {
      // the cache started over: read the card's row again
      this.r = cache.heldRow(this.card);
      this.gen = cache.epoch;
    }
    let r = this.r;
    if (!r || r.length <= c) r = this.r = cache.rowFor(this.card, c);
    let s = r[c];
    if (Number.isNaN(s)) {
      s = cache.compute(this.card, other);
      r[c] = s;
    }
    return s;
  }
}

/** One card's numbers with a {@link PairFrame}'s others: `at(j)` = pair(card, others[j]). */
export class FrameRow<K extends object> {
  constructor(
    private readonly cache: PairCache<K>,
    private readonly card: K,
    private readonly others: readonly K[],
    private readonly cols: Int32Array | undefined,
    private readonly r: Float64Array | undefined,
  ) {}

  /** The kept number of `others[j]`, or NaN when it is not computed yet (or not kept). */
  peek(j: number): number {
    return this.cols && this.r ? this.r[this.cols[j]] : Number.NaN;
  }

  /** Keep `s` as the number of `others[j]` (it must be `pair(card, others[j])`). */
  put(j: number, s: number): void {
    if (this.cols && this.r) this.r[this.cols[j]] = s;
  }

  at(j: number): number {
    const cols = this.cols;
    const r = this.r;
    if (!cols || !r) return this.cache.compute(this.card, this.others[j]);
    const c = cols[j];
    let s = r[c];
    if (Number.isNaN(s)) {
      s = this.cache.compute(this.card, this.others[j]);
      r[c] = s;
    }
    return s;
  }
}

/** See {@link PairCache.frame}. */
export class PairFrame<K extends object> {
  private cols: Int32Array | undefined;
  private epoch: number;
  private maxCol = -1;

  constructor(
    private readonly cache: PairCache<K>,
    readonly others: readonly K[],
  ) {
    this.cols = cache.columnsOf(others);
    this.epoch = cache.epoch;
    if (this.cols) for (const c of this.cols) this.maxCol = Math.max(this.maxCol, c);
  }

  /** `card`'s numbers with the others: `at(j)` = pair(card, others[j]). */
  row(card: K): FrameRow<K> {
    const cache = this.cache;
    const others = this.others;
    if (this.epoch !== cache.epoch) {
      // another frame started the cache over: look the columns up again
      this.cols = cache.columnsOf(others);
      this.epoch = cache.epoch;
      this.maxCol = -1;
      if (this.cols) for (const c of this.cols) this.maxCol = Math.max(this.maxCol, c);
    }
    const cols = this.cols;
    if (!cols || cols.length === 0) return new FrameRow(cache, card, others, undefined, undefined);
    return new FrameRow(cache, card, others, cols, cache.rowFor(card, this.maxCol));
  }
}

/**
 * Dot products of item vectors kept across calls ({@link PairCache} of {@link dot}): each pair
 * summed once, then read back — the same bits as summing it again (`dot(a, b)` and `dot(b, a)`
 * are equal: each product is exact in double precision and the sum runs in index order).
 */
export class DotCache extends PairCache<Float32Array> {
  constructor(maxCells?: number, maxColumns?: number) {
    super(dot, maxCells, maxColumns);
  }
}
