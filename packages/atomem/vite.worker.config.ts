import { defineConfig, type Plugin } from 'vite';
import { ASSET_PACKAGES, copyAssets, pkgDir, writeManifest } from './scripts/assets.js';
import { readPackage, recordPackages, thirdPartyNotices } from './scripts/notices.js';
import { quietHarmless } from './scripts/quiet-logs.js';

/**
 * Library mode inlines every `new URL('x.wasm', import.meta.url)` asset as base64 (Vite ignores
 * assetsInlineLimit for libraries), which turned onnxruntime-web's default 27 MB wasm into a
 * 72 MB JS chunk. atomem always passes the runtimes their wasm location (`wasmPaths`, shipped in
 * dist/assets/ort-wasm/ and dist/assets/wllama/ by scripts/assets.ts), so these defaults are never used: mark them `@vite-ignore`.
 */
function keepRuntimeWasmOut(): Plugin {
  return {
    name: 'atomem-keep-runtime-wasm-out',
    enforce: 'pre',
    transform(code, id) {
      if (!/node_modules[\\/](onnxruntime-web|@huggingface[\\/]transformers)[\\/]/.test(id)) return null;
      const out = code.replace(/new URL\((?=\s*["'`][^"'`]*\.(?:wasm|mjs)["'`]\s*,\s*import\.meta\.url)/g, 'new URL(/* @vite-ignore */ ');
      return out === code ? null : { code: out, map: null };
    },
  };
}

/** After the worker build: copy the shipped model assets into dist/assets/ and write dist/atomem-manifest.json (scripts/assets.ts). */
function shippedAssets(): Plugin {
  return {
    name: 'atomem-shipped-assets',
    apply: 'build',
    writeBundle(_, bundle) {
      const counts = copyAssets('dist');
      writeManifest('dist', bundle as never, counts);
      recordPackages(
        'assets',
        Object.values(ASSET_PACKAGES).map((name) => readPackage(pkgDir(name))),
      );
      this.info?.(`assets copied: ${JSON.stringify(Object.fromEntries(Object.entries(counts).map(([g, f]) => [g, f.length])))}`);
    },
  };
}

/**
 * The engine worker of the `atomem` package: `dist/worker/worker.js` and its chunks (run after
 * vite.config.ts by `npm run build`). A second build, not Vite's `new Worker(new URL(…))`
 * pipeline, so the client holds no `new URL('literal', import.meta.url)` that a shop's bundler
 * would rewrite, copy in part or re-bundle (atomem/vite and the README's recipes serve these
 * files untouched).
 *
 * Chunk graph: the entry (`src/worker/worker.ts`) is alone in its chunk; the engine and
 * everything it imports statically is the `engine` chunk; the runtimes loaded on demand
 * (tfjs + USE-lite, transformers.js, wllama, WebLLM) are lazy chunks that import `engine`
 * (or each other), never the entry. packages/atomem/test/worker-chunks.test.ts checks it on the output.
 */
export default defineConfig({
  plugins: [keepRuntimeWasmOut(), shippedAssets(), ...thirdPartyNotices('worker')],
  base: './',
  // why: one tfjs in the worker. The USE tokenizer's package asks for @tensorflow/tfjs-converter
  // ^3 (an old copy npm installs for it at the repository root) while atomem uses ^4; without
  // dedupe both copies were bundled (THIRD_PARTY_NOTICES listed two versions).
  resolve: { dedupe: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-converter'] },
  // why: no `process` in a worker; dependencies that read process.env.NODE_ENV get the production branch.
  define: { 'process.env.NODE_ENV': '"production"' },
  build: {
    outDir: 'dist/worker',
    emptyOutDir: false,
    target: 'es2022',
    sourcemap: false,
    assetsInlineLimit: 0,
    // why: minified like Vite's worker builds (the published chunks are executed as they are).
    minify: true,
    lib: { entry: { worker: 'src/worker/worker.ts' }, formats: ['es'], fileName: (_format, name) => `${name}.js` },
    rolldownOptions: {
      // why: known-harmless warnings only (each explained in scripts/quiet-logs.ts)
      onLog: quietHarmless,
      // why: @divviup/prio3 (MPL-2.0, an optional peer) stays out of dist, as in vite.config.ts: the
      // engine's Prio3 reports load it on demand and say so clearly when it cannot be resolved
      external: [/^@divviup\//],
      output: {
        // why: the third-party licence comments (`@license`, `/*!`) stay in the minified chunks.
        comments: { legal: true },
        chunkFileNames: '[name]-[hash].js',
        codeSplitting: {
          // why: start.ts and its static imports in one `engine` chunk, so the entry chunk holds only
          // worker.ts and no lazy chunk ever imports it (a second evaluation cannot expose twice).
          groups: [{ name: 'engine', test: /[\\/]src[\\/]worker[\\/]start\.ts$/ }],
        },
      },
    },
  },
});
