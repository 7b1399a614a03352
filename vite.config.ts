import { defineConfig } from 'vitest/config';
import { playwright } from '@vitest/browser-playwright';

/**
 * One config for the library build and both test projects.
 * - `node`: pure core, communities, embedders, benchmark (Node 20).
 * - `browser`: the same library in headless Debian Chromium (never a Playwright-downloaded browser).
 */
export default defineConfig({
  build: {
    lib: {
      entry: 'src/index.ts',
      formats: ['es'],
      fileName: 'index',
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
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
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
