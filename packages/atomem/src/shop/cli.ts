#!/usr/bin/env node
/**
 * `atomem-shop`: the shop's server builds the public shop model file from its order log.
 *
 *   npx atomem-shop --interactions interactions.jsonl --items items.jsonl --out shop-model.bin
 *       [--content catalog-vectors.bin] [--epsilon 4] [--delta 1e-6] [--until 2026-01-01]
 *       [--ease-items 10000] [--dim 32]
 *
 * The bin of the published package (`dist/node/shop-cli.js`, vite.node.config.ts); in the
 * repository `npm run shop -- …`. It needs no optional peer (no embedding: `--content` reads
 * the vectors `atomem-vectors` wrote).
 *
 * `interactions.jsonl`: `{user, item, at, action?}` per line (`at` epoch ms or an ISO date; the
 * export format of EVAL.md). `items.jsonl`: `{id, …}` per line, the public catalog (items without
 * interactions still get a vector when `--content` gives theirs). `--content`: a catalog vector
 * file from `atomem-vectors` (format v1 or v2): the content vectors of the hybrid item vectors.
 * `--epsilon`: user-level (ε, δ)-DP for the whole file (see `train.ts`); default none.
 *
 * One summary line on stdout. Exit codes: 0 ok, 2 bad usage or input, 1 anything else.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { ACTION_WEIGHTS, type Action } from '../core/types.js';
import { decodeCatalogFile } from '../protocol/catalog-vectors-v2.js';
import { encodeShopModel, shopModelSizes } from '../protocol/shop-model-v1.js';
import { trainShopModel, type ShopInteraction, type TrainOptions } from './train.js';

/** A usage or input problem: exit code 2. */
export class ShopCliError extends Error {
  override name = 'ShopCliError';
}

function number(name: string, min: number): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min) throw new InvalidArgumentError(`${name} must be a number ≥ ${min}`);
    return n;
  };
}

function* jsonLines(text: string, path: string): Generator<[Record<string, unknown>, number]> {
  let no = 0;
  for (const line of text.split(/\r?\n/)) {
    no++;
    if (!line.trim()) continue;
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw new ShopCliError(`${path}:${no}: not JSON`);
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) throw new ShopCliError(`${path}:${no}: expected a JSON object`);
    yield [v as Record<string, unknown>, no];
  }
}

const id = (o: Record<string, unknown>, key: string, where: string): string => {
  const v = o[key];
  if ((typeof v === 'string' && v !== '') || (typeof v === 'number' && Number.isFinite(v))) return String(v);
  throw new ShopCliError(`${where}: "${key}" must be a non-empty string or a number`);
};

/** Runs the command; returns the exit code. */
export async function main(argv: string[], io: { stdout: (s: string) => void; stderr: (s: string) => void } = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) }): Promise<number> {
  const program = new Command()
    .name('atomem-shop')
    .description("Train the shop model from the shop's order log into a standalone shop model file (atomem/shop's decodeShopModel reads it).")
    .requiredOption('--interactions <file>', 'the order log, JSON Lines {user, item, at, action?}')
    .requiredOption('--items <file>', 'the catalog, JSON Lines {id, …}')
    .requiredOption('--out <file>', 'where to write the shop model file')
    .option('--content <file>', 'catalog vector file (atomem-vectors) for the hybrid item vectors')
    .option('--epsilon <x>', 'user-level DP budget ε (default: none)', number('--epsilon', 1e-9))
    .option('--delta <x>', 'DP δ', number('--delta', 0), 1e-6)
    .option('--until <date>', 'only log rows before this ISO date or epoch ms')
    .option('--ease-items <n>', 'EASE on the N most popular items', number('--ease-items', 1))
    .option('--dim <n>', 'collaborative vector dimensions', number('--dim', 0))
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  try {
    program.parse(argv, { from: 'user' });
    const o = program.opts<{ interactions: string; items: string; out: string; content?: string; epsilon?: number; delta: number; until?: string; easeItems?: number; dim?: number }>();
    const catalog: string[] = [];
    for (const [row, no] of jsonLines(await readFile(o.items, 'utf8'), o.items)) catalog.push(id(row, 'id', `${o.items}:${no}`));
    const known = new Set(catalog);
    const log: ShopInteraction[] = [];
    let skipped = 0;
    for (const [row, no] of jsonLines(await readFile(o.interactions, 'utf8'), o.interactions)) {
      const where = `${o.interactions}:${no}`;
      const at = typeof row.at === 'number' ? row.at : typeof row.at === 'string' ? Date.parse(row.at) : NaN;
      if (!Number.isFinite(at)) throw new ShopCliError(`${where}: "at" must be epoch milliseconds or an ISO date`);
      if (row.action !== undefined && (typeof row.action !== 'string' || !(row.action in ACTION_WEIGHTS))) throw new ShopCliError(`${where}: unknown action ${JSON.stringify(row.action)}`);
      const item = id(row, 'item', where);
      if (!known.has(item)) {
        skipped++;
        continue;
      }
      log.push({ user: id(row, 'user', where), item, at, ...(row.action ? { action: row.action as Action } : {}) });
    }
    const opts: TrainOptions = { catalog, delta: o.delta };
    if (o.epsilon !== undefined) opts.epsilon = o.epsilon;
    if (o.easeItems !== undefined) opts.easeItems = o.easeItems;
    if (o.dim !== undefined) opts.dim = o.dim;
    if (o.until !== undefined) {
      const t = /^[0-9]+$/.test(o.until) ? Number(o.until) : Date.parse(o.until);
      if (!Number.isFinite(t)) throw new ShopCliError(`--until: not a date: ${o.until}`);
      opts.until = t;
    }
    if (o.content) {
      let file;
      try {
        file = decodeCatalogFile(await readFile(o.content));
      } catch (e) {
        throw new ShopCliError(`--content ${o.content}: ${(e as Error).message}`);
      }
      opts.content = { embedder: file.embedder, vectors: new Map([...file.vectors].map(([k, v]) => [k, v.vector])) };
    }
    const t0 = performance.now();
    const model = trainShopModel(log, opts);
    const bytes = encodeShopModel(model);
    const tmp = `${o.out}.tmp-${process.pid}`;
    await writeFile(tmp, bytes);
    await rename(tmp, o.out);
    const sizes = shopModelSizes(bytes);
    const cold = model.vectors ? model.vectors.cold.reduce((a, b) => a + b, 0) : 0;
    io.stdout(
      `${o.out}: ${bytes.length} bytes, ${catalog.length} items (${cold} with content-only vectors), ${log.length} log rows${skipped ? ` (${skipped} of unknown items skipped)` : ''}, ` +
        `${model.privacy ? `(ε ${model.privacy.epsilon}, δ ${model.privacy.delta})-DP` : 'no DP'}, ${((performance.now() - t0) / 1000).toFixed(1)} s; lists ${sizes['list.ease'] + sizes['list.knn'] + sizes['list.markov']} B, vectors ${sizes.vectors ?? 0} B\n`,
    );
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    const err = e as Error & { code?: string };
    if (e instanceof ShopCliError || e instanceof RangeError || err.code === 'ENOENT') {
      io.stderr(`atomem-shop: ${err.message}\n`);
      return 2;
    }
    io.stderr(`atomem-shop: ${err.stack ?? err.message}\n`);
    return 1;
  }
}

/** True when this module is the process's entry (`node dist/node/shop-cli.js`, `tsx src/shop/cli.ts`, or the npm bin symlink). */
function isMain(): boolean {
  try {
    // why: npm's bin is a symlink (node_modules/.bin/atomem-shop); Node resolves it for import.meta.url.
    return !!process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false;
  }
}

if (isMain()) {
  main(process.argv.slice(2)).then((code) => process.exit(code));
}
