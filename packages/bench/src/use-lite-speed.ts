/**
 * Where USE-lite's time goes in Node, and items per second by batch size
 * (`npm run bench:use-lite-speed -- [--items 2000] [--batches 16,64,256] [--threads 1,2]`).
 *
 * Texts: ML-100K's movie titles with their genres, each followed by a seeded synthetic product
 * description of 12–40 words (a shop's `itemText`: title. categories. description), so the
 * token counts resemble a product catalog's. Per phase: tokenization alone (`tokenize`), then
 * `embed()` (tokenization + forward passes) with the model's internal batch size set to each
 * of `--batches`; wall and CPU seconds of this process, items/s by both. Then the shipped CLI
 * (`atomem-vectors --no-cache`, a child process) on the same texts with `--threads` 1 and 2:
 * wall seconds and items/s of the whole command (model loading included).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Command } from 'commander';
import { createUseLiteEmbedder } from 'atomem/engine';
import { Rng } from './rng.js';

const WORDS =
  'soft cotton blend shirt with a classic fit and long sleeves gentle daily cleanser for sensitive skin rich matte lipstick lasting colour travel size bottle organic ingredients bright finish light weight water resistant durable stainless steel handle ergonomic grip fresh scent pure formula deep hydration perfect gift'.split(
    ' ',
  );

export function catalogTexts(dataDir: string, count: number, seed = 1): string[] {
  const genres = readFileSync(resolve(dataDir, 'u.genre'), 'latin1')
    .split('\n')
    .filter(Boolean)
    .map((l) => l.split('|')[0]);
  const movies = readFileSync(resolve(dataDir, 'u.item'), 'latin1')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const f = l.split('|');
      const g = f.slice(5).flatMap((v, i) => (v === '1' ? [genres[i]] : []));
      return `${f[1]}. ${g.join(', ')}`;
    });
  const rng = new Rng(seed);
  return Array.from({ length: count }, (_, i) => {
    const n = 12 + rng.int(29);
    const words = Array.from({ length: n }, () => WORDS[rng.int(WORDS.length)]);
    return `${movies[i % movies.length]}. ${words.join(' ')}`;
  });
}

function cpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function main(): Promise<void> {
  const o = new Command()
    .option('--items <n>', 'texts to embed', '2000')
    .option('--batches <list>', 'internal forward batch sizes', '16,64,256')
    .option('--data <dir>', 'ML-100K folder', '../shared/data/ml-100k')
    .option('--threads <list>', 'atomem-vectors --threads values to time (empty: none)', '1,2')
    .parse()
    .opts<{ items: string; batches: string; data: string; threads: string }>();
  const texts = catalogTexts(o.data, Number(o.items));
  const batches = o.batches.split(',').map(Number);
  const rows: string[] = [];
  const line = (what: string, wall: number, c: number, n: number) =>
    rows.push(`| ${what} | ${wall.toFixed(2)} | ${c.toFixed(2)} | ${(n / wall).toFixed(1)} | ${(n / c).toFixed(1)} |`);
  let tokens = 0;
  for (const b of batches) {
    const e = await createUseLiteEmbedder({ batchSize: b });
    if (tokens === 0) {
      const w0 = performance.now();
      const c0 = cpu();
      for (const t of texts) tokens += e.tokenize(t).length;
      line('tokenize only', (performance.now() - w0) / 1000, cpu() - c0, texts.length);
    }
    await e.embed(texts.slice(0, Math.min(b, texts.length))); // warm the shapes
    const w0 = performance.now();
    const c0 = cpu();
    await e.embed(texts);
    line(`embed(), forward batch ${b}`, (performance.now() - w0) / 1000, cpu() - c0, texts.length);
    await e.dispose?.();
  }
  const dir = mkdtempSync(join(tmpdir(), 'use-lite-speed-'));
  try {
    writeFileSync(join(dir, 'items.jsonl'), texts.map((t, i) => JSON.stringify({ id: `p${i}`, title: t })).join('\n'));
    for (const th of o.threads.split(',').filter(Boolean).map(Number)) {
      const w0 = performance.now();
      const r = spawnSync(
        process.execPath,
        [
          '-C',
          'atomem-source',
          '--import',
          'tsx',
          'packages/atomem/src/vectors-cli.ts',
          '--catalog',
          join(dir, 'items.jsonl'),
          '--out',
          join(dir, 'v.bin'),
          '--no-cache',
          '--no-progress',
          '--threads',
          String(th),
        ],
        { encoding: 'utf8' },
      );
      if (r.status !== 0) throw new Error(`atomem-vectors --threads ${th} exited with ${r.status}: ${r.stderr}`);
      const wall = (performance.now() - w0) / 1000;
      const c = r.stdout.trim().split('\n').at(-1) ?? '';
      rows.push(`| atomem-vectors --threads ${th} (whole command) | ${wall.toFixed(2)} | — | ${(texts.length / wall).toFixed(1)} | — |`);
      process.stderr.write(`use-lite-speed: --threads ${th}: ${c}\n`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(
    `\nUSE-lite in Node, ${texts.length} texts, ${(tokens / texts.length).toFixed(1)} tokens per text, one thread; load average ${loadavg()[0].toFixed(1)} on ${cpus().length} cores\n\n`,
  );
  process.stdout.write('| phase | wall s | CPU s | items/s (wall) | items per CPU-second |\n|---|---:|---:|---:|---:|\n');
  process.stdout.write(`${rows.join('\n')}\n`);
}

const invoked = process.argv[1] ? pathToFileURL(resolve(process.argv[1])).href : '';
if (import.meta.url === invoked)
  main().catch((e: Error) => {
    process.stderr.write(`use-lite-speed: ${e.stack ?? e.message}\n`);
    process.exit(1);
  });
