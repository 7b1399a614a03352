import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAst } from 'vite';
import { describe, expect, it } from 'vitest';

// The BUILT worker graph (packages/atomem/dist/worker/, `npm test` builds first): its entry is
// alone in its chunk and no chunk imports it, so a bundler or dev server that loads a chunk under
// a second URL can never evaluate the entry — and start a second, uninitialised engine — again.

const DIST = fileURLToPath(new URL('../dist/', import.meta.url));
const WORKER_DIR = join(DIST, 'worker');

/** Every module specifier a chunk imports: static imports, re-exports and `import()` of a literal. */
function importsOf(code: string): { static: string[]; dynamic: string[]; nonLiteralDynamic: number } {
  const out = { static: [] as string[], dynamic: [] as string[], nonLiteralDynamic: 0 };
  const visit = (node: unknown): void => {
    if (!node || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      node.forEach(visit);
      return;
    }
    const n = node as { type?: string; source?: { type: string; value?: unknown; quasis?: { value: { cooked: string } }[]; expressions?: unknown[] } | null };
    if ((n.type === 'ImportDeclaration' || n.type === 'ExportAllDeclaration' || n.type === 'ExportNamedDeclaration') && n.source)
      out.static.push(String(n.source.value));
    if (n.type === 'ImportExpression' && n.source) {
      if (n.source.type === 'Literal' && typeof n.source.value === 'string') out.dynamic.push(n.source.value);
      else if (n.source.type === 'TemplateLiteral' && n.source.expressions?.length === 0) out.dynamic.push(n.source.quasis![0].value.cooked);
      else out.nonLiteralDynamic++;
    }
    for (const v of Object.values(node)) if (v && typeof v === 'object') visit(v);
  };
  visit(parseAst(code).body);
  return out;
}

describe('the built worker chunk graph', () => {
  const files = existsSync(WORKER_DIR) ? readdirSync(WORKER_DIR).filter((f) => f.endsWith('.js')) : [];

  it('exists (run `npm run build` first; npm test does)', () => {
    expect(files).toContain('worker.js');
    expect(files.length).toBeGreaterThan(3);
  });

  it('no chunk imports the worker entry, statically or dynamically', () => {
    const offenders: string[] = [];
    for (const f of files) {
      const { static: s, dynamic: d } = importsOf(readFileSync(join(WORKER_DIR, f), 'utf8'));
      for (const spec of [...s, ...d]) if (/(^|\/)worker\.js$/.test(spec)) offenders.push(`${f} → ${spec}`);
    }
    expect(offenders).toEqual([]);
  });

  it('the entry only starts the engine: one static import (the engine chunk), no exports, no code of its own', () => {
    const code = readFileSync(join(WORKER_DIR, 'worker.js'), 'utf8');
    const { static: s, dynamic: d } = importsOf(code);
    expect(s).toHaveLength(1);
    expect(s[0]).toMatch(/^\.\/engine-[\w-]+\.js$/);
    expect(d).toEqual([]);
    const body = parseAst(code).body;
    expect(body.map((n) => n.type)).toEqual(['ImportDeclaration', 'ExpressionStatement']);
  });

  it('every relative import resolves to a shipped chunk, and the lazy runtimes are not imported statically by the eager part', () => {
    const missing: string[] = [];
    const graph = new Map<string, string[]>();
    for (const f of files) {
      const { static: s, dynamic: d } = importsOf(readFileSync(join(WORKER_DIR, f), 'utf8'));
      graph.set(
        f,
        s.map((x) => x.replace(/^\.\//, '')),
      );
      for (const spec of [...s, ...d]) if (spec.startsWith('.') && !existsSync(join(WORKER_DIR, spec))) missing.push(`${f} → ${spec}`);
    }
    expect(missing).toEqual([]);
    // the static closure of the entry: what a worker start loads before any embedder or model
    const eager = new Set<string>();
    const todo = ['worker.js'];
    while (todo.length) {
      const f = todo.pop()!;
      if (eager.has(f)) continue;
      eager.add(f);
      todo.push(...(graph.get(f) ?? []));
    }
    expect([...eager].filter((f) => /^(use-lite|minilm|transformers|wllama|webllm|lib)-/.test(f))).toEqual([]);
  });

  it('dist/manifest.json lists every chunk, and the plugin-facing parts exist', () => {
    const manifest = JSON.parse(readFileSync(join(DIST, 'manifest.json'), 'utf8')) as {
      worker: string;
      core: string[];
      features: Record<string, { files: string[] }>;
    };
    expect(manifest.worker).toBe('worker/worker.js');
    const listed = new Set([...manifest.core, ...Object.values(manifest.features).flatMap((f) => f.files)]);
    expect(files.map((f) => `worker/${f}`).filter((f) => !listed.has(f))).toEqual([]);
    for (const f of listed) expect(existsSync(join(DIST, f)), f).toBe(true);
    expect(manifest.core).toContain('worker/worker.js');
    expect(manifest.features['use-lite'].files).toContain('assets/use-lite/model.json');
  });
});
