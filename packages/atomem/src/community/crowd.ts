/**
 * The verifiable release (Prio3, two aggregators; atomem-index's prio3-aggregator.ts) as a
 * ranking signal (pure, no I/O): what the shop's shoppers turned to in the last epoch, counted
 * with central DP noise, as one number per candidate.
 *
 * The release lists, per catalog item, the noisy count of devices whose last ℓ distinct liked
 * items held it, and only counts at or above its release rule (`mechanism.minCount`: the noise
 * threshold plus a minimum share of the epoch's reports): an item below it is absent, and counts
 * as 0 here. The signal is ln(1 + count):
 * the ranker standardises every signal within the list (core/rank.ts), and the logarithm keeps
 * one runaway item from flattening the rest.
 *
 * Post-processing of a DP release: using it costs no privacy.
 */
import type { Prio3Release } from '../protocol/prio3-release.js';

/** The Prio3 release as the leader serves it (`GET /v2/prio3/releases/latest`): protocol/prio3-release.ts. */
export type CrowdRelease = Prio3Release;

/** Whether `x` has the shape of a {@link CrowdRelease} (a malformed answer is not used). */
export function isCrowdRelease(x: unknown): x is CrowdRelease {
  const r = x as Partial<CrowdRelease> | null;
  return (
    !!r &&
    typeof r === 'object' &&
    r.v === 1 &&
    Number.isInteger(r.epoch) &&
    typeof r.counts === 'object' &&
    r.counts !== null &&
    Object.values(r.counts).every((c) => typeof c === 'number' && Number.isFinite(c)) &&
    typeof r.mechanism === 'object' &&
    r.mechanism !== null
  );
}

/** The crowd signal of `ids`: ln(1 + released count), 0 for an item the release withholds. */
export function crowdSignal(release: CrowdRelease, ids: readonly string[]): Float64Array {
  const out = new Float64Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const c = release.counts[ids[i]];
    if (c !== undefined && c > 0) out[i] = Math.log1p(c);
  }
  return out;
}
