/**
 * The device's lifetime privacy budget (pure, no I/O): a ledger of the ε this shopper spent on
 * reports, a rolling cap over a window (default ≤ 10 per 365 days) after which the device stops
 * reporting, and per-epoch subsampling (report with probability q) counted in it.
 *
 * Accounting. Each epoch the device holds a token for, it runs one lottery: with probability q
 * it sends its ε-LDP report (ε = the release's `ldp.epsilon`, ≈ 3.91 by default), else it sends
 * a dummy report — the mechanism's own output on an empty item set (a uniformly random cohort and
 * bucket), so the index receives one report either way and cannot see the lottery. The output
 * is the mixture q·M(x) + (1 − q)·M(∅), and since M is ε-LDP, M(x) and M(x′) are each within
 * e^ε of M(∅); the likelihood ratio of the mixture is then at most 1 + q(e^ε − 1), so the
 * ledger charges that epoch
 *
 *     ε_q = ln(1 + q·(e^ε − 1))
 *
 * — privacy amplification by subsampling (Balle, Barthe, Gaboardi, "Privacy Amplification by
 * Subsampling: Tight Analyses via Couplings and Divergences", NeurIPS 2018; first in Li, Qardaji,
 * Su, "On sampling, anonymization, and differential privacy", ASIACCS 2012). At q = 1 it is ε.
 * The bound holds even against an index that links the report to the shopper. Epochs compose by
 * basic sequential composition (Dwork & Roth 2014, Theorem 3.16): the ledger's total is the sum
 * of the charges in the window.
 *
 * At the shipped ε ≈ 3.91 subsampling is a poor trade: ε_q ≈ q·48.9 for small q, so spending the
 * same budget through q < 1 buys fewer expected reports than q = 1 (two reports per 365 days
 * under a cap of 10). It pays at small per-report ε (e.g. ε = 0.5: q = 0.1 charges 0.063).
 */

/** One charged epoch. */
export interface LedgerEntry {
  /** When it was charged (ms since the Unix epoch). */
  at: number;
  /** The protocol epoch it was charged for (at most one entry per epoch). */
  epoch: number;
  /** The charge, ε_q. */
  epsilon: number;
  /** The subsampling rate of its lottery. */
  q: number;
  /** Whether the lottery sent the report. */
  sent: boolean;
}

/** The budget's settings. */
export interface PrivacyBudget {
  /** Largest total ε in any window. Default 10. */
  cap: number;
  /** The rolling window, ms. Default 365 days. */
  windowMs: number;
  /** Probability of reporting in an epoch the device takes part in. Default 1. */
  q: number;
}

export const DAY_MS = 86_400_000;

/** Shipped defaults: ε ≤ 10 per 365 days, every epoch's lottery sends (q = 1). */
export const DEFAULT_BUDGET: Readonly<PrivacyBudget> = Object.freeze({ cap: 10, windowMs: 365 * DAY_MS, q: 1 });

/** Check and complete budget options (clear errors for bad input). */
export function privacyBudget(opts: Partial<PrivacyBudget> = {}): PrivacyBudget {
  const b = { ...DEFAULT_BUDGET, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) } as PrivacyBudget;
  if (!(typeof b.cap === 'number' && b.cap >= 0 && Number.isFinite(b.cap)))
    throw new RangeError(`budget.cap must be a finite number ≥ 0, got ${String(b.cap)}`);
  if (!(typeof b.windowMs === 'number' && b.windowMs > 0 && Number.isFinite(b.windowMs)))
    throw new RangeError(`budget.windowMs must be a finite number > 0, got ${String(b.windowMs)}`);
  if (!(typeof b.q === 'number' && b.q > 0 && b.q <= 1)) throw new RangeError(`budget.q must be in (0, 1], got ${String(b.q)}`);
  return b;
}

/** ε of one epoch's lottery: ln(1 + q(e^ε − 1)) (amplification by subsampling; ε at q = 1). */
export function subsampledEpsilon(epsilon: number, q: number): number {
  if (!(epsilon >= 0) || !(q > 0 && q <= 1)) throw new RangeError(`subsampledEpsilon: need ε ≥ 0 and q in (0, 1], got ε = ${epsilon}, q = ${q}`);
  return q === 1 ? epsilon : Math.log1p(q * Math.expm1(epsilon));
}

/** Total ε charged in the window ending at `now`. */
export function spentEpsilon(entries: readonly LedgerEntry[], now: number, windowMs: number): number {
  let s = 0;
  for (const e of entries) if (e.at > now - windowMs && e.at <= now) s += e.epsilon;
  return s;
}

/** Why an epoch cannot be charged, or undefined when it can. */
export function refusal(
  entries: readonly LedgerEntry[],
  epoch: number,
  charge: number,
  now: number,
  budget: PrivacyBudget,
): 'already_charged' | 'budget_exhausted' | undefined {
  if (entries.some((e) => e.epoch === epoch)) return 'already_charged';
  // why the small tolerance: charges are sums of floats; 5 × 2 must fit a cap of 10
  if (spentEpsilon(entries, now, budget.windowMs) + charge > budget.cap + 1e-9) return 'budget_exhausted';
  return undefined;
}

/** Entries still inside the window (older ones no longer count and are dropped). */
export function prune(entries: readonly LedgerEntry[], now: number, windowMs: number): LedgerEntry[] {
  return entries.filter((e) => e.at > now - windowMs);
}

/** When the budget will allow `charge` again (ms), or `now` when it does already. */
export function nextAllowed(entries: readonly LedgerEntry[], charge: number, now: number, budget: PrivacyBudget): number {
  const live = prune(entries, now, budget.windowMs).sort((a, b) => a.at - b.at);
  let total = live.reduce((s, e) => s + e.epsilon, 0);
  if (total + charge <= budget.cap + 1e-9) return now;
  for (const e of live) {
    total -= e.epsilon;
    if (total + charge <= budget.cap + 1e-9) return e.at + budget.windowMs;
  }
  return Infinity; // one charge alone exceeds the cap
}
