/**
 * Protocols `loo-full` and `temporal` of /EVAL.md: every catalog item the user has not
 * interacted with competes with the target (no sampled negatives).
 *
 * - `loo-full`: the split of protocol `loo` (last interaction test, second to last validation,
 *   same user draw for a seed), candidates = the whole catalog minus the user's history.
 * - `temporal`: one global cut T = the `cut`-quantile (default 0.9) of every event time. Methods
 *   learn only from events before T. A user is tested when they have an event at or after T
 *   and at least one before it (a user with no history before the cut is a cold start, counted
 *   in the warnings, not tested): the target is their first event at or after T, the history
 *   their events before T, ranked at T (the case's `now`: the moment the method's data ends). Validation (for tuning) applies the same rule inside the pre-cut
 *   log: V = the `cut`-quantile of the events before T, learn before V, target = the first
 *   event in [V, T).
 *
 * A method scores every catalog item into a Float32Array ({@link Method.scoreAll}); the rank
 * of the target is 1 + the number of candidates scored above it + the number scored equal to
 * it (ties count against the target: the pessimistic rank), candidates being the catalog minus
 * the user's history (the target itself counts even when it was consumed before, a repeat).
 * NaN counts as −∞.
 */
import type { Interaction } from 'atomem/engine';
import { compareIds } from './datasets.js';
import { buildProtocol, DEFAULT_SEED, MIN_EVALUABLE, type Protocol } from './protocol.js';
import { Rng } from './rng.js';
import type { Dataset, EvalCase } from './types.js';

export type FullProtocol = 'loo-full' | 'temporal';
export type ProtocolName = 'loo' | FullProtocol;
export const PROTOCOLS: readonly ProtocolName[] = ['loo', 'loo-full', 'temporal'];
/** Default quantile of the temporal cut. */
export const DEFAULT_CUT = 0.9;

export interface FullProtocolOptions {
  users?: number | 'all';
  seed?: number;
  target?: 'test' | 'validation';
  /** `temporal`: quantile of event times for the cut, in (0, 1). Default {@link DEFAULT_CUT}. */
  cut?: number;
  /**
   * `temporal`, validation target: the quantile of the events before T that gives the validation
   * cut V, in (0, 1). Default `cut`. Several values give several validation origins inside the
   * pre-cut log (rolling-origin validation; `npm run tune -- --temporal-cuts`).
   */
  validationCut?: number;
}

export interface FullProtocolResult extends Protocol {
  /** `temporal`: the cut time used for these cases (T for test, V for validation). */
  cutTime?: number;
}

/** The catalog in a fixed order (ids sorted by {@link compareIds}) and its index. */
export function catalogOrder(dataset: Dataset): { ids: string[]; index: Map<string, number> } {
  const ids = [...dataset.items.keys()].sort(compareIds);
  return { ids, index: new Map(ids.map((id, i) => [id, i])) };
}

/** The `q`-quantile (lower order statistic) of a list of times. */
export function quantileTime(times: Float64Array, q: number): number {
  if (times.length === 0) throw new RangeError('temporal: no events');
  const sorted = Float64Array.from(times).sort();
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function allTimes(sequences: Iterable<readonly Interaction[]>, before = Infinity): Float64Array {
  const out: number[] = [];
  for (const seq of sequences) for (const x of seq) if (x.at < before) out.push(x.at);
  return Float64Array.from(out);
}

/** Builds the cases and histories of `loo-full` or `temporal` (cases carry no candidates). */
export function buildFullProtocol(dataset: Dataset, protocol: FullProtocol, opts: FullProtocolOptions = {}): FullProtocolResult {
  const seed = opts.seed ?? DEFAULT_SEED;
  const target = opts.target ?? 'test';
  if (protocol === 'loo-full') {
    return buildProtocol(dataset, { setting: 'full', users: opts.users ?? 'all', seed, target, noCandidates: true });
  }
  if (protocol !== 'temporal') throw new RangeError(`protocol must be loo, loo-full or temporal, got ${String(protocol)}`);
  if (dataset.ordinalTime) {
    throw new RangeError(`protocol temporal needs timestamps; ${dataset.name} (${dataset.format}) has the order of each user's events only — use loo-full`);
  }
  const q = opts.cut ?? DEFAULT_CUT;
  if (!(q > 0 && q < 1)) throw new RangeError(`cut must be a quantile in (0, 1), got ${q}`);
  const vq = opts.validationCut ?? q;
  if (!(vq > 0 && vq < 1)) throw new RangeError(`validation cut must be a quantile in (0, 1), got ${vq}`);
  const T = quantileTime(allTimes(dataset.sequences.values()), q);
  const cutTime = target === 'test' ? T : quantileTime(allTimes(dataset.sequences.values(), T), vq);
  const end = target === 'test' ? Infinity : T;
  const histories = new Map<string, Interaction[]>();
  const eligible: string[] = [];
  let cold = 0;
  for (const [user, seq] of dataset.sequences) {
    const before = seq.filter((x) => x.at < cutTime).map((x) => ({ ...x }));
    histories.set(user, before);
    const after = seq.some((x) => x.at >= cutTime && x.at < end);
    if (!after) continue;
    if (before.length === 0) cold++;
    else eligible.push(user);
  }
  eligible.sort(compareIds);
  const users = opts.users ?? 'all';
  let chosen = eligible;
  if (users !== 'all') {
    if (!Number.isInteger(users) || users < 1) throw new RangeError(`users must be a positive integer or "all", got ${users}`);
    if (users > eligible.length)
      throw new RangeError(`users: asked for ${users} but protocol temporal has only ${eligible.length} users with events on both sides of the cut`);
    chosen = Rng.derive(seed, 'users').sampleWithoutReplacement(eligible, users).sort(compareIds);
  }
  const cases: EvalCase[] = chosen.map((user) => {
    const history = histories.get(user)!.map((x) => ({ ...x }));
    const test = dataset.sequences.get(user)!.find((x) => x.at >= cutTime && x.at < end)!;
    // why the cut: the method's world ends there (its data stops at the cut); a shopper is ranked
    // at that moment, as a shop ranks at the time of a visit after its file was published
    return { user, history, test: { ...test }, candidates: [], now: cutTime };
  });
  const warnings: string[] = [];
  if (cold) warnings.push(`temporal: ${cold} users with events after the cut but none before it (cold start) are not tested`);
  return { cases, histories, evaluable: eligible.length, warnings, cutTime };
}

/** Users of a dataset that `loo-full` can test (as `loo`). */
export function looEvaluable(dataset: Dataset): number {
  let n = 0;
  for (const seq of dataset.sequences.values()) if (seq.length >= MIN_EVALUABLE) n++;
  return n;
}

/**
 * Pessimistic 1-based rank of the target among the candidates: 1 + #{candidates c ≠ target
 * with score(c) ≥ score(target)}, candidates = every index not in `exclude`. NaN = −∞.
 */
export function fullRank(scores: Float32Array, target: number, exclude: Uint8Array): number {
  let t = scores[target];
  if (Number.isNaN(t)) t = -Infinity;
  let rank = 1;
  for (let i = 0; i < scores.length; i++) {
    if (i === target || exclude[i]) continue;
    const s = scores[i];
    if (s >= t) rank++;
    else if (t === -Infinity && Number.isNaN(s)) rank++;
  }
  return rank;
}
