/**
 * Training that scales with the log: the streaming log reader (JSON Lines, gzip, columns,
 * errors with line numbers), the CLI on a gzipped log with --stats, and local EASE (each item's
 * column regressed on its neighbourhood), which equals dense EASE when every neighbourhood is the
 * whole catalog and every pair of items co-occurs.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../src/shop/cli.js';
import { LogColumns, LogInputError, readLogFile } from '../src/shop/log-reader.js';
import { trainShopModel, type ShopInteraction } from '../src/shop/train.js';
import { decodeShopModel } from '../src/protocol/shop-model-v1.js';

const dir = mkdtempSync(join(tmpdir(), 'atomem-shop-scale-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function seeded(seed: number) {
  let s = seed;
  return () => (s = (s * 1103515245 + 12345) % 2147483648) / 2147483648;
}

/** Users who each buy 3–8 of `n` items; one user buys everything (every pair co-occurs). */
function log(n: number, users: number, seed = 3): ShopInteraction[] {
  const rnd = seeded(seed);
  const rows: ShopInteraction[] = [];
  for (let u = 0; u < users; u++) {
    const k = 3 + Math.floor(rnd() * 6);
    for (let t = 0; t < k; t++) rows.push({ user: `u${u}`, item: `i${Math.floor(rnd() ** 1.5 * n)}`, at: 1000 * (u * 10 + t), action: 'purchase' });
  }
  for (let i = 0; i < n; i++) rows.push({ user: 'all', item: `i${i}`, at: i });
  return rows;
}

describe('streaming log reader', () => {
  const rows = log(20, 50);
  const text = `${rows.map((r) => JSON.stringify(r)).join('\r\n')}\n\n`;
  writeFileSync(join(dir, 'log.jsonl'), text);
  writeFileSync(join(dir, 'log.jsonl.gz'), gzipSync(text));

  it('reads plain and gzipped JSON Lines into the same columns, reporting progress', async () => {
    const calls: number[] = [];
    const a = await readLogFile(join(dir, 'log.jsonl'), { onProgress: (_, done) => calls.push(done) });
    const b = await readLogFile(join(dir, 'log.jsonl.gz'));
    expect(a.length).toBe(rows.length);
    expect(b.length).toBe(rows.length);
    expect(Array.from(b.columns().item)).toEqual(Array.from(a.columns().item));
    expect(b.users).toEqual(a.users);
    expect(calls.at(-1)).toBe(text.length);
    const r = 7;
    expect(a.users[a.columns().user[r]]).toBe(rows[r].user);
    expect(a.items[a.columns().item[r]]).toBe(rows[r].item);
    expect(a.columns().at[r]).toBe(rows[r].at);
  });

  it('skips items outside a given catalog and names the line of bad input', async () => {
    const c = await readLogFile(join(dir, 'log.jsonl'), { catalog: ['i0', 'i1'] });
    expect(c.items).toEqual(['i0', 'i1']);
    expect(c.length + c.skipped).toBe(rows.length);
    writeFileSync(join(dir, 'bad.jsonl'), '{"user":"a","item":"b","at":1}\n{"user":"a","item":"b"}\n');
    await expect(readLogFile(join(dir, 'bad.jsonl'))).rejects.toThrow(/bad\.jsonl:2: "at" must be/);
    writeFileSync(join(dir, 'bad2.jsonl'), '{"user":"a","item":"b","at":1,"action":"fly"}\n');
    await expect(readLogFile(join(dir, 'bad2.jsonl'))).rejects.toThrow(LogInputError);
    writeFileSync(join(dir, 'bad3.jsonl'), 'nope\n');
    await expect(readLogFile(join(dir, 'bad3.jsonl'))).rejects.toThrow(/bad3\.jsonl:1: not JSON/);
  });

  it('trains the same model from columns as from row objects', () => {
    const cols = new LogColumns();
    for (const r of rows) cols.add(r.user, r.item, r.at, r.action);
    const opts = { random: seeded(1), dim: 4 };
    const a = trainShopModel(rows, { ...opts, random: seeded(1) });
    const b = trainShopModel(cols, { ...opts, random: seeded(1) });
    expect(b.items).toEqual(a.items);
    expect(b.lists).toEqual(a.lists);
    expect(b.popularity).toEqual(a.popularity);
  });

  it('the CLI trains from a gzipped log and writes --stats', async () => {
    writeFileSync(join(dir, 'items.jsonl'), Array.from({ length: 20 }, (_, i) => JSON.stringify({ id: `i${i}` })).join('\n'));
    let out = '';
    let err = '';
    const code = await main(
      [
        '--interactions',
        join(dir, 'log.jsonl.gz'),
        '--items',
        join(dir, 'items.jsonl'),
        '--out',
        join(dir, 'm.bin'),
        '--dim',
        '4',
        '--ease',
        'local',
        '--stats',
        join(dir, 'stats.json'),
      ],
      { stdout: (s) => (out += s), stderr: (s) => (err += s) },
    );
    expect(err).toBe('');
    expect(code).toBe(0);
    expect(out).toMatch(new RegExp(`20 items .*${rows.length} log rows.*peak RSS \\d+ MB`));
    const stats = JSON.parse(readFileSync(join(dir, 'stats.json'), 'utf8')) as { peakRssBytes: number; fileBytes: number; stages: Record<string, number> };
    expect(stats.fileBytes).toBe(readFileSync(join(dir, 'm.bin')).length);
    expect(stats.peakRssBytes).toBeGreaterThan(10 * 2 ** 20);
    expect(Object.keys(stats.stages)).toEqual(expect.arrayContaining(['read log', 'knn', 'ease (local)', 'encode']));
    expect(decodeShopModel(readFileSync(join(dir, 'm.bin'))).lists.ease.targets.length).toBeGreaterThan(0);
  });
});

describe('local EASE', () => {
  const rows = log(15, 300);
  const lists = (ease: 'dense' | 'local', extra: object = {}) =>
    trainShopModel(rows, { ease, k: { ease: 14 }, dim: 0, random: seeded(2), ...extra }).lists.ease;

  it('equals dense EASE when each neighbourhood is every other item', () => {
    const d = lists('dense');
    const l = lists('local', { easeNeighbours: 100 });
    expect(d.targets.length).toBeGreaterThan(50);
    expect(Array.from(l.offsets)).toEqual(Array.from(d.offsets));
    expect(Array.from(l.targets)).toEqual(Array.from(d.targets));
    for (let t = 0; t < d.weights.length; t++) expect(l.weights[t]).toBeCloseTo(d.weights[t], 4);
  });

  it('keeps at most K predictors per item with a small neighbourhood, and auto picks by catalog size', () => {
    const l = lists('local', { easeNeighbours: 3 });
    const perCandidate = new Map<number, number>();
    for (const t of l.targets) perCandidate.set(t, (perCandidate.get(t) ?? 0) + 1);
    expect(Math.max(...perCandidate.values())).toBeLessThanOrEqual(3);
    expect(trainShopModel(rows, { dim: 0, random: seeded(2) }).info.ease).toEqual({ method: 'dense' });
    expect(trainShopModel(rows, { dim: 0, random: seeded(2), denseEaseMax: 10 }).info.ease).toEqual({ method: 'local', neighbours: 14 });
    expect(() => trainShopModel(rows, { ease: 'local', orientation: { ease: 'out' }, random: seeded(2) })).toThrow(/orientation\.ease 'in'/);
  });
});

describe('collaborative vectors at catalog scale', () => {
  const rows = log(40, 120, 5);

  it('iterates 30 times up to largeAbove items with data (no mark in the file), largeIterations above', () => {
    const small = trainShopModel(rows, { random: seeded(4) });
    expect(small.info.vectors).not.toHaveProperty('iterations');
    const large = trainShopModel(rows, { random: seeded(4), largeAbove: 10, largeIterations: 4 });
    expect((large.info.vectors as Record<string, unknown>).iterations).toBe(4);
    expect(trainShopModel(rows, { random: seeded(4), iterations: 4 }).vectors!.values).toEqual(large.vectors!.values);
    expect(large.vectors!.values).not.toEqual(small.vectors!.values);
  });

  it('items nobody met get no vector and change nothing for the others', () => {
    // the same log with 500 more catalog items that nobody met: the same float32 vectors in the file
    // (the seeded start differs only in the unsold items' rows, which the first product zeroes)
    const catalog = Array.from({ length: 40 }, (_, i) => `i${i}`);
    const wide = [...catalog, ...Array.from({ length: 500 }, (_, i) => `unsold${i}`)];
    const a = trainShopModel(rows, { catalog, random: seeded(6), k: { ease: 8, knn: 8, markov: 8 } });
    const b = trainShopModel(rows, { catalog: wide, random: seeded(6), k: { ease: 8, knn: 8, markov: 8 } });
    expect(b.vectors!.values.subarray(0, 40 * 32)).toEqual(a.vectors!.values);
    expect(b.vectors!.values.subarray(40 * 32).every((x) => x === 0)).toBe(true);
  });
});
