/**
 * The shop part of a catalog vector file, as `atomem-vectors` publishes it (`src/vectors-cli.ts`):
 * either trained here from the shop's order log (`--log`: the shop model of `train.ts` and a
 * SASRec sequence model trained by `sasrec/budgeted.ts` — a time budget, sampled softmax, lazy
 * updates of the embedding rows a step touches, early stopping on held-out last items, as
 * `atomem-shop --sasrec` trains it) or read from a file `atomem-shop` wrote
 * (`--shop-model`: a shop model v1 file, or a v2 catalog file's shop part and SASRec).
 *
 * The log is JSON Lines `{ user, item, at, action? }` (`at` epoch ms or an ISO date; ids may be
 * numbers), read streamed into columns (`log-reader.ts`' {@link LogColumns}: a file of any size;
 * gunzipped when its name ends in `.gz`); rows of items not in the catalog are skipped and counted. `epsilon` makes the shop
 * model user-level (ε, δ)-DP; SASRec has no DP training, so under `epsilon` it is left out.
 * Bad input is a {@link LogInputError} naming the file and line (the CLI exits with code 2).
 */
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';
import cliProgress from 'cli-progress';
import { ACTION_WEIGHTS, type Action, type Item } from '../core/types.js';
import { catalogFileVersion, decodeCatalogFile, type EncodeCatalogFileInput } from '../protocol/catalog-vectors-v2.js';
import { decodeShopModel } from '../protocol/shop-model-v1.js';
import { deserializeSasrec, type SasrecWeights } from '../protocol/sasrec-v1.js';
import { LogColumns, LogInputError } from './log-reader.js';
import type { ShopInteraction } from './train.js';

/** The shop part a catalog vector file carries (shop model, optional SASRec, info). */
export type PublishedShopPart = NonNullable<EncodeCatalogFileInput['shop']>;

/** Upper bound on SASRec epochs by default (the trainer's validated default, `SASREC_DEFAULTS.epochs`); early stopping usually ends sooner. */
export const DEFAULT_SASREC_EPOCHS = 80;
/** Wall-clock seconds of SASRec's training by default (as `atomem-shop --sasrec-budget`). */
export const DEFAULT_SASREC_BUDGET = 600;
/** Seed of SASRec's initialisation, sampling and dropout by default (the trainer's). */
export const DEFAULT_SASREC_SEED = 2026;

/** How to train the shop part from a log (the `atomem-vectors` flags of the same names). */
export interface ShopTrainOptions {
  /** The order log (JSON Lines). */
  log: string;
  /** Only rows before this ISO date or epoch ms. */
  until?: string;
  /** User-level (ε, δ)-DP of the shop model; SASRec is then left out. */
  epsilon?: number;
  delta: number;
  /** Train SASRec too (`sasrec/budgeted.ts`: within `sasrecBudget` seconds, at most `sasrecEpochs` epochs, early stopping on held-out last items). */
  sequence: boolean;
  sasrecEpochs: number;
  sasrecBudget: number;
  seed: number;
  /** Progress lines and bars on `stderr`. */
  progress: boolean;
}

/** What `v` is, for error messages (`a string`, `an array`, …). */
function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'string') return v === '' ? 'an empty string' : 'a string';
  return typeof v === 'object' ? 'an object' : typeof v;
}

/**
 * The shop part of `--shop-model`: an `atomem-shop` file (shop model v1) or a v2 catalog file's
 * shop model and SASRec. `sasrecPath`: the SASRec file `atomem-shop --sasrec` wrote beside a
 * shop model v1 file (its item i + 1 is the shop model's item i).
 */
export async function readShopPart(path: string, sasrecPath?: string): Promise<PublishedShopPart> {
  const part = await readShopPartFile(path);
  if (sasrecPath === undefined) return part;
  if (part.sasrec) throw new LogInputError(`--sasrec ${sasrecPath}: --shop-model ${path} carries a SASRec model already`);
  let weights: SasrecWeights;
  try {
    weights = deserializeSasrec(new Uint8Array(await readFile(sasrecPath)));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new LogInputError(`--sasrec ${sasrecPath}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  const n = part.model.items.length;
  if (weights.numItems !== n)
    throw new LogInputError(`--sasrec ${sasrecPath}: a model of ${weights.numItems} items, the shop model has ${n} (not the SASRec file of this shop model)`);
  return { ...part, sasrec: { weights, items: part.model.items }, info: { ...part.info, sequence: 'sasrec', sasrecModel: basename(sasrecPath) } };
}

async function readShopPartFile(path: string): Promise<PublishedShopPart> {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await readFile(path));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new LogInputError(`cannot read --shop-model ${path}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  try {
    if (bytes.length >= 4 && String.fromCharCode(...bytes.subarray(0, 4)) === 'ATSM') {
      const model = decodeShopModel(bytes);
      return { model, info: { shopModel: basename(path), ...model.info } };
    }
    if (catalogFileVersion(bytes) !== 2) throw new Error('expected a shop model (atomem-shop) or a format v2 catalog vector file');
    const file = decodeCatalogFile(bytes);
    if (!file.shop) throw new Error('this catalog vector file has no shop model');
    const s = file.shop;
    return {
      model: s.model,
      ...(s.sasrec ? { sasrec: { weights: s.sasrec.weights, items: s.sasrec.items } } : {}),
      info: { ...(file.shopInfo ?? {}), shopModel: basename(path) },
    };
  } catch (e) {
    throw new LogInputError(`--shop-model ${path}: ${(e as Error).message}`);
  }
}

/** The order log as read by {@link readInteractionLog}. */
interface InteractionLog {
  /** Rows of catalog items before `until`, in file order, as columns (item table: the catalog). */
  log: LogColumns;
  /** Rows skipped because their item is not in the catalog. */
  unknownItems: number;
  /** Rows skipped because they are not before `until`. */
  afterUntil: number;
  users: number;
}

/**
 * Read an order log, streamed (any size; gunzipped when the name ends in `.gz`): JSON Lines
 * `{ user, item, at, action? }` (`at` epoch ms or an ISO date, `user` and `item` non-empty
 * strings or numbers, `action` one of {@link ACTION_WEIGHTS}' keys) into columns. Rows of items
 * not in `catalog` and rows at or after `until` are skipped and counted; a malformed line is a
 * {@link LogInputError} naming the line. `onBytes`: bytes of the file read so far, and its size.
 */
async function readInteractionLog(
  path: string,
  catalog: readonly string[],
  until?: number,
  onBytes?: (read: number, total: number) => void,
): Promise<InteractionLog> {
  let total: number;
  try {
    const st = await stat(path);
    if (st.isDirectory()) throw Object.assign(new Error('it is a directory'), { code: 'EISDIR' });
    total = st.size;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new LogInputError(
      `cannot read --log ${path}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (e as Error).message}`,
    );
  }
  const log = new LogColumns(catalog, true);
  let unknownItems = 0;
  let afterUntil = 0;
  const idOf = (o: Record<string, unknown>, key: string, at: string): string => {
    const v = o[key];
    if ((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v))) return String(v);
    throw new LogInputError(`${at}: "${key}" is ${v === undefined ? 'missing' : describe(v)}, expected a non-empty string or a number`);
  };
  const file = createReadStream(path, { highWaterMark: 1 << 20 });
  let read = 0;
  file.on('data', (chunk) => {
    read += chunk.length;
    onBytes?.(read, total);
  });
  const text = path.endsWith('.gz') ? file.pipe(createGunzip()) : file;
  if (text !== file) file.on('error', (e) => text.destroy(e));
  const lines = createInterface({ input: text, crlfDelay: Infinity });
  let no = 0;
  try {
    for await (let raw of lines) {
      no++;
      if (no === 1 && raw.charCodeAt(0) === 0xfeff) raw = raw.slice(1); // why: editors on Windows add a BOM
      if (raw.trim() === '') continue;
      const at = `${path}: line ${no}`;
      let o: unknown;
      try {
        o = JSON.parse(raw);
      } catch (e) {
        throw new LogInputError(`${at} is not valid JSON (${(e as Error).message})`);
      }
      if (!o || typeof o !== 'object' || Array.isArray(o)) throw new LogInputError(`${at} is ${describe(o)}, expected an object { user, item, at, action? }`);
      const row = o as Record<string, unknown>;
      const user = idOf(row, 'user', at);
      const item = idOf(row, 'item', at);
      const when = typeof row.at === 'number' ? row.at : typeof row.at === 'string' ? Date.parse(row.at) : Number.NaN;
      if (!Number.isFinite(when)) throw new LogInputError(`${at}: "at" must be epoch milliseconds or an ISO date, got ${JSON.stringify(row.at)}`);
      if (row.action !== undefined && (typeof row.action !== 'string' || !Object.hasOwn(ACTION_WEIGHTS, row.action))) {
        throw new LogInputError(`${at}: unknown action ${JSON.stringify(row.action)} (one of ${Object.keys(ACTION_WEIGHTS).join(', ')})`);
      }
      if (log.itemOf(item) < 0) {
        unknownItems++;
        continue;
      }
      if (until !== undefined && when >= until) {
        afterUntil++;
        continue;
      }
      log.add(user, item, when, row.action as Action | undefined);
    }
  } catch (e) {
    if (e instanceof LogInputError) throw e;
    throw new LogInputError(`cannot read --log ${path}: ${(e as Error).message}`);
  } finally {
    lines.close();
    file.destroy();
  }
  if (log.length === 0)
    throw new LogInputError(
      `--log ${path}: no usable rows (${unknownItems} of items not in the catalog${until !== undefined ? `, ${afterUntil} not before --until` : ''})`,
    );
  return { log, unknownItems, afterUntil, users: log.users.length };
}

/**
 * SASRec's training sequences from a log: per user, the positive interactions (action weight
 * > 0: what the device's encoder reads too) by time, as indices 1..n of `catalog` order.
 */
export function sasrecSequences(log: readonly ShopInteraction[], catalog: readonly string[]): Int32Array[] {
  const index = new Map(catalog.map((id, i) => [id, i + 1]));
  const byUser = new Map<string, ShopInteraction[]>();
  for (const r of log) {
    if (ACTION_WEIGHTS[r.action ?? 'click'] <= 0) continue;
    let seq = byUser.get(r.user);
    if (!seq) byUser.set(r.user, (seq = []));
    seq.push(r);
  }
  return [...byUser.values()].map((seq) =>
    Int32Array.from(
      seq.sort((a, b) => a.at - b.at),
      (r) => index.get(r.item)!,
    ),
  );
}

/** Write a progress line to stderr at most every second per stage (and at a stage's start and end). */
function stageReporter(stderr: { write(s: string): unknown }, prefix: string): (stage: string, done: number, total: number) => void {
  let last = '';
  let lastAt = 0;
  return (stage, done, total) => {
    const now = performance.now();
    if (stage === last && done < total && now - lastAt < 1000) return;
    last = stage;
    lastAt = now;
    stderr.write(`${prefix}: ${stage} ${total > 1 ? `${done}/${total}` : done >= total ? 'done' : ''}\n`);
  };
}

/** Train the shop model (and SASRec) on `o.log`; returns the file's shop part and a summary line. */
export async function trainShopPart(
  o: ShopTrainOptions,
  items: readonly Item[],
  vectors: readonly Float32Array[],
  embedder: { id: string; dim: number },
  io: { stderr: { write(s: string): unknown } },
): Promise<{ shop: PublishedShopPart; summary: string }> {
  let until: number | undefined;
  if (o.until !== undefined) {
    until = /^[0-9]+$/.test(o.until.trim()) ? Number(o.until) : Date.parse(o.until);
    if (!Number.isFinite(until)) throw new LogInputError(`--until ${o.until} is neither an ISO date nor epoch milliseconds`);
  }
  const catalog = items.map((it) => it.id);
  const report = o.progress ? stageReporter(io.stderr, 'shop model') : undefined;
  const read = await readInteractionLog(o.log!, catalog, until, report ? (done, total) => report('read log', done, total) : undefined);
  const { trainShopModel } = await import('./train.js');
  const t0 = performance.now();
  const model = trainShopModel(read.log, {
    catalog,
    content: { embedder: embedder.id, vectors: new Map(items.map((it, i) => [it.id, vectors[i]])) },
    ...(o.epsilon !== undefined ? { epsilon: o.epsilon, delta: o.delta } : {}),
    ...(until !== undefined ? { until } : {}),
    onProgress: report,
  });
  const shopSeconds = (performance.now() - t0) / 1000;
  let sasrec: { weights: SasrecWeights; items: string[] } | undefined;
  let sasrecRun: Record<string, unknown> | undefined;
  let sequenceNote: string;
  if (!o.sequence) sequenceNote = 'no SASRec (--no-sequence)';
  else if (o.epsilon !== undefined) sequenceNote = 'SASRec left out: its training is not differentially private (--epsilon)';
  else {
    const { sequencesFromColumns } = await import('./sasrec/budgeted.js');
    const seqs = sequencesFromColumns(read.log.columns(), read.log.users.length, until);
    if (!seqs.some((s) => s.length >= 2)) sequenceNote = 'SASRec left out: no user has two positive interactions';
    else {
      const { trainSasrecBudgeted } = await import('./sasrec/budgeted.js');
      let bar: cliProgress.SingleBar | undefined;
      if (o.progress) {
        bar = new cliProgress.SingleBar(
          {
            format: 'SASRec    |{bar}| {percentage}% step {step}, loss {loss}, validation NDCG@10 {ndcg} {duration_formatted} (budget {budget} s)',
            stream: io.stderr as NodeJS.WritableStream,
            hideCursor: true,
            clearOnComplete: false,
            noTTYOutput: true,
            notTTYSchedule: 10_000,
          },
          cliProgress.Presets.shades_classic,
        );
        bar.start(1000, 0, { step: 0, loss: '-', ndcg: '-', budget: o.sasrecBudget });
      }
      try {
        const r = await trainSasrecBudgeted(seqs, catalog.length, {
          budgetSeconds: o.sasrecBudget,
          maxEpochs: o.sasrecEpochs,
          seed: o.seed,
          onProgress: (p) =>
            void bar?.update(Math.round(1000 * p.fraction), {
              step: p.step,
              // why only when finite: a report right after another one has no new step's loss; the last one stays shown
              ...(Number.isFinite(p.loss) ? { loss: p.loss.toFixed(4) } : {}),
              ...(p.validation ? { ndcg: `${p.validation.ndcg10.toFixed(4)} (best ${p.validation.best.toFixed(4)} at step ${p.validation.bestStep})` } : {}),
            }),
        });
        bar?.update(1000);
        sasrec = { weights: r.weights, items: catalog };
        const best = r.validation.find((v) => v.step === r.bestStep)?.ndcg10;
        sasrecRun = {
          steps: r.steps,
          seconds: r.seconds,
          stoppedBy: r.stoppedBy,
          bestStep: r.bestStep,
          validationUsers: r.validationUsers,
          validationNdcg10: best ?? null,
        };
        sequenceNote =
          `SASRec ${r.steps} steps in ${r.seconds.toFixed(1)} s (${r.threads} threads, stopped by ${r.stoppedBy === 'early-stopping' ? 'early stopping' : r.stoppedBy === 'budget' ? `the ${o.sasrecBudget} s budget` : `the ${o.sasrecEpochs}-epoch bound`}` +
          `${best !== undefined ? `; validation NDCG@10 ${best.toFixed(4)} on ${r.validationUsers} users, weights of step ${r.bestStep}` : ''})`;
      } finally {
        bar?.stop();
      }
    }
  }
  const info: Record<string, unknown> = {
    logRows: read.log.length,
    users: read.users,
    skippedUnknownItems: read.unknownItems,
    ...(until !== undefined ? { until: new Date(until).toISOString(), skippedAfterUntil: read.afterUntil } : {}),
    privacy: model.privacy ? { epsilon: model.privacy.epsilon, delta: model.privacy.delta } : null,
    sequence: sasrec ? 'sasrec' : null,
    ...(sasrecRun ? { sasrec: sasrecRun } : {}),
    sequenceNote,
  };
  const summary =
    `shop model from ${read.log.length} log rows of ${read.users} users${read.unknownItems ? ` (${read.unknownItems} rows of unknown items skipped)` : ''}${until !== undefined ? ` before ${new Date(until).toISOString()} (${read.afterUntil} later rows skipped)` : ''}, ` +
    `${model.privacy ? `(ε ${model.privacy.epsilon}, δ ${model.privacy.delta})-DP` : 'no DP'}, ${shopSeconds.toFixed(1)} s; ${sequenceNote}`;
  return { shop: { model, ...(sasrec ? { sasrec } : {}), info }, summary };
}
