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
export { makeLayout, weightsView } from './sasrec/layout.js';
