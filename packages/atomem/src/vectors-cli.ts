#!/usr/bin/env node
/**
 * `atomem-vectors`: embed a shop's catalog ahead of time, in Node, into a catalog vector file
 * that the browser engine loads through its `catalogVectors` option instead of embedding every
 * product on the shopper's device. With `--log` (the shop's order log) it also trains what the
 * shop publishes for on-device ranking — the shop model (`src/shop/train.ts`) and a SASRec
 * sequence model (`src/shop/sasrec/budgeted.ts`: at most `--sasrec-budget` seconds and
 * `--sasrec-epochs` epochs, early stopping on held-out last items, as `atomem-shop --sasrec`),
 * through `src/shop/publish.ts` — and writes them into the same file (format v2,
 * `src/protocol/catalog-vectors-v2.ts`); without `--log` it writes format v1 as before.
 *
 *   atomem-vectors --catalog products.json --out public/catalog-vectors.bin
 *                  [--embedder use-lite|hashing] [--dim 256] [--batch 2048] [--threads 1] [--no-progress]
 *                  [--cache ~/.cache/atomem/vectors-<embedder>.bin | --no-cache]
 *                  [--log interactions.jsonl [--no-sequence] [--epsilon 4 [--delta 1e-6]]
 *                   [--until 2026-01-01] [--sasrec-budget 600] [--sasrec-epochs 80] [--seed 2026]]
 *                  [--shop-model shop-model.bin [--sasrec sasrec.bin]] [--shards [16]]
 *
 * `--shards`: format v3 (`src/protocol/catalog-vectors-v3.ts`) — a small head at `--out` and the
 * items in shard files under `<out>.shards/` that the browser fetches only for the items its page
 * shows (int8 vectors; what a phone can download at 100k items). `--shop-model`: the shop model
 * `atomem-shop` wrote (with `--sasrec`: and the SASRec file `atomem-shop --sasrec` wrote), or a
 * v2 file's shop part and SASRec, instead of training with `--log`.
 *
 * The disk cache (`src/embed/vectors-disk-cache.ts`) keeps every vector under a hash of the embedder id and
 * the item's text, so a nightly run embeds only new or edited products; the summary line says
 * how many came from the cache and the embedding rate of the rest.
 *
 * The log is JSON Lines `{ user, item, at, action? }` (the benchmark's `jsonl` interactions
 * format; `at` epoch ms or an ISO date; ids may be numbers), streamed (any size; `.gz` gunzipped); rows of items not in the catalog
 * are skipped and counted. `--epsilon` makes the shop model user-level (ε, δ)-DP; SASRec has no
 * DP training, so under `--epsilon` it is left out of the file (said in the summary).
 *
 * The catalog is a JSON array of items, `{ "items": [...] }`, or JSON Lines (`.jsonl`/`.ndjson`,
 * one item per line). Items are `{ id, title, categories?, description? }`; other fields (price,
 * stock, …) are ignored and do not affect the vectors. The embedder must be the one the shop's
 * browsers run (same `embedder` option), else the engine ignores the file.
 *
 * One summary line on stdout, progress and errors on stderr. The file is written to a temporary
 * name next to `--out` and renamed, so a failed run never leaves a partial file.
 * Exit codes: 0 ok, 2 bad usage or bad input, 1 anything else (e.g. the model failed to load).
 */
import { randomBytes } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import type { Item } from './core/types.js';
import { itemText } from './embed/cache.js';
import { createHashingEmbedder } from './embed/hashing.js';
import type { Embedder } from './embed/types.js';
import { USE_LITE_DIM, USE_LITE_ID } from './embed/use-lite-id.js';
import { VectorDiskCache, vectorCacheKey } from './embed/vectors-disk-cache.js';
import { encodeCatalogVectors } from './protocol/catalog-vectors-v1.js';
import { encodeCatalogFile } from './protocol/catalog-vectors-v2.js';
import { DEFAULT_SHARD_SIZE, encodeCatalogFileV3 } from './protocol/catalog-vectors-v3.js';
import { LogInputError } from './shop/log-reader.js';
import { DEFAULT_SASREC_BUDGET, DEFAULT_SASREC_EPOCHS, DEFAULT_SASREC_SEED, readShopPart, trainShopPart } from './shop/publish.js';

/** Embedders the browser engine can run without extra options, and so this command supports. */
export const VECTOR_EMBEDDERS = ['use-lite', 'hashing'] as const;
export type VectorEmbedderKind = (typeof VECTOR_EMBEDDERS)[number];

/**
 * Buckets of the browser engine's `hashing` embedder when its spec gives no `dim`
 * (`src/worker/embedders.ts`); a test keeps the two equal, so the ids match.
 */
export const BROWSER_HASHING_DIM = 256;

/**
 * Items per `embed()` call. Large, because USE-lite pads each forward pass to its longest text
 * and orders the texts of one call by length before cutting them into forward passes (and the
 * `--threads` pool splits each call between its threads): on 4,000 product texts with 2 threads,
 * 72 items/s at 256 per call, 84 at 2,048, 88 at 4,000 (BENCHMARKS.md "USE-lite in Node"). The
 * progress line moves once per call.
 */
export const DEFAULT_BATCH = 2048;

/** Largest dimension the file format accepts. */
const MAX_DIM = 65536;

/** A usage or input problem: exit code 2, message printed as is. */
export class VectorsUsageError extends Error {
  override name = 'VectorsUsageError';
}

/** Where the command writes; defaults to the process streams. */
export interface VectorsCliIo {
  stdout?: { write(s: string): unknown };
  stderr?: { write(s: string): unknown };
}

interface CliOptions {
  catalog: string;
  out: string;
  embedder: VectorEmbedderKind;
  dim?: number;
  batch: number;
  threads: number;
  progress: boolean;
  log?: string;
  sequence: boolean;
  epsilon?: number;
  delta: number;
  until?: string;
  sasrecEpochs: number;
  sasrecBudget: number;
  seed: number;
  /** Cache file, or false with --no-cache. */
  cache: string | boolean;
  shopModel?: string;
  /** With --shop-model: the SASRec file atomem-shop wrote. */
  sasrec?: string;
  /** Items per shard (format v3), true for the default. */
  shards?: number | boolean;
}

/** The default cache file of an embedder: `$XDG_CACHE_HOME/atomem/` (else `~/.cache/atomem/`). */
export function defaultCachePath(embedderId: string): string {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(base, 'atomem', `vectors-${embedderId.replace(/[^\w.@-]/g, '_')}.bin`);
}

function positiveNumber(name: string): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`${name} must be a number > 0`);
    return n;
  };
}

function positiveInt(name: string, min: number, max = Number.MAX_SAFE_INTEGER): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!/^[0-9]+$/.test(v.trim()) || !Number.isInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`${name} must be an integer in ${min}..${max}`);
    }
    return n;
  };
}

function program(io: Required<VectorsCliIo>): Command {
  return new Command()
    .name('atomem-vectors')
    .description("Embed a catalog ahead of time into a vector file for the browser engine's `catalogVectors` option.")
    .requiredOption('--catalog <file>', 'catalog: JSON array of items, { "items": [...] }, or JSON Lines (.jsonl)')
    .requiredOption('--out <file>', 'vector file to write (e.g. public/catalog-vectors.bin); replaced atomically')
    .addOption(new Option('--embedder <kind>', "embedder; must be the shop's browser embedder").choices([...VECTOR_EMBEDDERS]).default('use-lite'))
    .option('--dim <n>', `buckets of --embedder hashing (default ${BROWSER_HASHING_DIM}, the browser engine's)`, positiveInt('--dim', 2, MAX_DIM))
    .option('--batch <n>', 'items per embedder call (larger: less padding, a coarser progress line)', positiveInt('--batch', 1), DEFAULT_BATCH)
    .option(
      '--threads <n>',
      'USE-lite threads, each with its own copy of the model on its own core: for a server with free cores',
      positiveInt('--threads', 1, 64),
      1,
    )
    .option('--no-progress', 'no progress bar on stderr')
    .option('--cache <file>', 'disk cache of item vectors keyed by embedder and item text (default ~/.cache/atomem/vectors-<embedder>.bin)')
    .option('--no-cache', 'embed every item (no disk cache)')
    .option(
      '--shards [n]',
      `write format v3: a small head at --out and shards of n items (default ${DEFAULT_SHARD_SIZE}) under <out>.shards/`,
      positiveInt('--shards', 1, 65536),
    )
    .option('--shop-model <file>', "the shop model atomem-shop wrote (or a v2 catalog file's shop part) to publish instead of training with --log")
    .option('--sasrec <file>', 'with --shop-model: the SASRec model atomem-shop --sasrec wrote beside it, published with it')
    .option('--log <file>', "the shop's order log, JSON Lines { user, item, at, action? }: also train the shop model (and SASRec) and write format v2")
    .option('--no-sequence', 'with --log: no SASRec sequence model (shop model only; faster)')
    .option('--epsilon <x>', 'with --log: user-level (ε, δ)-DP budget of the shop model; SASRec is not DP and is then left out', positiveNumber('--epsilon'))
    .option('--delta <x>', 'with --epsilon: DP δ', positiveNumber('--delta'), 1e-6)
    .option('--until <date>', 'with --log: only log rows before this ISO date or epoch ms (a retention limit)')
    .option('--sasrec-budget <seconds>', 'with --log: wall-clock budget of the SASRec training', positiveNumber('--sasrec-budget'), DEFAULT_SASREC_BUDGET)
    .option(
      '--sasrec-epochs <n>',
      'with --log: upper bound on SASRec epochs (early stopping on validation usually ends it sooner)',
      positiveInt('--sasrec-epochs', 1, 100_000),
      DEFAULT_SASREC_EPOCHS,
    )
    .option('--seed <n>', 'with --log: SASRec seed (initialisation, sampling, dropout)', positiveInt('--seed', 0, 2 ** 31 - 1), DEFAULT_SASREC_SEED)
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });
}

/** Where `value` sits, for error messages: `item 3 ("sku-9")` or `item 3`. */
function where(index: number, value: unknown, line?: number): string {
  const id =
    value && typeof value === 'object' && typeof (value as { id?: unknown }).id === 'string' && (value as { id: string }).id
      ? ` ("${(value as { id: string }).id}")`
      : '';
  return `${line === undefined ? '' : `line ${line}: `}item ${index}${id}`;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v === '' ? 'an empty string' : 'a string';
  return typeof v === 'object' ? 'an object' : typeof v;
}

/**
 * Parse catalog text: a JSON array of items, `{ items: [...] }`, or (when `jsonLines`) one JSON
 * item per non-blank line. Returns the raw values and, for JSON Lines, the line of each.
 */
export function parseCatalogText(text: string, source: string, jsonLines: boolean): { values: unknown[]; lines?: number[] } {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text; // why: editors on Windows add a BOM
  if (jsonLines) {
    const values: unknown[] = [];
    const lines: number[] = [];
    body.split(/\r?\n/).forEach((raw, i) => {
      if (raw.trim() === '') return;
      try {
        values.push(JSON.parse(raw));
      } catch (e) {
        throw new VectorsUsageError(`${source}: line ${i + 1} is not valid JSON (${(e as Error).message})`);
      }
      lines.push(i + 1);
    });
    return { values, lines };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch (e) {
    throw new VectorsUsageError(`${source} is not valid JSON (${(e as Error).message}); for one item per line, name it .jsonl`);
  }
  if (Array.isArray(parsed)) return { values: parsed };
  if (parsed && typeof parsed === 'object' && Array.isArray((parsed as { items?: unknown }).items)) return { values: (parsed as { items: unknown[] }).items };
  throw new VectorsUsageError(
    `${source}: expected a JSON array of items or an object { "items": [...] }, got ${describe(parsed)}${parsed && typeof parsed === 'object' ? ' without an "items" array' : ''}`,
  );
}

/**
 * Check catalog items: an object each, `id` a non-empty string and unique, `title` a string,
 * `categories` an array of strings and `description` a string when present. Returns the items
 * reduced to the fields that are embedded (extra fields cannot change the vectors anyway).
 */
export function validateCatalogItems(values: readonly unknown[], source: string, lines?: readonly number[]): Item[] {
  if (values.length === 0) throw new VectorsUsageError(`${source}: the catalog has no items`);
  const firstSeen = new Map<string, number>();
  return values.map((v, i) => {
    const at = `${source}: ${where(i, v, lines?.[i])}`;
    if (!v || typeof v !== 'object' || Array.isArray(v))
      throw new VectorsUsageError(`${at} is ${describe(v)}, expected an object { id, title, categories?, description? }`);
    const o = v as Record<string, unknown>;
    if (typeof o.id !== 'string' || o.id === '')
      throw new VectorsUsageError(`${at}: "id" is ${o.id === undefined ? 'missing' : describe(o.id)}, expected a non-empty string`);
    const prev = firstSeen.get(o.id);
    if (prev !== undefined)
      throw new VectorsUsageError(`${at}: id "${o.id}" already used by item ${prev}${lines ? ` (line ${lines[prev]})` : ''}; ids must be unique`);
    firstSeen.set(o.id, i);
    if (typeof o.title !== 'string')
      throw new VectorsUsageError(`${at}: "title" is ${o.title === undefined ? 'missing' : describe(o.title)}, expected a string`);
    const item: Item = { id: o.id, title: o.title };
    if (o.categories !== undefined) {
      if (!Array.isArray(o.categories)) throw new VectorsUsageError(`${at}: "categories" is ${describe(o.categories)}, expected an array of strings`);
      const bad = o.categories.findIndex((c) => typeof c !== 'string');
      if (bad >= 0) throw new VectorsUsageError(`${at}: categories[${bad}] is ${describe(o.categories[bad])}, expected a string`);
      item.categories = o.categories as string[];
    }
    if (o.description !== undefined) {
      if (typeof o.description !== 'string') throw new VectorsUsageError(`${at}: "description" is ${describe(o.description)}, expected a string`);
      item.description = o.description;
    }
    return item;
  });
}

/** Read and validate a catalog file (`.jsonl`/`.ndjson` as JSON Lines, anything else as JSON). */
export async function readCatalog(path: string): Promise<Item[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (e as Error).message;
    throw new VectorsUsageError(`cannot read --catalog ${path}: ${why}`);
  }
  const ext = extname(path).toLowerCase();
  const { values, lines } = parseCatalogText(text, path, ext === '.jsonl' || ext === '.ndjson');
  return validateCatalogItems(values, path, lines);
}

/** Fail early (before loading a model) if `--out` cannot be written where it points. */
function checkOut(out: string, catalog: string): void {
  const dir = dirname(out);
  let st;
  try {
    st = statSync(dir);
  } catch {
    throw new VectorsUsageError(`--out ${out}: directory ${dir} does not exist (create it first)`);
  }
  if (!st.isDirectory()) throw new VectorsUsageError(`--out ${out}: ${dir} is not a directory`);
  try {
    if (statSync(out).isDirectory()) throw new VectorsUsageError(`--out ${out} is a directory; give a file name, e.g. ${join(out, 'catalog-vectors.bin')}`);
  } catch (e) {
    if (e instanceof VectorsUsageError) throw e;
  }
  if (resolve(out) === resolve(catalog)) throw new VectorsUsageError(`--out ${out} is the catalog itself`);
}

/** Build the embedder exactly as the browser engine would (same id, same dim). */
export async function buildNodeEmbedder(kind: VectorEmbedderKind, dim?: number, threads = 1): Promise<Embedder> {
  if (kind === 'hashing') return createHashingEmbedder({ dim: dim ?? BROWSER_HASHING_DIM });
  if (dim !== undefined) throw new VectorsUsageError(`--dim applies to --embedder hashing only (use-lite is always 512-d)`);
  // why: lazy, so `--embedder hashing` (and usage errors) never load tfjs.
  let useLite: typeof import('./embed/use-lite.js');
  try {
    useLite = await import('./embed/use-lite.js');
  } catch (e) {
    const missing = /Cannot find (?:package|module) '(@tensorflow\/[\w-]+)/.exec((e as Error).message ?? '')?.[1];
    if (!missing) throw e;
    throw new VectorsUsageError(`--embedder use-lite needs the optional peers of atomem, and ${missing} is not installed: ${USE_LITE_PEERS_INSTALL}`);
  }
  if (threads === 1) return useLite.createUseLiteEmbedder();
  const { createUseLitePool } = await import('./embed/use-lite-pool.js');
  return createUseLitePool(threads);
}

/** How to install what `--embedder use-lite` needs in Node (the package README says the same). */
export const USE_LITE_PEERS_INSTALL = 'npm i @tensorflow/tfjs-core@^4.22.0 @tensorflow/tfjs-converter@^4.22.0 @tensorflow/tfjs-backend-wasm@^4.22.0';

/**
 * Embed `items` in calls of `batch`, checking every vector; items whose key is in `cache` are
 * not embedded, the others are added to it (appended after every call). `onBatch(done)` after
 * each call (done counts cached items too).
 */
async function embedAll(
  ident: { id: string; dim: number },
  load: () => Promise<Embedder>,
  items: readonly Item[],
  batch: number,
  onBatch: (done: number) => void,
  cache?: VectorDiskCache,
): Promise<{ vectors: Float32Array[]; fromCache: number; embedded: number; embedSeconds: number }> {
  const vectors: Float32Array[] = new Array<Float32Array>(items.length);
  const texts = items.map((it) => itemText(it));
  const keys = cache ? texts.map((t) => vectorCacheKey(ident.id, t)) : [];
  const todo: number[] = [];
  items.forEach((_, i) => {
    const hit = cache?.get(keys[i]);
    if (hit) vectors[i] = hit;
    else todo.push(i);
  });
  const fromCache = items.length - todo.length;
  onBatch(fromCache);
  const embedder = todo.length ? await load() : undefined;
  const t0 = performance.now();
  for (let start = 0; start < todo.length; start += batch) {
    const slice = todo.slice(start, start + batch);
    let out;
    try {
      out = await embedder!.embed(slice.map((i) => texts[i]));
    } catch (e) {
      // why: embedders name texts[i] of the call; name the item instead.
      const msg = (e as Error).message ?? String(e);
      const m = /texts\[(\d+)\]/.exec(msg);
      const item = m ? items[slice[Number(m[1])]] : undefined;
      throw new Error(`embedding ${item ? `item "${item.id}"` : `items ${slice[0]}..${slice[slice.length - 1]}`} failed: ${msg}`, { cause: e });
    }
    if (out.length !== slice.length) throw new Error(`${ident.id} returned ${out.length} vectors for ${slice.length} texts`);
    out.forEach((e, k) => {
      const i = slice[k];
      const v = e.vector;
      if (v.length !== ident.dim) throw new Error(`${ident.id} returned a ${v.length}-d vector for item "${items[i].id}", expected ${ident.dim}`);
      if (!v.every(Number.isFinite)) throw new Error(`${ident.id} returned a non-finite vector for item "${items[i].id}"`);
      vectors[i] = v;
      cache?.set(keys[i], v);
    });
    await cache?.flush();
    onBatch(fromCache + Math.min(todo.length, start + batch));
  }
  return { vectors, fromCache, embedded: todo.length, embedSeconds: (performance.now() - t0) / 1000 };
}

/** Write `bytes` to a temporary file next to `path`, then rename it over `path`. */
async function writeAtomic(path: string, bytes: Uint8Array): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await writeFile(tmp, bytes, { flag: 'wx' });
    await rename(tmp, path);
  } catch (e) {
    await rm(tmp, { force: true }).catch(() => undefined);
    throw new Error(`cannot write --out ${path}: ${(e as Error).message}`, { cause: e });
  }
}

const BAR_FORMAT = 'embedding |{bar}| {value}/{total} items {percentage}% {duration_formatted} (eta {eta_formatted})';

/**
 * Run the command on `argv` (arguments only, without `node` and the script) and return the exit
 * code: 0 ok, 2 bad usage or input, 1 other failures. Never exits the process.
 */
export async function runVectorsCli(argv: readonly string[], io: VectorsCliIo = {}): Promise<number> {
  const out = { stdout: io.stdout ?? process.stdout, stderr: io.stderr ?? process.stderr };
  const cmd = program(out);
  try {
    cmd.parse([...argv], { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    throw e;
  }
  const o = cmd.opts<CliOptions>();
  let bar: cliProgress.SingleBar | undefined;
  let embedder: Embedder | undefined;
  try {
    if (o.dim !== undefined && o.embedder !== 'hashing') throw new VectorsUsageError(`--dim applies to --embedder hashing only (use-lite is always 512-d)`);
    if (!o.log) {
      const only = (['epsilon', 'until'] as const).filter((k) => o[k] !== undefined);
      if (only.length) throw new VectorsUsageError(`--${only[0]} applies with --log only`);
    }
    const sasrecFlag = (['sasrecBudget', 'sasrecEpochs'] as const).find((k) => cmd.getOptionValueSource(k) === 'cli');
    const flagName = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    if (sasrecFlag && !o.log) throw new VectorsUsageError(`${flagName(sasrecFlag)} applies with --log only`);
    if (sasrecFlag && !o.sequence) throw new VectorsUsageError(`${flagName(sasrecFlag)} with --no-sequence: no SASRec is trained; drop one of them`);
    checkOut(o.out, o.catalog);
    if (o.log && resolve(o.log) === resolve(o.out)) throw new VectorsUsageError(`--out ${o.out} is the log itself`);
    if (o.log && o.shopModel) throw new VectorsUsageError('--log and --shop-model exclude each other (train here, or publish the model atomem-shop trained)');
    const items = await readCatalog(o.catalog);
    if (o.sasrec !== undefined && !o.shopModel) throw new VectorsUsageError('--sasrec applies with --shop-model only (--log trains SASRec here)');
    const published = o.shopModel ? await readShopPart(o.shopModel, o.sasrec) : undefined;
    const t0 = performance.now();
    // why at most one thread per 16 items: each thread loads its own model first (about 1 s)
    const threads = o.embedder === 'use-lite' ? Math.min(o.threads, Math.ceil(items.length / 16)) : 1;
    // the embedder's id and size without loading it: a run whose items are all cached never loads the model
    const ident =
      o.embedder === 'hashing'
        ? (({ id, dim }) => ({ id, dim }))(createHashingEmbedder({ dim: o.dim ?? BROWSER_HASHING_DIM }))
        : { id: USE_LITE_ID, dim: USE_LITE_DIM };
    let loadSeconds = 0;
    const load = async (): Promise<Embedder> => {
      if (embedder) return embedder;
      const t = performance.now();
      const e = await buildNodeEmbedder(o.embedder, o.dim, threads);
      if (e.id !== ident.id || e.dim !== ident.dim)
        throw new Error(`the ${o.embedder} embedder is ${e.id} (${e.dim}-d), expected ${ident.id} (${ident.dim}-d)`);
      loadSeconds = (performance.now() - t) / 1000;
      return (embedder = e);
    };
    if (o.progress) {
      bar = new cliProgress.SingleBar(
        {
          format: BAR_FORMAT,
          stream: out.stderr as NodeJS.WritableStream,
          hideCursor: true,
          clearOnComplete: false,
          noTTYOutput: true,
          notTTYSchedule: 10_000,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(items.length, 0);
    }
    let cache: VectorDiskCache | undefined;
    let cacheNote = 'no cache';
    if (o.cache !== false) {
      const path = typeof o.cache === 'string' ? o.cache : defaultCachePath(ident.id);
      const opened = await VectorDiskCache.open(path, ident.id, ident.dim);
      cache = opened.cache;
      if (opened.info.replaced) out.stderr.write(`atomem-vectors: the cache ${path} is ${opened.info.replaced}; it is replaced\n`);
      if (opened.info.truncatedBytes)
        out.stderr.write(`atomem-vectors: the cache ${path} ended in a partial record (${opened.info.truncatedBytes} bytes, an interrupted run); cut off\n`);
      cacheNote = `cache ${path}`;
    }
    const embedded = await embedAll(ident, load, items, o.batch, (done) => bar?.update(done), cache);
    const vectors = embedded.vectors;
    bar?.stop();
    bar = undefined;
    if (cache) {
      const dropped = await cache.compact(new Set(items.map((it) => vectorCacheKey(ident.id, itemText(it)))));
      if (dropped) cacheNote += ` (compacted: ${dropped} stale vectors dropped)`;
    }
    const trained = o.log ? await trainShopPart({ ...o, log: o.log! }, items, vectors, ident, out) : undefined;
    const shop = trained?.shop ?? published;
    const input = { embedder: ident, items, vectors, ...(shop ? { shop } : {}) };
    let bytes: number;
    let format: string;
    if (o.shards !== undefined) {
      const dir = `${o.out}.shards`;
      const enc = encodeCatalogFileV3({
        ...input,
        shardSize: o.shards === true ? DEFAULT_SHARD_SIZE : (o.shards as number),
        shardPrefix: `${basename(o.out)}.shards/`,
      });
      await mkdir(dir, { recursive: true });
      const have = new Set(await readdir(dir));
      let written = 0;
      for (const s of enc.shards) {
        const file = basename(s.name);
        // why: a shard's name carries its checksum: an existing file of that name is this shard
        if (have.has(file)) continue;
        await writeAtomic(join(dir, file), s.bytes);
        written++;
      }
      await writeAtomic(o.out, enc.head);
      const names = new Set(enc.shards.map((s) => basename(s.name)));
      const stale = [...have].filter((f) => f.endsWith('.bin') && !names.has(f)).length;
      const shardBytes = enc.shards.reduce((t, s) => t + s.bytes.length, 0);
      bytes = enc.head.length + shardBytes;
      format = ` (format v3: head ${enc.head.length} bytes, ${enc.shards.length} shards of ${shardBytes} bytes in ${dir}/, ${written} new${stale ? `, ${stale} of earlier releases left for pages still holding the old head` : ''})`;
    } else {
      const file = shop ? encodeCatalogFile({ ...input, shop: shop! }) : encodeCatalogVectors(ident, items, vectors);
      await writeAtomic(o.out, file);
      bytes = file.byteLength;
      format = shop ? ' (format v2)' : '';
    }
    const t2 = performance.now();
    const rate = embedded.embedded / Math.max(embedded.embedSeconds, 1e-6); // embedding only, without the model load
    out.stdout.write(
      `atomem-vectors: wrote ${o.out}${format}: ${items.length} items, embedder ${ident.id}, dim ${ident.dim}, ${bytes} bytes, ` +
        `${((t2 - t0) / 1000).toFixed(2)} s (${embedder ? `model load ${loadSeconds.toFixed(2)} s` : 'model not loaded: every item cached'}); ` +
        `${embedded.fromCache} from the cache, ${embedded.embedded} embedded at ${embedded.embedded ? rate.toFixed(0) : '-'} items/s${o.embedder === 'use-lite' ? ` on ${threads} thread${threads > 1 ? 's' : ''}` : ''} (${cacheNote})` +
        `${trained ? `; ${trained.summary}` : published ? `; shop model from ${o.shopModel}` : ''}\n`,
    );
    return 0;
  } catch (e) {
    bar?.stop();
    if (e instanceof VectorsUsageError || e instanceof LogInputError) {
      out.stderr.write(`atomem-vectors: error: ${e.message}\n`);
      return 2;
    }
    out.stderr.write(`atomem-vectors: error: ${e instanceof Error ? (process.env.DEBUG ? e.stack : e.message) : String(e)}\n`);
    return 1;
  } finally {
    await embedder?.dispose?.();
  }
}

/** True when this module is the process's entry (`node dist/…/vectors-cli.js`, `tsx src/…`, or the npm bin symlink). */
function isMain(): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    // why: npm's bin is a symlink (node_modules/.bin/atomem-vectors); Node resolves it for import.meta.url.
    return import.meta.url === pathToFileURL(realpathSync(resolve(entry))).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  runVectorsCli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`atomem-vectors: error: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
