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
}

/** The on-disk formats `datasets.ts` reads (see /EVAL.md, "Data formats"). */
export type DatasetFormat = 'movielens' | 'agentcf' | 'jsonl';

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
  /** The target plus 9 negatives, already shuffled (seeded). */
  candidates: string[];
  /** "Now" for the method: the timestamp of the last history interaction (0 when the history is empty). */
  now: number;
}

export type Privacy = 'off' | 'embeddings' | 'items';
export type Setting = 'full' | 'sample';

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
}

/** A recommender under test. */
export interface Method {
  /** e.g. `pop`, `atomem`, `atomem-no-communities`. */
  readonly name: string;
  /** Train / build state from `ctx`. */
  prepare(ctx: MethodContext): Promise<void>;
  /** Return the case's candidates in ranked order (best first). */
  rank(c: RankCase): Promise<string[]> | string[];
  /**
   * Optional extra columns for this method's result row (e.g. diversity, simulation
   * fidelity), called once after every case was ranked; merged into the row.
   */
  extras?(): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** Optional: release workers, models, files after the run. */
  dispose?(): void | Promise<void>;
}
