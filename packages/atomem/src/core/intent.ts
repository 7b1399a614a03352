/**
 * The shopper's stated intent ("a gift for my dad, he hikes"): validation and the pure parts of
 * intent-conditioned ranking (ARS's instruction q_u). Embedding the intent and ranking with it
 * happen in the agent (`MemoryAgent.recommend(candidates, { intent })`); nothing here is stored.
 *
 * The intent is data written by the shopper, never instructions: it is cleaned of control
 * characters here and, in a language-model prompt, travels JSON-escaped inside the `<data>` block.
 */
import type { AtomicMemory, Item } from './types.js';
import { dot } from './vector.js';
import { InvalidIntentError, type InvalidIntentReason } from '../errors.js';

/** Longest intent accepted, in characters after cleaning (a sentence or two: what a search box takes). */
export const INTENT_MAX_CHARS = 200;

/** A refused intent (defined in `src/errors.ts`: the page rebuilds it as the same class). */
export { InvalidIntentError, type InvalidIntentReason };

/**
 * The intent as it is used: control and format characters (C0, C1, bidi controls, zero-width
 * characters, line and paragraph separators) replaced by spaces, whitespace collapsed, trimmed.
 * Throws {@link InvalidIntentError} for a non-string, an empty result, or one longer than
 * {@link INTENT_MAX_CHARS}.
 */
export function cleanIntent(intent: unknown): string {
  if (typeof intent !== 'string') throw new InvalidIntentError('type', `intent must be a string, got ${intent === null ? 'null' : typeof intent}`);
  const text = intent
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this strips
    .replace(/[\u0000-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2064\u2066-\u206f\ufeff]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
  if (text === '') throw new InvalidIntentError('empty', 'intent is empty: say what the shopper is looking for, or leave intent out');
  if (text.length > INTENT_MAX_CHARS) {
    throw new InvalidIntentError('too-long', `intent is ${text.length} characters long; at most ${INTENT_MAX_CHARS} are accepted`);
  }
  return text;
}

/** Function words and request words that say nothing about what is wanted. */
const STOPWORDS = new Set(
  (
    'a an and any are as at be but by for from get gift gifts give has have he her him his i im in into is it its looking look ' +
    'me my need new of on one or our she show so some something that the their them they this to up want wants we with you your please'
  ).split(' '),
);

/** A crude English stem: lower case, possessive and plural `s` dropped ("children's" → "children", "thrillers" → "thriller"). */
function stem(word: string): string {
  let w = word.replace(/['’]s$/, '').replace(/['’]/g, '');
  if (w.length > 3 && w.endsWith('ies')) w = `${w.slice(0, -3)}y`;
  else if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) w = w.slice(0, -1);
  return w;
}

/** Content words of a text (lower case, stemmed, stopwords and 1-letter words dropped). */
export function intentTerms(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.toLowerCase().split(/[^\p{L}\p{N}'’]+/u)) {
    const w = stem(raw);
    if (w.length < 2 || STOPWORDS.has(w)) continue;
    out.push(w);
  }
  return out;
}

/** How an item's words meet the intent's: see {@link termMatch}. */
export interface TermMatch {
  /** Share of the intent's content words found in the item's title, categories or description. */
  covered: number;
  /** Share of the item's categories all of whose words the intent names (0 without categories). */
  categories: number;
}

/**
 * Lexical match of an item with the intent's content words (`terms` from {@link intentTerms}):
 * a shop's own search box matches department names and titles, and an intent naming a
 * department ("a comedy") should find it exactly, whatever the embedder makes of it.
 */
export function termMatch(terms: ReadonlySet<string>, item: Item): TermMatch {
  if (terms.size === 0) return { covered: 0, categories: 0 };
  const words = new Set(intentTerms(`${item.title} ${(item.categories ?? []).join(' ')} ${item.description ?? ''}`));
  let hit = 0;
  for (const t of terms) if (words.has(t)) hit++;
  const cats = [...new Set(item.categories ?? [])].map(intentTerms).filter((ws) => ws.length > 0);
  const named = cats.filter((ws) => ws.every((w) => terms.has(w))).length;
  return { covered: hit / terms.size, categories: cats.length ? named / cats.length : 0 };
}

/** A memory the intent selected, with its similarity to the intent. */
export interface IntentMemory {
  memory: AtomicMemory;
  /** Cosine of the intent to the memory's content centroid. */
  similarity: number;
}

/**
 * STEAM-style retrieval with the intent as the query: the top `k` positive memories by cosine of
 * their content centroid (`centroidOf`, in the content space the intent was embedded in) to the
 * intent, keeping those at cosine ≥ `minSimilarity`. Best first.
 */
export function selectIntentMemories(
  memories: readonly AtomicMemory[],
  intent: Float32Array,
  centroidOf: (m: AtomicMemory) => Float32Array | undefined,
  k: number,
  minSimilarity: number,
): IntentMemory[] {
  const out: IntentMemory[] = [];
  for (const m of memories) {
    if (m.strength <= 0) continue;
    const c = centroidOf(m);
    if (!c) continue;
    const s = dot(c, intent);
    if (s >= minSimilarity) out.push({ memory: m, similarity: s });
  }
  return out.sort((a, b) => b.similarity - a.similarity || (a.memory.id < b.memory.id ? -1 : 1)).slice(0, k);
}
