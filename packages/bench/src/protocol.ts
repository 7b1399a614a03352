/**
 * Protocol `loo` (leave-one-out ranking) of /EVAL.md, steps 4–7 and 9.
 *
 * - A user's sequence (already k-core filtered and sorted by (timestamp, item id)) ends with
 *   the test item; the one before it is the validation item; the rest is training.
 * - Evaluable users have at least 3 interactions (one training item, validation, test).
 *   Users with fewer still exist for centralized baselines in setting `full` (with their last
 *   interaction held out like everyone's), but are never evaluated.
 * - Independent seeded streams, each derived from (seed, purpose, user) with
 *   {@link Rng.derive}: the user draw (`users`), negatives (`negatives`,
 *   `validation-negatives`), candidate shuffles (`shuffle`, `validation-shuffle`). A given
 *   user's candidates and their order therefore depend only on the seed and that user: they
 *   are the same whatever `--users` is, and the same in settings `full` and `sample`. The
 *   user draw is prefix-stable: the users drawn for N are among those drawn for N + 1.
 * - Negatives are drawn uniformly without replacement from the catalog items the user never
 *   interacted with anywhere in their (k-core filtered) sequence — including the items the
 *   `sample` setting truncates away and, for validation cases, the test item.
 * - AgentCF pools: the first 9 pool items that are neither the target nor anywhere in the
 *   user's sequence. A missing pool, or one with fewer than 9 usable items, is completed by
 *   uniform draws as above and counted in `warnings`.
 */
import type { Interaction } from 'atomem/engine';
import { compareIds } from './datasets.js';
import { Rng } from './rng.js';
import type { Dataset, EvalCase, Setting } from './types.js';

export const DEFAULT_SEED = 2026;
/** Negatives per case: candidates = target + 9. */
export const NEGATIVES = 9;
/** `sample` keeps each evaluated user's last 8 interactions (6 train, validation, test). */
export const SAMPLE_LENGTH = 8;
/** Fewest interactions for a user to be evaluated (training ≥ 1, validation, test). */
export const MIN_EVALUABLE = 3;

export interface ProtocolOptions {
  /** `full` (default) or `sample`. */
  setting?: Setting;
  /** How many users to evaluate, drawn without replacement; `'all'` (default) for every evaluable user. */
  users?: number | 'all';
  /** Default {@link DEFAULT_SEED}. */
  seed?: number;
  /** `test` (default): hold out the test item; `validation`: hold out the validation item, for tuning. */
  target?: 'test' | 'validation';
}

export interface Protocol {
  cases: EvalCase[];
  /** Every user of the setting → what methods may learn from (see `MethodContext.histories`). */
  histories: Map<string, Interaction[]>;
  /** Number of evaluable users in the dataset. */
  evaluable: number;
  warnings: string[];
}

/** Users with at least {@link MIN_EVALUABLE} interactions, sorted by {@link compareIds}. */
export function evaluableUsers(dataset: Dataset): string[] {
  const users: string[] = [];
  for (const [u, seq] of dataset.sequences) if (seq.length >= MIN_EVALUABLE) users.push(u);
  return users.sort(compareIds);
}

/**
 * The evaluated users: all evaluable users, or `n` of them drawn without replacement from
 * the stream (seed, `users`); returned sorted by id.
 */
export function drawUsers(dataset: Dataset, users: number | 'all' = 'all', seed = DEFAULT_SEED): string[] {
  const all = evaluableUsers(dataset);
  if (users === 'all') return all;
  if (!Number.isInteger(users) || users < 1) throw new RangeError(`users must be a positive integer or "all", got ${users}`);
  if (users > all.length) {
    throw new RangeError(`users: asked for ${users} but the dataset has only ${all.length} evaluable users (≥ ${MIN_EVALUABLE} interactions)`);
  }
  return Rng.derive(seed, 'users').sampleWithoutReplacement(all, users).sort(compareIds);
}

/** The catalog as a sorted array (stable draw order whatever the Map's insertion order). */
function sortedCatalog(dataset: Dataset): string[] {
  return [...dataset.items.keys()].sort(compareIds);
}

function drawUniform(catalog: string[], exclude: Set<string>, k: number, rng: Rng, user: string): string[] {
  const chosen: string[] = [];
  const taken = new Set<string>();
  // why: rejection sampling is cheap unless the user has seen most of the catalog.
  if (catalog.length >= 2 * (exclude.size + k)) {
    while (chosen.length < k) {
      const id = catalog[rng.int(catalog.length)];
      if (exclude.has(id) || taken.has(id)) continue;
      taken.add(id);
      chosen.push(id);
    }
    return chosen;
  }
  const available = catalog.filter((id) => !exclude.has(id));
  if (available.length < k) {
    throw new RangeError(`user ${user}: only ${available.length} catalog items they never interacted with, need ${k} negatives`);
  }
  return rng.sampleWithoutReplacement(available, k);
}

/**
 * Builds the cases and histories of protocol `loo` for one setting and target.
 * Deterministic for a seed (see the module comment for the streams).
 */
export function buildProtocol(dataset: Dataset, opts: ProtocolOptions = {}): Protocol {
  const setting = opts.setting ?? 'full';
  const seed = opts.seed ?? DEFAULT_SEED;
  const target = opts.target ?? 'test';
  if (setting !== 'full' && setting !== 'sample') throw new RangeError(`setting must be "full" or "sample", got ${setting}`);
  const holdOut = target === 'test' ? 1 : 2;
  const prefix = target === 'test' ? '' : 'validation-';
  const users = drawUsers(dataset, opts.users ?? 'all', seed);
  const catalog = sortedCatalog(dataset);
  const warnings: string[] = [];
  let poolMissing = 0;
  let poolShort = 0;

  /** The part of a user's sequence that exists in this setting. */
  const visible = (seq: Interaction[]): Interaction[] => (setting === 'sample' ? seq.slice(-SAMPLE_LENGTH) : seq);

  const cases: EvalCase[] = [];
  for (const user of users) {
    const full = dataset.sequences.get(user)!;
    const seq = visible(full);
    const held = seq[seq.length - holdOut];
    const history = seq.slice(0, seq.length - holdOut).map((x) => ({ ...x }));
    const exclude = new Set(full.map((x) => x.item));
    let negatives: string[] = [];
    const pool = dataset.candidatePools?.get(user);
    if (dataset.candidatePools) {
      if (!pool) poolMissing++;
      else {
        for (const id of pool) {
          if (negatives.length === NEGATIVES) break;
          if (id === held.item || exclude.has(id) || negatives.includes(id)) continue;
          negatives.push(id);
        }
        if (negatives.length < NEGATIVES) poolShort++;
      }
    }
    if (negatives.length < NEGATIVES) {
      const more = new Set([...exclude, ...negatives]);
      negatives = negatives.concat(
        drawUniform(catalog, more, NEGATIVES - negatives.length, Rng.derive(seed, `${prefix}negatives`, user), user),
      );
    }
    const candidates = Rng.derive(seed, `${prefix}shuffle`, user).shuffle([held.item, ...negatives]);
    cases.push({ user, history, test: { ...held }, candidates, now: history.length ? history[history.length - 1].at : 0 });
  }
  if (poolMissing > 0) warnings.push(`${poolMissing} evaluated users have no candidate pool; their negatives were drawn uniformly`);
  if (poolShort > 0) warnings.push(`${poolShort} candidate pools had fewer than ${NEGATIVES} usable items; completed by uniform draws`);

  const histories = new Map<string, Interaction[]>();
  if (setting === 'full') {
    for (const [user, seq] of dataset.sequences) {
      histories.set(user, seq.slice(0, Math.max(0, seq.length - holdOut)).map((x) => ({ ...x })));
    }
  } else {
    for (const c of cases) histories.set(c.user, c.history.map((x) => ({ ...x })));
  }
  return { cases, histories, evaluable: evaluableUsers(dataset).length, warnings };
}

/** Test cases (target = each user's last interaction). */
export function testCases(dataset: Dataset, opts: Omit<ProtocolOptions, 'target'> = {}): Protocol {
  return buildProtocol(dataset, { ...opts, target: 'test' });
}

/**
 * Validation cases, for tuning: target = the validation item, history = training only, own
 * seeded negatives and shuffles; histories exclude every user's last two interactions.
 */
export function validationCases(dataset: Dataset, opts: Omit<ProtocolOptions, 'target'> = {}): Protocol {
  return buildProtocol(dataset, { ...opts, target: 'validation' });
}
