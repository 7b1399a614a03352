// Every source file a benchmark or script names by its repository path (to spawn it or read it)
// exists, so a moved file fails here rather than in a long benchmark run.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DIRS = ['packages/bench/src', 'packages/atomem/scripts', 'scripts'];

function sources(dir: string): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mjs)$/.test(e.name))
    .map((e) => join(e.parentPath, e.name));
}

describe('paths the benchmarks name', () => {
  it('every packages/…/src or scripts source file named in a benchmark exists', () => {
    const named = new Map<string, string>();
    for (const dir of DIRS)
      for (const file of sources(dir))
        for (const m of readFileSync(file, 'utf8').matchAll(/['"`](packages\/[A-Za-z0-9_./-]+\.(?:ts|mjs))['"`]/g)) named.set(m[1], file);
    expect(named.size).toBeGreaterThan(5);
    const missing = [...named].filter(([p]) => !existsSync(join(ROOT, p))).map(([p, from]) => `${p} (named in ${from.slice(ROOT.length)})`);
    expect(missing).toEqual([]);
  });
});
