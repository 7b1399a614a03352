import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { main, parseUsers, resolveDataDir } from '../src/cli.js';
import { BASELINE_METHODS, defaultMethods, methodFactories } from '../src/methods.js';
import { registerMethod, type MethodFactory } from '../src/registry.js';
import { BenchUsageError, markdownTable, planRuns, runBenchmark } from '../src/run.js';
import type { EvalCase, Method, MethodContext } from '../src/types.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

const FIXTURES = resolve(import.meta.dirname, '../../../test/fixtures');

/** A fake privacy-aware method that records what it saw and reports extras. */
function spyFactory(log: string[]): MethodFactory {
  const f: MethodFactory = (opts) => {
    let ctx: MethodContext;
    const m: Method = {
      name: 'spy',
      async prepare(c) {
        ctx = c;
        log.push(`prepare ${opts.privacy} ${c.privacy} ${c.cases.length} ${c.cases[0].candidates.join(',')}`);
        c.cases[0].candidates.reverse(); // mutating its copy must not leak into other methods
      },
      rank(c: EvalCase) {
        return [...c.candidates].sort();
      },
      extras: () => ({ fidelityF1: 0.5, privacyUsed: ctx.privacy }),
    };
    return m;
  };
  f.privacyLevels = ['off', 'contribute'];
  return f;
}

describe('runBenchmark', () => {
  const dataset = twoGroupDataset({ usersPerGroup: 30 });

  it('runs every method on the same cases, one row per privacy level, with metrics, CI, seconds and extras', async () => {
    const log: string[] = [];
    const factories = new Map<string, MethodFactory>([...methodFactories].filter(([k]) => BASELINE_METHODS.includes(k as never)));
    factories.set('spy', spyFactory(log));
    const rows: string[] = [];
    const result = await runBenchmark({
      dataset,
      methods: ['random', 'pop', 'itemknn', 'spy'],
      privacy: ['off', 'contribute'],
      factories,
      onResult: (r) => rows.push(`${r.method}/${r.privacy}`),
    });
    expect(rows).toEqual(['random/null', 'pop/null', 'itemknn/null', 'spy/off', 'spy/contribute']);
    const first = log[0].split(' ')[4];
    expect(log).toEqual([`prepare off off 60 ${first}`, `prepare contribute contribute 60 ${first}`]); // the reverse() did not leak
    expect(result.config).toMatchObject({ setting: 'full', target: 'test', users: 'all', seed: 2026, cases: 60, evaluableUsers: 60 });
    for (const r of result.results) {
      expect(r.n).toBe(60);
      expect(r.ci.ndcg10[0]).toBeLessThanOrEqual(r.ndcg10);
      expect(r.ci.ndcg10[1]).toBeGreaterThanOrEqual(r.ndcg10);
      expect(r.seconds).toBeGreaterThanOrEqual(0);
      expect(r.entropy5).toBeGreaterThanOrEqual(0);
      expect(r.coverage5).toBeGreaterThan(0);
    }
    const spy = result.results.find((r) => r.method === 'spy' && r.privacy === 'contribute')!;
    expect(spy).toMatchObject({ fidelityF1: 0.5, privacyUsed: 'contribute' });
    const knn = result.results.find((r) => r.method === 'itemknn')!;
    expect(knn.ndcg10).toBeGreaterThan(result.results[0].ndcg10);
    expect(markdownTable(result)).toMatch(/^\| method \| privacy \| n \| NDCG@1 .*\n\|---\|---\|---:/);
  });

  it('ILD of the top 5 when item vectors are given', async () => {
    const vectors = new Map([...dataset.items.keys()].map((id, i) => [id, [i % 2, 1]]));
    const r = await runBenchmark({ dataset, methods: ['pop'], itemVectors: vectors });
    expect(r.results[0].ild5).toBeGreaterThan(0);
  });

  it('rejects unknown methods, bad --users, and rankings that are not the candidates', async () => {
    await expect(runBenchmark({ dataset, methods: ['pop', 'nope'] })).rejects.toThrow(BenchUsageError);
    await expect(runBenchmark({ dataset, methods: ['pop'], users: 10_000 })).rejects.toThrow(/only 60 evaluable/);
    const bad = new Map<string, MethodFactory>([['bad', () => ({ name: 'bad', prepare: async () => {}, rank: (c: EvalCase) => c.candidates.slice(1) })]]);
    await expect(runBenchmark({ dataset, factories: bad })).rejects.toThrow(/must return the 10 candidates/);
    expect(planRuns(['spy'], ['contribute'], new Map([['spy', spyFactory([])]])).runs).toEqual([{ method: 'spy', privacy: 'contribute' }]);
  });

  it('registry: baselines registered, duplicates refused, default order puts baselines first', () => {
    for (const m of BASELINE_METHODS) expect(methodFactories.has(m)).toBe(true);
    expect(defaultMethods().slice(0, BASELINE_METHODS.length)).toEqual([...BASELINE_METHODS]);
    expect(() => registerMethod('pop', () => ({}) as Method)).toThrow(/already registered/);
    expect(() => registerMethod('x y', () => ({}) as Method)).toThrow(/invalid name/);
  });
});

describe('cli', () => {
  let err: MockInstance;
  let out: MockInstance;
  const tmp = mkdtempSync(join(tmpdir(), 'atomem-cli-'));
  beforeEach(() => {
    err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const stderr = () => err.mock.calls.map((c) => String(c[0])).join('');
  const jsonl = join(FIXTURES, 'jsonl-tiny');

  it('exit code 2 with a one-line error for bad --users, unknown methods, missing data', async () => {
    expect(await main(['--users', 'abc'])).toBe(2);
    expect(stderr()).toMatch(/--users.*positive integer or "all"/);
    err.mockClear();
    expect(await main(['--format', 'jsonl', '--data', jsonl, '--methods', 'pop,nope'])).toBe(2);
    expect(stderr()).toBe(`error: unknown method nope (known: ${defaultMethods().join(', ')})\n`);
    err.mockClear();
    expect(await main(['--data', join(tmp, 'absent')])).toBe(2);
    expect(stderr()).toMatch(/^error: movielens: data directory not found: .*absent\n$/);
    expect(await main(['--format', 'jsonl'])).toBe(2);
    expect(await main(['--privacy', 'secret'])).toBe(2);
    expect(await main(['--format', 'jsonl', '--data', jsonl, '--users', '50', '--methods', 'pop'])).toBe(2);
  });

  it('runs on a fixture: markdown on stdout, JSON file with config and rows', async () => {
    const file = join(tmp, 'out.json');
    expect(await main(['--format', 'jsonl', '--data', jsonl, '--methods', 'random,pop', '--json', file, '--no-progress'])).toBe(0);
    const text = out.mock.calls.map((c) => String(c[0])).join('');
    expect(text).toMatch(/\| pop \| — \| 2 \|/);
    const json = JSON.parse(readFileSync(file, 'utf8'));
    expect(json.config).toMatchObject({ format: 'jsonl', setting: 'full', seed: 2026, kcore: 0, cases: 2 });
    expect(json.results.map((r: { method: string }) => r.method)).toEqual(['random', 'pop']);
    expect(Object.keys(json.results[0])).toEqual(expect.arrayContaining(['method', 'privacy', 'n', 'ndcg1', 'ndcg5', 'ndcg10', 'hr1', 'mrr', 'ci', 'seconds']));
    expect(stderr()).toMatch(/warning: jsonl: skipped 1 interactions/);
  });

  it('parses --users and resolves the data folder', () => {
    expect(parseUsers('all')).toBe('all');
    expect(parseUsers('12')).toBe(12);
    expect(() => parseUsers('0')).toThrow();
    expect(() => parseUsers('-3')).toThrow();
    expect(resolveDataDir('movielens', undefined, { ATOMEM_ML100K: '/data/ml' }, '/repo')).toBe('/data/ml');
    expect(resolveDataDir('jsonl', 'rel', {}, '/repo')).toBe('/repo/rel');
    expect(() => resolveDataDir('movielens', undefined, {}, join(tmp, 'nowhere'))).toThrow(BenchUsageError);
  });
});
