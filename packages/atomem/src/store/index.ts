/**
 * `atomem/store`: IndexedDB storage of a user's memory tiers (events, atomic memories,
 * profile), with a cache of item vectors, and versioned export / import / erase.
 *
 * @example
 * const store = await MemoryStore.open({ profile: 'alice' });
 * const agent = new MemoryAgent({ items, state: await store.load() });
 * // … after agent work:
 * await store.saveState(agent.snapshot);
 */
export { MemoryStore } from './store.js';
export type { OpenStoreOptions } from './store.js';
/** Named errors: a refused import (with the bad field) and a full disk (store goes in-memory). */
export { InvalidImportError, StorageQuotaError, isQuotaExceeded } from './errors.js';
/** The export file format and its validation (usable without a store, e.g. to check a file). */
export { parseExportFile, toExportFile, EXPORT_FORMAT, EXPORT_VERSION } from './file.js';
export type { ExportFile, ExportedState, ExportedMemory } from './file.js';
/** Schema details, for tools and migrations. */
export { DB_VERSION, dbName } from './schema.js';
export type { AtomemDB, MetaRecord, LedgerRecord } from './schema.js';
