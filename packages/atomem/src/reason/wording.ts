/**
 * The default English wording of a card's reasons: one sentence per {@link Why}. The worker sends
 * reasons as data; the page words them with {@link renderWhy} unless the shop gives its own
 * renderer (`createAtomem({ renderWhy })`), e.g. to translate. One verb table says what the
 * shopper did with an item, for every sentence.
 */
import type { Why } from '../core/explain.js';
import type { Action } from '../core/types.js';

/** Turns one reason into the sentence the shopper reads. */
export type WhyRenderer = (why: Why) => string;

/** What the shopper did with an item, `{item}` standing for its title (the one verb table). */
export const ACTION_VERBS: Readonly<Record<Action, string>> = Object.freeze({
  purchase: 'bought {item}',
  cart: 'added {item} to your cart',
  like: 'liked {item}',
  rate: 'rated {item}',
  click: 'looked at {item}',
  view: 'looked at {item}',
  dislike: 'disliked {item}',
  skip: 'skipped {item}',
});

/** "bought Heat", "added Heat to your cart", … ; without a title: "bought", "added to your cart". Nothing recorded: looked at. */
export function did(action: Action | undefined, title?: string): string {
  const verb = ACTION_VERBS[action ?? 'view'] ?? ACTION_VERBS.view;
  return title === undefined ? verb.replace(' {item}', '') : verb.replace('{item}', title);
}

/** The stated intent, quoted short (it is the shopper's own text, shown back to them only). */
function quoteIntent(intent: string): string {
  return intent.length > 60 ? `${intent.slice(0, 59).trimEnd()}…` : intent;
}

/** The default English sentence of one reason. */
export const renderWhy: WhyRenderer = (w) => {
  switch (w.kind) {
    case 'memory': {
      const interest = `“${w.interest}”`;
      const it = w.items?.[0];
      if (!it) return `Matches your interest: ${interest} (similarity ${w.similarity.toFixed(2)}).`;
      return `Close to ${it.title}, which you ${did(w.action)}: your interest ${interest}.`;
    }
    case 'recent':
      return `Because you recently ${did(w.action, w.items[0].title)}.`;
    case 'community':
      return `Shoppers with a similar taste also chose it (${w.summary || `a community of ${w.size}`}).`;
    case 'popular':
      return `Popular among shoppers who share your interests (${(w.share * 100).toFixed(1)}% of their picks).`;
    case 'shop': {
      if (w.basis === 'popular') return 'Popular in this shop.';
      if (w.basis === 'trending') return 'Trending in this shop lately.';
      const it = w.items?.[0];
      if (!it) return 'The shop’s shoppers with a history like yours chose it.';
      const yours = w.action === 'purchase' ? '' : ` (you ${did(w.action, 'it')})`;
      if (w.basis === 'bought-together') return `People who bought ${it.title}${yours} also bought this.`;
      if (w.basis === 'bought-next') return `Often bought right after ${it.title}${yours}.`;
      if (w.basis === 'liked-together') return `Shoppers who like ${it.title}${yours} like this too.`;
      if (w.basis === 'comes-next') return `Often comes next after ${it.title}${yours}.`;
      return `Shoppers with a history like yours chose it (after ${it.title}).`;
    }
    case 'prior':
      if (w.prior === 'shop-popularity') return 'Popular in this shop (you have not browsed yet).';
      if (w.prior === 'community-popularity') return `Popular among shoppers (${((w.share ?? 0) * 100).toFixed(1)}% of their picks; you have not browsed yet).`;
      return 'A first pick across the catalog: what you look at next personalises this shelf.';
    case 'intent': {
      const asked = `“${quoteIntent(w.intent)}”`;
      if (!w.matched) return `Nothing here matches ${asked}: ranked by your own history instead.`;
      const it = w.items?.[0];
      if (w.memoryId && it) return `You asked for ${asked}; you ${did(w.action, it.title)}.`;
      if (w.memoryId && w.interest) return `You asked for ${asked}; it fits your interest “${w.interest}”.`;
      return `Matches what you asked for: ${asked}.`;
    }
    case 'other-interest':
      return `For another of your interests: “${w.interest}”.`;
    case 'low-score':
      return 'Little in your memory points to this item.';
    case 'no-support':
      return 'No memory supports this item yet.';
    case 'model':
      return w.text;
  }
};

/** A card's sentences: each reason worded by `render` (default {@link renderWhy}). */
export function renderReasons(why: readonly Why[], render: WhyRenderer = renderWhy): string[] {
  return why.map((w) => render(w));
}
