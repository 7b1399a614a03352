#!/usr/bin/env node
/**
 * `atomem-shop`: the shop's server builds the public shop model file from its order log.
 *
 *   npx atomem-shop --interactions interactions.jsonl --items items.jsonl --out shop-model.bin
 *       [--content catalog-vectors.bin] [--epsilon 4] [--delta 1e-6] [--until 2026-01-01]
 *       [--ease-items 10000] [--dim 32] [--ease auto|dense|local] [--ease-neighbours 128] [--engine duckdb [--engine-memory 8GB]]
 *       [--recent-days 7]
 *       [--sasrec sasrec.bin [--sasrec-budget 600] [--sasrec-epochs 80] [--sasrec-loss ce|sampled-softmax] [--sasrec-negatives 1024]]
 *       [--budget 1800]
 *       [--no-progress] [--stats stats.json]
 *
 * The bin of the published package (`dist/node/shop-cli.js`, vite.node.config.ts); in the
 * repository `npm run shop -- …`. It needs no optional peer (no embedding: `--content` reads
 * the vectors `atomem-vectors` wrote; `--engine duckdb` needs `npm i @duckdb/node-api`).
 *
 * `interactions.jsonl` (or `.jsonl.gz`, streamed: any size): `{user, item, at, action?}` per line (`at` epoch ms or an ISO date; the
 * export format of EVAL.md). `items.jsonl`: `{id, …}` per line, the public catalog (items without
 * interactions still get a vector when `--content` gives theirs). `--content`: a catalog vector
 * file from `atomem-vectors` (format v1 or v2): the content vectors of the hybrid item vectors.
 * `--epsilon`: user-level (ε, δ)-DP for the whole file (see `train.ts`); default none.
 * `--recent-days`: the window of the recent popularity the file carries (signal `popRecent`: distinct
 * users per item over the last W days before the log's last event; 0 = none; not under `--epsilon`).
 * `--sasrec`: also train the sequence model (SASRec, `sasrec/budgeted.ts`: the loss scales with
 * the catalog, `sasrec/profile.ts` — full-softmax cross-entropy up to 4,096 items, sampled softmax
 * over 1,024 items above, unless `--sasrec-loss` / `--sasrec-negatives` say otherwise; lazy
 * Adam on the touched embedding rows, early stopping on held-out last items, at most
 * `--sasrec-budget` seconds) and write it there (`serializeSasrec`, f16 item embeddings; its item
 * i + 1 is the shop model file's item i).
 *
 * `--budget`: the whole command's wall-clock seconds (reading, the shop model, SASRec). The
 * sequence model is trained last and gets what the other stages left, less a reserve for writing
 * its file (at most `--sasrec-budget`); when less than 30 s is left it is not trained and the
 * command says so (exit code 0: the shop model file is complete without it). The other stages
 * have no time knob (their cost is set by the log); their seconds are printed as each ends.
 *
 * Progress with an ETA on stderr (`--no-progress` to silence): per long stage its share done, and
 * one line as each stage ends (its seconds, the total so far, and what is left of `--budget`). One summary line on stdout. Exit codes: 0 ok, 2 bad usage or input, 1 anything else.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { decodeCatalogFile } from '../protocol/catalog-vectors-v2.js';
import { encodeShopModel, shopModelSizes } from '../protocol/shop-model-v1.js';
import { LogInputError, progressReporter, readCatalogFile, readLogFile } from './log-reader.js';
import { serializeSasrec } from './sasrec/model.js';
import { countedListSizes, trainShopModel, type TrainOptions } from './train.js';

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

/** Runs the command; returns the exit code. */
export async function main(
  argv: string[],
  io: { stdout: (s: string) => void; stderr: (s: string) => void } = { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) },
): Promise<number> {
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
    .option('--recent-days <n>', "recent popularity window in days before the log's last event (0 = none)", number('--recent-days', 0), 7)
    .addOption(
      new Option('--ease <method>', 'EASE solver: dense (exact, N³), local (per-item neighbourhood, any catalog size), auto (dense up to 3000 items)').choices([
        'dense',
        'local',
        'auto',
      ]),
    )
    .option('--ease-neighbours <k>', 'neighbourhood size of local EASE (default 128)', number('--ease-neighbours', 1))
    .option('--sasrec <file>', 'also train the sequence model (SASRec) and write it to this file')
    .option('--sasrec-budget <seconds>', 'wall-clock budget of the SASRec training', number('--sasrec-budget', 1), 600)
    .option(
      '--budget <seconds>',
      'wall-clock budget of the whole command: SASRec gets what the other stages left (at most --sasrec-budget)',
      number('--budget', 1),
    )
    .option('--sasrec-epochs <n>', 'upper bound on SASRec epochs (early stopping on validation usually ends it sooner)', number('--sasrec-epochs', 1), 80)
    .option(
      '--sasrec-loss <loss>',
      'SASRec loss: ce (full softmax) or sampled-softmax (default: ce up to 4,096 items, sampled-softmax with 1,024 negatives above)',
    )
    .option('--sasrec-negatives <n>', 'SASRec sampled-softmax negatives per chunk (default 1,024 on large catalogs)', number('--sasrec-negatives', 1))
    .option('--no-progress', 'no progress lines on stderr')
    .addOption(
      new Option(
        '--engine <name>',
        'run the counting stages (item-kNN, transitions, local EASE neighbourhoods) as SQL on this engine; duckdb needs `npm i @duckdb/node-api`',
      ).choices(['duckdb']),
    )
    .option(
      '--engine-memory <size>',
      "with --engine duckdb: DuckDB's memory limit, which sizes the co-occurrence query's passes (e.g. 8GB; default DuckDB's own, 80% of RAM)",
      (v: string) => {
        if (!/^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$/i.test(v)) throw new InvalidArgumentError('--engine-memory must be a size such as 512MB or 8GB');
        return v;
      },
    )
    .option('--stats <file>', 'write JSON: seconds per stage, peak RSS, file bytes')
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  try {
    program.parse(argv, { from: 'user' });
    const o = program.opts<{
      interactions: string;
      items: string;
      out: string;
      content?: string;
      epsilon?: number;
      delta: number;
      until?: string;
      easeItems?: number;
      dim?: number;
      recentDays: number;
      ease?: 'dense' | 'local' | 'auto';
      easeNeighbours?: number;
      progress?: boolean;
      stats?: string;
      engine?: 'duckdb';
      engineMemory?: string;
      sasrec?: string;
      sasrecBudget: number;
      sasrecEpochs: number;
      budget?: number;
      sasrecLoss?: string;
      sasrecNegatives?: number;
    }>();
    if (o.engineMemory !== undefined && o.engine === undefined) throw new ShopCliError('--engine-memory needs --engine duckdb');
    if (o.sasrec !== undefined && o.epsilon !== undefined)
      throw new ShopCliError('--sasrec with --epsilon: the sequence model is not trained with differential privacy; drop one of them');
    if (!Number.isInteger(o.sasrecEpochs)) throw new ShopCliError(`--sasrec-epochs must be an integer, got ${o.sasrecEpochs}`);
    if (o.sasrecLoss !== undefined && o.sasrecLoss !== 'ce' && o.sasrecLoss !== 'sampled-softmax')
      throw new ShopCliError(`--sasrec-loss must be ce or sampled-softmax, got ${o.sasrecLoss}`);
    if (o.sasrecNegatives !== undefined && !Number.isInteger(o.sasrecNegatives))
      throw new ShopCliError(`--sasrec-negatives must be an integer, got ${o.sasrecNegatives}`);
    if (o.sasrecNegatives !== undefined && o.sasrecLoss === 'ce')
      throw new ShopCliError('--sasrec-negatives with --sasrec-loss ce: the full softmax has no sampled negatives');
    const tStart = performance.now();
    const report = o.progress === false ? undefined : progressReporter(io.stderr);
    // Seconds per stage: each interval between two progress calls belongs to the stage that
    // reports at its end (the trainer reports a stage while it runs and when it ends).
    const stages: Record<string, number> = {};
    // CPU seconds per stage (the process: SASRec's worker threads included), for a shared machine.
    const stagesCpu: Record<string, number> = {};
    const cpuNow = () => {
      const c = process.cpuUsage();
      return (c.user + c.system) / 1e6;
    };
    let lastCall = performance.now();
    let lastCpu = cpuNow();
    const mark = (name: string) => {
      const now = performance.now();
      const cpu = cpuNow();
      stages[name] = (stages[name] ?? 0) + (now - lastCall) / 1000;
      stagesCpu[name] = (stagesCpu[name] ?? 0) + (cpu - lastCpu);
      lastCall = now;
      lastCpu = cpu;
    };
    // One line as each stage ends: a stage ends when another one reports.
    let current: string | undefined;
    let stretch = 0; // seconds of `current` before its latest stretch (a stage may report in several)
    const stageEnded = (next: string, before = stages[next] ?? 0) => {
      const took = current === undefined ? 0 : (stages[current] ?? 0) - stretch;
      // why ≥ 1 s: quick stages stay silent, as in the progress lines.
      if (report && current !== undefined && current !== next && took >= 1) {
        const total = (performance.now() - tStart) / 1000;
        const left = o.budget !== undefined ? `, ${Math.max(0, o.budget - total).toFixed(0)} s of --budget ${o.budget} left` : '';
        io.stderr(`atomem-shop: ${current} done in ${took.toFixed(1)} s (total ${total.toFixed(0)} s${left})\n`);
      }
      if (current !== next) stretch = before;
      current = next;
    };
    const progress = (name: string, done: number, total: number) => {
      const before = stages[name] ?? 0;
      mark(name);
      stageEnded(name, before);
      report?.(name, done, total);
    };
    const catalog = await readCatalogFile(o.items);
    const log = await readLogFile(o.interactions, { catalog, onProgress: progress });
    const skipped = log.skipped;
    const opts: TrainOptions = { catalog, delta: o.delta, onProgress: progress };
    let sqlPasses: number | undefined;
    if (o.ease !== undefined) opts.ease = o.ease;
    if (o.easeNeighbours !== undefined) opts.easeNeighbours = o.easeNeighbours;
    if (o.epsilon !== undefined) opts.epsilon = o.epsilon;
    if (o.easeItems !== undefined) opts.easeItems = o.easeItems;
    if (o.dim !== undefined) opts.dim = o.dim;
    opts.recentDays = o.recentDays;
    if (o.engine === 'duckdb') {
      if (o.epsilon !== undefined) throw new ShopCliError('--engine: the SQL counting stages are not differentially private; drop --epsilon or --engine');
      if (o.until !== undefined) throw new ShopCliError('--engine with --until: filter the log before exporting it');
      const { openDuckDb, loadOrdersDuckDb, countingStages } = await import('./sql/engine.js');
      const engine = await openDuckDb(o.engineMemory ? { memoryLimit: o.engineMemory } : {});
      try {
        await loadOrdersDuckDb(engine, o.interactions);
        mark('sql load');
        const local = o.ease === 'local' || (o.ease !== 'dense' && catalog.length > 3000);
        // why the trainer's list sizes, not its caps: what it keeps is all the engine returns (at 1M items 2 / 2 / 32 rows an item instead of 128 / 64 / 128).
        const size = countedListSizes(catalog.length, opts);
        const counts = await countingStages(engine, {
          knnK: size.knn,
          markovK: size.markov,
          ...(local ? { neighboursK: size.neighbours } : {}),
          onPart: (done, parts) => report?.('sql co-occurrence passes', done, parts),
          onQuery: (name, sec) => report && io.stderr(`atomem-shop: sql ${name} done in ${sec.toFixed(1)} s\n`),
        });
        for (const [q, sec] of Object.entries(counts.seconds)) stages[`sql ${q}`] = sec;
        sqlPasses = counts.passes;
        lastCall = performance.now();
        lastCpu = cpuNow();
        opts.counts = { knn: counts.knn, transitions: counts.transitions, ...(counts.neighbours ? { neighbours: counts.neighbours } : {}) };
      } finally {
        await engine.close();
      }
    }
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
    mark('encode');
    const tmp = `${o.out}.tmp-${process.pid}`;
    await writeFile(tmp, bytes);
    await rename(tmp, o.out);
    const sizes = shopModelSizes(bytes);
    let sasrecStats: Record<string, unknown> | undefined;
    let sasrecNote = '';
    // why a reserve: writing the f16 item table and the stats after the budget ends (≈ 1 s per 100k items).
    const sasrecBudget =
      o.budget === undefined ? o.sasrecBudget : Math.min(o.sasrecBudget, o.budget - (performance.now() - tStart) / 1000 - 5 - catalog.length / 1e5);
    if (o.sasrec !== undefined && o.budget !== undefined && sasrecBudget < 30) {
      stageEnded('sasrec');
      sasrecStats = { skipped: `--budget ${o.budget}: ${Math.max(0, sasrecBudget).toFixed(0)} s left for SASRec (< 30 s)` };
      sasrecNote = `; SASRec not trained (${sasrecStats.skipped})`;
      io.stderr(`atomem-shop: SASRec not trained: ${sasrecStats.skipped}; ${o.sasrec} not written\n`);
      current = undefined;
    } else if (o.sasrec !== undefined) {
      const { sequencesFromColumns, trainSasrecBudgeted } = await import('./sasrec/budgeted.js');
      const seqs = sequencesFromColumns(log.columns(), log.users.length, opts.until);
      if (!seqs.some((q) => q.length >= 2)) throw new ShopCliError('--sasrec: no user has two positive interactions');
      const r = await trainSasrecBudgeted(seqs, log.items.length, {
        budgetSeconds: sasrecBudget,
        maxEpochs: o.sasrecEpochs,
        ...(o.sasrecLoss !== undefined ? { loss: o.sasrecLoss as 'ce' | 'sampled-softmax' } : {}),
        ...(o.sasrecNegatives !== undefined ? { loss: 'sampled-softmax' as const, negatives: o.sasrecNegatives } : {}),
        onProgress: (p) => {
          progress('sasrec', p.fraction, 1);
          if (p.validation && report)
            io.stderr(
              `atomem-shop: sasrec step ${p.step}/${p.plannedSteps} (${p.seconds.toFixed(0)} s of ${sasrecBudget.toFixed(0)}), loss ${Number.isFinite(p.loss) ? p.loss.toFixed(4) : '-'}, validation NDCG@10 ${p.validation.ndcg10.toFixed(4)} (best ${p.validation.best.toFixed(4)} at step ${p.validation.bestStep})\n`,
            );
        },
      });
      const sasrecBytes = serializeSasrec(r.weights, { itemEmbedding: 'f16' });
      const tmpS = `${o.sasrec}.tmp-${process.pid}`;
      await writeFile(tmpS, sasrecBytes);
      await rename(tmpS, o.sasrec);
      mark('sasrec');
      const best = r.validation.find((v) => v.step === r.bestStep)?.ndcg10 ?? null;
      sasrecStats = {
        budgetSeconds: sasrecBudget,
        bytes: sasrecBytes.length,
        steps: r.steps,
        seconds: r.seconds,
        stoppedBy: r.stoppedBy,
        bestStep: r.bestStep,
        validationUsers: r.validationUsers,
        validationNdcg10: best,
        validation: r.validation,
        settings: r.settings,
      };
      const st = r.settings;
      const how = `${st.loss}${st.negatives !== undefined ? ` ${st.negatives} negatives` : ''}, dropout ${st.dropout}, L ${st.maxLen}, lr ${st.lr}`;
      sasrecNote = `; SASRec ${sasrecBytes.length} bytes, ${r.steps} steps in ${r.seconds.toFixed(0)} s (${r.stoppedBy}${best !== null ? `, validation NDCG@10 ${best.toFixed(4)} at step ${r.bestStep}` : ''}; ${how})`;
    }
    stageEnded('done');
    const peakRssBytes = process.resourceUsage().maxRSS * 1024;
    if (o.stats)
      await writeFile(
        o.stats,
        JSON.stringify(
          {
            items: catalog.length,
            events: log.length,
            stages,
            stagesCpu,
            trainSeconds: (performance.now() - tStart) / 1000,
            cpuSeconds: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
            peakRssBytes,
            fileBytes: bytes.length,
            sizes,
            ...(sqlPasses !== undefined ? { sqlPasses } : {}),
            ...(sasrecStats ? { sasrec: sasrecStats } : {}),
          },
          null,
          1,
        ),
      );
    const cold = model.vectors ? model.vectors.cold.reduce((a, b) => a + b, 0) : 0;
    io.stdout(
      `${o.out}: ${bytes.length} bytes, ${catalog.length} items (${cold} with content-only vectors), ${log.length} log rows${skipped ? ` (${skipped} of unknown items skipped)` : ''}, ` +
        `${model.privacy ? `(ε ${model.privacy.epsilon}, δ ${model.privacy.delta})-DP` : 'no DP'}, ${((performance.now() - t0) / 1000).toFixed(1)} s, peak RSS ${(peakRssBytes / 2 ** 20).toFixed(0)} MB; lists ${sizes['list.ease'] + sizes['list.knn'] + sizes['list.markov']} B, vectors ${sizes.vectors ?? 0} B${sasrecNote}\n`,
    );
    return 0;
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    const err = e as Error & { code?: string };
    if (
      e instanceof ShopCliError ||
      e instanceof LogInputError ||
      (e as Error).name === 'EngineMissingError' ||
      e instanceof RangeError ||
      err.code === 'ENOENT'
    ) {
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
