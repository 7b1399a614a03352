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
 * - `meta(key, value)`: the issuer key.
 *
 * `secure_delete = ON` overwrites deleted content with zeros, and the WAL is checkpointed
 * (TRUNCATE) after each release, so deleted cells and tombstones do not linger in free pages or
 * the WAL. Durability: WAL, `synchronous = NORMAL` by default, exclusive lock.
 * Opened through ./storage.ts: marker, foreign / empty / corrupted files refused at start.
 */
import type Database from 'better-sqlite3';
import { DataDir, openDatabase, type DataDirInUseError, type StorageError } from './storage.js';

const SCHEMA_VERSION = 1;
/** File name of the v2 store in the data dir. */
export const REPORTS_FILE = 'reports.sqlite';
/** SQLite `application_id` of the v2 store: "ATMR". */
export const REPORTS_APPLICATION_ID = 0x41544d52;

/** Options of {@link ReportStore.open}. */
export interface ReportStoreOptions {
  synchronous?: 'normal' | 'full';
  /** Size limit of the file in bytes (writes beyond it fail as on a full disk). Default none. */
  maxBytes?: number;
  /** Integrity check at open. Default `quick`. */
  integrityCheck?: 'quick' | 'off';
}

/** The v2 SQLite store. All methods are synchronous; each mutation is one transaction. */
export class ReportStore {
  readonly file: string;
  private readonly db: Database.Connection;
  private readonly stmt;
  private readonly spendTx: (nonce: Buffer, epoch: number, cohort: number, bucket: number) => boolean;
  private readonly publishTx: (epoch: number, body: string | undefined, keep: number) => void;

  private constructor(file: string, db: Database.Connection) {
    this.file = file;
    this.db = db;
    const q = <P extends unknown[], R = unknown>(sql: string) => db.prepare<P, R>(sql);
    this.stmt = {
      spend: q<[Buffer, number]>('INSERT OR IGNORE INTO spent (nonce, epoch) VALUES (?, ?)'),
      bump: q<[number, number, number]>('INSERT INTO cells (epoch, cohort, bucket, n) VALUES (?, ?, ?, 1) ON CONFLICT (epoch, cohort, bucket) DO UPDATE SET n = n + 1'),
      cells: q<[number], { cohort: number; bucket: number; n: number }>('SELECT cohort, bucket, n FROM cells WHERE epoch = ?'),
      reports: q<[number], { n: number | null }>('SELECT SUM(n) AS n FROM cells WHERE epoch = ?'),
      openEpochs: q<[], { epoch: number }>('SELECT DISTINCT epoch FROM cells UNION SELECT DISTINCT epoch FROM spent ORDER BY epoch'),
      dropCells: q<[number]>('DELETE FROM cells WHERE epoch <= ?'),
      dropSpent: q<[number]>('DELETE FROM spent WHERE epoch <= ?'),
      putRelease: q<[number, string]>('INSERT OR REPLACE INTO releases (epoch, body) VALUES (?, ?)'),
      pruneReleases: q<[number]>('DELETE FROM releases WHERE epoch NOT IN (SELECT epoch FROM releases ORDER BY epoch DESC LIMIT ?)'),
      release: q<[number], { body: string }>('SELECT body FROM releases WHERE epoch = ?'),
      latest: q<[], { epoch: number }>('SELECT MAX(epoch) AS epoch FROM releases'),
      getMeta: q<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
      setMeta: q<[string, string]>('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
    };
    this.spendTx = db.transaction((nonce: Buffer, epoch: number, cohort: number, bucket: number) => {
      if (this.stmt.spend.run(nonce, epoch).changes === 0) return false;
      this.stmt.bump.run(epoch, cohort, bucket);
      return true;
    });
    this.publishTx = db.transaction((epoch: number, body: string | undefined, keep: number) => {
      if (body !== undefined) this.stmt.putRelease.run(epoch, body);
      this.stmt.dropCells.run(epoch);
      this.stmt.dropSpent.run(epoch);
      this.stmt.pruneReleases.run(keep);
    });
  }

  /**
   * Open (creating if needed) `reports.sqlite` in the data dir, with the checks of
   * ./storage.ts (marker, foreign or empty file, `quick_check`, writability): throws
   * {@link StorageError} naming the file and the fix, or {@link DataDirInUseError} when another
   * process holds it.
   */
  static open(dataDir: string | DataDir, options: ReportStoreOptions = {}): ReportStore {
    const dir = typeof dataDir === 'string' ? DataDir.open(dataDir) : dataDir;
    const { db, file } = openDatabase(dir, {
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
    return new ReportStore(file, db);
  }

  /**
   * One transaction: spend the token (its nonce) and count the report. False (nothing
   * written) when the token was already spent.
   */
  spend(nonceHex: string, epoch: number, cohort: number, bucket: number): boolean {
    return this.spendTx(Buffer.from(nonceHex, 'hex'), epoch, cohort, bucket);
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
   * One transaction: store the release of `epoch` (or none, when too few reports), delete the
   * cells and tombstones of every epoch ≤ `epoch`, keep only the last `keep` releases; then
   * checkpoint the WAL so the deleted pages leave it too.
   */
  publish(epoch: number, body: string | undefined, keep = 30): void {
    this.publishTx(epoch, body, keep);
    this.latest = null; // re-read once: whoever published (the service's epoch job or a seeding script)
    this.db.pragma('wal_checkpoint(TRUNCATE)');
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
    if (this.db.open) this.db.close();
  }
}
