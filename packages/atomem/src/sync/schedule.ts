/**
 * When a device talks to the attester and to the index (pure, no I/O).
 *
 * The attester knows who asks for a token and when; the index sees when each report arrives.
 * If the shop runs both, a report sent right after its token was issued is linked to the
 * shopper by time alone. So the two moments are independent draws in two different epochs:
 *
 * - the token for epoch e + 1 is fetched at a uniformly random moment of what remains of epoch e
 *   (from the device's first sync in e), blinded, and kept on the device;
 * - the report of epoch e + 1 is sent at a uniformly random moment of what remains of e + 1
 *   (from the device's first sync in e + 1), with that token.
 *
 * Given the issuance log of epoch e and the report log of e + 1, the arrival time of a report
 * is independent of when its token was issued: linkage by issuance time is at chance
 * (`npm run bench:privacy` measures it). The price: a device reports one epoch after it
 * first contributes. What still links is the visit itself — a report arrives after the
 * device's first visit of its epoch — which the shop sees in its own logs; the uniform draw over
 * the rest of the epoch blurs it, and the benchmark measures that too.
 */

/** A [0, 1) source; a device must use a CSPRNG-backed one. */
export type Random = () => number;

/** Delay (ms from `now`) to a uniformly random moment in what remains of `epoch`, minus a safety margin. */
export function randomMomentIn(now: number, epoch: number, epochMs: number, random: Random, margin = 0.05): number {
  const end = (epoch + 1) * epochMs - margin * epochMs;
  return Math.max(0, Math.floor(random() * Math.max(0, end - now)));
}

/** What a device does in an epoch (see the module comment). */
export interface EpochPlan {
  /** Fetch the token of `epoch` (= the current epoch + 1) after `delay` ms; absent when held already. */
  fetchToken?: { epoch: number; delay: number };
  /** Send the report of `epoch` (= the current epoch) after `delay` ms; absent without a token for it. */
  report?: { epoch: number; delay: number };
}

/**
 * The plan of the current epoch: two independent draws (token for the next epoch, report for
 * this one with the token fetched in the previous epoch). `held` are the epochs the device
 * holds a token for; `fixedDelay` replaces both draws (tests).
 */
export function planEpoch(o: { now: number; epochMs: number; held: readonly number[]; random: Random; fixedDelay?: number }): EpochPlan {
  const epoch = Math.floor(o.now / o.epochMs);
  const draw = () => (o.fixedDelay !== undefined ? o.fixedDelay : randomMomentIn(o.now, epoch, o.epochMs, o.random));
  const plan: EpochPlan = {};
  // why two separate draws, the token's first: each is a fresh CSPRNG value, so the moments are independent
  if (!o.held.includes(epoch + 1)) plan.fetchToken = { epoch: epoch + 1, delay: draw() };
  if (o.held.includes(epoch)) plan.report = { epoch, delay: draw() };
  return plan;
}
