/** Turn a ranked item's reasons into short, readable sentences (rules; an LLM may rewrite them). */
import type { RankedItem, Reason } from './rank.js';
import type { Action } from './types.js';

/** Resolve an item id to its title for explanations. */
export type TitleOf = (itemId: string) => string | undefined;

/** What the shopper did with an item (their strongest action on it), for action-aware wording. */
export type ActionOf = (itemId: string) => Action | undefined;

/** The sentence of a card whose score is below the list's mean: no "because", nothing claimed. */
export const LOW_SCORE_SENTENCE = 'Little in your memory points to this item.';
/** The sentence of a card nothing supports. */
export const NO_SUPPORT_SENTENCE = 'No memory supports this item yet.';

/**
 * One sentence per positive reason, strongest first (at most `max`). A card with a negative score
 * gets no positive reason ({@link LOW_SCORE_SENTENCE}); `actionOf` words an item by what the
 * shopper did with it (bought, added to the cart, looked at …; default: looked at).
 */
export function explain(item: RankedItem, titleOf: TitleOf, max = 3, actionOf?: ActionOf): string[] {
  if (item.score < 0) return [LOW_SCORE_SENTENCE];
  const out: string[] = [];
  for (const r of item.reasons) {
    if (out.length >= max) break;
    // why: a variety order's reason has no contribution but is the truth about the card's place
    // and an intent that matched nothing says so, whatever else the card has
    if (r.contribution <= 0 && !(r.kind === 'prior' && r.prior === 'variety') && !(r.kind === 'intent' && r.matched === false)) continue;
    const s = sentence(r, titleOf, actionOf);
    if (s && !out.includes(s)) out.push(s);
  }
  if (out.length === 0) out.push(NO_SUPPORT_SENTENCE);
  return out;
}

/** "bought X", "added X to your cart", "looked at X", … */
export function did(action: Action | undefined, title: string): string {
  switch (action) {
    case 'purchase':
      return `bought ${title}`;
    case 'cart':
      return `added ${title} to your cart`;
    case 'like':
      return `liked ${title}`;
    case 'rate':
      return `rated ${title}`;
    case 'dislike':
      return `disliked ${title}`;
    case 'skip':
      return `skipped ${title}`;
    default:
      return `looked at ${title}`;
  }
}

/** "bought", "added to your cart", "looked at", … (what you did with a named item). */
export function past(action: Action | undefined): string {
  const words: Partial<Record<Action, string>> = {
    purchase: 'bought',
    cart: 'added to your cart',
    like: 'liked',
    rate: 'rated',
    dislike: 'disliked',
    skip: 'skipped',
  };
  return (action && words[action]) ?? 'looked at';
}

/** Shop-model signals from co-occurrence lists (the shop's order log): "people who bought X also bought this". */
const CO_BOUGHT = new Set(['ease', 'easeRecent', 'knn', 'knnRecent']);
/** Shop-model signals from collaborative vectors. */
const CO_LIKED = new Set(['vec', 'vecRecent']);

function sentence(r: Reason, titleOf: TitleOf, actionOf?: ActionOf): string | undefined {
  const title = (id: string) => titleOf(id) ?? id;
  switch (r.kind) {
    case 'memory': {
      const interest = `“${r.content}”`;
      if (r.item === undefined) return `Matches your interest: ${interest} (similarity ${r.similarity.toFixed(2)}).`;
      return `Close to ${title(r.item)}, which you ${past(actionOf?.(r.item))}: your interest ${interest}.`;
    }
    case 'recent':
      return `Because you recently ${did(r.action ?? actionOf?.(r.item), title(r.item))}.`;
    case 'community':
      return `Shoppers with a similar taste also chose it (${r.summary || `a community of ${r.size}`}).`;
    case 'intent':
      return intentSentence(r, titleOf);
    case 'popular':
      return `Popular among shoppers who share your interests (${(r.share * 100).toFixed(1)}% of their picks).`;
    case 'shop':
      return shopSentence(r, title, actionOf);
    case 'prior':
      if (r.prior === 'shop-popularity') return 'Popular in this shop (you have not browsed yet).';
      if (r.prior === 'community-popularity') return `Popular among shoppers (${((r.share ?? 0) * 100).toFixed(1)}% of their picks; you have not browsed yet).`;
      return 'A first pick across the catalog: what you look at next personalises this shelf.';
  }
}

function shopSentence(r: Extract<Reason, { kind: 'shop' }>, title: (id: string) => string, actionOf?: ActionOf): string {
  const src = r.item;
  const yours = (id: string) => {
    const a = actionOf?.(id);
    return a === 'purchase' ? '' : ` (you ${did(a, 'it')})`;
  };
  if (r.signal === 'pop') return 'Popular in this shop.';
  if (r.signal === 'trend') return 'Trending in this shop lately.';
  if (src === undefined) return 'The shop’s shoppers with a history like yours chose it.';
  if (CO_BOUGHT.has(r.signal)) return `People who bought ${title(src)}${yours(src)} also bought this.`;
  if (r.signal === 'markov') return `Often bought right after ${title(src)}${yours(src)}.`;
  if (CO_LIKED.has(r.signal)) return `Shoppers who like ${title(src)}${yours(src)} like this too.`;
  if (r.signal === 'sasrec') return `Often comes next after ${title(src)}${yours(src)}.`;
  return `Shoppers with a history like yours chose it (after ${title(src)}).`;
}

/** The stated intent, quoted short (it is the shopper's own text, shown back to them only). */
function quoteIntent(intent: string): string {
  return intent.length > 60 ? `${intent.slice(0, 59).trimEnd()}…` : intent;
}

const DID: Partial<Record<string, string>> = {
  purchase: 'bought',
  cart: 'put in your cart',
  like: 'liked',
  rate: 'rated',
  click: 'looked at',
  view: 'looked at',
};

/**
 * "You asked for “hiking gifts”; you bought Trail Runner 3.", "Matches what you asked for: “hiking
 * gifts”." or, when the intent matched no candidate, "Nothing here matches “asdf”: …".
 */
function intentSentence(r: Extract<Reason, { kind: 'intent' }>, titleOf: TitleOf): string {
  const asked = `“${quoteIntent(r.intent)}”`;
  if (r.matched === false) return `Nothing here matches ${asked}: ranked by your own history instead.`;
  if (r.memoryId && r.item) return `You asked for ${asked}; you ${DID[r.action ?? ''] ?? 'liked'} ${titleOf(r.item) ?? r.item}.`;
  if (r.memoryId && r.content) return `You asked for ${asked}; it fits your interest “${r.content}”.`;
  return `Matches what you asked for: ${asked}.`;
}
