#!/usr/bin/env node
// `npm start` and `npm test` build the library, the index service and the demo page once, then
// reuse the build while its inputs are unchanged: a SHA-256 over every input file's path and
// content (the sources, build configs, package manifests and the lock file) is stamped into
// node_modules/.cache/atomem-build.json after a successful `npm run build`; the next run
// rebuilds only when that hash differs or an output is missing. `--force` (or
// ATOMEM_REBUILD=1) always builds. Prints one line either way.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const STAMP = join(ROOT, 'node_modules', '.cache', 'atomem-build.json');

/** What `npm run build` reads: folders are walked (node_modules, dist and dot-folders skipped). */
const INPUTS = [
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'packages/atomem/package.json',
  'packages/atomem/tsconfig.build.json',
  'packages/atomem/vite.config.ts',
  'packages/atomem/vite.worker.config.ts',
  'packages/atomem/vite.node.config.ts',
  'packages/atomem/scripts',
  'packages/atomem/src',
  'packages/atomem-index/package.json',
  'packages/atomem-index/tsconfig.build.json',
  'packages/atomem-index/src',
  'apps/demo/package.json',
  'apps/demo/vite.config.ts',
  'apps/demo/index.html',
  'apps/demo/main.ts',
  'apps/demo/catalog.ts',
  'apps/demo/style.css',
];

/** What a build leaves behind: a missing one means build again, whatever the stamp says. */
const OUTPUTS = [
  'packages/atomem/dist/index.js',
  'packages/atomem/dist/engine.js',
  'packages/atomem/dist/worker/worker.js',
  'packages/atomem-index/dist/index.js',
  'apps/demo/dist/index.html',
];

function files(path) {
  const abs = join(ROOT, path);
  if (!existsSync(abs)) return [];
  let entries;
  try {
    entries = readdirSync(abs, { withFileTypes: true });
  } catch {
    return [path]; // a file
  }
  return entries
    .filter((e) => !e.name.startsWith('.') && e.name !== 'node_modules' && e.name !== 'dist')
    .flatMap((e) => (e.isDirectory() ? files(join(path, e.name)) : [join(path, e.name)]));
}

function inputHash() {
  const h = createHash('sha256');
  for (const f of INPUTS.flatMap(files).sort()) {
    h.update(relative(ROOT, join(ROOT, f)));
    h.update('\0');
    h.update(readFileSync(join(ROOT, f)));
    h.update('\0');
  }
  return h.digest('hex');
}

const t0 = performance.now();
const hash = inputHash();
const force = process.argv.includes('--force') || process.env.ATOMEM_REBUILD === '1';
let stamp;
try {
  stamp = JSON.parse(readFileSync(STAMP, 'utf8'));
} catch {
  stamp = undefined;
}
const missing = OUTPUTS.filter((f) => !existsSync(join(ROOT, f)));
if (!force && stamp?.hash === hash && missing.length === 0) {
  console.log(
    `atomem: build is up to date (inputs unchanged since ${stamp.at}; checked in ${Math.round(performance.now() - t0)} ms; ATOMEM_REBUILD=1 forces a build)`,
  );
  process.exit(0);
}
const why = force ? 'forced' : !stamp ? 'no build stamp yet' : missing.length ? `${missing[0]} is missing` : 'sources changed';
console.log(`atomem: building (${why}) …`);
const npm = process.env.npm_execpath;
const r = npm
  ? spawnSync(process.execPath, [npm, 'run', 'build'], { cwd: ROOT, stdio: 'inherit' })
  : spawnSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'inherit', shell: process.platform === 'win32' });
if (r.status !== 0) process.exit(r.status ?? 1);
mkdirSync(dirname(STAMP), { recursive: true });
writeFileSync(STAMP, `${JSON.stringify({ hash, at: new Date().toISOString() })}\n`);
console.log(`atomem: built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
