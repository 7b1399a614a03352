/**
 * `atomem/vite`: the Vite plugin a shop adds to run atomem from its own origin.
 *
 * ```ts
 * // vite.config.ts
 * import { defineConfig } from 'vite';
 * import atomem from 'atomem/vite';
 * export default defineConfig({ plugins: [atomem()] });
 * ```
 *
 * atomem's engine runs in a prebuilt module worker (`atomem/dist/worker/`) that loads model
 * files (`atomem/dist/assets/`) at run time. Vite must neither pre-bundle nor transform those
 * files, and must ship them in the build. The plugin:
 * - excludes `atomem` from dependency pre-bundling (`optimizeDeps.exclude`);
 * - dev (`vite`): serves the worker, its chunks and the assets untouched at `<base>@atomem/…`
 *   (middleware, right MIME types, `charset=utf-8` for JSON) and points `atomem`'s client there;
 * - build (`vite build`): emits them (`this.emitFile`) into `<assetsDir>/atomem-<hash>/` — the
 *   hash covers every emitted byte, so `assets/` may be served as immutable — and points the
 *   client at them by a URL relative to the chunk that holds the client
 *   (`new URL('./…', import.meta.url)`, written when the chunk is rendered), so an absolute or a
 *   `'./'` `base` works alike. (Not `import.meta.ROLLUP_FILE_URL_*`: rolldown fails to resolve a
 *   reference id that contains `$`, and ids follow the emitted bytes.)
 *
 * Only what the chosen options need is served and emitted ({@link AtomemViteOptions.assets}).
 * Nothing is fetched from a CDN; nothing but the shop's own origin is contacted.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { dirname, extname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Plugin, ResolvedConfig } from 'vite';

/**
 * Optional parts of atomem whose files the build includes:
 * - `'use-lite'`: the default embedder (USE-lite weights, vocabulary, tfjs runtime and its wasm);
 * - `'minilm'`: `embedder: 'minilm'` (transformers.js chunk and the ONNX runtime's wasm, `ort-wasm/`);
 * - `'wllama'`: `llm: { wllama }` (wllama chunk and `wllama/wllama.wasm`);
 * - `'webllm'`: `llm: { webllm }` (the WebLLM runtime chunk, 6 MB).
 * The rules reasoner, the hashing embedder, `llm.openai` and `llm.promptApi` need none.
 */
export type AtomemAsset = 'use-lite' | 'minilm' | 'wllama' | 'webllm';

/** Options of {@link atomem}. */
export interface AtomemViteOptions {
  /**
   * The optional parts to serve and emit, matching the `createAtomem` options the shop uses.
   * Default `['use-lite']`: what `createAtomem`'s defaults need. `[]` for `embedder: 'hashing'`
   * without a local model. A file of a part not listed answers 404 in dev (with the option to add
   * in the response) and is absent from the build.
   */
  assets?: AtomemAsset[];
}

const ALL: readonly AtomemAsset[] = ['use-lite', 'minilm', 'wllama', 'webllm'];

/** `atomem/dist/manifest.json` (written by the package build, scripts/assets.ts). */
interface Manifest {
  version: 1;
  worker: string;
  core: string[];
  features: Record<AtomemAsset, { files: string[] }>;
}

/** The two string literals of atomem's dist/index.js this plugin replaces (src/client/worker-url.dist.ts). */
const WORKER_LITERAL = /(["'`])\.\/worker\/worker\.js\1/g;
const ASSETS_LITERAL = /(["'`])\.\/assets\/\1/g;

const MIME: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  // why: USE-lite's vocab.json holds '▁' (U+2581); a missing charset invites Latin-1 decoding
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.bin': 'application/octet-stream',
};

/** The folder of atomem's built files: `dist/` next to this module (or `../dist/` when run from source). */
function distDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  return existsSync(join(here, 'manifest.json')) || !existsSync(join(here, '..', 'dist', 'manifest.json')) ? here : join(here, '..', 'dist');
}

/** Served path (relative to the atomem base: `worker/…`, `use-lite/…`) → file on disk. */
type FileMap = Map<string, string>;

/** Resolve the files the chosen parts need (all inside atomem's `dist/`); throws a readable error for a bad option or a broken package. */
export function atomemFiles(assets: readonly AtomemAsset[], dist = distDir()): { files: FileMap; worker: string; owners: Map<string, AtomemAsset> } {
  const manifestFile = join(dist, 'manifest.json');
  if (!existsSync(manifestFile)) throw new Error(`atomem/vite: ${manifestFile} is missing (a broken or unbuilt atomem package)`);
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  if (manifest.version !== 1) throw new Error(`atomem/vite: ${manifestFile} has version ${String(manifest.version)}; this plugin reads version 1`);
  const files: FileMap = new Map();
  // dist/worker/x.js → worker/x.js; dist/assets/use-lite/… → use-lite/…
  const served = (rel: string): string => (rel.startsWith('assets/') ? rel.slice('assets/'.length) : rel);
  const add = (rel: string): void => void files.set(served(rel), join(dist, rel));
  manifest.core.forEach(add);
  for (const a of assets) {
    const feature = manifest.features[a];
    if (!feature) throw new Error(`atomem/vite: unknown asset '${String(a)}' in atomem({ assets }); known: ${ALL.map((x) => `'${x}'`).join(', ')}`);
    feature.files.forEach(add);
  }
  for (const [rel, file] of files) if (!existsSync(file)) throw new Error(`atomem/vite: ${file} (for ${rel}) is missing: reinstall atomem`);
  // which option serves each file of the package, for the hint of a 404 in dev
  const owners = new Map<string, AtomemAsset>();
  for (const a of ALL) {
    const feature = manifest.features[a];
    for (const rel of feature?.files ?? []) if (!owners.has(served(rel))) owners.set(served(rel), a);
  }
  return { files, worker: manifest.worker, owners };
}

/** The placeholder the build's transform leaves for the worker's URL; `renderChunk` writes the URL relative to the chunk. */
const WORKER_MARK = '__atomem_worker_url__';
const WORKER_MARK_LITERAL = /(["'`])__atomem_worker_url__\1/g;

/** atomem's `dist/index.js`, whose two URL literals the plugin replaces. */
function clientEntry(dist: string): string {
  return realpathSync(join(dist, 'index.js'));
}

/** Replace each literal exactly once; a count other than 1 means atomem and atomem/vite do not match. */
function replaceOnce(code: string, re: RegExp, by: string, what: string): string {
  const n = code.match(re)?.length ?? 0;
  if (n !== 1)
    throw new Error(
      `atomem/vite: expected the ${what} literal once in atomem/dist/index.js, found it ${n} times (atomem and atomem/vite from different versions?)`,
    );
  return code.replace(re, by);
}

/**
 * The Vite plugin: `plugins: [atomem()]`. See the module comment for what it does in dev and build.
 * @param options Which optional parts to include (default: what `createAtomem`'s defaults need).
 */
export default function atomem(options: AtomemViteOptions = {}): Plugin {
  const assets = options.assets ?? ['use-lite'];
  if (!Array.isArray(assets)) throw new TypeError(`atomem/vite: assets must be an array such as ['use-lite'], got ${JSON.stringify(assets)}`);
  const dist = distDir();
  let config: ResolvedConfig;
  let resolved: ReturnType<typeof atomemFiles>;
  let entry = '';
  /** The emitted worker's file name in the build output (set by the build's transform). */
  let workerFile: string | undefined;

  return {
    name: 'atomem',
    enforce: 'pre',
    config: () => ({ optimizeDeps: { exclude: ['atomem'] } }),
    configResolved(c) {
      config = c;
      resolved = atomemFiles(assets, dist);
      entry = clientEntry(dist);
    },

    configureServer(server) {
      const prefixes = [...new Set([`${config.base}@atomem/`, '/@atomem/'])];
      // why: registered directly (not returned), so it runs before Vite's own transform middleware, which would rewrite the chunks' imports
      server.middlewares.use((req, res, next) => {
        const path = (req.url ?? '').split('?')[0];
        const prefix = prefixes.find((p) => path.startsWith(p));
        if (!prefix || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
        let rel: string;
        try {
          rel = decodeURIComponent(path.slice(prefix.length));
        } catch {
          rel = '';
        }
        const file = resolved.files.get(rel);
        if (!file) {
          const part = resolved.owners.get(rel);
          res.statusCode = 404;
          res.setHeader('content-type', 'text/plain; charset=utf-8');
          res.end(`atomem/vite: ${rel} is not served${part ? `: add '${part}' to atomem({ assets })` : ''}\n`);
          return;
        }
        const body = readFileSync(file);
        res.statusCode = 200;
        res.setHeader('content-type', MIME[extname(file)] ?? 'application/octet-stream');
        res.setHeader('content-length', String(statSync(file).size));
        res.setHeader('cache-control', 'no-cache');
        res.end(req.method === 'HEAD' ? undefined : body);
      });
    },

    transform(code, id) {
      const file = id.split('?')[0];
      if (!file.endsWith('index.js') || (file !== entry && (!existsSync(file) || realpathSync(file) !== entry))) return null;
      if (config.command === 'serve') {
        const base = `${config.base}@atomem/`;
        let out = replaceOnce(code, WORKER_LITERAL, JSON.stringify(`${base}${resolved.worker}`), 'worker path');
        out = replaceOnce(out, ASSETS_LITERAL, JSON.stringify(base), 'assets path');
        return { code: out, map: null };
      }
      // why: a server build (SSR) never starts the worker: leave its URLs alone and emit nothing
      if ((this as { environment?: { config: { consumer?: string } } }).environment?.config.consumer === 'server') return null;
      const hash = createHash('sha256');
      const bodies = [...resolved.files]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([rel, f]) => {
          const source = readFileSync(f);
          hash.update(rel).update('\0').update(source);
          return [rel, source] as const;
        });
      const folder = `${config.build.assetsDir ? `${config.build.assetsDir}/` : ''}atomem-${hash.digest('hex').slice(0, 10)}/`;
      let bytes = 0;
      for (const [rel, source] of bodies) {
        this.emitFile({ type: 'asset', fileName: `${folder}${rel}`, source });
        bytes += source.length;
      }
      workerFile = `${folder}${resolved.worker}`;
      const workerUrl = JSON.stringify(WORKER_MARK);
      let out = replaceOnce(code, WORKER_LITERAL, workerUrl, 'worker path');
      // the asset folder is the worker folder's parent: <folder>worker/worker.js → <folder>
      out = replaceOnce(out, ASSETS_LITERAL, `new URL("../", new URL(${workerUrl}, import.meta.url)).href`, 'assets path');
      this.info?.(`atomem: ${bodies.length} files, ${(bytes / 1e6).toFixed(1)} MB (${assets.length ? assets.join(', ') : 'core only'}) → ${folder}`);
      return { code: out, map: null };
    },

    renderChunk(code, chunk) {
      if (!workerFile || !code.includes(WORKER_MARK)) return null;
      let rel = posix.relative(posix.dirname(chunk.fileName), workerFile);
      if (!rel.startsWith('.')) rel = `./${rel}`;
      return { code: code.replace(WORKER_MARK_LITERAL, `new URL(${JSON.stringify(rel)}, import.meta.url).href`), map: null };
    },
  };
}
