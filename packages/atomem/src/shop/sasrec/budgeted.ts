/**
 * SASRec for a shop of any size: {@link trainSasrec} with a wall-clock budget, the loss and
 * regularisation of {@link sasrecProfile} unless an option sets them (full-softmax
 * cross-entropy on catalogs of up to 4,096 items; above, sampled softmax over 1,024 shared
 * input/output item embeddings with lazy Adam on the embedding rows a step touches, so a step's
 * cost grows with the events of the batch and not with the catalog; dropout 0.5, L 50, lr 0.001
 * when histories average under 20 items), and early stopping on a validation split.
 *
 * Validation: the last item of up to `validationUsers` users (a seeded sample of those with at
 * least 3 items) is held out of their training sequence; every `evalEvery` steps the model
 * ranks it among `validationNegatives` items the user never had (sampled once, fixed; all of
 * them in a smaller catalog), and
 * NDCG@10 over those users is the figure. Training stops at the budget, at `maxEpochs`, or
 * when `patience` evaluations in a row did not beat the best by more than `minDelta`; the
 * weights of the best evaluation are returned.
 */
import { Rng } from '../../core/rng.js';
import { makeLayout, flatten, weightsView } from './layout.js';
import { encodeHistory, scoreItems, type SasrecWeights } from './model.js';
import { sasrecProfile } from './profile.js';
import { SASREC_DEFAULTS, trainSasrec, type SasrecTrainOptions } from './train.js';

export interface BudgetedOptions extends Omit<SasrecTrainOptions, 'budgetSeconds' | 'onStep' | 'onEpoch' | 'epochs' | 'sparseEmbeddings' | 'init'> {
  /** Wall-clock seconds for training (the validation passes included). Default 600. */
  budgetSeconds?: number;
  /** Upper bound on epochs (⌊users / batchSize⌋ steps each). Default 80. */
  maxEpochs?: number;
  /** Users whose last item is held out for validation. Default 1000 (0: no validation, no early stopping). */
  validationUsers?: number;
  /** Negatives ranked against each held-out item. Default 100. */
  validationNegatives?: number;
  /** Steps between validation passes. Default: one epoch, at most 200 and at least 10 steps. */
  evalEvery?: number;
  /** Validation passes without improvement before stopping. Default 3. */
  patience?: number;
  /** Smallest NDCG@10 gain that counts as an improvement. Default 1e-4. */
  minDelta?: number;
  /** Progress: fraction of the run done (by steps or by time, whichever is further) and the latest figures. */
  onProgress?: (p: BudgetedProgress) => void;
}

export interface BudgetedProgress {
  step: number;
  /** Planned steps (maxEpochs × steps per epoch). */
  plannedSteps: number;
  seconds: number;
  /** max(step / plannedSteps, seconds / budget), in [0, 1]. */
  fraction: number;
  /** Mean loss since the previous report. */
  loss: number;
  /** Set right after a validation pass. */
  validation?: { ndcg10: number; best: number; bestStep: number };
}

export interface BudgetedResult {
  weights: SasrecWeights;
  steps: number;
  seconds: number;
  threads: number;
  stoppedBy: 'epochs' | 'budget' | 'early-stopping';
  /** NDCG@10 of each validation pass (empty without validation). */
  validation: Array<{ step: number; ndcg10: number }>;
  /** The step whose weights are returned (the best validation pass; the last step without validation). */
  bestStep: number;
  validationUsers: number;
  /** The loss and regularisation trained with ({@link sasrecProfile}, then the options given). */
  settings: { loss: 'bce' | 'ce' | 'sampled-softmax'; negatives?: number; dropout: number; maxLen: number; lr: number };
}

/** Holds out the last item of a seeded sample of users with ≥ 3 items. */
export function validationSplit(
  sequences: ReadonlyArray<Int32Array>,
  numItems: number,
  users: number,
  negatives: number,
  seed: number,
): { train: Int32Array[]; cases: Array<{ history: Int32Array; candidates: Int32Array }> } {
  const eligible: number[] = [];
  sequences.forEach((s, u) => {
    if (s.length >= 3) eligible.push(u);
  });
  const rng = Rng.derive(seed, 'sasrec-validation');
  // partial Fisher–Yates: the first `take` of a seeded shuffle
  const take = Math.min(users, eligible.length);
  for (let k = 0; k < take; k++) {
    const j = k + rng.int(eligible.length - k);
    [eligible[k], eligible[j]] = [eligible[j], eligible[k]];
  }
  const chosen = new Set(eligible.slice(0, take));
  const train = sequences.map((s, u) => (chosen.has(u) ? s.subarray(0, s.length - 1) : s));
  const cases: Array<{ history: Int32Array; candidates: Int32Array }> = [];
  for (const u of eligible.slice(0, take)) {
    const s = sequences[u];
    const had = new Set(s);
    // a small catalog: every item the user never had
    const neg = Math.min(negatives, numItems - had.size);
    if (neg < 1) continue;
    const candidates = new Int32Array(neg + 1);
    candidates[0] = s[s.length - 1];
    const drawn = new Set<number>();
    for (let k = 1; k <= neg; ) {
      const it = 1 + rng.int(numItems);
      if (had.has(it) || drawn.has(it)) continue;
      drawn.add(it);
      candidates[k++] = it;
    }
    cases.push({ history: s.subarray(0, s.length - 1), candidates });
  }
  return { train, cases };
}

/** Mean NDCG@10 of the held-out items (candidate 0) among their candidates; ties count against. */
export function validationNdcg10(weights: SasrecWeights, cases: ReadonlyArray<{ history: Int32Array; candidates: Int32Array }>): number {
  if (cases.length === 0) return 0;
  let sum = 0;
  for (const c of cases) {
    const scores = scoreItems(weights, encodeHistory(weights, c.history), c.candidates);
    let rank = 0;
    for (let k = 1; k < scores.length; k++) if (scores[k] >= scores[0]) rank++;
    if (rank < 10) sum += 1 / Math.log2(rank + 2);
  }
  return sum / cases.length;
}

/** Trains SASRec within a time budget with early stopping; see the module comment. */
export async function trainSasrecBudgeted(sequences: ReadonlyArray<Int32Array>, numItems: number, options: BudgetedOptions = {}): Promise<BudgetedResult> {
  const {
    budgetSeconds = 600,
    maxEpochs = 80,
    validationUsers = 1000,
    validationNegatives = 100,
    patience = 3,
    minDelta = 1e-4,
    onProgress,
    evalEvery: evalEveryOpt,
    ...given
  } = options;
  // the catalog-scaled defaults; options set explicitly (not undefined) win
  const explicit = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as typeof given;
  const train: typeof given = { ...sasrecProfile(Math.max(1, numItems), sequences), ...explicit };
  if (explicit.loss !== undefined && explicit.loss !== 'sampled-softmax' && explicit.negatives === undefined) delete train.negatives;
  const loss = train.loss ?? 'sampled-softmax';
  if (!(budgetSeconds > 0)) throw new RangeError(`trainSasrecBudgeted: budgetSeconds must be positive, got ${budgetSeconds}`);
  if (!Number.isInteger(maxEpochs) || maxEpochs < 1) throw new RangeError(`trainSasrecBudgeted: maxEpochs must be a positive integer, got ${maxEpochs}`);
  if (!Number.isInteger(patience) || patience < 1) throw new RangeError(`trainSasrecBudgeted: patience must be a positive integer, got ${patience}`);
  const seed = train.seed ?? 2026;
  const { train: seqs, cases } =
    validationUsers > 0 ? validationSplit(sequences, numItems, validationUsers, validationNegatives, seed) : { train: [...sequences], cases: [] };
  const batchSize = train.batchSize ?? 128;
  const stepsPerEpoch = Math.max(1, Math.floor(seqs.length / batchSize));
  const evalEvery = evalEveryOpt ?? Math.max(10, Math.min(200, stepsPerEpoch));
  if (!Number.isInteger(evalEvery) || evalEvery < 1) throw new RangeError(`trainSasrecBudgeted: evalEvery must be a positive integer, got ${evalEvery}`);
  const plannedSteps = maxEpochs * stepsPerEpoch;

  const validation: Array<{ step: number; ndcg10: number }> = [];
  let best = -Infinity;
  let bestStep = 0;
  let bestFlat: Float32Array | undefined;
  let sinceBest = 0;
  let lossSum = 0;
  let lossSteps = 0;
  let lastReport = 0;
  let early = false;
  const r = await trainSasrec(seqs, numItems, {
    ...train,
    loss,
    epochs: maxEpochs,
    sparseEmbeddings: true,
    budgetSeconds,
    onStep: (step, loss, live, seconds) => {
      lossSum += loss;
      lossSteps++;
      const report = (v?: BudgetedProgress['validation']) => {
        onProgress?.({
          step,
          plannedSteps,
          seconds,
          fraction: Math.min(1, Math.max(step / plannedSteps, seconds / budgetSeconds)),
          loss: lossSum / lossSteps,
          ...(v ? { validation: v } : {}),
        });
        lossSum = 0;
        lossSteps = 0;
        lastReport = performance.now();
      };
      if (cases.length > 0 && step % evalEvery === 0) {
        const ndcg10 = validationNdcg10(live, cases);
        validation.push({ step, ndcg10 });
        if (ndcg10 > best + minDelta) {
          best = ndcg10;
          bestStep = step;
          sinceBest = 0;
          bestFlat = flatten(makeLayout(live.config, live.numItems), live);
        } else sinceBest++;
        report({ ndcg10, best, bestStep });
        if (sinceBest >= patience) {
          early = true;
          return false;
        }
      } else if (performance.now() - lastReport > 1000) report();
    },
  });
  let weights = r.weights;
  // the final weights count as a validation pass too (a budget may end between two passes)
  if (cases.length > 0 && !early && r.steps !== bestStep) {
    const ndcg10 = validationNdcg10(weights, cases);
    validation.push({ step: r.steps, ndcg10 });
    if (ndcg10 > best + minDelta) {
      best = ndcg10;
      bestStep = r.steps;
      bestFlat = undefined;
    }
    onProgress?.({
      step: r.steps,
      plannedSteps,
      seconds: r.seconds,
      fraction: 1,
      loss: lossSteps ? lossSum / lossSteps : Number.NaN,
      validation: { ndcg10, best, bestStep },
    });
  }
  if (bestFlat && bestStep !== r.steps) weights = weightsView(makeLayout(weights.config, weights.numItems), bestFlat);
  if (cases.length === 0) bestStep = r.steps;
  return {
    weights,
    steps: r.steps,
    seconds: r.seconds,
    threads: r.threads,
    stoppedBy: early ? 'early-stopping' : r.stoppedBy === 'budget' ? 'budget' : 'epochs',
    validation,
    bestStep,
    validationUsers: cases.length,
    settings: {
      loss,
      ...(loss === 'sampled-softmax' ? { negatives: train.negatives ?? 256 } : {}),
      dropout: train.dropout ?? SASREC_DEFAULTS.dropout,
      maxLen: train.maxLen ?? SASREC_DEFAULTS.maxLen,
      lr: train.lr ?? SASREC_DEFAULTS.lr,
    },
  };
}

/**
 * Per user, the items of the rows with a positive action weight, by time (stable: log order
 * among equal times), as indices 1..items of the log's item order; users with no such row are
 * left out. `until`: only rows before it.
 */
export function sequencesFromColumns(
  cols: { user: Int32Array; item: Int32Array; at: Float64Array; weight: Float32Array },
  userCount: number,
  until?: number,
): Int32Array[] {
  const n = cols.user.length;
  const keep = (r: number) => cols.weight[r] > 0 && !(until !== undefined && !(cols.at[r] < until));
  const start = new Int32Array(userCount + 1);
  for (let r = 0; r < n; r++) if (keep(r)) start[cols.user[r] + 1]++;
  for (let u = 0; u < userCount; u++) start[u + 1] += start[u];
  const order = new Int32Array(start[userCount]);
  const fill = start.slice(0, userCount);
  for (let r = 0; r < n; r++) if (keep(r)) order[fill[cols.user[r]]++] = r;
  const out: Int32Array[] = [];
  for (let u = 0; u < userCount; u++) {
    const a = start[u];
    const b = start[u + 1];
    if (a === b) continue;
    const rs = Array.from(order.subarray(a, b)).sort((x, y) => cols.at[x] - cols.at[y] || x - y);
    out.push(Int32Array.from(rs, (r) => cols.item[r] + 1));
  }
  return out;
}
