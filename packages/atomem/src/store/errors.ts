/**
 * Named errors of the store: only the cases a caller must branch on.
 */

import { InvalidImportError, StorageQuotaError } from '../errors.js';
/** A refused import (with the bad field) and a full disk: defined in `src/errors.ts` (the page rebuilds them as the same classes). */
export { InvalidImportError, StorageQuotaError };

/** True for the DOMException (or its newer `QuotaExceededError` subclass) browsers raise when storage is full. */
export function isQuotaExceeded(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'QuotaExceededError';
}
