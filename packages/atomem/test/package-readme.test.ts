import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { PACKAGE_README, readmeBlocks, REPO } from '@atomem/bench/consumer-app.js';
import { emittedSizes, KB, MB, mainThreadSize, packSizes } from '@atomem/bench/package-sizes.js';
import { ERROR_CLASSES } from '../src/errors.js';
import { checkOptionNames, checkPrivacyLevel, nearestName, OPTION_NAMES, PRIVACY_LEVELS } from '../src/options.js';

// The READMEs npm shows are committed in each package (packages/*/README.md) and packed as they
// are: no link into the repository (it would break on npm's page), and the atomem quick start
// that test/consumer/ runs is the same code as the repository README's.

const READMES = { atomem: PACKAGE_README, 'atomem-index': join(REPO, 'packages/atomem-index/README.md') };

/** Markdown links and images whose target is neither an absolute http(s) URL nor an anchor. */
function relativeLinks(md: string): string[] {
  const prose = md.replace(/```[\s\S]*?```/g, ''); // code blocks hold no links
  return [
    ...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)[^)]*\)/g),
    ...prose.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm),
    ...prose.matchAll(/<(?:a|img)\s[^>]*(?:href|src)="([^"]+)"/g),
  ]
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
    const [info] = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: dir, encoding: 'utf8' })) as {
      files: { path: string }[];
    }[];
    expect(info.files.map((f) => f.path)).toContain('README.md');
  });
});

// ——— the npm page against the code: option tables ↔ exported types ↔ run-time checks, and the
// size figures ↔ what `npm run bench:package` measures (packages/bench/src/package-sizes.ts) ———

/** The first-column names of the table right after `<!-- api-table: NAME -->` (backticks and quotes removed). */
function apiTable(md: string, name: string): string[] {
  const at = md.indexOf(`<!-- api-table: ${name} -->`);
  expect(at, `packages/atomem/README.md has no <!-- api-table: ${name} --> table`).toBeGreaterThanOrEqual(0);
  const rows = md.slice(at).split('\n').slice(1);
  const table = rows.slice(
    0,
    rows.findIndex((l) => !l.startsWith('|')),
  );
  return table.slice(2).map((row) => {
    const cell = row.split(/(?<!\\)\|/)[1];
    const code = /`([^`]+)`/.exec(cell);
    expect(code, `${name}: a row without a \`name\` in its first cell: ${row}`).not.toBeNull();
    return code![1].replace(/^'(.*)'$/, '$1');
  });
}

/** The public types of `atomem` (src/client/index.ts), through the TypeScript compiler. */
function publicTypes() {
  const configFile = ts.readConfigFile(join(REPO, 'tsconfig.json'), ts.sys.readFile);
  const { options } = ts.parseJsonConfigFileContent(configFile.config, ts.sys, REPO);
  const entry = join(REPO, 'packages/atomem/src/client/index.ts');
  const program = ts.createProgram([entry], { ...options, noEmit: true });
  const checker = program.getTypeChecker();
  const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(entry)!)!);
  const symbol = (name: string): ts.Symbol => {
    const s = exports.find((e) => e.name === name);
    if (!s) throw new Error(`atomem does not export ${name}`);
    return s.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(s) : s;
  };
  const declared = (name: string): ts.Type => checker.getDeclaredTypeOfSymbol(symbol(name));
  const props = (t: ts.Type): string[] =>
    checker
      .getPropertiesOfType(t)
      .map((p) => p.name)
      .sort();
  const member = (t: ts.Type, name: string): ts.Type => checker.getNonNullableType(checker.getTypeOfSymbol(t.getProperty(name)!));
  const literals = (t: ts.Type): string[] =>
    (t.isUnion() ? t.types : [t])
      .filter((u): u is ts.StringLiteralType => u.isStringLiteral())
      .map((u) => u.value)
      .sort();
  const objects = (t: ts.Type): ts.Type[] => (t.isUnion() ? t.types : [t]).filter((u) => u.flags & ts.TypeFlags.Object);
  /** Exported classes (value exports whose declaration is a class) and the file each is declared in. */
  const classes = exports
    .map((e) => (e.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(e) : e))
    .filter((s) => s.valueDeclaration && ts.isClassDeclaration(s.valueDeclaration))
    .map((s) => ({ name: s.name, file: s.valueDeclaration!.getSourceFile().fileName }));
  return { declared, props, member, literals, objects, classes };
}

describe('the npm README documents the API as the types and the run-time checks define it', () => {
  const md = readFileSync(PACKAGE_README, 'utf8');
  const types = publicTypes();
  const sorted = (xs: readonly string[]): string[] => [...xs].sort();

  it('every option of CreateAtomemOptions, LlmOptions, IndexOptions and RecommendOptions is in its table, and nothing else', () => {
    for (const name of ['CreateAtomemOptions', 'LlmOptions', 'IndexOptions', 'RecommendOptions']) {
      expect(sorted(apiTable(md, name)), name).toEqual(types.props(types.declared(name)));
    }
  });

  it("the reasons table lists every kind of Why (recommend's structured reasons)", () => {
    expect(sorted(apiTable(md, 'WhyKind'))).toEqual(types.literals(types.declared('WhyKind')));
    for (const name of ['renderWhy', 'ACTION_VERBS', 'Why', 'WhyRenderer']) expect(md, name).toContain(`\`${name}\``);
  });

  it('the embedder table lists the kinds of EmbedderSpec', () => {
    const spec = types.declared('EmbedderSpec');
    expect(sorted(apiTable(md, 'EmbedderSpec'))).toEqual(types.literals(spec));
    expect(
      types
        .objects(spec)
        .map((o) => types.literals(types.member(o, 'kind'))[0])
        .sort(),
    ).toEqual(types.literals(spec));
  });

  it('every documented privacy level is a PrivacyLevel and is accepted at run time; the removed ones are refused', () => {
    const documented = apiTable(md, 'PrivacyLevel');
    expect(sorted(documented)).toEqual(types.literals(types.declared('PrivacyLevel')));
    expect(sorted(documented)).toEqual(sorted(PRIVACY_LEVELS));
    for (const level of documented) expect(() => checkPrivacyLevel(level, 'index.privacy')).not.toThrow();
    for (const old of ['embeddings', 'items', 'on', undefined]) expect(() => checkPrivacyLevel(old, 'index.privacy')).toThrow(TypeError);
    // no trace of the removed protocol on the page
    expect(md).not.toMatch(/'embeddings'|'items'|memory vectors|anonymi[sz]ed/);
  });

  it('the run-time option names (src/options.ts) equal the types, so a typo check never refuses a valid option', () => {
    const engine = types.props(types.declared('EngineOptions'));
    const client = types.declared('CreateAtomemOptions');
    expect(sorted(OPTION_NAMES.engine)).toEqual(engine);
    expect(sorted(OPTION_NAMES.client)).toEqual(types.props(client).filter((p) => !engine.includes(p)));
    const llm = types.declared('LlmOptions');
    expect(sorted(OPTION_NAMES.llm)).toEqual(types.props(llm));
    for (const k of ['webllm', 'openai', 'budget', 'wllama'] as const)
      expect(sorted(OPTION_NAMES[`llm.${k}`]), `llm.${k}`).toEqual(types.props(types.member(llm, k)));
    expect(sorted(OPTION_NAMES.index)).toEqual(types.props(types.declared('IndexOptions')));
    expect(sorted(OPTION_NAMES.recommend)).toEqual(types.props(types.declared('RecommendOptions')));
    for (const o of types.objects(types.declared('EmbedderSpec'))) {
      const kind = types.literals(types.member(o, 'kind'))[0] as 'use-lite' | 'minilm' | 'hashing';
      expect(sorted(OPTION_NAMES[`embedder.${kind}`]), `embedder ${kind}`).toEqual(types.props(o));
    }
    // and the check itself: the nearest name for a typo, none for a stranger
    expect(() => checkOptionNames({ catalog: [], embeder: 'hashing' }, 'createAtomem', true)).toThrow(/unknown option "embeder" — did you mean "embedder"\?/);
    expect(() => checkOptionNames({ catalog: [], colour: 'red' }, 'createAtomem', true)).toThrow(/unknown option "colour" \(valid: /);
    expect(() => checkOptionNames({ catalog: [], worker: () => null }, 'init')).toThrow(/unknown option "worker"/); // the engine takes no client option
    expect(nearestName('promtApi', OPTION_NAMES.llm)).toBe('promptApi');
  });

  it('every named error of src/errors.ts is exported by atomem and rebuilt as its class on the page', () => {
    const own = types.classes
      .filter((c) => c.file.endsWith('packages/atomem/src/errors.ts'))
      .map((c) => c.name)
      .sort();
    const declaredInFile = [...readFileSync(join(REPO, 'packages/atomem/src/errors.ts'), 'utf8').matchAll(/^export class (\w+)/gm)].map((m) => m[1]).sort();
    expect(own).toEqual(declaredInFile);
    expect(Object.keys(ERROR_CLASSES).sort()).toEqual(declaredInFile);
    // every class atomem exports is an error of src/errors.ts (no second copy elsewhere)
    expect(types.classes.map((c) => c.name).sort()).toEqual(declaredInFile);
    // the README's Errors section names every one
    for (const name of declaredInFile) expect(md, name).toContain(`\`${name}\``);
  });
});

// A stale figure: `node -C atomem-source --import tsx packages/bench/src/package-sizes.ts --write`
// (after `npm run build`) puts the measured ones into both READMEs.
describe("the README's sizes are what `npm run bench:package` measures", () => {
  const dist = join(REPO, 'packages/atomem/dist');
  const readmes = { 'packages/atomem/README.md': readFileSync(PACKAGE_README, 'utf8'), 'README.md': readFileSync(join(REPO, 'README.md'), 'utf8') };
  let pack: ReturnType<typeof packSizes> | undefined;

  it.each(Object.entries(readmes))('%s: the main-thread entry, the tarball and the build output per asset choice', (file, md) => {
    expect(existsSync(join(dist, 'index.js')), 'packages/atomem/dist/index.js is missing: run `npm run build` (npm test does it first)').toBe(true);
    const main = mainThreadSize(dist);
    const gz = /import \{ createAtomem \} from 'atomem';\s+\/\/ (\d+\.\d kB) gzipped/.exec(md);
    expect(gz, `${file}: the quick start's "// N kB gzipped"`).not.toBeNull();
    expect(
      gz![1],
      `${file}: main-thread entry (${main.files.join(' + ')}); update: node -C atomem-source --import tsx packages/bench/src/package-sizes.ts --write`,
    ).toBe(KB(main.gzip));

    pack ??= packSizes(join(REPO, 'packages/atomem'));
    const install = /\((\d+\.\d MB) download, (\d+\.\d MB) unpacked\)/.exec(md);
    expect(install, `${file}: the install line's "(N MB download, N MB unpacked)"`).not.toBeNull();
    expect(
      [install![1], install![2]],
      `${file}: npm pack's tarball and unpacked size; update: node -C atomem-source --import tsx packages/bench/src/package-sizes.ts --write`,
    ).toEqual([MB(pack.size), MB(pack.unpackedSize)]);

    const at = md.indexOf('<!-- bench:package build output -->');
    expect(at, `${file}: <!-- bench:package build output --> before the asset table`).toBeGreaterThanOrEqual(0);
    const rows = md.slice(at).split('\n').slice(3);
    const table = rows
      .slice(
        0,
        rows.findIndex((l) => !l.startsWith('|')),
      )
      .map((r) => r.split('|').at(-2)!.trim());
    expect(
      table,
      `${file}: the asset table's last column, in the order of ASSET_CHOICES; update: node -C atomem-source --import tsx packages/bench/src/package-sizes.ts --write`,
    ).toEqual(emittedSizes(dist).map((e) => `${MB(e.bytes)}, ${e.files} files`));
  });
});
