/**
 * Fits the shop scorer's combiner weights on validation cases and prints the table:
 *
 *   node -C atomem-source --import tsx packages/bench/src/tune-shop.ts --data DIR [--seed 2026] [--param shop.k=v]...
 *       [--epsilon 1,4,8,inf] [--extra sasrec] [--test] [--json FILE]
 *
 * Per configuration (ε): trains the model on the validation histories (every user's last two
 * interactions held out), computes every signal for every validation case from that user's own
 * history, reports each signal alone (NDCG@10), fits the weights (listwise softmax regression on
 * the z-scored signals, `packages/atomem/src/shop/fit.ts`), and reports the combination in-sample, by 5-fold
 * cross-validation over users, and with each signal left out (refitted). `--test` then trains on
 * the test histories and reads the test split once with the fitted weights. A DP configuration is
 * one noise draw, so each ε runs `--draws` (3) draws: weights fitted on the pooled cases, figures
 * the mean over draws (test: each draw listed). The weights printed
 * for ε = ∞ are the shipped `DEFAULT_WEIGHTS` of `packages/atomem/src/shop/score.ts`.
 */
import { writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { loadDataset } from './datasets.js';
import { bootstrapCI, mean } from './metrics.js';
import { buildProtocol, DEFAULT_SEED } from './protocol.js';
import { combineSignals as combine } from 'atomem/shop';
import { fitWeights, type FitCase } from 'atomem/shop';
import { shopModelSizes } from 'atomem/shop';
import { scorerOptionsFrom, shopSignals, trainForContext } from './shop-method.js';
import { caseSignals, contextFor, ndcgs, presentSignals, type EvalContext } from './shop-eval.js';
import type { EvalCase } from './types.js';
import './methods.js';

interface Row {
  config: string;
  split: 'validation' | 'test';
  what: string;
  ndcg10: number;
  ci?: [number, number];
}

function parseParam(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected key=value.');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

async function signalsFor(
  ctx: EvalContext,
  params: Record<string, string>,
  extraNames: string[],
): Promise<{ fit: FitCase[]; names: string[]; info: Record<string, unknown> }> {
  const { model, bytes, seconds } = await trainForContext(ctx, params);
  const providers = extraNames.map((n) => {
    const f = shopSignals.get(n);
    if (!f) throw new Error(`--extra: unknown signal ${n}`);
    return [n, f({ name: `shop-${n}`, privacy: 'off', seed: ctx.seed, params })] as const;
  });
  for (const [, p] of providers) await p.prepare(ctx);
  const fit = caseSignals(model, ctx.cases, scorerOptionsFrom(params));
  for (const [k, c] of ctx.cases.entries()) for (const [n, p] of providers) fit[k].signals[n] = await p.scores(c);
  const sizes = shopModelSizes(bytes);
  return {
    fit,
    names: [...presentSignals(model), ...extraNames],
    info: { fileBytes: bytes.length, sizes, trainSeconds: Number(seconds.toFixed(1)), privacy: model.privacy, lambda: model.info.lambda },
  };
}

function evaluate(cases: readonly EvalCase[], fit: readonly FitCase[], weights: Record<string, number>, seed: number): number[] {
  return ndcgs(
    cases,
    fit.map((f, k) => combine(f.signals, weights, cases[k].candidates.length)),
    seed,
    'shop',
  );
}

/**
 * 5-fold cross-validated NDCG@10 over users (weights refitted without each fold). With several
 * noise draws pooled, case k belongs to user k mod `users`, so a user's draws share a fold.
 */
function crossValidated(cases: readonly EvalCase[], fit: readonly FitCase[], names: string[], seed: number, folds = 5, users = cases.length): number {
  const out = new Float64Array(cases.length);
  const fold = (k: number) => (k % users) % folds;
  for (let f = 0; f < folds; f++) {
    const w = fitWeights(
      fit.filter((_, k) => fold(k) !== f),
      names,
    );
    const idx = cases.map((_, k) => k).filter((k) => fold(k) === f);
    const v = evaluate(
      idx.map((k) => cases[k]),
      idx.map((k) => fit[k]),
      w,
      seed,
    );
    idx.forEach((k, t) => (out[k] = v[t]));
  }
  return mean(out);
}

async function main(): Promise<void> {
  const o = new Command()
    .requiredOption('--data <dir>', 'ml-100k folder')
    .option('--seed <n>', 'seed', (v) => Number(v), DEFAULT_SEED)
    .option('--param <key=value>', 'shop.* parameter (repeatable)', parseParam, {} as Record<string, string>)
    .option('--epsilon <list>', 'ε values (inf = no DP)', 'inf')
    .option('--extra <names>', 'extra signals registered with registerShopSignal', '')
    .option('--draws <n>', 'noise draws per DP configuration', (v) => Number(v), 3)
    .option('--signals <names>', 'fit only these signals (default: all)', '')
    .option('--test', 'then read the test split once per configuration with the fitted weights')
    .option('--no-ablation', 'skip the leave-one-signal-out refits')
    .option('--json <file>', 'write the rows as JSON')
    .parse()
    .opts<{
      data: string;
      seed: number;
      param: Record<string, string>;
      epsilon: string;
      extra: string;
      test?: boolean;
      ablation: boolean;
      json?: string;
      signals: string;
      draws: number;
    }>();
  const dataset = loadDataset('movielens', o.data, {});
  const extra = o.extra.split(',').filter(Boolean);
  const rows: Row[] = [];
  const weightsOut: Record<string, Record<string, number>> = {};
  const print = (r: Row) => {
    rows.push(r);
    const ci = r.ci ? ` [${r.ci[0].toFixed(3)}, ${r.ci[1].toFixed(3)}]` : '';
    process.stdout.write(`| ${r.config} | ${r.split} | ${r.what} | ${r.ndcg10.toFixed(3)}${ci} |\n`);
  };
  process.stdout.write('| config | split | what | NDCG@10 [95% CI] |\n|---|---|---|---|\n');
  for (const eps of o.epsilon.split(',')) {
    const config = eps === 'inf' ? 'ε=∞' : `ε=${eps}`;
    // why: a DP model is one noise draw; its figures vary with the draw, so fit on and report over several.
    const draws = eps === 'inf' ? 1 : o.draws;
    const paramsOf = (r: number) => ({ ...o.param, ...(eps === 'inf' ? {} : { 'shop.epsilon': eps }), ...(r > 0 ? { 'shop.noiseSeed': String(r) } : {}) });
    const val = buildProtocol(dataset, { seed: o.seed, target: 'validation' });
    const vctx = contextFor(dataset, val, o.seed, 'validation');
    const runs: FitCase[][] = [];
    let all: string[] = [];
    for (let r = 0; r < draws; r++) {
      const got = await signalsFor(vctx, paramsOf(r), extra);
      runs.push(got.fit);
      all = got.names;
      if (r === 0) process.stderr.write(`${config}: ${JSON.stringify(got.info)}\n`);
    }
    const subset = o.signals.split(',').filter(Boolean);
    const names = subset.length ? all.filter((n) => subset.includes(n)) : all;
    const note = draws > 1 ? ` (mean of ${draws} noise draws)` : '';
    const meanOver = (f: (fit: FitCase[]) => number) => mean(runs.map(f));
    const ci = (v: number[]): [number, number] => bootstrapCI(v, { seed: o.seed });
    let refWeights: Record<string, number> | undefined;
    for (const n of names) {
      print({
        config,
        split: 'validation',
        what: `${n} alone${note}`,
        ndcg10: meanOver((fit) =>
          mean(
            ndcgs(
              val.cases,
              fit.map((f) => f.signals[n]),
              o.seed,
              `shop-${n}`,
            ),
          ),
        ),
      });
    }
    // Pooled over draws: the same users in every draw, so folds by user index stay disjoint.
    const pooledCases = runs.flatMap(() => val.cases);
    const pooled = runs.flat();
    const reference = ['ease', 'knn', 'knnRecent'].filter((n) => names.includes(n));
    if (reference.length === 3 && names.length > 3) {
      refWeights = fitWeights(pooled, reference);
      print({
        config,
        split: 'validation',
        what: `reference ensemble ease + knn + knnRecent (in-sample)${note}`,
        ndcg10: meanOver((fit) => mean(evaluate(val.cases, fit, refWeights!, o.seed))),
      });
    }
    const weights = fitWeights(pooled, names);
    weightsOut[config] = weights;
    const vIn = evaluate(val.cases, runs[0], weights, o.seed);
    print({
      config,
      split: 'validation',
      what: `combined (in-sample)${note}`,
      ndcg10: meanOver((fit) => mean(evaluate(val.cases, fit, weights, o.seed))),
      ci: draws === 1 ? ci(vIn) : undefined,
    });
    print({
      config,
      split: 'validation',
      what: `combined (5-fold CV over users)${note}`,
      ndcg10: crossValidated(pooledCases, pooled, names, o.seed, 5, val.cases.length),
    });
    if (o.ablation) {
      for (const n of names) {
        const w = fitWeights(
          pooled,
          names.filter((x) => x !== n),
        );
        print({
          config,
          split: 'validation',
          what: `without ${n} (refitted, in-sample)${note}`,
          ndcg10: meanOver((fit) => mean(evaluate(val.cases, fit, w, o.seed))),
        });
      }
    }
    process.stderr.write(`${config} weights: ${JSON.stringify(weights)}\n`);
    if (o.test) {
      const test = buildProtocol(dataset, { seed: o.seed, target: 'test' });
      const tctx = contextFor(dataset, test, o.seed, 'test');
      const per: number[][] = [];
      const refPer: number[] = [];
      const signalPer = new Map<string, number[][]>();
      for (let r = 0; r < draws; r++) {
        const t = await signalsFor(tctx, paramsOf(r), extra);
        per.push(evaluate(test.cases, t.fit, weights, o.seed));
        if (refWeights) refPer.push(mean(evaluate(test.cases, t.fit, refWeights, o.seed)));
        for (const n of names) {
          if (!signalPer.has(n)) signalPer.set(n, []);
          signalPer.get(n)!.push(
            ndcgs(
              test.cases,
              t.fit.map((f) => f.signals[n]),
              o.seed,
              `shop-${n}`,
            ),
          );
        }
      }
      const spread = (xs: number[]) => (xs.length > 1 ? ` (draws: ${xs.map((x) => x.toFixed(3)).join(', ')})` : '');
      const means = per.map(mean);
      print({
        config,
        split: 'test',
        what: `combined (validation weights)${note}${spread(means)}`,
        ndcg10: mean(means),
        ci: draws === 1 ? ci(per[0]) : undefined,
      });
      if (refWeights)
        print({ config, split: 'test', what: `reference ensemble ease + knn + knnRecent (validation weights)${note}`, ndcg10: mean(refPer), ci: undefined });
      for (const [n, v] of signalPer)
        print({ config, split: 'test', what: `${n} alone${note}`, ndcg10: mean(v.map(mean)), ci: draws === 1 ? ci(v[0]) : undefined });
    }
  }
  process.stdout.write(`\nweights (largest = 1):\n${JSON.stringify(weightsOut, null, 2)}\n`);
  if (o.json) writeFileSync(o.json, `${JSON.stringify({ params: o.param, seed: o.seed, rows, weights: weightsOut }, null, 2)}\n`);
}

main().catch((e: Error) => {
  process.stderr.write(`${e.stack ?? e.message}\n`);
  process.exit(1);
});
