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
    case 'popular':
      return `Popular among shoppers who share your interests (${(r.share * 100).toFixed(1)}% of their picks).`;
  }
}
