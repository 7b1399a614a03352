/**
 * Which reasons a card shows, as data: each ranked item's reasons (`core/rank.ts`) become at most
 * a few {@link Why} records — the kind of reason, the shopper's items it names (id and title),
 * what the shopper did with them, the memory or intent behind it. No wording here: the page turns
 * them into sentences (`reason/wording.ts` is the default English; a shop may replace it), so a
 * shop can translate or restyle every reason.
 */
import type { RankedItem, Reason } from './rank.js';
import type { Action } from './types.js';

/** Resolve an item id to its title. */
export type TitleOf = (itemId: string) => string | undefined;

/** What the shopper did with an item (their strongest action on it), for action-aware wording. */
export type ActionOf = (itemId: string) => Action | undefined;

/** An item a reason names: its id and title (the title is the id when the catalog has none). */
export interface WhyItem {
  id: string;
  title: string;
}

/** How a shop-model reason relates the card to the shopper's item, by the signal behind it. */
export type ShopBasis =
  /** Co-occurrence in the shop's orders (`ease`, `easeRecent`, `knn`, `knnRecent`): bought together. */
  | 'bought-together'
  /** Bought right after (`markov`). */
  | 'bought-next'
  /** The shop's collaborative vectors (`vec`, `vecRecent`): liked by the same shoppers. */
  | 'liked-together'
  /** The sequence model (`sasrec`): what comes next. */
  | 'comes-next'
  /** The shop's popularity (`pop`). */
  | 'popular'
  /** Recent popularity (`trend`). */
  | 'trending'
  /** Any other signal: shoppers with a similar history. */
  | 'similar-history';

/**
 * One reason a card shows, as data. `items`: the shopper's items it names (at most one today);
 * `action`: what the shopper did with `items[0]` (undefined: nothing recorded, e.g. only looked at).
 */
export type Why =
  /** A memory of the shopper's: close to one of its items (`items`), or to the memory itself (`similarity`: cosine). */
  | { kind: 'memory'; memoryId: string; interest: string; items?: WhyItem[]; action?: Action; similarity: number }
  /** What the shopper did recently with `items[0]`. */
  | { kind: 'recent'; items: WhyItem[]; action?: Action }
  /** A community of the shared index the shopper's memory belongs to (`summary` may be empty: then `size` shoppers). */
  | { kind: 'community'; communityId: string; summary: string; size: number }
  /** Popular among the shopper's communities (`share` of their picks, 0..1). */
  | { kind: 'popular'; share: number }
  /** The shop's published model; `items[0]`: the shopper's item behind it, when known. */
  | { kind: 'shop'; basis: ShopBasis; items?: WhyItem[]; action?: Action }
  /** A first visit's order: the shop's or the community's popularity (`share`), or a spread across the catalog (`variety`). */
  | { kind: 'prior'; prior: 'shop-popularity' | 'community-popularity' | 'variety'; share?: number }
  /**
   * The stated intent: matched (with the memory it met, `memoryId` / `interest`, and that memory's
   * item closest to the card with what the shopper did with it), or `matched: false`: it matched
   * no candidate and the list is ranked without it.
   */
  | { kind: 'intent'; intent: string; matched: boolean; memoryId?: string; interest?: string; items?: WhyItem[]; action?: Action }
  /** Brought into the first row for another of the shopper's interests (diversification). */
  | { kind: 'other-interest'; memoryId: string; interest: string }
  /** The card's score is below the list's mean: nothing is claimed. */
  | { kind: 'low-score' }
  /** Nothing supports the card yet. */
  | { kind: 'no-support' }
  /** The language model's own one-line reason for its reordering (free text, in the model's words). */
  | { kind: 'model'; text: string };

/** The kinds of {@link Why}. */
export type WhyKind = Why['kind'];

/**
 * Identity of a reason as shown: two reasons with equal keys read the same, so a card shows it
 * once and a row does not lead with it twice. Numbers count as far as they are shown (a
 * similarity to 2 decimals, a share to 0.1 %); a community by its summary when it has one.
 */
export function whyKey(w: Why): string {
  switch (w.kind) {
    case 'memory':
      return JSON.stringify(['memory', w.interest, w.items?.[0]?.id, w.items ? w.action : w.similarity.toFixed(2)]);
    case 'community':
      return JSON.stringify(['community', w.summary || w.size]);
    case 'popular':
      return JSON.stringify(['popular', (w.share * 100).toFixed(1)]);
    case 'shop':
      // without the shopper's item, every basis but popularity reads as shoppers with a similar history
      return w.items || w.basis === 'popular' || w.basis === 'trending' ? JSON.stringify(w) : JSON.stringify(['shop']);
    case 'prior':
      return JSON.stringify(['prior', w.prior, w.prior === 'community-popularity' ? ((w.share ?? 0) * 100).toFixed(1) : '']);
    default:
      return JSON.stringify(w);
  }
}

/**
 * The card's reasons as data, strongest first (at most `max`, each shown once). A card with a
 * negative score gets none but `low-score`; a card nothing supports gets `no-support`.
 * `actionOf` says what the shopper did with a named item.
 */
export function explain(item: RankedItem, titleOf: TitleOf, max = 3, actionOf?: ActionOf): Why[] {
  if (item.score < 0) return [{ kind: 'low-score' }];
  const out: Why[] = [];
  const keys = new Set<string>();
  for (const r of item.reasons) {
    if (out.length >= max) break;
    // why: a variety order's reason has no contribution but is the truth about the card's place
    // and an intent that matched nothing says so, whatever else the card has
    if (r.contribution <= 0 && !(r.kind === 'prior' && r.prior === 'variety') && !(r.kind === 'intent' && r.matched === false)) continue;
    const w = whyOf(r, titleOf, actionOf);
    const k = whyKey(w);
    if (!keys.has(k)) keys.add(k), out.push(w);
  }
  if (out.length === 0) out.push({ kind: 'no-support' });
  return out;
}

const BASIS: Record<string, ShopBasis> = {
  ease: 'bought-together',
  easeRecent: 'bought-together',
  knn: 'bought-together',
  knnRecent: 'bought-together',
  markov: 'bought-next',
  vec: 'liked-together',
  vecRecent: 'liked-together',
  sasrec: 'comes-next',
  pop: 'popular',
  trend: 'trending',
  popRecent: 'trending',
};

/** One ranking reason as data (see {@link Why}). */
export function whyOf(r: Reason, titleOf: TitleOf, actionOf?: ActionOf): Why {
  const item = (id: string): WhyItem[] => [{ id, title: titleOf(id) ?? id }];
  const act = (id: string, given?: Action) => {
    const a = given ?? actionOf?.(id);
    return a ? { action: a } : {};
  };
  switch (r.kind) {
    case 'memory':
      return r.item === undefined
        ? { kind: 'memory', memoryId: r.memoryId, interest: r.content, similarity: r.similarity }
        : { kind: 'memory', memoryId: r.memoryId, interest: r.content, items: item(r.item), ...act(r.item), similarity: r.similarity };
    case 'recent':
      return { kind: 'recent', items: item(r.item), ...act(r.item, r.action) };
    case 'community':
      return { kind: 'community', communityId: r.communityId, summary: r.summary, size: r.size };
    case 'popular':
      return { kind: 'popular', share: r.share };
    case 'shop': {
      const basis = BASIS[r.signal] ?? 'similar-history';
      if (r.item === undefined || basis === 'popular' || basis === 'trending') return { kind: 'shop', basis };
      return { kind: 'shop', basis, items: item(r.item), ...act(r.item) };
    }
    case 'prior':
      return r.prior === 'community-popularity' ? { kind: 'prior', prior: r.prior, share: r.share ?? 0 } : { kind: 'prior', prior: r.prior };
    case 'intent': {
      if (r.matched === false) return { kind: 'intent', intent: r.intent, matched: false };
      if (r.memoryId && r.item)
        return {
          kind: 'intent',
          intent: r.intent,
          matched: true,
          memoryId: r.memoryId,
          ...(r.content !== undefined ? { interest: r.content } : {}),
          items: item(r.item),
          ...act(r.item, r.action),
        };
      if (r.memoryId && r.content) return { kind: 'intent', intent: r.intent, matched: true, memoryId: r.memoryId, interest: r.content };
      return { kind: 'intent', intent: r.intent, matched: true };
    }
  }
}
