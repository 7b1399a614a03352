/**
 * Retrieval for whole-catalog recommendation: a shortlist of the catalog that the full scorer
 * (memory, shop model, intent, reasons, diversification) then ranks. Pure and synchronous over
 * flat arrays, so it runs in the engine worker in a few milliseconds even at 100k items.
 *
 * Sources, merged round-robin so each one is represented:
 * - `lists`: the shop model's neighbour lists (`ease`, `knn`, `markov`) of the shopper's items,
 *   weighted by action and recency — the items the shop's order log puts next to them;
 * - `vector`: the top items by dot product of the item-space vectors (the shop's collaborative
 *   vectors, or the content vectors without a shop file) against the shopper's profile vector
 *   (positive memories' vectors weighted by strength, plus the recent events');
 * - `intent`: the top items by cosine of their content vectors to the stated intent;
 * - `popular`: the shop model's most popular items (a first visit's prior, and a floor for everyone);
 * - `trending`: at a live moment, the items most popular in the file's last week (`popRecent`,
 *   which the live weights lead with).
 */

/** A flat matrix of unit-ish item vectors, one row per id. */
export interface VectorTable {
  ids: readonly string[];
  dim: number;
  values: Float32Array;
}

/** Build a {@link VectorTable} from per-item vectors (same order as `ids`). */
export function vectorTable(ids: readonly string[], vectors: readonly ArrayLike<number>[]): VectorTable {
  const dim = vectors[0]?.length ?? 0;
  const values = new Float32Array(ids.length * dim);
  vectors.forEach((v, i) => values.set(v, i * dim));
  return { ids, dim, values };
}

/**
 * Indices of the `k` rows with the largest dot product with `query`, best first (rows for which
 * `skip(i)` is true left out). One pass over the matrix plus a bounded min-heap: O(n·dim + n·log k).
 */
export function topByDot(table: VectorTable, query: ArrayLike<number>, k: number, skip?: (i: number) => boolean): number[] {
  const { values, dim } = table;
  const n = table.ids.length;
  if (k <= 0 || n === 0) return [];
  if (query.length !== dim) throw new RangeError(`topByDot: query has dimension ${query.length}, table ${dim}`);
  const q = Float32Array.from(query);
  const heapIdx = new Int32Array(k);
  const heapVal = new Float64Array(k);
  let size = 0;
  const down = (p: number) => {
    for (;;) {
      const l = 2 * p + 1;
      const r = l + 1;
      let m = p;
      if (l < size && heapVal[l] < heapVal[m]) m = l;
      if (r < size && heapVal[r] < heapVal[m]) m = r;
      if (m === p) return;
      const ti = heapIdx[p],
        tv = heapVal[p];
      (heapIdx[p] = heapIdx[m]), (heapVal[p] = heapVal[m]);
      (heapIdx[m] = ti), (heapVal[m] = tv);
      p = m;
    }
  };
  for (let i = 0, o = 0; i < n; i++, o += dim) {
    let s = 0;
    for (let d = 0; d < dim; d++) s += values[o + d] * q[d];
    if (size === k && s <= heapVal[0]) continue;
    if (skip?.(i)) continue;
    if (size < k) {
      // sift up
      let c = size++;
      heapIdx[c] = i;
      heapVal[c] = s;
      while (c > 0) {
        const p = (c - 1) >> 1;
        if (heapVal[p] <= heapVal[c]) break;
        const ti = heapIdx[p],
          tv = heapVal[p];
        (heapIdx[p] = heapIdx[c]), (heapVal[p] = heapVal[c]);
        (heapIdx[c] = ti), (heapVal[c] = tv);
        c = p;
      }
    } else {
      heapIdx[0] = i;
      heapVal[0] = s;
      down(0);
    }
  }
  const out = Array.from({ length: size }, (_, j) => j).sort((a, b) => heapVal[b] - heapVal[a] || heapIdx[a] - heapIdx[b]);
  return out.map((j) => heapIdx[j]);
}

/** CSR neighbour lists as the shop model stores them. */
export interface Lists {
  offsets: ArrayLike<number>;
  targets: ArrayLike<number>;
  weights: ArrayLike<number>;
}

/** Target rows by Σ weight(source) · list weight over `sources` (row index, weight), best first, top `k`. */
export function topByLists(lists: readonly Lists[], sources: ReadonlyArray<{ row: number; w: number }>, k: number, skip?: (row: number) => boolean): number[] {
  const acc = new Map<number, number>();
  for (const list of lists) {
    // why: each list scaled by its own largest weight, so EASE's and kNN's units do not drown one another
    let max = 0;
    for (const { row } of sources) for (let p = list.offsets[row]; p < list.offsets[row + 1]; p++) max = Math.max(max, Math.abs(list.weights[p]));
    if (max === 0) continue;
    for (const { row, w } of sources) {
      for (let p = list.offsets[row]; p < list.offsets[row + 1]; p++) {
        const t = list.targets[p];
        acc.set(t, (acc.get(t) ?? 0) + (w * list.weights[p]) / max);
      }
    }
  }
  return [...acc]
    .filter(([t, s]) => s > 0 && !skip?.(t))
    .sort((a, b) => b[1] - a[1] || a[0] - b[0])
    .slice(0, k)
    .map(([t]) => t);
}

/** Round-robin merge of ranked id lists into at most `size` distinct ids (first list first at each turn). */
export function mergeRoundRobin(sources: ReadonlyArray<readonly string[]>, size: number): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const pos = sources.map(() => 0);
  let progressed = true;
  while (out.length < size && progressed) {
    progressed = false;
    sources.forEach((src, s) => {
      while (pos[s] < src.length && out.length < size) {
        const id = src[pos[s]++];
        progressed = true;
        if (!seen.has(id)) {
          seen.add(id);
          out.push(id);
          break;
        }
      }
    });
  }
  return out;
}
