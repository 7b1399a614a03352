/**
 * Fitting the combiner weights of `score.ts` on validation cases: the features of one case are
 * its signals standardised within the candidate list (exactly as `combine` does), and the
 * weights maximise the listwise softmax likelihood of the held-out item (a convex problem,
 * solved by Newton's method with a small L2 penalty). Pure.
 */

/** One case: per-signal values for each candidate, and the index of the positive. */
export interface FitCase {
  /** signal name → values per candidate. */
  signals: Record<string, ArrayLike<number>>;
  positive: number;
  /**
   * 1 for list members that are standardised with the list but do not compete with the positive
   * (whole-catalog ranking: the shopper's own items are in the scored list, not in the ranking).
   */
  exclude?: Uint8Array;
}

/** z-scores of one signal within a list (0 where the signal is constant), as `combine` uses them. */
export function standardise(s: ArrayLike<number>): Float64Array {
  const n = s.length;
  const out = new Float64Array(n);
  let mean = 0;
  let maxAbs = 0;
  for (let i = 0; i < n; i++) {
    mean += s[i];
    maxAbs = Math.max(maxAbs, Math.abs(s[i]));
  }
  mean /= n;
  let v = 0;
  for (let i = 0; i < n; i++) v += (s[i] - mean) ** 2;
  const sd = Math.sqrt(v / n);
  if (!(sd > 1e-9 * maxAbs) || !Number.isFinite(sd)) return out;
  for (let i = 0; i < n; i++) out[i] = (s[i] - mean) / sd;
  return out;
}

/**
 * Listwise softmax regression on standardised signals → weights (largest |w| scaled to 1).
 * Damped Newton: each step is halved until the penalised loss decreases, so the fit converges
 * even when a signal nearly separates the positives (an undamped step can diverge there).
 */
export function fitWeights(cases: readonly FitCase[], names: readonly string[], l2 = 1, iterations = 100): Record<string, number> {
  const S = names.length;
  const feats = cases.map((c) => names.map((n) => standardise(c.signals[n])));
  const scoresOf = (F: Float64Array[], w: ArrayLike<number>): Float64Array => {
    const m = F[0]?.length ?? 0;
    const z = new Float64Array(m);
    for (let s = 0; s < S; s++) for (let i = 0; i < m; i++) z[i] += w[s] * F[s][i];
    return z;
  };
  const loss = (w: ArrayLike<number>): number => {
    let L = 0;
    for (let s = 0; s < S; s++) L += (l2 / 2) * w[s] * w[s];
    feats.forEach((F, ci) => {
      const z = scoresOf(F, w);
      const ex = cases[ci].exclude;
      const pos = cases[ci].positive;
      let max = -Infinity;
      for (let i = 0; i < z.length; i++) if (!ex?.[i] || i === pos) max = Math.max(max, z[i]);
      let sum = 0;
      for (let i = 0; i < z.length; i++) if (!ex?.[i] || i === pos) sum += Math.exp(z[i] - max);
      L += max + Math.log(sum) - z[pos];
    });
    return L;
  };
  let w = new Float64Array(S);
  let current = loss(w);
  for (let it = 0; it < iterations; it++) {
    const g = Float64Array.from(w, (x) => l2 * x);
    const H = new Float64Array(S * S);
    for (let a = 0; a < S; a++) H[a * S + a] = l2;
    feats.forEach((F, ci) => {
      const m = F[0]?.length ?? 0;
      const z = scoresOf(F, w);
      const ex = cases[ci].exclude;
      const pos0 = cases[ci].positive;
      let max = -Infinity;
      for (let i = 0; i < m; i++) if (!ex?.[i] || i === pos0) max = Math.max(max, z[i]);
      let sum = 0;
      const p = new Float64Array(m);
      for (let i = 0; i < m; i++) if (!ex?.[i] || i === pos0) sum += p[i] = Math.exp(z[i] - max);
      for (let i = 0; i < m; i++) p[i] /= sum;
      const mean = new Float64Array(S);
      for (let s = 0; s < S; s++) for (let i = 0; i < m; i++) mean[s] += p[i] * F[s][i];
      const pos = cases[ci].positive;
      for (let s = 0; s < S; s++) g[s] += mean[s] - F[s][pos];
      for (let a = 0; a < S; a++)
        for (let b = a; b < S; b++) {
          let h = 0;
          for (let i = 0; i < m; i++) h += p[i] * (F[a][i] - mean[a]) * (F[b][i] - mean[b]);
          H[a * S + b] += h;
          if (a !== b) H[b * S + a] += h;
        }
    });
    const step = solve(H, g, S);
    let t = 1;
    let next = w;
    let value = current;
    for (let halvings = 0; halvings < 40; halvings++, t /= 2) {
      const cand = Float64Array.from(w, (x, s) => x - t * step[s]);
      const v = loss(cand);
      if (v < current) {
        next = cand;
        value = v;
        break;
      }
    }
    if (next === w) break; // no descent possible: converged
    const change = Math.max(...Array.from(next, (x, s) => Math.abs(x - w[s])));
    w = next;
    const gain = current - value;
    current = value;
    if (change < 1e-9 || gain < 1e-12 * Math.max(1, Math.abs(current))) break;
  }
  let max = 0;
  for (const x of w) max = Math.max(max, Math.abs(x));
  return Object.fromEntries(names.map((n, s) => [n, max > 0 ? Number((w[s] / max).toFixed(4)) : 0]));
}

/** Solves A x = b (A SPD, small) by Gaussian elimination with partial pivoting. */
function solve(A: Float64Array, b: Float64Array, n: number): Float64Array {
  const M = Float64Array.from(A);
  const x = Float64Array.from(b);
  for (let k = 0; k < n; k++) {
    let p = k;
    for (let i = k + 1; i < n; i++) if (Math.abs(M[i * n + k]) > Math.abs(M[p * n + k])) p = i;
    if (p !== k) {
      for (let j = 0; j < n; j++) [M[k * n + j], M[p * n + j]] = [M[p * n + j], M[k * n + j]];
      [x[k], x[p]] = [x[p], x[k]];
    }
    const d = M[k * n + k];
    if (Math.abs(d) < 1e-300) continue;
    for (let i = k + 1; i < n; i++) {
      const f = M[i * n + k] / d;
      if (f === 0) continue;
      for (let j = k; j < n; j++) M[i * n + j] -= f * M[k * n + j];
      x[i] -= f * x[k];
    }
  }
  for (let k = n - 1; k >= 0; k--) {
    let s = x[k];
    for (let j = k + 1; j < n; j++) s -= M[k * n + j] * x[j];
    x[k] = Math.abs(M[k * n + k]) < 1e-300 ? 0 : s / M[k * n + k];
  }
  return x;
}
