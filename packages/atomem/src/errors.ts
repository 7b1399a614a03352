/**
 * atomem's named errors: the cases a caller branches on. Exported from `atomem` (the page) and
 * `atomem/engine`; an error thrown in the worker is rebuilt on the page as an instance of the
 * same class (`src/worker/errors.ts`), so `e instanceof UnknownItemError` works there. Bad
 * arguments stay the platform's own `TypeError` / `RangeError` (and a browser's `DOMException`
 * stays one); the classes below exist where a caller has something to do about the case.
 *
 * No imports: the page's entry bundles this file, and it must stay small.
 */

/** Thrown for an item id the catalog does not know (`track`, `recommend`). `itemId` names it. */
export class UnknownItemError extends Error {
  override name = 'UnknownItemError';
  constructor(readonly itemId: string) {
    super(`unknown item "${itemId}": add it to the catalog before tracking or ranking it`);
  }
}

/** Why an intent was refused. */
export type InvalidIntentReason = 'type' | 'empty' | 'too-long';

/**
 * A stated intent that cannot be used: not a string, empty (or only whitespace / control
 * characters), or too long (`INTENT_MAX_CHARS` of `atomem/engine`: 200). A `TypeError`, so
 * callers that catch bad input generally catch it; `reason` says which case.
 */
export class InvalidIntentError extends TypeError {
  override name = 'InvalidIntentError';
  constructor(
    readonly reason: InvalidIntentReason,
    message: string,
  ) {
    super(message);
  }
}

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
 * later write are kept in memory for this session only. The engine reports it as an `error`
 * event (the call that hit it succeeds); the store throws it once, by the write that failed.
 */
export class StorageQuotaError extends Error {
  override readonly name = 'StorageQuotaError';
  constructor(options?: { cause?: unknown }) {
    super('storage quota exceeded: the database was left unchanged and the store now keeps writes in memory only', options);
  }
}

/** The catalog vector file (`catalogVectors`) is missing, malformed or made with another embedder. Nothing of it was used (an `error` event, never fatal). */
export class CatalogVectorsError extends Error {
  override name = 'CatalogVectorsError';
}

/** Why a catalog was refused. */
export type InvalidCatalogReason = 'not-array' | 'item' | 'id' | 'title' | 'categories' | 'description' | 'duplicate';

/**
 * The catalog given to `createAtomem` was refused (nothing started): an item that is not an
 * object, has no string id or title, bad `categories` / `description`, or an id used twice.
 * A `TypeError`; `index` is the offending item's position in the array (-1 for the catalog
 * itself), `itemId` its id when it has one, `reason` the case.
 */
export class InvalidCatalogError extends TypeError {
  override name = 'InvalidCatalogError';
  constructor(
    readonly reason: InvalidCatalogReason,
    readonly index: number,
    readonly itemId: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The client was disposed: every call still in flight when `dispose()` ran rejects with it at
 * once, and so does every later call. `method` names the call.
 */
export class DisposedError extends Error {
  override name = 'DisposedError';
  constructor(
    readonly method: string,
    inFlight: boolean,
  ) {
    super(
      inFlight ? `atomem was disposed while ${method}() was in flight: the call was abandoned` : `atomem is disposed: ${method}() needs a new createAtomem()`,
    );
  }
}

/**
 * The engine's worker could not start (bad URL, a script error, CSP) or died during a call. A
 * worker made by atomem (or by a `worker` factory) is started again on the next call.
 */
export class WorkerError extends Error {
  override name = 'WorkerError';
}

/**
 * Every class above, by `name`: how the page rebuilds an error thrown in the worker. A class
 * missing here crosses as a plain `Error` carrying the name (packages/atomem/test/package-readme.test.ts
 * checks that every error class of this file is listed).
 */
export const ERROR_CLASSES: Readonly<Record<string, new (...args: never[]) => Error>> = {
  UnknownItemError,
  InvalidIntentError,
  InvalidImportError,
  StorageQuotaError,
  CatalogVectorsError,
  InvalidCatalogError,
  DisposedError,
  WorkerError,
};
