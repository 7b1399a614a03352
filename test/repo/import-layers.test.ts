import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

// Imports point downward only. packages/atomem/src is a stack of layers; a module may import
// its own directory and the layers below it, never one beside or above it. Every import counts:
// `import`, `import type`, `export … from`, `import()` and `typeof import()` (read by the
// TypeScript scanner, so comments and strings are not mistaken for imports). And a workspace
// (packages/*, apps/*) never reaches into another one by a relative path: it imports the
// package by name (`atomem/engine`, `atomem/protocol`, …), which the `atomem-source` condition
// resolves to source in the repository and to dist for a shop.

const REPO = resolve(import.meta.dirname, '../..');
const SRC = join(REPO, 'packages/atomem/src');

/**
 * The layers of packages/atomem/src, lowest first. A unit is a directory under src/ or a file
 * directly in it. Units of one layer are peers: they do not import each other.
 */
const LAYERS: ReadonlyArray<{ layer: string; units: readonly string[] }> = [
  // the error classes and the option-name tables: no imports (the page's entry bundles them)
  { layer: 'leaves', units: ['errors.ts', 'options.ts'] },
  // pure memory model: types, config, memory operations, ranking, retrieval, vectors
  { layer: 'core', units: ['core'] },
  // language-model adapters (Prompt API, WebLLM, OpenAI-compatible, wllama) and their options
  { layer: 'models', units: ['models'] },
  // text embedders (hashing, USE-lite, MiniLM) and their caches
  { layer: 'embed', units: ['embed'] },
  // wire formats: catalog vector files, the shop model, SASRec weights, the index protocol
  { layer: 'protocol', units: ['protocol'] },
  // the privacy mechanisms on shared signals (local-DP reports, releases and community matching): what sync sends and reads
  { layer: 'community', units: ['community'] },
  // the engine's parts: storage, sync with the index, the shop's models, reasoners
  { layer: 'parts', units: ['store', 'sync', 'shop', 'reason'] },
  // one shopper's memory agent: lifecycle and shelf
  { layer: 'agent', units: ['agent'] },
  // the Web Worker's engine and its RPC contract
  { layer: 'worker', units: ['worker'] },
  // entry points: the page client (`atomem`), the Node entry (`atomem/engine`), the Vite plugin, the vectors CLI
  { layer: 'entries', units: ['client', 'node.ts', 'vite.ts', 'vectors-cli.ts'] },
];

/** Every .ts file under `dir`, recursively (no node_modules, no dist). */
function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (/\.(ts|tsx|mts)$/.test(name) && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** The module specifiers `file` imports or re-exports, with their lines. */
function importsOf(file: string, text = readFileSync(file, 'utf8')): Array<{ spec: string; line: number }> {
  const info = ts.preProcessFile(text, true, true);
  const lineOf = (pos: number) => text.slice(0, pos).split('\n').length;
  return info.importedFiles.map((f) => ({ spec: f.fileName, line: lineOf(f.pos) }));
}

/** The file a relative specifier names (`./x.js` → `x.ts`), or undefined for a package import. */
function target(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  return resolve(dirname(from), spec.replace(/\.(m?js)$/, '.ts'));
}

/** The unit (first path segment under src/) of a file in packages/atomem/src. */
function unitOf(file: string): string {
  return relative(SRC, file).split(sep)[0];
}

const rankOf = new Map(LAYERS.flatMap(({ units }, rank) => units.map((u) => [u, rank] as const)));
const layerOf = new Map(LAYERS.flatMap(({ layer, units }) => units.map((u) => [u, layer] as const)));

/** Every import of packages/atomem/src that does not point downward, as readable lines. */
function backArrows(files: ReadonlyArray<{ file: string; text?: string }>): string[] {
  const out: string[] = [];
  for (const { file, text } of files) {
    const from = unitOf(file);
    for (const { spec, line } of importsOf(file, text)) {
      const to = target(file, spec);
      if (!to?.startsWith(SRC + sep)) continue;
      const unit = unitOf(to);
      if (unit === from) continue;
      const where = `packages/atomem/src/${relative(SRC, file).split(sep).join('/')}:${line} imports ${spec}`;
      const a = rankOf.get(from);
      const b = rankOf.get(unit);
      if (a === undefined || b === undefined) {
        out.push(`${where}: ${a === undefined ? from : unit} is in no layer (add it to LAYERS in test/repo/import-layers.test.ts)`);
      } else if (b > a) out.push(`${where}: ${layerOf.get(from)} (${from}) imports from the ${layerOf.get(unit)} layer above it (${unit})`);
      else if (b === a) out.push(`${where}: ${from} and ${unit} are peers in the ${layerOf.get(from)} layer and do not import each other`);
    }
  }
  return out;
}

/** The workspaces (packages/*, apps/*) as absolute directories. */
function workspaces(): string[] {
  return ['packages', 'apps'].flatMap((d) =>
    readdirSync(join(REPO, d))
      .map((n) => join(REPO, d, n))
      .filter((p) => existsSync(join(p, 'package.json'))),
  );
}

/**
 * Files that reach into another workspace's source on purpose, and why. Nothing else may.
 * - the browser benchmark's page measures the engine's own modules as the worker loads them, one
 *   at a time and lazily (a cold start must find none of them cached); `atomem/engine` would
 *   load them all at once;
 * - three benchmark tests check the benchmark's variants against atomem internals that no
 *   entry exports (the SASRec trainer's gradient core and sampler, the weight fit's
 *   standardisation, the scripted model's minimal values).
 */
const REACHES_IN: Readonly<Record<string, string>> = {
  'packages/bench/browser/page.ts': 'packages/atomem/src/',
  'packages/bench/test/bench-sasrec-softmax.test.ts': 'packages/atomem/src/shop/sasrec/',
  'packages/bench/test/shop-bench.test.ts': 'packages/atomem/src/shop/fit.ts',
  'packages/bench/test/bench-llm.test.ts': 'packages/atomem/src/models/scripted.ts',
};

/** Relative imports from one workspace into another (they must import the package by name). */
function crossWorkspaceImports(): string[] {
  const all = workspaces();
  const out: string[] = [];
  for (const ws of all) {
    for (const file of tsFiles(ws)) {
      for (const { spec, line } of importsOf(file)) {
        const to = target(file, spec);
        if (!to) continue;
        const other = all.find((w) => w !== ws && (to + sep).startsWith(w + sep));
        if (other && to.startsWith(join(REPO, REACHES_IN[relative(REPO, file)] ?? '\0'))) continue;
        if (other) out.push(`${relative(REPO, file)}:${line} imports ${spec} (inside ${relative(REPO, other)}): import the package by name`);
      }
    }
  }
  return out;
}

describe('imports point downward only', () => {
  const files = tsFiles(SRC).map((file) => ({ file }));

  it('every unit of packages/atomem/src is in exactly one layer', () => {
    const units = new Set(files.map(({ file }) => unitOf(file)));
    expect([...units].filter((u) => !rankOf.has(u)).sort(), 'units in no layer').toEqual([]);
    const listed = LAYERS.flatMap((l) => l.units);
    expect(listed.length, 'a unit listed twice').toBe(new Set(listed).size);
  });

  it('no module of packages/atomem/src imports a peer or a layer above its own', () => {
    expect(backArrows(files)).toEqual([]);
  });

  it('the check sees a back-arrow in every form of import', () => {
    const core = join(SRC, 'core/rank.ts');
    for (const text of [
      "import { x } from '../worker/engine.js';",
      "import type { X } from '../agent/agent.js';",
      "export { x } from '../shop/device.js';",
      "export type * from '../client/index.js';",
      "const m = await import('../store/store.js');",
      "let t: typeof import('../reason/llm.js');",
    ]) {
      expect(backArrows([{ file: core, text }]), text).toHaveLength(1);
    }
    expect(backArrows([{ file: core, text: "// import { x } from '../worker/engine.js';\nconst s = \"from '../agent/agent.js'\";" }])).toEqual([]);
    expect(backArrows([{ file: join(SRC, 'shop/device.ts'), text: "import { x } from '../reason/llm.js';" }])[0]).toMatch(/peers/);
    expect(backArrows([{ file: join(SRC, 'worker/engine.ts'), text: "import { x } from '../agent/agent.js';" }])).toEqual([]);
  });

  it('no workspace imports another one by a relative path', () => {
    expect(crossWorkspaceImports()).toEqual([]);
  });
});
