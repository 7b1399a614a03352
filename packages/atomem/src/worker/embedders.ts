/**
 * Build the embedder an {@link EngineOptions} asks for. Heavy runtimes (tfjs, transformers.js)
 * are imported lazily, so a worker that runs `hashing` never loads them and the worker's
 * first chunk stays small. USE-lite is lazy as a whole: its id and dimension are known up front,
 * so the catalog can be checked against the cache and the shop's vector file, and its code and
 * 7.4 MB of files are fetched only when some text really has to be embedded.
 */
import type { Embedding } from '../core/types.js';
import { createHashingEmbedder } from '../embed/hashing.js';
import type { Embedder } from '../embed/types.js';
import { USE_LITE_DIM, USE_LITE_ID } from '../embed/use-lite-id.js';
import { assertValidTexts } from '../embed/validate.js';
import type { OnLoadProgress } from '../models/types.js';
import type { EmbedderSpec, EngineStatus } from './protocol.js';

/** A built embedder and what it runs on. */
export interface BuiltEmbedder {
  embedder: Embedder;
  kind: EngineStatus['embedder']['kind'];
  device: EngineStatus['embedder']['device'];
  /** `not loaded` until the model is first needed, `loading` while it loads, `ready` after. */
  state(): EngineStatus['embedder']['state'];
  /** Why the last load failed (the next `embed` tries again), or null. */
  error(): string | null;
}

/**
 * An {@link Embedder} whose model loads on the first `embed` call (with progress), with the id
 * and dimension it will have. A failed load rejects that call and is tried again on the next; a
 * model whose id differs from the announced one is refused (its vectors would be mislabelled).
 */
export class LazyEmbedder implements Embedder {
  private loaded: Embedder | null = null;
  private loading: Promise<Embedder> | null = null;
  private lastError: string | null = null;
  private disposed = false;

  constructor(
    readonly id: string,
    readonly dim: number,
    private readonly load: () => Promise<Embedder>,
  ) {}

  get state(): EngineStatus['embedder']['state'] {
    return this.loaded ? 'ready' : this.loading ? 'loading' : 'not loaded';
  }

  get error(): string | null {
    return this.lastError;
  }

  /** Load now (idempotent); resolves with the loaded model. */
  ready(): Promise<Embedder> {
    if (this.disposed) return Promise.reject(new Error(`${this.id} embedder has been disposed`));
    if (this.loaded) return Promise.resolve(this.loaded);
    this.loading ??= (async () => {
      try {
        const e = await this.load();
        if (e.id !== this.id || e.dim !== this.dim) {
          await e.dispose?.();
          throw new Error(
            `the embedder loaded as ${e.id} (${e.dim}-d), expected ${this.id} (${this.dim}-d): serve the package's own dist/assets/use-lite/ files`,
          );
        }
        if (this.disposed) {
          await e.dispose?.();
          throw new Error(`${this.id} embedder has been disposed`);
        }
        this.loaded = e;
        this.lastError = null;
        return e;
      } catch (err) {
        this.lastError = err instanceof Error ? err.message : String(err);
        throw err;
      } finally {
        this.loading = null;
      }
    })();
    return this.loading;
  }

  async embed(texts: readonly string[]): Promise<Embedding[]> {
    assertValidTexts(texts); // why: bad input fails at once, without fetching a model
    if (texts.length === 0) return [];
    return (await this.ready()).embed(texts);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    const pending = this.loading;
    if (pending) await pending.catch(() => undefined);
    await this.loaded?.dispose?.();
    this.loaded = null;
  }
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
function under(base: string, child: string): string {
  return `${base.replace(/\/+$/, '')}/${child}`;
}

/** The folder of a shipped asset group, or a clear error naming the option to set. */
function assetDir(explicit: string | undefined, assetsBaseUrl: string | undefined, group: string, option: string): string {
  if (explicit) return explicit;
  if (assetsBaseUrl) return under(assetsBaseUrl, group);
  throw new TypeError(`embedder: no URL for the ${group} files — set ${option} or assetsBaseUrl (createAtomem sets assetsBaseUrl for the built package)`);
}

/**
 * Build the embedder. `use-lite` is returned unloaded ({@link LazyEmbedder}); when it loads it
 * reports `load`, then one `download` step per file (tfjs loads shards itself), then `ready`.
 * `minilm` loads here (its id depends on the device it gets) and forwards transformers.js' byte
 * progress.
 */
export async function buildEmbedder(spec: EmbedderSpec | undefined, assetsBaseUrl: string | undefined, onProgress: OnLoadProgress): Promise<BuiltEmbedder> {
  const s = normalise(spec);
  if (s.kind === 'hashing') {
    // why: 256 buckets, not the default 64: fewer collisions between unrelated words of a real catalog.
    return { embedder: createHashingEmbedder({ dim: s.dim ?? 256 }), kind: 'hashing', device: 'cpu', state: () => 'ready', error: () => null };
  }
  if (s.kind === 'use-lite') {
    const base = assetDir(s.baseUrl, assetsBaseUrl, 'use-lite', 'embedder.baseUrl');
    const wasmPaths = assetDir(s.wasmPaths, assetsBaseUrl, 'tfjs-wasm/', 'embedder.wasmPaths');
    const lazy = new LazyEmbedder(USE_LITE_ID, USE_LITE_DIM, async () => {
      const [{ createUseLiteEmbedder }, { fetchAssetSource }] = await Promise.all([import('../embed/use-lite.js'), import('../embed/use-lite-browser.js')]);
      const source = fetchAssetSource(base);
      let loaded = 0;
      onProgress({ stage: 'embedder', phase: 'load', loaded: 0, total: 0, unit: 'bytes', model: 'use-lite' });
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
      return embedder;
    });
    return { embedder: lazy, kind: 'use-lite', device: 'wasm', state: () => lazy.state, error: () => lazy.error };
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
  return { embedder, kind: 'minilm', device: embedder.device, state: () => 'ready', error: () => null };
}
