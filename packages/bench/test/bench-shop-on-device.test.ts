// The benchmark's atomem with the shop's published model on the device and its
// ablations, through the CLI on a small synthetic two-taste dataset written as jsonl.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi, type MockInstance } from 'vitest';
import { main } from '../src/cli.js';
import { ABLATIONS, ablationsFor } from '../src/atomem-method.js';
import { defaultMethods, methodFactories } from '../src/methods.js';
import { pairedDiff } from '../src/run.js';
import { retainedHistories, trainings } from '../src/shop-publish.js';
import { fitListwise, meanNdcg, signalNames, type DumpedCase } from '../src/tune-weights.js';
import { Rng } from '../src/rng.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

interface Row {
  method: string;
  privacy: string | null;
  ndcg10: number;
  itemVectors?: string;
  shopLogUntil?: number | null;
  defaults?: unknown;
  ablationOf?: string;
  removes?: string;
  diffToFull?: { mean: number; ci: [number, number] };
  lifecyclePer1000?: Record<string, number>;
  trainSeconds?: number;
  memoriesPerUser?: number;
}

describe('bench: atomem with the shop model on the device', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'atomem-shopbench-'));
  const data = join(tmp, 'data');
  let err: MockInstance;
  let out: MockInstance;
  beforeAll(() => {
    process.env.ATOMEM_BENCH_CACHE = join(tmp, 'cache');
    const ds = twoGroupDataset({ usersPerGroup: 20, itemsPerGroup: 25, len: 16 });
    mkdirSync(data, { recursive: true });
    writeFileSync(join(data, 'items.jsonl'), `${[...ds.items.values()].map((it) => JSON.stringify(it)).join('\n')}\n`);
    const rows: string[] = [];
    for (const [user, seq] of ds.sequences) for (const x of seq) rows.push(JSON.stringify({ user, item: x.item, at: x.at }));
    writeFileSync(join(data, 'interactions.jsonl'), `${rows.join('\n')}\n`);
  });
  beforeEach(() => {
    err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  });
  afterEach(() => vi.restoreAllMocks());
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  const stdout = () => out.mock.calls.map((c) => String(c[0])).join('');
  const stderr = () => err.mock.calls.map((c) => String(c[0])).join('');
  // fast settings for a test: hashing embedder, no content map, 4 SASRec epochs
  const fast = [
    '--param',
    'atomem.embedder=hashing',
    '--param',
    'atomem.centre=0',
    '--param',
    'shop.content=none',
    '--param',
    'sasrec.epochs=4',
    '--param',
    'atomem.fidelityUsers=0',
  ];
  const run = async (
    args: string[],
  ): Promise<{ results: Row[]; paired: { a: string; b: string; mean: number; ci: [number, number] }[]; config: Record<string, unknown> }> => {
    const file = join(tmp, `out-${Math.random().toString(36).slice(2)}.json`);
    const code = await main(['--format', 'jsonl', '--data', data, '--privacy', 'off', '--no-progress', '--json', file, ...fast, ...args]);
    expect(code, stderr()).toBe(0);
    return JSON.parse(readFileSync(file, 'utf8'));
  };

  it('hybrid (default) and content rows say their item vectors, cut-off and defaults; shop, sasrec and atomem share one training', async () => {
    const before = { ...trainings };
    const r = await run(['--methods', 'pop,shop,sasrec,atomem']);
    // one training of each model for the three methods
    expect(trainings).toEqual({ shop: before.shop + 1, sasrec: before.sasrec + 1 });
    const row = (m: string) => r.results.find((x) => x.method === m)!;
    expect(row('atomem')).toMatchObject({
      itemVectors: 'hybrid',
      shopLogUntil: 1,
      defaults: { overridden: ['atomem.centre', 'atomem.embedder', 'sasrec.epochs', 'shop.content'] },
    });
    expect(r.config).toMatchObject({ itemVectors: 'hybrid', shopLogUntil: 1 });
    // two taste groups: the shop's collaborative model puts atomem far above popularity
    expect(row('atomem').ndcg10).toBeGreaterThan(row('pop').ndcg10 + 0.1);
    expect(r.paired.map((p) => `${p.a}-${p.b}`)).toEqual(['atomem-shop', 'atomem-sasrec']);
    const content = await run(['--methods', 'atomem', '--item-vectors', 'content']);
    expect(content.results[0]).toMatchObject({ itemVectors: 'content', shopLogUntil: null });
    expect(content.results[0].ndcg10).not.toBe(row('atomem').ndcg10);
    expect(stdout()).toMatch(/Lifecycle operations per 1,000 training events/);
    expect(stdout()).toMatch(/\| atomem@off − shop \| [+-]0\.\d{4} \| \[/);
  }, 120_000);

  it("loo-full: the shop file's SASRec is the sasrec baseline's model (cross-entropy, early-stopped on validation), trained once", async () => {
    const before = { ...trainings };
    const r = await run(['--protocol', 'loo-full', '--methods', 'sasrec,atomem', '--param', 'sasrec.evalEvery=2', '--param', 'sasrec.threads=1']);
    expect(trainings.sasrec).toBe(before.sasrec + 1);
    const sasrec = r.results.find((x) => x.method === 'sasrec') as Row & { loss?: string; bestEpoch?: number; validation?: unknown[] };
    const atomem = r.results.find((x) => x.method === 'atomem') as Row & { sasrecTraining?: { loss: string; bestEpoch: number; epochsRun: number } };
    expect(sasrec.loss).toBe('ce');
    expect(sasrec.validation!.length).toBeGreaterThan(0);
    expect(atomem.sasrecTraining).toMatchObject({ loss: 'ce', bestEpoch: sasrec.bestEpoch });
    // protocol loo keeps its fixed-epoch shared model: no early stopping reported
    const loo = await run(['--methods', 'sasrec,atomem']);
    expect((loo.results.find((x) => x.method === 'atomem') as { sasrecTraining?: unknown }).sasrecTraining).toBeUndefined();
    expect((loo.results.find((x) => x.method === 'sasrec') as { validation?: unknown }).validation).toBeUndefined();
  }, 120_000);

  it("loo-full with atomem.wholeCatalog=shortlist ranks through the library's whole-catalog recommend(); a bad value is refused", async () => {
    const r = await run([
      '--protocol',
      'loo-full',
      '--methods',
      'pop,atomem-no-sasrec',
      '--param',
      'atomem.wholeCatalog=shortlist',
      '--param',
      'atomem.shortlist=12',
    ]);
    const row = r.results.find((x) => x.method === 'atomem-no-sasrec') as Row & { wholeCatalog?: string };
    expect(row.wholeCatalog).toBe('shortlist');
    // agents let go after their one ranking still count in the row's statistics
    expect(row.memoriesPerUser).toBeGreaterThan(0);
    // two taste groups: a 12-item shortlist of 50 items still finds the user's group
    expect(row.ndcg10).toBeGreaterThan(r.results.find((x) => x.method === 'pop')!.ndcg10 + 0.1);
    const both = await run(['--protocol', 'loo-full', '--methods', 'atomem-no-sasrec,atomem-shortlist,atomem']);
    const kind = (m: string) => (both.results.find((x) => x.method === m) as { wholeCatalog?: string }).wholeCatalog;
    expect([kind('atomem-no-sasrec'), kind('atomem-shortlist'), kind('atomem')]).toEqual(['candidates', 'shortlist', 'candidates']);
    expect(defaultMethods()).not.toContain('atomem-shortlist');
    expect(
      await main(['--format', 'jsonl', '--data', data, '--protocol', 'loo-full', '--methods', 'atomem', '--param', 'atomem.wholeCatalog=some', ...fast]),
    ).toBe(2);
    expect(stderr()).toMatch(/atomem.wholeCatalog must be candidates or shortlist/);
  }, 120_000);

  it('--shop-log-until trains the published model on the older part of the log only', async () => {
    const full = await run(['--methods', 'shop,atomem']);
    const cut = await run(['--methods', 'shop,atomem', '--shop-log-until', '0.3']);
    expect(cut.results.find((x) => x.method === 'atomem')!.shopLogUntil).toBe(0.3);
    // a model of 30 % of the log ranks differently (a flag that did nothing would give the same figures)
    expect(cut.results.map((x) => x.ndcg10)).not.toEqual(full.results.map((x) => x.ndcg10));
    expect(await main(['--format', 'jsonl', '--data', data, '--shop-log-until', '1.5', '--methods', 'atomem'])).toBe(2);
    expect(await main(['--format', 'jsonl', '--data', data, '--item-vectors', 'both', '--methods', 'atomem'])).toBe(2);
    // the removed protocol v1's level is refused by name
    expect(await main(['--format', 'jsonl', '--data', data, '--methods', 'atomem', '--privacy', 'items', ...fast])).toBe(2);
    expect(stderr()).toMatch(/unknown level items \(off, contribute\)/);
    const h = new Map([
      [
        'u',
        [
          { item: 'a', at: 1 },
          { item: 'b', at: 2 },
          { item: 'c', at: 3 },
          { item: 'd', at: 4 },
        ],
      ],
    ]);
    expect(
      retainedHistories(h, 0.5)
        .get('u')!
        .map((x) => x.item),
    ).toEqual(['a', 'b']);
    expect(retainedHistories(h, 1).get('u')!.length).toBe(4);
  }, 120_000);

  it('--methods atomem,ablations runs every ablation with ablationOf, removes and a paired difference to full atomem', async () => {
    const r = await run(['--methods', 'atomem,ablations']);
    const names = r.results.map((x) => x.method);
    expect(names[0]).toBe('atomem');
    expect(names).toEqual(
      expect.arrayContaining([
        'atomem-no-memory-signals',
        'atomem-no-shop-model',
        'atomem-no-sasrec',
        'atomem-no-consolidation',
        'atomem-single-summary',
        'atomem-no-signal-ease',
      ]),
    );
    for (const x of r.results.slice(1)) {
      expect(x.ablationOf).toBe('atomem');
      expect(typeof x.removes).toBe('string');
      expect(x.diffToFull!.ci[0]).toBeLessThanOrEqual(x.diffToFull!.mean);
      expect(x.diffToFull!.ci[1]).toBeGreaterThanOrEqual(x.diffToFull!.mean);
    }
    const row = (m: string) => r.results.find((x) => x.method === m)!;
    expect(row('atomem-no-shop-model').itemVectors).toBe('content');
    // the structure ablations really change the memory: one memory per user / no reinforcement
    expect(row('atomem-single-summary').memoriesPerUser).toBe(1);
    expect(row('atomem-no-consolidation').lifecyclePer1000!.reinforce).toBe(0);
    expect(row('atomem-no-consolidation').lifecyclePer1000!.merge).toBe(0);
    expect(row('atomem').lifecyclePer1000!.reinforce).toBeGreaterThan(0);
    // ablations are not in the default method list
    expect(defaultMethods().some((m) => methodFactories.get(m)!.ablation)).toBe(false);
    // a setting's controls run by default only in their setting
    expect(defaultMethods('full')).not.toContain('atomem-no-intent');
    expect(defaultMethods('full')).not.toContain('atomem-frozen');
    expect(defaultMethods('instruct')).toContain('atomem-no-intent');
    expect(defaultMethods('evolving')).toContain('atomem-frozen');
    expect(ablationsFor({ 'atomem.itemVectors': 'content' })).not.toContain('atomem-no-shop-model');
    expect(ABLATIONS.every((a) => methodFactories.get(a.name)?.ablation)).toBe(true);
  }, 240_000);

  it('pairedDiff: mean of per-user differences with an interval that excludes 0 for a consistent gain', () => {
    const a = Array.from({ length: 200 }, (_, i) => 0.5 + (i % 7) * 0.01);
    const b = a.map((x) => x - 0.05);
    const d = pairedDiff(a, b, 1);
    expect(d.mean).toBeCloseTo(0.05, 10);
    expect(d.ci[0]).toBeGreaterThan(0);
    expect(d.better).toBe(200);
    expect(() => pairedDiff([1], [1, 2], 1)).toThrow(/1 vs 2/);
  });

  it('tuning: the joint listwise fit finds the informative signal, drops constant ones, and its cross-validated NDCG beats a wrong start', () => {
    const rng = new Rng(5);
    const cases: DumpedCase[] = [];
    const targets = new Map<string, string>();
    for (let u = 0; u < 200; u++) {
      const pos = rng.int(10);
      targets.set(`u${u}`, `i${pos}`);
      cases.push({
        user: `u${u}`,
        candidates: Array.from(
          { length: 10 },
          (_, i) => [`i${i}`, { good: (i === pos ? 1 : 0) + rng.next(), noise: rng.next(), flat: 3 }] as [string, Record<string, number>],
        ),
      });
    }
    const names = signalNames(cases);
    expect(names.sort()).toEqual(['good', 'noise']);
    const fit = fitListwise(cases, targets, names);
    expect(fit.weights.good).toBe(1);
    expect(Math.abs(fit.weights.noise)).toBeLessThan(0.3);
    expect(fit.cvNdcg10).toBeGreaterThan(meanNdcg(cases, targets, { good: -1, noise: 0 }) + 0.3);
  });
});
