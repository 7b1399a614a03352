import { describe, expect, it } from 'vitest';
import { Bm25Method, BprMethod, EaseMethod, invertSpdInPlace, ItemKnnMethod, PopMethod, RandomMethod, rankByScore, tokenize } from '../src/baselines.js';
import { testCases } from '../src/protocol.js';
import { Rng } from '../src/rng.js';
import type { Dataset, EvalCase, Method, MethodContext } from '../src/types.js';
import type { Interaction, Item } from 'atomem/engine';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

function context(dataset: Dataset, cases: EvalCase[], histories: Map<string, Interaction[]>): MethodContext {
  return { dataset, cases, histories, seed: 2026, privacy: 'off', progress: () => {} };
}

/** Share of cases where the positive is ranked first. */
async function top1(method: Method, dataset: Dataset): Promise<number> {
  const { cases, histories } = testCases(dataset);
  await method.prepare(context(dataset, cases, histories));
  let hits = 0;
  for (const c of cases) if ((await method.rank(c))[0] === c.test.item) hits++;
  return hits / cases.length;
}

/** Two groups, and every case's negatives from the *other* group: any sensible method gets them right. */
function groupCases(dataset: Dataset): { cases: EvalCase[]; histories: Map<string, Interaction[]> } {
  const { cases, histories } = testCases(dataset);
  const rng = new Rng(9);
  for (const c of cases) {
    const other = c.user.startsWith('a') ? 'B' : 'A';
    const negatives = rng.sampleWithoutReplacement(
      [...dataset.items.keys()].filter((id) => id.startsWith(other)),
      9,
    );
    c.candidates = rng.shuffle([c.test.item, ...negatives]);
  }
  return { cases, histories };
}

async function groupTop1(method: Method, dataset: Dataset): Promise<number> {
  const { cases, histories } = groupCases(dataset);
  await method.prepare(context(dataset, cases, histories));
  let hits = 0;
  for (const c of cases) if ((await method.rank(c))[0] === c.test.item) hits++;
  return hits / cases.length;
}

describe('rankByScore', () => {
  it('sorts by score, breaks ties by a seeded permutation, never by position', () => {
    expect(rankByScore(['a', 'b', 'c'], [1, 3, 2], new Rng(1))).toEqual(['b', 'c', 'a']);
    expect(rankByScore(['a', 'b', 'c'], [NaN, 0, -1], new Rng(1))).toEqual(['b', 'c', 'a']);
    const firsts = new Array(10).fill(0);
    const cands = Array.from({ length: 10 }, (_, i) => `c${i}`);
    for (let u = 0; u < 2000; u++) firsts[cands.indexOf(rankByScore(cands, new Float64Array(10), new Rng(u))[0])]++;
    for (const n of firsts) expect(n).toBeGreaterThan(140); // ≈ 200 each
    expect(rankByScore(cands, new Float64Array(10), new Rng(5))).toEqual(rankByScore(cands, new Float64Array(10), new Rng(5)));
  });
});

describe('baselines', () => {
  const groups = twoGroupDataset();

  it('random: a permutation of the candidates, seeded', async () => {
    const m = new RandomMethod();
    const { cases, histories } = testCases(groups);
    await m.prepare(context(groups, cases, histories));
    const r = m.rank(cases[0]);
    expect([...r].sort()).toEqual([...cases[0].candidates].sort());
    expect(m.rank(cases[0])).toEqual(r);
  });

  it('pop ranks the most interacted items first (counts in ctx.histories)', async () => {
    const items = new Map<string, Item>(['x', 'y', 'z', 'w'].map((id) => [id, { id, title: id }]));
    const h = (...ids: string[]) => ids.map((item, at) => ({ item, at }));
    const histories = new Map([
      ['u1', h('x', 'y', 'z')],
      ['u2', h('x', 'y')],
      ['u3', h('x')],
    ]);
    const dataset: Dataset = { name: 'pop', items, sequences: histories };
    const c: EvalCase = { user: 'u4', history: [], test: { item: 'w', at: 9 }, candidates: ['w', 'z', 'y', 'x'], now: 0 };
    const m = new PopMethod();
    await m.prepare(context(dataset, [c], histories));
    expect(m.rank(c)).toEqual(['x', 'y', 'z', 'w']);
  });

  it('itemknn, bpr and ease learn an obvious two-group pattern', async () => {
    expect(await groupTop1(new ItemKnnMethod(), groups)).toBeGreaterThan(0.95);
    expect(await groupTop1(new BprMethod({ epochs: 40 }), groups)).toBeGreaterThan(0.9);
    expect(await groupTop1(new EaseMethod({ lambda: 10 }), groups)).toBeGreaterThan(0.95);
    expect(await groupTop1(new Bm25Method(), groups)).toBeGreaterThan(0.95);
  });

  it('bpr is deterministic for a seed', async () => {
    const a = new BprMethod({ epochs: 5 });
    const b = new BprMethod({ epochs: 5 });
    const { cases, histories } = testCases(groups);
    await a.prepare(context(groups, cases, histories));
    await b.prepare(context(groups, cases, histories));
    expect(a.score('a1', 'A3')).toBe(b.score('a1', 'A3'));
    expect(a.rank(cases[3])).toEqual(b.rank(cases[3]));
  });

  it('itemknn: cosine co-occurrence summed over the history (hand case)', async () => {
    const items = new Map<string, Item>(['p', 'q', 'r', 's'].map((id) => [id, { id, title: id }]));
    const h = (...ids: string[]) => ids.map((item, at) => ({ item, at }));
    // co(p,q) = 2, n_p = 3, n_q = 2 → sim = 2/√6; co(p,r) = 1, n_r = 1 → 1/√3; s never co-occurs with p.
    const histories = new Map([
      ['u1', h('p', 'q')],
      ['u2', h('p', 'q')],
      ['u3', h('p', 'r')],
      ['u4', h('s')],
    ]);
    const dataset: Dataset = { name: 'knn', items, sequences: histories };
    const c: EvalCase = { user: 'u5', history: h('p'), test: { item: 'q', at: 9 }, candidates: ['s', 'r', 'q'], now: 0 };
    const m = new ItemKnnMethod();
    await m.prepare(context(dataset, [c], histories));
    expect(m.rank(c)).toEqual(['q', 'r', 's']);
    const scores = (m as unknown as { scores(c: EvalCase): number[] }).scores(c);
    expect(scores[2]).toBeCloseTo(2 / Math.sqrt(6), 6);
    expect(scores[1]).toBeCloseTo(1 / Math.sqrt(3), 6);
    expect(scores[0]).toBe(0);
  });

  it('bm25 matches the history text: title words and categories', async () => {
    const items = new Map<string, Item>([
      ['1', { id: '1', title: 'Blue Train', categories: ['Jazz', 'Bebop'] }],
      ['2', { id: '2', title: 'Kind of Blue', categories: ['Jazz'] }],
      ['3', { id: '3', title: 'Master of Puppets', categories: ['Metal'] }],
      ['4', { id: '4', title: 'Blue Note Sessions', categories: ['Jazz', 'Bebop'] }],
      ['5', { id: '5', title: 'Ride the Lightning', categories: ['Metal'] }],
    ]);
    const dataset: Dataset = { name: 'bm25', items, sequences: new Map() };
    const c: EvalCase = {
      user: 'u',
      history: [
        { item: '1', at: 1 },
        { item: '2', at: 2 },
      ],
      test: { item: '4', at: 3 },
      candidates: ['3', '5', '4'],
      now: 2,
    };
    const m = new Bm25Method();
    await m.prepare(context(dataset, [c], new Map([['u', c.history]])));
    expect(m.rank(c)[0]).toBe('4');
    expect(m.query(c.history).get('jazz')).toBe(2);
    expect(tokenize("Children's Café (1995)")).toEqual(['childrens', 'cafe', '1995']);
  });

  it('invertSpdInPlace inverts a symmetric positive-definite matrix', () => {
    const n = 6;
    const rng = new Rng(3);
    const M = Array.from({ length: n * n }, () => rng.next() - 0.5);
    const A = new Float64Array(n * n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        let s = i === j ? 1 : 0;
        for (let k = 0; k < n; k++) s += M[i * n + k] * M[j * n + k];
        A[i * n + j] = s;
      }
    const inv = A.slice();
    invertSpdInPlace(inv, n);
    for (let i = 0; i < n; i++)
      for (let j = 0; j < n; j++) {
        let s = 0;
        for (let k = 0; k < n; k++) s += A[i * n + k] * inv[k * n + j];
        expect(s).toBeCloseTo(i === j ? 1 : 0, 9);
      }
    expect(() => invertSpdInPlace(Float64Array.of(0, 1, 1, 0), 2)).toThrow(/not positive definite/);
  });

  it('random stays at chance (top-1 ≈ 0.1) even on the two groups', async () => {
    const r = await top1(new RandomMethod(), twoGroupDataset({ usersPerGroup: 200 }));
    expect(r).toBeGreaterThan(0.05);
    expect(r).toBeLessThan(0.16);
  });
});
