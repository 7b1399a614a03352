import { defineConfig, type Plugin } from 'vite';
import { copyAssets } from './scripts/assets.js';

/**
 * Library mode inlines every `new URL('x.wasm', import.meta.url)` asset as base64 (Vite ignores
 * assetsInlineLimit for libraries), which turned onnxruntime-web's default 27 MB wasm into a
 * 72 MB JS chunk. atomem always passes the runtimes their wasm location (`wasmPaths`, shipped in
 * dist/assets/), so these defaults are never used: mark them `@vite-ignore` in the worker build.
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

/** After the library build: copy the shipped model assets into dist/assets/ (see scripts/assets.ts). */
function shippedAssets(): Plugin {
  return {
    name: 'atomem-shipped-assets',
    apply: 'build',
    closeBundle() {
      const counts = copyAssets('dist');
      this.info?.(`assets copied: ${JSON.stringify(counts)}`);
    },
  };
}

/** The library build of the `atomem` package (run from packages/atomem: `npm run build`). */
export default defineConfig({
  plugins: [shippedAssets()],
  // why: asset and worker URLs relative to the module (new URL('./assets/…', import.meta.url)), wherever the shop serves dist/.
  base: './',
  // why: ES workers can code-split, so heavy runtimes (tfjs, transformers.js, wllama) load only when used.
  worker: { format: 'es', plugins: () => [keepRuntimeWasmOut()] },
  build: {
    lib: {
      // index: the small main-thread client; engine: the agent and its parts (Node, benchmarks, custom workers).
      entry: { index: 'src/client/index.ts', engine: 'src/engine.ts', protocol: 'src/protocol/index.ts' },
      formats: ['es'],
    },
    target: 'es2022',
    // why: no source maps in the package (they were 18 MB, mostly third-party code).
    sourcemap: false,
    // why: .wasm must stay a file next to the bundle, never inlined as base64.
    assetsInlineLimit: 0,
    rollupOptions: {
      external: [/^@tensorflow\//, /^@tensorflow-models\//, /^@energetic-ai\//, /^@huggingface\//, /^node:/],
    },
  },
});
