/**
 * The v2 state in PostgreSQL (`--store postgres://…`), shared by N service instances behind
 * any load balancer (see ./store.ts for the interface). Tables (created at the first start,
 * under an advisory lock so instances starting together do not race):
 *
 * - `atomem_spent(nonce PRIMARY KEY, epoch)`: a token spends once across instances because the
 *   insert that spends it is `ON CONFLICT DO NOTHING` on that key and only a row inserted counts.
 * - `atomem_cells(epoch, cohort, bucket, n)`: the histograms (no row per report, as in SQLite).
 * - `atomem_state(closed_through)`: one row, the closed-epoch floor. Spending reads it `FOR SHARE`
 *   in the same statement and refuses an epoch at or below it; closing an epoch takes it
 *   `FOR UPDATE`, so a close waits for spends in flight and spends after it see the new floor —
 *   no report is counted into an epoch after its release was built, whatever any clock says.
 * - `atomem_releases(epoch PRIMARY KEY, body)`: insert-if-absent; every instance serves the
 *   stored bytes. Each instance keeps the releases it read or stored in memory (./store.ts,
 *   `ReleaseCache`): a published epoch's release is answered without a query, also while the
 *   database is down; `latest` then answers the latest epoch this instance saw.
 * - `atomem_meta(key, value)`: the issuer key (the first instance's, insert-if-absent).
 *
 * Failures are classified like SQLite's (./storage.ts): a full disk (53100) answers 507, a
 * read-only server (25006), a lost connection or I/O error 503 with Retry-After; health names
 * the database (its URL without the password).
 */
import pg from 'pg';
import type { StorageFailure } from './storage.js';
import { ReleaseCache, type Cell, type CloseResult, type IndexStore, type SpendResult } from './store.js';

/** The URL as health and logs show it: without user password. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** Whether `url` is a PostgreSQL connection URL this store accepts. */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//.test(url);
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS atomem_meta (key text PRIMARY KEY, value text NOT NULL);
  CREATE TABLE IF NOT EXISTS atomem_state (id int PRIMARY KEY CHECK (id = 1), closed_through bigint NOT NULL);
  INSERT INTO atomem_state (id, closed_through) VALUES (1, -1) ON CONFLICT DO NOTHING;
  CREATE TABLE IF NOT EXISTS atomem_cells (
    epoch bigint NOT NULL, cohort int NOT NULL, bucket int NOT NULL, n bigint NOT NULL,
    PRIMARY KEY (epoch, cohort, bucket)
  );
  CREATE TABLE IF NOT EXISTS atomem_spent (nonce bytea PRIMARY KEY, epoch bigint NOT NULL);
  CREATE INDEX IF NOT EXISTS atomem_spent_epoch ON atomem_spent (epoch);
  CREATE TABLE IF NOT EXISTS atomem_releases (epoch bigint PRIMARY KEY, body text NOT NULL);
`;

/** One statement: the floor read FOR SHARE, the nonce inserted unless spent, its cell bumped. */
const SPEND = `
  WITH st AS (SELECT closed_through FROM atomem_state WHERE id = 1 FOR SHARE),
  ins AS (
    INSERT INTO atomem_spent (nonce, epoch) SELECT $1, $2 FROM st WHERE st.closed_through < $2
    ON CONFLICT (nonce) DO NOTHING RETURNING epoch
  ),
  bump AS (
    INSERT INTO atomem_cells (epoch, cohort, bucket, n) SELECT epoch, $3, $4, 1 FROM ins
    ON CONFLICT (epoch, cohort, bucket) DO UPDATE SET n = atomem_cells.n + 1 RETURNING 1
  )
  SELECT (SELECT closed_through FROM st) AS closed, (SELECT count(*) FROM bump) AS counted`;

/** {@link IndexStore} over PostgreSQL (the `pg` client's connection pool). */
export class PostgresIndexStore implements IndexStore {
  readonly kind = 'postgres' as const;
  readonly name: string;
  /** Published releases read or stored (immutable: see {@link ReleaseCache}). */
  readonly releases = new ReleaseCache();
  private readonly pool: pg.Pool;

  constructor(url: string, options: { poolSize?: number } = {}) {
    if (!isPostgresUrl(url)) throw new RangeError(`the store must be a postgres:// URL, got ${redactUrl(url)}`);
    this.name = redactUrl(url);
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 10,
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'atomem-index',
    });
    // why: an idle client's connection error (the server restarted) must not crash the process; the next query reports it
    this.pool.on('error', () => {});
  }

  /** Create the tables if missing (once across instances: an advisory lock). */
  async init(): Promise<void> {
    const c = await this.pool.connect();
    try {
      await c.query('BEGIN');
      await c.query("SELECT pg_advisory_xact_lock(hashtext('atomem-index schema'))");
      await c.query(SCHEMA);
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      c.release();
    }
  }

  async getMeta(key: string): Promise<string | undefined> {
    const r = await this.pool.query<{ value: string }>('SELECT value FROM atomem_meta WHERE key = $1', [key]);
    return r.rows[0]?.value;
  }

  async putMetaIfAbsent(key: string, value: string): Promise<string> {
    await this.pool.query('INSERT INTO atomem_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [key, value]);
    return (await this.getMeta(key))!;
  }

  async spend(nonceHex: string, epoch: number, cohort: number, bucket: number): Promise<SpendResult> {
    const r = await this.pool.query<{ closed: string; counted: string }>(SPEND, [Buffer.from(nonceHex, 'hex'), epoch, cohort, bucket]);
    const row = r.rows[0];
    if (Number(row.closed) >= epoch) return 'closed';
    return Number(row.counted) === 1 ? 'counted' : 'spent';
  }

  async openEpochs(): Promise<number[]> {
    const r = await this.pool.query<{ epoch: string }>('SELECT DISTINCT epoch FROM atomem_cells UNION SELECT DISTINCT epoch FROM atomem_spent ORDER BY epoch');
    return r.rows.map((x) => Number(x.epoch));
  }

  async closedThrough(): Promise<number> {
    const r = await this.pool.query<{ c: string }>('SELECT closed_through AS c FROM atomem_state WHERE id = 1');
    return r.rows.length ? Number(r.rows[0].c) : -1;
  }

  async closeEpoch(epoch: number, build: (cells: Cell[]) => Promise<string | undefined>, keep: number): Promise<CloseResult> {
    // Step 1: raise the floor; it waits for spends in flight (they hold the row FOR SHARE), and
    // spends after its commit see the new floor. The cells are read unless a release is stored.
    const begun = await this.tx(async (c) => {
      const before = Number((await c.query<{ c: string }>('SELECT closed_through AS c FROM atomem_state WHERE id = 1 FOR UPDATE')).rows[0].c);
      if (epoch > before) await c.query('UPDATE atomem_state SET closed_through = $1 WHERE id = 1', [epoch]);
      const stored = (await c.query('SELECT 1 FROM atomem_releases WHERE epoch = $1', [epoch])).rows.length > 0;
      const cells = stored
        ? undefined
        : (await c.query<{ cohort: number; bucket: number; n: string }>('SELECT cohort, bucket, n FROM atomem_cells WHERE epoch = $1', [epoch])).rows.map(
            (r) => ({ cohort: r.cohort, bucket: r.bucket, n: Number(r.n) }),
          );
      return { closedNow: epoch > before, cells, closedThrough: Math.max(before, epoch) };
    });
    // the build holds no lock (instances closing the same epoch build the same bytes from the same cells)
    const body = begun.cells ? await build(begun.cells) : undefined;
    // Step 2: insert-if-absent, delete the epoch's cells and tombstones, keep the last `keep` releases.
    const release = await this.tx(async (c) => {
      if (body !== undefined) await c.query('INSERT INTO atomem_releases (epoch, body) VALUES ($1, $2) ON CONFLICT (epoch) DO NOTHING', [epoch, body]);
      await c.query('DELETE FROM atomem_cells WHERE epoch <= $1', [epoch]);
      await c.query('DELETE FROM atomem_spent WHERE epoch <= $1', [epoch]);
      await c.query('DELETE FROM atomem_releases WHERE epoch NOT IN (SELECT epoch FROM atomem_releases ORDER BY epoch DESC LIMIT $1)', [keep]);
      return (await c.query<{ body: string }>('SELECT body FROM atomem_releases WHERE epoch = $1', [epoch])).rows[0]?.body;
    });
    this.releases.prune(epoch, keep);
    if (release !== undefined) this.releases.put(epoch, release);
    return { closedNow: begun.closedNow, release, closedThrough: begun.closedThrough };
  }

  /** `fn` in one transaction on one pooled connection. */
  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.pool.connect();
    try {
      await c.query('BEGIN');
      const r = await fn(c);
      await c.query('COMMIT');
      return r;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      c.release();
    }
  }

  /** The release of `epoch`: from memory once read (releases are immutable), else one query. */
  async release(epoch: number): Promise<string | undefined> {
    return this.releases.body(
      epoch,
      async () => (await this.pool.query<{ body: string }>('SELECT body FROM atomem_releases WHERE epoch = $1', [epoch])).rows[0]?.body,
    );
  }

  /**
   * The latest released epoch (one query); while the database cannot be reached, the latest this
   * instance saw. A latest release not in memory yet is read into it (one query per new epoch;
   * the service's upkeep asks every few seconds), so every instance can serve it during an outage.
   */
  async latestRelease(): Promise<number | undefined> {
    const latest = await this.releases.latestOr(
      async () => {
        const r = await this.pool.query<{ e: string | null }>('SELECT MAX(epoch) AS e FROM atomem_releases');
        const e = r.rows[0]?.e;
        return e === null || e === undefined ? undefined : Number(e);
      },
      (err) => this.classify(err),
    );
    if (latest !== undefined && !this.releases.has(latest)) await this.release(latest).catch(() => undefined);
    return latest;
  }

  async maintain(): Promise<void> {
    // the server checkpoints and vacuums by itself
  }

  async probe(): Promise<void> {
    await this.pool.query("INSERT INTO atomem_meta (key, value) VALUES ('probe', '1') ON CONFLICT (key) DO UPDATE SET value = '1'");
  }

  classify(err: unknown): StorageFailure | undefined {
    return classifyPostgresError(err, this.name);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** A PostgreSQL error → its storage failure class (undefined: not a storage failure); `db` names the database. */
export function classifyPostgresError(err: unknown, db: string): StorageFailure | undefined {
  const code = (err as { code?: string } | undefined)?.code;
  const msg = (err as Error | undefined)?.message ?? String(err);
  if (code === '53100')
    return {
      state: 'full',
      status: 507,
      code: 'storage_full',
      retryAfterSeconds: 60,
      message: `${db}: the database server's disk is full (${msg}); nothing was written. Fix: free space on the database server; writes resume by themselves.`,
    };
  if (code === 'XX001' || code === 'XX002')
    return {
      state: 'corrupt',
      status: 503,
      code: 'storage_corrupt',
      retryAfterSeconds: 3600,
      message: `${db} reports corrupted data (${msg}); writes are refused until it is repaired. Fix: repair or restore the database, then restart the service.`,
    };
  if (code === '25006')
    return {
      state: 'readonly',
      status: 503,
      code: 'storage_unavailable',
      retryAfterSeconds: 30,
      message: `${db} is read-only (${msg}; a standby, or default_transaction_read_only). Fix: point --store at the primary; writes resume by themselves.`,
    };
  const lost = typeof code === 'string' && (/^(08|53|57P|58)/.test(code) || /^E[A-Z]+$/.test(code));
  if (lost || /Connection terminated|connection timeout|timeout exceeded when trying to connect/i.test(msg)) {
    return {
      state: 'io',
      status: 503,
      code: 'storage_unavailable',
      retryAfterSeconds: 5,
      message: `${db}: the database cannot be reached or failed (${code ?? 'error'}: ${msg}). Fix: check the PostgreSQL server and the network to it; the service retries by itself.`,
    };
  }
  return undefined;
}
