/**
 * Protocols `loo-full` and `temporal` (all items ranked), the `sequences` format, the
 * pessimistic full rank, recent popularity, and the runner / CLI over them.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main } from '../src/cli.js';
import { DatasetError, loadDataset } from '../src/datasets.js';
import { buildFullProtocol, fullRank } from '../src/full-protocol.js';
import { methodFactories } from '../src/methods.js';
import { buildProtocol } from '../src/protocol.js';
import { PopRecentMethod, DAY_MS } from '../src/baselines.js';
import type { MethodFactory } from '../src/registry.js';
import { runBenchmark } from '../src/run.js';
import type { Dataset, Method, MethodContext, RankCase } from '../src/types.js';
import { randomDataset, twoGroupDataset } from '../../../test/fixtures/synthetic.js';

const FIXTURES = resolve(import.meta.dirname, '../../../test/fixtures');
const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

describe('format sequences', () => {
  it('reads user_sequence.txt: one user per line, oldest first, at = position, ids as titles', () => {
    const ds = loadDataset('sequences', join(FIXTURES, 'sequences-tiny'));
    expect(ds.format).toBe('sequences');
    expect(ds.ordinalTime).toBe(true);
    expect([...ds.sequences.keys()]).toEqual(['u1', 'u2', 'u3', 'u4']);
    expect(ds.sequences.get('u3')!.map((x) => [x.item, x.at])).toEqual([
      ['s1', 0],
      ['s4', 1],
      ['s6', 2],
      ['s2', 3],
      ['s7', 4],
    ]);
    expect(ds.items.size).toBe(7);
    expect(ds.items.get('s5')).toEqual({ id: 's5', title: 's5' });
  });

  it('applies --kcore (catalog pruned to the surviving items)', () => {
    const ds = loadDataset('sequences', join(FIXTURES, 'sequences-tiny'), { kcore: 3 });
    for (const seq of ds.sequences.values()) expect(seq.length).toBeGreaterThanOrEqual(3);
    for (const id of ds.items.keys()) expect([...ds.sequences.values()].some((s) => s.some((x) => x.item === id))).toBe(true);
  });

  it('refuses a missing file, a user twice, a user without items', () => {
    const dir = mkdtempSync(join(tmpdir(), 'atomem-seq-'));
    tmp.push(dir);
    expect(() => loadDataset('sequences', dir)).toThrow(DatasetError);
    writeFileSync(join(dir, 'user_sequence.txt'), 'a x y\na z\n');
    expect(() => loadDataset('sequences', dir)).toThrow(/appears twice/);
    writeFileSync(join(dir, 'user_sequence.txt'), 'a x y\nb\n');
    expect(() => loadDataset('sequences', dir)).toThrow(/has no item/);
  });
});

describe('fullRank (pessimistic)', () => {
  it('counts candidates scored above the target and ties against it, skips excluded slots', () => {
    const s = Float32Array.of(0.5, 0.9, 0.5, 0.1, 0.9);
    const none = new Uint8Array(5);
    expect(fullRank(s, 1, none)).toBe(2); // 0.9 ties once
    expect(fullRank(s, 0, none)).toBe(4); // two above, one tie
    expect(fullRank(s, 3, none)).toBe(5);
    expect(fullRank(s, 1, Uint8Array.of(0, 0, 0, 0, 1))).toBe(1); // the tie is in the history
  });
  it('NaN is −∞; a target at −∞ ties with every other −∞ or NaN', () => {
    const s = Float32Array.of(NaN, 1, -Infinity, NaN);
    expect(fullRank(s, 1, new Uint8Array(4))).toBe(1);
    expect(fullRank(s, 0, new Uint8Array(4))).toBe(4);
    expect(fullRank(s, 2, new Uint8Array(4))).toBe(4);
  });
  it('all scores equal: the target is last (never favoured)', () => {
    expect(fullRank(new Float32Array(100), 37, new Uint8Array(100))).toBe(100);
  });
});

describe('buildFullProtocol', () => {
  const ds = randomDataset({ users: 40, items: 60, minLen: 3, maxLen: 12, seed: 3 });

  it('loo-full: the users, histories and targets of loo, no candidates', () => {
    const full = buildFullProtocol(ds, 'loo-full', { users: 15, seed: 9 });
    const loo = buildProtocol(ds, { users: 15, seed: 9 });
    expect(full.cases.map((c) => [c.user, c.test.item, c.history.length])).toEqual(loo.cases.map((c) => [c.user, c.test.item, c.history.length]));
    for (const c of full.cases) expect(c.candidates).toEqual([]);
    const v = buildFullProtocol(ds, 'loo-full', { target: 'validation' });
    for (const c of v.cases) expect(c.test.item).toBe(ds.sequences.get(c.user)!.at(-2)!.item);
  });

  it('temporal: one global cut; histories before it; target = first event at or after it; cold users not tested', () => {
    const items = new Map([...'abcdefgh'].map((id) => [id, { id, title: id }]));
    const ev = (item: string, at: number) => ({ item, at });
    const sequences = new Map([
      ['u1', [ev('a', 1), ev('b', 2), ev('c', 9), ev('d', 10)]],
      ['u2', [ev('a', 3), ev('e', 4)]], // nothing after the cut
      ['u3', [ev('f', 8), ev('g', 9)]], // cold: nothing before the cut
      ['u4', [ev('b', 5), ev('h', 8), ev('a', 8)]],
    ]);
    const d: Dataset = { name: 't', items, sequences };
    // 11 event times; the 0.6 quantile (lower order statistic) is 8
    const p = buildFullProtocol(d, 'temporal', { cut: 0.6 });
    expect(p.cutTime).toBe(8);
    expect(p.cases.map((c) => [c.user, c.test.item, c.history.map((x) => x.item).join('')])).toEqual([
      ['u1', 'c', 'ab'],
      ['u4', 'h', 'b'],
    ]);
    // every case is ranked at the cut (the moment the methods' data ends), not at its last event
    for (const c of p.cases) expect(c.now).toBe(8);
    expect(p.histories.get('u3')).toEqual([]);
    expect(p.histories.get('u1')!.map((x) => x.item)).toEqual(['a', 'b']);
    expect(p.warnings.join(' ')).toMatch(/1 users .*\(cold start\)/);
    // validation: the same quantile inside the log before the cut, learn and test before it
    const v = buildFullProtocol(d, 'temporal', { cut: 0.6, target: 'validation' });
    expect(v.cutTime).toBeLessThan(8);
    for (const c of v.cases) expect(c.test.at).toBeLessThan(8);
    for (const c of v.cases) expect(c.now).toBe(v.cutTime);
    for (const h of v.histories.values()) for (const x of h) expect(x.at).toBeLessThan(v.cutTime!);
    // another validation origin (rolling-origin validation): the 0.2 quantile of the pre-cut times 1 2 3 4 5
    expect(v.cutTime).toBe(4);
    const early = buildFullProtocol(d, 'temporal', { cut: 0.6, validationCut: 0.2, target: 'validation' });
    expect(early.cutTime).toBe(2);
    expect(early.cases.map((c) => [c.user, c.test.item, c.history.map((x) => x.item).join('')])).toEqual([['u1', 'b', 'a']]);
    // the test split ignores it
    expect(buildFullProtocol(d, 'temporal', { cut: 0.6, validationCut: 0.2 }).cutTime).toBe(8);
    expect(() => buildFullProtocol(d, 'temporal', { validationCut: 1, target: 'validation' })).toThrow(RangeError);
  });

  it('temporal refuses a dataset with order only', () => {
    const ds2 = loadDataset('sequences', join(FIXTURES, 'sequences-tiny'));
    expect(() => buildFullProtocol(ds2, 'temporal')).toThrow(/needs timestamps/);
  });
});

describe('pop7d', () => {
  it('counts the last 7 days before the latest event; all-time counts break its ties', () => {
    const items = new Map([...'abc'].map((id) => [id, { id, title: id }]));
    const t = 100 * DAY_MS;
    const histories = new Map([
      [
        'u1',
        [
          { item: 'a', at: t - 30 * DAY_MS },
          { item: 'a', at: t - 20 * DAY_MS },
          { item: 'b', at: t - 2 * DAY_MS },
        ],
      ],
      [
        'u2',
        [
          { item: 'a', at: t - 10 * DAY_MS },
          { item: 'c', at: t },
        ],
      ],
      ['u3', [{ item: 'c', at: t - 1 * DAY_MS }]],
    ]);
    const ds: Dataset = { name: 'x', items, sequences: histories };
    const m = new PopRecentMethod();
    const catalog = ['a', 'b', 'c'];
    const ctx = {
      dataset: ds,
      cases: [],
      histories,
      seed: 1,
      privacy: 'off',
      progress: () => {},
      catalog,
      catalogIndex: new Map(catalog.map((id, i) => [id, i])),
    } as MethodContext;
    void m.prepare(ctx);
    const out = new Float32Array(3);
    m.scoreAll({ user: 'u1', history: [], candidates: [], now: t }, out);
    expect(out[2]).toBeGreaterThan(out[1]); // c: 2 in the window
    expect(out[1]).toBeGreaterThan(out[0]); // b: 1 in the window; a: 0 (3 all-time only)
    expect(m.rank({ user: 'u1', history: [], candidates: ['a', 'b', 'c'], now: t })).toEqual(['c', 'b', 'a']);
  });
});

/** An oracle that knows the targets (a test double for the runner's rank arithmetic). */
function oracle(targets: Map<string, string>, mode: 'perfect' | 'flat' | 'second'): MethodFactory {
  return () => {
    let ctx: MethodContext;
    const m: Method = {
      name: `oracle-${mode}`,
      prepare(c) {
        ctx = c;
        return Promise.resolve();
      },
      rank: (c: RankCase) => c.candidates,
      scoreAll(c: RankCase, out: Float32Array) {
        if (mode === 'flat') return out.fill(0) && undefined;
        const t = ctx.catalogIndex!.get(targets.get(c.user)!)!;
        out.fill(0);
        out[t] = 1;
        if (mode === 'second') {
          const hist = new Set(c.history.map((x) => ctx.catalogIndex!.get(x.item)));
          let k = 0;
          while (k === t || hist.has(k)) k++;
          out[k] = 2;
        }
      },
    };
    return m;
  };
}

describe('runBenchmark, full-ranking protocols', () => {
  const ds = twoGroupDataset({ usersPerGroup: 20, itemsPerGroup: 15 });
  const targets = new Map([...ds.sequences].map(([u, s]) => [u, s.at(-1)!.item]));

  it('ranks the target among every non-history item: perfect → 1, one above → NDCG 1/log2 3, all tied → last', async () => {
    const factories = new Map<string, MethodFactory>([
      ['perfect', oracle(targets, 'perfect')],
      ['second', oracle(targets, 'second')],
      ['flat', oracle(targets, 'flat')],
    ]);
    const r = await runBenchmark({ dataset: ds, protocol: 'loo-full', factories, resamples: 100 });
    const row = (m: string) => r.results.find((x) => x.method === m)!;
    expect(row('perfect').ndcg10).toBe(1);
    expect(row('perfect').recall10).toBe(1);
    expect(row('perfect').protocol).toBe('loo-full');
    expect(row('second').ndcg10).toBeCloseTo(1 / Math.log2(3), 12);
    expect(row('second').mrr).toBeCloseTo(0.5, 12);
    // all tied: rank = every catalog item the user has not interacted with (31 items, 7 in history before the target)
    const n = ds.items.size;
    const histLen = ds.sequences.get('a0')!.length - 1;
    expect(row('flat').mrr).toBeCloseTo(1 / (n - histLen), 12);
    expect(row('flat').ndcg10).toBe(0);
    expect(r.config.protocol).toBe('loo-full');
    expect(r.config.reference).toBe('perfect');
    const c = r.contrasts.find((x) => x.a === 'flat' && x.metric === 'ndcg10')!;
    expect(c.b).toBe('perfect');
    expect(c.diff).toBe(-1);
    expect(r.contrasts.some((x) => x.metric === 'hr10')).toBe(true);
  });

  it('the baselines score the whole catalog and learn the two groups (above popularity)', async () => {
    const r = await runBenchmark({
      dataset: ds,
      protocol: 'loo-full',
      methods: ['pop', 'itemknn', 'ease', 'bpr'],
      params: { 'bpr.epochs': '20' },
      resamples: 100,
    });
    const by = Object.fromEntries(r.results.map((x) => [x.method, x]));
    for (const m of ['itemknn', 'ease', 'bpr']) expect(by[m].recall10, m).toBeGreaterThan(by.pop.recall10);
    expect(r.contrasts.filter((x) => x.metric === 'ndcg10').map((x) => x.a)).toEqual(['itemknn', 'ease', 'bpr']);
    for (const x of r.results) expect(Number.isNaN(x.entropy5)).toBe(true); // no top lists kept
  });

  it('restricted EASE (ease.topItems): only the most frequent items get a column, the rest score −∞, and the row says so', async () => {
    const r = await runBenchmark({ dataset: ds, protocol: 'loo-full', methods: ['ease'], params: { 'ease.topItems': '10' }, resamples: 50 });
    expect(String(r.results[0].easeItems)).toMatch(/^10 most frequent of \d+ \(restricted\)$/);
    const full = await runBenchmark({ dataset: ds, protocol: 'loo-full', methods: ['ease'], resamples: 50 });
    expect(full.results[0].easeItems).toBeUndefined();
    expect(r.results[0].recall10).toBeLessThanOrEqual(full.results[0].recall10);
  });

  it('sasrec in loo-full: the catalog-scaled settings (full-softmax CE on a small catalog), early-stopped on held-out last items, the best checkpoint scores every item', async () => {
    const params = {
      'sasrec.epochs': '12',
      'sasrec.evalEvery': '2',
      'sasrec.patience': '2',
      'sasrec.dim': '16',
      'sasrec.maxLen': '8',
      'sasrec.blocks': '1',
      'sasrec.threads': '1',
      'sasrec.chunks': '1',
      'sasrec.batchSize': '16',
      'sasrec.lr': '0.01',
    };
    const r = await runBenchmark({ dataset: ds, protocol: 'loo-full', methods: ['pop', 'sasrec'], params, resamples: 50 });
    const row = r.results.find((x) => x.method === 'sasrec')!;
    expect(row.loss).toBe('ce');
    // sasrecProfile: 30 items → full softmax; histories under 20 items → dropout 0.5 (not given); explicit maxLen and lr win
    expect(row.settings).toEqual({ loss: 'ce', dropout: 0.5, maxLen: 8, lr: 0.01 });
    const curve = row.validation as { epoch: number; ndcg10: number }[];
    expect(curve.length).toBeGreaterThan(0);
    expect(curve.every((p) => p.epoch % 2 === 0 || p.epoch === 12)).toBe(true);
    expect(row.bestEpoch).toBe(curve.reduce((a, p) => (p.ndcg10 > a.ndcg10 ? p : a)).epoch);
    expect(row.recall10).toBeGreaterThan(r.results.find((x) => x.method === 'pop')!.recall10);
    await expect(runBenchmark({ dataset: ds, protocol: 'loo-full', methods: ['sasrec'], params: { ...params, 'sasrec.loss': 'nope' } })).rejects.toThrow(
      /sasrec.loss must be/,
    );
  }, 120_000);

  it('refuses a method without scoreAll, a non-full setting, and an unknown reference', async () => {
    await expect(runBenchmark({ dataset: ds, protocol: 'loo-full', methods: ['bm25'] })).rejects.toThrow(/cannot rank the whole catalog/);
    await expect(runBenchmark({ dataset: ds, protocol: 'loo-full', setting: 'sample', methods: ['pop'] })).rejects.toThrow(/setting full only/);
    await expect(runBenchmark({ dataset: ds, protocol: 'loo-full', methods: ['pop'], reference: 'ease' })).rejects.toThrow(/reference ease/);
  });

  it('temporal runs on timestamped data; methods learn only from events before the cut and rank at it', async () => {
    const seen: number[] = [];
    const moments: number[] = [];
    const factories = new Map<string, MethodFactory>([
      [
        'spy',
        () => ({
          name: 'spy',
          prepare(c: MethodContext) {
            for (const h of c.histories.values()) for (const x of h) seen.push(x.at);
            return Promise.resolve();
          },
          rank: (c: RankCase) => c.candidates,
          scoreAll: (c: RankCase, out: Float32Array) => {
            moments.push(c.now);
            out.fill(0);
          },
        }),
      ],
      ['pop', methodFactories.get('pop')!],
    ]);
    const d = randomDataset({ users: 30, items: 40, minLen: 4, maxLen: 10, seed: 5 });
    const r = await runBenchmark({ dataset: d, protocol: 'temporal', cut: 0.8, factories, resamples: 50 });
    expect(r.config.cutTime).toBeDefined();
    expect(Math.max(...seen)).toBeLessThan(r.config.cutTime!);
    expect(moments.length).toBe(r.results[0].n);
    expect(new Set(moments)).toEqual(new Set([r.config.cutTime]));
    expect(r.results[0].n).toBeGreaterThan(0);
  });
});

describe('CLI', () => {
  it('--format sequences --protocol loo-full prints NDCG@10, Recall@10, MRR; --json rows carry method, privacy, ndcg10, recall10, protocol', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'atomem-seq-cli-'));
    tmp.push(dir);
    const out: string[] = [];
    const spy = vi.spyOn(process.stdout, 'write').mockImplementation((s) => (out.push(String(s)), true));
    const json = join(dir, 'r.json');
    const code = await main([
      '--format',
      'sequences',
      '--data',
      join(FIXTURES, 'sequences-tiny'),
      '--protocol',
      'loo-full',
      '--methods',
      'pop,itemknn',
      '--no-progress',
      '--json',
      json,
    ]);
    spy.mockRestore();
    expect(code).toBe(0);
    expect(out.join('')).toMatch(/protocol loo-full/);
    expect(out.join('')).toMatch(/\| method \| privacy \| users \| NDCG@10 \| 95% CI \| Recall@10/);
    const rows = JSON.parse(readFileSync(json, 'utf8')).results;
    for (const r of rows) for (const k of ['method', 'privacy', 'ndcg10', 'recall10', 'protocol']) expect(r).toHaveProperty(k);
  });

  it('--protocol temporal on order-only data exits 2 with a clear message', async () => {
    const err: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((s) => (err.push(String(s)), true));
    const code = await main([
      '--format',
      'sequences',
      '--data',
      join(FIXTURES, 'sequences-tiny'),
      '--protocol',
      'temporal',
      '--methods',
      'pop',
      '--no-progress',
    ]);
    spy.mockRestore();
    expect(code).toBe(2);
    expect(err.join('')).toMatch(/needs timestamps/);
  });
});
