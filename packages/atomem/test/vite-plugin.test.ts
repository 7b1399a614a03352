import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createServer, type ViteDevServer } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import atomem, { atomemFiles } from '../src/vite.js';

// atomem/vite against the BUILT package (packages/atomem/dist, `npm test` builds first): which
// files each option resolves to, its errors, and its dev middleware on a real Vite dev server.
// The whole path in a browser is test/consumer/.

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const DIST = join(REPO, 'packages/atomem/dist');
let tmp = '';

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'atomem-vite-plugin-'));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('atomemFiles: what each option serves and emits', () => {
  it('default use-lite: the worker graph core, USE-lite and the tfjs wasm; nothing of MiniLM, wllama or WebLLM', () => {
    const { files, worker } = atomemFiles(['use-lite'], DIST);
    expect(worker).toBe('worker/worker.js');
    const names = [...files.keys()];
    expect(names).toContain('worker/worker.js');
    expect(names).toContain('use-lite/model.json');
    expect(names).toContain('use-lite/vocab.json');
    expect(names.some((n) => n.startsWith('tfjs-wasm/'))).toBe(true);
    expect(names.filter((n) => /^(ort-wasm|wllama)\//.test(n) || /(minilm|transformers|wllama|webllm|lib)-/.test(n))).toEqual([]);
  });

  it('minilm and wllama: their wasm ship inside the package, byte for byte the files of the runtime versions the worker bundles', () => {
    const { files } = atomemFiles(['minilm', 'wllama'], DIST);
    const ortDir = join(REPO, 'node_modules/onnxruntime-web/dist');
    const shipped = {
      'ort-wasm/ort-wasm-simd-threaded.asyncify.wasm': join(ortDir, 'ort-wasm-simd-threaded.asyncify.wasm'),
      'ort-wasm/ort-wasm-simd-threaded.asyncify.mjs': join(ortDir, 'ort-wasm-simd-threaded.asyncify.mjs'),
      'wllama/wllama.wasm': join(REPO, 'node_modules/@wllama/wllama/esm/wasm/wllama.wasm'),
    };
    for (const [rel, upstream] of Object.entries(shipped)) {
      const file = files.get(rel);
      expect(file, rel).toBe(join(DIST, 'assets', rel)); // from atomem's own dist/, not from another package
      expect(readFileSync(file!).equals(readFileSync(upstream)), `${rel} equals ${upstream}`).toBe(true);
    }
    expect([...files.keys()].some((n) => n.startsWith('use-lite/'))).toBe(false);
    // each wasm only for its option
    expect([...atomemFiles(['minilm'], DIST).files.keys()].filter((n) => n.startsWith('wllama/'))).toEqual([]);
    expect([...atomemFiles(['wllama'], DIST).files.keys()].filter((n) => n.startsWith('ort-wasm/'))).toEqual([]);
  });

  it('readable errors: unknown option, missing manifest, a file the manifest lists but the package lacks, a non-array option', () => {
    expect(() => atomemFiles(['gpt' as never], DIST)).toThrow(/unknown asset 'gpt'.*'use-lite', 'minilm', 'wllama', 'webllm'/);
    expect(() => atomemFiles([], join(tmp, 'nowhere'))).toThrow(/manifest\.json is missing/);
    const broken = join(tmp, 'broken');
    mkdirSync(broken, { recursive: true });
    copyFileSync(join(DIST, 'manifest.json'), join(broken, 'manifest.json'));
    expect(() => atomemFiles([], broken)).toThrow(/broken[\\/]worker[\\/]\S+\.js \(for worker\/\S+\.js\) is missing: reinstall atomem/);
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

describe('the dev middleware with minilm and wllama', () => {
  let server: ViteDevServer;

  beforeAll(async () => {
    const root = join(tmp, 'dev-runtimes');
    mkdirSync(root, { recursive: true });
    writeFileSync(join(root, 'index.html'), '<!doctype html><title>x</title>');
    server = await createServer({
      root,
      configFile: false,
      logLevel: 'silent',
      plugins: [atomem({ assets: ['minilm', 'wllama'] })],
      server: { host: '127.0.0.1', port: 0 },
    });
    await server.listen();
  });
  afterAll(() => server?.close());

  it("serves the shipped ONNX runtime and wllama wasm (and the runtime's .mjs glue as JavaScript), but no USE-lite file", async () => {
    const base = server.resolvedUrls!.local[0];
    const ort = await fetch(`${base}@atomem/ort-wasm/ort-wasm-simd-threaded.asyncify.wasm`);
    expect(ort.status).toBe(200);
    expect(ort.headers.get('content-type')).toBe('application/wasm');
    expect(Number(ort.headers.get('content-length'))).toBe(statSync(join(DIST, 'assets/ort-wasm/ort-wasm-simd-threaded.asyncify.wasm')).size);
    await ort.arrayBuffer();
    const glue = await fetch(`${base}@atomem/ort-wasm/ort-wasm-simd-threaded.asyncify.mjs`);
    expect(glue.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(await glue.text()).toBe(readFileSync(join(DIST, 'assets/ort-wasm/ort-wasm-simd-threaded.asyncify.mjs'), 'utf8'));
    const wllama = await fetch(`${base}@atomem/wllama/wllama.wasm`);
    expect(wllama.status).toBe(200);
    expect(new Uint8Array(await wllama.arrayBuffer()).subarray(0, 4)).toEqual(new Uint8Array([0, 97, 115, 109])); // \0asm
    const use = await fetch(`${base}@atomem/use-lite/model.json`);
    expect(use.status).toBe(404);
    expect(await use.text()).toMatch(/add 'use-lite' to atomem\(\{ assets \}\)/);
  });
});
