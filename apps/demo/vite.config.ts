import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * Builds the demo page (apps/demo/index.html + main.ts + style.css) into apps/demo/dist/.
 * The library itself is NOT bundled: the page imports the built `/dist/index.js` at run time
 * (served by apps/demo/server.ts from the same origin), exactly as a shop serving the package would.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    rollupOptions: { external: ['/dist/index.js'] },
  },
});
