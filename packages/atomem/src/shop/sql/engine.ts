/**
 * Running the counting stages of `queries.ts` on an SQL engine. DuckDB is embedded
 * (`@duckdb/node-api`, an optional peer dependency loaded only here, by dynamic import: a browser
 * shop never installs it); any other engine plugs in as a {@link SqlEngine} (the PostgreSQL test
 * passes a `pg` client). DuckDB reads the order log straight from JSON Lines (`.gz` too), CSV or
 * Parquet; the loader is engine-specific, the counting queries are not.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ACTION_WEIGHTS } from '../../core/types.js';
import { ItemNumbers, type RankedLists, RankedListsBuilder } from '../ranked-lists.js';
import { COOCCURRENCE_SETUP, COOCCURRENCE_TEARDOWN, cooccurrenceParts, renderQuery, type QueryName } from './queries.js';

/**
 * An SQL engine: runs one statement, returns its rows as plain objects. Every statement of one
 * {@link countingStages} call must reach the same session (one connection, not a pool): the
 * co-occurrence queries read temporary tables the call creates first.
 */
export interface SqlEngine {
  readonly name: string;
  query(sql: string): Promise<Record<string, unknown>[]>;
  /** Runs one statement and hands its rows over as they arrive (optional: without it, {@link query}'s rows). */
  each?(sql: string, onRow: (row: Record<string, unknown>) => void): Promise<void>;
  /** Bytes the engine may use for one query (sizes the co-occurrence passes; unknown: one pass). */
  memoryBytes?(): Promise<number>;
  close(): Promise<void>;
}

const UNITS: Record<string, number> = { b: 1, kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };

/** Bytes of a DuckDB size such as `5.5 GiB` or `8GB`; NaN when it is not one. */
export function parseSize(text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b|b)\s*$/i.exec(text);
  return m ? Number(m[1]) * UNITS[m[2].toLowerCase()] : Number.NaN;
}

/** Missing optional dependency (the CLI exits with code 2 and this message). */
class EngineMissingError extends Error {
  override name = 'EngineMissingError';
}

/** `CASE action …` giving ACTION_WEIGHTS (no action: click), standard SQL. */
export function weightExpression(column = 'action'): string {
  const cases = Object.entries(ACTION_WEIGHTS)
    .map(([a, w]) => `WHEN '${a}' THEN ${w}`)
    .join(' ');
  return `CASE WHEN ${column} IS NULL THEN ${ACTION_WEIGHTS.click} ELSE CASE ${column} ${cases} ELSE NULL END END`;
}

const quote = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Opens an in-memory DuckDB (`threads`: default all cores). */
export async function openDuckDb(opts: { threads?: number; memoryLimit?: string } = {}): Promise<SqlEngine> {
  let api: typeof import('@duckdb/node-api');
  try {
    api = await import('@duckdb/node-api');
  } catch {
    throw new EngineMissingError('the SQL engine DuckDB is not installed: npm i @duckdb/node-api');
  }
  // why a temp directory of our own: an in-memory DuckDB spills to `./.tmp` by default, in the
  // shop's working directory; this one is removed on close.
  const spill = mkdtempSync(join(tmpdir(), 'atomem-duckdb-'));
  const config: Record<string, string> = { temp_directory: spill };
  if (opts.threads) config.threads = String(opts.threads);
  if (opts.memoryLimit) config.memory_limit = opts.memoryLimit;
  let instance: import('@duckdb/node-api').DuckDBInstance;
  let conn: import('@duckdb/node-api').DuckDBConnection;
  try {
    instance = await api.DuckDBInstance.create(':memory:', config);
    conn = await instance.connect();
  } catch (e) {
    rmSync(spill, { recursive: true, force: true });
    throw e;
  }
  return {
    name: 'duckdb',
    async query(sql) {
      const reader = await conn.runAndReadAll(sql);
      return reader.getRowObjectsJS() as Record<string, unknown>[];
    },
    async each(sql, onRow) {
      // why streamed: the co-occurrence lists of a large catalog are tens of millions of rows; one
      // chunk at a time keeps them out of a single array of objects.
      const result = await conn.stream(sql);
      for await (const rows of result.yieldRowObjectJs()) for (const r of rows) onRow(r as Record<string, unknown>);
    },
    async memoryBytes() {
      const r = await conn.runAndReadAll("SELECT current_setting('memory_limit') AS m");
      return parseSize(String(r.getRowObjectsJS()[0].m));
    },
    async close() {
      try {
        conn.closeSync();
        instance.closeSync();
      } finally {
        rmSync(spill, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Creates `shop_orders` in DuckDB from an order log file: `.jsonl`/`.json`/`.ndjson` (optionally
 * `.gz`), `.csv` or `.parquet`, with columns user, item, at (epoch ms or ISO date), action?.
 * Unknown actions are an error (as in the in-memory reader).
 */
export async function loadOrdersDuckDb(engine: SqlEngine, path: string): Promise<number> {
  const p = path.toLowerCase().replace(/\.gz$/, '');
  const cols = `{'user': 'VARCHAR', 'item': 'VARCHAR', 'at': 'VARCHAR', 'action': 'VARCHAR'}`;
  const source = p.endsWith('.parquet')
    ? `read_parquet(${quote(path)})`
    : p.endsWith('.csv')
      ? `read_csv(${quote(path)}, header = true, columns = ${cols})`
      : `read_json(${quote(path)}, format = 'newline_delimited', columns = ${cols})`;
  await engine.query(`CREATE OR REPLACE TABLE shop_orders AS
SELECT CAST("user" AS VARCHAR) AS user_id, CAST(item AS VARCHAR) AS item_id,
  CASE WHEN regexp_full_match(CAST("at" AS VARCHAR), '[0-9]+') THEN CAST("at" AS BIGINT) ELSE epoch_ms(CAST("at" AS TIMESTAMP)) END AS at_ms,
  row_number() OVER () AS seq,
  CAST(${weightExpression('action')} AS DOUBLE) AS weight,
  action
FROM ${source}`);
  const bad = await engine.query(`SELECT action FROM shop_orders WHERE weight IS NULL LIMIT 1`);
  if (bad.length) throw new RangeError(`${path}: unknown action ${JSON.stringify(bad[0].action)}`);
  const missing = await engine.query(`SELECT COUNT(*) AS n FROM shop_orders WHERE user_id IS NULL OR item_id IS NULL OR at_ms IS NULL`);
  if (Number(missing[0].n) > 0) throw new RangeError(`${path}: ${missing[0].n} rows without user, item or at`);
  const n = await engine.query('SELECT COUNT(*) AS n FROM shop_orders');
  return Number(n[0].n);
}

/** One named counting query on `engine`. */
export function runQuery(engine: SqlEngine, name: QueryName, params: Readonly<Record<string, number>> = {}): Promise<Record<string, unknown>[]> {
  return engine.query(renderQuery(name, params));
}

/** What the counting stages give the trainer. */
export interface CountingResult {
  /** item id → distinct users. */
  popularity: Map<string, number>;
  /** Each item's nearest items by cosine (`values`; `counts`: co-occurrences), best first. */
  knn: RankedLists;
  /** Each item's most co-occurring items (`values` = `counts`), best first (when `neighboursK` was given). */
  neighbours?: RankedLists;
  /** Each item's likeliest successors (`values`: P(b | a); `counts`: transitions), best first. */
  transitions: RankedLists;
  /** Seconds per query (summed over its passes). */
  seconds: Record<string, number>;
  /** Passes of the co-occurrence query (each over 1/passes of the items). */
  passes: number;
}

/** Runs popularity, co-occurrence top-k (with local EASE's neighbourhoods when `neighboursK` is given, from the same self-join) and transitions top-k. */
export async function countingStages(
  engine: SqlEngine,
  opts: {
    knnK: number;
    markovK: number;
    neighboursK?: number;
    parts?: number;
    onPart?: (done: number, parts: number) => void;
    /** After each statement but the passes (those report through `onPart`): its name and seconds. */
    onQuery?: (name: string, seconds: number) => void;
  },
): Promise<CountingResult> {
  const seconds: Record<string, number> = {};
  const timed = async (name: QueryName, params: Record<string, number>, onRow: (r: Record<string, unknown>) => void) => {
    const t0 = performance.now();
    const sql = renderQuery(name, params);
    if (engine.each) await engine.each(sql, onRow);
    else for (const r of await engine.query(sql)) onRow(r);
    seconds[name] = (seconds[name] ?? 0) + (performance.now() - t0) / 1000;
    if (params.part === undefined) opts.onQuery?.(name, seconds[name]);
  };
  const popularity = new Map<string, number>();
  await timed('popularity', {}, (r) => popularity.set(String(r.item_id), Number(r.users)));
  // Rows arrive in any order; each lands at its rank when the lists are built.
  const numbers = new ItemNumbers();
  const knn = new RankedListsBuilder(numbers);
  const nb = new RankedListsBuilder(numbers);
  let parts = opts.parts;
  const setupStart = performance.now();
  try {
    // why a setup: the distinct (user, item) pairs as two integers, once per run (see COOCCURRENCE_SETUP).
    for (const sql of COOCCURRENCE_SETUP) await engine.query(sql);
    seconds.cooccurrenceSetup = (performance.now() - setupStart) / 1000;
    opts.onQuery?.('cooccurrenceSetup', seconds.cooccurrenceSetup);
    // why passes: the self-join's aggregate grows with Σ_u n_u² (557M rows at 100k items / 10M
    // events); in one pass DuckDB ran out of a 5.5 GiB limit, in four it did not.
    if (parts === undefined && engine.memoryBytes) {
      const memory = await engine.memoryBytes();
      let pairRows = 0;
      if (Number.isFinite(memory)) await timed('cooccurrenceRows', {}, (r) => (pairRows = Number(r.pair_rows ?? 0)));
      parts = Number.isFinite(memory) ? cooccurrenceParts(pairRows, memory) : 1;
    }
    parts ??= 1;
    if (!Number.isInteger(parts) || parts < 1) throw new RangeError(`countingStages: parts must be a positive integer, got ${parts}`);
    if (opts.neighboursK) {
      // One self-join for both lists; each list in its own rank order.
      const knnK = opts.knnK;
      const neighboursK = opts.neighboursK;
      for (let part = 0; part < parts; part++) {
        await timed('cooccurrenceLists', { k: knnK, neighboursK, parts, part }, (r) => {
          const a = String(r.item_a);
          const b = String(r.item_b);
          const co = Number(r.co);
          if (Number(r.r) <= knnK) knn.add(a, b, Number(r.r), Number(r.score), co);
          if (Number(r.rc) <= neighboursK) nb.add(a, b, Number(r.rc), co, co);
        });
        opts.onPart?.(part + 1, parts);
      }
    } else
      for (let part = 0; part < parts; part++) {
        await timed('cooccurrenceTopK', { k: opts.knnK, parts, part }, (r) =>
          knn.add(String(r.item_a), String(r.item_b), Number(r.r), Number(r.score), Number(r.co)),
        );
        opts.onPart?.(part + 1, parts);
      }
  } finally {
    for (const sql of COOCCURRENCE_TEARDOWN) await engine.query(sql);
  }
  const transitions = new RankedListsBuilder(numbers);
  await timed('transitionsTopK', { k: opts.markovK }, (r) => transitions.add(String(r.item_a), String(r.item_b), Number(r.r), Number(r.prob), Number(r.cnt)));
  return {
    popularity,
    knn: knn.build(),
    transitions: transitions.build(),
    seconds,
    passes: parts,
    ...(opts.neighboursK ? { neighbours: nb.build() } : {}),
  };
}
