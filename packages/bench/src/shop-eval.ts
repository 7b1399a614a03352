/**
 * Helpers the shop studies share (`tune-shop.ts`, `shop-study.ts`): NDCG@10 of per-case scores
 * with the bench's seeded tie-breaking, a method context for a protocol, and every scorer signal
 * of every case.
 */
import { ndcgAt, rankOf } from './metrics.js';
import { rankByScore, tieRng } from './baselines.js';
import type { Protocol } from './protocol.js';
import { SHOP_SIGNALS as SIGNALS, ShopScorer, type ScorerOptions } from 'atomem/shop';
import type { FitCase } from 'atomem/shop';
import type { ShopModel } from 'atomem/shop';
import { lastAt } from './shop-method.js';
import type { Dataset, EvalCase, MethodContext } from './types.js';

/** NDCG@10 per case of one score vector per case (ties by the stream (seed, `ties`, label, user)). */
export function ndcgs(cases: readonly EvalCase[], scores: readonly ArrayLike<number>[], seed: number, label: string): number[] {
  return cases.map((c, k) => ndcgAt(rankOf(rankByScore(c.candidates, scores[k], tieRng(seed, label, c.user)), c.test.item), 10));
}

/** A method context whose cases keep their targets: for this evaluator only, never handed to a method as-is for ranking. */
export type EvalContext = MethodContext & { cases: EvalCase[] };

/** A quiet method context over a protocol. */
export function contextFor(dataset: Dataset, p: Pick<Protocol, 'cases' | 'histories'>, seed: number, target: 'test' | 'validation'): EvalContext {
  return { dataset, cases: p.cases, histories: p.histories, seed, privacy: 'off', progress: () => {}, setting: 'full', target };
}

/** The built-in signals the model carries (no `trend` without trend counts, no `vec*` without vectors). */
export function presentSignals(model: ShopModel): string[] {
  return SIGNALS.filter((n) => (n !== 'trend' || model.trend) && (n !== 'popRecent' || model.popRecent) && (!n.startsWith('vec') || model.vectors));
}

/** Every built-in signal of every case, from each case's own history. */
export function caseSignals(model: ShopModel, cases: readonly EvalCase[], opts: ScorerOptions = {}): FitCase[] {
  const scorer = new ShopScorer(model, opts);
  return cases.map((c) => ({ signals: { ...scorer.signals(c.history, c.candidates, lastAt(c)) }, positive: c.candidates.indexOf(c.test.item) }));
}
