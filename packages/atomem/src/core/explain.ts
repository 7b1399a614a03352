/** Turn a ranked item's reasons into short, readable sentences (rules; an LLM may rewrite them). */
import type { RankedItem, Reason } from './rank.js';

/** Resolve an item id to its title for explanations. */
export type TitleOf = (itemId: string) => string | undefined;

/** One sentence per positive reason, strongest first (at most `max`). */
export function explain(item: RankedItem, titleOf: TitleOf, max = 3): string[] {
  const out: string[] = [];
  for (const r of item.reasons) {
    if (out.length >= max) break;
    if (r.contribution <= 0) continue;
    out.push(sentence(r, titleOf));
  }
  if (out.length === 0) out.push('No memory supports this item yet.');
  return out;
}

function sentence(r: Reason, titleOf: TitleOf): string {
  switch (r.kind) {
    case 'memory':
      return `Matches your interest: “${r.content}” (similarity ${r.similarity.toFixed(2)}).`;
    case 'recent':
      return `Because you recently looked at ${titleOf(r.item) ?? r.item}.`;
    case 'community':
      return `Shoppers with a similar taste also chose it (${r.summary || `a community of ${r.size}`}).`;
    case 'alsoPicked':
      return 'Shoppers who picked what you picked also picked it.';
    case 'intent':
      return intentSentence(r, titleOf);
    case 'popular':
      return `Popular among shoppers who share your interests (${(r.share * 100).toFixed(1)}% of their picks).`;
  }
}

/** The stated intent, quoted short (it is the shopper's own text, shown back to them only). */
function quoteIntent(intent: string): string {
  return intent.length > 60 ? `${intent.slice(0, 59).trimEnd()}…` : intent;
}

const DID: Partial<Record<string, string>> = { purchase: 'bought', cart: 'put in your cart', like: 'liked', rate: 'rated', click: 'looked at', view: 'looked at' };

/** "You asked for “hiking gifts”; you bought Trail Runner 3." or "Matches what you asked for: “hiking gifts”." */
function intentSentence(r: Extract<Reason, { kind: 'intent' }>, titleOf: TitleOf): string {
  const asked = `“${quoteIntent(r.intent)}”`;
  if (r.memoryId && r.item) return `You asked for ${asked}; you ${DID[r.action ?? ''] ?? 'liked'} ${titleOf(r.item) ?? r.item}.`;
  if (r.memoryId && r.content) return `You asked for ${asked}; it fits your interest “${r.content}”.`;
  return `Matches what you asked for: ${asked}.`;
}
