/**
 * Local differential privacy of the v2 report (pure, no I/O): what a device runs on its recent
 * items before anything leaves it, how the service turns reports into unbiased estimates, and
 * the ε the composition gives.
 *
 * Mechanism (per device per epoch, one report):
 * 1. **Padding-and-sampling** (Wang et al., "Locally differentially private frequent itemset
 *    mining", S&P 2018): the device's recent liked items, padded with dummies to ℓ slots; one
 *    slot is drawn uniformly (a dummy slot reports a uniformly random cohort and bucket). The report then depends on the whole set only through one draw,
 *    so ε holds for the set, and every device contributes exactly one value (contribution
 *    bounding: sensitivity 1 per epoch).
 * 2. **Optimal local hashing** (Wang et al., "Locally differentially private protocols for
 *    frequency estimation", USENIX Security 2017): the value is hashed to one of g buckets by a
 *    public hash of a cohort (RAPPOR's cohorts: few public hash functions, many devices each).
 * 3. **Permanent randomized response, memoized** per (device, item) — cohort and randomized
 *    bucket are drawn once and kept (RAPPOR, Erlingsson et al., CCS 2014): re-reporting an item
 *    in later epochs cannot average its noise away; over any number of epochs an item is
 *    protected by `epsPermanent`.
 * 4. **Instantaneous randomized response**, fresh per report, on top: two reports of the same
 *    memoized value usually differ, so reports are not byte-identical across epochs.
 *
 * The report is (cohort, bucket): g-ary randomized response composed twice. Its ε (per shopper
 * per epoch) is ln(P[y = h | h] / P[y = h | h′]) of the composed channel, {@link composedEpsilon}.
 */
import { DUMMY_ITEM, itemHash, olhBucket, olhBucketOf, type LdpParams, type WireReport } from '../protocol/index-v2.js';

/** g-ary randomized response: keep with p, else one of the other g − 1 values each with q. */
export function grr(eps: number, g: number): { p: number; q: number } {
  const e = Math.exp(eps);
  return { p: e / (e + g - 1), q: 1 / (e + g - 1) };
}

/** Probabilities of the report bucket given the hashed value, after permanent then instantaneous RR. */
export function composedChannel(epsPermanent: number, epsInstant: number, g: number): { same: number; other: number } {
  const a = grr(epsPermanent, g);
  const b = grr(epsInstant, g);
  // y = h: kept twice, or moved away and moved back
  const same = a.p * b.p + (1 - a.p) * b.q;
  // y = h' ≠ h: kept then moved to h', moved to h' then kept, or moved elsewhere then to h'
  const other = a.p * b.q + a.q * b.p + (g - 2) * a.q * b.q;
  return { same, other };
}

/** ε of one report: the composed channel's largest likelihood ratio. */
export function composedEpsilon(epsPermanent: number, epsInstant: number, g: number): number {
  const { same, other } = composedChannel(epsPermanent, epsInstant, g);
  return Math.log(same / other);
}

/**
 * Full parameters from the two ε's: g chosen as OLH's optimum for the composed ε, e^ε + 1
 * (rounded), the composed ε recomputed for that g.
 */
export function ldpParams(opts: { epsPermanent: number; epsInstant: number; ell: number; cohorts: number }): LdpParams {
  const { epsPermanent, epsInstant, ell, cohorts } = opts;
  if (!(epsPermanent > 0 && epsPermanent <= 20)) throw new RangeError(`epsPermanent must be in (0, 20], got ${epsPermanent}`);
  if (!(epsInstant > 0 && epsInstant <= 20)) throw new RangeError(`epsInstant must be in (0, 20], got ${epsInstant}`);
  if (!Number.isInteger(ell) || ell < 1 || ell > 1000) throw new RangeError(`ell must be an integer in [1, 1000], got ${ell}`);
  if (!Number.isInteger(cohorts) || cohorts < 1 || cohorts > 65536) throw new RangeError(`cohorts must be an integer in [1, 65536], got ${cohorts}`);
  // iterate: g depends on the composed ε, which depends on g (converges in a few steps)
  let g = Math.max(2, Math.round(Math.exp(Math.min(epsPermanent, epsInstant)) + 1));
  for (let i = 0; i < 8; i++) {
    const next = Math.max(2, Math.round(Math.exp(composedEpsilon(epsPermanent, epsInstant, g)) + 1));
    if (next === g) break;
    g = next;
  }
  return { mechanism: 'olh-rappor', cohorts, g, ell, epsPermanent, epsInstant, epsilon: composedEpsilon(epsPermanent, epsInstant, g), delta: 0 };
}

/** The shipped defaults: ε ≈ 3.9 per report (per shopper per epoch), 4 per item over a lifetime. */
// why 4096 cohorts: a heavy item biases the estimate of each item its hash collides with in
// more cohorts than 1/g of them; the fluctuation shrinks as 1/√(g·cohorts) (±0.2 % of its reports here)
export const DEFAULT_LDP = Object.freeze(ldpParams({ epsPermanent: 4, epsInstant: 7, ell: 10, cohorts: 4096 }));

/** A device's memoized permanent randomization: item → (cohort, permanently randomized bucket). */
export type PermanentMemo = Record<string, { cohort: number; bucket: number }>;

/** Uniform integer in [0, n) from a [0, 1) source. */
function below(n: number, random: () => number): number {
  return Math.min(n - 1, Math.floor(random() * n));
}

/** g-ary RR of `value`: kept with probability p, else a uniformly chosen other bucket. */
function randomize(value: number, eps: number, g: number, random: () => number): number {
  const { p } = grr(eps, g);
  if (random() < p) return value;
  const other = below(g - 1, random);
  return other >= value ? other + 1 : other;
}

/**
 * The report of one device for one epoch. `items` are the device's recent liked items (most
 * recent last; only the last ℓ distinct ones are used). `memo` is read and extended in place
 * (persist it with the device's state). `random` must be a CSPRNG-backed [0, 1) source on a
 * real device.
 */
export function makeReport(items: readonly string[], params: LdpParams, memo: PermanentMemo, random: () => number): WireReport {
  const distinct = [...new Set(items.filter((i) => i !== DUMMY_ITEM))].slice(-params.ell);
  const slot = below(params.ell, random);
  // why: a padding slot reports a uniform (cohort, bucket): it adds exactly the null model's 1/g
  // support to every item (a fixed dummy value would bias the items its hash collides with), and
  // its likelihood ratio to any item's report is ≤ e^ε (1/g ≥ the channel's "other" probability)
  if (slot >= distinct.length) return { cohort: below(params.cohorts, random), bucket: below(params.g, random) };
  const value = distinct[slot];
  let m = memo[value];
  if (m === undefined || m.cohort >= params.cohorts || m.bucket >= params.g) {
    const cohort = below(params.cohorts, random);
    m = { cohort, bucket: randomize(olhBucket(cohort, value, params.g), params.epsPermanent, params.g, random) };
    memo[value] = m;
  }
  return { cohort: m.cohort, bucket: randomize(m.bucket, params.epsInstant, params.g, random) };
}

/**
 * Aggregated reports of an epoch as a histogram over (cohort, bucket): the only thing the
 * service keeps of them. `cells[cohort * g + bucket]` = number of reports.
 */
export class ReportHistogram {
  /** Non-empty cells: `cohort * g + bucket` → number of reports. */
  readonly cells = new Map<number, number>();
  total = 0;
  constructor(readonly params: Pick<LdpParams, 'cohorts' | 'g'>) {}
  add(r: WireReport, count = 1): void {
    if (!Number.isInteger(r.cohort) || r.cohort < 0 || r.cohort >= this.params.cohorts)
      throw new RangeError(`cohort ${r.cohort} out of [0, ${this.params.cohorts})`);
    if (!Number.isInteger(r.bucket) || r.bucket < 0 || r.bucket >= this.params.g) throw new RangeError(`bucket ${r.bucket} out of [0, ${this.params.g})`);
    const key = r.cohort * this.params.g + r.bucket;
    this.cells.set(key, (this.cells.get(key) ?? 0) + count);
    this.total += count;
  }
}

/**
 * Unbiased estimates, per item of `domain`, of the number of devices that hold the item among
 * their ℓ slots: ℓ · (support − n·q*) / (p* − q*), where support = reports whose (cohort,
 * bucket) matches the item's hash and q* = 1/g (a report of another value matches with the
 * hash's probability 1/g). Cost O(min(non-empty cells, cohorts) · |domain|).
 */
export function estimateCounts(hist: ReportHistogram, domain: readonly string[], params: LdpParams): Map<string, number> {
  const { g, cohorts, ell } = params;
  const { same } = composedChannel(params.epsPermanent, params.epsInstant, g);
  const q = 1 / g;
  const n = hist.total;
  const out = new Map<string, number>();
  if (n === 0) {
    for (const v of domain) out.set(v, 0);
    return out;
  }
  // why: iterate whichever is smaller, the non-empty cells or the cohorts
  const keys = [...hist.cells.keys()];
  const counts = keys.map((k) => hist.cells.get(k)!);
  const cellCohort = keys.map((k) => Math.floor(k / g));
  const cellBucket = keys.map((k, i) => k - cellCohort[i] * g);
  const byCells = keys.length < cohorts;
  const dense = byCells ? undefined : new Float64Array(cohorts * g);
  if (dense) for (let i = 0; i < keys.length; i++) dense[keys[i]] = counts[i];
  for (const v of domain) {
    const h = itemHash(v);
    let support = 0;
    if (byCells) {
      for (let i = 0; i < keys.length; i++) if (olhBucketOf(h, cellCohort[i], g) === cellBucket[i]) support += counts[i];
    } else {
      for (let c = 0; c < cohorts; c++) support += dense![c * g + olhBucketOf(h, c, g)];
    }
    out.set(v, (ell * (support - n * q)) / (same - q));
  }
  return out;
}

/**
 * Standard deviation of one item's estimate with n reports, for an item held by few devices
 * (the variance is dominated by the other reports' hash collisions): ℓ·√(n·q(1−q))/(p* − q).
 */
export function estimateStd(n: number, params: LdpParams): number {
  const { same } = composedChannel(params.epsPermanent, params.epsInstant, params.g);
  const q = 1 / params.g;
  return (params.ell * Math.sqrt(n * q * (1 - q))) / (same - q);
}
