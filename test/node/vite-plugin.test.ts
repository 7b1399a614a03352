import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, type ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import atomem, { atomemFiles } from '../../packages/atomem/src/vite.js';

// atomem/vite against the BUILT package (packages/atomem/dist, `npm test` builds first): which
// files each option resolves to, its errors, and its dev middleware on a real Vite dev server.
// The whole path in a browser is test/consumer/.

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const DIST = join(REPO, 'packages/atomem/dist');
let tmp = '';

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'atomem-vite-plugin-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('atomemFiles: what each option serves and emits', () => {
  it('default use-lite: the worker graph core, USE-lite and the tfjs wasm; nothing of MiniLM, wllama or WebLLM', () => {
    const { files, worker } = atomemFiles(['use-lite'], REPO, DIST);
    expect(worker).toBe('worker/worker.js');
    const names = [...files.keys()];
    expect(names).toContain('worker/worker.js');
    expect(names).toContain('use-lite/model.json');
    expect(names).toContain('use-lite/vocab.json');
    expect(names.some((n) => n.startsWith('tfjs-wasm/'))).toBe(true);
    expect(names.filter((n) => /^(ort-wasm|wllama)\//.test(n) || /(minilm|transformers|wllama|webllm|lib)-/.test(n))).toEqual([]);
  });

  it('minilm and wllama take their wasm from the exact package versions installed next to the app', () => {
    const { files } = atomemFiles(['minilm', 'wllama'], REPO, DIST);
    expect(files.get('ort-wasm/ort-wasm-simd-threaded.asyncify.wasm')).toMatch(/node_modules[\\/]onnxruntime-web[\\/]dist[\\/]/);
    expect(files.get('wllama/wllama.wasm')).toMatch(/node_modules[\\/]@wllama[\\/]wllama[\\/]esm[\\/]wasm[\\/]/);
    expect([...files.keys()].some((n) => n.startsWith('use-lite/'))).toBe(false);
  });

  it('names the package and exact version to install when it is missing or another version', () => {
    const app = join(tmp, 'shop');
    mkdirSync(join(app, 'node_modules', 'onnxruntime-web'), { recursive: true });
    expect(() => atomemFiles(['wllama'], app, DIST)).toThrow(/needs @wllama\/wllama@\d+\.\d+\.\d+.*npm i -D @wllama\/wllama@/);
    writeFileSync(join(app, 'node_modules', 'onnxruntime-web', 'package.json'), JSON.stringify({ name: 'onnxruntime-web', version: '1.0.0' }));
    expect(() => atomemFiles(['minilm'], app, DIST)).toThrow(/needs onnxruntime-web@\S+ exactly .*found 1\.0\.0/);
    expect(() => atomemFiles(['gpt' as never], app, DIST)).toThrow(/unknown asset 'gpt'.*'use-lite', 'minilm', 'wllama', 'webllm'/);
    expect(() => atomemFiles([], app, join(tmp, 'nowhere'))).toThrow(/manifest\.json is missing/);
    expect(() => atomem({ assets: 'use-lite' as never })).toThrow(TypeError);
  });
});

describe('the dev middleware on a real Vite dev server', () => {
  let server: ViteDevServer;
  let base = '';

  beforeAll(async () => {
    const root = join(tmp, 'dev');
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>x</title>');
    server = await createServer({ root, configFile: false, logLevel: 'silent', plugins: [atomem()], server: { host: '127.0.0.1', port: 0 } });
    await server.listen();
    base = server.resolvedUrls!.local[0];
  });
  afterAll(() => server?.close());

  it('excludes atomem from dependency pre-bundling', () => {
    expect(server.config.optimizeDeps.exclude).toContain('atomem');
  });

  it('serves the worker and the model files untouched, JSON as UTF-8, wasm as application/wasm', async () => {
    const worker = await fetch(`${base}@atomem/worker/worker.js`);
    expect(worker.status).toBe(200);
    expect(worker.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const { readFileSync } = await import('node:fs');
    expect(await worker.text()).toBe(readFileSync(join(DIST, 'worker/worker.js'), 'utf8')); // byte for byte: no import rewriting
    const vocab = await fetch(`${base}@atomem/use-lite/vocab.json`);
    expect(vocab.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await vocab.text()).toContain('▁');
    const wasm = (await fetch(`${base}@atomem/tfjs-wasm/tfjs-backend-wasm-simd.wasm`)).headers.get('content-type');
    expect(wasm).toBe('application/wasm');
  });

  it('answers 404 for a part that is not included, naming the option to add, and for anything else', async () => {
    const ort = await fetch(`${base}@atomem/ort-wasm/ort-wasm-simd-threaded.asyncify.wasm`);
    expect(ort.status).toBe(404);
    expect(await ort.text()).toMatch(/add 'minilm' to atomem\(\{ assets \}\)/);
    const { readdirSync } = await import('node:fs');
    const webllmChunk = readdirSync(join(DIST, 'worker')).find((f) => f.startsWith('webllm-'))!;
    const chunk = await fetch(`${base}@atomem/worker/${webllmChunk}`);
    expect(chunk.status).toBe(404);
    expect(await chunk.text()).toMatch(/add 'webllm' to atomem\(\{ assets \}\)/);
    expect((await fetch(`${base}@atomem/worker/no-such-chunk.js`)).status).toBe(404); // only the listed files are served
    expect((await fetch(`${base}@atomem/manifest.json`)).status).toBe(404);
  });
});
