import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_README, readmeBlocks, REPO } from '../../packages/bench/src/consumer-app.js';

// The READMEs npm shows are committed in each package (packages/*/README.md) and packed as they
// are: no link into the repository (it would break on npm's page), and the atomem quick start
// that test/consumer/ runs is the same code as the repository README's.

const READMES = { atomem: PACKAGE_README, 'atomem-index': join(REPO, 'packages/atomem-index/README.md') };

/** Markdown links and images whose target is neither an absolute http(s) URL nor an anchor. */
function relativeLinks(md: string): string[] {
  const prose = md.replace(/```[\s\S]*?```/g, ''); // code blocks hold no links
  return [...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)[^)]*\)/g), ...prose.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm), ...prose.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g)]
    .map((m) => m[1])
    .filter((t) => !/^(https?:)?\/\/|^#/.test(t));
}

describe('the package READMEs', () => {
  it("atomem's quick start blocks are the repository README's, byte for byte", () => {
    const pkg = readmeBlocks(readFileSync(PACKAGE_README, 'utf8'));
    const root = readmeBlocks();
    for (const name of ['vite.config.js', 'index.html', 'main.js']) {
      expect(pkg[name], `packages/atomem/README.md: <!-- consumer-test: ${name} -->`).toBeDefined();
      expect(pkg[name], name).toBe(root[name]);
    }
    for (const name of Object.keys(pkg)) expect(root[name], `${name} is also in the repository README`).toBe(pkg[name]);
  });

  it.each(Object.entries(READMES))('%s: no link relative to the repository', (_, file) => {
    const md = readFileSync(file, 'utf8');
    expect(relativeLinks(md)).toEqual([]);
    expect(relativeLinks('see [the guide](docs/DECISIONS.md), ![x](docs/a.png) and [ok](https://example.com/x)')).toEqual(['docs/DECISIONS.md', 'docs/a.png']); // the check itself
  });

  it.each(Object.keys(READMES))('%s: npm pack includes the committed README (no prepack copy)', (name) => {
    const dir = join(REPO, 'packages', name);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    expect(Object.keys(pkg.scripts ?? {}).filter((s) => /^(pre|post)?pack$|^prepare$|^prepublish/.test(s))).toEqual([]);
    const [info] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: dir, encoding: 'utf8' })) as { files: { path: string }[] }[];
    expect(info.files.map((f) => f.path)).toContain('README.md');
  });
});
