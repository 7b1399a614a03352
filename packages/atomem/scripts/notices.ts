/**
 * THIRD_PARTY_NOTICES.md of the `atomem` package: the licence of every third-party package whose
 * code is bundled into `dist/` or whose files are copied into `dist/assets/`, generated at build.
 *
 * Each of the three builds (vite.config.ts, vite.worker.config.ts, vite.node.config.ts) runs
 * {@link thirdPartyNotices}: rollup-plugin-license collects the packages of the modules that end
 * up in its chunks (nearest package.json, LICENSE and NOTICE files) and the build records them in
 * `dist/.licenses/<build>.json`; the worker build also records the packages whose files
 * `copyAssets` ships (`assets.json`). After each record the notices are rewritten from every
 * record present, so a full `npm run build` leaves them complete.
 *
 * Next to each record the build writes `<build>.modules.json`: the node_modules paths of every
 * module rendered into its chunks, taken from the bundle itself, not from the collector.
 * test/repo/third-party-notices.test.ts maps those paths to package names and fails when one is
 * missing from the notices. `dist/.licenses/` is not packed (package.json `files`).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import license, { type Dependency } from 'rollup-plugin-license';
import type { Plugin } from 'vite';

/** packages/atomem (no trailing separator: rollup-plugin-license compares it with folder paths to skip the package itself) */
const PACKAGE_DIR = dirname(dirname(fileURLToPath(import.meta.url)));
/** Where the builds record what they bundled (not packed). */
export const RECORD_DIR = join(PACKAGE_DIR, 'dist', '.licenses');
/** The generated notices (packed: package.json `files`). */
export const NOTICES_FILE = join(PACKAGE_DIR, 'THIRD_PARTY_NOTICES.md');

/** One third-party package as recorded by a build. */
export interface NoticePackage {
  name: string;
  version: string;
  /** SPDX expression of its package.json (`license`, or the old `licenses` array joined by OR). */
  license: string;
  licenseText: string | null;
  noticeText: string | null;
  repository: string | null;
  homepage: string | null;
  author: string | null;
}

/** The builds that record packages; `assets`: files copied into dist/assets/ by scripts/assets.ts. */
export type NoticeSource = 'lib' | 'worker' | 'node' | 'assets';

const SOURCE_LABEL: Record<NoticeSource, string> = {
  lib: 'bundled into dist/*.js',
  worker: 'bundled into dist/worker/',
  node: 'bundled into the Node entries (dist/node/, dist/shop.js)',
  assets: 'files shipped in dist/assets/',
};

function repoUrl(r: unknown): string | null {
  if (!r) return null;
  if (typeof r === 'string') return r;
  if (typeof r === 'object' && typeof (r as { url?: unknown }).url === 'string') return (r as { url: string }).url;
  return null;
}

function licenseOf(pkg: { license?: unknown; licenses?: unknown }): string {
  if (typeof pkg.license === 'string' && pkg.license) return pkg.license;
  if (pkg.license && typeof pkg.license === 'object' && typeof (pkg.license as { type?: unknown }).type === 'string')
    return (pkg.license as { type: string }).type;
  if (Array.isArray(pkg.licenses)) return pkg.licenses.map((l) => (typeof l === 'string' ? l : ((l as { type?: string }).type ?? '?'))).join(' OR ');
  return 'UNKNOWN';
}

function fromDependency(d: Dependency): NoticePackage {
  return {
    name: d.name ?? '(unnamed)',
    version: d.version ?? '?',
    license: d.license ?? 'UNKNOWN',
    licenseText: d.licenseText,
    noticeText: d.noticeText,
    repository: repoUrl(d.repository),
    homepage: d.homepage,
    author: d.author ? d.author.text() : null,
  };
}

/** A file of `dir` whose name starts with one of `prefixes` (case-insensitive), e.g. LICENSE, LICENSE.md, LICENCE.txt. */
function readNamed(dir: string, prefixes: string[]): string | null {
  const f = readdirSync(dir).find((n) => prefixes.some((p) => n.toLowerCase().startsWith(p)));
  return f ? readFileSync(join(dir, f), 'utf8') : null;
}

/** Read a package's licence data from its installed folder (for the packages whose files are copied, not bundled). */
export function readPackage(dir: string): NoticePackage {
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
  const author = pkg.author;
  return {
    name: String(pkg.name),
    version: String(pkg.version),
    license: licenseOf(pkg),
    licenseText: readNamed(dir, ['license', 'licence']),
    noticeText: readNamed(dir, ['notice']),
    repository: repoUrl(pkg.repository),
    homepage: typeof pkg.homepage === 'string' ? pkg.homepage : null,
    author: typeof author === 'string' ? author : author && typeof author === 'object' ? String((author as { name?: unknown }).name ?? '') || null : null,
  };
}

/** Record what one build shipped, then rewrite the notices from every record present. */
export function recordPackages(source: NoticeSource, packages: NoticePackage[]): void {
  mkdirSync(RECORD_DIR, { recursive: true });
  const sorted = [...packages].sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
  writeFileSync(join(RECORD_DIR, `${source}.json`), `${JSON.stringify(sorted, null, 1)}\n`);
  writeNotices();
}

/** The node_modules path (with `/`) of a bundled module id, or null for the package's own sources and virtual modules. */
function nodeModulesPath(id: string): string | null {
  const clean = id.replace(/^\0/, '').split('?')[0];
  const at = clean.lastIndexOf(`node_modules${sep}`);
  const atPosix = clean.lastIndexOf('node_modules/');
  const i = Math.max(at, atPosix);
  return i < 0 ? null : clean.slice(i).split(sep).join('/');
}

/** The package name of a `node_modules/...` path: `node_modules/@scope/name/x.js` → `@scope/name`. */
export function packageOfPath(path: string): string {
  const rest = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length).split('/');
  return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
}

/**
 * The build's plugins: rollup-plugin-license (the collector) and the module list the test checks
 * the notices against. `source` names the build.
 */
export function thirdPartyNotices(source: Exclude<NoticeSource, 'assets'>): Plugin[] {
  const collector = license({
    cwd: PACKAGE_DIR,
    thirdParty: {
      includePrivate: true,
      multipleVersions: true,
      output: (deps) => recordPackages(source, deps.map(fromDependency)),
    },
  }) as unknown as Plugin;
  const modules: Plugin = {
    name: 'atomem-bundled-modules',
    apply: 'build',
    generateBundle(_, bundle) {
      const paths = new Set<string>();
      for (const chunk of Object.values(bundle)) {
        if (chunk.type !== 'chunk') continue;
        for (const [id, m] of Object.entries(chunk.modules)) {
          const p = m.renderedLength > 0 ? nodeModulesPath(id) : null;
          if (p) paths.add(p);
        }
      }
      mkdirSync(RECORD_DIR, { recursive: true });
      writeFileSync(join(RECORD_DIR, `${source}.modules.json`), `${JSON.stringify([...paths].sort(), null, 1)}\n`);
    },
  };
  return [{ ...collector, apply: 'build' }, modules, dedupeLegalComments()];
}

/** A legal comment on lines of its own: `/*! … *\/` or a block comment holding `@license` / `@preserve`. */
const LEGAL_COMMENT = /^[ \t]*\/\*(?:!|\*?(?=(?:(?!\*\/)[\s\S])*?@(?:license|preserve)))(?:(?!\*\/)[\s\S])*\*\/[ \t]*\r?\n/gm;

/**
 * Keep the first copy of each legal comment in a chunk and drop its repeats: tfjs puts the same
 * Apache-2.0 header on each of its modules (536 copies, 368 kB, in the USE-lite chunk); every
 * distinct notice stays, once per chunk.
 */
function dedupeLegalComments(): Plugin {
  return {
    name: 'atomem-dedupe-legal-comments',
    apply: 'build',
    generateBundle(_, bundle) {
      for (const chunk of Object.values(bundle)) {
        if (chunk.type === 'chunk') chunk.code = dedupeLegal(chunk.code);
      }
    },
  };
}

/** {@link dedupeLegalComments} on one chunk's code. */
export function dedupeLegal(code: string): string {
  const seen = new Set<string>();
  return code.replace(LEGAL_COMMENT, (c) => {
    const key = c.trim();
    if (seen.has(key)) return '';
    seen.add(key);
    return c;
  });
}

/** Every record present in {@link RECORD_DIR}, merged by name@version with the sources that ship it. */
export function readRecords(dir = RECORD_DIR): Array<NoticePackage & { sources: NoticeSource[] }> {
  const merged = new Map<string, NoticePackage & { sources: NoticeSource[] }>();
  if (!existsSync(dir)) return [];
  for (const source of ['lib', 'worker', 'node', 'assets'] as const) {
    const file = join(dir, `${source}.json`);
    if (!existsSync(file)) continue;
    for (const p of JSON.parse(readFileSync(file, 'utf8')) as NoticePackage[]) {
      const key = `${p.name}@${p.version}`;
      const prev = merged.get(key);
      if (prev) prev.sources.push(source);
      else merged.set(key, { ...p, sources: [source] });
    }
  }
  return [...merged.values()].sort((a, b) => a.name.localeCompare(b.name) || a.version.localeCompare(b.version));
}

const MIT_TEXT = `Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.`;

/** What the notices say for a package that ships no licence file (several publish to npm without one). */
function missingLicenceText(p: NoticePackage): string[] {
  const none = `The npm package ships no licence file; its package.json declares \`${p.license}\`.`;
  if (p.license === 'Apache-2.0') return [`${none} The Apache License 2.0 text is the LICENSE file of this package.`];
  if (p.license === 'MIT') return [`${none} The MIT License${p.author ? `, copyright ${p.author}` : ''}:`, '', '```text', MIT_TEXT, '```'];
  return [none];
}

/** The notices text for `packages` (deterministic: sorted, no dates). */
export function renderNotices(packages: ReturnType<typeof readRecords>): string {
  const head = [
    '# Third-party notices',
    '',
    'The `atomem` package is licensed under the Apache License 2.0 (LICENSE). Its `dist/` folder',
    'also holds code and files of the third-party packages below, under their own licences.',
    'This file is generated by the build (scripts/notices.ts, with rollup-plugin-license) from the',
    'modules the bundles contain and the files copied into `dist/assets/`; do not edit it by hand.',
    '',
    '| Package | Version | Licence | Shipped as |',
    '| --- | --- | --- | --- |',
    ...packages.map((p) => `| ${p.name} | ${p.version} | ${p.license} | ${p.sources.map((s) => SOURCE_LABEL[s]).join('; ')} |`),
    '',
  ];
  const body = packages.flatMap((p) => [
    `## ${p.name}@${p.version}`,
    '',
    `Licence: ${p.license}`,
    ...(p.author ? [`Author: ${p.author}`] : []),
    ...(p.repository ? [`Repository: ${p.repository}`] : p.homepage ? [`Homepage: ${p.homepage}`] : []),
    '',
    ...(p.licenseText ? ['```text', p.licenseText.trim().replace(/```/g, "'''"), '```'] : missingLicenceText(p)),
    ...(p.noticeText ? ['', 'NOTICE:', '', '```text', p.noticeText.trim().replace(/```/g, "'''"), '```'] : []),
    '',
  ]);
  return `${[...head, ...body].join('\n').trimEnd()}\n`;
}

/** Rewrite {@link NOTICES_FILE} from the records. */
function writeNotices(): void {
  writeFileSync(NOTICES_FILE, renderNotices(readRecords()));
}
