/**
 * A vitest reporter that ends every run with one line saying which tests were skipped and why,
 * so a newcomer's `npm test` without `../shared` (the read-only data and models beside the
 * repository) does not pass silently with parts of the product never exercised, e.g.
 *
 *   skipped 15 tests: ../shared/data/ml-100k not found (MovieLens-100K, 9 tests), ../shared/models/stories260K/stories260K.gguf not found (the toy GGUF for wllama, 6 tests)
 *
 * Each requirement names the test files that skip without it; a skipped test elsewhere (a name
 * filter, `it.skip`) is counted as "other". Silent when nothing was skipped.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Reporter, TestModule } from 'vitest/node';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SHARED = resolve(ROOT, '..', 'shared');

interface Requirement {
  /** The line's words when it is missing. */
  missing: string;
  /** What it is, for the count. */
  what: string;
  present: () => boolean;
  /** Test files (relative to the repository) that skip without it. */
  files: RegExp;
}

/** What the skipping tests need (keep in step with their `skipIf`s). */
export const REQUIREMENTS: readonly Requirement[] = [
  {
    missing: '../shared/data/ml-100k not found',
    what: 'MovieLens-100K; ATOMEM_ML100K=<folder> points to it',
    present: () => [process.env.ATOMEM_ML100K, resolve(SHARED, 'data', 'ml-100k')].some((d) => !!d && existsSync(resolve(d, 'u.data'))),
    files: /^test\/node\/(bench-ml100k|sasrec-ml100k|privacy-leak|embed-use-lite-quant)\.test\.ts$/,
  },
  {
    missing: '../shared/models/stories260K/stories260K.gguf not found',
    what: 'the toy GGUF that runs wllama',
    present: () => existsSync(resolve(SHARED, 'models', 'stories260K', 'stories260K.gguf')),
    files: /^test\/(browser\/(models-wllama|worker-models)|node\/dist-chromium|e2e\/demo-llm)\.test\.ts$/,
  },
  {
    missing: 'COMMUNITY_BENCH not set',
    what: 'the opt-in community index benchmark',
    present: () => !!process.env.COMMUNITY_BENCH,
    files: /^test\/node\/community-bench\.test\.ts$/,
  },
  {
    missing: 'no WebAssembly SIMD in this Node',
    what: 'the SIMD kernels',
    present: () => true,
    files: /^test\/node\/sasrec-train\.test\.ts$/,
  },
];

/** The skip line for these modules, or undefined when nothing was skipped. */
export function skipLine(modules: ReadonlyArray<TestModule>): string | undefined {
  const counts = new Map<Requirement | 'other', number>();
  let total = 0;
  for (const mod of modules) {
    const file = mod.moduleId.startsWith(ROOT) ? mod.moduleId.slice(ROOT.length).replaceAll('\\', '/') : mod.moduleId;
    for (const test of mod.children.allTests()) {
      if (test.result().state !== 'skipped') continue;
      total++;
      const req = REQUIREMENTS.find((r) => r.files.test(file) && !r.present()) ?? 'other';
      counts.set(req, (counts.get(req) ?? 0) + 1);
    }
  }
  if (total === 0) return undefined;
  const n = (k: number) => `${k} test${k === 1 ? '' : 's'}`;
  const parts = [...counts].map(([r, k]) => (r === 'other' ? `${n(k)} skipped by a name filter or it.skip` : `${r.missing} (${r.what}: ${n(k)})`));
  return `skipped ${n(total)}: ${parts.join(', ')}${counts.size > (counts.has('other') ? 1 : 0) ? ' — README "Set-up" says how to run the full set' : ''}`;
}

export default class SkipReporter implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const line = skipLine(modules);
    if (line) process.stdout.write(`\n${line}\n`);
  }
}
