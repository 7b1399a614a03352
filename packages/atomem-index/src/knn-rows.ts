/**
 * Rows of a kNN graph as flat typed arrays (row i at `i·k`: neighbour indices, -1 where empty, and
 * their cosines, sorted descending), shared by the HNSW path (./clusters.ts) and the k-means
 * cells (./knn-cells.ts); and the seeded generator both use.
 */

/**
 * Insert (`idx`, `sim`) into row `base` of a kNN graph kept sorted by similarity, descending, with
 * `filled` entries so far (ties: earlier insertions first; a full row drops its last entry, and
 * a candidate not above it is skipped). Returns the row's new fill.
 */
export function insertSorted(neighbours: Int32Array, sims: Float32Array, base: number, k: number, filled: number, idx: number, sim: number): number {
  if (filled === k && sim <= sims[base + k - 1]) return filled;
  let t = filled < k ? filled++ : k - 1;
  while (t > 0 && sims[base + t - 1] < sim) {
    sims[base + t] = sims[base + t - 1];
    neighbours[base + t] = neighbours[base + t - 1];
    t--;
  }
  sims[base + t] = sim;
  neighbours[base + t] = idx;
  return filled;
}

/** {@link insertSorted}, unless the row already holds `idx` (a row fills from several queries). */
export function offer(neighbours: Int32Array, sims: Float32Array, base: number, k: number, filled: number, idx: number, sim: number): number {
  if (filled === k && sim <= sims[base + k - 1]) return filled;
  for (let u = 0; u < filled; u++) if (neighbours[base + u] === idx) return filled;
  return insertSorted(neighbours, sims, base, k, filled, idx, sim);
}

/** Entries in each row so far (rows are filled from their start). */
export function rowFill(neighbours: Int32Array, n: number, k: number): Int32Array {
  const fill = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    let f = 0;
    while (f < k && neighbours[i * k + f] >= 0) f++;
    fill[i] = f;
  }
  return fill;
}

/** mulberry32: a small seeded [0, 1) generator (Louvain's node order, the cells' samples). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
