import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Every repository path a code comment or a Markdown document cites exists. A path is cited as
// `packages/…`, `apps/…`, `test/…`, `scripts/…`, `docs/…` (from the repository root), as `src/…`,
// `test/…` or `scripts/…` inside a package (from the package; from the root when exactly one
// package has it), or as a relative Markdown link. Files are those git tracks; comments are read
// with the TypeScript scanner (strings and code are not comments).

const REPO = resolve(import.meta.dirname, '../..');

/** Tracked files (and new ones not ignored), repository-relative. */
function listFiles(): string[] {
  return execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: REPO, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f && existsSync(join(REPO, f)));
}

const tracked = listFiles();

/** The comments of a TypeScript or JavaScript source, each with the line it starts on. */
function commentsOf(text: string): Array<{ text: string; line: number }> {
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, ts.LanguageVariant.Standard, text);
  const out: Array<{ text: string; line: number }> = [];
  let lines = 1;
  let counted = 0;
  const lineAt = (pos: number): number => {
    for (; counted < pos; counted++) if (text.charCodeAt(counted) === 10) lines++;
    return lines;
  };
  // why: the scanner alone cannot tell a regular expression from a division, nor where a
  // template's `${…}` ends; the previous token and a stack of open braces decide, so neither a
  // regex nor a template's text is read as code (or as a comment)
  const braces: boolean[] = []; // true: the `${` of a template
  let prev: ts.SyntaxKind = ts.SyntaxKind.Unknown;
  const endsOperand = new Set([
    ts.SyntaxKind.Identifier,
    ts.SyntaxKind.NumericLiteral,
    ts.SyntaxKind.StringLiteral,
    ts.SyntaxKind.RegularExpressionLiteral,
    ts.SyntaxKind.NoSubstitutionTemplateLiteral,
    ts.SyntaxKind.TemplateTail,
    ts.SyntaxKind.CloseParenToken,
    ts.SyntaxKind.CloseBracketToken,
    ts.SyntaxKind.CloseBraceToken,
    ts.SyntaxKind.ThisKeyword,
    ts.SyntaxKind.PlusPlusToken,
    ts.SyntaxKind.MinusMinusToken,
  ]);
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) {
      out.push({ text: scanner.getTokenText(), line: lineAt(scanner.getTokenStart()) });
      continue;
    }
    if (kind === ts.SyntaxKind.WhitespaceTrivia || kind === ts.SyntaxKind.NewLineTrivia) continue;
    if ((kind === ts.SyntaxKind.SlashToken || kind === ts.SyntaxKind.SlashEqualsToken) && !endsOperand.has(prev)) kind = scanner.reScanSlashToken();
    else if (kind === ts.SyntaxKind.TemplateHead || kind === ts.SyntaxKind.OpenBraceToken) braces.push(kind === ts.SyntaxKind.TemplateHead);
    else if (kind === ts.SyntaxKind.CloseBraceToken && braces.pop()) {
      kind = scanner.reScanTemplateToken(false);
      if (kind === ts.SyntaxKind.TemplateMiddle) braces.push(true);
    }
    prev = kind;
  }
  return out;
}

// A path starts at a word boundary that is not part of a longer path or URL; after a colon it is
// a path at a commit (`a17e0e3:test/node/x.test.ts`, for files that are gone), not checked.
const CITED = /(?<![\w./@~:-])((?:packages|apps|test|scripts|docs|src)\/[\w.@/*-]*[\w/*])/g;
const CITED_ANY = new RegExp(CITED.source);
const LINK = /\]\((?!https?:|mailto:|#)([^)\s]+)\)/g;

/** The package directory (e.g. `packages/atomem`, `apps/demo`) a repository-relative file belongs to, if any. */
function packageOf(file: string): string | undefined {
  const m = /^((?:packages|apps)\/[^/]+)\//.exec(file);
  return m?.[1];
}

const packages = ['packages', 'apps'].flatMap((d) =>
  tracked.map((f) => new RegExp(`^(${d}/[^/]+)/package\\.json$`).exec(f)?.[1]).filter((p): p is string => !!p),
);

/** True when `path` (repository-relative or package-relative, possibly with a .js for a .ts) names a file or folder. */
function exists(path: string): boolean {
  const p = join(REPO, path);
  return existsSync(p) || (/\.js$/.test(p) && existsSync(p.replace(/\.js$/, '.ts')));
}

/** Why `cited` (as written in `file`) names nothing, or undefined when it names something. */
function problem(file: string, cited: string): string | undefined {
  const path = cited.replace(/[/.]+$/, '');
  if (/[*<>{}]/.test(path) || path.includes('...')) return undefined; // a pattern, not a path
  const own = packageOf(file);
  const top = path.split('/')[0];
  if (top === 'packages' || top === 'apps' || top === 'docs') return exists(path) ? undefined : 'no such path';
  // test/, scripts/: the repository's, or the citing package's own
  if (top === 'test' || top === 'scripts') return exists(path) || (own && exists(`${own}/${path}`)) ? undefined : 'no such path';
  // src/: the citing package's; from outside a package, any one package's (ambiguous ones pass)
  if (own) return exists(`${own}/${path}`) ? undefined : `no such path in ${own}`;
  return packages.some((p) => exists(`${p}/${path}`)) ? undefined : 'no package has it';
}

/** Every cited path that does not exist, as `file:line: path (why)`. */
function stalePaths(): string[] {
  const out: string[] = [];
  for (const file of tracked) {
    const isMd = file.endsWith('.md');
    const isCode = /\.(ts|tsx|mts|js|mjs|cjs)$/.test(file) && !file.endsWith('.d.ts');
    if (!isMd && !isCode) continue;
    if (/(^|\/)(node_modules|dist)\//.test(file) || /THIRD_PARTY_NOTICES\.md$/.test(file)) continue;
    const text = readFileSync(join(REPO, file), 'utf8');
    // why: most files cite nothing; only those that might are scanned (keeps the check well under 2 s)
    if (!CITED_ANY.test(text) && !(isMd && text.includes(']('))) continue;
    const parts = isMd ? text.split('\n').map((t, i) => ({ text: t, line: i + 1 })) : commentsOf(text);
    for (const part of parts) {
      const lines = part.text.split('\n');
      lines.forEach((l, k) => {
        for (const m of l.matchAll(CITED)) {
          const why = problem(file, m[1]);
          if (why) out.push(`${file}:${part.line + k}: ${m[1]} (${why})`);
        }
        if (!isMd) return;
        for (const m of l.matchAll(LINK)) {
          const target = decodeURI(m[1].replace(/#.*$/, ''));
          if (!target || target.startsWith('/')) continue;
          const path = relative(REPO, resolve(REPO, dirname(file), target));
          if (!exists(path)) out.push(`${file}:${part.line + k}: ${m[1]} (a link to nothing)`);
        }
      });
    }
  }
  return out;
}

describe('cited paths exist', () => {
  it('every repository path in a code comment or a Markdown document names a file or folder', () => {
    expect(stalePaths()).toEqual([]);
  });

  it('the check reads comments, not code, and knows a path from a pattern', () => {
    const dollar = '$';
    const code = `const a = '// packages/none'; // packages/x.ts\n/* test/y.ts */ const t = \`${dollar}{{ a: 1 }.a} // no ${dollar}{2}\`; const r = /\\/\\/ no/; // docs/z.md`;
    expect(commentsOf(code).map((x) => x.text)).toEqual(['// packages/x.ts', '/* test/y.ts */', '// docs/z.md']);
    expect(problem('README.md', 'packages/atomem/src/no-such-file.ts')).toBe('no such path');
    expect(problem('README.md', 'packages/atomem/src/node.ts')).toBeUndefined();
    expect(problem('packages/atomem/src/vite.ts', 'src/core/types.js')).toBeUndefined();
    expect(problem('packages/atomem-index/src/service.ts', 'src/core/types.ts')).toMatch(/no such path in packages\/atomem-index/);
    expect(problem('README.md', 'packages/*/test/foo.ts')).toBeUndefined();
  });
});
