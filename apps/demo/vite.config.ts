import { fileURLToPath } from 'node:url';
import atomem from 'atomem/vite';
import { defineConfig } from 'vite';

/**
 * Builds the demo page (apps/demo/index.html + main.ts + style.css) into apps/demo/dist/, served
 * by apps/demo/server.ts. Like a shop: the page imports the `atomem` package (its built dist/,
 * `npm run build -w atomem` first) and `atomem()` emits the worker and the model files it needs —
 * USE-lite, and wllama for a GGUF model configured by ATOMEM_GGUF.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  plugins: [atomem({ assets: ['use-lite', 'wllama'] })],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
  },
});
