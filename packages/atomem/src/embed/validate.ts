/**
 * Input checks shared by every embedder, so all of them reject the same inputs with the same
 * message (a cached hit must not accept what the model would refuse).
 */

/**
 * Throw a `TypeError` naming the first bad index unless `texts` is an array of non-blank
 * strings. Blank (empty or whitespace-only) texts are refused: they carry no meaning, and
 * USE-lite would turn them into an all-padding row.
 */
export function assertValidTexts(texts: readonly unknown[]): asserts texts is readonly string[] {
  if (!Array.isArray(texts)) {
    throw new TypeError(`embed() expects an array of strings, got ${describe(texts)}`);
  }
  for (let i = 0; i < texts.length; i++) {
    const t = texts[i];
    if (typeof t !== 'string') {
      throw new TypeError(`embed(): texts[${i}] is ${describe(t)}, expected a non-empty string`);
    }
    if (t.trim().length === 0) {
      throw new TypeError(`embed(): texts[${i}] is ${t.length === 0 ? 'an empty string' : 'blank (whitespace only)'}; every text must be non-empty`);
    }
  }
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v === 'object' ? 'an object' : typeof v;
}

/**
 * Runs a model embedder's jobs one at a time, each on a copy of the caller's texts (validated
 * first), so peak memory stays at one batch under concurrent callers and a caller that mutates
 * its array while waiting changes nothing. A failed job does not block the next.
 */
export class SerialEmbedQueue<T> {
  private tail: Promise<unknown> = Promise.resolve();

  /** Validate `texts` (rejecting like {@link assertValidTexts}), then run `job` on a copy after every earlier job. */
  run(texts: readonly string[], job: (texts: readonly string[]) => Promise<T>): Promise<T> {
    try {
      assertValidTexts(texts);
    } catch (e) {
      return Promise.reject(e);
    }
    const snapshot = texts.slice();
    const result = this.tail.then(() => job(snapshot));
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves when every job queued so far has settled. */
  idle(): Promise<unknown> {
    return this.tail;
  }
}
