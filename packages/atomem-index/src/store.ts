/**
 * Durable storage of the shared index: one SQLite file (`index.sqlite` in the data dir) through
 * better-sqlite3.
 *
 * Durability: WAL journal. With `synchronous = NORMAL` (default) a commit is appended to the
 * WAL without fsync: it survives a crash or SIGKILL of the process (the bytes are in the OS page
 * cache and SQLite replays the WAL on the next open), but an OS crash or power loss may lose the
 * last transactions (never corrupt the file). `synchronous = FULL` fsyncs the WAL on every commit
 * and also survives OS crashes, at a cost per commit (see the report of src/server/bench.ts).
 * Every mutation is one transaction, committed before the service answers.
 *
 * Opened through ./storage.ts (marker, foreign / empty / corrupted files refused at start).
 * The file is opened with `locking_mode = EXCLUSIVE`: a second process (a second service on the
 * same data dir) cannot open it, so two in-memory indexes can never diverge on one file.
 *
 * Tables:
 * - `memories(id, seq, token_hash, embedder_id, dim, vector BLOB int8, items JSON, created_at)`:
 *   `seq` is the insertion order (a replaced memory gets a new one); `created_at` is rounded to
 *   `createdAtResolutionMs` (an hour by default) so the file holds no exact upload times.
 * - `links(src, dst, sim)`: the candidate list of `src` (its top-k1 memories `dst` of other
 *   uploads with sim ≥ tau; two memories are linked when each lists the other). Persisted
 *   because the service's neighbour search is approximate (HNSW) and the upload groups are not
 *   stored: a restart restores the lists as they were instead of re-deriving them. Rewritten
 *   for every memory whose list an upsert or delete changed. Files written before meta
 *   `linkRule` = `mutual-top-k1` hold the old rule's links (new → older) and are relinked on load.
 * - `embedders(id, dim)`: the vector dimension locked per embedder by its first upload.
 * - `meta(key, value)`: e.g. the secret seed of the item-count noise.
 */

import type Database from 'better-sqlite3';
import { DataDir, DataDirInUseError, openDatabase } from './storage.js';

export { DataDirInUseError };
/** File name of the legacy v1 store in the data dir. */
export const INDEX_FILE = 'index.sqlite';
/** SQLite `application_id` of the legacy v1 store: "ATMI". */
export const INDEX_APPLICATION_ID = 0x41544d49;

/** One stored memory. */
export interface StoredMemory {
  id: string;
  /** Insertion order (ascending = older first). */
  seq: number;
  /** SHA-256 hex of the deletion token. */
  tokenHash: string;
  embedderId: string;
  dim: number;
  /** int8 vector as uploaded. */
  vector: Int8Array;
  /** Item ids (level `items`), undefined when none were uploaded. */
  items: string[] | undefined;
  /** Upload time in ms since the epoch, rounded down to the store's resolution. */
  createdAt: number;
}

/** A memory to write (the store assigns `seq` and `createdAt`). */
export type NewMemory = Omit<StoredMemory, 'seq' | 'createdAt'>;

/** One entry of a memory's candidate list: `dst` is among the top-k1 of `src`. */
export interface StoredLink {
  src: string;
  dst: string;
  sim: number;
}

/** Options of {@link MemoryStore.open}. */
export interface MemoryStoreOptions {
  /** SQLite `synchronous` level (see the module comment). Default `normal`. */
  synchronous?: 'normal' | 'full';
  /** `createdAt` is rounded down to a multiple of this. Default 3,600,000 (one hour). 1 = exact. */
  createdAtResolutionMs?: number;
  /** Clock (tests). Default `Date.now`. */
  now?: () => number;
  /** Size limit of the file in bytes (writes beyond it fail as on a full disk). Default none. */
  maxBytes?: number;
  /** Integrity check at open. Default `quick`. */
  integrityCheck?: 'quick' | 'off';
}

interface MemoryRow {
  id: string;
  seq: number;
  token_hash: string;
  embedder_id: string;
  dim: number;
  vector: Buffer;
  items: string | null;
  created_at: number;
}

const SCHEMA_VERSION = 1;

function toMemory(r: MemoryRow): StoredMemory {
  // why: copy out of the driver's Buffer so the vector owns its bytes
  const vector = new Int8Array(r.vector.byteLength);
  vector.set(new Int8Array(r.vector.buffer, r.vector.byteOffset, r.vector.byteLength));
  return {
    id: r.id,
    seq: r.seq,
    tokenHash: r.token_hash,
    embedderId: r.embedder_id,
    dim: r.dim,
    vector,
    items: r.items === null ? undefined : (JSON.parse(r.items) as string[]),
    createdAt: r.created_at,
  };
}

/** Every prepared statement of the store. */
function prepare(db: Database.Connection) {
  const q = <P extends unknown[], R = unknown>(sql: string) => db.prepare<P, R>(sql);
  return {
    get: q<[string], { token_hash: string; embedder_id: string }>('SELECT token_hash, embedder_id FROM memories WHERE id = ?'),
    count: q<[], { n: number }>('SELECT COUNT(*) AS n FROM memories'),
    maxSeq: q<[], { s: number | null }>('SELECT MAX(seq) AS s FROM memories'),
    insert: q<[string, number, string, string, number, Buffer, string | null, number]>(
      'INSERT OR REPLACE INTO memories (id, seq, token_hash, embedder_id, dim, vector, items, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    deleteMemory: q<[string]>('DELETE FROM memories WHERE id = ?'),
    deleteLinksFrom: q<[string]>('DELETE FROM links WHERE src = ?'),
    deleteLinksTo: q<[string]>('DELETE FROM links WHERE dst = ?'),
    insertLink: q<[string, string, number]>('INSERT OR REPLACE INTO links (src, dst, sim) VALUES (?, ?, ?)'),
    page: q<[number, number], MemoryRow>('SELECT * FROM memories WHERE seq > ? ORDER BY seq LIMIT ?'),
    pageLinks: q<[number, number], StoredLink>(
      'SELECT l.src AS src, l.dst AS dst, l.sim AS sim FROM links l JOIN memories m ON m.id = l.src WHERE m.seq > ? AND m.seq <= ?',
    ),
    allLinks: q<[], StoredLink>('SELECT src, dst, sim FROM links ORDER BY src, dst'),
    dims: q<[], { id: string; dim: number }>('SELECT id, dim FROM embedders'),
    insertDim: q<[string, number]>('INSERT OR IGNORE INTO embedders (id, dim) VALUES (?, ?)'),
    getMeta: q<[string], { value: string }>('SELECT value FROM meta WHERE key = ?'),
    setMeta: q<[string, string]>('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)'),
  };
}

/** The SQLite store. All methods are synchronous; each mutation is one transaction. */
export class MemoryStore {
  /** Path of the database file. */
  readonly file: string;
  private readonly db: Database.Connection;
  private readonly resolution: number;
  private readonly now: () => number;
  private seq: number;
  private readonly stmt: ReturnType<typeof prepare>;
  private readonly upsertTx: (batch: readonly NewMemory[], links: readonly StoredLink[], dims: readonly [string, number][], relinked: readonly string[]) => void;
  private readonly deleteTx: (ids: readonly string[], links: readonly StoredLink[], relinked: readonly string[]) => number;
  private readonly relinkTx: (links: readonly StoredLink[], relinked: readonly string[]) => void;

  private constructor(file: string, db: Database.Connection, options: MemoryStoreOptions) {
    this.file = file;
    this.db = db;
    this.resolution = Math.max(1, Math.floor(options.createdAtResolutionMs ?? 3_600_000));
    this.now = options.now ?? Date.now;
    this.stmt = prepare(db);
    this.seq = this.stmt.maxSeq.get()?.s ?? 0;
    this.upsertTx = db.transaction((batch: readonly NewMemory[], links: readonly StoredLink[], dims: readonly [string, number][], relinked: readonly string[]) => {
      const createdAt = Math.floor(this.now() / this.resolution) * this.resolution;
      for (const [id, dim] of dims) this.stmt.insertDim.run(id, dim);
      for (const m of batch) {
        // A replaced memory loses every link, in both directions (as in the live graph).
        this.stmt.deleteLinksFrom.run(m.id);
        this.stmt.deleteLinksTo.run(m.id);
        this.stmt.insert.run(
          m.id,
          ++this.seq,
          m.tokenHash,
          m.embedderId,
          m.dim,
          Buffer.from(m.vector.buffer, m.vector.byteOffset, m.vector.byteLength),
          m.items === undefined ? null : JSON.stringify(m.items),
          createdAt,
        );
      }
      for (const id of relinked) this.stmt.deleteLinksFrom.run(id);
      for (const l of links) this.stmt.insertLink.run(l.src, l.dst, l.sim);
    });
    this.deleteTx = db.transaction((ids: readonly string[], links: readonly StoredLink[], relinked: readonly string[]) => {
      let n = 0;
      for (const id of ids) {
        this.stmt.deleteLinksFrom.run(id);
        this.stmt.deleteLinksTo.run(id);
        n += this.stmt.deleteMemory.run(id).changes;
      }
      for (const id of relinked) this.stmt.deleteLinksFrom.run(id);
      for (const l of links) this.stmt.insertLink.run(l.src, l.dst, l.sim);
      return n;
    });
    this.relinkTx = db.transaction((links: readonly StoredLink[], relinked: readonly string[]) => {
      for (const id of relinked) this.stmt.deleteLinksFrom.run(id);
      for (const l of links) this.stmt.insertLink.run(l.src, l.dst, l.sim);
    });
  }

  /**
   * Open (creating if needed) the store in `dataDir`. Throws {@link DataDirInUseError} when
   * another process holds the data dir.
   */
  static open(dataDir: string | DataDir, options: MemoryStoreOptions = {}): MemoryStore {
    const dir = typeof dataDir === 'string' ? DataDir.open(dataDir) : dataDir;
    const { db, file } = openDatabase(dir, {
      name: INDEX_FILE,
      applicationId: INDEX_APPLICATION_ID,
      tables: ['embedders', 'links', 'memories', 'meta'],
      schemaVersion: SCHEMA_VERSION,
      synchronous: options.synchronous,
      maxBytes: options.maxBytes,
      integrityCheck: options.integrityCheck,
      schema: `
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS embedders (id TEXT PRIMARY KEY, dim INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS memories (
          id TEXT PRIMARY KEY,
          seq INTEGER NOT NULL UNIQUE,
          token_hash TEXT NOT NULL,
          embedder_id TEXT NOT NULL,
          dim INTEGER NOT NULL,
          vector BLOB NOT NULL,
          items TEXT,
          created_at INTEGER NOT NULL
        );
        CREATE TABLE IF NOT EXISTS links (
          src TEXT NOT NULL,
          dst TEXT NOT NULL,
          sim REAL NOT NULL,
          PRIMARY KEY (src, dst)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS links_dst ON links (dst);
      `,
    });
    return new MemoryStore(file, db, options);
  }

  /** Token hash and embedder of a stored memory, or undefined. */
  get(id: string): { tokenHash: string; embedderId: string } | undefined {
    const r = this.stmt.get.get(id);
    return r === undefined ? undefined : { tokenHash: r.token_hash, embedderId: r.embedder_id };
  }

  /** Number of stored memories. */
  count(): number {
    return this.stmt.count.get()!.n;
  }

  /** Locked dimension per embedder id. */
  embedderDims(): Map<string, number> {
    return new Map(this.stmt.dims.all().map((r) => [r.id, r.dim]));
  }

  /**
   * One transaction: insert or replace `batch` (each gets the next `seq`; a replaced memory's
   * old links are dropped in both directions), lock the dimensions in `dims` (ignored for
   * embedders already locked), replace the candidate lists of the `relinked` memories by the
   * `links` (whose `src` are among them).
   */
  upsert(batch: readonly NewMemory[], links: readonly StoredLink[] = [], dims: readonly [string, number][] = [], relinked: readonly string[] = []): void {
    this.upsertTx(batch, links, dims, relinked);
  }

  /**
   * One transaction: delete memories (unknown ids ignored) and their links, then replace the
   * candidate lists of the `relinked` memories by `links`; returns how many memories existed.
   */
  delete(ids: readonly string[], links: readonly StoredLink[] = [], relinked: readonly string[] = []): number {
    return this.deleteTx(ids, links, relinked);
  }

  /** One transaction: replace the candidate lists of the `relinked` memories by `links`. */
  relink(links: readonly StoredLink[], relinked: readonly string[]): void {
    this.relinkTx(links, relinked);
  }

  /** Up to `limit` memories with `seq > afterSeq`, oldest first, with the links they own. */
  page(afterSeq: number, limit: number): { memories: StoredMemory[]; links: StoredLink[] } {
    const memories = this.stmt.page.all(afterSeq, limit).map(toMemory);
    if (memories.length === 0) return { memories, links: [] };
    const links = this.stmt.pageLinks.all(afterSeq, memories[memories.length - 1].seq);
    return { memories, links };
  }

  /** Every stored memory, oldest first (tests, tools). */
  all(): StoredMemory[] {
    const out: StoredMemory[] = [];
    for (let after = 0; ; ) {
      const { memories } = this.page(after, 4096);
      if (memories.length === 0) return out;
      out.push(...memories);
      after = memories[memories.length - 1].seq;
    }
  }

  /** Every stored link (tests, tools). */
  links(): StoredLink[] {
    return this.stmt.allLinks.all();
  }

  /** A value of the `meta` table. */
  getMeta(key: string): string | undefined {
    return this.stmt.getMeta.get(key)?.value;
  }

  /** Set a value of the `meta` table (its own transaction). */
  setMeta(key: string, value: string): void {
    this.stmt.setMeta.run(key, value);
  }

  /** Close the file (checkpoints the WAL). Idempotent. */
  close(): void {
    if (this.db.open) this.db.close();
  }
}
