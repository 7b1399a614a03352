/** An `AbortError` carrying the signal's reason as its cause (what every model adapter throws on abort). */
export function abortError(signal?: AbortSignal): DOMException {
  const err = new DOMException('The operation was aborted', 'AbortError');
  if (signal?.reason !== undefined) Object.defineProperty(err, 'cause', { value: signal.reason });
  return err;
}

/**
 * Settles like `work`, except that an abort of `signal` rejects at once with an `AbortError`,
 * and an abort that lands while `work` is finishing still rejects (the caller asked to stop, so
 * it never gets a late result). Runtimes that only poll their signal between chunks (wllama)
 * may keep computing in the background; their own queue keeps later calls in order.
 */
export function raceAbort<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return work;
  if (signal.aborted) {
    work.catch(() => undefined);
    return Promise.reject(abortError(signal));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortError(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) reject(abortError(signal));
        else resolve(value);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}
