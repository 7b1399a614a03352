/**
 * Every benchmark method, registered. The CLI imports this module; `runBenchmark` uses
 * {@link methodFactories}. Add a method from another folder with `registerMethod` (from
 * `./registry.js`) and one import line in the marked block below.
 */
import { BprMethod, Bm25Method, EaseMethod, ItemKnnMethod, PopMethod, PopRecentMethod, RandomMethod } from './baselines.js';
import { methodFactories, paramNumber, registerMethod } from './registry.js';
import type { Setting } from './types.js';

// ─── additional method modules (atomem and its ablations): one import line each ────────
import './atomem-method.js';
import './sasrec-method.js';
import './shop-method.js';
// ─── end of additional method modules ──────────────────────────────────────────────────

export { methodFactories, registerMethod, PRIVACY_LEVELS } from './registry.js';
export type { MethodFactory, MethodOptions, RegisterOptions } from './registry.js';

/** The built-in baselines, in table order. */
export const BASELINE_METHODS = ['random', 'pop', 'bm25', 'itemknn', 'bpr', 'ease'] as const;

const num = paramNumber;

registerMethod('random', () => new RandomMethod(), { description: 'uniformly random order (seeded)' });
registerMethod('pop', () => new PopMethod(), { description: 'popularity: interaction counts before the test items' });
registerMethod('pop7d', ({ params }) => new PopRecentMethod(num(params, 'pop7d.days') ?? 7), {
  description: 'popularity over the last 7 days before the latest training event (protocol temporal: the week before the cut)',
  ablation: true,
});
registerMethod('bm25', ({ params }) => new Bm25Method({ k1: num(params, 'bm25.k1'), b: num(params, 'bm25.b') }), {
  description: 'BM25 of item texts against the history texts',
});
registerMethod('itemknn', () => new ItemKnnMethod(), { description: 'item-kNN, cosine co-occurrence summed over the history' });
registerMethod(
  'bpr',
  ({ params }) =>
    new BprMethod({
      factors: num(params, 'bpr.factors'),
      epochs: num(params, 'bpr.epochs'),
      lr: num(params, 'bpr.lr'),
      reg: num(params, 'bpr.reg'),
      regBias: num(params, 'bpr.regBias'),
      init: num(params, 'bpr.init'),
      userUniform: num(params, 'bpr.userUniform'),
      lrEnd: num(params, 'bpr.lrEnd'),
    }),
  { description: 'BPR-MF, 32 factors, centralized' },
);
registerMethod('ease', ({ params }) => new EaseMethod({ lambda: num(params, 'ease.lambda'), topItems: num(params, 'ease.topItems') }), {
  description: 'EASE linear autoencoder, lambda 500, centralized',
});

/** Default `--methods` of the full-ranking protocols (`loo-full`, `temporal`): methods that score the whole catalog. */
export function fullRankingMethods(protocol: 'loo-full' | 'temporal', ordinalTime = false): string[] {
  const list = ['pop', ...(protocol === 'temporal' && !ordinalTime ? ['pop7d'] : []), 'itemknn', 'ease', 'bpr', 'sasrec', 'shop', 'atomem'];
  return list.filter((m) => methodFactories.has(m));
}

/** Default `--methods`: the baselines first, then every other registered method in registration order (ablations only on request: `ablations`). */
export function defaultMethods(setting?: Setting): string[] {
  const builtin: string[] = BASELINE_METHODS.filter((m) => methodFactories.has(m));
  const inDefault = (m: string) => {
    const f = methodFactories.get(m)!;
    return !f.ablation && (!f.defaultIn || (setting !== undefined && f.defaultIn.includes(setting)));
  };
  return [...builtin, ...[...methodFactories.keys()].filter((m) => !builtin.includes(m) && inDefault(m))];
}
