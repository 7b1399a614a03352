import { defineConfig } from 'vitest/config';
import { defaultClientConditions, defaultServerConditions } from 'vite';
import { playwright } from '@vitest/browser-playwright';

// why: inside the repository every workspace package resolves to its TypeScript source (the
// `atomem-source` export condition), so tests never run against a stale build; the built
// packages are tested as a shop gets them by packages/atomem/test/dist-chromium.test.ts and test/consumer/.
const conditions = ['atomem-source'];

/**
 * The test projects (the library build is packages/atomem/vite.config.ts).
 * Tests live beside their package: `packages/<pkg>/test/` (Node), `packages/atomem/test/browser/`
 * (Chromium); repo-wide checks in `test/repo/`, shared fixtures in `test/fixtures/`.
 * - `node`: each package's tests in Node 20 (pure core, embedders, index service, benchmark).
 * - `browser`: the same library in headless Debian Chromium (never a Playwright-downloaded browser).
 * - `e2e`: the demo shop end to end; `consumer`: the packed package in a fresh Vite app.
 */
export default defineConfig({
  resolve: { conditions: [...conditions, ...defaultClientConditions] },
  ssr: { resolve: { conditions: [...conditions, ...defaultServerConditions], externalConditions: conditions } },
  worker: { format: 'es' },
  test: {
    // the default output, then one line naming what was skipped and why (test/skip-reporter.ts)
    reporters: ['default', './test/skip-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'node',
          environment: 'node',
          include: ['packages/*/test/**/*.test.ts', 'test/repo/**/*.test.ts'],
          exclude: ['packages/atomem/test/browser/**', '**/node_modules/**'],
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
          // the packed tarball in a fresh Vite app outside the repo (plain npm install, README quick start), in Chromium
          name: 'consumer',
          environment: 'node',
          include: ['test/consumer/**/*.test.ts'],
          testTimeout: 180_000,
          hookTimeout: 600_000,
          // why: npm installs, two bundlers and Chromium; on 2 cores it runs after the other projects, not beside them
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: 'browser',
          include: ['packages/atomem/test/browser/**/*.test.ts'],
          globalSetup: ['packages/atomem/test/browser/index-service.setup.ts'],
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
