import { describe, expect, it } from 'vitest';
import { Bm25Method } from '../src/baselines.js';
import { buildProtocol, intentFor } from '../src/protocol.js';
import type { MethodFactory } from '../src/registry.js';
import { runBenchmark } from '../src/run.js';
import type { RankCase } from '../src/types.js';
import type { Interaction } from 'atomem/engine';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

describe('setting instruct', () => {
  it("intents are the target's categories in words, never its title or id", () => {
    expect(intentFor(['Comedy'])).toBe('Looking for a comedy');
    expect(intentFor(['Crime', 'Thriller'])).toBe('Looking for a crime or a thriller');
    expect(intentFor(['Drama', 'Romance', 'War'])).toBe('Looking for a drama, a romance or a war');
    expect(intentFor(['Animation'])).toBe('Looking for an animation');
    expect(intentFor([])).toBe('Looking for something new');
    const ds = twoGroupDataset({ usersPerGroup: 8 });
    for (const c of buildProtocol(ds, { setting: 'instruct' }).cases) {
      const item = ds.items.get(c.test.item)!;
      expect(c.intent).toBe(intentFor(item.categories));
      expect(c.intent).not.toContain(item.title);
      expect(c.intent).not.toContain(c.test.item);
    }
  });

  it('has the same users, candidates and histories as full; BM25 ranks by the intent', async () => {
    const ds = twoGroupDataset({ usersPerGroup: 8 });
    const full = buildProtocol(ds, { setting: 'full' });
    const inst = buildProtocol(ds, { setting: 'instruct' });
    expect(inst.cases.map((c) => c.candidates)).toEqual(full.cases.map((c) => c.candidates));
    expect([...inst.histories]).toEqual([...full.histories]);
    const bm25 = new Bm25Method();
    await bm25.prepare({ dataset: ds, cases: inst.cases, histories: inst.histories, seed: 1, privacy: 'off', progress: () => {} });
    const c = inst.cases[0];
    const q = bm25.rank({ ...c, history: [] }); // no history at all: only the intent speaks
    const cats = (id: string) => ds.items.get(id)!.categories!.join();
    expect(cats(q[0])).toBe(cats(c.test.item));
  });
});

describe('setting evolving', () => {
  const ds = twoGroupDataset({ usersPerGroup: 6, len: 12 });

  it('tests the last N interactions in time order; step j history holds steps 1..j-1', () => {
    const p = buildProtocol(ds, { setting: 'evolving', steps: 3 });
    const users = [...new Set(p.cases.map((c) => c.user))];
    expect(p.cases).toHaveLength(users.length * 3);
    for (const u of users) {
      const seq = ds.sequences.get(u)!;
      const mine = p.cases.filter((c) => c.user === u);
      expect(mine.map((c) => c.step)).toEqual([1, 2, 3]);
      expect(mine.map((c) => c.test.item)).toEqual(seq.slice(-3).map((x) => x.item));
      for (const c of mine) {
        expect(c.history).toEqual(seq.slice(0, seq.length - 3 - 1 + c.step!));
        expect(c.candidates).toContain(c.test.item);
        expect(c.candidates.filter((id) => seq.some((x) => x.item === id))).toEqual([c.test.item]);
      }
      expect(p.histories.get(u)).toEqual(seq.slice(0, -3));
    }
    expect(() => buildProtocol(ds, { setting: 'evolving', target: 'validation' })).toThrow(/no validation/);
  });

  it('the runner calls observe with each revealed target after its step, before the next step', async () => {
    const log: string[] = [];
    const spy: MethodFactory = () => ({
      name: 'spy',
      async prepare() {},
      rank(c: RankCase) {
        log.push(`rank ${c.step} ${c.user}`);
        return [...c.candidates];
      },
      observe(user: string, it: Interaction) {
        log.push(`observe ${user} ${it.item}`);
      },
    });
    const { results } = await runBenchmark({ dataset: ds, setting: 'evolving', steps: 2, methods: ['spy'], factories: new Map([['spy', spy]]) });
    const p = buildProtocol(ds, { setting: 'evolving', steps: 2 });
    const n = p.cases.length / 2;
    const firstObserve = log.findIndex((l) => l.startsWith('observe'));
    expect(firstObserve).toBe(n); // every step-1 case ranked first
    expect(log.slice(n, 2 * n)).toEqual(p.cases.slice(0, n).map((c) => `observe ${c.user} ${c.test.item}`));
    expect(log.slice(2 * n, 3 * n).every((l) => l.startsWith('rank 2'))).toBe(true);
    expect((results[0].perStep as { step: number; n: number }[]).map((s) => [s.step, s.n])).toEqual([
      [1, n],
      [2, n],
    ]);
    expect(results[0].setting).toBe('evolving');
  });
});
