/**
 * The shop model's counting stages as named queries in standard SQL, over one table
 *
 *   shop_orders(user_id VARCHAR, item_id VARCHAR, at_ms BIGINT, seq BIGINT, weight DOUBLE PRECISION)
 *
 * (`at_ms` epoch ms, `seq` the row's position in the log, `weight` its action's ACTION_WEIGHTS value)
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
 * Co-occurrence counts and cosine for the items of one pass (`{{parts}}`, `{{part}}`): distinct
 * (user, item) pairs, each item's distinct users `n` and its number in id order `iid`, the
 * self-join of the pass's items with all items of the same user.
 */
const CO_SCORED = `WITH ui AS (
  SELECT DISTINCT user_id, item_id FROM shop_orders WHERE weight > 0
), deg AS (
  SELECT item_id, COUNT(*) AS n, ROW_NUMBER() OVER (ORDER BY item_id) AS iid FROM ui GROUP BY item_id
), pass AS (
  SELECT ui.user_id, ui.item_id FROM ui JOIN deg ON deg.item_id = ui.item_id WHERE MOD(deg.iid, {{parts}}) = {{part}}
), co AS (
  SELECT a.item_id AS item_a, b.item_id AS item_b, COUNT(*) AS co
  FROM pass a JOIN ui b ON a.user_id = b.user_id AND a.item_id <> b.item_id
  GROUP BY a.item_id, b.item_id
), scored AS (
  SELECT co.item_a, co.item_b, co.co, CAST(co.co AS DOUBLE PRECISION) / SQRT(CAST(da.n AS DOUBLE PRECISION) * CAST(db.n AS DOUBLE PRECISION)) AS score
  FROM co JOIN deg da ON da.item_id = co.item_a JOIN deg db ON db.item_id = co.item_b
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
WITH ui AS (
  SELECT DISTINCT user_id, item_id FROM shop_orders WHERE weight > 0
), per AS (
  SELECT user_id, COUNT(*) AS n FROM ui GROUP BY user_id
)
SELECT SUM(CAST(n AS DOUBLE PRECISION) * CAST(n - 1 AS DOUBLE PRECISION)) AS pair_rows FROM per`,

  /**
   * Each item's k nearest items by co-occurrence cosine over distinct users (item-kNN), for the
   * items of one pass: items numbered in id order, pass `part` of `parts` takes those with
   * number mod parts = part (parts 1, part 0: all), so each pass aggregates 1/parts of the pairs.
   */
  cooccurrenceTopK: `
${CO_SCORED}, ranked AS (
  SELECT item_a, item_b, co, score, ROW_NUMBER() OVER (PARTITION BY item_a ORDER BY score DESC, item_b) AS r
  FROM scored
)
SELECT item_a, item_b, co, score, r FROM ranked WHERE r <= {{k}}`,

  /**
   * Both co-occurrence lists from one self-join: each item's `k` nearest items by cosine (item-kNN,
   * rank `r`) and its `neighboursK` most co-occurring items (local EASE's neighbourhoods, rank
   * `rc`), for the items of one pass as in `cooccurrenceTopK`. A row is returned when either rank
   * is within its limit; the self-join, the costly part, runs once instead of once per list.
   */
  cooccurrenceLists: `
${CO_SCORED}, ranked AS (
  SELECT item_a, item_b, co, score,
    ROW_NUMBER() OVER (PARTITION BY item_a ORDER BY score DESC, item_b) AS r,
    ROW_NUMBER() OVER (PARTITION BY item_a ORDER BY co DESC, item_b) AS rc
  FROM scored
)
SELECT item_a, item_b, co, score, r, rc FROM ranked WHERE r <= {{k}} OR rc <= {{neighboursK}}`,

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
