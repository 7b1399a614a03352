/**
 * The data directory and its SQLite files, opened defensively: what the service refuses to
 * start on, and how a storage failure at run time is reported instead of being retried blindly.
 *
 * At open ({@link DataDir.open}, {@link openDatabase}):
 * - the directory must be writable by this process (a probe file is created and removed), or
 *   the start fails naming the directory, the user and the fix;
 * - **the marker** `atomem-index.json` records that the directory was initialised and which
 *   database files it holds (as PostgreSQL's `PG_VERSION` does). A file the marker lists that
 *   is missing or has 0 bytes is refused (data loss, not a fresh start); a file that is not an
 *   atomem-index database (another program's SQLite file, or not SQLite at all) is refused
 *   whether or not the marker exists. Data dirs made before the marker existed are adopted
 *   (the marker is written once their files pass the checks);
 * - every file gets SQLite's `quick_check` (page and b-tree structure) before use; a failure
 *   refuses the start, names the file and the fix, and leaves the file as it was;
 * - the file's `application_id` names it as ours (`ATMR` reports).
 *
 * At run time ({@link StorageHealth}): a failed write is classified (disk full, corruption,
 * I/O or read-only) instead of surfacing as `500 internal`; the service's health names the
 * state, and writes are answered 507 (full) or 503 with `Retry-After` until a write succeeds
 * again (corruption stays until an operator acts).
 */
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { type FileHandle, open as openFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';

/** Thrown when the data dir is already open in another process. */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

/** What is wrong with a data dir or one of its files (the reason the service refused to start). */
export type StorageProblem = 'readonly' | 'missing' | 'empty' | 'foreign' | 'corrupt' | 'schema' | 'marker' | 'mismatch' | 'io';

/**
 * The service cannot use its data dir. `message` names the file and the fix; nothing was
 * written to the file the error is about.
 */
export class StorageError extends Error {
  override readonly name = 'StorageError';
  constructor(
    readonly problem: StorageProblem,
    /** The file (or directory) concerned, absolute. */
    readonly file: string,
    message: string,
  ) {
    super(message);
  }
}

/** Name of the marker file in an initialised data dir. */
export const MARKER_FILE = 'atomem-index.json';

/** Content of the marker ({@link MARKER_FILE}). */
export interface DataDirMarker {
  /** Marker format (1). */
  format: 1;
  /** When the data dir was initialised (ISO). */
  createdAt: string;
  /** Database files initialised in this dir (names relative to it). */
  files: string[];
  /**
   * Protocol v2: the item space the releases of this dir are built in. A service configured
   * with another embedder or dimension refuses to start (unless told to replace it).
   */
  space?: { embedderId: string; dim: number };
}

const uid = (): string => (typeof process.getuid === 'function' ? `uid ${process.getuid()}` : 'this user');

/** The data directory: existence, writability and the marker. One per service. */
export class DataDir {
  readonly path: string;
  private current: DataDirMarker | undefined;

  private constructor(path: string, marker: DataDirMarker | undefined) {
    this.path = path;
    this.current = marker;
  }

  /** The marker, undefined in a data dir that was never initialised. */
  get marker(): DataDirMarker | undefined {
    return this.current;
  }

  /** Absolute path of a file in the dir. */
  file(name: string): string {
    return join(this.path, name);
  }

  /**
   * Create the dir if needed, check that this process can write to it, read the marker.
   * Throws {@link StorageError} (`readonly`, `marker`, `io`) naming the path and the fix.
   */
  static open(dir: string): DataDir {
    const path = resolve(dir);
    try {
      mkdirSync(path, { recursive: true });
    } catch (e) {
      throw new StorageError(
        'io',
        path,
        `cannot create the data dir ${path}: ${(e as Error).message}. Fix: create it, writable for ${uid()}, or choose another --data directory.`,
      );
    }
    if (!statSync(path).isDirectory()) throw new StorageError('io', path, `the data dir ${path} is not a directory. Fix: choose a directory for --data.`);
    const probe = join(path, `.atomem-write-probe-${process.pid}`);
    try {
      accessSync(path, constants.R_OK | constants.W_OK | constants.X_OK);
      const fd = openSync(probe, 'w');
      closeSync(fd);
      unlinkSync(probe);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'error';
      throw new StorageError(
        'readonly',
        path,
        `the data dir ${path} is not writable by this process (${uid()}; ${code}${code === 'EROFS' ? ': read-only file system' : ''}). The service needs to write its SQLite files and their WAL there. Fix: make the directory writable for ${uid()} (chown / chmod, or remount read-write), or choose another --data directory.`,
      );
    }
    const markerPath = join(path, MARKER_FILE);
    let marker: DataDirMarker | undefined;
    if (existsSync(markerPath)) {
      let parsed: unknown;
      try {
        parsed = JSON.parse(readFileSync(markerPath, 'utf8'));
      } catch (e) {
        throw new StorageError(
          'marker',
          markerPath,
          `the marker ${markerPath} is unreadable (${(e as Error).message}). It records which database files this data dir holds. Fix: restore it from a backup, or, if the data dir is otherwise intact, delete it (it is rewritten at the next start).`,
        );
      }
      const m = parsed as Partial<DataDirMarker>;
      if (m?.format !== 1 || !Array.isArray(m.files) || m.files.some((f) => typeof f !== 'string')) {
        throw new StorageError(
          'marker',
          markerPath,
          `the marker ${markerPath} is not an atomem-index marker (format 1 with a file list). Fix: point --data to an atomem-index data directory, or move the file away.`,
        );
      }
      marker = m as DataDirMarker;
    }
    return new DataDir(path, marker);
  }

  /** Record changes in the marker (written atomically: temp file, fsync, rename). */
  update(change: (m: DataDirMarker) => void): void {
    const next: DataDirMarker = this.current
      ? { ...this.current, files: [...this.current.files] }
      : { format: 1, createdAt: new Date().toISOString(), files: [] };
    change(next);
    next.files = [...new Set(next.files)].sort();
    const text = `${JSON.stringify(next, null, 2)}\n`;
    if (this.current && `${JSON.stringify(this.current, null, 2)}\n` === text) return;
    const target = join(this.path, MARKER_FILE);
    const tmp = `${target}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, text);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, target);
    this.current = next;
  }
}

/**
 * When an acknowledged write is on disk (`--sync`):
 * - `group` (default): SQLite `synchronous = NORMAL` (commits are not fsynced by SQLite), and a
 *   write is acknowledged only after an fsync of the WAL that started after its commit
 *   ({@link WalSync}: one fsync serves every commit that waits for it, so the cost is shared by
 *   concurrent writes). Survives SIGKILL and a power cut or OS crash.
 * - `full`: SQLite `synchronous = FULL`: an fsync inside every commit. Survives both; each write
 *   pays its own fsync (and holds the write lock meanwhile).
 * - `normal`: SQLite `synchronous = NORMAL`, acknowledged before any fsync. Survives SIGKILL; a
 *   power cut or OS crash loses the writes since the last WAL sync (a checkpoint), and with them
 *   the record that their tokens were spent.
 */
export type SyncLevel = 'group' | 'full' | 'normal';

/** Default {@link SyncLevel}. */
export const DEFAULT_SYNC: SyncLevel = 'group';

/**
 * Group commit for a SQLite file in WAL mode with `synchronous = NORMAL`: {@link sync} resolves
 * once an fsync of the file's `-wal` that started after the call has completed, so every commit
 * made before the call is on disk. While one fsync runs, callers wait for the next one, which
 * then serves all of them (no timer: the batch is whatever arrived during the previous fsync).
 * The fsync runs on libuv's thread pool: the event loop goes on serving meanwhile. The WAL
 * stays open between rounds (same inode: SQLite truncates it at checkpoints, never replaces it
 * while the connection is open); the data dir is fsynced once too (the WAL's directory entry). Errors carry SQLite-like codes
 * (`SQLITE_FULL`, `SQLITE_IOERR_FSYNC`), so {@link classifyStorageError} names them.
 */
export class WalSync {
  private running: Promise<void> | undefined;
  private pending: Promise<void> | undefined;
  private dirSynced = false;
  /** fsyncs done (each served every caller that waited for it). */
  rounds = 0;

  constructor(
    /** The database file (its WAL is `<file>-wal`). */
    readonly file: string,
  ) {}

  /** Resolves once every commit made before the call is on disk. */
  sync(): Promise<void> {
    if (this.pending) return this.pending;
    if (!this.running) {
      this.running = this.round();
      return this.running;
    }
    // why: the fsync in flight may have started before this caller's commit: wait for the next one
    this.pending = this.running
      .catch(() => {})
      .then(() => {
        this.pending = undefined;
        this.running = this.round();
        return this.running;
      });
    return this.pending;
  }

  /** The file was opened again (after an I/O error): the WAL is opened afresh, its directory entry synced again. */
  reset(): void {
    this.dirSynced = false;
    this.drop();
  }

  /** Close the WAL's descriptor (the database is closing). */
  close(): void {
    this.drop();
  }

  /** The open `-wal` (kept between rounds: one fsync per round, no open / close). */
  private wal: Promise<FileHandle> | undefined;

  private drop(): void {
    const w = this.wal;
    this.wal = undefined;
    void w?.then((fh) => fh.close()).catch(() => {});
  }

  private async round(): Promise<void> {
    try {
      this.wal ??= openFile(`${this.file}-wal`, 'r');
      const fh = await this.wal.catch((e: NodeJS.ErrnoException) => {
        this.wal = undefined;
        if (e.code !== 'ENOENT') throw e;
        return undefined;
      });
      // why: no WAL (checkpointed and removed): what was committed is in the main file
      await (fh ? fh.sync() : fsyncPath(this.file));
      if (!this.dirSynced) {
        await fsyncPath(dirname(this.file));
        this.dirSynced = true;
      }
      this.rounds++;
    } catch (e) {
      this.drop();
      const code = (e as NodeJS.ErrnoException).code;
      throw Object.assign(new Error(`fsync of ${this.file}'s WAL failed: ${(e as Error).message}`), {
        code: code === 'ENOSPC' || code === 'EDQUOT' ? 'SQLITE_FULL' : 'SQLITE_IOERR_FSYNC',
      });
    } finally {
      this.running = undefined;
    }
  }
}

/** fsync `path` (open, fsync, close). */
async function fsyncPath(path: string): Promise<void> {
  const fh = await openFile(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** How a database file is opened by {@link openDatabase}. */
export interface OpenDatabaseOptions {
  /** File name in the data dir (e.g. `reports.sqlite`). */
  name: string;
  /** SQLite `application_id` that marks the file as this kind of atomem-index database. */
  applicationId: number;
  /** Tables a file of this kind has (a pre-marker file with exactly these is adopted). */
  tables: readonly string[];
  /** Schema version (`user_version`) this code reads. */
  schemaVersion: number;
  /** DDL run inside the first transaction (`CREATE TABLE IF NOT EXISTS …`). */
  schema: string;
  /** When a commit is on disk ({@link SyncLevel}): `full` sets SQLite `synchronous = FULL`, the others `NORMAL`. Default `group`. */
  synchronous?: SyncLevel;
  /** `secure_delete` (overwrite deleted content). Default false. */
  secureDelete?: boolean;
  /** Integrity check before use. Default `quick` (`PRAGMA quick_check`). */
  integrityCheck?: 'quick' | 'off';
  /**
   * Upper bound of the file size in bytes (SQLite `max_page_count`); a write beyond it fails
   * as a full disk would (507). Default: none.
   */
  maxBytes?: number;
}

const fixCorrupt = (file: string) =>
  `Fix: stop the service, keep a copy of ${file}, then restore it (and its -wal file) from a backup; or, to give up its data, move it away and remove its name from the marker ${MARKER_FILE}. The service does not repair or overwrite it.`;

/** An atomem-index SQLite file: the connection and what the checks found. */
export interface OpenedDatabase {
  db: Database.Connection;
  file: string;
  /** True when the file was created now (empty). */
  created: boolean;
}

/**
 * Open a database file of the data dir with every check of the module comment, create its
 * schema, and record it in the marker. Throws {@link StorageError} or {@link DataDirInUseError}.
 */
export function openDatabase(dir: DataDir, o: OpenDatabaseOptions): OpenedDatabase {
  const file = dir.file(o.name);
  const listed = dir.marker?.files.includes(o.name) ?? false;
  const exists = existsSync(file);
  if (listed && !exists) {
    throw new StorageError(
      'missing',
      file,
      `${file} is missing, but the marker ${dir.file(MARKER_FILE)} says this data dir holds it (initialised ${dir.marker!.createdAt}): its data is lost or was moved. The service does not start empty over it. Fix: restore ${o.name} from a backup, or point --data to the directory that holds it; to start afresh on purpose, remove "${o.name}" from the marker's "files".`,
    );
  }
  if (exists) {
    const size = statSync(file).size;
    if (size === 0 && listed) {
      throw new StorageError(
        'empty',
        file,
        `${file} has 0 bytes, but the marker ${dir.file(MARKER_FILE)} says this data dir was initialised with it (${dir.marker!.createdAt}): its data is lost (truncated or replaced). The service does not start empty over it. Fix: restore ${o.name} from a backup; to start afresh on purpose, delete the file and remove "${o.name}" from the marker's "files".`,
      );
    }
    try {
      accessSync(file, constants.R_OK | constants.W_OK);
    } catch (e) {
      throw new StorageError(
        'readonly',
        file,
        `${file} is not writable by this process (${uid()}; ${(e as NodeJS.ErrnoException).code}). Fix: make it (and its -wal / -shm files) writable for ${uid()}, or choose another --data directory.`,
      );
    }
  }
  let db: Database.Connection;
  try {
    db = new Database(file, { timeout: 250 });
  } catch (e) {
    throw describeOpenError(e, file);
  }
  let created = false;
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    // why: the first read of the header; a file that is not SQLite fails here (SQLITE_NOTADB)
    const appId = db.pragma('application_id', { simple: true }) as number;
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").all() as { name: string }[])
      .map((r) => r.name)
      .sort();
    created = tables.length === 0 && appId === 0;
    const ours = appId === o.applicationId || (appId === 0 && o.tables.every((t) => tables.includes(t)) && tables.every((t) => o.tables.includes(t)));
    if (!created && !ours) {
      throw new StorageError(
        'foreign',
        file,
        `${file} is not an atomem-index ${o.name} database (application_id ${hex(appId)}, tables: ${tables.join(', ') || 'none'}); it was left untouched. Fix: point --data to an atomem-index data directory, or move the file away.`,
      );
    }
    if (!created && (o.integrityCheck ?? 'quick') === 'quick') {
      const rows = db.pragma('quick_check') as { quick_check: string }[];
      const problems = rows.map((r) => r.quick_check).filter((s) => s !== 'ok');
      if (problems.length > 0) {
        throw new StorageError(
          'corrupt',
          file,
          `${file} failed its integrity check (PRAGMA quick_check: ${problems.slice(0, 3).join('; ')}${problems.length > 3 ? `; … ${problems.length - 3} more` : ''}). ${fixCorrupt(file)}`,
        );
      }
    }
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${o.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    if (o.secureDelete) db.pragma('secure_delete = ON');
    // why: take the exclusive lock now (kept until close), so a second process fails here
    db.exec('BEGIN EXCLUSIVE; COMMIT;');
    db.exec(o.schema);
    if (appId !== o.applicationId) db.pragma(`application_id = ${o.applicationId}`);
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version === 0) db.pragma(`user_version = ${o.schemaVersion}`);
    else if (version !== o.schemaVersion)
      throw new StorageError(
        'schema',
        file,
        `${file}: schema version ${version}, this service reads ${o.schemaVersion}. Fix: run the atomem-index version that wrote it, or restore a backup made for this version.`,
      );
    if (o.maxBytes !== undefined) {
      const page = db.pragma('page_size', { simple: true }) as number;
      db.pragma(`max_page_count = ${Math.max(1, Math.floor(o.maxBytes / page))}`);
    }
  } catch (err) {
    try {
      db.close();
    } catch {
      // already closed
    }
    if (err instanceof StorageError) throw err;
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new DataDirInUseError(`data dir ${dir.path} is in use by another process (${file} is locked)`);
    throw describeOpenError(err, file);
  }
  dir.update((m) => m.files.push(o.name));
  return { db, file, created };
}

function hex(n: number): string {
  return `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
}

/** An SQLite error at open → a {@link StorageError} that names the file and the fix. */
function describeOpenError(e: unknown, file: string): StorageError {
  const code = (e as { code?: string }).code ?? '';
  const msg = (e as Error).message;
  if (code === 'SQLITE_NOTADB')
    return new StorageError(
      'foreign',
      file,
      `${file} is not an SQLite database (${msg}); it was left untouched. If it was an atomem-index database, its header is destroyed: ${fixCorrupt(file)}`,
    );
  if (code.startsWith('SQLITE_CORRUPT')) return new StorageError('corrupt', file, `${file} is corrupted (${msg}). ${fixCorrupt(file)}`);
  if (code.startsWith('SQLITE_READONLY') || code.startsWith('SQLITE_CANTOPEN') || code === 'SQLITE_PERM') {
    return new StorageError(
      'readonly',
      file,
      `cannot open ${file} for writing (${code}: ${msg}). Fix: make the file, its -wal / -shm files and the data dir writable for ${uid()}, or choose another --data directory.`,
    );
  }
  if (code.startsWith('SQLITE_FULL'))
    return new StorageError('io', file, `cannot open ${file}: the disk is full (${msg}). Fix: free space on the data dir's file system.`);
  return new StorageError(
    'io',
    file,
    `cannot open ${file} (${code || 'error'}: ${msg}). Fix: check the file system of the data dir (space, permissions, hardware errors).`,
  );
}

/** Run-time state of the storage, as health reports it. */
export type StorageState = 'ok' | 'full' | 'corrupt' | 'io' | 'readonly';

/** Health's view of one failing file. */
export interface StorageStatus {
  state: StorageState;
  /** The failing file (absent when ok). */
  file?: string;
  /** What failed and what to do. */
  message?: string;
  /** Since when (ISO). */
  since?: string;
  /** Writes refused since the state began. */
  refusedWrites?: number;
}

/** A classified write failure: the HTTP answer the service gives for it. */
export interface StorageFailure {
  state: Exclude<StorageState, 'ok'>;
  status: 503 | 507;
  code: 'storage_full' | 'storage_corrupt' | 'storage_unavailable';
  retryAfterSeconds: number;
  message: string;
}

/** `EIO` when reading the first bytes of `file` fails with an I/O error, else undefined. */
function unreadable(file: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    readSync(fd, Buffer.alloc(100), 0, 100, 0);
    return undefined;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EIO' ? 'EIO' : undefined;
  } finally {
    if (fd !== undefined)
      try {
        closeSync(fd);
      } catch {
        // the file system is gone
      }
  }
}

/** SQLite error → failure class; undefined when it is not a storage failure. */
export function classifyStorageError(err: unknown, file: string): StorageFailure | undefined {
  // why: between a failed reopen after an I/O error (ReportStore.reopen) and the next one, the connection is closed
  if (err instanceof TypeError && err.message === 'The database connection is not open')
    return {
      state: 'io',
      status: 503,
      code: 'storage_unavailable',
      retryAfterSeconds: 5,
      message: `${file} is not open: it failed with an I/O error and opening it again failed too. Fix: check the data dir's file system (hardware, mounts); the service retries by itself.`,
    };
  const code = (err as { code?: string } | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  const msg = (err as Error).message;
  if (code.startsWith('SQLITE_FULL')) {
    return {
      state: 'full',
      status: 507,
      code: 'storage_full',
      retryAfterSeconds: 60,
      message: `${file}: the disk is full or the database reached its size limit (${msg}); nothing was written. Fix: free space on the data dir's file system (or raise the size limit); writes resume by themselves.`,
    };
  }
  if ((code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') && unreadable(file)) {
    // why: a file system that fails every read (EIO: a dying disk, a shut-down mount) makes SQLite report corruption; the file may be intact
    return {
      state: 'io',
      status: 503,
      code: 'storage_unavailable',
      retryAfterSeconds: 30,
      message: `${file}: I/O error (SQLite reported ${code}: ${msg}, and reading the file fails with ${unreadable(file)}). Fix: check the data dir's file system (hardware, mounts); a file system that was shut down needs the service restarted once it is mounted again.`,
    };
  }
  if (code.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') {
    return {
      state: 'corrupt',
      status: 503,
      code: 'storage_corrupt',
      retryAfterSeconds: 3600,
      message: `${file} is corrupted (${msg}); writes are refused until it is repaired. ${fixCorrupt(file)}`,
    };
  }
  if (code.startsWith('SQLITE_READONLY')) {
    return {
      state: 'readonly',
      status: 503,
      code: 'storage_unavailable',
      retryAfterSeconds: 30,
      message: `${file} became read-only (${msg}). Fix: make the data dir and its files writable again (permissions, remount); writes resume by themselves.`,
    };
  }
  if (code.startsWith('SQLITE_IOERR') || code.startsWith('SQLITE_CANTOPEN') || code === 'SQLITE_PROTOCOL') {
    return {
      state: 'io',
      status: 503,
      code: 'storage_unavailable',
      retryAfterSeconds: 30,
      message: `${file}: I/O error (${code}: ${msg}). Fix: check the data dir's file system (space, hardware, mounts); writes resume by themselves once it works.`,
    };
  }
  return undefined;
}

/**
 * Storage health of a service: the worst state over its files. A file leaves a failing state
 * when one of its writes succeeds, except `corrupt`, which stays until a restart (after a repair).
 */
export class StorageHealth {
  private readonly failing = new Map<string, { failure: StorageFailure; since: number; refused: number }>();

  /** Record a write failure; returns its class (undefined: not a storage failure, rethrow it). */
  fail(err: unknown, file: string, classify: (err: unknown) => StorageFailure | undefined = (e) => classifyStorageError(e, file)): StorageFailure | undefined {
    const failure = classify(err);
    if (failure === undefined) return undefined;
    const prev = this.failing.get(file);
    if (prev && prev.failure.state === 'corrupt') {
      prev.refused++;
      return prev.failure;
    }
    this.failing.set(file, { failure, since: prev?.since ?? Date.now(), refused: (prev?.refused ?? 0) + 1 });
    return failure;
  }

  /** A write to `file` succeeded. */
  ok(file: string): void {
    const f = this.failing.get(file);
    if (f && f.failure.state !== 'corrupt') this.failing.delete(file);
  }

  /** The failure that blocks writes to `file` before they are tried (only `corrupt`). */
  blocked(file: string): StorageFailure | undefined {
    const f = this.failing.get(file);
    if (f?.failure.state !== 'corrupt') return undefined;
    f.refused++;
    return f.failure;
  }

  /** Current failure of a file, if any. */
  failure(file: string): StorageFailure | undefined {
    return this.failing.get(file)?.failure;
  }

  /** True when every file is ok. */
  get healthy(): boolean {
    return this.failing.size === 0;
  }

  /** Health's `storage` field: the worst failing file (corrupt > full > readonly > io), or ok. */
  status(): StorageStatus {
    const rank: Record<string, number> = { corrupt: 4, full: 3, readonly: 2, io: 1 };
    let worst: [string, { failure: StorageFailure; since: number; refused: number }] | undefined;
    for (const e of this.failing) if (!worst || rank[e[1].failure.state] > rank[worst[1].failure.state]) worst = e;
    if (!worst) return { state: 'ok' };
    const [file, f] = worst;
    return { state: f.failure.state, file, message: f.failure.message, since: new Date(f.since).toISOString(), refusedWrites: f.refused };
  }
}
