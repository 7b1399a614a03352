/**
 * Embedder the service takes when no `--embedder` is given: the browser engine's default
 * (USE-lite, not centred). Kept equal to `USE_LITE_ID` by a test (importing that constant here
 * would load tfjs into the service).
 */
export const DEFAULT_EMBEDDER = 'use-lite@0.2.0/uint8';

/**
 * Dimensions of the browser engine's embedders, so `--embedder <id>` needs no `=<dim>` for
 * them (kept equal to the engine's by a test). Any other embedder's dimension must be configured.
 */
export const KNOWN_EMBEDDER_DIMS: Readonly<Record<string, number>> = {
  'use-lite@0.2.0/uint8': 512,
  'use-lite@0.2.0/float32': 512,
};
