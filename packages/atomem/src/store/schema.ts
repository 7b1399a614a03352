/**
 * IndexedDB schema of one local profile's memory (database `atomem:<profile>`).
 * Bump {@link DB_VERSION} and add a `case` to {@link upgrade} for every schema change.
 */
import type { DBSchema, IDBPDatabase, IDBPTransaction, StoreNames } from 'idb';
import type { Action, AtomicMemory, PlannerSignal, Profile } from '../core/types.js';

/** Current schema version of the database. */
export const DB_VERSION = 3;

/** Database name for a local profile. */
export function dbName(profile: string): string {
  return `atomem:${profile}`;
}

/** Tier 1 as stored: `pending` is 0/1 because booleans are not valid IndexedDB keys (it is indexed). */
export interface EventRecord {
  seq: number;
  item: string;
  at: number;
  action: Action;
  pending: 0 | 1;
}

/** Tier 2 as stored: `pos` keeps the state's memory order (the store is keyed by id). */
export interface MemoryRecord {
  id: string;
  pos: number;
  memory: AtomicMemory;
}

/** A cached item vector of one embedder. */
export interface ItemVectorRecord {
  embedderId: string;
  itemId: string;
  vector: Float32Array;
}

/** The single meta record (key {@link META_KEY}). */
export interface MetaRecord {
  schemaVersion: number;
  /** Embedder of the stored memories, `null` while there are none. */
  embedderId: string | null;
  nextSeq: number;
  signal: PlannerSignal;
  /**
   * Bumped by every write of the memory tiers (event, state, import, erase), so a second
   * engine on the same profile (another tab) sees that its in-memory copy is stale.
   * Absent in databases written before it existed (read as 0).
   */
  revision?: number;
  /** Protocol v2 reporting state (`MemoryState.reporting`): memoized randomization, last reported epoch. */
  reporting?: { memo: Record<string, { cohort: number; bucket: number }>; lastEpoch?: number };
}

/**
 * The device's privacy-budget ledger (object store `ledger`, key {@link LEDGER_KEY}): what this
 * shopper has spent on reports, and the Privacy Pass tokens it holds for coming epochs. It is
 * NOT cleared by `erase()` (only its tokens are): the budget outlives the memory it protected,
 * so erasing cannot buy a fresh budget. `resetPrivacyBudget()` clears it explicitly.
 */
export interface LedgerRecord {
  /** One entry per epoch charged (see sync/budget.ts), oldest first. */
  entries: { at: number; epoch: number; epsilon: number; q: number; sent: boolean }[];
  /** Unspent tokens, by the epoch they are for. */
  tokens: { epoch: number; token: string }[];
}

export const META_KEY = 'meta';
export const LEDGER_KEY = 'budget';
export const PROFILE_KEY = 'current';

/** Typed schema for `idb`. */
export interface AtomemDB extends DBSchema {
  events: { key: number; value: EventRecord; indexes: { 'by-pending': number } };
  memories: { key: string; value: MemoryRecord };
  profile: { key: string; value: Profile };
  itemVectors: { key: [string, string]; value: ItemVectorRecord };
  meta: { key: string; value: MetaRecord };
  ledger: { key: string; value: LedgerRecord };
}

/** Every object store of the memory (erase clears them; the `ledger` is not among them on purpose). */
export const ALL_STORES: StoreNames<AtomemDB>[] = ['events', 'memories', 'profile', 'itemVectors', 'meta'];

/** Object stores of schema version 1 that version 2 drops (the removed protocol v1's outbox and prototype cache). */
const DROPPED_IN_V2 = ['outbox', 'prototypes'];

/**
 * Create or migrate the schema. Cases fall through on purpose: a database at version N runs
 * every step after N, in order, inside the single versionchange transaction.
 */
export function upgrade(
  db: IDBPDatabase<AtomemDB>,
  oldVersion: number,
  _newVersion: number | null,
  tx: IDBPTransaction<AtomemDB, StoreNames<AtomemDB>[], 'versionchange'>,
): void {
  // biome-ignore-start lint/suspicious/noFallthroughSwitchClause: each upgrade step runs every later step too
  switch (oldVersion) {
    case 0: {
      const events = db.createObjectStore('events', { keyPath: 'seq' });
      events.createIndex('by-pending', 'pending');
      db.createObjectStore('memories', { keyPath: 'id' });
      db.createObjectStore('profile');
      db.createObjectStore('itemVectors', { keyPath: ['embedderId', 'itemId'] });
      db.createObjectStore('meta');
    }
    // falls through
    case 1: {
      // why: version 1 also held protocol v1's sync state (an outbox of uploads and deletions,
      // a prototype cache, the sharing map and the deletion-token secret in meta); v2 has none
      const raw = db as unknown as IDBPDatabase;
      for (const name of DROPPED_IN_V2) if (raw.objectStoreNames.contains(name)) raw.deleteObjectStore(name);
      if (oldVersion === 1) {
        const meta = tx.objectStore('meta');
        void meta.get(META_KEY).then((m) => {
          if (!m) return;
          const { shared: _shared, deviceSecret: _secret, ...rest } = m as MetaRecord & { shared?: unknown; deviceSecret?: unknown };
          return meta.put(rest, META_KEY);
        });
      }
    }
    // falls through
    case 2: {
      // the privacy-budget ledger (empty: nothing was charged before it existed)
      db.createObjectStore('ledger');
    }
    // falls through — future: case 3: migrate v3 → v4 here, using tx for data moves.
  }
  // biome-ignore-end lint/suspicious/noFallthroughSwitchClause: each upgrade step runs every later step too
}
