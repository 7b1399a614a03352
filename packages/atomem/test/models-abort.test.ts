import { describe, expect, it } from 'vitest';
import { raceAbort } from '../src/models/abort.js';

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('raceAbort', () => {
  it('passes the result through without a signal or when the signal never aborts', async () => {
    await expect(raceAbort(Promise.resolve(1))).resolves.toBe(1);
    await expect(raceAbort(Promise.resolve(2), new AbortController().signal)).resolves.toBe(2);
    await expect(raceAbort(Promise.reject(new TypeError('boom')), new AbortController().signal)).rejects.toThrow('boom');
  });

  it('rejects at once with AbortError (reason as cause) when the signal aborts before the work settles', async () => {
    const work = deferred<number>();
    const ctl = new AbortController();
    const raced = raceAbort(work.promise, ctl.signal);
    ctl.abort('user left');
    await expect(raced).rejects.toMatchObject({ name: 'AbortError', cause: 'user left' });
    work.resolve(3); // a late result is dropped
    work.reject(new Error('late')); // and so is a late failure (no unhandled rejection)
  });

  it('rejects for an already-aborted signal and never hands out a result computed after an abort', async () => {
    const ctl = new AbortController();
    ctl.abort();
    const failing = Promise.reject(new Error('ignored'));
    await expect(raceAbort(failing, ctl.signal)).rejects.toMatchObject({ name: 'AbortError' });
  });
});
