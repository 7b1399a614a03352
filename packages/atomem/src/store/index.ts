/**
 * The store's front, for the worker and the tests: IndexedDB storage of a user's memory tiers
 * (events, atomic memories, profile), with a cache of item vectors, and versioned export /
 * import / erase.
 *
 * @example
 * const store = await MemoryStore.open({ profile: 'alice' });
 * const agent = new MemoryAgent({ items, state: await store.load() });
 * // … after agent work:
 * await store.saveState(agent.snapshot);
 */
export { MemoryStore } from './store.js';
/** Named errors: a refused import (with the bad field) and a full disk (store goes in-memory). */
export { InvalidImportError, StorageQuotaError } from './errors.js';
/** Schema details, for tools and migrations. */
export { DB_VERSION, dbName } from './schema.js';
