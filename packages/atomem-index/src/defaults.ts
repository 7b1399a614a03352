/**
 * Embedder the service takes when no `--embedder` is given: the browser engine's default
 * (USE-lite, not centred). Kept equal to `USE_LITE_ID` by a test (importing that constant here
 * would load tfjs into the service).
 */
export const DEFAULT_EMBEDDER = 'use-lite@0.2.0/uint8';
