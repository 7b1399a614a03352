/**
 * The shop model's counting stages as named queries in standard SQL, over one table
 *
 *   shop_orders(user_id VARCHAR, item_id VARCHAR, at_ms BIGINT, seq BIGINT, weight DOUBLE PRECISION)
 *
 * (`at_ms` epoch ms, `seq` the row's position in the log, `weight` its action's ACTION_WEIGHTS value);
 * the co-occurrence queries read the temporary tables {@link COOCCURRENCE_SETUP} makes from it.
 *
 * They run unchanged on DuckDB (embedded, `engine.ts`) and PostgreSQL (tested against a real
 * server: `packages/atomem/test/shop-sql.test.ts`); Spark SQL and BigQuery notes are in
 * docs/SCALING.md. Only `{{name}}` placeholders are substituted, always with numbers
 * ({@link renderQuery} refuses anything else). What each computes is what `train.ts` computes in
 * memory: events with weight > 0 count; co-occurrence over distinct (user, item) pairs; cosine
 * co(a, b)/√(n_a n_b); transitions between consecutive distinct items of a user's sequence
 * ordered by (at_ms, seq); ties broken by item id so every engine returns the same rows.
 */
/**
 * The co-occurrence queries' input, built once per run by {@link COOCCURRENCE_SETUP}: each item's
 * distinct users `n` and its number in id order `iid` (`shop_items`), each user's number `uid`
 * (`shop_users`), and the distinct (user, item) pairs as those two numbers (`shop_pairs`). Why
 * numbers: the self-join and its aggregate hash two integers per row instead of two strings, and
 * the distinct pairs are computed once instead of once per pass.
 */
export const COOCCURRENCE_SETUP: readonly string[] = [
  `CREATE TEMPORARY TABLE shop_items AS
SELECT item_id, n, CAST(ROW_NUMBER() OVER (ORDER BY item_id) AS INTEGER) AS iid
FROM (SELECT item_id, COUNT(DISTINCT user_id) AS n FROM shop_orders WHERE weight > 0 GROUP BY item_id) d`,
  `CREATE TEMPORARY TABLE shop_users AS
SELECT user_id, CAST(ROW_NUMBER() OVER (ORDER BY user_id) AS INTEGER) AS uid
FROM (SELECT DISTINCT user_id FROM shop_orders WHERE weight > 0) d`,
  `CREATE TEMPORARY TABLE shop_pairs AS
SELECT DISTINCT u.uid, i.iid
FROM shop_orders o JOIN shop_users u ON u.user_id = o.user_id JOIN shop_items i ON i.item_id = o.item_id
WHERE o.weight > 0`,
];

/** Drops what {@link COOCCURRENCE_SETUP} made. */
export const COOCCURRENCE_TEARDOWN: readonly string[] = [
  'DROP TABLE IF EXISTS shop_pairs',
  'DROP TABLE IF EXISTS shop_users',
  'DROP TABLE IF EXISTS shop_items',
];

/**
 * Co-occurrence counts and cosine for the items of one pass (`{{parts}}`, `{{part}}`): the
 * self-join of the pass's (user, item) pairs with all pairs of the same user, over the numbers of
 * {@link COOCCURRENCE_SETUP}. Ties are broken by `iid`, which is id order.
 */
const CO_SCORED = `WITH co AS (
  SELECT a.iid AS a, b.iid AS b, COUNT(*) AS co
  FROM shop_pairs a JOIN shop_pairs b ON a.uid = b.uid AND a.iid <> b.iid
  WHERE MOD(a.iid, {{parts}}) = {{part}}
  GROUP BY a.iid, b.iid
), scored AS (
  SELECT co.a, co.b, co.co, CAST(co.co AS DOUBLE PRECISION) / SQRT(CAST(da.n AS DOUBLE PRECISION) * CAST(db.n AS DOUBLE PRECISION)) AS score
  FROM co JOIN shop_items da ON da.iid = co.a JOIN shop_items db ON db.iid = co.b
)`;

/**
 * Passes for the co-occurrence queries: enough that one pass's aggregate (about
 * `bytesPerRow` per self-join row) fits `memoryBytes`. 48 by default: DuckDB at 100k items / 10M
 * events held a quarter of its 557M rows' pairs in 5.5 GiB (40 bytes a row), and ran out of
 * memory with them all in one pass.
 */
export function cooccurrenceParts(pairRows: number, memoryBytes: number, bytesPerRow = 48): number {
  if (!(pairRows >= 0) || !(memoryBytes > 0))
    throw new RangeError(`cooccurrenceParts: pairRows ${pairRows} and memoryBytes ${memoryBytes} must be ≥ 0 and > 0`);
  return Math.max(1, Math.ceil((pairRows * bytesPerRow) / memoryBytes));
}

export const QUERIES = {
  /** Distinct users per item. */
  popularity: `
SELECT item_id, COUNT(DISTINCT user_id) AS users
FROM shop_orders
WHERE weight > 0
GROUP BY item_id`,

  /** Distinct users per item in [since, until): the recency window. */
  recentPopularity: `
SELECT item_id, COUNT(DISTINCT user_id) AS users
FROM shop_orders
WHERE weight > 0 AND at_ms >= {{since}} AND at_ms < {{until}}
GROUP BY item_id`,

  /** Distinct users per (time bucket, item): the trend counts. */
  trend: `
SELECT CAST(FLOOR(CAST(at_ms AS DOUBLE PRECISION) / {{bucketMs}}) AS BIGINT) AS bucket, item_id, COUNT(DISTINCT user_id) AS users
FROM shop_orders
WHERE weight > 0
GROUP BY CAST(FLOOR(CAST(at_ms AS DOUBLE PRECISION) / {{bucketMs}}) AS BIGINT), item_id`,

  /**
   * Rows of the co-occurrence self-join, Σ_u n_u (n_u − 1) over each user's distinct items: what
   * the two queries below cost, and what {@link cooccurrenceParts} sizes their passes by.
   */
  cooccurrenceRows: `
WITH per AS (
  SELECT uid, COUNT(*) AS n FROM shop_pairs GROUP BY uid
)
SELECT SUM(CAST(n AS DOUBLE PRECISION) * CAST(n - 1 AS DOUBLE PRECISION)) AS pair_rows FROM per`,

  /**
   * Each item's k nearest items by co-occurrence cosine over distinct users (item-kNN), for the
   * items of one pass: items numbered in id order, pass `part` of `parts` takes those with
   * number mod parts = part (parts 1, part 0: all), so each pass aggregates 1/parts of the pairs.
   */
  cooccurrenceTopK: `
${CO_SCORED}, ranked AS (
  SELECT a, b, co, score, ROW_NUMBER() OVER (PARTITION BY a ORDER BY score DESC, b) AS r
  FROM scored
)
SELECT ia.item_id AS item_a, ib.item_id AS item_b, ranked.co, ranked.score, ranked.r
FROM ranked JOIN shop_items ia ON ia.iid = ranked.a JOIN shop_items ib ON ib.iid = ranked.b
WHERE ranked.r <= {{k}}`,

  /**
   * Both co-occurrence lists from one self-join: each item's `k` nearest items by cosine (item-kNN,
   * rank `r`) and its `neighboursK` most co-occurring items (local EASE's neighbourhoods, rank
   * `rc`), for the items of one pass as in `cooccurrenceTopK`. A row is returned when either rank
   * is within its limit; the self-join, the costly part, runs once instead of once per list.
   */
  cooccurrenceLists: `
${CO_SCORED}, ranked AS (
  SELECT a, b, co, score,
    ROW_NUMBER() OVER (PARTITION BY a ORDER BY score DESC, b) AS r,
    ROW_NUMBER() OVER (PARTITION BY a ORDER BY co DESC, b) AS rc
  FROM scored
), kept AS (
  SELECT a, b, co, score, r, rc FROM ranked WHERE r <= {{k}} OR rc <= {{neighboursK}}
)
SELECT ia.item_id AS item_a, ib.item_id AS item_b, kept.co, kept.score, kept.r, kept.rc
FROM kept JOIN shop_items ia ON ia.iid = kept.a JOIN shop_items ib ON ib.iid = kept.b`,

  /** First-order transitions a → b (consecutive distinct items), P(b | a), the k likeliest per a. */
  transitionsTopK: `
WITH s AS (
  SELECT user_id, item_id, LAG(item_id) OVER (PARTITION BY user_id ORDER BY at_ms, seq) AS prev
  FROM shop_orders WHERE weight > 0
), t AS (
  SELECT prev AS item_a, item_id AS item_b, COUNT(*) AS cnt
  FROM s WHERE prev IS NOT NULL AND prev <> item_id
  GROUP BY prev, item_id
), p AS (
  SELECT item_a, item_b, cnt, CAST(cnt AS DOUBLE PRECISION) / SUM(cnt) OVER (PARTITION BY item_a) AS prob
  FROM t
), ranked AS (
  SELECT item_a, item_b, cnt, prob, ROW_NUMBER() OVER (PARTITION BY item_a ORDER BY prob DESC, item_b) AS r
  FROM p
)
SELECT item_a, item_b, cnt, prob, r FROM ranked WHERE r <= {{k}}`,
} as const;

export type QueryName = keyof typeof QUERIES;

/** The query text with its `{{name}}` placeholders replaced by the given finite numbers. */
export function renderQuery(name: QueryName, params: Readonly<Record<string, number>> = {}): string {
  return QUERIES[name].replace(/\{\{(\w+)\}\}/g, (_, key: string) => {
    const v = params[key];
    if (typeof v !== 'number' || !Number.isFinite(v)) throw new RangeError(`query ${name}: parameter ${key} must be a finite number, got ${String(v)}`);
    return String(v);
  });
}
