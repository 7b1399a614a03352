import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { methodFactories } from '../src/methods.js';
import type { MethodFactory } from '../src/registry.js';
import { BenchUsageError, runBenchmark } from '../src/run.js';
import { buildProtocol } from '../src/protocol.js';
import type { Method, RankCase } from '../src/types.js';
import { coordinateSearch, meanNdcg, type DumpedCase } from '../src/tune-weights.js';
import { readVectorCache, writeVectorCache } from '../src/vector-cache.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

const tmp = mkdtempSync(join(tmpdir(), 'atomem-hygiene-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe('benchmark hygiene: what a method sees', () => {
  const dataset = twoGroupDataset({ usersPerGroup: 10 });

  it('rank() and prepare() get no target: no test field, now = the last history timestamp', async () => {
    const seen: RankCase[] = [];
    const prepared: RankCase[][] = [];
    const spy: MethodFactory = () =>
      ({
        name: 'spy',
        async prepare(ctx) {
          prepared.push(ctx.cases);
        },
        rank(c: RankCase) {
          seen.push(c);
          return [...c.candidates];
        },
      }) satisfies Method;
    await runBenchmark({ dataset, methods: ['spy'], factories: new Map([['spy', spy]]) });
    const truth = buildProtocol(dataset).cases;
    expect(seen).toHaveLength(truth.length);
    for (const [i, c] of seen.entries()) {
      expect(Object.keys(c).sort()).toEqual(['candidates', 'history', 'now', 'user']);
      expect(c.now).toBe(c.history[c.history.length - 1].at);
      expect(c.now).toBeLessThanOrEqual(truth[i].test.at);
      expect(c.history.map((x) => x.item)).not.toContain(truth[i].test.item);
    }
    for (const c of prepared[0]) expect('test' in c).toBe(false);
  });

  it('refuses a feature dump on test cases, allows it on validation', async () => {
    const dump = join(tmp, 'f.jsonl');
    const run = (validation: boolean) =>
      runBenchmark({
        dataset,
        methods: ['atomem'],
        privacy: ['off'],
        validation,
        params: { 'atomem.embedder': 'hashing', 'atomem.dumpFeatures': dump, 'atomem.fidelityUsers': '0' },
      });
    const err = await run(false).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BenchUsageError);
    expect(String(err)).toMatch(/refused on test/);
    await run(true);
    const lines = readFileSync(dump, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as DumpedCase);
    expect(lines).toHaveLength(buildProtocol(dataset, { target: 'validation' }).cases.length);
    expect(lines[0].candidates).toHaveLength(10);
    expect(Object.keys(lines[0].candidates[0][1])).toContain('profile');
  });

  it('forward accuracy counts a 0-vs-0 tie as half', async () => {
    expect(methodFactories.has('atomem')).toBe(true);
    const { results } = await runBenchmark({
      dataset,
      methods: ['atomem'],
      privacy: ['off'],
      params: { 'atomem.embedder': 'hashing', 'atomem.fidelityUsers': '0' },
    });
    const acc = results[0].forwardAccuracy as number;
    // the first step of every user has no memory: 0 vs 0, worth 0.5 — so accuracy is never a multiple of whole steps only
    expect(acc).toBeGreaterThan(0);
    expect(acc).toBeLessThan(1);
  });
});

describe('fidelity that cannot be computed says so', () => {
  it('reports null and a note, not 0, when no user has 15 interactions before the target', async () => {
    const dataset = twoGroupDataset({ usersPerGroup: 10 });
    const { results } = await runBenchmark({ dataset, setting: 'sample', methods: ['atomem'], privacy: ['off'], params: { 'atomem.embedder': 'hashing' } });
    expect(results[0]['fidelity1:1']).toMatchObject({ precision: null, f1: null, n: 0 });
    expect(String((results[0]['fidelity1:1'] as { note: string }).note)).toMatch(/not computable/);
  });
});

describe('tuning on dumped features', () => {
  it('coordinate search finds the informative signal and ignores the noise', () => {
    const cases: DumpedCase[] = [];
    const targets = new Map<string, string>();
    let seed = 1;
    const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    for (let u = 0; u < 200; u++) {
      const target = `t${u}`;
      targets.set(`u${u}`, target);
      const cands: DumpedCase['candidates'] = [];
      for (let i = 0; i < 10; i++) {
        const id = i === 3 ? target : `n${u}-${i}`;
        cands.push([id, { good: (i === 3 ? 1 : 0) + rnd() * 0.8, noise: rnd() }]);
      }
      cases.push({ user: `u${u}`, candidates: cands });
    }
    const start = { good: 0, noise: 1 };
    const fit = coordinateSearch(cases, targets, start);
    expect(fit.weights.good).toBeGreaterThan(0);
    expect(fit.weights.noise).toBeLessThan(fit.weights.good / 2);
    expect(fit.ndcg10).toBeGreaterThan(fit.start + 0.2);
    expect(meanNdcg(cases, targets, fit.weights)).toBeCloseTo(fit.ndcg10, 12);
  });
});

describe('binary vector cache', () => {
  const items = new Map([
    ['a', { id: 'a', title: 'Alpha' }],
    ['b', { id: 'b', title: 'Beta' }],
  ]);
  const emb = { id: 'test@1/float32', dim: 3 };

  it('round-trips, drops entries whose text changed, and warns instead of throwing on damage', () => {
    const warnings: string[] = [];
    const file = join(tmp, 'c.atmv');
    expect(
      writeVectorCache(
        file,
        emb,
        items,
        new Map([
          ['a', Float32Array.of(1, 0, 0)],
          ['b', Float32Array.of(0, 1, 0)],
        ]),
        (m) => warnings.push(m),
      ),
    ).toBe(true);
    const back = readVectorCache(file, emb, items, (m) => warnings.push(m));
    expect([...back.keys()].sort()).toEqual(['a', 'b']);
    expect(Array.from(back.get('b')!)).toEqual([0, 1, 0]);
    const edited = new Map(items).set('b', { id: 'b', title: 'Beta (new text)' });
    expect([...readVectorCache(file, emb, edited, (m) => warnings.push(m)).keys()]).toEqual(['a']);
    writeFileSync(file, 'garbage');
    expect(readVectorCache(file, emb, items, (m) => warnings.push(m)).size).toBe(0);
    expect(warnings.join('\n')).toMatch(/could not be read/);
  });

  it('a failed write is a warning naming the file', () => {
    const dir = join(tmp, 'ro');
    mkdirSync(dir);
    writeFileSync(join(dir, 'blocker'), '');
    const warnings: string[] = [];
    // a path through a regular file cannot be created, even as root
    expect(writeVectorCache(join(dir, 'blocker', 'x.atmv'), emb, items, new Map([['a', Float32Array.of(1, 0, 0)]]), (m) => warnings.push(m))).toBe(false);
    expect(warnings[0]).toMatch(/blocker.*could not be written/);
    chmodSync(dir, 0o755);
  });
});
