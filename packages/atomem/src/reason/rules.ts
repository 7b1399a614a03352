import type { Item } from '../core/types.js';
import type { ForwardStep, MemoryText, MemoryView, Reasoner, Reflection, RerankInput, RerankResult } from './types.js';

/** Up to `n` distinct titles, most recent first. */
function titles(items: readonly Item[], n: number): string[] {
  const out: string[] = [];
  for (let i = items.length - 1; i >= 0 && out.length < n; i--) {
    const t = items[i].title.trim();
    if (t && !out.includes(t)) out.push(t);
  }
  return out;
}

/** Categories ranked by how many items carry them (ties: first seen). */
export function rankCategories(items: readonly Item[]): string[] {
  const counts = new Map<string, number>();
  for (const it of items) for (const c of it.categories ?? []) counts.set(c, (counts.get(c) ?? 0) + 1);
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([c]) => c);
}

function joinList(xs: readonly string[]): string {
  if (xs.length <= 1) return xs.join('');
  return `${xs.slice(0, -1).join(', ')} and ${xs[xs.length - 1]}`;
}

/**
 * Categories that are not countable nouns (a department or a field, not a kind of item): they
 * describe items ("audio items", "outdoor gear") instead of taking a plural ("audios").
 */
const UNCOUNTABLE = new Set([
  'audio',
  'outdoor',
  'outdoors',
  'kitchen',
  'garden',
  'music',
  'clothing',
  'furniture',
  'jewelry',
  'jewellery',
  'luggage',
  'software',
  'hardware',
  'equipment',
  'gear',
  'homeware',
  'footwear',
  'beauty',
  'health',
  'home',
  'baby',
  'pet',
  'sports',
  'electronics',
  'stationery',
  'food',
  'grocery',
  'art',
  'lighting',
  'bedding',
  'decor',
  'apparel',
  'media',
  'action',
  'war',
]);

/** English plural of a category noun: "thriller" → "thrillers", "comedy" → "comedies", "watch" → "watches". */
export function pluralOf(category: string): string {
  const l = category.toLowerCase();
  if (/(s|sci-fi|film-noir|noir|horror|animation|fantasy)$/.test(l)) return l;
  if (/[^aeiou]y$/.test(l)) return `${l.slice(0, -1)}ies`;
  if (/(ch|sh|x|z)$/.test(l)) return `${l}es`;
  return `${l}s`;
}

/** "crime thrillers", "dramas", "audio items", "outdoor and audio items", … — a readable noun phrase for one or two categories. */
export function phrase(cats: readonly string[]): string {
  if (cats.length === 0) return 'items';
  const [a, b] = cats.map((c) => c.toLowerCase());
  if (cats.length === 1) return UNCOUNTABLE.has(a) ? `${a} items` : pluralOf(cats[0]);
  // two departments ("outdoor", "audio") are two interests joined; an adjective genre qualifies a noun one ("crime thrillers")
  if (UNCOUNTABLE.has(b)) return UNCOUNTABLE.has(a) ? `${a} and ${b} items` : `${pluralOf(cats[0])} and ${b} items`;
  return `${a} ${pluralOf(cats[1])}`;
}

function verb(strength: number): string {
  if (strength <= -0.3) return 'Avoids';
  if (strength < 0) return 'Is lukewarm about';
  if (strength >= 0.6) return 'Loves';
  if (strength >= 0.3) return 'Enjoys';
  return 'Shows some interest in';
}

/**
 * The rules reasoner: every memory operation done from item text, without a model.
 * Deterministic, instant, and the fallback for each LLM operation.
 */
export class RulesReasoner implements Reasoner {
  readonly id = 'rules';

  async describeMemory(input: { items: Item[]; strength: number; previous?: MemoryText }): Promise<MemoryText> {
    return describe(input.items, input.strength);
  }

  async reflect(step: ForwardStep): Promise<Reflection> {
    const misled = step.correct
      ? []
      : step.misleading.filter((m) => !step.supporting.some((s) => s.memory.id === m.memory.id && s.similarity >= step.tau)).map((m) => m.memory.id);
    // why: a dislike consolidates into a matching negative memory, a like into a positive one.
    const polarity = Math.sign(step.weight) || 1;
    const best = step.supporting.find((s) => s.similarity >= step.tau && Math.sign(s.memory.strength || polarity) === polarity);
    if (best) {
      return {
        decision: 'consolidate',
        target: best.memory.id,
        misled,
        insight: step.correct ? `${step.actual.title} confirms "${best.memory.content}"` : `${step.actual.title} refines "${best.memory.content}"`,
      };
    }
    return {
      decision: 'form',
      misled,
      insight: `${step.actual.title} shows an interest no memory explains yet`,
    };
  }

  async mergeMemories(a: MemoryView, b: MemoryView): Promise<MemoryText> {
    const strength = (a.strength * a.evidence + b.strength * b.evidence) / Math.max(1e-9, a.evidence + b.evidence);
    return describe([...a.items, ...b.items], strength);
  }

  async summarizePrototype(input: { items: Item[]; size: number }): Promise<string> {
    const cats = rankCategories(input.items).slice(0, 2);
    const t = titles(input.items, 3);
    return `${input.size} shoppers' interests in ${phrase(cats)}${t.length ? `, e.g. ${joinList(t)}` : ''}`;
  }

  async synthesizeProfile(memories: MemoryView[]): Promise<string> {
    if (memories.length === 0) return 'No interests known yet.';
    const likes = memories.filter((m) => m.strength > 0).slice(0, 5);
    const dislikes = memories.filter((m) => m.strength < 0).slice(0, 2);
    const parts: string[] = [];
    if (likes.length) parts.push(`Main interests: ${likes.map((m) => m.content.replace(/\.$/, '')).join('; ')}.`);
    if (dislikes.length) parts.push(`Tends to avoid: ${dislikes.map((m) => m.content.replace(/\.$/, '')).join('; ')}.`);
    return parts.join(' ');
  }

  /** The engine's order stands; the engine's own explanations say why (no extra reason). */
  async rerank(input: RerankInput): Promise<RerankResult> {
    return { order: input.candidates.map((c) => ({ id: c.id, why: '' })) };
  }
}

function describe(items: readonly Item[], strength: number): MemoryText {
  const cats = rankCategories(items);
  const category = cats[0] ?? 'General';
  const t = titles(items, 3);
  const examples = t.length ? ` such as ${joinList(t)}` : '';
  return { content: `${verb(strength)} ${phrase(cats.slice(0, 2))}${examples}`, category };
}
