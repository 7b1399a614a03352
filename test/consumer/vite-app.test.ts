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
    for (const p of [
      'package.json',
      'README.md',
      'LICENSE',
      'THIRD_PARTY_NOTICES.md',
      'dist/node/shop-cli.js',
      'dist/node/use-lite-worker.js',
      'dist/index.js',
      'dist/vite.js',
      'dist/engine.js',
      'dist/protocol.js',
      'dist/manifest.json',
      'dist/worker/worker.js',
      'dist/node/vectors-cli.js',
      'dist/types/client/index.d.ts',
      'dist/types/vite.d.ts',
      'dist/assets/use-lite/model.json',
    ]) {
      expect(paths, p).toContain(p);
    }
    expect(paths.filter((p) => !p.startsWith('dist/') && !['package.json', 'README.md', 'LICENSE', 'THIRD_PARTY_NOTICES.md'].includes(p))).toEqual([]);
    // the README npm shows is the package's own (committed, no repository-relative links), not a copy of the repository's
    expect(readFileSync(join(app.dir, 'node_modules/atomem/README.md'), 'utf8')).toBe(readFileSync(PACKAGE_README, 'utf8'));
    expect(paths.filter((p) => p.endsWith('.map') || (p.endsWith('.ts') && !p.endsWith('.d.ts')))).toEqual([]);
    // what the plugin serves is all there, the runtimes' wasm included (a shop installs no other package for them)
    const manifest = JSON.parse(readFileSync(join(REPO, 'packages/atomem/dist/manifest.json'), 'utf8')) as {
      core: string[];
      features: Record<string, { files: string[] }>;
    };
    for (const f of [...manifest.core, ...Object.values(manifest.features).flatMap((x) => x.files)]) expect(paths, f).toContain(`dist/${f}`);
    for (const p of [
      'dist/assets/ort-wasm/ort-wasm-simd-threaded.asyncify.wasm',
      'dist/assets/ort-wasm/ort-wasm-simd-threaded.asyncify.mjs',
      'dist/assets/wllama/wllama.wasm',
    ]) {
      expect(manifest.features[p.includes('ort-wasm') ? 'minilm' : 'wllama'].files, p).toContain(p.slice('dist/'.length));
      expect(packed.files.find((f) => f.path === p)?.size, p).toBe(statSync(join(REPO, 'packages/atomem', p)).size);
    }
    // every path the package.json points at exists in the tarball
    const pkg = JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')) as {
      bin: Record<string, string>;
      exports: Record<string, Record<string, string> | string>;
    };
    const targets = [
      ...Object.values(pkg.bin),
      ...Object.values(pkg.exports).flatMap((e) =>
        typeof e === 'string'
          ? [e]
          : Object.entries(e)
              .filter(([c]) => c !== 'atomem-source')
              .map(([, t]) => t),
      ),
    ];
    for (const t of targets) expect(paths, t).toContain(t.replace(/^\.\//, ''));
    console.log(
      `tarball: ${(packed.size / 1e6).toFixed(1)} MB, ${packed.entryCount} files, ${(packed.unpackedSize / 1e6).toFixed(1)} MB unpacked (budget ${TARBALL_BUDGET / 1e6} MB)`,
    );
    expect(packed.size).toBeLessThanOrEqual(TARBALL_BUDGET);
  });

  it(`installs with a plain npm install: no dependencies, no install scripts, nothing compiled, ≤ ${INSTALL_BUDGET / 1e6} MB`, () => {
    const grown = app.footprint.after.bytes - app.footprint.before.bytes;
    console.log(
      `npm install <tarball> added ${(grown / 1e6).toFixed(1)} MB, ${app.footprint.after.files - app.footprint.before.files} files (budget ${INSTALL_BUDGET / 1e6} MB), in ${(app.installs.atomem.ms / 1000).toFixed(1)} s`,
    );
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
    const installed = Object.entries(top.atomem.dependencies ?? {})
      .filter(([, d]) => d.version !== undefined)
      .map(([n]) => n);
    expect(installed).toEqual(['vite']);
    const peers = JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')) as {
      dependencies?: object;
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    };
    expect(peers.dependencies).toBeUndefined();
    for (const name of Object.keys(top.atomem.dependencies ?? {})) expect(peers.peerDependenciesMeta[name]?.optional, name).toBe(true);
  });
});

/** A small shop: three departments, with descriptions like a real catalog's. */
const CLI_CATALOG = [
  ['tent', 'Two-person dome tent', 'Outdoor', 'Lightweight waterproof tent for camping under the stars.'],
  ['sleeping-bag', 'Down sleeping bag', 'Outdoor', 'Warm mummy sleeping bag for cold mountain nights.'],
  ['boots', 'Hiking boots', 'Outdoor', 'Waterproof leather boots for steep mountain trails.'],
  ['backpack', 'Trekking backpack 45 l', 'Outdoor', 'Backpack for multi-day hiking trips.'],
  ['headlamp', 'LED headlamp', 'Outdoor', 'Bright headlamp for night hikes and camping.'],
  ['stove', 'Camping stove', 'Outdoor', 'Compact gas stove to cook at the campsite.'],
  ['pan', 'Cast iron frying pan', 'Kitchen', 'Heavy skillet that sears steaks and bakes cornbread.'],
  ['knife', "Chef's knife", 'Kitchen', 'Sharp stainless steel knife for chopping vegetables.'],
  ['kettle', 'Electric kettle', 'Kitchen', 'Boils water for tea and coffee in two minutes.'],
  ['blender', 'Countertop blender', 'Kitchen', 'Blends smoothies, soups and sauces.'],
  ['pot', 'Stock pot', 'Kitchen', 'Large pot for soups, stews and pasta.'],
  ['board', 'Bamboo cutting board', 'Kitchen', 'Cutting board that is gentle on knife edges.'],
  ['novel', 'Mystery novel', 'Books', 'A detective story set in a foggy harbour town.'],
  ['cookbook', 'Italian cookbook', 'Books', 'Recipes for pasta, risotto and desserts.'],
  ['atlas', 'World atlas', 'Books', 'Maps of every country and ocean.'],
  ['poems', 'Collected poems', 'Books', 'A century of poetry in one volume.'],
  ['biography', 'Biography of a scientist', 'Books', 'The life and discoveries of a physicist.'],
  ['guide', 'Trail guide to the Alps', 'Books', 'Routes, huts and maps for hikers in the Alps.'],
].map(([id, title, dept, description]) => ({ id, title, categories: [dept], description, price: 10 }));

describe('the installed package in Node', () => {
  it('the atomem-vectors bin runs from node_modules/.bin (hashing embedder: no optional peer needed)', async () => {
    writeFileSync(
      join(app.dir, 'catalog.json'),
      JSON.stringify([
        { id: 'tent', title: 'Tent' },
        { id: 'stove', title: 'Camping stove' },
      ]),
    );
    const r = await run(
      process.execPath,
      [join(app.dir, 'node_modules/.bin/atomem-vectors'), '--catalog', 'catalog.json', '--out', 'vectors.bin', '--embedder', 'hashing'],
      app.dir,
    );
    expect(r.stdout + r.stderr).toMatch(/wrote vectors\.bin: 2 items/);
    expect(statSync(join(app.dir, 'vectors.bin')).size).toBeGreaterThan(0);
  });

  it('without the tfjs peers, atomem-vectors (default use-lite) stops with exit 2 and the npm i line to run', async () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')) as { peerDependencies: Record<string, string> };
    const err = await run(
      process.execPath,
      [join(app.dir, 'node_modules/.bin/atomem-vectors'), '--catalog', 'catalog.json', '--out', 'vectors-use.bin'],
      app.dir,
    ).then(
      () => '',
      (e: Error) => e.message,
    );
    expect(err).toMatch(/exited 2/);
    expect(err).toMatch(/--embedder use-lite needs the optional peers of atomem, and @tensorflow\/tfjs-[\w-]+ is not installed: npm i /);
    for (const p of ['@tensorflow/tfjs-core', '@tensorflow/tfjs-converter', '@tensorflow/tfjs-backend-wasm'])
      expect(err).toContain(`${p}@${pkg.peerDependencies[p]}`);
    expect(existsSync(join(app.dir, 'vectors-use.bin'))).toBe(false);
  });

  it('a fresh Node folder with atomem and the documented tfjs peers: atomem-vectors embeds with the real USE-lite, atomem-shop and --log publish the shop model', async () => {
    const pkg = JSON.parse(readFileSync(join(REPO, 'packages/atomem/package.json'), 'utf8')) as { peerDependencies: Record<string, string> };
    const peers = Object.fromEntries(
      ['@tensorflow/tfjs-core', '@tensorflow/tfjs-converter', '@tensorflow/tfjs-backend-wasm'].map((p) => [p, pkg.peerDependencies[p]]),
    );
    const shop = await createFreshApp(packed.file, {}, tmp, peers);
    expect(installTimeCode(shop.dir)).toEqual([]);
    const bin = (name: string): string => join(shop.dir, 'node_modules/.bin', name);
    writeFileSync(join(shop.dir, 'catalog.json'), JSON.stringify(CLI_CATALOG));
    writeFileSync(join(shop.dir, 'items.jsonl'), CLI_CATALOG.map((it) => JSON.stringify(it)).join('\n'));
    // shoppers buy within a department, in order
    const dept = (d: string): string[] => CLI_CATALOG.filter((it) => it.categories[0] === d).map((it) => it.id);
    const log = Array.from({ length: 30 }, (_, u) =>
      dept(['Outdoor', 'Kitchen', 'Books'][u % 3])
        .slice(0, 4 + (u % 3))
        .map((item, k) => JSON.stringify({ user: `u${u}`, item, at: Date.UTC(2026, 0, 1 + k, u), action: 'purchase' })),
    ).flat();
    writeFileSync(join(shop.dir, 'orders.jsonl'), log.join('\n'));

    // --threads 2: the USE-lite threads start from the tarball's dist/node/use-lite-worker.js
    const v = await run(
      process.execPath,
      [bin('atomem-vectors'), '--catalog', 'catalog.json', '--out', 'vectors.bin', '--batch', '6', '--threads', '2', '--no-cache'],
      shop.dir,
    );
    console.log(`atomem-vectors (use-lite, installed): ${v.stdout.trim()}`);
    expect(v.stdout).toMatch(
      /wrote vectors\.bin: 18 items, embedder use-lite@0\.2\.0\/uint8, dim 512, \d+ bytes, [\d.]+ s \(model load [\d.]+ s\); 0 from the cache, 18 embedded at \d+ items\/s on 2 threads/,
    );
    expect(v.stderr).toMatch(/embedding .*18\/18 items 100% .*\(eta /); // the progress bar, with its ETA, on stderr
    const s = await run(
      process.execPath,
      [bin('atomem-shop'), '--interactions', 'orders.jsonl', '--items', 'items.jsonl', '--content', 'vectors.bin', '--out', 'shop-model.bin', '--dim', '4'],
      shop.dir,
    );
    expect(s.stdout).toMatch(/shop-model\.bin: \d+ bytes, 18 items \(\d+ with content-only vectors\), 150 log rows, no DP/);
    const l = await run(
      process.execPath,
      [bin('atomem-vectors'), '--catalog', 'catalog.json', '--log', 'orders.jsonl', '--out', 'vectors-v2.bin', '--sasrec-epochs', '2', '--no-cache'],
      shop.dir,
    );
    expect(l.stdout).toMatch(
      /wrote vectors-v2\.bin \(format v2\): 18 items, embedder use-lite@0\.2\.0\/uint8.* 18 embedded at \d+ items\/s on 1 thread \(no cache\); shop model from 150 log rows of 30 users, no DP.*SASRec \d+ steps in [\d.]+ s \(\d threads?, stopped by the 2-epoch bound; validation NDCG@10 [\d.]+/,
    );

    // what the files hold, read back with the installed package's own decoders
    writeFileSync(
      join(shop.dir, 'check.mjs'),
      `import { readFileSync } from 'node:fs';
import { decodeCatalogFile } from 'atomem/protocol';
import { decodeShopModel } from 'atomem/shop';
const v1 = decodeCatalogFile(readFileSync('vectors.bin'));
const v2 = decodeCatalogFile(readFileSync('vectors-v2.bin'));
const vec = (id) => v1.vectors.get(id).vector;
const cos = (a, b) => { let s = 0; for (let i = 0; i < a.length; i++) s += a[i] * b[i]; return s; };
console.log(JSON.stringify({
  v1: { version: v1.version, embedder: v1.embedder, dim: v1.dim, items: v1.vectors.size },
  tentSleepingBag: cos(vec('tent'), vec('sleeping-bag')), tentPan: cos(vec('tent'), vec('pan')), knifeBoard: cos(vec('knife'), vec('board')), knifeNovel: cos(vec('knife'), vec('novel')),
  v2: { version: v2.version, embedder: v2.embedder, shop: !!v2.shop, sasrec: !!v2.shop?.sasrec, maxDiff: Math.max(...[...v1.vectors].map(([id, e]) => Math.max(...v2.vectors.get(id).vector.map((x, i) => Math.abs(x - e.vector[i]))))) },
  shopModel: { items: decodeShopModel(readFileSync('shop-model.bin')).items.length },
}));
`,
    );
    const check = JSON.parse((await run(process.execPath, ['check.mjs'], shop.dir)).stdout) as Record<string, Record<string, unknown> | number>;
    console.log(`decoded: ${JSON.stringify(check)}`);
    // the page's default embedder id (uint8 USE-lite): the browser engine uses the file instead of embedding the catalog
    expect(check.v1).toEqual({ version: 1, embedder: 'use-lite@0.2.0/uint8', dim: 512, items: 18 });
    // the same vectors in both files (up to float rounding: USE-lite pads each batch to its longest text, and the two runs batch differently)
    expect(check.v2).toMatchObject({ version: 2, embedder: 'use-lite@0.2.0/uint8', shop: true, sasrec: true });
    expect((check.v2 as { maxDiff: number }).maxDiff).toBeLessThan(1e-5);
    expect(check.shopModel).toEqual({ items: 18 });
    // real sentence embeddings, not hashes: a tent is nearer a sleeping bag than a frying pan, a knife nearer a cutting board than a novel
    expect(check.tentSleepingBag as number).toBeGreaterThan(check.tentPan as number);
    expect(check.knifeBoard as number).toBeGreaterThan(check.knifeNovel as number);
  }, 420_000);
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
    const emitted = readdirSync(out, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name).slice(out.length + 1))
      .sort();
    const manifest = JSON.parse(readFileSync(join(app.dir, 'node_modules/atomem/dist/manifest.json'), 'utf8')) as {
      core: string[];
      features: Record<string, { files: string[] }>;
    };
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
    writeFileSync(
      join(app.dir, 'vite.runtimes.config.js'),
      "import atomem from 'atomem/vite';\nexport default { plugins: [atomem({ assets: ['minilm', 'wllama'] })] };\n",
    );
    const built = await viteBuild(app.dir, ['--config', 'vite.runtimes.config.js', '--outDir', 'dist-runtimes']);
    const [folder] = readdirSync(join(app.dir, 'dist-runtimes/assets')).filter((f) => f.startsWith('atomem-'));
    const out = join(app.dir, 'dist-runtimes/assets', folder);
    const emitted = readdirSync(out, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath, e.name).slice(out.length + 1))
      .sort();
    const pkgDist = join(app.dir, 'node_modules/atomem/dist');
    const manifest = JSON.parse(readFileSync(join(pkgDist, 'manifest.json'), 'utf8')) as { core: string[]; features: Record<string, { files: string[] }> };
    const want = [
      ...new Set([...manifest.core, ...manifest.features.minilm.files, ...manifest.features.wllama.files].map((f) => f.replace(/^assets\//, ''))),
    ].sort();
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
    const shop = await createFreshApp(packed.file, webpackRecipeFiles(), tmp, {
      webpack: '^5.113.0',
      'webpack-cli': '^6.0.1',
      'copy-webpack-plugin': '^14.0.0',
    });
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
