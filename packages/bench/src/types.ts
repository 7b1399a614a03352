import type { Interaction, Item } from 'atomem/engine';

/** A loaded dataset after the k-core filter; sequences sorted by (timestamp, item id). */
export interface Dataset {
  name: string;
  /** Every catalog item (for `movielens`: those surviving the k-core; for `jsonl`: all of items.jsonl). */
  items: Map<string, Item>;
  /** user id → interactions sorted by (at, item). */
  sequences: Map<string, Interaction[]>;
  /** AgentCF-format datasets ship candidate pools: user id → item ids (in file order). */
  candidatePools?: Map<string, string[]>;
  /** Which loader produced it (set by the loaders in `datasets.ts`). */
  format?: DatasetFormat;
  /** Non-fatal loader notes, e.g. interactions skipped for unknown item ids. */
  warnings?: string[];
  /** True when `at` is only the position in the user's sequence (format `sequences`): no real time. */
  ordinalTime?: boolean;
}

/** The on-disk formats `datasets.ts` reads (see /EVAL.md, "Data formats"). */
export type DatasetFormat = 'movielens' | 'agentcf' | 'jsonl' | 'sequences';

/** One evaluated user under protocol `loo` (what the runner knows; methods get a {@link RankCase}). */
export interface EvalCase extends RankCase {
  /** The held-out item and its timestamp. */
  test: Interaction;
}

/**
 * What a method sees of one evaluated user when it ranks: never the held-out item (it is among
 * the candidates, unmarked) nor its timestamp.
 */
export interface RankCase {
  user: string;
  /** Everything before the target, oldest first (a copy: mutating it changes nothing). */
  history: Interaction[];
  /** The target plus 9 negatives, already shuffled (seeded); empty in `loo-full` and `temporal` (the whole catalog competes). */
  candidates: string[];
  /** "Now" for the method: the timestamp of the last history interaction (0 when the history is empty); under `temporal`, the cut. */
  now: number;
  /**
   * Setting `instruct`: the shopper's stated intent, derived from the target's categories in
   * words (never its title or id), e.g. "Looking for a comedy or a romance". Methods that take
   * no intent ignore it.
   */
  intent?: string;
  /** Setting `evolving`: the step (1 = the first of the user's last N interactions). */
  step?: number;
}

/**
 * `off`: nothing shared. `contribute`: protocol v2 (one local-DP report per device per epoch,
 * the epoch's aggregate release used for ranking).
 */
export type Privacy = 'off' | 'contribute';
/**
 * `full`: every user's history exists; `sample`: only the evaluated users' last 8;
 * `instruct`: `full` plus a stated intent per case (ARS / InstructRec); `evolving`: `full`, but
 * each user's last N interactions are tested one after another, the method observing each
 * revealed interaction before the next step (ARS's evolving setting).
 */
export type Setting = 'full' | 'sample' | 'instruct' | 'evolving';

/** What every method gets before ranking. */
export interface MethodContext {
  dataset: Dataset;
  /** The evaluated users' cases (same for every method), without their targets. */
  cases: RankCase[];
  /**
   * Every user that exists in this setting → the interactions the method may learn from
   * (for `full`: each user's history before their own test item; for `sample`: the
   * evaluated users' last 7 before test).
   */
  histories: Map<string, Interaction[]>;
  seed: number;
  privacy: Privacy;
  /** Report progress (done, total, label) for the stderr bar. */
  progress(done: number, total: number, label?: string): void;
  /** `full` or `sample` (set by `runBenchmark`). */
  setting?: Setting;
  /** `test` for the reported run; `validation` when tuning (cases target the validation item). */
  target?: 'test' | 'validation';
  /** `loo` (10 candidates per case), `loo-full` or `temporal` (every catalog item scored by {@link Method.scoreAll}). */
  protocol?: 'loo' | 'loo-full' | 'temporal';
  /** The catalog in scoring order: `scoreAll`'s output slot k is the item `catalog[k]` (set by `runBenchmark`). */
  catalog?: readonly string[];
  /** Item id → its slot in {@link catalog}. */
  catalogIndex?: ReadonlyMap<string, number>;
}

/** A recommender under test. */
export interface Method {
  /** e.g. `pop`, `atomem`, `atomem-no-communities`. */
  readonly name: string;
  /** Train / build state from `ctx`. */
  prepare(ctx: MethodContext): Promise<void>;
  /**
   * Setting `evolving` only: the interaction the user just made (the target of the step that
   * was ranked), to learn from before the next step. Methods without it see it anyway in the
   * next step's history.
   */
  observe?(user: string, interaction: Interaction): Promise<void> | void;
  /** Return the case's candidates in ranked order (best first). */
  rank(c: RankCase): Promise<string[]> | string[];
  /**
   * Protocols `loo-full` and `temporal`: write a score for every catalog item into `out`
   * (slot k = `ctx.catalog[k]`; prefilled with −∞; larger = better). The runner excludes the
   * user's history and counts ties against the target. Methods without it cannot run there.
   */
  scoreAll?(c: RankCase, out: Float32Array): Promise<void> | void;
  /**
   * Optional extra columns for this method's result row (e.g. diversity, simulation
   * fidelity), called once after every case was ranked; merged into the row.
   */
  extras?(): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** Optional: release workers, models, files after the run. */
  dispose?(): void | Promise<void>;
}
