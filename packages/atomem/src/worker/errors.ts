/**
 * Errors across the worker boundary: a thrown error becomes a {@link SerializedError}
 * (name, message, stack and the error's own primitive fields such as `itemId` or `field`)
 * and is thrown again on the other side as an `Error` with the same `name`.
 */
import { transferHandlers } from 'comlink';
import type { SerializedError } from './protocol.js';

/** Turn anything thrown into a {@link SerializedError}. */
export function serializeError(e: unknown): SerializedError {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  const details: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(e)) {
    if (k === 'name' || k === 'message' || k === 'stack') continue;
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') details[k] = v;
  }
  return { name: e.name, message: e.message, stack: e.stack, ...(Object.keys(details).length ? { details } : {}) };
}

/** Rebuild an `Error` with the same name, message, stack and detail fields. */
export function deserializeError(s: SerializedError): Error {
  const e = new Error(s.message);
  Object.assign(e, s.details ?? {});
  // why: own `name` property, so `e.name === 'UnknownItemError'` and the stack header reads right.
  Object.defineProperty(e, 'name', { value: s.name, writable: true, configurable: true, enumerable: false });
  if (s.stack) e.stack = s.stack;
  return e;
}

type Thrown = { value: unknown };
type Wire = { isError: true; value: SerializedError } | { isError: false; value: unknown };

let installed = false;

/**
 * Replace Comlink's `throw` transfer handler (in this realm) with one that keeps detail
 * fields. Both the worker and the client call it; idempotent. Comlink's handlers are
 * module-global, so this also applies to any other Comlink use on the same page (the wire
 * format stays compatible: `{ isError, value }`).
 */
export function installErrorTransfer(): void {
  if (installed) return;
  installed = true;
  const base = transferHandlers.get('throw');
  if (!base) throw new Error('comlink has no "throw" transfer handler to extend');
  transferHandlers.set('throw', {
    canHandle: base.canHandle,
    serialize(thrown: unknown): [Wire, Transferable[]] {
      const { value } = thrown as Thrown;
      return [value instanceof Error ? { isError: true, value: serializeError(value) } : { isError: false, value }, []];
    },
    deserialize(wire: unknown): never {
      const w = wire as Wire;
      if (w.isError) throw deserializeError(w.value);
      throw w.value;
    },
  });
}
