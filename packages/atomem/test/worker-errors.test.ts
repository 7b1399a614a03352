import { describe, expect, it } from 'vitest';
import {
  DisposedError,
  ERROR_CLASSES,
  InvalidCatalogError,
  InvalidImportError,
  InvalidIntentError,
  StorageQuotaError,
  UnknownItemError,
} from '../src/errors.js';
import { deserializeError, serializeError } from '../src/worker/errors.js';

// The worker ↔ page error transfer (src/worker/errors.ts), as pure functions: what the worker
// throws comes back as the same class, with its fields; the platform's errors stay the platform's.
// The real boundary (Comlink over a Worker's postMessage) is covered in packages/atomem/test/browser/client-errors.test.ts.

/** Serialize, structured-clone (what postMessage does), deserialize. */
const across = (e: unknown): Error => deserializeError(structuredClone(serializeError(e)));

describe('errors across the worker boundary', () => {
  it('every named class comes back as an instance of itself, with its fields, message and stack', () => {
    const cases: [Error, Record<string, unknown>][] = [
      [new UnknownItemError('sku-1'), { itemId: 'sku-1' }],
      [new InvalidIntentError('too-long', 'intent is 300 characters long'), { reason: 'too-long' }],
      [new InvalidImportError('state.memories[2]', 'is not an object'), { field: 'state.memories[2]' }],
      [new StorageQuotaError(), {}],
      [
        new InvalidCatalogError('duplicate', 4, 'tent', 'catalog[4] (id "tent") repeats the id of catalog[0]'),
        { reason: 'duplicate', index: 4, itemId: 'tent' },
      ],
      [new DisposedError('recommend', true), { method: 'recommend' }],
    ];
    for (const [original, fields] of cases) {
      const back = across(original);
      expect(back, original.name).toBeInstanceOf(ERROR_CLASSES[original.name]);
      expect(back).toBeInstanceOf(Error);
      expect(back.name).toBe(original.name);
      expect(back.message).toBe(original.message);
      expect(back.stack).toBe(original.stack);
      expect(back).toMatchObject(fields);
    }
    // InvalidIntentError and InvalidCatalogError are TypeErrors on both sides
    expect(across(new InvalidIntentError('empty', 'intent is empty'))).toBeInstanceOf(TypeError);
    expect(across(new InvalidCatalogError('title', 0, 'a', 'x'))).toBeInstanceOf(TypeError);
    expect(across(new UnknownItemError('x'))).not.toBeInstanceOf(TypeError);
  });

  it("the platform's errors stay the platform's: TypeError, RangeError, DOMException", () => {
    const t = across(new TypeError('interaction must be an object'));
    expect(t).toBeInstanceOf(TypeError);
    expect(t.name).toBe('TypeError');
    expect(across(new RangeError('atomem config: tau must be in [-1, 1]'))).toBeInstanceOf(RangeError);
    const d = across(new DOMException('the quota has been exceeded', 'QuotaExceededError'));
    expect(d).toBeInstanceOf(DOMException);
    expect(d.name).toBe('QuotaExceededError');
    expect(d.message).toBe('the quota has been exceeded');
  });

  it('an error without a class here keeps its name and fields on a plain Error; a thrown non-error becomes an Error', () => {
    const other = Object.assign(new Error('HTTP 503'), { name: 'ReportHttpError', status: 503 });
    const back = across(other);
    expect(back.constructor).toBe(Error);
    expect(back).toMatchObject({ name: 'ReportHttpError', message: 'HTTP 503', status: 503 });
    expect(across('a string')).toMatchObject({ name: 'Error', message: 'a string' });
  });
});
