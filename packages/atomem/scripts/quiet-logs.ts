import type { RolldownOptions } from 'rolldown';

type OnLog = NonNullable<RolldownOptions['onLog']>;

/**
 * The build's known-harmless warnings, dropped so that a clean `npm run build` prints none (any
 * other warning still prints). Each is harmless for the reason given:
 * - sjcl (bundled by @cloudflare/blindrsa-ts and voprf-ts, the Privacy Pass client) ends with
 *   `if (typeof module !== 'undefined' && module.exports) module.exports = sjcl` — guarded, never
 *   true in a browser or worker (COMMONJS_VARIABLE_IN_ESM) — and `require('crypto')` only where
 *   there is no WebCrypto, which never happens in a browser ("crypto" externalized).
 * - @hpke/common (HPKE for Oblivious HTTP reports) does `await import("crypto")` only where
 *   `globalThis.crypto` is missing, which never happens in a browser or worker ("crypto" externalized).
 * - `src/embed/use-lite-node.ts` is imported (dynamically) only when `use-lite.ts` runs under Node
 *   (`atomem/engine` in Node, the CLI); in the browser and worker builds its `node:` imports are
 *   never reached ("node:…" externalized).
 */
export const quietHarmless: OnLog = (level, log, handler) => {
  const text = `${log.code ?? ''} ${log.message ?? ''} ${log.id ?? ''}`;
  if (log.code === 'COMMONJS_VARIABLE_IN_ESM' && /[\\/]sjcl[\\/]/.test(text)) return;
  if (/Module "crypto" has been externalized for browser compatibility, imported by "[^"]*[\\/]sjcl[\\/]/.test(text)) return;
  if (/Module "crypto" has been externalized for browser compatibility, imported by "[^"]*[\\/]@hpke[\\/]common[\\/]/.test(text)) return;
  if (/Module "node:[\w/]+" has been externalized for browser compatibility, imported by "[^"]*[\\/]use-lite-node[\w-]*\.(ts|js)"/.test(text)) return;
  handler(level, log);
};
