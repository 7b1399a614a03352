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

/** One evaluated user under protocol `loo`. */
export interface EvalCase {
  user: string;
  /** Everything before the test item (training + validation), oldest first. */
  history: Interaction[];
  /** The held-out test item and its timestamp. */
  test: Interaction;
  /** The test item plus 9 negatives, already shuffled (seeded). */
  candidates: string[];
}

/**
 * `off`: nothing shared. `contribute`: protocol v2 (one local-DP report per device per epoch,
 * the epoch's aggregate release used for ranking). `embeddings` / `items`: DEPRECATED,
 * insecure protocol v1 (raw memory vectors, and item ids), kept for before/after figures.
 */
export type Privacy = 'off' | 'contribute' | 'embeddings' | 'items';
export type Setting = 'full' | 'sample';

/** What every method gets before ranking. */
export interface MethodContext {
  dataset: Dataset;
  /** The evaluated users' cases (same for every method). */
  cases: EvalCase[];
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
  rank(c: EvalCase): Promise<string[]> | string[];
  /**
   * Optional extra columns for this method's result row (e.g. diversity, simulation
   * fidelity), called once after every case was ranked; merged into the row.
   */
  extras?(): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** Optional: release workers, models, files after the run. */
  dispose?(): void | Promise<void>;
}
