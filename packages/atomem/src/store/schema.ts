/**
 * IndexedDB schema of one local profile's memory (database `atomem:<profile>`).
 * Bump {@link DB_VERSION} and add a `case` to {@link upgrade} for every schema change.
 */
import type { DBSchema, IDBPDatabase, IDBPTransaction, StoreNames } from 'idb';
import type { Action, AtomicMemory, PlannerSignal, Profile, Prototype } from '../core/types.js';

/** Current schema version of the database. */
export const DB_VERSION = 1;

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

/** A cached community prototype. */
export interface PrototypeRecord {
  id: string;
  /** Order in the cached list. */
  pos: number;
  prototype: Prototype;
  cachedAt: number;
}

/** A queued request for the shared index (consumed by the sync module). */
export type OutboxEntry =
  | { kind: 'upload'; sharedId: string; embedderId: string; vector: Float32Array; items?: string[]; queuedAt: number }
  | { kind: 'delete'; sharedId: string; token?: string; queuedAt: number };

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
  /** The sharing map of the state (`MemoryState.shared`): which memories have which copy in the shared index. */
  shared?: Record<string, { id: string; fingerprint: string }>;
  /** Protocol v2 reporting state (`MemoryState.reporting`): memoized randomization, last reported epoch. */
  reporting?: { memo: Record<string, { cohort: number; bucket: number }>; lastEpoch?: number };
  /** Per-profile secret from which deletion tokens of shared copies are derived (HMAC); never leaves the device. */
  deviceSecret?: string;
}

export const META_KEY = 'meta';
export const PROFILE_KEY = 'current';

/** Typed schema for `idb`. */
export interface AtomemDB extends DBSchema {
  events: { key: number; value: EventRecord; indexes: { 'by-pending': number } };
  memories: { key: string; value: MemoryRecord };
  profile: { key: string; value: Profile };
  prototypes: { key: string; value: PrototypeRecord };
  itemVectors: { key: [string, string]; value: ItemVectorRecord };
  outbox: { key: number; value: OutboxEntry };
  meta: { key: string; value: MetaRecord };
}

/** Every object store, for transactions that touch them all (erase). */
export const ALL_STORES: StoreNames<AtomemDB>[] = ['events', 'memories', 'profile', 'prototypes', 'itemVectors', 'outbox', 'meta'];

/**
 * Create or migrate the schema. Cases fall through on purpose: a database at version N runs
 * every step after N, in order, inside the single versionchange transaction.
 */
export function upgrade(
  db: IDBPDatabase<AtomemDB>,
  oldVersion: number,
  _newVersion: number | null,
  _tx: IDBPTransaction<AtomemDB, StoreNames<AtomemDB>[], 'versionchange'>,
): void {
  switch (oldVersion) {
    case 0: {
      const events = db.createObjectStore('events', { keyPath: 'seq' });
      events.createIndex('by-pending', 'pending');
      db.createObjectStore('memories', { keyPath: 'id' });
      db.createObjectStore('profile');
      db.createObjectStore('prototypes', { keyPath: 'id' });
      db.createObjectStore('itemVectors', { keyPath: ['embedderId', 'itemId'] });
      db.createObjectStore('outbox', { autoIncrement: true });
      db.createObjectStore('meta');
    }
    // falls through — future: case 1: migrate v1 → v2 here, using _tx for data moves.
  }
}
