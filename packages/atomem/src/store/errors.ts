/**
 * Named errors of the store: only the cases a caller must branch on.
 */

/** An import file was refused. `field` names the offending path, e.g. `state.memories[2].embedding.vector[5]`. */
export class InvalidImportError extends Error {
  override readonly name = 'InvalidImportError';
  /** Path of the bad field inside the import file (`''` for the file itself). */
  readonly field: string;
  constructor(field: string, problem: string) {
    super(`invalid import: ${field || 'file'} ${problem}`);
    this.field = field;
  }
}

/**
 * The browser refused a write for lack of storage (a `QuotaExceededError` DOMException).
 * The failed transaction was rolled back (the database holds its previous contents) and the
 * store switched to in-memory mode (`store.degraded === true`): the write that failed and every
 * later write are kept in memory for this session only. Thrown once, by the write that failed.
 */
export class StorageQuotaError extends Error {
  override readonly name = 'StorageQuotaError';
  constructor(options?: { cause?: unknown }) {
    super('storage quota exceeded: the database was left unchanged and the store now keeps writes in memory only', options);
  }
}

/** True for the DOMException (or its newer `QuotaExceededError` subclass) browsers raise when storage is full. */
export function isQuotaExceeded(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'QuotaExceededError';
}
