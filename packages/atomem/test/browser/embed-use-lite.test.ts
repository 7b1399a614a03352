import * as tf from '@tensorflow/tfjs-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cosine, norm } from '../../src/core/vector.js';
import { createUseLiteEmbedder, USE_LITE_DIM, USE_LITE_ID, type UseLiteEmbedder } from '../../src/embed/use-lite.js';
import { fetchAssetSource } from '../../src/embed/use-lite-browser.js';
// Node reference vectors (3 sentences × 512, rounded to 6 decimals), generated once in Node with
// `npx tsx packages/atomem/test/browser/use-lite-reference.gen.ts`; regenerate only if the weights change.
import reference from './use-lite-reference.json';

// The shipped (uint8) weights of the built package, served by the vitest/vite dev server (same
// origin, the vite root is the repo root): no copy, no network, no CDN. `npm test` builds first.
const MODEL_URL = '/packages/atomem/dist/assets/use-lite';
const WASM_URL = '/node_modules/@tensorflow/tfjs-backend-wasm/dist/';

/**
 * Test-harness quirk, not a product concern: the Vite dev server treats every extension-less URL
 * (tfjs weight shards are named `group1-shardNof7`) as a JS module and answers 500 when it cannot
 * transform the binary. Such files are fetched as `?url&inline` instead — Vite then answers
 * `export default "data:…;base64,…"` built from the file's exact bytes — and the data URL is
 * turned back into a Response. Everything else (model.json, vocab.json, the .wasm binaries, 404s)
 * is plain static HTTP. A real shop's static server serves the shards as-is.
 */
const viteDevFetch: typeof fetch = async (input, init) => {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  const last = new URL(url, location.href).pathname.split('/').pop() ?? '';
  if (last.includes('.')) return fetch(input, init);
  const module = await fetch(`${url}?url&inline`, init);
  if (!module.ok) return module;
  const literal = /export default ("(?:[^"\\]|\\.)*")/.exec(await module.text());
  if (literal === null) throw new Error(`viteDevFetch: no inlined data URL for ${url}`);
  return fetch(JSON.parse(literal[1]) as string);
};

const SCI_FI = 'loves space adventure science fiction movies';

describe('USE-lite in the browser (fetched assets, tfjs wasm)', () => {
  let use: UseLiteEmbedder;

  beforeAll(async () => {
    use = await createUseLiteEmbedder({ assets: fetchAssetSource(MODEL_URL, { fetch: viteDevFetch }), wasmPaths: WASM_URL });
  }, 120_000);

  afterAll(async () => {
    await use?.dispose?.();
  });

  it('loads on the wasm backend with the documented id and dimension', () => {
    expect(typeof window).toBe('object');
    expect(tf.getBackend()).toBe('wasm');
    expect(use.id).toBe(USE_LITE_ID);
    expect(use.dim).toBe(USE_LITE_DIM);
  });

  it('tokenizes the pinned sentence exactly as in Node (vocab.json decoded as UTF-8)', () => {
    // "▁love" "s" "▁space" "▁adventure" "▁science" "▁fiction" "▁movies"
    expect(use.tokenize(SCI_FI)).toEqual([241, 7, 1016, 6797, 2313, 6290, 2468]);
    for (const s of reference.sentences) expect(use.tokenize(s.text)).toEqual(s.tokens);
  });

  it("gives Node's vectors within 1e-5 per component (same uint8 weights)", async () => {
    expect(reference.embedderId).toBe(USE_LITE_ID);
    expect(reference.sentences).toHaveLength(3);
    const out = await use.embed(reference.sentences.map((s) => s.text));
    out.forEach((e, i) => {
      const want = reference.sentences[i].vector;
      expect(want).toHaveLength(USE_LITE_DIM);
      expect(e.vector).toHaveLength(USE_LITE_DIM);
      expect(norm(e.vector)).toBeCloseTo(1, 5);
      let maxDiff = 0;
      for (let d = 0; d < USE_LITE_DIM; d++) maxDiff = Math.max(maxDiff, Math.abs(e.vector[d] - want[d]));
      expect(maxDiff).toBeLessThan(1e-5);
      console.log(`browser vs Node, "${reference.sentences[i].text}": max |Δ| = ${maxDiff.toExponential(2)}`);
    });
  });

  it('ranks the paraphrase above the unrelated taste', async () => {
    const [a, b, c] = await use.embed([SCI_FI, 'enjoys sci-fi films set in outer space', 'prefers romantic comedies']);
    expect(cosine(a.vector, b.vector)).toBeGreaterThan(cosine(a.vector, c.vector));
  });

  it('embeds a batch of 64 short item texts (throughput logged)', async () => {
    const genres = ['Crime, Drama', 'Comedy, Romance', 'Sci-Fi, Horror', 'Animation, Children, Comedy'];
    const texts = Array.from({ length: 64 }, (_, i) => `Movie ${i} (${1950 + i}). ${genres[i % genres.length]}`);
    await use.embed(texts); // warm-up at this batch shape
    const runs = 3;
    const t0 = performance.now();
    let out = [] as Awaited<ReturnType<UseLiteEmbedder['embed']>>;
    for (let r = 0; r < runs; r++) out = await use.embed(texts);
    const ms = (performance.now() - t0) / runs;
    console.log(`USE-lite in Chromium: batch of 64 in ${ms.toFixed(1)} ms = ${((64 / ms) * 1000).toFixed(0)} sentences/s`);
    expect(out).toHaveLength(64);
    expect(out.every((e) => e.vector.length === USE_LITE_DIM && Number.isFinite(e.vector[0]))).toBe(true);
  }, 60_000);

  it('names the URL and HTTP status when a file is missing', async () => {
    const src = fetchAssetSource(MODEL_URL);
    expect(src.locate('vocab.json')).toBe(`${MODEL_URL}/vocab.json`);
    await expect(src.text('no-such-file.json')).rejects.toThrow(`GET ${MODEL_URL}/no-such-file.json returned HTTP 404`);
  });
});

describe('fetchAssetSource decoding', () => {
  const serve =
    (body: Uint8Array, contentType: string): typeof fetch =>
    async () =>
      new Response(body.slice().buffer, { headers: { 'content-type': contentType } });

  it('decodes UTF-8 from the bytes even when the server mislabels the charset', async () => {
    const body = new TextEncoder().encode('[["\u2581love", -1]]');
    const src = fetchAssetSource('https://shop.example/models/', { fetch: serve(body, 'application/json; charset=iso-8859-1') });
    expect(src.locate('vocab.json')).toBe('https://shop.example/models/vocab.json');
    expect(await src.text('vocab.json')).toBe('[["\u2581love", -1]]');
    expect(new Uint8Array(await src.bytes('vocab.json'))).toEqual(body);
  });

  it('rejects bytes that are not UTF-8, naming the URL', async () => {
    const src = fetchAssetSource('https://shop.example/models', { fetch: serve(new Uint8Array([0x5b, 0xe2, 0x96, 0x5d]), 'application/json') });
    await expect(src.text('vocab.json')).rejects.toThrow('https://shop.example/models/vocab.json is not valid UTF-8');
  });

  it('names the URL on network failure and the status on HTTP errors', async () => {
    const down: typeof fetch = async () => {
      throw new TypeError('Failed to fetch');
    };
    await expect(fetchAssetSource('https://shop.example/m', { fetch: down }).bytes('model.json')).rejects.toThrow(
      'request for https://shop.example/m/model.json failed: Failed to fetch',
    );
    const forbidden: typeof fetch = async () => new Response('no', { status: 403, statusText: 'Forbidden' });
    await expect(fetchAssetSource('https://shop.example/m', { fetch: forbidden }).text('model.json')).rejects.toThrow(
      'GET https://shop.example/m/model.json returned HTTP 403 Forbidden',
    );
  });
});
