import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mainThreadSize } from '@atomem/bench/package-sizes.js';

const DIST = fileURLToPath(new URL('../dist', import.meta.url));

// The main-thread entry a shop page imports must stay small: everything heavy lives in the worker.
// `npm test` builds first (pretest), so this checks the bundle CI just built.
const BUDGET_GZIP_BYTES = 10 * 1024;

describe('size budget of the main-thread entry', () => {
  it(`dist/index.js and the chunks it imports are at most ${BUDGET_GZIP_BYTES} bytes gzipped`, () => {
    const file = new URL('../dist/index.js', import.meta.url);
    expect(existsSync(file), 'dist/index.js is missing: run `npm run build` (npm test does it first)').toBe(true);
    const { files, bytes, gzip } = mainThreadSize(DIST);
    console.log(`main-thread entry (${files.join(' + ')}): ${bytes} bytes, ${gzip} bytes gzipped (budget ${BUDGET_GZIP_BYTES})`);
    expect(gzip).toBeLessThanOrEqual(BUDGET_GZIP_BYTES);
  });

  it('the main-thread entry does not pull in the engine, tfjs or model runtimes', () => {
    const code = readFileSync(new URL('../dist/index.js', import.meta.url), 'utf8');
    const chunks = mainThreadSize(DIST)
      .files.map((f) => readFileSync(join(DIST, f), 'utf8'))
      .join('\n');
    expect(chunks).not.toMatch(/@tensorflow|@huggingface|onnxruntime|@wllama|@mlc-ai|from ['"]idb['"]/);
    // the worker is the prebuilt dist/worker/worker.js, located through a variable at run time: no
    // `new URL('literal', import.meta.url)` a shop's bundler would rewrite, re-bundle or copy in part
    expect(code).not.toMatch(/new URL\(\s*["'`]/);
    expect(code).toMatch(/new Worker\(/);
    expect(code.match(/["'`]\.\/worker\/worker\.js["'`]/g)).toHaveLength(1);
    expect(code.match(/["'`]\.\/assets\/["'`]/g)).toHaveLength(1);
  });
});
