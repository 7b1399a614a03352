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
  /** `full` (default), `sample`, `instruct` or `evolving` (see {@link Setting}). */
  setting?: Setting;
  /** Setting `evolving`: how many of each user's last interactions are tested, one after another. Default 5. */
  steps?: number;
  /** How many users to evaluate, drawn without replacement; `'all'` (default) for every evaluable user. */
  users?: number | 'all';
  /** Default {@link DEFAULT_SEED}. */
  seed?: number;
  /** `test` (default): hold out the test item; `validation`: hold out the validation item, for tuning. */
  target?: 'test' | 'validation';
  /** Protocol `loo-full`: the same split, no sampled candidates (every case's `candidates` empty). */
  noCandidates?: boolean;
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
  if (!['full', 'sample', 'instruct', 'evolving'].includes(setting))
    throw new RangeError(`setting must be "full", "sample", "instruct" or "evolving", got ${setting}`);
  if (setting === 'evolving') return evolvingProtocol(dataset, { ...opts, seed, target });
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
    if (opts.noCandidates) {
      cases.push({ user, history, test: { ...held }, candidates: [], now: history.length ? history[history.length - 1].at : 0 });
      continue;
    }
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
      negatives = negatives.concat(drawUniform(catalog, more, NEGATIVES - negatives.length, Rng.derive(seed, `${prefix}negatives`, user), user));
    }
    const candidates = Rng.derive(seed, `${prefix}shuffle`, user).shuffle([held.item, ...negatives]);
    const c: EvalCase = { user, history, test: { ...held }, candidates, now: history.length ? history[history.length - 1].at : 0 };
    if (setting === 'instruct') c.intent = intentFor(dataset.items.get(held.item)?.categories);
    cases.push(c);
  }
  if (poolMissing > 0) warnings.push(`${poolMissing} evaluated users have no candidate pool; their negatives were drawn uniformly`);
  if (poolShort > 0) warnings.push(`${poolShort} candidate pools had fewer than ${NEGATIVES} usable items; completed by uniform draws`);

  const histories = new Map<string, Interaction[]>();
  if (setting !== 'sample') {
    for (const [user, seq] of dataset.sequences) {
      histories.set(
        user,
        seq.slice(0, Math.max(0, seq.length - holdOut)).map((x) => ({ ...x })),
      );
    }
  } else {
    for (const c of cases)
      histories.set(
        c.user,
        c.history.map((x) => ({ ...x })),
      );
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

/**
 * The intent of setting `instruct`, from the target's categories only (the way InstructRec's
 * coarse intents are made): "Looking for a comedy", "Looking for a crime or a thriller", "Looking
 * for a drama, a romance or a war film". Never the title or the id; "something new" without categories.
 */
export function intentFor(categories: readonly string[] | undefined): string {
  const cats = [...new Set((categories ?? []).map((c) => c.trim()).filter(Boolean))];
  if (cats.length === 0) return 'Looking for something new';
  const a = (c: string) => `${/^[aeiou]/i.test(c) ? 'an' : 'a'} ${c.toLowerCase()}`;
  const words = cats.map(a);
  const list = words.length === 1 ? words[0] : `${words.slice(0, -1).join(', ')} or ${words[words.length - 1]}`;
  return `Looking for ${list}`;
}

/**
 * Setting `evolving` (ARS): each evaluated user's last `steps` interactions are the targets of
 * steps 1…N in time order; step j's history is everything before its target (so it holds the
 * targets of steps 1…j−1, which the method observed). Candidates per (user, step): the target
 * plus 9 negatives never in the user's sequence, streams (seed, `evolving-negatives`, user, j)
 * and (seed, `evolving-shuffle`, user, j). Every user's learnable history (`histories`) stops
 * before their own first step. Users need steps + 2 interactions. Validation is not offered.
 */
function evolvingProtocol(dataset: Dataset, opts: ProtocolOptions & { seed: number; target: 'test' | 'validation' }): Protocol {
  const steps = opts.steps ?? 5;
  if (!Number.isInteger(steps) || steps < 1 || steps > 50) throw new RangeError(`steps must be an integer in 1..50, got ${steps}`);
  if (opts.target !== 'test') throw new RangeError('setting evolving has no validation target: tune with the loo setting');
  const users = drawUsers(dataset, opts.users ?? 'all', opts.seed).filter((u) => dataset.sequences.get(u)!.length >= steps + 2);
  if (users.length === 0) throw new RangeError(`setting evolving: no evaluated user has ${steps + 2} interactions`);
  const catalog = sortedCatalog(dataset);
  const cases: EvalCase[] = [];
  for (let j = 1; j <= steps; j++) {
    for (const user of users) {
      const seq = dataset.sequences.get(user)!;
      const at = seq.length - steps - 1 + j;
      const held = seq[at];
      const history = seq.slice(0, at).map((x) => ({ ...x }));
      const exclude = new Set(seq.map((x) => x.item));
      const negatives = drawUniform(catalog, exclude, NEGATIVES, Rng.derive(opts.seed, 'evolving-negatives', user, j), user);
      const candidates = Rng.derive(opts.seed, 'evolving-shuffle', user, j).shuffle([held.item, ...negatives]);
      cases.push({ user, history, test: { ...held }, candidates, now: history[history.length - 1].at, step: j });
    }
  }
  const histories = new Map<string, Interaction[]>();
  for (const [user, seq] of dataset.sequences)
    histories.set(
      user,
      seq.slice(0, Math.max(0, seq.length - steps)).map((x) => ({ ...x })),
    );
  const skipped = drawUsers(dataset, opts.users ?? 'all', opts.seed).length - users.length;
  return {
    cases,
    histories,
    evaluable: evaluableUsers(dataset).length,
    warnings: skipped ? [`${skipped} evaluated users have fewer than ${steps + 2} interactions and are not in the evolving setting`] : [],
  };
}
