/**
 * The size figures of the built `atomem` package that its README states, measured one way for
 * `npm run bench:package` (which prints them) and for test/node/package-readme.test.ts (which
 * re-measures them and compares with the README): the main-thread entry, the build output per
 * `atomem({ assets })` choice, and the tarball.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { atomemFiles, type AtomemAsset } from 'atomem/vite';

/** Megabytes (10⁶ bytes) with one decimal, as the bench prints them: `9.5 MB`. */
export const MB = (n: number): string => `${(n / 1e6).toFixed(1)} MB`;
/** Kilobytes (10³ bytes) with one decimal: `4.3 kB`. */
export const KB = (n: number): string => `${(n / 1e3).toFixed(1)} kB`;

/**
 * What a page's `import { createAtomem } from 'atomem'` loads on the main thread: `dist/index.js`
 * and the chunks it imports statically (followed recursively), each gzipped at level 9 as a web
 * server would serve it.
 */
export function mainThreadSize(distDir: string): { files: string[]; bytes: number; gzip: number } {
  const files: string[] = [];
  const visit = (file: string): void => {
    if (files.includes(file)) return;
    files.push(file);
    const code = readFileSync(file, 'utf8');
    for (const m of code.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm)) visit(join(dirname(file), m[1] ?? m[2]));
  };
  visit(join(distDir, 'index.js'));
  let bytes = 0;
  let gzip = 0;
  for (const f of files) {
    const code = readFileSync(f);
    bytes += code.length;
    gzip += gzipSync(code, { level: 9 }).length;
  }
  return { files: files.map((f) => f.slice(distDir.length + 1)), bytes, gzip };
}

/** The `atomem({ assets })` choices the README's table lists, in its order. */
export const ASSET_CHOICES: readonly AtomemAsset[][] = [['use-lite'], [], ['minilm'], ['wllama'], ['webllm'], ['use-lite', 'minilm', 'wllama', 'webllm']];

/** What `atomem/vite` emits for each of {@link ASSET_CHOICES}: files and bytes. */
export function emittedSizes(distDir: string): { choice: AtomemAsset[]; files: number; bytes: number }[] {
  return ASSET_CHOICES.map((choice) => {
    const { files } = atomemFiles(choice, distDir);
    return { choice: [...choice], files: files.size, bytes: [...files.values()].reduce((n, f) => n + statSync(f).size, 0) };
  });
}

/** `npm pack --dry-run` of the package folder: tarball bytes, unpacked bytes, files (the same figures a real `npm pack` reports). */
export function packSizes(packageDir: string): { size: number; unpackedSize: number; entryCount: number } {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: packageDir, encoding: 'utf8' });
  const [info] = JSON.parse(out.slice(out.indexOf('['))) as { size: number; unpackedSize: number; entryCount: number }[];
  return { size: info.size, unpackedSize: info.unpackedSize, entryCount: info.entryCount };
}
