/**
 * `atomem/shop` — what a shop runs on its own server (Node): learning from its order log the
 * models it publishes for its shoppers' devices. Today: SASRec (training in Node on worker
 * threads; inference and the binary format are pure and also run in the engine worker).
 */
export {
  encodeHistory,
  scoreItems,
  serializeSasrec,
  deserializeSasrec,
  setSasrecKernel,
  sasrecKernel,
  type SasrecConfig,
  type SasrecWeights,
  type ItemEmbeddingEncoding,
  type SerializeOptions,
} from './sasrec/model.js';
export { trainSasrec, initWeights, SASREC_DEFAULTS, type SasrecTrainOptions, type TrainResult } from './sasrec/train.js';
export { sasrecProfile, FULL_SOFTMAX_MAX_ITEMS, SAMPLED_NEGATIVES, SHORT_HISTORY, type SasrecProfile } from './sasrec/profile.js';
export { makeLayout, weightsView } from './sasrec/layout.js';

// ——— the shop model: learned from the order log (EASE / kNN / Markov lists, popularity,
// collaborative vectors with a content map), scored on the device ———
export { trainShopModel, type ShopInteraction, type ContentInput, type TrainOptions } from './train.js';
// Counting stages computed elsewhere (`TrainOptions.counts`): per-item ranked lists as typed arrays.
export { ItemNumbers, RankedListsBuilder, rankedListsToMap, type RankedLists } from './ranked-lists.js';
export {
  ShopScorer,
  combine as combineSignals,
  DEFAULT_WEIGHTS as SHOP_WEIGHTS,
  SIGNALS as SHOP_SIGNALS,
  weightsForEpsilon,
  type ScorerOptions,
  type ScoreOptions,
  type DeviceEvent,
} from './score.js';
export { fitWeights, type FitCase } from './fit.js';
export { invertSpd } from './linalg.js';
export { encodeShopModel, decodeShopModel, shopModelSizes, type ShopModel } from '../protocol/shop-model-v1.js';
export { ShopKnowledge, SEQUENCE_SIGNAL, type PublishedSasrec } from './device.js';
export { LogColumns, readLogFile, readCatalogFile, progressReporter, LogInputError } from './log-reader.js';
