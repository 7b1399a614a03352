/**
 * The shop's order log in columns, and a streaming reader for JSON Lines files of any size.
 *
 * {@link LogColumns} keeps one row per interaction in typed arrays (user index, item index, time,
 * action weight): 20 bytes a row instead of a JS object with two strings, so 10M rows take about
 * 200 MB plus the interned ids. {@link readLogFile} fills it from `node:readline` over a file
 * stream (gunzipped when the name ends in `.gz`), so the file is never one string (V8's limit is
 * about 512 MB), and reports progress with an ETA from the bytes read so far.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';
import { ACTION_WEIGHTS, type Action } from '../core/types.js';

/** A usage or input problem in a log file (the CLI exits with code 2). */
export class LogInputError extends Error {
  override name = 'LogInputError';
}

/** Growable typed columns of a log; ids are interned. */
export class LogColumns {
  /** User id per user index. */
  readonly users: string[] = [];
  /** Item id per item index (the catalog first, when given). */
  readonly items: string[] = [];
  private readonly userIndex = new Map<string, number>();
  private readonly itemIndex = new Map<string, number>();
  private u = new Int32Array(1024);
  private i = new Int32Array(1024);
  private t = new Float64Array(1024);
  private w = new Float32Array(1024);
  length = 0;
  /** Rows whose item is not in the catalog (only counted when `closed`). */
  skipped = 0;

  /**
   * @param catalog item ids in catalog order (public); with `closed`, rows of other items are
   * skipped (counted in `skipped`), otherwise new items are appended.
   */
  constructor(
    catalog: Iterable<string> = [],
    readonly closed = false,
  ) {
    for (const id of catalog) {
      if (this.itemIndex.has(id)) continue;
      this.itemIndex.set(id, this.items.length);
      this.items.push(id);
    }
  }

  /** Index of an item id, or -1. */
  itemOf(id: string): number {
    return this.itemIndex.get(id) ?? -1;
  }

  /** Appends one row; returns false when it was skipped (unknown item of a closed catalog). */
  add(user: string, item: string, at: number, action: Action | undefined = undefined): boolean {
    let i = this.itemIndex.get(item);
    if (i === undefined) {
      if (this.closed) {
        this.skipped++;
        return false;
      }
      this.itemIndex.set(item, (i = this.items.length));
      this.items.push(item);
    }
    let u = this.userIndex.get(user);
    if (u === undefined) {
      this.userIndex.set(user, (u = this.users.length));
      this.users.push(user);
    }
    if (this.length === this.u.length) this.grow();
    const r = this.length++;
    this.u[r] = u;
    this.i[r] = i;
    this.t[r] = at;
    this.w[r] = ACTION_WEIGHTS[action ?? 'click'];
    return true;
  }

  private grow(): void {
    const cap = this.u.length * 2;
    const g = <T extends Int32Array | Float64Array | Float32Array>(a: T, make: (n: number) => T): T => {
      const b = make(cap);
      b.set(a);
      return b;
    };
    this.u = g(this.u, (n) => new Int32Array(n));
    this.i = g(this.i, (n) => new Int32Array(n));
    this.t = g(this.t, (n) => new Float64Array(n));
    this.w = g(this.w, (n) => new Float32Array(n));
  }

  /** The filled columns (views, no copy). */
  columns(): { user: Int32Array; item: Int32Array; at: Float64Array; weight: Float32Array } {
    const n = this.length;
    return { user: this.u.subarray(0, n), item: this.i.subarray(0, n), at: this.t.subarray(0, n), weight: this.w.subarray(0, n) };
  }

  /** Approximate bytes held by the columns. */
  get bytes(): number {
    return this.u.length * 20;
  }
}

/** Progress of long stages (those over `everyMs`/2), throttled, with an ETA from the fraction done. */
export function progressReporter(write: (s: string) => void, everyMs = 2000): (stage: string, done: number, total: number) => void {
  const started = new Map<string, number>();
  let last = 0;
  return (stage, done, total) => {
    const now = Date.now();
    if (!started.has(stage)) started.set(stage, now);
    const finished = total > 0 && done >= total;
    // why: quick stages stay silent; a long one reports every `everyMs` and when it ends.
    if (now - started.get(stage)! < everyMs / 2 || (!finished && now - last < everyMs)) return;
    last = now;
    const secs = (now - started.get(stage)!) / 1000;
    const frac = total > 0 ? Math.min(1, done / total) : 0;
    const eta = frac > 0 && !finished ? `, ETA ${Math.round((secs * (1 - frac)) / frac)} s` : '';
    write(`atomem-shop: ${stage} ${(100 * frac).toFixed(0)}% (${secs.toFixed(0)} s${eta}), rss ${(process.memoryUsage.rss() / 2 ** 20).toFixed(0)} MB\n`);
  };
}

/** Lines of a text file, streamed (gunzipped when `path` ends in `.gz`), with the bytes read so far. */
async function* fileLines(path: string, onBytes?: (read: number, total: number) => void): AsyncGenerator<string> {
  const total = (await stat(path)).size;
  const file = createReadStream(path, { highWaterMark: 1 << 20 });
  let read = 0;
  file.on('data', (chunk) => {
    read += chunk.length;
    onBytes?.(read, total);
  });
  const text = path.endsWith('.gz') ? file.pipe(createGunzip()) : file;
  if (text !== file) file.on('error', (e) => text.destroy(e));
  const lines = createInterface({ input: text, crlfDelay: Infinity });
  try {
    for await (const line of lines) yield line;
  } finally {
    lines.close();
    file.destroy();
  }
}

/** JSON objects of a JSON Lines file, with their line numbers; blank lines are skipped. */
async function* jsonObjects(path: string, onBytes?: (read: number, total: number) => void): AsyncGenerator<[Record<string, unknown>, number]> {
  let no = 0;
  for await (const line of fileLines(path, onBytes)) {
    no++;
    if (!line.trim()) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw new LogInputError(`${path}:${no}: not JSON`);
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new LogInputError(`${path}:${no}: expected a JSON object`);
    yield [v as Record<string, unknown>, no];
  }
}

/** A non-empty string or finite number field as a string id. */
function idField(o: Record<string, unknown>, key: string, where: string): string {
  const v = o[key];
  if ((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v))) return String(v);
  throw new LogInputError(`${where}: "${key}" must be a non-empty string or a number`);
}

/** Epoch ms of an `at` field (epoch ms or an ISO date). */
function atField(o: Record<string, unknown>, where: string): number {
  const at = typeof o.at === 'number' ? o.at : typeof o.at === 'string' ? Date.parse(o.at) : NaN;
  if (!Number.isFinite(at)) throw new LogInputError(`${where}: "at" must be epoch milliseconds or an ISO date`);
  return at;
}

/** Item ids of a catalog file (`{id, …}` per line), streamed. */
export async function readCatalogFile(path: string): Promise<string[]> {
  const ids: string[] = [];
  for await (const [row, no] of jsonObjects(path)) ids.push(idField(row, 'id', `${path}:${no}`));
  return ids;
}

/**
 * Reads an order log (`{user, item, at, action?}` per line; `.gz` gunzipped) into columns,
 * streaming. With `catalog`, rows of other items are skipped (counted in `skipped`).
 */
export async function readLogFile(
  path: string,
  opts: { catalog?: readonly string[]; onProgress?: (stage: string, done: number, total: number) => void } = {},
): Promise<LogColumns> {
  const log = new LogColumns(opts.catalog ?? [], opts.catalog !== undefined);
  const onBytes = opts.onProgress ? (read: number, total: number) => opts.onProgress!('read log', read, total) : undefined;
  for await (const [row, no] of jsonObjects(path, onBytes)) {
    const where = `${path}:${no}`;
    const at = atField(row, where);
    if (row.action !== undefined && (typeof row.action !== 'string' || !(row.action in ACTION_WEIGHTS)))
      throw new LogInputError(`${where}: unknown action ${JSON.stringify(row.action)}`);
    log.add(idField(row, 'user', where), idField(row, 'item', where), at, row.action as Action | undefined);
  }
  return log;
}
