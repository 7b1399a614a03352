/**
 * Errors across the worker boundary: a thrown error becomes a {@link SerializedError}
 * (name, message, stack and the error's own primitive fields such as `itemId` or `field`)
 * and is thrown again on the other side as an instance of the same class: atomem's named
 * errors (`src/errors.ts`), the platform's `TypeError`, `RangeError`, … and `DOMException`;
 * any other name becomes an `Error` carrying that name.
 */
import { transferHandlers } from 'comlink';
import { ERROR_CLASSES } from '../errors.js';
import type { SerializedError } from './protocol.js';

/** The JavaScript error classes every realm has, by name. */
const BUILTIN: Record<string, ErrorConstructor> = { Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError };

const isDomException = (e: unknown): e is DOMException => typeof DOMException === 'function' && e instanceof DOMException;

/** Turn anything thrown into a {@link SerializedError}. */
export function serializeError(e: unknown): SerializedError {
  const dom = isDomException(e);
  if (!(e instanceof Error) && !dom) return { name: 'Error', message: String(e) };
  const err = e as Error;
  const details: Record<string, string | number | boolean> = {};
  if (!dom) {
    for (const [k, v] of Object.entries(err)) {
      if (k === 'name' || k === 'message' || k === 'stack') continue;
      if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') details[k] = v;
    }
  }
  return {
    name: err.name,
    message: err.message,
    stack: err.stack,
    ...(dom ? { domException: true } : {}),
    ...(Object.keys(details).length ? { details } : {}),
  };
}

/**
 * Rebuild the error: an instance of atomem's class of that name (its constructor is not run:
 * the fields come from `details`), of the built-in class, a `DOMException`, or else an `Error`
 * with that name.
 */
export function deserializeError(s: SerializedError): Error {
  if (s.domException && typeof DOMException === 'function') {
    const d = new DOMException(s.message, s.name);
    if (s.stack) Object.defineProperty(d, 'stack', { value: s.stack, writable: true, configurable: true });
    return d as unknown as Error;
  }
  const named = Object.hasOwn(ERROR_CLASSES, s.name) ? ERROR_CLASSES[s.name] : undefined;
  const builtin = Object.hasOwn(BUILTIN, s.name) ? BUILTIN[s.name] : undefined;
  // why: Reflect.construct gives a real Error (message, stack) whose prototype is the named class's
  const e: Error = named ? (Reflect.construct(Error, [s.message], named) as Error) : new (builtin ?? Error)(s.message);
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
      return [value instanceof Error || isDomException(value) ? { isError: true, value: serializeError(value) } : { isError: false, value }, []];
    },
    deserialize(wire: unknown): never {
      const w = wire as Wire;
      if (w.isError) throw deserializeError(w.value);
      throw w.value;
    },
  });
}
