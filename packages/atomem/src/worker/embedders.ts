/**
 * Build the embedder an {@link EngineOptions} asks for. Heavy runtimes (tfjs, transformers.js)
 * are imported lazily, so a worker that runs `hashing` never loads them and the worker's
 * first chunk stays small.
 */
import { createHashingEmbedder } from '../embed/hashing.js';
import type { Embedder } from '../embed/types.js';
import type { OnLoadProgress } from '../models/types.js';
import type { EmbedderSpec, EngineStatus } from './protocol.js';

/** A built embedder and what it runs on. */
export interface BuiltEmbedder {
  embedder: Embedder;
  kind: EngineStatus['embedder']['kind'];
  device: EngineStatus['embedder']['device'];
}

type Spec = Exclude<EmbedderSpec, string>;

function normalise(spec: EmbedderSpec | undefined): Spec {
  const s = spec ?? 'use-lite';
  if (typeof s === 'string') {
    if (s === 'use-lite' || s === 'minilm' || s === 'hashing') return { kind: s } as Spec;
    throw new TypeError(`embedder must be 'use-lite', 'minilm' or 'hashing', got '${s}'`);
  }
  if (!s || typeof s !== 'object' || !['use-lite', 'minilm', 'hashing'].includes((s as Spec).kind)) {
    throw new TypeError(`embedder.kind must be 'use-lite', 'minilm' or 'hashing', got ${JSON.stringify((s as { kind?: unknown })?.kind)}`);
  }
  return s;
}

/** Join a folder URL and a child path (the folder may lack its trailing slash). */
export function under(base: string, child: string): string {
  return `${base.replace(/\/+$/, '')}/${child}`;
}

/** The folder of a shipped asset group, or a clear error naming the option to set. */
function assetDir(explicit: string | undefined, assetsBaseUrl: string | undefined, group: string, option: string): string {
  if (explicit) return explicit;
  if (assetsBaseUrl) return under(assetsBaseUrl, group);
  throw new TypeError(`embedder: no URL for the ${group} files — set ${option} or assetsBaseUrl (createAtomem sets assetsBaseUrl for the built package)`);
}

/**
 * Build the embedder. `use-lite` reports its file downloads as one `download` step per file
 * (tfjs loads shards itself), `minilm` forwards transformers.js' byte progress.
 */
export async function buildEmbedder(spec: EmbedderSpec | undefined, assetsBaseUrl: string | undefined, onProgress: OnLoadProgress): Promise<BuiltEmbedder> {
  const s = normalise(spec);
  if (s.kind === 'hashing') {
    // why: 256 buckets, not the default 64: fewer collisions between unrelated words of a real catalog.
    return { embedder: createHashingEmbedder({ dim: s.dim ?? 256 }), kind: 'hashing', device: 'cpu' };
  }
  if (s.kind === 'use-lite') {
    const base = assetDir(s.baseUrl, assetsBaseUrl, 'use-lite', 'embedder.baseUrl');
    const wasmPaths = assetDir(s.wasmPaths, assetsBaseUrl, 'tfjs-wasm/', 'embedder.wasmPaths');
    const [{ createUseLiteEmbedder }, { fetchAssetSource }] = await Promise.all([import('../embed/use-lite.js'), import('../embed/use-lite-browser.js')]);
    const source = fetchAssetSource(base);
    let loaded = 0;
    const counted = {
      locate: source.locate,
      text: source.text,
      bytes: async (file: string) => {
        const b = await source.bytes(file);
        loaded += b.byteLength;
        onProgress({ stage: 'embedder', phase: 'download', loaded, total: 0, unit: 'bytes', model: 'use-lite' });
        return b;
      },
    };
    const embedder = await createUseLiteEmbedder({ assets: counted, wasmPaths: wasmPaths.endsWith('/') ? wasmPaths : `${wasmPaths}/` });
    onProgress({ stage: 'embedder', phase: 'ready', loaded, total: loaded, unit: 'bytes', model: 'use-lite' });
    return { embedder, kind: 'use-lite', device: 'wasm' };
  }
  const { createMiniLMEmbedder } = await import('../embed/minilm.js');
  const wasmPaths = assetDir(s.wasmPaths, assetsBaseUrl, 'ort-wasm/', 'embedder.wasmPaths');
  const embedder = await createMiniLMEmbedder({
    model: s.model,
    modelBaseUrl: s.modelBaseUrl,
    wasmPaths: wasmPaths.endsWith('/') ? wasmPaths : `${wasmPaths}/`,
    device: s.device ?? 'auto',
    dtype: s.dtype,
    onProgress,
  });
  return { embedder, kind: 'minilm', device: embedder.device };
}
