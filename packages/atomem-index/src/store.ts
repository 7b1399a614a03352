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
 *
 * Published releases are immutable, so both keep the ones they read or stored in a bounded
 * in-process {@link ReleaseCache}: release reads of a published epoch are answered from memory,
 * also while the store cannot be reached (a PostgreSQL outage, an I/O error).
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

/**
 * Release bodies by epoch, in memory, bounded by count and bytes (least recently read leaves
 * first). Only bodies read from or stored in the store enter it, and a stored release is never
 * replaced (insert-if-absent), so a cached body is byte-identical to the store's for as long
 * as the store keeps it; epochs the store prunes are dropped here too ({@link prune}). It also
 * remembers the latest released epoch it saw, which {@link latestOr} answers while the store
 * cannot be reached (nothing can be published meanwhile: publishing goes through the store).
 */
export class ReleaseCache {
  private readonly bodies = new Map<number, string>();
  private bytes = 0;
  private latest: number | undefined;

  constructor(
    /** Most releases kept. Default 16. */
    readonly maxEntries = 16,
    /** Most bytes kept (UTF-16 length × 2). Default 64 MiB. */
    readonly maxBytes = 64 << 20,
  ) {}

  /** Whether the body of `epoch` is cached. */
  has(epoch: number): boolean {
    return this.bodies.has(epoch);
  }

  /** The cached body of `epoch`, or undefined. */
  get(epoch: number): string | undefined {
    const b = this.bodies.get(epoch);
    if (b !== undefined) {
      // why: Map keeps insertion order; re-inserting makes it the most recently read
      this.bodies.delete(epoch);
      this.bodies.set(epoch, b);
    }
    return b;
  }

  /** Keep `body` as the release of `epoch` (read from or stored in the store). */
  put(epoch: number, body: string): void {
    if (this.bodies.has(epoch)) return;
    const size = body.length * 2;
    if (size > this.maxBytes) return;
    this.bodies.set(epoch, body);
    this.bytes += size;
    this.saw(epoch);
    for (const [e, b] of this.bodies) {
      if (this.bodies.size <= this.maxEntries && this.bytes <= this.maxBytes) break;
      this.bodies.delete(e);
      this.bytes -= b.length * 2;
    }
  }

  /** The store says `epoch` is (or was) the latest release. */
  saw(epoch: number | undefined): void {
    if (epoch !== undefined && (this.latest === undefined || epoch > this.latest)) this.latest = epoch;
  }

  /** Drop epochs the store no longer keeps (all but the `keep` newest up to `through`). */
  prune(through: number, keep: number): void {
    for (const [e, b] of this.bodies)
      if (e <= through - keep) {
        this.bodies.delete(e);
        this.bytes -= b.length * 2;
      }
  }

  /**
   * `read()`, remembering its answer; when it fails with a storage failure of class `io`
   * (`classify`: the store cannot be reached) and a latest epoch was seen, that epoch instead.
   */
  async latestOr(read: () => Promise<number | undefined>, classify: (err: unknown) => StorageFailure | undefined): Promise<number | undefined> {
    try {
      const e = await read();
      this.saw(e);
      return e;
    } catch (err) {
      if (this.latest !== undefined && classify(err)?.state === 'io') return this.latest;
      throw err;
    }
  }

  /** `read()` unless `epoch` is cached; a body read is cached. */
  async body(epoch: number, read: () => Promise<string | undefined>): Promise<string | undefined> {
    const hit = this.get(epoch);
    if (hit !== undefined) return hit;
    const b = await read();
    if (b !== undefined) this.put(epoch, b);
    return b;
  }

  /** Releases and bytes held (tests, metrics). */
  get size(): { entries: number; bytes: number } {
    return { entries: this.bodies.size, bytes: this.bytes };
  }
}

/** {@link IndexStore} over the embedded SQLite {@link ReportStore} (synchronous underneath). */
export class SqliteIndexStore implements IndexStore {
  readonly kind = 'sqlite' as const;
  readonly name: string;
  /** Published releases read or stored (immutable: see {@link ReleaseCache}). */
  readonly releases = new ReleaseCache();
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
  /** Spend and count; a counted report resolves once it is on disk (`ReportStore.durable`: group commit by default). */
  async spend(nonceHex: string, epoch: number, cohort: number, bucket: number) {
    const r = this.sqlite.spend(nonceHex, epoch, cohort, bucket);
    if (r === 'counted') await this.sqlite.durable();
    return r;
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
    const release = this.sqlite.finishClose(epoch, body, keep);
    this.releases.prune(epoch, keep);
    if (release !== undefined) this.releases.put(epoch, release);
    return { closedNow: b.closedNow, release, closedThrough: b.closedThrough };
  }
  async release(epoch: number) {
    return this.releases.body(epoch, async () => this.sqlite.release(epoch));
  }
  async latestRelease() {
    return this.releases.latestOr(
      async () => this.sqlite.latestRelease(),
      (e) => this.classify(e),
    );
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
