/**
 * The size figures of the built `atomem` package that its README states, measured one way for
 * `npm run bench:package` (which prints them) and for packages/atomem/test/package-readme.test.ts (which
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
    for (const m of code.matchAll(/^\s*(?:import|export)\b[^'"]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|^\s*import\s*["'](\.{1,2}\/[^"']+)["']/gm))
      visit(join(dirname(file), m[1] ?? m[2]));
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

/**
 * Put measured figures into a README: the quick start's `// N kB gzipped`, the install line's
 * `(N MB download, N MB unpacked)` and the last column of the asset table after
 * `<!-- bench:package build output -->` (rows in the order of {@link ASSET_CHOICES}).
 */
export function withFigures(
  md: string,
  main: { gzip: number },
  pack: { size: number; unpackedSize: number },
  emitted: { files: number; bytes: number }[],
): string {
  let out = md
    .replace(/(import \{ createAtomem \} from 'atomem';\s+\/\/ )\d+\.\d kB( gzipped)/, `$1${KB(main.gzip)}$2`)
    .replace(/\(\d+\.\d MB download, \d+\.\d MB unpacked\)/, `(${MB(pack.size)} download, ${MB(pack.unpackedSize)} unpacked)`);
  const marker = '<!-- bench:package build output -->';
  const at = out.indexOf(marker);
  if (at >= 0) {
    const lines = out.slice(at).split('\n');
    for (let i = 3, row = 0; i < lines.length && lines[i].startsWith('|') && row < emitted.length; i++, row++) {
      const cells = lines[i].split('|');
      cells[cells.length - 2] = ` ${MB(emitted[row].bytes)}, ${emitted[row].files} files `;
      lines[i] = cells.join('|');
    }
    out = out.slice(0, at) + lines.join('\n');
  }
  return out;
}

// `node -C atomem-source --import tsx packages/bench/src/package-sizes.ts [--write]`: print the
// figures of the built package (run `npm run build` first); `--write` puts them into
// packages/atomem/README.md and README.md.
if (process.argv[1] && /package-sizes\.ts$/.test(process.argv[1])) {
  const { REPO, PACKAGE_README } = await import('./consumer-app.js');
  const { writeFileSync } = await import('node:fs');
  const dist = join(REPO, 'packages/atomem/dist');
  const main = mainThreadSize(dist);
  const pack = packSizes(join(REPO, 'packages/atomem'));
  const emitted = emittedSizes(dist);
  console.log(`main-thread entry: ${KB(main.gzip)} gzipped (${main.files.join(' + ')})`);
  console.log(`tarball: ${MB(pack.size)}, unpacked ${MB(pack.unpackedSize)}, ${pack.entryCount} files`);
  for (const e of emitted) console.log(`build output, atomem({ assets: [${e.choice.map((x) => `'${x}'`).join(', ')}] }): ${MB(e.bytes)}, ${e.files} files`);
  if (process.argv.includes('--write')) {
    for (const file of [PACKAGE_README, join(REPO, 'README.md')]) {
      const md = readFileSync(file, 'utf8');
      const next = withFigures(md, main, pack, emitted);
      if (next !== md) writeFileSync(file, next);
      console.log(`${file.slice(REPO.length)}: ${next === md ? 'up to date' : 'updated'}`);
    }
  }
}
