import { fileURLToPath } from 'node:url';
import { defineConfig, type Plugin } from 'vite';
import { thirdPartyNotices } from './scripts/notices.js';
import { quietHarmless } from './scripts/quiet-logs.js';

const DIST_WORKER_URL = fileURLToPath(new URL('./src/client/worker-url.dist.ts', import.meta.url));

/**
 * The published client starts the PREBUILT worker (`dist/worker/worker.js`, built by
 * vite.worker.config.ts): swap the repository's `worker-url.ts` (Vite builds the worker from
 * source) for `worker-url.dist.ts`.
 */
function prebuiltWorker(): Plugin {
  return {
    name: 'atomem-prebuilt-worker',
    enforce: 'pre',
    async resolveId(source, importer) {
      if (source !== './worker-url.js' || !importer || !/[\\/]src[\\/]client[\\/]index\.ts$/.test(importer)) return null;
      return DIST_WORKER_URL;
    },
  };
}

/**
 * The library build of the `atomem` package (run from packages/atomem: `npm run build`, which
 * then builds the worker with vite.worker.config.ts and the types with tsc).
 */
export default defineConfig({
  plugins: [prebuiltWorker(), ...thirdPartyNotices('lib')],
  // why: asset URLs relative to the module, wherever the shop serves dist/.
  base: './',
  build: {
    lib: {
      // index: the small main-thread client; engine: the Node entry src/node.ts (`atomem/engine`: the agent and its parts);
      // vite: the atomem/vite plugin (Node). The atomem-vectors bin: vite.node.config.ts.
      entry: { index: 'src/client/index.ts', engine: 'src/node.ts', protocol: 'src/protocol/index.ts', vite: 'src/vite.ts' },
      formats: ['es'],
    },
    target: 'es2022',
    // why: no source maps in the package (they were 18 MB, mostly third-party code).
    sourcemap: false,
    // why: .wasm must stay a file next to the bundle, never inlined as base64.
    assetsInlineLimit: 0,
    rolldownOptions: {
      // why: known-harmless warnings only (each explained in scripts/quiet-logs.ts)
      onLog: quietHarmless,
      // why: Prio3 (`sync/prio3-report.ts`) loads @divviup/prio3 on demand, as an optional peer (MPL-2.0, kept out of
      // dist): a shop that reports through two aggregators installs it. @hpke/core (MIT, HPKE for OHTTP and Prio3
      // shares) is bundled: `atomem/protocol` imports it statically for OHTTP
      external: [/^@tensorflow\//, /^@tensorflow-models\//, /^@energetic-ai\//, /^@huggingface\//, /^@divviup\//, /^node:/, /^vite$/],
      // why: the third-party licence comments (`@license`, `/*!`) stay in the bundles.
      output: { comments: { legal: true } },
    },
  },
});
