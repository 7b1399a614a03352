/**
 * Per-item ranked lists (item-kNN, transitions, local EASE's neighbourhoods) as a counting engine
 * hands them to the trainer: typed arrays in CSR form, not an object per entry. Why: at 1M items
 * the transitions alone are 32M entries; as `{ item, prob }` objects in per-item arrays they
 * outgrew V8's 4 GB heap (the SQL path at 1M items / 100M events died there).
 */

/** Ranked lists over the items of `ids`: row a's entries are [offsets[a], offsets[a + 1]), best first. */
export interface RankedLists {
  /** Item ids; rows and `targets` are indexes into it. */
  readonly ids: readonly string[];
  /** `ids.length + 1` entries. */
  readonly offsets: Int32Array;
  readonly targets: Int32Array;
  /** What the list is ranked by: the cosine (kNN), P(b | a) (transitions), the count (neighbourhoods). */
  readonly values: Float64Array;
  /** The count behind it: co-occurrences (kNN, neighbourhoods), transitions (transitions). */
  readonly counts: Float64Array;
}

/** Item ids numbered as they first appear, shared by the lists of one run. */
export class ItemNumbers {
  readonly ids: string[] = [];
  private readonly index = new Map<string, number>();

  of(id: string): number {
    let i = this.index.get(id);
    if (i === undefined) {
      i = this.ids.length;
      this.index.set(id, i);
      this.ids.push(id);
    }
    return i;
  }
}

/**
 * Collects (a, b, rank, value, count) rows in any order, then places each at its rank. The ranks
 * of one row must be 1..length, each once (what `ROW_NUMBER() … WHERE r <= k` returns).
 */
export class RankedListsBuilder {
  private size = 0;
  private rows = new Int32Array(1024);
  private ranks = new Int32Array(1024);
  private targets = new Int32Array(1024);
  private values = new Float64Array(1024);
  private counts = new Float64Array(1024);

  constructor(private readonly numbers: ItemNumbers) {}

  add(a: string, b: string, rank: number, value: number, count: number): void {
    if (this.size === this.rows.length) this.grow();
    const s = this.size++;
    this.rows[s] = this.numbers.of(a);
    this.targets[s] = this.numbers.of(b);
    this.ranks[s] = rank;
    this.values[s] = value;
    this.counts[s] = count;
  }

  private grow(): void {
    const cap = this.rows.length * 2;
    const more = <T extends Int32Array | Float64Array>(x: T, make: (n: number) => T): T => {
      const y = make(cap);
      y.set(x);
      return y;
    };
    this.rows = more(this.rows, (n) => new Int32Array(n));
    this.ranks = more(this.ranks, (n) => new Int32Array(n));
    this.targets = more(this.targets, (n) => new Int32Array(n));
    this.values = more(this.values, (n) => new Float64Array(n));
    this.counts = more(this.counts, (n) => new Float64Array(n));
  }

  /** The lists over every id numbered so far (call when all lists of the run are collected). */
  build(): RankedLists {
    const n = this.numbers.ids.length;
    const offsets = new Int32Array(n + 1);
    for (let s = 0; s < this.size; s++) offsets[this.rows[s] + 1]++;
    for (let a = 0; a < n; a++) offsets[a + 1] += offsets[a];
    const targets = new Int32Array(this.size).fill(-1);
    const values = new Float64Array(this.size);
    const counts = new Float64Array(this.size);
    for (let s = 0; s < this.size; s++) {
      const a = this.rows[s];
      const r = this.ranks[s];
      const p = offsets[a] + r - 1;
      if (!Number.isInteger(r) || r < 1 || p >= offsets[a + 1] || targets[p] !== -1)
        throw new RangeError(`ranked lists: item ${this.numbers.ids[a]} has rank ${r} out of place (ranks must be 1..length, each once)`);
      targets[p] = this.targets[s];
      values[p] = this.values[s];
      counts[p] = this.counts[s];
    }
    return { ids: this.numbers.ids, offsets, targets, values, counts };
  }
}

/** One list's entries by item id, best first (for inspection and tests; one object per entry). */
export function rankedListsToMap(l: RankedLists): Map<string, Array<{ item: string; value: number; count: number }>> {
  const out = new Map<string, Array<{ item: string; value: number; count: number }>>();
  for (let a = 0; a < l.ids.length; a++) {
    if (l.offsets[a] === l.offsets[a + 1]) continue;
    const row: Array<{ item: string; value: number; count: number }> = [];
    for (let p = l.offsets[a]; p < l.offsets[a + 1]; p++) row.push({ item: l.ids[l.targets[p]], value: l.values[p], count: l.counts[p] });
    out.set(l.ids[a], row);
  }
  return out;
}
