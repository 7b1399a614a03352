import { defineConfig } from 'vite';

/**
 * Builds the demo page (demo/index.html + main.ts + style.css) into demo/dist/.
 * The library itself is NOT bundled: the page imports the built `/dist/index.js` at run time
 * (served by demo/server.ts from the same origin), exactly as a shop serving the package would.
 */
export default defineConfig({
  root: 'demo',
  base: '/',
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    rollupOptions: { external: ['/dist/index.js'] },
  },
});
