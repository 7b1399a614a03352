/**
 * `npm run bench:package`: what `npm i atomem` costs a shop, and what its shoppers download.
 *
 * 1. `npm pack` of the built package (run `npm run build` first): tarball bytes, unpacked bytes,
 *    file count — budget: tarball ≤ 32 MB;
 * 2. a fresh Vite app in a temp folder (vite ~8.3.8 installed first), then a plain
 *    `npm install <tarball>`: node_modules growth and file count — budget: ≤ 60 MB;
 * 3. the main-thread entry (`dist/index.js` and the chunks it imports, gzip -9 each) and the
 *    build output per `atomem({ assets })` choice (files and bytes the plugin emits) — the
 *    figures packages/atomem/README.md states (packages/atomem/test/package-readme.test.ts re-measures them);
 * 4. the README's quick start built (`vite build`) and served (`vite preview`, which gzips), in
 *    Debian's Chromium: a first visit (fresh context: empty HTTP cache, empty IndexedDB) —
 *    bytes of the files it loaded, bytes on the wire, navigation → first recommendation
 *    rendered; then a returning visit in the same context (HTTP cache and IndexedDB kept).
 *    `--runs` first visits (median).
 *
 * Prints a markdown table; exits 1 when a budget fails.
 *
 *   npm run bench:package -- [--runs N] [--json FILE]
 */
import { statSync, writeFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { createFreshApp, launchChromium, packAtomem, removeTemp, REPO, serve, viteBuild, visit, type Visit } from './consumer-app.js';
import { emittedSizes, KB, MB, mainThreadSize } from './package-sizes.js';

const TARBALL_BUDGET = 32e6;
const INSTALL_BUDGET = 60e6;

/** Bytes of the files behind a visit's requests (each path once), looked up in the built app. */
function fileBytes(distDir: string, v: Visit): number {
  let n = 0;
  for (const path of new Set(v.requests.map((u) => new URL(u).pathname))) {
    try {
      n += statSync(join(distDir, path === '/' ? 'index.html' : decodeURIComponent(path))).size;
    } catch {
      // not a file of the build
    }
  }
  return n;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];

async function main(): Promise<void> {
  const program = new Command('bench:package')
    .description('tarball and install footprint of atomem, build output per option, first-visit bytes and time in Chromium')
    .option(
      '--runs <n>',
      'first visits to time (median)',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('a positive integer');
        return n;
      },
      3,
    )
    .option('--json <file>', 'also write the figures as JSON')
    .parse();
  const opts = program.opts<{ runs: number; json?: string }>();
  const tmp = mkdtempSync(join(tmpdir(), 'atomem-bench-package-'));
  const rows: [string, string, string][] = [];
  const figures: Record<string, unknown> = {};
  let failed = false;
  const budget = (name: string, value: number, limit: number): void => {
    const ok = value <= limit;
    failed ||= !ok;
    rows.push([name, MB(value), `≤ ${MB(limit)}: ${ok ? 'pass' : 'FAIL'}`]);
  };
  try {
    process.stderr.write('bench:package: npm pack …\n');
    const packed = await packAtomem(tmp);
    budget('tarball (npm pack)', packed.size, TARBALL_BUDGET);
    rows.push(['unpacked (files in the tarball)', MB(packed.unpackedSize), `${packed.entryCount} files`]);
    process.stderr.write('bench:package: fresh Vite app, npm install vite, npm install <tarball> …\n');
    const app = await createFreshApp(packed.file, undefined, tmp);
    const grown = app.footprint.after.bytes - app.footprint.before.bytes;
    budget('`npm install <tarball>` adds to node_modules', grown, INSTALL_BUDGET);
    rows.push([
      'files it adds / install time',
      `${app.footprint.after.files - app.footprint.before.files} files`,
      `${(app.installs.atomem.ms / 1000).toFixed(1)} s`,
    ]);
    figures.tarball = { bytes: packed.size, unpacked: packed.unpackedSize, files: packed.entryCount };
    figures.install = { bytes: grown, files: app.footprint.after.files - app.footprint.before.files, ms: app.installs.atomem.ms };

    // the main-thread entry and the build output per option (what atomem/vite emits), from the repository's built package: the same files as the tarball's
    const distDir = join(REPO, 'packages/atomem/dist');
    const main = mainThreadSize(distDir);
    rows.push(['main-thread entry, gzipped (dist/index.js and the chunks it imports)', KB(main.gzip), `${KB(main.bytes)} raw, ${main.files.join(' + ')}`]);
    figures.mainThread = main;
    const emitted: Record<string, { files: number; bytes: number }> = {};
    for (const { choice: c, files, bytes } of emittedSizes(distDir)) {
      emitted[c.join('+') || 'none'] = { files, bytes };
      rows.push([`build output, atomem({ assets: [${c.map((x) => `'${x}'`).join(', ')}] })`, MB(bytes), `${files} files`]);
    }
    figures.emitted = emitted;

    process.stderr.write('bench:package: vite build + vite preview, Chromium …\n');
    const built = await viteBuild(app.dir);
    figures.viteBuildMs = built.ms;
    const preview = await serve(app.dir, 'preview');
    const browser = await launchChromium();
    try {
      const first: Visit[] = [];
      let again: Visit | undefined;
      for (let r = 0; r < opts.runs; r++) {
        const context = await browser.newContext();
        const v = await visit(browser, preview.url, { context });
        if (v.recommendations.length === 0 || v.pageErrors.length || v.offOrigin.length)
          throw new Error(`first visit failed: ${JSON.stringify({ ...v, requests: v.requests.length })}`);
        first.push(v);
        if (r === 0) again = await visit(browser, preview.url, { context });
        await context.close();
      }
      const dist = join(app.dir, 'dist');
      const f = first[0];
      const ms = median(first.map((v) => v.msToRecommendations ?? Number.NaN));
      rows.push(['first visit: files loaded (page + worker)', MB(fileBytes(dist, f)), `${new Set(f.requests).size} files`]);
      rows.push(['first visit: on the wire (vite preview gzips text)', MB(median(first.map((v) => v.bytes))), '']);
      rows.push([
        `first visit: navigation → first recommendation (median of ${opts.runs})`,
        `${ms.toFixed(0)} ms`,
        first.map((v) => (v.msToRecommendations ?? 0).toFixed(0)).join(', '),
      ]);
      if (again) {
        rows.push(['returning visit: on the wire (HTTP cache kept)', MB(again.bytes), `${again.requests.length} requests`]);
        rows.push(['returning visit: navigation → first recommendation', `${(again.msToRecommendations ?? Number.NaN).toFixed(0)} ms`, '']);
      }
      figures.firstVisit = {
        fileBytes: fileBytes(dist, f),
        wireBytes: first.map((v) => v.bytes),
        msToRecommendations: first.map((v) => v.msToRecommendations),
        requests: new Set(f.requests).size,
      };
      figures.returningVisit = again ? { wireBytes: again.bytes, msToRecommendations: again.msToRecommendations } : null;
    } finally {
      await browser.close();
      await preview.stop();
    }
  } finally {
    removeTemp(tmp);
  }
  console.log('| measure | value | note |\n|---|---|---|');
  for (const [a, b, c] of rows) console.log(`| ${a} | ${b} | ${c} |`);
  if (opts.json) writeFileSync(opts.json, `${JSON.stringify(figures, null, 2)}\n`);
  if (failed) {
    console.error('bench:package: a budget failed');
    process.exitCode = 1;
  }
}

main().catch((e: unknown) => {
  console.error(`bench:package: ${e instanceof Error ? e.message : String(e)}`);
  process.exitCode = 1;
});
