import { defineConfig, type Plugin } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';
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

/**
 * One config for the library build and both test projects.
 * - `node`: pure core, communities, embedders, benchmark (Node 20).
 * - `browser`: the same library in headless Debian Chromium (never a Playwright-downloaded browser).
 */
export default defineConfig({
  plugins: [shippedAssets()],
  // why: asset and worker URLs relative to the module (new URL('./assets/…', import.meta.url)), wherever the shop serves dist/.
  base: './',
  // why: ES workers can code-split, so heavy runtimes (tfjs, transformers.js, wllama) load only when used.
  worker: { format: 'es', plugins: () => [keepRuntimeWasmOut()] },
  build: {
    lib: {
      // index: the small main-thread client; engine: the agent and its parts (Node, benchmarks, custom workers).
      entry: { index: 'src/client/index.ts', engine: 'src/engine.ts' },
      formats: ['es'],
    },
    target: 'es2022',
    sourcemap: true,
    // why: .wasm must stay a file next to the bundle, never inlined as base64.
    assetsInlineLimit: 0,
    rollupOptions: {
      external: [/^@tensorflow\//, /^@tensorflow-models\//, /^@energetic-ai\//, /^node:/],
    },
  },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'node',
          environment: 'node',
          include: ['test/node/**/*.test.ts'],
          setupFiles: ['test/setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        extends: true,
        test: {
          // the demo shop end to end: `npm start`'s own server as a child process, driven by Chromium
          name: 'e2e',
          environment: 'node',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 240_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          globalSetup: ['test/browser/index-service.setup.ts'],
          browser: {
            enabled: true,
            headless: true,
            provider: playwright({
              launchOptions: {
                executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
                args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
              },
            }),
            instances: [{ browser: 'chromium' }],
          },
        },
      },
    ],
  },
});
