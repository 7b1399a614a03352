/**
 * The state of protocol v2 behind one interface: the spent-token set, the per-epoch histograms,
 * the releases, the closed-epoch floor and the issuer key. Two implementations:
 *
 * - {@link SqliteIndexStore} (default): `reports.sqlite` in the data dir (./report-store.ts),
 *   one service process per data dir.
 * - `PostgresIndexStore` (./pg-store.ts, `--store postgres://…`): N service instances share one
 *   database and agree: a token spends once (a primary key, not a cache), an epoch closes and
 *   releases once (insert-if-absent; the others read it), every instance serves the same bytes.
 *
 * Every operation that decides something (spend, close) is one transaction in the store, so the
 * decision holds across instances and across a stepped wall clock.
 */
import { classifyStorageError, type StorageFailure } from './storage.js';
import type { Cell, CloseResult, ReportStore, SpendResult } from './report-store.js';

export type { Cell, CloseResult, SpendResult };

/** The v2 state store (see the module comment). */
export interface IndexStore {
  /** `sqlite` or `postgres`. */
  readonly kind: 'sqlite' | 'postgres';
  /** What health names when it fails: the file, or the database URL without its password. */
  readonly name: string;
  /** A meta value (the issuer key), or undefined. */
  getMeta(key: string): Promise<string | undefined>;
  /** Store `value` under `key` unless one is there; returns the value stored (the first writer's). */
  putMetaIfAbsent(key: string, value: string): Promise<string>;
  /** Spend a token (its nonce) and count its report, in one transaction (see {@link SpendResult}). */
  spend(nonceHex: string, epoch: number, cohort: number, bucket: number): Promise<SpendResult>;
  /** Epochs with cells or tombstones still stored, ascending. */
  openEpochs(): Promise<number[]>;
  /** Highest closed epoch (-1: none). Only moves forward. */
  closedThrough(): Promise<number>;
  /**
   * Close `epoch` once (across instances), in two transactions: raise the closed-epoch floor
   * (its tokens are refused from then on) and read its cells; `build` makes the release body
   * from them (undefined: none) between the two, holding no lock; then the body is stored if
   * absent and the epoch's cells and tombstones are deleted. A stop between the two leaves the
   * epoch closed with its cells; the next call builds its release.
   */
  closeEpoch(epoch: number, build: (cells: Cell[]) => Promise<string | undefined>, keep: number): Promise<CloseResult>;
  /** The stored release body of an epoch. */
  release(epoch: number): Promise<string | undefined>;
  /** Latest released epoch. */
  latestRelease(): Promise<number | undefined>;
  /** Periodic upkeep after writes (SQLite: a PASSIVE WAL checkpoint). */
  maintain(): Promise<void>;
  /** A small write: does the store take writes again? (the recovery loop's probe) */
  probe(): Promise<void>;
  /** A storage failure class for an error of this store, or undefined (not a storage failure). */
  classify(err: unknown): StorageFailure | undefined;
  close(): Promise<void>;
}

/** {@link IndexStore} over the embedded SQLite {@link ReportStore} (synchronous underneath). */
export class SqliteIndexStore implements IndexStore {
  readonly kind = 'sqlite' as const;
  readonly name: string;
  constructor(readonly sqlite: ReportStore) {
    this.name = sqlite.file;
  }
  async getMeta(key: string) {
    return this.sqlite.getMeta(key);
  }
  async putMetaIfAbsent(key: string, value: string) {
    const had = this.sqlite.getMeta(key);
    if (had !== undefined) return had;
    this.sqlite.setMeta(key, value);
    return value;
  }
  async spend(nonceHex: string, epoch: number, cohort: number, bucket: number) {
    return this.sqlite.spend(nonceHex, epoch, cohort, bucket);
  }
  async openEpochs() {
    return this.sqlite.openEpochs();
  }
  async closedThrough() {
    return this.sqlite.closedThrough();
  }
  async closeEpoch(epoch: number, build: (cells: Cell[]) => Promise<string | undefined>, keep: number): Promise<CloseResult> {
    const b = this.sqlite.beginClose(epoch);
    const body = b.cells ? await build(b.cells) : undefined;
    return { closedNow: b.closedNow, release: this.sqlite.finishClose(epoch, body, keep), closedThrough: b.closedThrough };
  }
  async release(epoch: number) {
    return this.sqlite.release(epoch);
  }
  async latestRelease() {
    return this.sqlite.latestRelease();
  }
  async maintain() {
    this.sqlite.checkpoint();
  }
  async probe() {
    try {
      this.sqlite.probe();
    } catch (err) {
      // The probe runs only while a fault lasts, never once the file is known corrupt (writes are
      // blocked then). A connection whose file system failed every I/O and was mounted again
      // keeps failing (as I/O errors or, for reads, as "malformed"): open the file afresh, with
      // the start's checks (quick_check included), and probe again.
      const state = this.classify(err)?.state;
      if (state !== 'io' && state !== 'corrupt') throw err;
      try {
        this.sqlite.reopen();
      } catch (e) {
        // why: an I/O error still (the file system is not back), not a verdict on the file
        throw Object.assign(new Error(`opening ${this.name} again after an I/O error failed: ${(e as Error).message}`), { code: 'SQLITE_IOERR_REOPEN' });
      }
      this.sqlite.probe();
    }
  }
  classify(err: unknown) {
    return classifyStorageError(err, this.name);
  }
  async close() {
    this.sqlite.close();
  }
}
