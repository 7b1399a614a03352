/**
 * The counting stages as SQL (`src/shop/sql/queries.ts`): on embedded DuckDB reading the log
 * file directly, checked against a direct computation; then the same query text on a real
 * PostgreSQL (Debian's package; a throwaway cluster from test/fixtures/postgres.ts, skipped
 * visibly when none can be had), whose rows must equal DuckDB's.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { countingStages, loadOrdersDuckDb, openDuckDb, parseSize, runQuery, weightExpression, type SqlEngine } from '../src/shop/sql/engine.js';
import { COOCCURRENCE_SETUP, COOCCURRENCE_TEARDOWN, QUERIES, cooccurrenceParts, renderQuery, type QueryName } from '../src/shop/sql/queries.js';
import { main } from '../src/shop/cli.js';
import { rankedListsToMap } from '../src/shop/ranked-lists.js';
import { countedListSizes } from '../src/shop/train.js';
import { decodeShopModel } from '../src/protocol/shop-model-v1.js';
import { ensurePostgres, startPostgres, type PostgresCluster } from '../../../test/fixtures/postgres.js';

/** A small seeded log: 40 users, 30 items, repeats, ties in time, negative actions. */
function syntheticLog(): Array<{ user: string; item: string; at: number; action?: string }> {
  let s = 7;
  const rnd = () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
  const rows: Array<{ user: string; item: string; at: number; action?: string }> = [];
  const actions = [undefined, undefined, 'view', 'purchase', 'cart', 'skip', 'dislike'];
  for (let u = 0; u < 40; u++) {
    const n = 1 + Math.floor(rnd() * 12);
    let at = 1_700_000_000_000 + Math.floor(rnd() * 10) * 86_400_000;
    for (let t = 0; t < n; t++) {
      const item = `i${Math.floor(rnd() ** 2 * 30)}`;
      const action = actions[Math.floor(rnd() * actions.length)];
      rows.push({ user: `u${u}`, item, at, ...(action ? { action } : {}) });
      if (rnd() < 0.8) at += 1000 * (1 + Math.floor(rnd() * 5000));
    }
  }
  return rows;
}

const WEIGHT: Record<string, number> = { view: 0.3, click: 0.5, cart: 0.8, purchase: 1, rate: 1, like: 1, dislike: -1, skip: -0.3 };

/** The same statistics computed directly. */
function direct(rows: ReturnType<typeof syntheticLog>) {
  const kept = rows.map((r, seq) => ({ ...r, seq })).filter((r) => WEIGHT[r.action ?? 'click'] > 0);
  const usersOf = new Map<string, Set<string>>();
  const itemsOf = new Map<string, Set<string>>();
  for (const r of kept) {
    if (!usersOf.has(r.item)) usersOf.set(r.item, new Set());
    usersOf.get(r.item)!.add(r.user);
    if (!itemsOf.has(r.user)) itemsOf.set(r.user, new Set());
    itemsOf.get(r.user)!.add(r.item);
  }
  const popularity = new Map([...usersOf].map(([i, s]) => [i, s.size]));
  const co = new Map<string, number>();
  for (const set of itemsOf.values()) for (const a of set) for (const b of set) if (a !== b) co.set(`${a}|${b}`, (co.get(`${a}|${b}`) ?? 0) + 1);
  const trans = new Map<string, number>();
  const byUser = new Map<string, typeof kept>();
  for (const r of kept) {
    if (!byUser.has(r.user)) byUser.set(r.user, []);
    byUser.get(r.user)!.push(r);
  }
  for (const seq of byUser.values()) {
    seq.sort((x, y) => x.at - y.at || x.seq - y.seq);
    for (let t = 1; t < seq.length; t++)
      if (seq[t].item !== seq[t - 1].item) trans.set(`${seq[t - 1].item}|${seq[t].item}`, (trans.get(`${seq[t - 1].item}|${seq[t].item}`) ?? 0) + 1);
  }
  return { popularity, co, trans };
}

const rows = syntheticLog();
const dir = mkdtempSync(join(tmpdir(), 'atomem-sql-'));
const logPath = join(dir, 'orders.jsonl');
writeFileSync(logPath, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
writeFileSync(`${logPath}.gz`, gzipSync(readFileSync(logPath)));

/** Every named query's rows, normalised for comparison across engines. */
async function allRows(engine: SqlEngine): Promise<Record<string, string[]>> {
  const params: Record<QueryName, Record<string, number>> = {
    popularity: {},
    recentPopularity: { since: 1_700_000_000_000 + 3 * 86_400_000, until: 1_700_000_000_000 + 8 * 86_400_000 },
    trend: { bucketMs: 86_400_000 },
    cooccurrenceRows: {},
    cooccurrenceTopK: { k: 5, parts: 1, part: 0 },
    cooccurrenceLists: { k: 5, neighboursK: 4, parts: 2, part: 1 },
    transitionsTopK: { k: 3 },
  };
  const out: Record<string, string[]> = {};
  for (const sql of COOCCURRENCE_SETUP) await engine.query(sql);
  for (const name of Object.keys(QUERIES) as QueryName[]) {
    const rs = await runQuery(engine, name, params[name]);
    out[name] = rs
      .map((r) =>
        Object.keys(r)
          .sort()
          .map(
            (k) =>
              `${k}=${typeof r[k] === 'number' || typeof r[k] === 'bigint' || /^[0-9.e+-]+$/.test(String(r[k])) ? Number(r[k]).toPrecision(10) : String(r[k])}`,
          )
          .join(','),
      )
      .sort();
  }
  for (const sql of COOCCURRENCE_TEARDOWN) await engine.query(sql);
  return out;
}

let duck: SqlEngine;
let duckRows: Record<string, string[]>;

describe('counting stages on DuckDB', () => {
  beforeAll(async () => {
    duck = await openDuckDb({ threads: 1 });
    await loadOrdersDuckDb(duck, logPath);
    duckRows = await allRows(duck);
  });
  afterAll(async () => {
    await duck?.close();
  });

  it('loads the log (plain and gzip) with its action weights', async () => {
    const other = await openDuckDb({ threads: 1 });
    try {
      expect(await loadOrdersDuckDb(other, `${logPath}.gz`)).toBe(rows.length);
      expect(await allRows(other)).toEqual(duckRows);
    } finally {
      await other.close();
    }
    expect(Number((await duck.query('SELECT COUNT(*) AS n FROM shop_orders WHERE weight > 0'))[0].n)).toBe(
      rows.filter((r) => WEIGHT[r.action ?? 'click'] > 0).length,
    );
  });

  it('popularity, co-occurrence top-k and transitions equal a direct computation', async () => {
    const d = direct(rows);
    const r = await countingStages(duck, { knnK: 1000, markovK: 1000 });
    expect(Object.fromEntries(r.popularity)).toEqual(Object.fromEntries(d.popularity));
    const co = new Map<string, number>();
    for (const [a, l] of rankedListsToMap(r.knn))
      for (const x of l) {
        co.set(`${a}|${x.item}`, x.count);
        expect(x.value).toBeCloseTo(x.count / Math.sqrt(d.popularity.get(a)! * d.popularity.get(x.item)!), 12);
      }
    expect(Object.fromEntries(co)).toEqual(Object.fromEntries(d.co));
    const tr = new Map<string, number>();
    for (const [a, l] of rankedListsToMap(r.transitions)) for (const x of l) tr.set(`${a}|${x.item}`, x.count);
    expect(Object.fromEntries(tr)).toEqual(Object.fromEntries(d.trans));
    // top-k: best first, k per item
    const small = await countingStages(duck, { knnK: 2, markovK: 1 });
    const smallKnn = rankedListsToMap(small.knn);
    for (const l of smallKnn.values()) {
      expect(l.length).toBeLessThanOrEqual(2);
      if (l.length === 2) expect(l[0].value).toBeGreaterThanOrEqual(l[1].value);
    }
    for (const l of rankedListsToMap(small.transitions).values()) expect(l.length).toBe(1);
    // Both lists from the one self-join: kNN as without neighbourhoods, neighbourhoods by count.
    const both = await countingStages(duck, { knnK: 2, markovK: 1, neighboursK: 3 });
    expect(Object.fromEntries(rankedListsToMap(both.knn))).toEqual(Object.fromEntries(smallKnn));
    const bothNeighbours = rankedListsToMap(both.neighbours!);
    for (const [a, l] of bothNeighbours) {
      const counts = [...d.co]
        .filter(([k]) => k.startsWith(`${a}|`))
        .map(([, c]) => c)
        .sort((x, y) => y - x);
      expect(l.map((b) => d.co.get(`${a}|${b.item}`))).toEqual(counts.slice(0, 3));
      expect(l.map((b) => b.count)).toEqual(counts.slice(0, 3));
    }
    expect(bothNeighbours.size).toBe(smallKnn.size);
    // In passes over a third of the items each: the same lists; the self-join's rows as counted.
    const said: string[] = [];
    const passes = await countingStages(duck, { knnK: 2, markovK: 1, neighboursK: 3, parts: 3, onQuery: (name) => said.push(name) });
    expect(passes.passes).toBe(3);
    expect(said).toEqual(['popularity', 'cooccurrenceSetup', 'transitionsTopK']);
    expect(Object.fromEntries(rankedListsToMap(passes.knn))).toEqual(Object.fromEntries(smallKnn));
    expect(Object.fromEntries(rankedListsToMap(passes.neighbours!))).toEqual(Object.fromEntries(bothNeighbours));
    const perUser = new Map<string, Set<string>>();
    for (const r of rows) if (WEIGHT[r.action ?? 'click'] > 0) perUser.set(r.user, (perUser.get(r.user) ?? new Set()).add(r.item));
    const pairRows = [...perUser.values()].reduce((acc, set) => acc + set.size * (set.size - 1), 0);
    // countingStages dropped its tables; the row count reads them.
    expect((await duck.query("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'shop_%'")).map((t) => t.table_name)).toEqual([
      'shop_orders',
    ]);
    for (const sql of COOCCURRENCE_SETUP) await duck.query(sql);
    expect(Number((await runQuery(duck, 'cooccurrenceRows'))[0].pair_rows)).toBe(pairRows);
    for (const sql of COOCCURRENCE_TEARDOWN) await duck.query(sql);
    expect(pairRows).toBe([...d.co.values()].reduce((a, b) => a + b, 0));
  });

  it('sizes the passes by the engine memory', async () => {
    expect(cooccurrenceParts(557_277_854, 5.5 * 2 ** 30)).toBe(5);
    expect(cooccurrenceParts(1000, 2 ** 30)).toBe(1);
    expect(() => cooccurrenceParts(1, 0)).toThrow(RangeError);
    expect(parseSize('5.5 GiB')).toBe(5.5 * 2 ** 30);
    expect(parseSize('8GB')).toBe(8e9);
    expect(parseSize('lots')).toBeNaN();
    const small = await openDuckDb({ threads: 1, memoryLimit: '256MB' });
    // Spills go to a temp directory of its own (not ./.tmp), removed on close.
    const spill = String((await small.query("SELECT current_setting('temp_directory') AS t"))[0].t);
    expect(spill.startsWith(join(tmpdir(), 'atomem-duckdb-'))).toBe(true);
    expect(existsSync(spill)).toBe(true);
    onTestFinished(() => expect(existsSync(spill)).toBe(false));
    try {
      const bytes = await small.memoryBytes!();
      expect(bytes).toBeGreaterThan(200e6);
      expect(bytes).toBeLessThanOrEqual(256e6);
      await loadOrdersDuckDb(small, logPath);
      const r = await countingStages(small, { knnK: 2, markovK: 1, neighboursK: 3 });
      expect(r.passes).toBe(1);
      expect(r.seconds.cooccurrenceRows).toBeGreaterThanOrEqual(0);
    } finally {
      await small.close();
    }
  });

  it('atomem-shop --engine duckdb gives the lists the in-memory stages give', async () => {
    const itemsPath = join(dir, 'items.jsonl');
    writeFileSync(itemsPath, Array.from({ length: 30 }, (_, i) => JSON.stringify({ id: `i${i}` })).join('\n'));
    const train = async (extra: string[]) => {
      let err = '';
      const out = join(dir, `m${extra.length}.bin`);
      const code = await main(['--interactions', logPath, '--items', itemsPath, '--out', out, '--dim', '0', '--ease', 'local', '--no-progress', ...extra], {
        stdout: () => {},
        stderr: (s) => (err += s),
      });
      expect(err).toBe('');
      expect(code).toBe(0);
      return decodeShopModel(readFileSync(out));
    };
    const mem = await train([]);
    const sql = await train(['--engine', 'duckdb']);
    /** Per candidate (in) or source (out) the sorted kept weights: equal whatever the tie-breaks. */
    const kept = (l: { offsets: Uint32Array; targets: Uint32Array; weights: Float32Array }, by: 'source' | 'target') => {
      const m = new Map<number, number[]>();
      for (let r = 0; r + 1 < l.offsets.length; r++)
        for (let p = l.offsets[r]; p < l.offsets[r + 1]; p++) {
          const key = by === 'source' ? r : l.targets[p];
          if (!m.has(key)) m.set(key, []);
          m.get(key)!.push(Number(l.weights[p].toFixed(3)));
        }
      return Object.fromEntries([...m].map(([k, v]) => [k, v.sort()]));
    };
    expect(mem.lists.knn.targets.length).toBeGreaterThan(30);
    expect(kept(sql.lists.knn, 'target')).toEqual(kept(mem.lists.knn, 'target'));
    expect(kept(sql.lists.markov, 'source')).toEqual(kept(mem.lists.markov, 'source'));
    expect(kept(sql.lists.ease, 'target')).toEqual(kept(mem.lists.ease, 'target'));
    expect(Array.from(sql.popularity)).toEqual(Array.from(mem.popularity));
    // The engine returns the trainer's list sizes, not its caps: neighbourhoods of 3 here.
    const memSmall = await train(['--ease-neighbours', '3']);
    const sqlSmall = await train(['--ease-neighbours', '3', '--engine', 'duckdb', '--engine-memory', '256MB']);
    expect(kept(sqlSmall.lists.ease, 'target')).toEqual(kept(memSmall.lists.ease, 'target'));
    expect(kept(memSmall.lists.ease, 'target')).not.toEqual(kept(mem.lists.ease, 'target'));
  });

  it('asks the engine for the list sizes the trainer keeps at each catalog size', () => {
    expect(countedListSizes(30)).toEqual({ knn: 128, markov: 64, neighbours: 29 });
    expect(countedListSizes(100_000)).toEqual({ knn: 5, markov: 2, neighbours: 72 });
    expect(countedListSizes(1_000_000)).toEqual({ knn: 2, markov: 2, neighbours: 32 });
    expect(countedListSizes(1_000_000, { easeNeighbours: 50, k: { knn: 9 } })).toEqual({ knn: 9, markov: 2, neighbours: 50 });
  });

  it('refuses a bad --engine-memory, and --engine-memory without --engine', async () => {
    const run = async (extra: string[]) => {
      let err = '';
      const code = await main(['--interactions', logPath, '--items', logPath, '--out', join(dir, 'never.bin'), '--no-progress', ...extra], {
        stdout: () => {},
        stderr: (s) => (err += s),
      });
      return { code, err };
    };
    const bad = await run(['--engine', 'duckdb', '--engine-memory', 'lots']);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/--engine-memory must be a size such as 512MB or 8GB/);
    const alone = await run(['--engine-memory', '1GB']);
    expect(alone.code).not.toBe(0);
    expect(alone.err).toMatch(/--engine-memory needs --engine duckdb/);
    expect(existsSync(join(dir, 'never.bin'))).toBe(false);
  });

  it('refuses non-numeric parameters and unknown actions', async () => {
    expect(() => renderQuery('cooccurrenceTopK', { k: Number.NaN, parts: 1, part: 0 })).toThrow(/k must be a finite number/);
    expect(() => renderQuery('cooccurrenceTopK', { parts: 1, part: 0 })).toThrow(/k must be a finite number/);
    expect(() => renderQuery('cooccurrenceTopK', { k: 5 })).toThrow(/parts must be a finite number/);
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"user":"a","item":"b","at":1,"action":"teleport"}\n');
    const e = await openDuckDb({ threads: 1 });
    try {
      await expect(loadOrdersDuckDb(e, bad)).rejects.toThrow(/unknown action "teleport"/);
    } finally {
      await e.close();
    }
  });
});

// ── PostgreSQL ───────────────────────────────────────────────────────────────────────────

const found = ensurePostgres();
const skipReason = 'skip' in found ? found.skip : '';
if (skipReason) console.warn(`shop-sql.test: SKIPPING the PostgreSQL check: ${skipReason}`);

describe.skipIf(skipReason !== '')('the same SQL on PostgreSQL', () => {
  let cluster: PostgresCluster | undefined;
  let client: import('pg').Client | undefined;

  beforeAll(async () => {
    const c = await startPostgres();
    if ('skip' in c) throw new Error(`PostgreSQL is installed but a cluster could not start: ${c.skip}`);
    cluster = c;
    const { Client } = (await import('pg')).default;
    client = new Client({ connectionString: cluster.url });
    await client.connect();
  });

  afterAll(async () => {
    await client?.end().catch(() => {});
    await cluster?.stop();
  });

  it('gives the same rows as DuckDB for every named query', async () => {
    const pg: SqlEngine = {
      name: 'postgresql',
      query: async (sql) => (await client!.query(sql)).rows,
      close: async () => {},
    };
    await pg.query('CREATE TABLE raw_orders (user_id VARCHAR, item_id VARCHAR, at_ms BIGINT, seq BIGINT, action VARCHAR)');
    const values = rows.map((r, i) => `('${r.user}', '${r.item}', ${r.at}, ${i + 1}, ${r.action ? `'${r.action}'` : 'NULL'})`).join(',\n');
    await pg.query(`INSERT INTO raw_orders VALUES ${values}`);
    await pg.query(
      `CREATE TABLE shop_orders AS SELECT user_id, item_id, at_ms, seq, CAST(${weightExpression('action')} AS DOUBLE PRECISION) AS weight FROM raw_orders`,
    );
    const pgRows = await allRows(pg);
    for (const name of Object.keys(QUERIES)) expect(pgRows[name], name).toEqual(duckRows[name]);
    expect(pgRows.cooccurrenceTopK.length).toBeGreaterThan(20);
  });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));
