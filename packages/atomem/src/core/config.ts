import { checkNames } from '../options.js';
import { ACTION_WEIGHTS, type Action } from './types.js';

/**
 * Every knob of the memory engine, with defaults. STEAM's paper settings are `tau = 0.5`,
 * `k1 = 2`, `k2 = 1`; the rest are atomem's (ARS has no published constants).
 */
export interface AtomemConfig {
  /**
   * Similarity threshold (STEAM's tau): a memory is retrieved for an item, and an item
   * consolidates into a memory, only at cosine ≥ tau.
   * Paper: 0.5 with all-MiniLM-L6-v2. Embedders differ in how their cosines spread, so each
   * embedder may want its own value (see `defaultsFor`).
   */
  tau: number;
  /** Relation extraction (STEAM's k1): each memory links to its top-k1 community prototypes of the release. Paper best: 2. */
  k1: number;
  /** Own memories retrieved per candidate (STEAM's k2). Paper best: 1. */
  k2: number;
  /** Length of the event FIFO (ARS tier 1). Oldest events drop out first. */
  maxEvents: number;
  /** Recent events the ranker looks at (ARS: ranking consumes profile + recent events). */
  recentEvents: number;
  /** Linked interactions kept per memory (most recent kept). */
  maxItemsPerMemory: number;
  /** Upper bound on atomic memories; the weakest are forgotten beyond it. */
  maxMemories: number;
  /** Learning rate of reinforce/weaken on strength. */
  learningRate: number;
  /** Strength of a freshly formed memory (times the action weight). */
  initialStrength: number;
  /** Two memories at cosine ≥ mergeThreshold are merged (ARS merge). */
  mergeThreshold: number;
  /**
   * A single-item memory never reinforced is absorbed (merged) at a sweep into its nearest
   * established memory (several items or reinforced) of the same polarity at cosine ≥ `tau × absorbSingletons` (see
   * `singletonAbsorptions` in planner.ts); 0 = never. Keeps a shopper's memory at one memory
   * per sub-interest instead of a pile of single-item ones.
   */
  absorbSingletons: number;
  /** Memories whose |strength| falls below this, with little evidence, are forgotten. */
  forgetThreshold: number;
  /** Evidence below which a weak memory may be forgotten. */
  forgetMinEvidence: number;
  /**
   * Forgetting by activity: a memory with evidence below `forgetMinEvidence` that none of the
   * shopper's last `forgetAfterEvents` events formed or reinforced is forgotten at a sweep (a
   * one-off interest the shopper moved on from), however little time passed. 0 = by time only.
   */
  forgetAfterEvents: number;
  /** Half-life of a memory's salience, in days, for ranking and forgetting. */
  halfLifeDays: number;
  /** Planner: run merge/forget sweep after this many processed events. */
  sweepEvery: number;
  /** Planner: resynthesise the profile after this many processed events… */
  synthesizeEvery: number;
  /** …or after this many forward-step prediction errors, whichever first. */
  synthesizeOnErrors: number;
  /**
   * Planner with a language model: pending events are processed at idle time in one batch; during
   * a burst of interactions they are processed as soon as this many are waiting.
   */
  batchEvents: number;
  /** Profile narrative length cap (characters) before ranking (ARS truncation). */
  profileMaxChars: number;
  /**
   * A report (level `contribute`) samples from the distinct items of the shopper's last
   * this-many positive events (0 = every event kept): what shoppers like lately is what helps
   * others, and old history stays out of the report.
   */
  shareRecentEvents: number;
  /**
   * Diversification of the first row by interest coverage (`core/diversify.ts`): every interest
   * (a positive memory) holding at least this share of the memory weight gets a card among the
   * first `diversityDepth`, replacing the lowest-ranked card that no other strong interest needs.
   * 0 = off (the ranker's order). `recommend(ids, { diversify: false })` turns it off per call.
   */
  diversity: number;
  /** Size of the first row the diversification fills (a shelf's first row). */
  diversityDepth: number;
  /**
   * Near-duplicates of an item the shopper owns (see `duplicateActions`) leave the first
   * `diversityDepth` cards beyond `duplicateKeep` per owned item (`core/diversify.ts`
   * `demoteDuplicates`): after one tent purchase, one more tent on the first row, not five. A
   * candidate is a near-duplicate at this cosine or above between the two items' content vectors
   * centred on the catalog mean (the same kind of product: in the demo shop two tents are at
   * 0.80–0.86, a tent and a camping stove at most 0.67). 0 = off. `recommend(ids, { diversify:
   * false })` turns it off per call.
   */
  duplicateSimilarity: number;
  /** Near-duplicates of one owned item kept on the first row. */
  duplicateKeep: number;
  /**
   * Whole-catalog `recommend({ limit })` (no candidates): how many items retrieval shortlists
   * for the full scorer (`agent/shortlist.ts`: the shop model's neighbour lists of the shopper's
   * items, the nearest items to the shopper's profile vector, the stated intent's, the most
   * popular). At least `limit` is always shortlisted.
   */
  shortlist: number;
  /** The actions that make an item the shopper's own for `duplicateSimilarity` (default: a purchase). */
  duplicateActions: readonly Action[];
  /**
   * A stated intent matches a candidate when the candidate's text names one of the intent's
   * content words, or when the intent's cosine to the candidate (content space), rescaled as
   * (cos − c̄) / (1 − c̄) with c̄ the intent's cosine to the catalog's mean item, reaches this. When
   * no candidate matches, `recommend` ranks without the intent and says so ("Nothing here
   * matches …"); a card the intent does not match never gets an intent reason. Measured with
   * USE-lite on the demo catalog: nonsense ("asdf qwerty zzz", "lorem ipsum dolor") and products
   * the shop does not sell ("dog food", "car tyres") reach 0.12–0.27, "music" 0.35, "a gift for my
   * dad, he hikes" 0.43, "headphones" 0.62.
   */
  intentMatch: number;
  /**
   * With the shop's published model the item space is its collaborative vectors, whose cosines
   * spread differently from any text embedder's: `tau` is then this quantile of the cosines of
   * random item pairs of the file (`ShopKnowledge.pairQuantile`), unless `tau` is given.
   */
  shopTauQuantile: number;
  /** Likewise `mergeThreshold` in the shop's space: this quantile of random pairs' cosines, unless `mergeThreshold` is given. */
  shopMergeQuantile: number;
  /** Ranking weights (see `rank.ts`) when the item space is the content embedder's. */
  weights: RankWeights;
  /**
   * Ranking weights when the shop's published model is loaded (the item space is then its
   * collaborative vectors, and the model's own signals join the memory's: `ease`, `knn`,
   * `markov`, `pop`, `vec`, … and `sasrec`). Missing names weigh 0.
   */
  shopWeights: Readonly<Record<string, number>>;
  /**
   * Ranking weights with the shop's model for a returning visit at a live moment: the file has a
   * recent window (`popRecent`), the ranking moment is at or after the end of its log
   * (`ShopKnowledge.live`) — every visit after the file was published — and the shopper's last
   * event is at least `sessionGapMinutes` old (or there is none). `shopWeights` rank the other
   * moments: within a session (the shopper acted in the last `sessionGapMinutes`), and an offline
   * replay of a visit inside the file's log, as the leave-one-out protocols do. Missing names
   * weigh 0.
   */
  shopWeightsLive: Readonly<Record<string, number>>;
  /**
   * A visit whose shopper acted less than this many minutes ago continues a session: it ranks with
   * `shopWeights` (the signals of the shopper's recent events lead), not `shopWeightsLive`.
   * Default 30 (the usual web-analytics session timeout).
   */
  sessionGapMinutes: number;
  /**
   * Weights of the intent signals, added to `weights` (or `shopWeights`) when `recommend` gets a
   * stated intent: `intent` (candidate ↔ intent cosine in the content space), `intentTerms` (share
   * of the intent's content words in the candidate's text), `intentCategories` (share of the
   * candidate's categories the intent names), `intentMemory` (the candidate's similarity to the
   * memories the intent selected). Missing names weigh 0.
   */
  intentWeights: Readonly<Record<string, number>>;
  /** Memories an intent selects (top by cosine of their content centroid to the intent). */
  intentMemories: number;
  /**
   * A memory is selected by an intent only at cosine ≥ this (content space), and only when its
   * centroid is closer to the intent than the catalog's average item is.
   */
  intentMinSimilarity: number;
}

/** Mixing weights of the ranker's signals. */
export interface RankWeights {
  /** Own atomic memories (personal, local): STEAM's top-k2 retrieval at sim ≥ tau. */
  memory: number;
  /** All own memories, weighted by strength × recency × log(1 + evidence) (ARS's profile, as a vector). */
  profile: number;
  /** Similarity to recent events. */
  recent: number;
  /** Community prototypes (global). */
  prototype: number;
  /** The item's share of the estimated counts of the shopper's communities in the release. */
  communityItems: number;
  /** The item's share of the release's popularity estimates (a popularity prior). */
  popularity: number;
  /** ln(1 + the item's count) in the verifiable (Prio3) release: what shoppers turned to last epoch (community/crowd.ts). */
  crowd: number;
}

/** `shopWeights` (see DEFAULT_CONFIG): also the base of `shopWeightsLive`. */
const SHOP_WEIGHTS: Readonly<Record<string, number>> = Object.freeze({
  memory: 0,
  profile: 0.6209,
  recent: -0.6203,
  ease: 0.472,
  easeRecent: 0.0919,
  knn: 0.3025,
  knnRecent: 0.0814,
  markov: 0.0991,
  pop: -0.5232,
  // The shop file's recent popularity: 0 in this set. These weights rank moments inside the
  // file's log (an offline replay of a past visit, where `popRecent` is 0 because the file's last
  // week holds the visit's future); live moments rank with `shopWeightsLive` below. One set
  // fitted for both (BENCHMARKS.md "Weights for whole-catalog ranking") cannot serve both
  // full-ranking protocols.
  popRecent: 0,
  vec: -0.7153,
  vecRecent: 1,
  sasrec: 0.8799,
  // the verifiable (Prio3) release's counts (community/crowd.ts), in force only when the index
  // runs Prio3 and the level is `receive` or `contribute`; not fitted: the release it needs to
  // matter is not there at the shipped ε and ℓ on the benchmark (`npm run bench:sharing`,
  // BENCHMARKS.md "What sharing adds today")
  crowd: 0.5,
});

export const DEFAULT_CONFIG: Readonly<AtomemConfig> = Object.freeze({
  tau: 0.5,
  k1: 2,
  k2: 1,
  maxEvents: 500,
  recentEvents: 30,
  maxItemsPerMemory: 40,
  maxMemories: 64,
  learningRate: 0.2,
  initialStrength: 0.3,
  mergeThreshold: 0.92,
  absorbSingletons: 0.9,
  forgetThreshold: 0.05,
  forgetMinEvidence: 1.5,
  forgetAfterEvents: 40,
  halfLifeDays: 90,
  sweepEvery: 20,
  synthesizeEvery: 25,
  synthesizeOnErrors: 5,
  batchEvents: 8,
  profileMaxChars: 1200,
  shareRecentEvents: 10,
  diversity: 0.1,
  diversityDepth: 8,
  duplicateSimilarity: 0.75,
  duplicateKeep: 1,
  shortlist: 300,
  sessionGapMinutes: 30,
  duplicateActions: Object.freeze(['purchase'] as Action[]),
  intentMatch: 0.3,
  // Calibrated on ML-100K VALIDATION items (all 943 users, seed 2026, never a test item), with
  // `shopWeights` below, by
  //   npm run tune -- --data ../shared/data/ml-100k --users all --tau-q 0.8,0.9,0.95 --merge-q 0.95,0.99,0.995,0.999
  // (the grid point with the best 2-fold cross-validated NDCG@10 among those where merge acts):
  // tau at the 0.9 quantile of random pairs' cosines of the shop file's vectors (0.588 there),
  // merge at the 0.995 quantile (0.877): 0.27 merges per 1,000 events (0.999, i.e. 0.931,
  // never merges; the whole grid spans 0.8441–0.8475 CV NDCG@10, within noise).
  shopTauQuantile: 0.9,
  shopMergeQuantile: 0.995,
  // Fitted jointly (listwise softmax regression, fitWeights of shop/fit.ts, largest |w| = 1) on the
  // same validation dump, by the command above: every signal standardised within the list.
  // Validation NDCG@10: 0.8411 with the earlier guesses, 0.8470 fitted (2-fold CV; 0.8498 in
  // sample), 0.8434 with the shop file's signals alone fitted the same way. `memory` (STEAM's
  // top-k2 retrieval) gets ≈ 0; `profile` and `recent` act as a long-term-versus-recent contrast.
  // `memory` (STEAM's top-k2 retrieval) was fitted to 0.0032 and is set to 0: removing it changes no
  // validation user's ranking (`npm run bench -- --validation --methods atomem,atomem-no-signal-memory
  // --privacy off`: +0.0000, 0 users better / 0 worse), so it leaves the default path (decision 37);
  // retrieval still names memories in a card's reasons.
  shopWeights: SHOP_WEIGHTS,
  // Every weight refitted (listwise, fitWeights) on ML-100K validation items only (never a test
  // item), on the cases the agent ranks with this set: returning visits at a live moment — the
  // temporal protocol's validation split at seven origins inside the pre-cut log (the cut at the
  // 0.6, 0.65, …, 0.9 quantiles of the pre-cut events), less the 13 users who acted within
  // `sessionGapMinutes` of the cut: 759 cases of 164 users — by
  //   npm run tune -- --data ../shared/data/ml-100k --users all --protocol loo-full,temporal,loo --temporal-cuts 0.6,0.65,0.7,0.75,0.8,0.85,0.9
  // Temporal validation NDCG@10 on those cases (2-fold CV, users split in two): 0.1861 with these,
  // 0.1664 with shopWeights plus `popRecent` alone by a line search, 0.0604 with shopWeights,
  // 0.1518 for the recent popularity alone (BENCHMARKS.md "Weights for whole-catalog ranking").
  // STEAM's retrieval `memory` is 0, as in shopWeights (decision 37): fitted too it adds +0.0000
  // [−0.0059, +0.0067] over 164 users. `crowd` is in no dump and keeps its shopWeights value.
  shopWeightsLive: Object.freeze({
    ...SHOP_WEIGHTS,
    memory: 0,
    profile: 0.4554,
    recent: -0.0885,
    ease: 0.1099,
    easeRecent: 0.0154,
    knn: 0.2057,
    knnRecent: 0.0437,
    markov: -0.0153,
    pop: -0.2985,
    popRecent: 1,
    vec: -0.8514,
    vecRecent: 0.0904,
    sasrec: 0.2261,
  }),
  // Fitted on ML-100K validation items of all 943 users in setting instruct (never test items), USE-lite
  // centred, privacy off, the memory's weights below fixed: `npm run tune:intent -- --data … --users all`
  // (0.603 without the intent → 0.957). intentMemory fitted to 0 there (the memory's own signals already
  // order the items that fit the intent); it stays a named signal a shop can weigh.
  intentWeights: Object.freeze({ intent: 0.5, intentTerms: 6, intentCategories: 8, intentMemory: 0 }),
  intentMemories: 3,
  intentMinSimilarity: -1,
  // Tuned on ML-100K validation items of all 943 users (never test items), USE-lite centred,
  // with protocol v1's communities (its member-vector and co-pick signals are gone with it;
  // removing them left every ranking unchanged, as they are 0 without v1): signals are
  // standardised within each candidate list, so these are relative weights. `memory` is small
  // but not 0: it keeps STEAM's retrieval in the explanations and breaks ties between
  // otherwise equal candidates.
  weights: Object.freeze({
    memory: 0.1,
    profile: 1.5,
    recent: 0.5,
    prototype: 0,
    communityItems: 0,
    popularity: 0.3,
    crowd: 0,
  }),
});

/**
 * `tau` calibrated per embedder. Cosines spread differently per model: the paper's 0.5 is for
 * all-MiniLM-L6-v2; USE-lite puts half of all catalog pairs above 0.74 (ML-100K item texts),
 * so 0.5 would consolidate everything into one memory. Values here sit near the 90th
 * percentile of random catalog pairs, like 0.5 does for MiniLM.
 */
export const EMBEDDER_TAU: Readonly<Record<string, number>> = Object.freeze({
  /** The shipped uint8 weights (cosine ≥ 0.99 to float32 on every ML-100K item text: same calibration). */
  'use-lite@0.2.0/uint8': 0.85,
  /** Centred on the catalog mean (see ItemVectors.centre): pairs spread around 0, p99 ≈ 0.47. */
  'use-lite@0.2.0/uint8~centred': 0.35,
  'use-lite@0.2.0/float32': 0.85,
  'use-lite@0.2.0/float32~centred': 0.35,
});

/** The default `tau` for an embedder id (the paper's 0.5 when unknown). Centred spaces (`~c<hash>`) share one entry. */
export function tauFor(embedderId: string): number {
  const key = embedderId.replace(/~c[0-9a-f]+$/, '~centred');
  return Object.hasOwn(EMBEDDER_TAU, key) ? EMBEDDER_TAU[key] : DEFAULT_CONFIG.tau;
}

/** Merge a partial config over the defaults and validate it; throws a RangeError naming the bad knob. */
export function resolveConfig(
  partial: Partial<Omit<AtomemConfig, 'weights' | 'shopWeights' | 'shopWeightsLive' | 'intentWeights'>> & {
    weights?: Partial<RankWeights>;
    shopWeights?: Readonly<Record<string, number>>;
    shopWeightsLive?: Readonly<Record<string, number>>;
    intentWeights?: Readonly<Record<string, number>>;
  } = {},
): AtomemConfig {
  const cfg: AtomemConfig = {
    ...DEFAULT_CONFIG,
    ...partial,
    weights: { ...DEFAULT_CONFIG.weights, ...(partial.weights ?? {}) },
    shopWeights: { ...DEFAULT_CONFIG.shopWeights, ...(partial.shopWeights ?? {}) },
    shopWeightsLive: { ...DEFAULT_CONFIG.shopWeightsLive, ...(partial.shopWeightsLive ?? {}) },
    intentWeights: { ...DEFAULT_CONFIG.intentWeights, ...(partial.intentWeights ?? {}) },
  };
  const check = (name: string, v: number, lo: number, hi: number, int = false) => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (int && !Number.isInteger(v))) {
      throw new RangeError(`atomem config: ${name} must be ${int ? 'an integer ' : ''}in [${lo}, ${hi}], got ${String(v)}`);
    }
  };
  check('tau', cfg.tau, -1, 1);
  check('k1', cfg.k1, 1, 1000, true);
  check('k2', cfg.k2, 1, 1000, true);
  check('maxEvents', cfg.maxEvents, 1, 1e6, true);
  check('recentEvents', cfg.recentEvents, 0, 1e4, true);
  check('maxItemsPerMemory', cfg.maxItemsPerMemory, 1, 1e4, true);
  check('maxMemories', cfg.maxMemories, 1, 1e5, true);
  check('learningRate', cfg.learningRate, 0, 1);
  check('initialStrength', cfg.initialStrength, 0, 1);
  check('mergeThreshold', cfg.mergeThreshold, -1, 1);
  check('absorbSingletons', cfg.absorbSingletons, 0, 1);
  check('forgetThreshold', cfg.forgetThreshold, 0, 1);
  check('forgetMinEvidence', cfg.forgetMinEvidence, 0, 1e9);
  check('forgetAfterEvents', cfg.forgetAfterEvents, 0, 1e9, true);
  check('halfLifeDays', cfg.halfLifeDays, 0.001, 1e6);
  check('sweepEvery', cfg.sweepEvery, 1, 1e6, true);
  check('synthesizeEvery', cfg.synthesizeEvery, 1, 1e6, true);
  check('synthesizeOnErrors', cfg.synthesizeOnErrors, 1, 1e6, true);
  check('batchEvents', cfg.batchEvents, 1, 1e6, true);
  check('profileMaxChars', cfg.profileMaxChars, 0, 1e6, true);
  check('shareRecentEvents', cfg.shareRecentEvents, 0, 1e6, true);
  check('diversity', cfg.diversity, 0, 1);
  check('diversityDepth', cfg.diversityDepth, 0, 1e4, true);
  check('duplicateSimilarity', cfg.duplicateSimilarity, 0, 1);
  check('duplicateKeep', cfg.duplicateKeep, 0, 1e4, true);
  check('shortlist', cfg.shortlist, 1, 1e5, true);
  check('sessionGapMinutes', cfg.sessionGapMinutes, 0, 1e9);
  if (!Array.isArray(cfg.duplicateActions) || cfg.duplicateActions.some((a) => !Object.hasOwn(ACTION_WEIGHTS, a))) {
    throw new RangeError(
      `atomem config: duplicateActions must be an array of actions (${Object.keys(ACTION_WEIGHTS).join(', ')}), got ${String(cfg.duplicateActions)}`,
    );
  }
  check('intentMatch', cfg.intentMatch, 0, 1);
  check('shopTauQuantile', cfg.shopTauQuantile, 0, 1);
  check('shopMergeQuantile', cfg.shopMergeQuantile, 0, 1);
  for (const [k, v] of Object.entries(cfg.weights)) check(`weights.${k}`, v, 0, 1e6);
  // why: shop weights are fitted jointly (listwise regression); a negative weight corrects a correlated signal.
  for (const [k, v] of Object.entries(cfg.shopWeights)) check(`shopWeights.${k}`, v, -1e6, 1e6);
  for (const [k, v] of Object.entries(cfg.shopWeightsLive)) check(`shopWeightsLive.${k}`, v, -1e6, 1e6);
  for (const [k, v] of Object.entries(cfg.intentWeights)) check(`intentWeights.${k}`, v, 0, 1e6);
  check('intentMemories', cfg.intentMemories, 0, 1000, true);
  check('intentMinSimilarity', cfg.intentMinSimilarity, -1, 1);
  return cfg;
}

/**
 * Refuse unknown knobs of a partial config (`createAtomem({ config })`): a `TypeError` naming the
 * nearest valid knob (`tua` → `tau`), for `weights` too. `shopWeights` and `intentWeights` take
 * any signal name (missing names weigh 0), so only their values are checked, by
 * {@link resolveConfig}.
 */
export function checkConfigNames(partial: unknown): void {
  if (typeof partial !== 'object' || partial === null || Array.isArray(partial))
    throw new TypeError(`atomem config must be an object, got ${partial === null ? 'null' : typeof partial}`);
  checkNames(partial, Object.keys(DEFAULT_CONFIG), 'atomem config');
  const w = (partial as { weights?: unknown }).weights;
  if (typeof w === 'object' && w !== null) checkNames(w, Object.keys(DEFAULT_CONFIG.weights), 'atomem config: weights');
}
