/**
 * Where the engine worker and the shipped assets come from — in the published package
 * (`dist/index.js`): the prebuilt worker `dist/worker/worker.js` and `dist/assets/`, both
 * resolved against this module's URL at run time.
 *
 * The paths are plain strings held in variables, never `new URL('literal', import.meta.url)`,
 * so no bundler rewrites them, re-bundles the prebuilt worker or copies only part of it.
 * atomem/vite replaces exactly these two string literals (`"./worker/worker.js"`,
 * `"./assets/"`) with the URLs it serves or emits; keep them unique in dist/index.js.
 */

const WORKER_FILE = './worker/worker.js';
const ASSETS_DIR = './assets/';

/** Start the default engine worker: a module `Worker`, or a module `SharedWorker` named `name`. */
export function spawnWorker(shared: boolean, name: string): Worker | SharedWorker {
  const url = new URL(WORKER_FILE, import.meta.url);
  if (shared) return new SharedWorker(url, { type: 'module', name });
  return new Worker(url, { type: 'module' });
}

/** The default `assetsBaseUrl`: `assets/` next to this module. */
export function defaultAssetsBaseUrl(): string {
  return new URL(ASSETS_DIR, import.meta.url).href;
}
