/**
 * Durable storage of protocol v2: one SQLite file (`reports.sqlite` in the data dir).
 *
 * What it holds, and what it deliberately does not:
 * - `cells(epoch, cohort, bucket, n)`: the epoch's reports folded into a histogram as they
 *   arrive. There is **no row per report** — no id, no insertion sequence, no timestamp — so
 *   nothing in the file orders or groups one shopper's reports. Cells of an epoch are deleted
 *   once its release is built (retention: the epoch plus the grace period).
 * - `spent(nonce, epoch)`: the nonce of every redeemed Privacy Pass token of the open epochs, a
 *   tombstone that refuses a replayed report body. `WITHOUT ROWID` with the random nonce as
 *   key: stored in nonce order, not arrival order. Deleted with the epoch's cells.
 * - `releases(epoch, body)`: the published aggregates (public anyway), kept for `keepReleases`.
 * - `meta(key, value)`: the issuer key, and `closedThrough`: the highest epoch closed (released, or
 *   closed with too few reports). It only moves forward: a report or a token of an epoch at or
 *   below it is refused inside the spending transaction, whatever the wall clock says, and a
 *   release, once stored, is never replaced (insert-if-absent).
 *
 * `secure_delete = ON` overwrites deleted content with zeros, and the WAL is checkpointed
 * (TRUNCATE) after each release, so deleted cells and tombstones do not linger in free pages or
 * the WAL; between releases {@link ReportStore.checkpoint} (PASSIVE, run by the service every few
 * seconds after writes) moves acknowledged reports into the main file. Durability: WAL, exclusive
 * lock, and by default group commit (`--sync group`, ./storage.ts `SyncLevel`): a counted report is
 * acknowledged only once an fsync of the WAL after its commit completed ({@link ReportStore.durable}).
 * Opened through ./storage.ts: marker, foreign / empty / corrupted files refused at start.
 */
import type Database from 'better-sqlite3';
import { DEFAULT_SYNC, DataDir, WalSync, openDatabase, type DataDirInUseError, type StorageError, type SyncLevel } from './storage.js';

const SCHEMA_VERSION = 1;
const CLOSED_KEY = 'closedThrough';

/** One histogram cell of an epoch. */
export interface Cell {
  cohort: number;
  bucket: number;
  n: number;
}

/** What spending a token did: counted its report, or refused it (already spent / epoch closed). */
export type SpendResult = 'counted' | 'spent' | 'closed';

/** Step 1 of closing an epoch: see {@link ReportStore.beginClose}. */
export interface BeginClose {
  closedNow: boolean;
  /** The epoch's cells, to build its release from (undefined: a release is stored already). */
  cells: Cell[] | undefined;
  closedThrough: number;
}

/** What closing an epoch did. */
export interface CloseResult {
  /** True when this call closed it (false: it was closed already, nothing rebuilt). */
  closedNow: boolean;
  /** The epoch's release body as stored (undefined: none, too few reports). */
  release: string | undefined;
  /** The highest closed epoch after the call. */
  closedThrough: number;
}
/** File name of the v2 store in the data dir. */
export const REPORTS_FILE = 'reports.sqlite';
/** SQLite `application_id` of the v2 store: "ATMR". */
export const REPORTS_APPLICATION_ID = 0x41544d52;

/** Options of {@link ReportStore.open}. */
export interface ReportStoreOptions {
  /** When an acknowledged write is on disk (./storage.ts). Default `group`. */
  synchronous?: SyncLevel;
  /** Size limit of the file in bytes (writes beyond it fail as on a full disk). Default none. */
  maxBytes?: number;
  /** Integrity check at open. Default `quick`. */
  integrityCheck?: 'quick' | 'off';
}

/** The v2 SQLite store. All methods are synchronous; each mutation is one transaction. */
export class ReportStore {
  readonly file: string;
  private db!: Database.Connection;
  private stmt!: ReturnType<ReportStore['prepare']>;
  private spendTx!: (nonce: Buffer, epoch: number, cohort: number, bucket: number) => SpendResult;
  private beginTx!: (epoch: number) => BeginClose;
  private finishTx!: (epoch: number, body: string | undefined, keep: number) => string | undefined;

  /** Group commit of the WAL (with `synchronous: 'group'`). */
  private readonly walSync: WalSync | undefined;

  private constructor(
    file: string,
    db: Database.Connection,
    /** Opens the file again, with the checks of the first open ({@link reopen}). */
    private readonly openAgain: () => Database.Connection,
    /** When an acknowledged write is on disk. */
    readonly sync: SyncLevel,
  ) {
    this.file = file;
    this.walSync = sync === 'group' ? new WalSync(file) : undefined;
    this.attach(db);
    // a data dir of an older version: its releases close their epochs
    if (this.stmt.getMeta.get(CLOSED_KEY) === undefined) {
      const latest = this.stmt.latest.get()?.epoch;
      if (latest !== undefined && latest !== null) this.stmt.setMeta.run(CLOSED_KEY, String(latest));
    }
  }

  /** The statements of a connection. */
  private prepare(db: Database.Connection) {
    const q = <P extends unknown[], R = unknown>(sql: string) => db.prepare<P, R>(sql);
    return {
      spend: q<[Buffer, number]>('INSERT OR IGNORE INTO spent (nonce, epoch) VALUES (?, ?)'),
      bump: q<[number, number, number]>(
        'INSERT INTO cells (epoch, cohort, bucket, n) VALUES (?, ?, ?, 1) ON CONFLICT (epoch, cohort, bucket) DO UPDATE SET n = n + 1',
      ),
      cells: q<[number], { cohort: number; bucket: number; n: number }>('SELECT cohort, bucket, n FROM cells WHERE epoch = ?'),
      reports: q<[number], { n: number | null }>('SELECT SUM(n) AS n FROM cells WHERE epoch = ?'),
      openEpochs: q<[], { epoch: number }>('SELECT DISTINCT epoch FROM cells UNION SELECT DISTINCT epoch FROM spent ORDER BY epoch'),
      dropCells: q<[number]>('DELETE FROM cells WHERE epoch <= ?'),
      dropSpent: q<[number]>('DELETE FROM spent WHERE epoch <= ?'),
      // why: a release is immutable once stored (devices cache it forever): never replaced
      putRelease: q<[number, string]>('INSERT OR IGNORE INTO releases (epoch, body) VALUES (?, ?)'),
      pruneReleases: q<[number]>('DELETE FROM releases WHERE epoch NOT IN (SELECT epoch FROM releases ORDER BY epoch DESC LIMIT ?)'),
      release: q<[number], { body: string }>('SELECT body FROM releases WHERE epoch = ?'),
      latest: q<[], { epoch: number }>('SELECT MAX(epoch) AS epoch FROM releases'),
      getMeta: q<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
      setMeta: q<[string, string]>('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
    };
  }

  /** Use `db` from now on: its statements and transactions. */
  private attach(db: Database.Connection): void {
    this.db = db;
    this.stmt = this.prepare(db);
    this.closed = null;
    this.latest = null;
    const closedThrough = (): number => {
      const v = this.stmt.getMeta.get(CLOSED_KEY)?.value;
      return v === undefined ? -1 : Number(v);
    };
    this.spendTx = db.transaction((nonce: Buffer, epoch: number, cohort: number, bucket: number): SpendResult => {
      if (epoch <= closedThrough()) return 'closed';
      if (this.stmt.spend.run(nonce, epoch).changes === 0) return 'spent';
      this.stmt.bump.run(epoch, cohort, bucket);
      return 'counted';
    });
    this.beginTx = db.transaction((epoch: number) => {
      const before = closedThrough();
      if (epoch > before) this.stmt.setMeta.run(CLOSED_KEY, String(epoch));
      // why: built once; a closed epoch whose cells remain (a stop between the two steps) is built now
      const cells = this.stmt.release.get(epoch) === undefined ? this.stmt.cells.all(epoch) : undefined;
      return { closedNow: epoch > before, cells, closedThrough: Math.max(before, epoch) };
    });
    this.finishTx = db.transaction((epoch: number, body: string | undefined, keep: number) => {
      if (body !== undefined) this.stmt.putRelease.run(epoch, body);
      this.stmt.dropCells.run(epoch);
      this.stmt.dropSpent.run(epoch);
      this.stmt.pruneReleases.run(keep);
      return this.stmt.release.get(epoch)?.body;
    });
  }

  /**
   * Close the connection and open the file afresh, with the checks of the first open (marker,
   * `quick_check`, the exclusive lock). After an I/O error that left the connection's files dead
   * (a file system shut down and mounted again) this is how writes resume without a restart.
   * Throws what the open throws (the file system is not back yet); the store stays closed then
   * and the next call tries again.
   */
  reopen(): void {
    try {
      if (this.db.open) this.db.close();
    } catch {
      // its file system is gone; nothing to flush
    }
    // why: the group commit's open WAL would keep a dead file system's mount busy too
    this.walSync?.reset();
    this.attach(this.openAgain());
  }

  /**
   * Resolves once every commit made before the call is on disk: with `group`, after an fsync of
   * the WAL shared with the other writes waiting (./storage.ts `WalSync`); with `full` at once
   * (each commit was fsynced); with `normal` at once, without that promise (a power cut may
   * lose it). Rejects with an SQLite-like error code (`SQLITE_IOERR_FSYNC`, `SQLITE_FULL`).
   */
  durable(): Promise<void> {
    return this.walSync ? this.walSync.sync() : Promise.resolve();
  }

  /** WAL fsyncs done for {@link durable} (0 unless `group`). */
  get syncRounds(): number {
    return this.walSync?.rounds ?? 0;
  }

  /**
   * Open (creating if needed) `reports.sqlite` in the data dir, with the checks of
   * ./storage.ts (marker, foreign or empty file, `quick_check`, writability): throws
   * {@link StorageError} naming the file and the fix, or {@link DataDirInUseError} when another
   * process holds it.
   */
  static open(dataDir: string | DataDir, options: ReportStoreOptions = {}): ReportStore {
    const dir = typeof dataDir === 'string' ? DataDir.open(dataDir) : dataDir;
    const open = () =>
      openDatabase(dir, {
        name: REPORTS_FILE,
        applicationId: REPORTS_APPLICATION_ID,
        tables: ['cells', 'meta', 'releases', 'spent'],
        schemaVersion: SCHEMA_VERSION,
        synchronous: options.synchronous,
        // why: deleted cells and tombstones are overwritten, not left in free pages
        secureDelete: true,
        maxBytes: options.maxBytes,
        integrityCheck: options.integrityCheck,
        schema: `
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS cells (
          epoch INTEGER NOT NULL, cohort INTEGER NOT NULL, bucket INTEGER NOT NULL, n INTEGER NOT NULL,
          PRIMARY KEY (epoch, cohort, bucket)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS spent (nonce BLOB PRIMARY KEY, epoch INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS releases (epoch INTEGER PRIMARY KEY, body TEXT NOT NULL);
      `,
      });
    const { db, file } = open();
    return new ReportStore(file, db, () => open().db, options.synchronous ?? DEFAULT_SYNC);
  }

  /**
   * One transaction: spend the token (its nonce) and count the report. `spent` (nothing
   * written) when the token was already spent, `closed` when its epoch is closed.
   */
  spend(nonceHex: string, epoch: number, cohort: number, bucket: number): SpendResult {
    return this.spendTx(Buffer.from(nonceHex, 'hex'), epoch, cohort, bucket);
  }

  /** Highest closed epoch (-1: none). Only moves forward. Read from the file once per close. */
  closedThrough(): number {
    if (this.closed === null) {
      const v = this.stmt.getMeta.get(CLOSED_KEY)?.value;
      this.closed = v === undefined ? -1 : Number(v);
    }
    return this.closed;
  }

  /** Cache of {@link closedThrough}; `null` = read it again. */
  private closed: number | null = null;

  /**
   * Step 1 of closing `epoch` (one transaction): raise the closed-epoch floor to it (from now on
   * its tokens are refused), and return its cells unless its release is stored already.
   */
  beginClose(epoch: number): BeginClose {
    this.closed = null;
    const r = this.beginTx(epoch);
    this.closed = null;
    return r;
  }

  /**
   * Step 2 (one transaction): store the release body if the epoch has none (releases are
   * immutable), delete the cells and tombstones of every epoch ≤ `epoch`, keep the last `keep`
   * releases; then checkpoint the WAL (TRUNCATE) so the deleted pages leave it too. Returns the
   * epoch's release as stored. A stop between the steps leaves the epoch closed with its cells:
   * the next {@link beginClose} returns them and the release is built then.
   */
  finishClose(epoch: number, body: string | undefined, keep = 30): string | undefined {
    const r = this.finishTx(epoch, body, keep);
    this.latest = null;
    this.db.pragma('wal_checkpoint(TRUNCATE)');
    return r;
  }

  /** Both steps, with a synchronous `build` (a seeding script, the tests). */
  closeEpoch(epoch: number, build: (cells: Cell[]) => string | undefined, keep = 30): CloseResult {
    const b = this.beginClose(epoch);
    const release = this.finishClose(epoch, b.cells ? build(b.cells) : undefined, keep);
    return { closedNow: b.closedNow, release, closedThrough: b.closedThrough };
  }

  /** Move the WAL's committed pages into the main file without blocking writers (PASSIVE). */
  checkpoint(): void {
    this.db.pragma('wal_checkpoint(PASSIVE)');
  }

  /** A small write (the recovery probe: does the file take writes again?). */
  probe(): void {
    this.stmt.setMeta.run('probe', '1');
  }

  /** The histogram of an epoch's reports. */
  cells(epoch: number): { cohort: number; bucket: number; n: number }[] {
    return this.stmt.cells.all(epoch);
  }

  /** Reports counted in an epoch. */
  reportCount(epoch: number): number {
    return this.stmt.reports.get(epoch)?.n ?? 0;
  }

  /** Epochs with cells or tombstones still stored, ascending. */
  openEpochs(): number[] {
    return this.stmt.openEpochs.all().map((r) => r.epoch);
  }

  /**
   * Close `epoch` with a release built elsewhere (a seeding script): {@link closeEpoch} with a
   * fixed body. A release already stored for it is kept (releases are immutable).
   */
  publish(epoch: number, body: string | undefined, keep = 30): CloseResult {
    return this.closeEpoch(epoch, () => body, keep);
  }

  /** The stored release body of an epoch. */
  release(epoch: number): string | undefined {
    return this.stmt.release.get(epoch)?.body;
  }

  /** Latest released epoch (read from the file once per publish, so health can ask it on every request). */
  latestRelease(): number | undefined {
    if (this.latest === null) this.latest = { epoch: this.stmt.latest.get()?.epoch ?? undefined };
    return this.latest.epoch;
  }

  /** Cache of {@link latestRelease}; `null` = read it again. */
  private latest: { epoch: number | undefined } | null = null;

  getMeta(key: string): string | undefined {
    return this.stmt.getMeta.get(key)?.value;
  }

  setMeta(key: string, value: string): void {
    this.stmt.setMeta.run(key, value);
  }

  close(): void {
    this.walSync?.close();
    if (this.db.open) this.db.close();
  }
}
