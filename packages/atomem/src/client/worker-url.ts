/**
 * Where the engine worker and the shipped assets come from — in the repository, where Vite
 * (dev server, vitest) builds the worker from its TypeScript source. The published build
 * replaces this module with `worker-url.dist.ts` (see vite.config.ts).
 */

/** Start the default engine worker: a module `Worker`, or a module `SharedWorker` named `name`. */
export function spawnWorker(shared: boolean, name: string): Worker | SharedWorker {
  if (shared) return new SharedWorker(new URL('../worker/worker.ts', import.meta.url), { type: 'module', name });
  return new Worker(new URL('../worker/worker.ts', import.meta.url), { type: 'module' });
}

/** The default `assetsBaseUrl`: the package's `assets/` folder next to this module. */
export function defaultAssetsBaseUrl(): string {
  return new URL(ASSETS_DIR, import.meta.url).href;
}

// why: a variable, not a literal, so bundlers leave it alone and it resolves at run time next to this module.
const ASSETS_DIR = './assets/';
