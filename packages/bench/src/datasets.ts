/**
 * Dataset loaders for the benchmark (formats in /EVAL.md, "Data formats the benchmark reads").
 *
 * Every loader returns a {@link Dataset} whose sequences are sorted by (timestamp, item id)
 * with {@link compareInteractions}, after the k-core filter of {@link kcore}.
 *
 * Unknown item ids in interactions (an id with no row in the item file):
 * - `movielens`: an error (u.data and u.item ship together; a miss means a broken copy);
 * - `jsonl`: the interaction is skipped and counted in `dataset.warnings` (a shop export
 *   routinely mentions products deleted since);
 * - `agentcf`: the item is kept with its id as title and counted in `dataset.warnings`
 *   (its candidate pools and sequences must stay intact).
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { ACTION_WEIGHTS, type Action, type Interaction, type Item } from 'atomem/engine';
import type { Dataset, DatasetFormat } from './types.js';

/** Bad input data or a missing file: the message names the file (and line). */
export class DatasetError extends Error {
  override name = 'DatasetError';
}

/** Default k of the k-core filter per format (EVAL.md step 2). */
export const DEFAULT_KCORE: Readonly<Record<DatasetFormat, number>> = {
  movielens: 5,
  agentcf: 0,
  jsonl: 0,
  sequences: 0,
};

export interface LoadOptions {
  /** k of the k-core filter; defaults to {@link DEFAULT_KCORE} of the format. */
  kcore?: number;
}

const DIGITS = /^[0-9]+$/;

/**
 * Total order on ids: all-digit ids sort numerically (`"9" < "10"`) and before every other
 * id; other ids sort by UTF-16 code units (locale-independent). Two all-digit ids with the
 * same value (`"07"`, `"7"`) fall back to code-unit order.
 */
export function compareIds(a: string, b: string): number {
  if (a === b) return 0;
  const an = DIGITS.test(a);
  const bn = DIGITS.test(b);
  if (an && bn) {
    const as = a.replace(/^0+(?=.)/, '');
    const bs = b.replace(/^0+(?=.)/, '');
    if (as.length !== bs.length) return as.length - bs.length;
    if (as !== bs) return as < bs ? -1 : 1;
    return a < b ? -1 : 1;
  }
  if (an !== bn) return an ? -1 : 1;
  return a < b ? -1 : 1;
}

/** Order of a user's sequence: by timestamp, then item id ({@link compareIds}). */
export function compareInteractions(x: Interaction, y: Interaction): number {
  return x.at - y.at || compareIds(x.item, y.item);
}

function readText(file: string, what: string, encoding: BufferEncoding = 'utf8'): string {
  if (!existsSync(file)) throw new DatasetError(`${what}: missing file ${file}`);
  return readFileSync(file).toString(encoding);
}

function requireDir(dir: string, what: string): string {
  const abs = resolve(dir);
  if (!existsSync(abs) || !statSync(abs).isDirectory()) {
    throw new DatasetError(`${what}: data directory not found: ${dir}`);
  }
  return abs;
}

/** Lines without their `\r`, 1-based line numbers, blank lines skipped. */
function* lines(text: string): Generator<[line: string, lineNo: number]> {
  const all = text.split('\n');
  for (let i = 0; i < all.length; i++) {
    const line = all[i].replace(/\r$/, '');
    if (line.trim() === '') continue;
    yield [line, i + 1];
  }
}

function sortSequences(sequences: Map<string, Interaction[]>): void {
  for (const seq of sequences.values()) seq.sort(compareInteractions);
}

/**
 * k-core filter repeated until stable: drops users and items with fewer than `k`
 * interactions (rows, repeats included) until none is left to drop. Returns a new dataset.
 * With `pruneCatalog` (MovieLens) the catalog becomes the items that survive; otherwise the
 * catalog is kept whole and only the sequences are filtered. `k <= 0` is a no-op.
 */
export function kcore(dataset: Dataset, k: number, opts: { pruneCatalog?: boolean } = {}): Dataset {
  if (!Number.isInteger(k) || k < 0) throw new RangeError(`kcore: k must be a non-negative integer, got ${k}`);
  if (k === 0) return dataset;
  let sequences = new Map<string, Interaction[]>();
  for (const [u, seq] of dataset.sequences) sequences.set(u, seq.slice());
  for (;;) {
    const itemCount = new Map<string, number>();
    for (const seq of sequences.values()) {
      for (const x of seq) itemCount.set(x.item, (itemCount.get(x.item) ?? 0) + 1);
    }
    let changed = false;
    const next = new Map<string, Interaction[]>();
    for (const [u, seq] of sequences) {
      const kept = seq.filter((x) => (itemCount.get(x.item) ?? 0) >= k);
      if (kept.length !== seq.length) changed = true;
      if (kept.length >= k) next.set(u, kept);
      else changed = true;
    }
    sequences = next;
    if (!changed) break;
  }
  let items = dataset.items;
  if (opts.pruneCatalog) {
    const alive = new Set<string>();
    for (const seq of sequences.values()) for (const x of seq) alive.add(x.item);
    items = new Map([...dataset.items].filter(([id]) => alive.has(id)));
  }
  return { ...dataset, items, sequences };
}

// ---------------------------------------------------------------------------------------
// MovieLens-100K

/**
 * Reads the raw ML-100K folder: `u.data` (user, item, rating, unix seconds; every rating is
 * an interaction with action `rate`, `at` = seconds × 1000), `u.item` (Latin-1; title →
 * `title`, genre flags → `categories` named by `u.genre`, release date → `description`).
 * Applies the k-core (default 5) and prunes the catalog to the surviving items.
 */
export function loadMovieLens(dir: string, opts: LoadOptions = {}): Dataset {
  const root = requireDir(dir, 'movielens');
  const genreFile = join(root, 'u.genre');
  const genres: string[] = [];
  for (const [line, no] of lines(readText(genreFile, 'movielens', 'latin1'))) {
    const parts = line.split('|');
    const index = Number(parts[1]);
    if (parts.length !== 2 || !Number.isInteger(index) || index < 0) {
      throw new DatasetError(`${genreFile}:${no}: expected "name|index", got ${JSON.stringify(line)}`);
    }
    genres[index] = parts[0];
  }
  if (genres.length === 0 || genres.some((g) => g === undefined)) {
    throw new DatasetError(`${genreFile}: genre indices must run 0..n-1 without gaps`);
  }

  const itemFile = join(root, 'u.item');
  const items = new Map<string, Item>();
  // why: u.item is ISO-8859-1 ("Misérables"); decoding it as UTF-8 would corrupt titles.
  for (const [line, no] of lines(readText(itemFile, 'movielens', 'latin1'))) {
    const f = line.split('|');
    if (f.length !== 5 + genres.length) {
      throw new DatasetError(`${itemFile}:${no}: expected ${5 + genres.length} '|'-separated fields, got ${f.length}`);
    }
    const id = f[0];
    if (!DIGITS.test(id)) throw new DatasetError(`${itemFile}:${no}: item id is not a number: ${JSON.stringify(id)}`);
    if (items.has(id)) throw new DatasetError(`${itemFile}:${no}: duplicate item id ${id}`);
    const categories: string[] = [];
    for (let g = 0; g < genres.length; g++) {
      const flag = f[5 + g];
      if (flag !== '0' && flag !== '1') {
        throw new DatasetError(`${itemFile}:${no}: genre flag ${g} must be 0 or 1, got ${JSON.stringify(flag)}`);
      }
      if (flag === '1') categories.push(genres[g]);
    }
    const item: Item = { id, title: f[1], categories };
    if (f[2]) item.description = `Released ${f[2]}.`;
    items.set(id, item);
  }

  const dataFile = join(root, 'u.data');
  const sequences = new Map<string, Interaction[]>();
  for (const [line, no] of lines(readText(dataFile, 'movielens'))) {
    const f = line.split('\t');
    if (f.length !== 4) {
      throw new DatasetError(`${dataFile}:${no}: expected 4 tab-separated fields (user, item, rating, time), got ${f.length}`);
    }
    const [user, item, rating, time] = f;
    if (!DIGITS.test(user) || !DIGITS.test(item) || !Number.isFinite(Number(rating)) || !DIGITS.test(time)) {
      throw new DatasetError(`${dataFile}:${no}: malformed line ${JSON.stringify(line)}`);
    }
    if (!items.has(item)) throw new DatasetError(`${dataFile}:${no}: item ${item} is not in u.item`);
    let seq = sequences.get(user);
    if (!seq) sequences.set(user, (seq = []));
    seq.push({ item, at: Number(time) * 1000, action: 'rate' });
  }
  sortSequences(sequences);
  const dataset: Dataset = { name: basename(root), format: 'movielens', items, sequences, warnings: [] };
  return kcore(dataset, opts.kcore ?? DEFAULT_KCORE.movielens, { pruneCatalog: true });
}

// ---------------------------------------------------------------------------------------
// AgentCF / RecBole atomic files

/** Columns of a RecBole atomic file header (`name:type` tab-separated) → index by name. */
function parseHeader(line: string, file: string): Map<string, number> {
  const cols = new Map<string, number>();
  line.split('\t').forEach((col, i) => {
    const m = /^([^:]+):([a-z_]+)$/.exec(col.trim());
    if (!m) throw new DatasetError(`${file}:1: header column ${JSON.stringify(col)} is not "name:type"`);
    cols.set(m[1], i);
  });
  return cols;
}

function column(cols: Map<string, number>, names: string[], file: string): number {
  for (const n of names) {
    const i = cols.get(n);
    if (i !== undefined) return i;
  }
  throw new DatasetError(`${file}:1: header has no ${names.map((n) => `"${n}"`).join(' or ')} column`);
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', deg: '°' };

/** Decodes the HTML entities scraped Amazon titles carry (`&amp;`, `&#39;`, `&deg;`). */
function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (all, e: string) => {
    if (e[0] === '#') {
      const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return Number.isFinite(code) && code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : all;
    }
    return ENTITIES[e.toLowerCase()] ?? all;
  });
}

/**
 * Reads an AgentCF/RecBole folder named after the dataset: `<name>.train.inter`,
 * `<name>.valid.inter`, `<name>.test.inter` (header `user_id:token item_id_list:token_seq
 * item_id:token`), `<name>.random` (candidate pools) and an item file (`<name>.item`, else
 * the folder's only `*.item`, e.g. AgentCF's `CDs.item` inside `CDs-100-user-dense/`).
 *
 * Sequences: rows are read in file order (train, valid, test); each row is a history →
 * next-item step and either extends the user's sequence (its history equals the sequence,
 * or a window of its last items) or repeats a known step. The files carry no timestamps:
 * `at` is the position in the sequence (0, 1, 2 … ms), so the (timestamp, id) sort keeps
 * file order. Default k-core 0; the catalog is every item of the item file.
 */
export function loadAgentCF(dir: string, opts: LoadOptions = {}): Dataset {
  const root = requireDir(dir, 'agentcf');
  let name = basename(root);
  const files = readdirSync(root);
  if (!files.includes(`${name}.test.inter`)) {
    const tests = files.filter((f) => f.endsWith('.test.inter'));
    if (tests.length !== 1) {
      throw new DatasetError(`agentcf: missing file ${join(root, `${name}.test.inter`)}`);
    }
    name = tests[0].slice(0, -'.test.inter'.length);
  }
  const warnings: string[] = [];

  // Items.
  const items = new Map<string, Item>();
  let itemFile: string | undefined = files.includes(`${name}.item`) ? `${name}.item` : undefined;
  if (!itemFile) {
    const any = files.filter((f) => f.endsWith('.item'));
    if (any.length === 1) itemFile = any[0];
    else if (any.length > 1) throw new DatasetError(`agentcf: several *.item files in ${root} and none named ${name}.item`);
  }
  if (itemFile) {
    const path = join(root, itemFile);
    let cols: Map<string, number> | undefined;
    let idCol = 0;
    let titleCol = -1;
    let catCol = -1;
    let descCol = -1;
    for (const [line, no] of lines(readText(path, 'agentcf'))) {
      if (!cols) {
        cols = parseHeader(line, path);
        idCol = column(cols, ['item_id'], path);
        titleCol = cols.get('title') ?? cols.get('movie_title') ?? -1;
        catCol = cols.get('category') ?? cols.get('categories') ?? cols.get('genre') ?? -1;
        descCol = cols.get('description') ?? -1;
        continue;
      }
      const f = line.split('\t');
      const id = f[idCol]?.trim();
      if (!id) throw new DatasetError(`${path}:${no}: empty item id`);
      const title = titleCol >= 0 ? decodeEntities(f[titleCol] ?? '').trim() : '';
      const item: Item = { id, title: title || id };
      if (catCol >= 0 && f[catCol]) {
        item.categories = f[catCol]
          .split(';')
          .map((c) => decodeEntities(c).trim())
          .filter(Boolean);
      }
      if (descCol >= 0 && f[descCol]) item.description = decodeEntities(f[descCol]).trim();
      items.set(id, item);
    }
    if (!cols) throw new DatasetError(`${path}: empty file (no header line)`);
  } else {
    warnings.push(`agentcf: no item file in ${root}; items carry their ids as titles`);
  }

  // Sequences, reconstructed from the step rows.
  const seqIds = new Map<string, string[]>();
  for (const part of ['train', 'valid', 'test']) {
    const path = join(root, `${name}.${part}.inter`);
    if (part !== 'test' && !existsSync(path)) {
      warnings.push(`agentcf: no ${basename(path)}`);
      continue;
    }
    let cols: Map<string, number> | undefined;
    let uCol = 0;
    let hCol = 1;
    let iCol = 2;
    for (const [line, no] of lines(readText(path, 'agentcf'))) {
      if (!cols) {
        cols = parseHeader(line, path);
        uCol = column(cols, ['user_id'], path);
        hCol = column(cols, ['item_id_list'], path);
        iCol = column(cols, ['item_id'], path);
        continue;
      }
      const f = line.split('\t');
      const user = f[uCol]?.trim();
      const target = f[iCol]?.trim();
      if (!user || !target || f[hCol] === undefined) {
        throw new DatasetError(`${path}:${no}: expected user_id, item_id_list and item_id columns`);
      }
      const history = f[hCol].trim() === '' ? [] : f[hCol].trim().split(/\s+/);
      const seq = seqIds.get(user) ?? [];
      const step = [...history, target];
      if (seq.length === 0) {
        seqIds.set(user, step);
      } else if (startsWithSeq(step, seq)) {
        seqIds.set(user, step);
      } else if (endsWithSeq(seq, history)) {
        seq.push(target);
        seqIds.set(user, seq);
      } else if (!containsStep(seq, history, target)) {
        throw new DatasetError(`${path}:${no}: history of user ${user} does not continue their earlier rows`);
      }
    }
    if (!cols) throw new DatasetError(`${path}: empty file (no header line)`);
  }

  let unknown = 0;
  const sequences = new Map<string, Interaction[]>();
  for (const [user, ids] of seqIds) {
    for (const id of ids) {
      if (!items.has(id)) {
        items.set(id, { id, title: id });
        unknown++;
      }
    }
    sequences.set(
      user,
      ids.map((item, i) => ({ item, at: i })),
    );
  }
  if (unknown > 0 && itemFile) warnings.push(`agentcf: ${unknown} item ids of the .inter files have no row in ${itemFile}; kept with their ids as titles`);

  // Candidate pools.
  const poolFile = join(root, `${name}.random`);
  const candidatePools = new Map<string, string[]>();
  for (const [line, no] of lines(readText(poolFile, 'agentcf'))) {
    const tab = line.indexOf('\t');
    if (tab <= 0) throw new DatasetError(`${poolFile}:${no}: expected "user_id<TAB>item ids"`);
    const pool = line
      .slice(tab + 1)
      .trim()
      .split(/\s+/)
      .filter(Boolean);
    for (const id of pool) if (!items.has(id)) items.set(id, { id, title: id });
    candidatePools.set(line.slice(0, tab).trim(), pool);
  }

  const dataset: Dataset = { name, format: 'agentcf', items, sequences, candidatePools, warnings };
  return kcore(dataset, opts.kcore ?? DEFAULT_KCORE.agentcf);
}

function startsWithSeq(long: string[], prefix: string[]): boolean {
  if (prefix.length > long.length) return false;
  for (let i = 0; i < prefix.length; i++) if (long[i] !== prefix[i]) return false;
  return true;
}

function endsWithSeq(long: string[], suffix: string[]): boolean {
  if (suffix.length > long.length) return false;
  const off = long.length - suffix.length;
  for (let i = 0; i < suffix.length; i++) if (long[off + i] !== suffix[i]) return false;
  return true;
}

/** Whether `history → target` is a step already inside `seq` (a repeated row). */
function containsStep(seq: string[], history: string[], target: string): boolean {
  for (let end = history.length; end < seq.length; end++) {
    if (seq[end] !== target) continue;
    let ok = true;
    for (let i = 0; i < history.length && ok; i++) ok = seq[end - history.length + i] === history[i];
    if (ok) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------
// JSON lines (a shop's export)

function parseJsonLine(line: string, path: string, no: number): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch (e) {
    throw new DatasetError(`${path}:${no}: invalid JSON (${(e as Error).message})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new DatasetError(`${path}:${no}: expected a JSON object`);
  return v as Record<string, unknown>;
}

function idField(o: Record<string, unknown>, key: string, path: string, no: number): string {
  const v = o[key];
  if ((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v))) return String(v);
  throw new DatasetError(`${path}:${no}: "${key}" must be a non-empty string or a number`);
}

/**
 * Reads `items.jsonl` (`{id, title, categories?, description?}`) and `interactions.jsonl`
 * (`{user, item, at, action?}`; `at` epoch ms or an ISO date string; ids may be numbers).
 * Interactions whose item is not in items.jsonl are skipped and counted in `warnings`.
 * Every interaction counts, whatever its action. Default k-core 0; the catalog is every item
 * of items.jsonl.
 */
export function loadJsonl(dir: string, opts: LoadOptions = {}): Dataset {
  const root = requireDir(dir, 'jsonl');
  const itemsPath = join(root, 'items.jsonl');
  const items = new Map<string, Item>();
  for (const [line, no] of lines(readText(itemsPath, 'jsonl'))) {
    const o = parseJsonLine(line, itemsPath, no);
    const id = idField(o, 'id', itemsPath, no);
    if (items.has(id)) throw new DatasetError(`${itemsPath}:${no}: duplicate item id ${JSON.stringify(id)}`);
    if (typeof o.title !== 'string') throw new DatasetError(`${itemsPath}:${no}: "title" must be a string`);
    const item: Item = { id, title: o.title };
    if (o.categories !== undefined) {
      if (!Array.isArray(o.categories) || o.categories.some((c) => typeof c !== 'string')) {
        throw new DatasetError(`${itemsPath}:${no}: "categories" must be an array of strings`);
      }
      item.categories = o.categories as string[];
    }
    if (o.description !== undefined) {
      if (typeof o.description !== 'string') throw new DatasetError(`${itemsPath}:${no}: "description" must be a string`);
      item.description = o.description;
    }
    items.set(id, item);
  }

  const interPath = join(root, 'interactions.jsonl');
  const sequences = new Map<string, Interaction[]>();
  let skipped = 0;
  for (const [line, no] of lines(readText(interPath, 'jsonl'))) {
    const o = parseJsonLine(line, interPath, no);
    const user = idField(o, 'user', interPath, no);
    const item = idField(o, 'item', interPath, no);
    const at = typeof o.at === 'number' ? o.at : typeof o.at === 'string' ? Date.parse(o.at) : NaN;
    if (!Number.isFinite(at)) throw new DatasetError(`${interPath}:${no}: "at" must be epoch milliseconds or an ISO date`);
    const x: Interaction = { item, at };
    if (o.action !== undefined) {
      if (typeof o.action !== 'string' || !(o.action in ACTION_WEIGHTS)) {
        throw new DatasetError(`${interPath}:${no}: unknown action ${JSON.stringify(o.action)}`);
      }
      x.action = o.action as Action;
    }
    if (!items.has(item)) {
      skipped++;
      continue;
    }
    let seq = sequences.get(user);
    if (!seq) sequences.set(user, (seq = []));
    seq.push(x);
  }
  sortSequences(sequences);
  const warnings: string[] = [];
  if (skipped > 0) warnings.push(`jsonl: skipped ${skipped} interactions whose item is not in items.jsonl`);
  const dataset: Dataset = { name: basename(root), format: 'jsonl', items, sequences, warnings };
  return kcore(dataset, opts.kcore ?? DEFAULT_KCORE.jsonl);
}

/** Loads `dir` in the given format. */
export function loadDataset(format: DatasetFormat, dir: string, opts: LoadOptions = {}): Dataset {
  switch (format) {
    case 'movielens':
      return loadMovieLens(dir, opts);
    case 'agentcf':
      return loadAgentCF(dir, opts);
    case 'jsonl':
      return loadJsonl(dir, opts);
    case 'sequences':
      return loadSequences(dir, opts);
    default:
      throw new DatasetError(`unknown format ${JSON.stringify(format)} (movielens, agentcf, jsonl or sequences)`);
  }
}

// ---------------------------------------------------------------------------------------
// Sequences (`user_sequence.txt`: the P5 / S3-Rec layout of the Amazon 5-core sets)

/**
 * `DIR/user_sequence.txt`: one line per user, `user item item …` separated by spaces or tabs,
 * oldest first; ids only (no titles, categories or timestamps). The order is all there is, so
 * a user's k-th interaction gets `at = k` (protocol `temporal`, which needs real time, refuses
 * such a dataset: {@link Dataset.ordinalTime}). The catalog is every item of the file; an item
 * is its own title. A user id seen twice, or a line with no item, is an error.
 */
export function loadSequences(dir: string, opts: LoadOptions = {}): Dataset {
  const root = requireDir(dir, 'sequences');
  const file = join(root, 'user_sequence.txt');
  const text = readText(file, 'the sequences file');
  const items = new Map<string, Item>();
  const sequences = new Map<string, Interaction[]>();
  let no = 0;
  for (const raw of text.split(/\r?\n/)) {
    no++;
    const line = raw.trim();
    if (!line) continue;
    const [user, ...ids] = line.split(/\s+/);
    if (ids.length === 0) throw new DatasetError(`${file}:${no}: user ${user} has no item (expected "user item item ...")`);
    if (sequences.has(user)) throw new DatasetError(`${file}:${no}: user ${user} appears twice`);
    sequences.set(
      user,
      ids.map((item, k) => ({ item, at: k, action: 'purchase' as const })),
    );
    for (const id of ids) if (!items.has(id)) items.set(id, { id, title: id });
  }
  if (sequences.size === 0) throw new DatasetError(`${file}: no user sequence`);
  const dataset: Dataset = { name: basename(root), format: 'sequences', items, sequences, warnings: [], ordinalTime: true };
  const k = opts.kcore ?? DEFAULT_KCORE.sequences;
  return k > 0 ? kcore(dataset, k, { pruneCatalog: true }) : dataset;
}
