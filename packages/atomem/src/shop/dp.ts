/**
 * Calibration of the Gaussian mechanism for the shop model's differential privacy (`train.ts`).
 *
 * The analytic Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8): releasing
 * f(x) + N(0, σ²I) for a function f of L2 sensitivity Δ is (ε, δ)-DP if and only if
 *   Φ(Δ/(2σ) − εσ/Δ) − e^ε · Φ(−Δ/(2σ) − εσ/Δ) ≤ δ.
 * {@link gaussianNoiseMultiplier} finds the smallest σ/Δ for a target (ε, δ) by bisection (the
 * left side decreases in σ). Tighter than the classical σ = Δ·√(2 ln(1.25/δ))/ε, and valid for
 * every ε > 0 (the classical bound needs ε < 1).
 *
 * Pure (no Node APIs). The noise itself must come from a cryptographically secure source in
 * production (`train.ts` defaults to node:crypto); seeded noise is for the benchmark only.
 */

/** erfc(x) to about 1e-13 absolute: Taylor series of erf for |x| < 3, Lentz's continued fraction beyond. */
export function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0) return 2 - erfc(-x);
  if (x < 3) {
    // erf(x) = 2/√π Σ (−1)^n x^(2n+1) / (n! (2n+1))
    let term = x;
    let sum = x;
    const x2 = x * x;
    for (let n = 1; n < 200; n++) {
      term *= -x2 / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return 1 - (2 / Math.sqrt(Math.PI)) * sum;
  }
  if (x > 27) return 0;
  // erfc(x) = exp(−x²)/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + 2/(x + …)))))
  const tiny = 1e-300;
  let f = x;
  let C = x;
  let D = 0;
  for (let n = 1; n < 500; n++) {
    const a = n / 2;
    D = x + a * D;
    D = Math.abs(D) < tiny ? tiny : D;
    C = x + a / C;
    C = Math.abs(C) < tiny ? tiny : C;
    D = 1 / D;
    const delta = C * D;
    f *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(-x * x) / (Math.sqrt(Math.PI) * f);
}

/** Standard normal CDF. */
function normalCdf(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

/** The δ of the Gaussian mechanism with noise multiplier z = σ/Δ at privacy loss ε (Balle & Wang, Theorem 8). */
export function gaussianDelta(z: number, epsilon: number): number {
  if (!(z > 0)) return 1;
  const a = 1 / (2 * z);
  const b = epsilon * z;
  // why: e^ε·Φ(−a−b) as exp(ε + log Φ(−a−b)) would need log Φ; Φ(−a−b) underflows only where
  // both terms are negligible next to δ, so the direct product is exact enough here.
  return Math.max(0, normalCdf(a - b) - Math.exp(epsilon) * normalCdf(-a - b));
}

/**
 * Smallest noise multiplier z = σ/Δ such that the Gaussian mechanism is (ε, δ)-DP.
 * `epsilon = Infinity` → 0 (no noise).
 */
export function gaussianNoiseMultiplier(epsilon: number, delta: number): number {
  if (epsilon === Infinity) return 0;
  if (!(epsilon > 0) || !Number.isFinite(epsilon)) throw new RangeError(`epsilon must be > 0, got ${epsilon}`);
  if (!(delta > 0 && delta < 1)) throw new RangeError(`delta must be in (0, 1), got ${delta}`);
  let lo = 1e-6;
  let hi = 1;
  while (gaussianDelta(hi, epsilon) > delta) hi *= 2;
  for (let i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
    const mid = (lo + hi) / 2;
    if (gaussianDelta(mid, epsilon) > delta) lo = mid;
    else hi = mid;
  }
  return hi;
}
