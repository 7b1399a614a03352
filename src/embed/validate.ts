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
