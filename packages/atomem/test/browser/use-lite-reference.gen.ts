/**
 * Regenerates `use-lite-reference.json`, the Node reference vectors that the browser test
 * `embed-use-lite.test.ts` compares against. Run once from the repo root (Node, not a test):
 *
 *   npx tsx packages/atomem/test/browser/use-lite-reference.gen.ts
 *
 * Vectors are USE-lite (tfjs wasm backend in Node, installed weights), rounded to 6 decimals.
 */
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { createUseLiteEmbedder, USE_LITE_ID } from '../../src/embed/use-lite.js';

export const REFERENCE_SENTENCES = ['loves space adventure science fiction movies', 'enjoys sci-fi films set in outer space', 'prefers romantic comedies'];

async function main(): Promise<void> {
  const use = await createUseLiteEmbedder();
  const out = await use.embed(REFERENCE_SENTENCES);
  const json = {
    embedderId: USE_LITE_ID,
    generatedBy: 'npx tsx packages/atomem/test/browser/use-lite-reference.gen.ts (Node, tfjs wasm backend)',
    sentences: REFERENCE_SENTENCES.map((text, i) => ({
      text,
      tokens: use.tokenize(text),
      vector: Array.from(out[i].vector, (x) => Math.round(x * 1e6) / 1e6),
    })),
  };
  await use.dispose?.();
  await writeFile(fileURLToPath(new URL('./use-lite-reference.json', import.meta.url)), `${JSON.stringify(json)}\n`);
}

await main();
