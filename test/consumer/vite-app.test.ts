import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createFreshApp,
  installTimeCode,
  launchChromium,
  PACKAGE_README,
  packAtomem,
  removeTemp,
  REPO,
  run,
  serve,
  serveStatic,
  viteBuild,
  webpackRecipeFiles,
  visit,
  type FreshApp,
  type Packed,
  type Served,
  type Visit,
} from '../../packages/bench/src/consumer-app.js';

// atomem as a shop gets it: `npm pack` of the built package, a fresh Vite app in a temp folder
// outside the repository, a plain `npm install <tarball>`, and ONLY the quick start of the
// package's README, the one npm shows (its `<!-- consumer-test: … -->` blocks: vite.config.js
// with the plugin line, index.html, main.js; the repository README's copies are identical).
// One tarball and one app for every case below. `npm test` builds first (pretest).

/**
 * Budgets of issue #10 for a package that holds every option's files: USE-lite (uint8, 7 MB),
 * tfjs, the worker chunks, onnxruntime-web's wasm for MiniLM (27 MB) and wllama's (10 MB).
 */
const TARBALL_BUDGET = 32e6;
const INSTALL_BUDGET = 60e6;

let tmp = '';
let packed: Packed;
let app: FreshApp;
let browser: Browser;
const servers: Served[] = [];

beforeAll(async () => {
  expect(existsSync(join(REPO, 'packages/atomem/dist/manifest.json')), 'run `npm run build` first (npm test does)').toBe(true);
  tmp = mkdtempSync(join(tmpdir(), 'atomem-consumer-'));
  packed = await packAtomem(tmp);
  app = await createFreshApp(packed.file, undefined, tmp);
  browser = await launchChromium();
}, 600_000);

afterAll(async () => {
  for (const s of servers) await s.stop();
  await browser?.close();
  if (tmp) removeTemp(tmp);
});

/** Everything a shop page must see on a visit: recommendations, no error, nothing off the origin. */
function expectHealthy(v: Visit, where: string): void {
  expect(v.pageErrors, `${where}: page errors`).toEqual([]);
  expect(v.consoleErrors, `${where}: console errors ${JSON.stringify(v.consoleErrors)}`).toEqual([]);
  expect(v.offOrigin, `${where}: requests off the origin`).toEqual([]);
  expect(v.failed, `${where}: failed requests`).toEqual([]);
  expect(v.status, `${where}: #status`).toBe('');
  expect(v.recommendations.length, `${where}: recommendations`).toBe(3);
  // the quick start tracks a tent purchase: the outdoor boots rank first, explained
  expect(v.recommendations[0]).toMatch(/^boots: .*tent/i);
}

describe('the packed tarball', () => {
  it(`holds the built package only, within ${TARBALL_BUDGET / 1e6} MB`, () => {
    const paths = packed.files.map((f) => f.path);
    for (const p of ['package.json', 'README.md', 'dist/index.js', 'dist/vite.js', 'dist/engine.js', 'dist/protocol.js', 'dist/manifest.json', 'dist/worker/worker.js', 'dist/node/vectors-cli.js', 'dist/types/client/index.d.ts', 'dist/types/vite.d.ts', 'dist/assets/use-lite/model.json']) {
      expect(paths, p).toContain(p);
    }
    expect(paths.filter((p) => !p.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE'].includes(p))).toEqual([]);
    // the README npm shows is the package's own (committed, no repository-relative links), not a copy of the repository's
    expect(readFileSync(join(app.dir, 'node_modules/atomem/README.md'), 'utf8')).toBe(readFileSync(PACKAGE_README, 'utf8'));
    expect(paths.filter((p) => p.endsWith('.map') || (p.endsWith('.ts') && !p.endsWith('.d.ts')))).toEqual([]);
    // what the plugin serves is all there, the runtimes' wasm included (a shop installs no other package for them)
    const manifest = JSON.parse(readFileSync(join(REPO, 'packages/atomem/dist/manifest.json'), 'utf8')) as { core: string[]; features: Record<string, { files: string[] }> };
    for (const f of [...manifest.core, ...Object.values(manifest.features).flatMap((x) => x.files)]) expect(paths, f).toContain(`dist/${f}`);
    for (const p of ['dist/assets/ort-wasm/ort-wasm-simd-threaded.asyncify.wasm', 'dist/assets/ort-wasm/ort-wasm-simd-threaded.asyncify.mjs', 'dist/assets/wllama/wllama.wasm']) {
      expect(manifest.features[p.includes('ort-wasm') ? 'minilm' : 'wllama'].files, p).toContain(p.slice('dist/'.length));
      expect(packed.files.find((f) => f.path === p)?.size, p).toBe(statSync(join(REPO, 'packages/atomem', p)).size);
    }
    // every path the package.json points at exists in the tarball
    const pkg = JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')) as { bin: Record<string, string>; exports: Record<string, Record<string, string> | string> };
    const targets = [...Object.values(pkg.bin), ...Object.values(pkg.exports).flatMap((e) => (typeof e === 'string' ? [e] : Object.entries(e).filter(([c]) => c !== 'atomem-source').map(([, t]) => t)))];
    for (const t of targets) expect(paths, t).toContain(t.replace(/^\.\//, ''));
    console.log(`tarball: ${(packed.size / 1e6).toFixed(1)} MB, ${packed.entryCount} files, ${(packed.unpackedSize / 1e6).toFixed(1)} MB unpacked (budget ${TARBALL_BUDGET / 1e6} MB)`);
    expect(packed.size).toBeLessThanOrEqual(TARBALL_BUDGET);
  });

  it(`installs with a plain npm install: no dependencies, no install scripts, nothing compiled, ≤ ${INSTALL_BUDGET / 1e6} MB`, () => {
    const grown = app.footprint.after.bytes - app.footprint.before.bytes;
    console.log(`npm install <tarball> added ${(grown / 1e6).toFixed(1)} MB, ${app.footprint.after.files - app.footprint.before.files} files (budget ${INSTALL_BUDGET / 1e6} MB), in ${(app.installs.atomem.ms / 1000).toFixed(1)} s`);
    expect(grown).toBeLessThanOrEqual(INSTALL_BUDGET);
    // --foreground-scripts prints every lifecycle script npm runs as "> pkg@version script"
    expect(app.installs.atomem.output).not.toMatch(/^> /m);
    expect(app.installs.atomem.output).toMatch(/added 1 package/);
    expect(app.installs.atomem.output).not.toMatch(/allow-?scripts/i);
    expect(installTimeCode(app.dir)).toEqual([]);
    const top = app.tree.dependencies ?? {};
    expect(Object.keys(top).sort()).toEqual(['atomem', 'vite']);
    expect(top.atomem.version).toBe(JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')).version);
    // npm ls lists atomem's optional peers; none is installed but vite, which the app itself depends on
    const installed = Object.entries(top.atomem.dependencies ?? {}).filter(([, d]) => d.version !== undefined).map(([n]) => n);
    expect(installed).toEqual(['vite']);
    const peers = JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')) as { dependencies?: object; peerDependenciesMeta: Record<string, { optional?: boolean }> };
    expect(peers.dependencies).toBeUndefined();
    for (const name of Object.keys(top.atomem.dependencies ?? {})) expect(peers.peerDependenciesMeta[name]?.optional, name).toBe(true);
  });
});

describe('the installed package in Node', () => {
  it('the atomem-vectors bin runs from node_modules/.bin (hashing embedder: no optional peer needed)', async () => {
    writeFileSync(join(app.dir, 'catalog.json'), JSON.stringify([{ id: 'tent', title: 'Tent' }, { id: 'stove', title: 'Camping stove' }]));
    const r = await run(process.execPath, [join(app.dir, 'node_modules/.bin/atomem-vectors'), '--catalog', 'catalog.json', '--out', 'vectors.bin', '--embedder', 'hashing'], app.dir);
    expect(r.stdout + r.stderr).toMatch(/wrote vectors\.bin: 2 items/);
    expect(statSync(join(app.dir, 'vectors.bin')).size).toBeGreaterThan(0);
  });
});

describe('the README quick start in a fresh Vite app, in Chromium', () => {
  it('vite (dev): recommendations render, no page error, nothing off the origin; the worker files come untouched from the plugin', async () => {
    const dev = await serve(app.dir, 'dev');
    servers.push(dev);
    const v = await visit(browser, dev.url);
    expectHealthy(v, 'vite dev');
    const paths = v.requests.map((u) => new URL(u).pathname + new URL(u).search);
    expect(paths).toContain('/@atomem/worker/worker.js');
    expect(paths.some((p) => /^\/@atomem\/worker\/engine-[\w-]+\.js$/.test(p))).toBe(true);
    expect(paths).toContain('/@atomem/use-lite/model.json');
    // served as built: no ?v= / ?import / ?worker_file rewriting of the worker graph (it ran twice that way)
    expect(paths.filter((p) => p.startsWith('/@atomem/') && p.includes('?'))).toEqual([]);
    // optimizeDeps.exclude: the client is served from the package, not a pre-bundled copy
    expect(paths.some((p) => p.startsWith('/node_modules/.vite/deps/atomem'))).toBe(false);
    console.log(`vite dev: first recommendations ${v.msToRecommendations?.toFixed(0)} ms after navigation`);
    await dev.stop();
  }, 180_000);

  it('vite build + vite preview: the build holds the worker graph and USE-lite only; recommendations render, nothing off the origin', async () => {
    const built = await viteBuild(app.dir);
    const folders = readdirSync(join(app.dir, 'dist/assets')).filter((f) => f.startsWith('atomem-'));
    expect(folders).toHaveLength(1);
    const out = join(app.dir, 'dist/assets', folders[0]);
    const emitted = readdirSync(out, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(out.length + 1)).sort();
    const manifest = JSON.parse(readFileSync(join(app.dir, 'node_modules/atomem/dist/manifest.json'), 'utf8')) as { core: string[]; features: Record<string, { files: string[] }> };
    const want = [...new Set([...manifest.core, ...manifest.features['use-lite'].files].map((f) => f.replace(/^assets\//, '')))].sort();
    expect(emitted).toEqual(want); // no MiniLM, wllama or WebLLM chunk, no ONNX wasm
    expect(built.output).toMatch(/atomem: \d+ files, [\d.]+ MB \(use-lite\)/);

    const preview = await serve(app.dir, 'preview');
    servers.push(preview);
    const v = await visit(browser, preview.url);
    expectHealthy(v, 'vite preview');
    const paths = v.requests.map((u) => new URL(u).pathname);
    expect(paths).toContain(`/assets/${folders[0]}/worker/worker.js`);
    expect(paths).toContain(`/assets/${folders[0]}/use-lite/model.json`);
    console.log(`vite preview: first recommendations ${v.msToRecommendations?.toFixed(0)} ms after navigation, ${(v.bytes / 1e6).toFixed(1)} MB transferred`);
    await preview.stop();
  }, 180_000);

  it("base: './' — the same build served under a sub-path resolves every URL relative to the page", async () => {
    await viteBuild(app.dir, ['--base', './', '--outDir', 'dist-relative']);
    const preview = await serve(app.dir, 'preview', ['--base', '/shop/', '--outDir', 'dist-relative']);
    servers.push(preview);
    const v = await visit(browser, `${preview.url}shop/`);
    expectHealthy(v, "base './'");
    expect(v.requests.filter((u) => /\/(worker|use-lite)\//.test(u)).every((u) => new URL(u).pathname.startsWith('/shop/assets/atomem-'))).toBe(true);
    await preview.stop();
  }, 180_000);

  it("atomem({ assets: ['minilm', 'wllama'] }) emits the runtimes' wasm from the package itself: the app has no onnxruntime-web or @wllama/wllama", async () => {
    expect(existsSync(join(app.dir, 'node_modules/onnxruntime-web'))).toBe(false);
    expect(existsSync(join(app.dir, 'node_modules/@wllama/wllama'))).toBe(false);
    writeFileSync(join(app.dir, 'vite.runtimes.config.js'), "import atomem from 'atomem/vite';\nexport default { plugins: [atomem({ assets: ['minilm', 'wllama'] })] };\n");
    const built = await viteBuild(app.dir, ['--config', 'vite.runtimes.config.js', '--outDir', 'dist-runtimes']);
    const [folder] = readdirSync(join(app.dir, 'dist-runtimes/assets')).filter((f) => f.startsWith('atomem-'));
    const out = join(app.dir, 'dist-runtimes/assets', folder);
    const emitted = readdirSync(out, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(out.length + 1)).sort();
    const pkgDist = join(app.dir, 'node_modules/atomem/dist');
    const manifest = JSON.parse(readFileSync(join(pkgDist, 'manifest.json'), 'utf8')) as { core: string[]; features: Record<string, { files: string[] }> };
    const want = [...new Set([...manifest.core, ...manifest.features.minilm.files, ...manifest.features.wllama.files].map((f) => f.replace(/^assets\//, '')))].sort();
    expect(emitted).toEqual(want);
    for (const f of ['ort-wasm/ort-wasm-simd-threaded.asyncify.wasm', 'ort-wasm/ort-wasm-simd-threaded.asyncify.mjs', 'wllama/wllama.wasm']) {
      expect(emitted, f).toContain(f);
      expect(readFileSync(join(out, f)).equals(readFileSync(join(pkgDist, 'assets', f))), f).toBe(true);
    }
    expect(emitted.some((f) => f.startsWith('use-lite/'))).toBe(false);
    expect(built.output).toMatch(/atomem: \d+ files, [\d.]+ MB \(minilm, wllama\)/);
  }, 180_000);

  it('the quick start degrades visibly when atomem cannot start: a build without the model files shows "unavailable", no uncaught error', async () => {
    // the plugin told to ship no model files while the page uses the default USE-lite embedder
    writeFileSync(join(app.dir, 'vite.noassets.config.js'), "import atomem from 'atomem/vite';\nexport default { plugins: [atomem({ assets: [] })] };\n");
    await viteBuild(app.dir, ['--config', 'vite.noassets.config.js', '--outDir', 'dist-noassets']);
    const preview = await serve(app.dir, 'preview', ['--config', 'vite.noassets.config.js', '--outDir', 'dist-noassets']);
    servers.push(preview);
    const v = await visit(browser, preview.url, { timeoutMs: 60_000 });
    expect(v.status).toBe('Recommendations are unavailable right now.');
    expect(v.recommendations).toEqual([]);
    expect(v.pageErrors).toEqual([]); // createAtomem rejected and the page's catch handled it
    // the page's catch logged why: the USE-lite chunk the build left out could not be loaded
    expect(v.consoleErrors.join('\n')).toMatch(/use-lite-[\w-]+\.js/);
    expect(v.offOrigin).toEqual([]);
    await preview.stop();
  }, 180_000);
});

describe("the README's webpack 5 recipe", () => {
  it('a fresh app built with webpack (the recipe config, the quick start plus two options) renders recommendations from its own origin', async () => {
    const shop = await createFreshApp(packed.file, webpackRecipeFiles(), tmp, { webpack: '^5.113.0', 'webpack-cli': '^6.0.1', 'copy-webpack-plugin': '^14.0.0' });
    expect(installTimeCode(shop.dir)).toEqual([]);
    await run(process.execPath, [join(shop.dir, 'node_modules/webpack-cli/bin/cli.js')], shop.dir);
    const site = await serveStatic(join(shop.dir, 'dist'));
    servers.push(site);
    const v = await visit(browser, site.url);
    expectHealthy(v, 'webpack');
    const paths = v.requests.map((u) => new URL(u).pathname);
    expect(paths).toContain('/main.js');
    expect(paths).toContain('/atomem/worker/worker.js');
    expect(paths).toContain('/atomem/assets/use-lite/model.json');
    await site.stop();
  }, 240_000);
});
