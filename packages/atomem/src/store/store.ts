/**
 * IndexedDB storage of one local profile's memory tiers.
 *
 * Durability rules:
 * - every write is ONE readwrite transaction: a crash or a failed write leaves the database
 *   as it was before the call, never half-updated;
 * - `appendEvent` is durable before the agent processes the event; `load()` returns pending
 *   events so the agent can replay them after a crash.
 *
 * Another tab (or a newer version of the library) may need to upgrade or delete the database:
 * it fires `versionchange` on our connection. The store then closes its connection at once (so
 * the other side is not blocked) and reopens lazily on its next operation. The same happens if
 * the browser terminates the connection abnormally. If the other side upgraded the schema to a
 * version this library does not know, the reopen fails with the browser's `VersionError`.
 */
import { wrap, type IDBPDatabase, type IDBPTransaction, type StoreNames } from 'idb';
import type { MemoryEvent, MemoryState } from '../core/types.js';
import { createState } from '../core/memory.js';
import { InvalidImportError, StorageQuotaError, isQuotaExceeded } from './errors.js';
import { parseExportFile, toExportFile, type ExportFile } from './file.js';
import {
  ALL_STORES,
  LEDGER_KEY,
  DB_VERSION,
  META_KEY,
  PROFILE_KEY,
  dbName,
  upgrade,
  type AtomemDB,
  type EventRecord,
  type LedgerRecord,
  type MetaRecord,
} from './schema.js';

/** Options of {@link MemoryStore.open}. */
export interface OpenStoreOptions {
  /** Local profile (one database each). Defaults to `'default'`. */
  profile?: string;
  /** IndexedDB implementation; defaults to `globalThis.indexedDB` (pass fake-indexeddb in Node). */
  indexedDB?: IDBFactory;
}

type RW = IDBPTransaction<AtomemDB, StoreNames<AtomemDB>[], 'readwrite'>;

function openWith(factory: IDBFactory, name: string, onLost: () => void): Promise<IDBPDatabase<AtomemDB>> {
  // why: idb's openDB always uses the global indexedDB; this mirrors it with an injectable factory.
  const request = factory.open(name, DB_VERSION);
  request.addEventListener('upgradeneeded', (event) => {
    upgrade(
      wrap(request.result) as unknown as IDBPDatabase<AtomemDB>,
      event.oldVersion,
      event.newVersion,
      wrap(request.transaction as IDBTransaction) as unknown as IDBPTransaction<AtomemDB, StoreNames<AtomemDB>[], 'versionchange'>,
    );
  });
  return (wrap(request) as Promise<unknown>).then((raw) => {
    const db = raw as IDBPDatabase<AtomemDB>;
    // blocking: another connection wants to upgrade or delete → step aside, reopen on next use.
    db.addEventListener('versionchange', () => {
      db.close();
      onLost();
    });
    // terminated: the browser closed the connection abnormally.
    db.addEventListener('close', onLost);
    return db;
  });
}

function vectorKey(embedderId: string, itemId: string): string {
  return `${embedderId}\u0000${itemId}`;
}

function toRecord(e: MemoryEvent): EventRecord {
  return { seq: e.seq, item: e.item, at: e.at, action: e.action, pending: e.pending ? 1 : 0 };
}

function fromRecord(r: EventRecord): MemoryEvent {
  return { seq: r.seq, item: r.item, at: r.at, action: r.action, pending: r.pending === 1 };
}

function metaOf(state: MemoryState, nextSeq = state.nextSeq, revision = 0, keep?: MetaRecord): MetaRecord {
  return {
    schemaVersion: DB_VERSION,
    embedderId: state.memories[0]?.embedding.embedderId ?? null,
    nextSeq,
    signal: { ...state.signal },
    revision,
    ...(state.reporting ? { reporting: structuredClone(state.reporting) } : keep?.reporting ? { reporting: keep.reporting } : {}),
  };
}

function checkEvent(ev: MemoryEvent): void {
  if (!ev || typeof ev !== 'object') throw new TypeError('event must be an object');
  if (!Number.isInteger(ev.seq) || ev.seq < 1) throw new TypeError(`event.seq must be an integer ≥ 1, got ${String(ev.seq)}`);
  if (typeof ev.item !== 'string' || ev.item.length === 0) throw new TypeError('event.item must be a non-empty string');
  if (typeof ev.at !== 'number' || !Number.isFinite(ev.at)) throw new TypeError('event.at must be a finite number');
  if (typeof ev.pending !== 'boolean') throw new TypeError('event.pending must be a boolean');
}

/** Persistent memory of one local profile. Create with {@link MemoryStore.open}. */
export class MemoryStore {
  /** Local profile name. */
  readonly profile: string;
  private readonly factory: IDBFactory;
  private dbPromise: Promise<IDBPDatabase<AtomemDB>> | null = null;
  private closed = false;
  /** Revision of the memory tiers this connection last read or wrote (see {@link MetaRecord.revision}). */
  private seenRevision = 0;
  /** In-memory copy once degraded (quota exceeded). */
  private mem: {
    state: MemoryState;
    /** Item vectors written since degrading (reads fall back to the database). */
    vectors: Map<string, Float32Array>;
  } | null = null;

  private constructor(profile: string, factory: IDBFactory) {
    this.profile = profile;
    this.factory = factory;
  }

  /** Open (creating or migrating) the database of a local profile. */
  static async open(opts: OpenStoreOptions = {}): Promise<MemoryStore> {
    const profile = opts.profile ?? 'default';
    if (typeof profile !== 'string' || profile.length === 0) throw new TypeError('profile must be a non-empty string');
    const factory = opts.indexedDB ?? (globalThis as { indexedDB?: IDBFactory }).indexedDB;
    if (!factory) throw new Error('IndexedDB is not available here: pass opts.indexedDB (e.g. fake-indexeddb in Node)');
    if (typeof (globalThis as { IDBRequest?: unknown }).IDBRequest === 'undefined') {
      // why: idb recognises requests, transactions and cursors with `instanceof` on the globals.
      throw new Error('IndexedDB classes (IDBRequest, IDBTransaction, …) must be globals: in Node, install them from fake-indexeddb');
    }
    const store = new MemoryStore(profile, factory);
    await store.db();
    return store;
  }

  /** True once a write hit the storage quota: writes since then live in memory only (lost on reload). */
  get degraded(): boolean {
    return this.mem !== null;
  }

  private db(): Promise<IDBPDatabase<AtomemDB>> {
    if (this.closed) return Promise.reject(new Error('MemoryStore is closed'));
    if (!this.dbPromise) {
      const p: Promise<IDBPDatabase<AtomemDB>> = openWith(this.factory, dbName(this.profile), () => {
        if (this.dbPromise === p) this.dbPromise = null;
      });
      this.dbPromise = p;
      p.catch(() => {
        if (this.dbPromise === p) this.dbPromise = null;
      });
    }
    return this.dbPromise;
  }

  /** Start a transaction; if the connection was closed under us (versionchange), reopen once. */
  private async transaction<M extends IDBTransactionMode>(
    stores: StoreNames<AtomemDB>[],
    mode: M,
  ): Promise<IDBPTransaction<AtomemDB, StoreNames<AtomemDB>[], M>> {
    const db = await this.db();
    try {
      return db.transaction(stores, mode);
    } catch (e) {
      if ((e as { name?: unknown }).name !== 'InvalidStateError' || this.closed) throw e;
      if (this.dbPromise) this.dbPromise = null;
      return (await this.db()).transaction(stores, mode);
    }
  }

  /** One readwrite transaction; any failure aborts it so nothing of it is written. */
  private async tx(stores: StoreNames<AtomemDB>[], fn: (tx: RW) => Promise<void>): Promise<void> {
    const tx = await this.transaction(stores, 'readwrite');
    try {
      // why: requests are awaited one by one, so a synchronous throw never strands a pending request.
      await fn(tx);
      await tx.done;
    } catch (e) {
      try {
        tx.abort();
      } catch {
        // already finished or aborted
      }
      await tx.done.catch(() => undefined);
      throw e;
    }
  }

  /**
   * A write: to the database, or to memory once degraded. On the first quota failure the store
   * copies the (unchanged) database into memory, applies the write there, and throws once.
   */
  private async write(stores: StoreNames<AtomemDB>[], toDb: (tx: RW) => Promise<void>, toMem: () => void): Promise<void> {
    if (this.mem) {
      toMem();
      return;
    }
    try {
      await this.tx(stores, toDb);
    } catch (e) {
      if (!isQuotaExceeded(e)) throw e;
      const state = await this.readState();
      if (this.mem) {
        // a concurrent write degraded first (and surfaced the error): just join memory mode.
        toMem();
        return;
      }
      this.mem = { state, vectors: new Map() };
      toMem();
      throw new StorageQuotaError({ cause: e });
    }
  }

  private async readState(): Promise<MemoryState> {
    const tx = await this.transaction(['events', 'memories', 'profile', 'meta'], 'readonly');
    const [events, memories, profile, meta] = await Promise.all([
      tx.objectStore('events').getAll(),
      tx.objectStore('memories').getAll(),
      tx.objectStore('profile').get(PROFILE_KEY),
      tx.objectStore('meta').get(META_KEY),
    ]);
    await tx.done;
    const state = createState();
    state.events = events.sort((a, b) => a.seq - b.seq).map(fromRecord);
    state.memories = memories.sort((a, b) => a.pos - b.pos).map((r) => r.memory);
    state.profile = profile ?? null;
    this.seenRevision = meta?.revision ?? 0;
    if (meta) {
      state.nextSeq = meta.nextSeq;
      state.signal = { ...meta.signal };
      if (meta.reporting) state.reporting = meta.reporting;
    }
    const lastSeq = state.events.length ? state.events[state.events.length - 1].seq : 0;
    state.nextSeq = Math.max(state.nextSeq, lastSeq + 1);
    return state;
  }

  /**
   * Rebuild the MemoryState (pass it to `new MemoryAgent({ state })`). Pending events are
   * included, oldest first, so the agent can replay what it had not processed.
   */
  async load(): Promise<MemoryState> {
    if (this.mem) return structuredClone(this.mem.state);
    return this.readState();
  }

  /**
   * True when another connection (another tab's engine) wrote the memory tiers since this one
   * last read or wrote them: reload with {@link load} before changing anything. Always false in
   * memory mode (quota exceeded), where this connection no longer shares the database.
   */
  async changedElsewhere(): Promise<boolean> {
    if (this.mem) return false;
    const tx = await this.transaction(['meta'], 'readonly');
    const meta = await tx.objectStore('meta').get(META_KEY);
    await tx.done;
    return (meta?.revision ?? 0) !== this.seenRevision;
  }

  /** Persist one new event (tier 1) before it is processed: one transaction (event + nextSeq). */
  async appendEvent(ev: MemoryEvent): Promise<void> {
    checkEvent(ev);
    const rec = toRecord(ev);
    await this.write(
      ['events', 'meta'],
      async (tx) => {
        await tx.objectStore('events').put(rec);
        const meta = tx.objectStore('meta');
        const m = (await meta.get(META_KEY)) ?? metaOf(createState());
        const revision = (m.revision ?? 0) + 1;
        await meta.put({ ...m, nextSeq: Math.max(m.nextSeq, ev.seq + 1), revision }, META_KEY);
        tx.done.then(
          () => (this.seenRevision = revision),
          () => undefined,
        );
      },
      () => {
        const s = this.mem!.state;
        s.events = s.events.filter((e) => e.seq !== ev.seq);
        s.events.push(fromRecord(rec));
        s.events.sort((a, b) => a.seq - b.seq);
        s.nextSeq = Math.max(s.nextSeq, ev.seq + 1);
      },
    );
  }

  /**
   * Persist the whole state in ONE transaction: memories and profile are replaced, events are
   * diffed (events appended after this snapshot, i.e. with seq ≥ state.nextSeq, are kept),
   * meta (nextSeq, signal, embedder id) is updated.
   */
  async saveState(state: MemoryState): Promise<void> {
    const copy = structuredClone(state);
    await this.write(
      ['events', 'memories', 'profile', 'meta'],
      async (tx) => {
        const events = tx.objectStore('events');
        // why: write only what changed — rewriting every event made each track() cost grow with the history.
        const stored = new Map((await events.getAll()).map((r) => [r.seq, r]));
        const keep = new Set(copy.events.map((e) => e.seq));
        for (const key of stored.keys()) {
          if (!keep.has(key) && key < copy.nextSeq) await events.delete(key);
        }
        for (const e of copy.events) {
          const rec = toRecord(e);
          const old = stored.get(e.seq);
          if (old && old.item === rec.item && old.at === rec.at && old.action === rec.action && old.pending === rec.pending) continue;
          await events.put(rec);
        }
        const memories = tx.objectStore('memories');
        await memories.clear();
        let pos = 0;
        for (const m of copy.memories) await memories.put({ id: m.id, pos: pos++, memory: m });
        const profile = tx.objectStore('profile');
        if (copy.profile) await profile.put(copy.profile, PROFILE_KEY);
        else await profile.delete(PROFILE_KEY);
        const meta = tx.objectStore('meta');
        const old = await meta.get(META_KEY);
        const revision = (old?.revision ?? 0) + 1;
        await meta.put(metaOf(copy, Math.max(copy.nextSeq, old?.nextSeq ?? 1), revision, old), META_KEY);
        tx.done.then(
          () => (this.seenRevision = revision),
          () => undefined,
        );
      },
      () => {
        const s = this.mem!.state;
        const later = s.events.filter((e) => e.seq >= copy.nextSeq && !copy.events.some((c) => c.seq === e.seq));
        this.mem!.state = { ...copy, events: [...copy.events, ...later], nextSeq: Math.max(copy.nextSeq, s.nextSeq) };
      },
    );
  }

  /** The stored state as a versioned JSON-safe file (vectors as number arrays). Caches are not exported. */
  async export(): Promise<ExportFile> {
    return toExportFile(await this.load());
  }

  /**
   * Replace the stored state with an export file. The file is validated completely first
   * ({@link InvalidImportError} naming the bad field, existing data untouched), then written in
   * one transaction. Caches are kept.
   */
  async import(file: unknown): Promise<void> {
    const state = parseExportFile(file);
    await this.write(
      ['events', 'memories', 'profile', 'meta'],
      async (tx) => {
        const events = tx.objectStore('events');
        await events.clear();
        for (const e of state.events) await events.put(toRecord(e));
        const memories = tx.objectStore('memories');
        await memories.clear();
        let pos = 0;
        for (const m of state.memories) await memories.put({ id: m.id, pos: pos++, memory: m });
        const profile = tx.objectStore('profile');
        await profile.clear();
        if (state.profile) await profile.put(state.profile, PROFILE_KEY);
        const old = await tx.objectStore('meta').get(META_KEY);
        const revision = (old?.revision ?? 0) + 1;
        await tx.objectStore('meta').put(metaOf(state, state.nextSeq, revision, old), META_KEY);
        tx.done.then(
          () => (this.seenRevision = revision),
          () => undefined,
        );
      },
      () => {
        this.mem!.state = structuredClone(state);
      },
    );
  }

  /**
   * Erase everything of this profile (every store, caches included), in one transaction. The
   * database is cleared even in memory mode, and a successful erase leaves memory mode.
   */
  async erase(): Promise<void> {
    await this.tx([...ALL_STORES, 'ledger'], async (tx) => {
      const old = await tx.objectStore('meta').get(META_KEY);
      for (const name of ALL_STORES) await tx.objectStore(name).clear();
      // why: the ledger's spent budget survives the erase (erasing must not buy a fresh budget);
      // its unspent tokens go with the memory
      const ledger = await tx.objectStore('ledger').get(LEDGER_KEY);
      if (ledger) await tx.objectStore('ledger').put({ entries: ledger.entries, tokens: [] }, LEDGER_KEY);
      // the revision survives the erase (bumped), so other tabs notice it
      const revision = (old?.revision ?? 0) + 1;
      await tx.objectStore('meta').put(metaOf(createState(), 1, revision), META_KEY);
      tx.done.then(
        () => (this.seenRevision = revision),
        () => undefined,
      );
    });
    // the database now holds exactly the (empty) state: leave memory mode if we were in it.
    this.mem = null;
  }

  /**
   * The privacy-budget ledger ({@link LedgerRecord}; empty when nothing was charged). Read from
   * the database even in memory mode: the ledger is never kept in memory only.
   */
  async loadLedger(): Promise<LedgerRecord> {
    const tx = await this.transaction(['ledger'], 'readonly');
    const rec = await tx.objectStore('ledger').get(LEDGER_KEY);
    await tx.done;
    return rec ? structuredClone(rec) : { entries: [], tokens: [] };
  }

  /**
   * Write the ledger. Never degrades to memory: when this fails (quota), it throws and the
   * caller must not send the report the charge was for (the budget fails closed).
   */
  async saveLedger(ledger: LedgerRecord): Promise<void> {
    await this.tx(['ledger'], async (tx) => void (await tx.objectStore('ledger').put(structuredClone(ledger), LEDGER_KEY)));
  }

  /** Clear the ledger: spent budget and held tokens (only on the shopper's explicit request). */
  async resetLedger(): Promise<void> {
    await this.tx(['ledger'], async (tx) => void (await tx.objectStore('ledger').clear()));
  }

  /** A cached item vector of an embedder, or `undefined`. */
  async getItemVector(embedderId: string, itemId: string): Promise<Float32Array | undefined> {
    const hit = this.mem?.vectors.get(vectorKey(embedderId, itemId));
    if (hit) return new Float32Array(hit);
    const tx = await this.transaction(['itemVectors'], 'readonly');
    const rec = await tx.objectStore('itemVectors').get([embedderId, itemId]);
    await tx.done;
    return rec?.vector;
  }

  /** Every cached item vector of one embedder, by cache key (one transaction). */
  async itemVectorsOf(embedderId: string): Promise<Map<string, Float32Array>> {
    const out = new Map<string, Float32Array>();
    const tx = await this.transaction(['itemVectors'], 'readonly');
    const recs = await tx.objectStore('itemVectors').getAll(IDBKeyRange.bound([embedderId, ''], [embedderId, '\uffff']));
    await tx.done;
    for (const r of recs) out.set(r.itemId, r.vector);
    if (this.mem) for (const [k, v] of this.mem.vectors) if (k.startsWith(`${embedderId}\u0000`)) out.set(k.slice(embedderId.length + 1), v);
    return out;
  }

  /** Cache item vectors of one embedder (one transaction). */
  async putItemVectors(embedderId: string, vectors: Iterable<[itemId: string, vector: Float32Array]>): Promise<void> {
    if (typeof embedderId !== 'string' || embedderId.length === 0) throw new TypeError('embedderId must be a non-empty string');
    const list = [...vectors].map(([itemId, v]) => {
      if (!(v instanceof Float32Array)) throw new TypeError(`vector of ${itemId} must be a Float32Array`);
      return { embedderId, itemId, vector: new Float32Array(v) };
    });
    await this.write(
      ['itemVectors'],
      async (tx) => {
        for (const r of list) await tx.objectStore('itemVectors').put(r);
      },
      () => {
        for (const r of list) this.mem!.vectors.set(vectorKey(embedderId, r.itemId), r.vector);
      },
    );
  }

  /** Close the connection. Later calls reject. */
  close(): void {
    this.closed = true;
    const p = this.dbPromise;
    this.dbPromise = null;
    p?.then((db) => db.close()).catch(() => undefined);
  }
}
