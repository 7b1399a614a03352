/**
 * Benchmark CLI: `node -C atomem-source --import tsx packages/bench/src/cli.ts [options]` (the package's `npm run bench`).
 * Markdown table on stdout, progress bars and warnings on stderr, `--json FILE` for the rows.
 * Exit codes: 0 ok, 2 bad usage or bad/missing data, 1 anything else.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import cliProgress from 'cli-progress';
import { ablationsFor, benchItemVectors } from './atomem-method.js';
import { DatasetError, DEFAULT_KCORE, loadDataset } from './datasets.js';
import { defaultMethods, fullRankingMethods, methodFactories, PRIVACY_LEVELS } from './methods.js';
import { DEFAULT_SEED } from './protocol.js';
import { BenchUsageError, contrastsTable, markdownTable, pairedTable, runBenchmark, type ProgressEvent } from './run.js';
import type { DatasetFormat, Privacy, Setting } from './types.js';
import type { ProtocolName } from './full-protocol.js';
import { addCosts, zeroCosts, type OperationCosts } from 'atomem/engine';

/** `--users`: a positive integer or `all`. */
export function parseUsers(value: string): number | 'all' {
  if (value === 'all') return 'all';
  if (!/^[0-9]+$/.test(value) || Number(value) < 1) throw new InvalidArgumentError('expected a positive integer or "all".');
  return Number(value);
}

function parseNonNegativeInt(value: string): number {
  if (!/^[0-9]+$/.test(value)) throw new InvalidArgumentError('expected a non-negative integer.');
  return Number(value);
}

function parseSeed(value: string): number {
  if (!/^-?[0-9]+$/.test(value) || !Number.isSafeInteger(Number(value))) throw new InvalidArgumentError('expected an integer.');
  return Number(value);
}

function parseList(value: string): string[] {
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (list.length === 0) throw new InvalidArgumentError('expected a comma-separated list.');
  return list;
}

function parseQuantile(value: string): number {
  const q = Number(value);
  if (!/^[0-9.]+$/.test(value) || !(q > 0 && q <= 1)) throw new InvalidArgumentError('expected a number in (0, 1], e.g. 0.8.');
  return q;
}

function parseCut(value: string): number {
  const q = Number(value);
  if (!/^[0-9.]+$/.test(value) || !(q > 0 && q < 1)) throw new InvalidArgumentError('expected a quantile in (0, 1), e.g. 0.9.');
  return q;
}

function parsePrivacy(value: string): Privacy[] {
  const list = parseList(value);
  const bad = list.filter((p) => !PRIVACY_LEVELS.includes(p as Privacy));
  if (bad.length) throw new InvalidArgumentError(`unknown level ${bad.join(', ')} (off, contribute).`);
  return list as Privacy[];
}

function parseParam(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError('expected key=value.');
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

/**
 * The data folder: `--data`, else env `ATOMEM_ML100K`, else `../shared/data/ml-100k`
 * relative to the working directory (movielens only).
 */
export function resolveDataDir(format: DatasetFormat, data: string | undefined, env: NodeJS.ProcessEnv = process.env, cwd = process.cwd()): string {
  if (data) return resolve(cwd, data);
  if (format === 'movielens') {
    if (env.ATOMEM_ML100K) return resolve(cwd, env.ATOMEM_ML100K);
    const fallback = resolve(cwd, '../shared/data/ml-100k');
    if (existsSync(fallback)) return fallback;
    throw new BenchUsageError('no data: pass --data DIR or set ATOMEM_ML100K to the ml-100k folder');
  }
  throw new BenchUsageError(`no data: --format ${format} needs --data DIR`);
}

function program(): Command {
  return new Command()
    .name('atomem-bench')
    .description('Protocols of EVAL.md: loo (1 positive + 9 sampled negatives), loo-full and temporal (all items ranked).')
    .addOption(new Option('--format <format>', 'dataset format').choices(['movielens', 'agentcf', 'jsonl', 'sequences']).default('movielens'))
    .addOption(
      new Option(
        '--protocol <protocol>',
        "loo: 1 positive + 9 sampled negatives (the papers' tables); loo-full: leave-one-out, every catalog item the user has not interacted with ranked; temporal: one global time cut, each user tested on their first event after it, all items ranked",
      )
        .choices(['loo', 'loo-full', 'temporal'])
        .default('loo'),
    )
    .option('--cut <q>', 'protocol temporal: the cut is this quantile of all event times (default 0.9)', parseCut)
    .option(
      '--reference <method>',
      'loo-full / temporal: paired differences of every method against this one (default sasrec when it runs, else the first method)',
    )
    .option('--data <dir>', 'dataset folder (default: $ATOMEM_ML100K, else ../shared/data/ml-100k)')
    .option('--kcore <k>', 'k-core filter (default 5 for movielens, 0 otherwise)', parseNonNegativeInt)
    .addOption(
      new Option(
        '--setting <setting>',
        'full, sample, instruct (full + a stated intent per case) or evolving (the last --steps interactions tested one after another)',
      )
        .choices(['full', 'sample', 'instruct', 'evolving'])
        .default('full'),
    )
    .option('--steps <n>', 'setting evolving: interactions tested per user (default 5)', parseNonNegativeInt)
    .option('--users <n|all>', 'evaluated users, drawn without replacement', parseUsers, 'all' as number | 'all')
    .option('--seed <n>', 'seed of every random draw', parseSeed, DEFAULT_SEED)
    .option('--methods <a,b,c>', 'methods to run (default: all registered)', parseList)
    .option('--privacy <levels>', 'privacy levels for methods that take one: off,contribute (protocol v2) (default: all they declare)', parsePrivacy)
    .option('--param <key=value>', 'method parameter, repeatable (e.g. bpr.epochs=40)', parseParam)
    .option('--json <file>', 'write { config, results } as JSON')
    .addOption(new Option('--reasoner <kind>', 'memory operations by rules (default) or an LLM').choices(['rules', 'llm']))
    .addOption(
      new Option('--llm <kind>', 'with --reasoner llm: an OpenAI-compatible server, or a scripted stand-in (no model; plumbing)').choices([
        'openai-compatible',
        'scripted',
      ]),
    )
    .addOption(new Option('--planner <kind>', 'with --reasoner llm: ARS planner by the LLM (default) or by rules').choices(['llm', 'rules']))
    .option('--llm-url <url>', 'OpenAI-compatible API root, e.g. http://127.0.0.1:8080/v1')
    .option('--llm-model <name>', 'model name sent to the OpenAI-compatible server')
    .addOption(
      new Option(
        '--item-vectors <kind>',
        "atomem's item space: hybrid = the shop's published model (collaborative vectors + its signals + SASRec, learned from the log the baselines train on), content = the content embedder's vectors",
      )
        .choices(['content', 'hybrid'])
        .default('hybrid'),
    )
    .option(
      '--shop-log-until <q>',
      'the shop keeps only log entries before the global time quantile q (e.g. 0.8): applies to the published model (shop, atomem hybrid), not to the centralized baselines',
      parseQuantile,
    )
    .option('--validation', 'evaluate on validation cases (tuning) instead of test cases')
    .option('--no-progress', 'no progress bars on stderr')
    .option('--list', 'list the registered methods and exit')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
}

interface CliOptions {
  format: DatasetFormat;
  protocol: ProtocolName;
  cut?: number;
  reference?: string;
  data?: string;
  kcore?: number;
  setting: Setting;
  steps?: number;
  users: number | 'all';
  seed: number;
  methods?: string[];
  privacy?: Privacy[];
  param?: Record<string, string>;
  json?: string;
  reasoner?: 'rules' | 'llm';
  planner?: 'rules' | 'llm';
  llm?: string;
  llmUrl?: string;
  llmModel?: string;
  validation?: boolean;
  itemVectors: 'content' | 'hybrid';
  shopLogUntil?: number;
  progress: boolean;
  list?: boolean;
}

/** A second table for methods that report extras (atomem: forward accuracy, fidelity, index shape). */
function detailsTable(result: Awaited<ReturnType<typeof runBenchmark>>): string | undefined {
  const rows = result.results.filter((r) => r.forwardAccuracy !== undefined);
  if (!rows.length) return undefined;
  const f = (x: unknown) => (typeof x === 'number' ? x.toFixed(3) : '—');
  const fid = (r: Record<string, unknown>, m: number) => {
    const v = r[`fidelity1:${m}`] as { precision: number | null; f1: number | null } | undefined;
    if (!v) return '—';
    return v.precision === null ? 'not computable' : `${f(v.precision)} / ${f(v.f1)}`;
  };
  const lines = [
    '| method | privacy | memories/user | forward acc. | fidelity 1:1 P/F1 | 1:3 P/F1 | 1:9 P/F1 | index memories | communities | largest |',
    '|---|---|---:|---:|---|---|---|---:|---:|---:|',
  ];
  for (const r of rows) {
    const ix = r.index as { memories?: number; communities?: number; largestCommunity?: number } | undefined;
    lines.push(
      `| ${r.method} | ${r.privacy ?? '—'} | ${f(r.memoriesPerUser).replace(/0+$/, '')} | ${f(r.forwardAccuracy)} | ${fid(r, 1)} | ${fid(r, 3)} | ${fid(r, 9)} | ${ix?.memories ?? '—'} | ${ix?.communities ?? '—'} | ${ix?.largestCommunity ?? '—'} |`,
    );
  }
  return lines.join('\n');
}

/** Runs the CLI on `argv` (without node and script); returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  const cmd = program();
  try {
    cmd.parse(argv, { from: 'user' });
  } catch (e) {
    if (e instanceof CommanderError) return e.exitCode === 0 ? 0 : 2;
    throw e;
  }
  const o = cmd.opts<CliOptions>();
  if (o.list) {
    for (const name of [...defaultMethods(), ...[...methodFactories.keys()].filter((m) => methodFactories.get(m)!.ablation)]) {
      const f = methodFactories.get(name)!;
      process.stdout.write(`${name}${f.privacyLevels ? ` [${f.privacyLevels.join(',')}]` : ''}${f.description ? `  ${f.description}` : ''}\n`);
    }
    return 0;
  }

  let bar: cliProgress.SingleBar | undefined;
  let barKey = '';
  const onProgress = (e: ProgressEvent) => {
    if (!o.progress) return;
    const key = `${e.method}/${e.privacy}/${e.phase}/${e.label ?? ''}`;
    const label = `${e.method}${e.privacy ? `@${e.privacy}` : ''} ${e.label ?? e.phase}`;
    if (key !== barKey) {
      bar?.stop();
      bar = new cliProgress.SingleBar(
        {
          format: '{label} |{bar}| {value}/{total} {duration_formatted}',
          stream: process.stderr,
          hideCursor: true,
          clearOnComplete: false,
          noTTYOutput: true,
          notTTYSchedule: 10_000,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(e.total, e.done, { label });
      barKey = key;
    } else {
      bar!.setTotal(e.total);
      bar!.update(e.done, { label });
    }
  };

  try {
    const params: Record<string, string> = {
      ...(o.param ?? {}),
      'atomem.itemVectors': o.itemVectors,
      ...(o.shopLogUntil !== undefined ? { 'shop.until': String(o.shopLogUntil) } : {}),
      ...(o.reasoner ? { 'atomem.reasoner': o.reasoner } : {}),
      ...(o.planner ? { 'atomem.planner': o.planner } : {}),
      ...(o.llm ? { 'atomem.llm': o.llm } : {}),
      ...(o.llmUrl ? { 'atomem.llmUrl': o.llmUrl } : {}),
      ...(o.llmModel ? { 'atomem.llmModel': o.llmModel } : {}),
    };
    // `ablations`: every ablation of atomem that applies to this run, after the methods listed before it
    const listed = (names: string[]) => [...new Set(names.flatMap((m) => (m === 'ablations' ? ablationsFor(params) : [m])))];
    const unknown = listed(o.methods ?? []).filter((m) => !methodFactories.has(m));
    if (unknown.length) throw new BenchUsageError(`unknown method ${unknown.join(', ')} (known: ${defaultMethods().join(', ')})`);
    const dir = resolveDataDir(o.format, o.data);
    const kcore = o.kcore ?? DEFAULT_KCORE[o.format];
    const dataset = loadDataset(o.format, dir, { kcore });
    const methods = listed(o.methods ?? (o.protocol === 'loo' ? defaultMethods(o.setting) : fullRankingMethods(o.protocol, dataset.ordinalTime)));
    // ILD@5 for every method needs item vectors: the same USE-lite vectors atomem uses (cached).
    const itemVectors = methods.some((m) => m.startsWith('atomem')) ? (ids: string[]) => benchItemVectors(dataset, o.param ?? {}, ids) : undefined;
    const result = await runBenchmark({
      itemVectors,
      dataset,
      protocol: o.protocol,
      cut: o.cut,
      reference: o.reference,
      setting: o.setting,
      steps: o.steps,
      users: o.users,
      seed: o.seed,
      methods,
      privacy: o.privacy,
      validation: o.validation,
      params,
      onProgress,
      // each row as soon as it is measured (a long run that is stopped keeps what it measured)
      onResult: (r) => {
        bar?.stop();
        barKey = '';
        process.stderr.write(
          `done: ${r.method}${r.privacy ? `@${r.privacy}` : ''} n ${r.n} NDCG@10 ${r.ndcg10.toFixed(4)} Recall@10 ${r.recall10.toFixed(4)} MRR ${r.mrr.toFixed(4)} (${r.seconds.toFixed(1)} s)\n`,
        );
      },
    });
    bar?.stop();
    for (const w of result.warnings) process.stderr.write(`warning: ${w}\n`);
    const c = result.config;
    process.stdout.write(
      `${c.dataset} (${c.format}), k-core ${kcore}, protocol ${c.protocol}${c.cutTime !== undefined ? ` (cut at the ${c.cut} quantile of event times, ${c.cutTime})` : ''}, setting ${c.setting}, target ${c.target}, seed ${c.seed}: ` +
        `${c.cases} of ${c.evaluableUsers} evaluable users, ${c.catalogItems} catalog items, ${c.interactions} interactions\n\n`,
    );
    process.stdout.write(`${markdownTable(result)}\n`);
    const steps = result.results.filter((r) => Array.isArray(r.perStep));
    if (steps.length) {
      const n = (steps[0].perStep as { step: number }[]).length;
      process.stdout.write(
        `\n| method | privacy | ${Array.from({ length: n }, (_, i) => `step ${i + 1} NDCG@10`).join(' | ')} | mean |\n|---|---|${'---:|'.repeat(n + 1)}\n`,
      );
      for (const r of steps) {
        const ps = r.perStep as { ndcg10: number }[];
        process.stdout.write(`| ${r.method} | ${r.privacy ?? '—'} | ${ps.map((p) => p.ndcg10.toFixed(3)).join(' | ')} | ${r.ndcg10.toFixed(3)} |\n`);
      }
    }
    const costRows = result.results.filter((r) => Array.isArray(r.llmPerStep));
    if (costRows.length) {
      process.stdout.write(
        '\n| method | privacy | step | model calls (its rankings + the memory updates after it) | operations | prompt tokens | output tokens | model seconds |\n|---|---|---:|---:|---:|---:|---:|---:|\n',
      );
      for (const r of costRows) {
        for (const c of r.llmPerStep as { step: number; calls: number; requests: number; promptTokens: number; outputTokens: number; ms: number }[]) {
          process.stdout.write(
            `| ${r.method} | ${r.privacy ?? '—'} | ${c.step} | ${c.calls} | ${c.requests} | ${c.promptTokens} | ${c.outputTokens} | ${(c.ms / 1000).toFixed(1)} |\n`,
          );
        }
      }
    }
    if (result.contrasts.length && c.protocol !== 'loo')
      process.stdout.write(
        `\nPaired differences against ${c.reference} (per user, 95% paired bootstrap over users; ranks are pessimistic: ties count against the target):\n\n${contrastsTable(result.contrasts, true)}\n`,
      );
    else if (result.contrasts.length)
      process.stdout.write(`\nThe setting's contrasts (per user, paired bootstrap over users):\n\n${contrastsTable(result.contrasts, c.protocol !== 'loo')}\n`);
    const details = detailsTable(result);
    if (details) process.stdout.write(`\n${details}\n`);
    const cycles = result.results.filter((r) => r.lifecyclePer1000 !== undefined);
    if (cycles.length) {
      const ops = ['extract', 'reinforce', 'weaken', 'merge', 'forget', 'resynthesize'];
      process.stdout.write(
        `\nLifecycle operations per 1,000 training events:\n\n| method | privacy | item vectors | events | ${ops.join(' | ')} |\n|---|---|---|---:|${'---:|'.repeat(ops.length)}\n`,
      );
      for (const r of cycles) {
        const l = r.lifecyclePer1000 as Record<string, number>;
        process.stdout.write(
          `| ${r.method} | ${r.privacy ?? '—'} | ${String(r.itemVectors)}${r.shopLogUntil != null && r.shopLogUntil !== 1 ? ` (log until q ${String(r.shopLogUntil)})` : ''} | ${String(r.trainingEvents)} | ${ops.map((op) => l[op].toFixed(1)).join(' | ')} |\n`,
        );
      }
    }
    if (result.paired.length) process.stdout.write(`\nPaired differences (NDCG@10, same users):\n\n${pairedTable(result.paired)}\n`);
    const llmRows = result.results.filter((r) => r.llm);
    if (llmRows.length) {
      process.stdout.write(
        '\n| method | privacy | model | model calls | valid | repairs | fallbacks to rules (invalid / timeout / budget / model) | prompt tokens | output tokens | model seconds |\n|---|---|---|---:|---:|---:|---|---:|---:|---:|\n',
      );
      for (const r of llmRows) {
        const l = r.llm as {
          model: string;
          calls: number;
          succeeded: number;
          repairs: number;
          fallbacks: Record<string, number>;
          promptTokens: number;
          outputTokens: number;
          ms: number;
        };
        const f = l.fallbacks;
        process.stdout.write(
          `| ${r.method} | ${r.privacy ?? '—'} | ${l.model} | ${l.calls} | ${l.succeeded} | ${l.repairs} | ${f.invalid} / ${f.timeout} / ${f.budget} / ${f.model} | ${l.promptTokens} | ${l.outputTokens} | ${(l.ms / 1000).toFixed(1)} |\n`,
        );
      }
      // Per operation, summed over the LLM rows: where the calls, tokens and time go.
      const ops = new Map<string, OperationCosts>();
      for (const r of llmRows) {
        for (const [op, c] of Object.entries((r.llm as { byOperation?: Record<string, OperationCosts> }).byOperation ?? {})) {
          if (!ops.has(op)) ops.set(op, zeroCosts());
          addCosts(ops.get(op)!, c);
        }
      }
      process.stdout.write(
        '\n| operation | requests | answered by the model | model calls | repairs | fallbacks to rules | prompt tokens | output tokens | model ms per call |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n',
      );
      for (const [op, c] of ops) {
        if (c.requests === 0) continue;
        const fb = Object.values(c.fallbacks).reduce((a, b) => a + b, 0);
        process.stdout.write(
          `| ${op} | ${c.requests} | ${c.succeeded} | ${c.calls} | ${c.repairs} | ${fb} | ${c.promptTokens} | ${c.outputTokens} | ${c.calls ? (c.ms / c.calls).toFixed(0) : '—'} |\n`,
        );
      }
    }
    if (o.json) {
      writeFileSync(
        o.json,
        `${JSON.stringify({ config: { ...c, kcore, data: dir, itemVectors: o.itemVectors, shopLogUntil: o.shopLogUntil ?? 1 }, results: result.results, paired: result.paired, contrasts: result.contrasts, perUser: result.perUser }, null, 2)}\n`,
      );
    }
    return 0;
  } catch (e) {
    bar?.stop();
    if (e instanceof BenchUsageError || e instanceof DatasetError) {
      process.stderr.write(`error: ${e.message}\n`);
      return 2;
    }
    process.stderr.write(`error: ${e instanceof Error ? (process.env.DEBUG ? e.stack : e.message) : String(e)}\n`);
    return 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
