/**
 * The Prio3 aggregator's state (./prio3-service.ts) behind one interface, as the v2 state is
 * (./store.ts): embedded SQLite (`prio3.sqlite` in the data dir, one process per role) or
 * PostgreSQL (`--store postgres://…`), shared by N instances of a role behind a load balancer.
 *
 * What must hold across instances, and how each store makes it hold:
 * - **A token pays for one upload**: the upload's key is the token's nonce (a primary key).
 * - **No upload is stored into an epoch after its aggregation began**: the upload checks the
 *   epoch's row in the same transaction (PostgreSQL: `FOR SHARE`), the claim that starts the
 *   aggregation takes it `FOR UPDATE`, so it waits for uploads in flight and later ones see it
 *   closed; the claim then reads the uploads.
 * - **One instance aggregates an epoch**: the claim marks the epoch `closing` with a lease (the
 *   database's clock); another instance finds it claimed and waits for the release; a claim whose
 *   lease ran out (its instance died) can be taken again.
 * - **A release is stored once and never rewritten** (insert-if-absent).
 * - **The helper counts a report once and answers one collection per epoch**: the seen nonces are
 *   a primary key, and the epoch's running aggregate share is updated under `FOR UPDATE` (two
 *   helper instances never add to the same stale sum); collecting flips `collected` under the same
 *   lock.
 * - **Each role keeps one HPKE key**: the first instance's seed wins (insert-if-absent).
 *
 * Both stores classify their failures as the v2 stores do (./storage.ts, ./pg-store.ts).
 */
import pg from 'pg';
import { DEFAULT_SYNC, DataDir, WalSync, classifyStorageError, openDatabase, type StorageFailure, type SyncLevel } from './storage.js';
import type Database from 'better-sqlite3';
import { classifyPostgresError, redactUrl } from './pg-store.js';

/** SQLite `application_id` of `prio3.sqlite` ("ATP3"). */
export const PRIO3_APPLICATION_ID = 0x41545033;

/** What {@link Prio3Store.putUpload} decided. */
export type UploadResult = 'stored' | 'spent' | 'closed';

/** What {@link Prio3Store.claim} found. */
export type ClaimResult =
  /** This instance aggregates the epoch: its sealed uploads (JSON bodies). */
  | { claimed: true; uploads: string[] }
  /** Aggregated already: its release (undefined: too few reports). */
  | { claimed: false; done: true; release: string | undefined }
  /** Another instance aggregates it now. */
  | { claimed: false; done: false };

/** The helper's running aggregate share of an epoch (`share` undefined: the zero vector). */
export interface HelperAggregate {
  share: string | undefined;
  n: number;
}

/**
 * Helper: one batch of the leader's aggregation, named by `id` (a digest of the epoch and the
 * batch's report nonces). Its answer is stored in the transaction that adds the batch, so a
 * batch sent again (the leader was stopped before it read the answer, and resumes the epoch
 * from its start) gets the same answer and changes nothing: the leader's sum and count end
 * equal to the helper's.
 */
export interface AggregationJob {
  id: string;
  /** The answer to store and send, from which of the batch's reports were fresh. */
  answer: (fresh: boolean[]) => string;
}

/** {@link Prio3Store.accumulate}'s `merge`: the new aggregate from the old one and which reports are fresh. */
export type AggregateMerge = (prev: HelperAggregate, fresh: boolean[]) => HelperAggregate;

/** What {@link Prio3Store.accumulate} did: which reports were fresh, `collected`, or the stored answer of a batch sent again. */
export type AccumulateResult = boolean[] | 'collected' | { replayed: string };

/** What {@link Prio3Store.collect} decided. */
export type CollectResult =
  | { ok: true; answer: string; n: number }
  | { ok: false; error: 'not_found' | 'collected' | 'batch_mismatch' | 'batch_too_small'; n: number };

/** The Prio3 state store (see the module comment). */
export interface Prio3Store {
  readonly kind: 'sqlite' | 'postgres';
  /** What errors name: the file, or the database URL without its password. */
  readonly name: string;
  /** Create the tables when missing. */
  init(): Promise<void>;
  /** The role's HPKE seed: the stored one, else `fresh`, stored now (the first instance's wins). */
  hpkeSeed(role: 'leader' | 'helper', fresh: Buffer): Promise<Buffer>;
  /** Leader: whether the aggregation of `epoch` began (uploads are refused). */
  isClosed(epoch: number): Promise<boolean>;
  /** Leader: store a sealed upload, unless its token paid already or the epoch's aggregation began. */
  putUpload(tokenNonce: string, epoch: number, nonce: string, body: string): Promise<UploadResult>;
  /** Leader: epochs with stored uploads that end at or before `endBeforeMs`. */
  dueEpochs(epochMs: number, endBeforeMs: number): Promise<number[]>;
  /** Leader: claim the aggregation of `epoch` (uploads refused from then on) for `leaseMs`. */
  claim(epoch: number, leaseMs: number): Promise<ClaimResult>;
  /** Leader: the claimed aggregation ended: store `release` unless one is stored, delete the uploads; the stored release. */
  finish(epoch: number, release: string | undefined): Promise<string | undefined>;
  /** Leader: a stored release. */
  release(epoch: number): Promise<string | undefined>;
  /** Leader: the latest stored release. */
  latestRelease(): Promise<string | undefined>;
  /**
   * Helper: add a batch of prepared reports to the epoch's aggregate, in one transaction: each
   * nonce is marked seen (`fresh[i]` false: seen before, or earlier in the batch), and `merge`
   * (synchronous) returns the new aggregate from the old one and `fresh`. `collected`: the epoch
   * was collected, nothing changed.
   */
  accumulate(epoch: number, nonces: string[], merge: AggregateMerge, job?: AggregationJob): Promise<AccumulateResult>;
  /** Helper: the stored answer of an aggregation job (see {@link AggregationJob}), or undefined. */
  jobAnswer(epoch: number, id: string): Promise<string | undefined>;
  /**
   * Helper: the epoch's one collection (checks the leader's count and the minimum): `answer`
   * makes the answer from the aggregate share (the noise is drawn there), and it is stored with
   * the `collected` mark in one transaction. A collection asked again with the same count (the
   * leader stopped before it stored its release) gets that stored answer: the same draw, never
   * a second one.
   */
  collect(epoch: number, reports: number, minReports: number, answer: (share: string) => string): Promise<CollectResult>;
  /** A storage failure class for an error of this store, or undefined. */
  classify(err: unknown): StorageFailure | undefined;
  close(): Promise<void>;
}

const SQLITE_SCHEMA = `
  CREATE TABLE IF NOT EXISTS keys (name TEXT PRIMARY KEY, value BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS uploads (token_nonce TEXT PRIMARY KEY, epoch INTEGER NOT NULL, nonce TEXT NOT NULL UNIQUE, body TEXT NOT NULL);
  CREATE INDEX IF NOT EXISTS uploads_epoch ON uploads (epoch);
  CREATE TABLE IF NOT EXISTS closed (epoch INTEGER PRIMARY KEY);
  CREATE TABLE IF NOT EXISTS seen (nonce TEXT PRIMARY KEY, epoch INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS aggregates (epoch INTEGER PRIMARY KEY, share TEXT NOT NULL, n INTEGER NOT NULL, collected INTEGER NOT NULL DEFAULT 0);
  CREATE TABLE IF NOT EXISTS releases (epoch INTEGER PRIMARY KEY, body TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS jobs (epoch INTEGER NOT NULL, id TEXT NOT NULL, answer TEXT NOT NULL, PRIMARY KEY (epoch, id)) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS collections (epoch INTEGER PRIMARY KEY, answer TEXT NOT NULL);
`;

/**
 * {@link Prio3Store} in `prio3.sqlite` of the data dir, opened with the data dir's checks
 * (./storage.ts: marker, `quick_check`, an exclusive lock: one process per data dir). One
 * process aggregates, so a claim is the `closed` row and "done" is a stored release.
 */
export class SqlitePrio3Store implements Prio3Store {
  readonly kind = 'sqlite' as const;
  readonly name: string;
  /** Group commit (`synchronous: 'group'`): a stored upload is acknowledged once the WAL is fsynced. */
  private readonly walSync: WalSync | undefined;

  private constructor(
    private readonly db: Database.Connection,
    file: string,
    sync: SyncLevel,
  ) {
    this.name = file;
    this.walSync = sync === 'group' ? new WalSync(file) : undefined;
  }

  static open(dir: DataDir | string, o: { synchronous?: SyncLevel } = {}): SqlitePrio3Store {
    const d = typeof dir === 'string' ? DataDir.open(dir) : dir;
    const { db, file } = openDatabase(d, {
      name: 'prio3.sqlite',
      applicationId: PRIO3_APPLICATION_ID,
      tables: ['aggregates', 'closed', 'collections', 'jobs', 'keys', 'releases', 'seen', 'uploads'],
      schemaVersion: 1,
      schema: SQLITE_SCHEMA,
      synchronous: o.synchronous,
    });
    return new SqlitePrio3Store(db, file, o.synchronous ?? DEFAULT_SYNC);
  }

  async init(): Promise<void> {}

  async hpkeSeed(_role: 'leader' | 'helper', fresh: Buffer): Promise<Buffer> {
    this.db.prepare(`INSERT OR IGNORE INTO keys (name, value) VALUES ('hpke-seed', ?)`).run(fresh);
    return this.db.prepare<[], { value: Buffer }>(`SELECT value FROM keys WHERE name = 'hpke-seed'`).get()!.value;
  }

  async isClosed(epoch: number): Promise<boolean> {
    return this.db.prepare('SELECT 1 FROM closed WHERE epoch = ?').get(epoch) !== undefined;
  }

  async putUpload(tokenNonce: string, epoch: number, nonce: string, body: string): Promise<UploadResult> {
    const r = this.db.transaction((): UploadResult => {
      if (this.db.prepare('SELECT 1 FROM closed WHERE epoch = ?').get(epoch)) return 'closed';
      const r = this.db.prepare('INSERT OR IGNORE INTO uploads (token_nonce, epoch, nonce, body) VALUES (?, ?, ?, ?)').run(tokenNonce, epoch, nonce, body);
      return r.changes === 1 ? 'stored' : 'spent';
    })();
    if (r === 'stored') await this.walSync?.sync();
    return r;
  }

  async dueEpochs(epochMs: number, endBeforeMs: number): Promise<number[]> {
    return this.db
      .prepare<[number, number], { epoch: number }>('SELECT DISTINCT epoch FROM uploads WHERE (epoch + 1) * ? <= ? ORDER BY epoch')
      .all(epochMs, endBeforeMs)
      .map((r) => r.epoch);
  }

  async claim(epoch: number): Promise<ClaimResult> {
    return this.db.transaction((): ClaimResult => {
      const release = this.db.prepare<[number], { body: string }>('SELECT body FROM releases WHERE epoch = ?').get(epoch)?.body;
      if (release !== undefined) return { claimed: false, done: true, release };
      this.db.prepare('INSERT OR IGNORE INTO closed (epoch) VALUES (?)').run(epoch);
      return {
        claimed: true,
        uploads: this.db
          // why: the same batches every time (a resumed aggregation sends the helper the batches it answered already)
          .prepare<[number], { body: string }>('SELECT body FROM uploads WHERE epoch = ? ORDER BY token_nonce')
          .all(epoch)
          .map((r) => r.body),
      };
    })();
  }

  async finish(epoch: number, release: string | undefined): Promise<string | undefined> {
    return this.db.transaction(() => {
      if (release !== undefined) this.db.prepare('INSERT OR IGNORE INTO releases (epoch, body) VALUES (?, ?)').run(epoch, release);
      this.db.prepare('DELETE FROM uploads WHERE epoch = ?').run(epoch);
      return this.db.prepare<[number], { body: string }>('SELECT body FROM releases WHERE epoch = ?').get(epoch)?.body;
    })();
  }

  async release(epoch: number): Promise<string | undefined> {
    return this.db.prepare<[number], { body: string }>('SELECT body FROM releases WHERE epoch = ?').get(epoch)?.body;
  }

  async latestRelease(): Promise<string | undefined> {
    return this.db.prepare<[], { body: string }>('SELECT body FROM releases ORDER BY epoch DESC LIMIT 1').get()?.body;
  }

  async jobAnswer(epoch: number, id: string): Promise<string | undefined> {
    return this.db.prepare<[number, string], { answer: string }>('SELECT answer FROM jobs WHERE epoch = ? AND id = ?').get(epoch, id)?.answer;
  }

  async accumulate(epoch: number, nonces: string[], merge: AggregateMerge, job?: AggregationJob): Promise<AccumulateResult> {
    return this.db.transaction((): AccumulateResult => {
      if (job) {
        const had = this.db.prepare<[number, string], { answer: string }>('SELECT answer FROM jobs WHERE epoch = ? AND id = ?').get(epoch, job.id)?.answer;
        if (had !== undefined) return { replayed: had };
      }
      const row = this.db
        .prepare<[number], { share: string; n: number; collected: number }>('SELECT share, n, collected FROM aggregates WHERE epoch = ?')
        .get(epoch);
      if (row?.collected) return 'collected';
      const seen = this.db.prepare('INSERT OR IGNORE INTO seen (nonce, epoch) VALUES (?, ?)');
      const fresh = nonces.map((n) => seen.run(n, epoch).changes === 1);
      const next = merge({ share: row?.share, n: row?.n ?? 0 }, fresh);
      if (next.share !== undefined)
        this.db
          .prepare('INSERT INTO aggregates (epoch, share, n) VALUES (?, ?, ?) ON CONFLICT (epoch) DO UPDATE SET share = excluded.share, n = excluded.n')
          .run(epoch, next.share, next.n);
      if (job) this.db.prepare('INSERT INTO jobs (epoch, id, answer) VALUES (?, ?, ?)').run(epoch, job.id, job.answer(fresh));
      return fresh;
    })();
  }

  async collect(epoch: number, reports: number, minReports: number, answer: (share: string) => string): Promise<CollectResult> {
    return this.db.transaction((): CollectResult => {
      const row = this.db
        .prepare<[number], { share: string; n: number; collected: number }>('SELECT share, n, collected FROM aggregates WHERE epoch = ?')
        .get(epoch);
      const had = this.db.prepare<[number], { answer: string }>('SELECT answer FROM collections WHERE epoch = ?').get(epoch)?.answer;
      return check(row, reports, minReports, had, (share) => {
        const a = answer(share);
        this.db.prepare('UPDATE aggregates SET collected = 1 WHERE epoch = ?').run(epoch);
        this.db.prepare('INSERT INTO collections (epoch, answer) VALUES (?, ?)').run(epoch, a);
        return a;
      });
    })();
  }

  classify(err: unknown): StorageFailure | undefined {
    return classifyStorageError(err, this.name);
  }

  async close(): Promise<void> {
    this.walSync?.close();
    this.db.close();
  }
}

/** The collection's decision; `make` draws and stores a first answer. A collected epoch answers its stored answer to the same count. */
function check(
  row: { share: string | null; n: number | string; collected: number | boolean } | undefined,
  reports: number,
  minReports: number,
  had: string | undefined,
  make: (share: string) => string,
): CollectResult {
  if (!row) return { ok: false, error: 'not_found', n: 0 };
  const n = Number(row.n);
  if (row.collected) return had !== undefined && n === reports ? { ok: true, answer: had, n } : { ok: false, error: 'collected', n };
  if (n !== reports) return { ok: false, error: 'batch_mismatch', n };
  if (n < minReports || row.share === null) return { ok: false, error: 'batch_too_small', n };
  return { ok: true, answer: make(row.share), n };
}

const PG_SCHEMA = `
  CREATE TABLE IF NOT EXISTS atomem_prio3_keys (name text PRIMARY KEY, value bytea NOT NULL);
  CREATE TABLE IF NOT EXISTS atomem_prio3_epochs (
    epoch bigint PRIMARY KEY, state text NOT NULL CHECK (state IN ('open', 'closing', 'done')), lease_until timestamptz
  );
  CREATE TABLE IF NOT EXISTS atomem_prio3_uploads (token_nonce text PRIMARY KEY, epoch bigint NOT NULL, nonce text NOT NULL UNIQUE, body text NOT NULL);
  CREATE INDEX IF NOT EXISTS atomem_prio3_uploads_epoch ON atomem_prio3_uploads (epoch);
  CREATE TABLE IF NOT EXISTS atomem_prio3_releases (epoch bigint PRIMARY KEY, body text NOT NULL);
  CREATE TABLE IF NOT EXISTS atomem_prio3_seen (nonce text PRIMARY KEY, epoch bigint NOT NULL);
  CREATE TABLE IF NOT EXISTS atomem_prio3_aggregates (epoch bigint PRIMARY KEY, share text, n bigint NOT NULL, collected boolean NOT NULL DEFAULT false);
  CREATE TABLE IF NOT EXISTS atomem_prio3_jobs (epoch bigint NOT NULL, id text NOT NULL, answer text NOT NULL, PRIMARY KEY (epoch, id));
  CREATE TABLE IF NOT EXISTS atomem_prio3_collections (epoch bigint PRIMARY KEY, answer text NOT NULL);
`;

/**
 * {@link Prio3Store} in PostgreSQL (tables `atomem_prio3_*`, beside the v2 tables of
 * ./pg-store.ts). The leader's and the helper's tables are distinct and the HPKE seed is keyed
 * by role, so both roles may even share one database (in production they are two parties with
 * a database each).
 */
export class PostgresPrio3Store implements Prio3Store {
  readonly kind = 'postgres' as const;
  readonly name: string;
  private readonly pool: pg.Pool;

  constructor(url: string, options: { poolSize?: number } = {}) {
    this.name = redactUrl(url);
    this.pool = new pg.Pool({
      connectionString: url,
      max: options.poolSize ?? 5,
      connectionTimeoutMillis: 3000,
      idleTimeoutMillis: 30_000,
      application_name: 'atomem-index prio3',
    });
    // why: an idle client's connection error (the server restarted) must not crash the process
    this.pool.on('error', () => {});
  }

  async init(): Promise<void> {
    await this.tx(async (c) => {
      await c.query("SELECT pg_advisory_xact_lock(hashtext('atomem-index prio3 schema'))");
      await c.query(PG_SCHEMA);
    });
  }

  async hpkeSeed(role: 'leader' | 'helper', fresh: Buffer): Promise<Buffer> {
    const key = `hpke-seed-${role}`;
    await this.pool.query('INSERT INTO atomem_prio3_keys (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [key, fresh]);
    return (await this.pool.query<{ value: Buffer }>('SELECT value FROM atomem_prio3_keys WHERE name = $1', [key])).rows[0].value;
  }

  async isClosed(epoch: number): Promise<boolean> {
    const r = await this.pool.query<{ state: string }>('SELECT state FROM atomem_prio3_epochs WHERE epoch = $1', [epoch]);
    return r.rows.length > 0 && r.rows[0].state !== 'open';
  }

  async putUpload(tokenNonce: string, epoch: number, nonce: string, body: string): Promise<UploadResult> {
    return this.tx(async (c) => {
      // why: the epoch's row exists before it is locked FOR SHARE, so a claim's FOR UPDATE waits for this upload
      await c.query("INSERT INTO atomem_prio3_epochs (epoch, state) VALUES ($1, 'open') ON CONFLICT (epoch) DO NOTHING", [epoch]);
      const st = (await c.query<{ state: string }>('SELECT state FROM atomem_prio3_epochs WHERE epoch = $1 FOR SHARE', [epoch])).rows[0].state;
      if (st !== 'open') return 'closed';
      const r = await c.query('INSERT INTO atomem_prio3_uploads (token_nonce, epoch, nonce, body) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [
        tokenNonce,
        epoch,
        nonce,
        body,
      ]);
      return r.rowCount === 1 ? 'stored' : 'spent';
    });
  }

  async dueEpochs(epochMs: number, endBeforeMs: number): Promise<number[]> {
    const r = await this.pool.query<{ epoch: string }>(
      `SELECT DISTINCT u.epoch FROM atomem_prio3_uploads u LEFT JOIN atomem_prio3_epochs e ON e.epoch = u.epoch
       WHERE (u.epoch + 1) * $1::bigint <= $2::bigint AND (e.state IS DISTINCT FROM 'closing' OR e.lease_until < now()) ORDER BY u.epoch`,
      [epochMs, endBeforeMs],
    );
    return r.rows.map((x) => Number(x.epoch));
  }

  async claim(epoch: number, leaseMs: number): Promise<ClaimResult> {
    return this.tx(async (c): Promise<ClaimResult> => {
      await c.query("INSERT INTO atomem_prio3_epochs (epoch, state) VALUES ($1, 'open') ON CONFLICT (epoch) DO NOTHING", [epoch]);
      const row = (
        await c.query<{ state: string; live: boolean }>(
          'SELECT state, coalesce(lease_until > now(), false) AS live FROM atomem_prio3_epochs WHERE epoch = $1 FOR UPDATE',
          [epoch],
        )
      ).rows[0];
      if (row.state === 'done') {
        const release = (await c.query<{ body: string }>('SELECT body FROM atomem_prio3_releases WHERE epoch = $1', [epoch])).rows[0]?.body;
        return { claimed: false, done: true, release };
      }
      if (row.state === 'closing' && row.live) return { claimed: false, done: false };
      await c.query("UPDATE atomem_prio3_epochs SET state = 'closing', lease_until = now() + make_interval(secs => $2) WHERE epoch = $1", [
        epoch,
        leaseMs / 1000,
      ]);
      const uploads = (await c.query<{ body: string }>('SELECT body FROM atomem_prio3_uploads WHERE epoch = $1 ORDER BY token_nonce', [epoch])).rows.map(
        (r) => r.body,
      );
      return { claimed: true, uploads };
    });
  }

  async finish(epoch: number, release: string | undefined): Promise<string | undefined> {
    return this.tx(async (c) => {
      if (release !== undefined)
        await c.query('INSERT INTO atomem_prio3_releases (epoch, body) VALUES ($1, $2) ON CONFLICT (epoch) DO NOTHING', [epoch, release]);
      await c.query("UPDATE atomem_prio3_epochs SET state = 'done', lease_until = NULL WHERE epoch = $1", [epoch]);
      await c.query('DELETE FROM atomem_prio3_uploads WHERE epoch = $1', [epoch]);
      return (await c.query<{ body: string }>('SELECT body FROM atomem_prio3_releases WHERE epoch = $1', [epoch])).rows[0]?.body;
    });
  }

  async release(epoch: number): Promise<string | undefined> {
    return (await this.pool.query<{ body: string }>('SELECT body FROM atomem_prio3_releases WHERE epoch = $1', [epoch])).rows[0]?.body;
  }

  async latestRelease(): Promise<string | undefined> {
    return (await this.pool.query<{ body: string }>('SELECT body FROM atomem_prio3_releases ORDER BY epoch DESC LIMIT 1')).rows[0]?.body;
  }

  async jobAnswer(epoch: number, id: string): Promise<string | undefined> {
    return (await this.pool.query<{ answer: string }>('SELECT answer FROM atomem_prio3_jobs WHERE epoch = $1 AND id = $2', [epoch, id])).rows[0]?.answer;
  }

  async accumulate(epoch: number, nonces: string[], merge: AggregateMerge, job?: AggregationJob): Promise<AccumulateResult> {
    return this.tx(async (c): Promise<AccumulateResult> => {
      await c.query('INSERT INTO atomem_prio3_aggregates (epoch, share, n) VALUES ($1, NULL, 0) ON CONFLICT (epoch) DO NOTHING', [epoch]);
      // why: the epoch's row lock orders this job against others of the epoch (a job sent twice at once adds once)
      const row = (
        await c.query<{ share: string | null; n: string; collected: boolean }>(
          'SELECT share, n, collected FROM atomem_prio3_aggregates WHERE epoch = $1 FOR UPDATE',
          [epoch],
        )
      ).rows[0];
      if (job) {
        const had = (await c.query<{ answer: string }>('SELECT answer FROM atomem_prio3_jobs WHERE epoch = $1 AND id = $2', [epoch, job.id])).rows[0]?.answer;
        if (had !== undefined) return { replayed: had };
      }
      if (row.collected) return 'collected' as const;
      const inserted = new Set(
        (
          await c.query<{ nonce: string }>(
            'INSERT INTO atomem_prio3_seen (nonce, epoch) SELECT DISTINCT x, $2::bigint FROM unnest($1::text[]) AS x ON CONFLICT DO NOTHING RETURNING nonce',
            [nonces, epoch],
          )
        ).rows.map((r) => r.nonce),
      );
      // a nonce twice in one batch counts once (its first occurrence)
      const fresh = nonces.map((n) => inserted.delete(n));
      const next = merge({ share: row.share ?? undefined, n: Number(row.n) }, fresh);
      await c.query('UPDATE atomem_prio3_aggregates SET share = $2, n = $3 WHERE epoch = $1', [epoch, next.share ?? null, next.n]);
      if (job) await c.query('INSERT INTO atomem_prio3_jobs (epoch, id, answer) VALUES ($1, $2, $3)', [epoch, job.id, job.answer(fresh)]);
      return fresh;
    });
  }

  async collect(epoch: number, reports: number, minReports: number, answer: (share: string) => string): Promise<CollectResult> {
    return this.tx(async (c) => {
      const row = (
        await c.query<{ share: string | null; n: string; collected: boolean }>(
          'SELECT share, n, collected FROM atomem_prio3_aggregates WHERE epoch = $1 FOR UPDATE',
          [epoch],
        )
      ).rows[0];
      const had = (await c.query<{ answer: string }>('SELECT answer FROM atomem_prio3_collections WHERE epoch = $1', [epoch])).rows[0]?.answer;
      let fresh: string | undefined;
      const checked = check(row, reports, minReports, had, (share) => (fresh = answer(share)));
      if (checked.ok && fresh !== undefined) {
        await c.query('UPDATE atomem_prio3_aggregates SET collected = true WHERE epoch = $1', [epoch]);
        await c.query('INSERT INTO atomem_prio3_collections (epoch, answer) VALUES ($1, $2)', [epoch, fresh]);
      }
      return checked;
    });
  }

  classify(err: unknown): StorageFailure | undefined {
    return classifyPostgresError(err, this.name);
  }

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

  async close(): Promise<void> {
    await this.pool.end();
  }
}
