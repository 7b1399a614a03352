/** An `AbortError` carrying the signal's reason as its cause (what every model adapter throws on abort). */
export function abortError(signal?: AbortSignal): DOMException {
  const err = new DOMException('The operation was aborted', 'AbortError');
  if (signal?.reason !== undefined) Object.defineProperty(err, 'cause', { value: signal.reason });
  return err;
}
