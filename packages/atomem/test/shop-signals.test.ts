import { describe, expect, it } from 'vitest';
import { trainShopModel, type ShopInteraction, type TrainOptions } from '../src/shop/train.js';
import { combine, DEFAULT_WEIGHTS, ShopScorer, type DeviceEvent } from '../src/shop/score.js';
import type { ShopModel } from '../src/protocol/shop-model-v1.js';
import { Rng } from '@atomem/bench/rng';

const DAY = 86_400_000;

/**
 * Two taste groups (users a* pick A items, b* pick B items) with a fixed walk inside each group
 * (A0 → A1 → A2 …, so transitions are known), and one item everyone picked first (`hit`).
 */
function groupsLog(opts: { users?: number; items?: number; len?: number; seed?: number } = {}): { log: ShopInteraction[]; catalog: string[] } {
  const users = opts.users ?? 30;
  const items = opts.items ?? 12;
  const len = opts.len ?? 6;
  const rng = new Rng(opts.seed ?? 3);
  const catalog = ['hit', ...Array.from({ length: items }, (_, i) => `A${i}`), ...Array.from({ length: items }, (_, i) => `B${i}`)];
  const log: ShopInteraction[] = [];
  for (const g of ['A', 'B']) {
    for (let u = 0; u < users; u++) {
      const user = `${g.toLowerCase()}${u}`;
      let t = Date.UTC(2024, 0, 1) + rng.int(20) * DAY;
      log.push({ user, item: 'hit', at: t });
      const start = rng.int(items - len + 1);
      for (let k = 0; k < len; k++) log.push({ user, item: `${g}${start + k}`, at: (t += 60_000) });
    }
  }
  return { log, catalog };
}

const quiet: Partial<TrainOptions> = {
  random: (() => {
    const r = new Rng(1);
    return () => r.next();
  })(),
};

function train(log: ShopInteraction[], catalog: string[], opts: TrainOptions = {}): ShopModel {
  return trainShopModel(log, { catalog, dim: 4, iterations: 40, ...quiet, ...opts });
}

const events = (...ids: string[]): DeviceEvent[] => ids.map((item, k) => ({ item, at: Date.UTC(2024, 2, 1) + k * 1000, action: 'purchase' }));

describe('shop signals', () => {
  const { log, catalog } = groupsLog();
  const model = train(log, catalog);
  const scorer = new ShopScorer(model);

  it('ease, knn and vec prefer the history’s own group', () => {
    const s = scorer.signals(events('A3', 'A4', 'A5'), ['A6', 'B6', 'A8', 'B8']);
    for (const name of ['ease', 'knn', 'vec'] as const) {
      expect(s[name][0], name).toBeGreaterThan(s[name][1]);
      expect(s[name][2], name).toBeGreaterThan(s[name][3]);
    }
  });

  it('the recent signals follow the last five items, the full ones the whole history', () => {
    // users pick 8 random items of their group: co-occurrence is uniform within a group
    const rng = new Rng(5);
    const picks: ShopInteraction[] = [];
    for (const g of ['A', 'B'])
      for (let u = 0; u < 40; u++) {
        rng
          .sampleWithoutReplacement(
            Array.from({ length: 12 }, (_, i) => `${g}${i}`),
            8,
          )
          .forEach((item, k) => picks.push({ user: `${g}${u}`, item, at: k }));
      }
    const sc = new ShopScorer(train(picks, catalog));
    // seven A items long ago, then five B items: the whole history leans A, the recent part B.
    const h = events('A0', 'A1', 'A2', 'A3', 'A4', 'A5', 'A6', 'B2', 'B3', 'B4', 'B5', 'B6');
    const s = sc.signals(h, ['A7', 'B7']);
    expect(s.knn[0]).toBeGreaterThan(s.knn[1]);
    expect(s.knnRecent[1]).toBeGreaterThan(s.knnRecent[0]);
    expect(s.vecRecent[1]).toBeGreaterThan(s.vecRecent[0]);
  });

  it('knn is the cosine co-occurrence co(i, j)/√(n_i n_j) over distinct users', () => {
    const tiny: ShopInteraction[] = [
      { user: 'u1', item: 'x', at: 1 },
      { user: 'u1', item: 'y', at: 2 },
      { user: 'u2', item: 'x', at: 1 },
      { user: 'u2', item: 'y', at: 2 },
      { user: 'u2', item: 'y', at: 3 },
      { user: 'u3', item: 'x', at: 1 },
      { user: 'u3', item: 'z', at: 2 },
    ];
    const m = train(tiny, ['x', 'y', 'z'], { dim: 0 });
    const s = new ShopScorer(m).signals(events('x'), ['y', 'z']);
    expect(s.knn[0]).toBeCloseTo(2 / Math.sqrt(3 * 2), 2); // co(x,y) = 2 users, n_x = 3, n_y = 2
    expect(s.knn[1]).toBeCloseTo(1 / Math.sqrt(3 * 1), 2);
    expect(s.pop[0]).toBeCloseTo(Math.log1p(2), 5); // distinct users, not rows
  });

  it('ease is the sum of B[h, c] over the history, with no self-votes', () => {
    const dense = train(log, catalog, { k: { ease: catalog.length }, easeSigned: true, lambda: 10, dim: 0 });
    const e = dense.lists.ease;
    for (let i = 0; i < catalog.length; i++) for (let p = e.offsets[i]; p < e.offsets[i + 1]; p++) expect(e.targets[p]).not.toBe(i);
    // reference: B = I − P diag(1/diag P), P = (XᵀX + λI)⁻¹, from scratch
    const n = catalog.length;
    const idx = new Map(catalog.map((id, i) => [id, i]));
    const G = Array.from({ length: n }, () => new Float64Array(n));
    const byUser = new Map<string, Set<number>>();
    for (const x of log) {
      let set = byUser.get(x.user);
      if (!set) byUser.set(x.user, (set = new Set()));
      set.add(idx.get(x.item)!);
    }
    for (const set of byUser.values()) for (const a of set) for (const b of set) G[a][b]++;
    for (let i = 0; i < n; i++) G[i][i] += 10;
    const P = invert(G);
    const hist = ['A3', 'A4'];
    const s = new ShopScorer(dense).signals(events(...hist), ['A5', 'B5']);
    ['A5', 'B5'].forEach((c, k) => {
      const ci = idx.get(c)!;
      const want = hist.reduce((acc, h) => acc - P[idx.get(h)!][ci] / P[ci][ci], 0);
      expect(s.ease[k]).toBeCloseTo(want, 2);
    });
  });

  it('markov is P(c | last item) from consecutive transitions', () => {
    const s = scorer.signals(events('B9', 'A3'), ['A4', 'A2', 'B4']);
    // every A user walks A_k → A_{k+1}; A3 is followed by A4 whenever A3 is not a user's last item
    expect(s.markov[0]).toBeGreaterThan(0.99);
    expect(s.markov[1]).toBe(0);
    expect(s.markov[2]).toBe(0);
  });

  it('trend sums the window of buckets strictly before the current one', () => {
    const t0 = Date.UTC(2024, 5, 10);
    const day = (d: number, user: string, item: string): ShopInteraction => ({ user, item, at: t0 + d * DAY + 3600_000 });
    const tl = [day(0, 'u1', 'p'), day(0, 'u2', 'p'), day(1, 'u3', 'q'), day(2, 'u4', 'r'), day(2, 'u5', 'r'), day(2, 'u6', 'r')];
    const m = train(tl, ['p', 'q', 'r'], { trend: true, trendWindow: 2, dim: 0 });
    const sc = new ShopScorer(m);
    // now = day 2: window = days 0 and 1 (day 2 itself is not counted)
    const s = sc.signals(events('p'), ['p', 'q', 'r'], t0 + 2 * DAY + 7200_000);
    expect(s.trend[0]).toBeCloseTo(Math.log1p(2), 1);
    expect(s.trend[1]).toBeCloseTo(Math.log1p(1), 1);
    expect(s.trend[2]).toBe(0);
    // a file older than the shopper's clock: the last `window` buckets it has
    const later = sc.signals(events('p'), ['p', 'q', 'r'], t0 + 30 * DAY);
    expect(later.trend[2]).toBeCloseTo(Math.log1p(3), 1);
    expect(later.trend[0]).toBe(0);
  });

  it('vectors are unit-norm where learned from data', () => {
    const v = model.vectors!;
    for (let i = 0; i < catalog.length; i++) {
      let s = 0;
      for (let d = 0; d < v.dim; d++) s += v.values[i * v.dim + d] ** 2;
      expect(Math.sqrt(s)).toBeCloseTo(1, 2);
      expect(v.cold[i]).toBe(0);
    }
  });

  it('a disliked history item votes against its neighbours', () => {
    const like = scorer.signals([{ item: 'A3', at: 1, action: 'like' }], ['A4', 'B4']);
    const dislike = scorer.signals([{ item: 'A3', at: 1, action: 'dislike' }], ['A4', 'B4']);
    expect(like.knn[0]).toBeGreaterThan(0);
    expect(dislike.knn[0]).toBeLessThan(0);
    expect(dislike.knn[0]).toBeCloseTo(-like.knn[0], 6);
  });

  it('unknown history items are ignored; unknown candidates get data signals imputed, not zeros', () => {
    const s = scorer.signals(events('A3', 'nope', 'A4'), ['A5', 'B5', 'brand-new']);
    expect(Number.isFinite(s.ease[2])).toBe(true);
    const warmMean = (s.pop[0] + s.pop[1]) / 2;
    // no vector for the unknown item → vecRecent 0 → imputed on the warm candidates' line
    expect(s.pop[2]).not.toBe(0);
    expect(Math.abs(s.pop[2] - warmMean)).toBeLessThan(Math.abs(s.pop[0] - s.pop[1]) + 1e-9);
    const off = new ShopScorer(model, { neutralCold: false }).signals(events('A3', 'A4'), ['A5', 'B5', 'brand-new']);
    expect(off.pop[2]).toBe(0);
  });
});

describe('combine', () => {
  it('z-scores each signal within the list and sums with the weights', () => {
    const out = combine({ a: [1, 2, 3], b: [10, 10, 40] }, { a: 1, b: 2 }, 3);
    const za = [-Math.sqrt(1.5), 0, Math.sqrt(1.5)];
    const zb = [-1 / Math.sqrt(2), -1 / Math.sqrt(2), Math.sqrt(2)];
    out.forEach((x, i) => expect(x).toBeCloseTo(za[i] + 2 * zb[i], 10));
  });

  it('a constant signal, a signal without weight and a weight without signal contribute nothing', () => {
    const out = combine({ a: [1, 2, 3], c: [5, 5, 5], d: [9, 0, 0] }, { a: 1, c: 3, missing: 4 }, 3);
    expect(Array.from(out)).toEqual(Array.from(combine({ a: [1, 2, 3] }, { a: 1 }, 3)));
  });

  it('an extra signal plugs in by name (e.g. a sequence model run on the device)', () => {
    const { log, catalog } = groupsLog();
    const sc = new ShopScorer(train(log, catalog));
    const cands = ['A6', 'B6', 'A8'];
    const base = sc.score(events('A3', 'A4'), cands, { weights: DEFAULT_WEIGHTS });
    const extra = sc.score(events('A3', 'A4'), cands, { weights: { ...DEFAULT_WEIGHTS, seq: 100 }, extra: { seq: [0, 0, 1] } });
    expect(extra[2] - extra[0]).toBeGreaterThan(base[2] - base[0] + 100);
    expect(sc.rank(events('A3', 'A4'), cands, { weights: { seq: 1 }, extra: { seq: [0, 0, 1] } })[0].id).toBe('A8');
    expect(() => combine({ seq: [1, 2] }, { seq: 1 }, 3)).toThrow(RangeError);
  });
});

describe('EASE on the top-N items', () => {
  it('gives EASE rows only to the N most popular items; kNN still covers every item', () => {
    const { log, catalog } = groupsLog();
    const m = train(log, catalog, { easeItems: 5 });
    const rows = (l: string) => catalog.filter((_, i) => m.lists[l].offsets[i + 1] > m.lists[l].offsets[i]).length;
    const targets = new Set(m.lists.ease.targets);
    expect(targets.size).toBeLessThanOrEqual(5);
    expect(targets.has(catalog.indexOf('hit'))).toBe(true);
    expect(rows('knn')).toBe(catalog.length);
  });
});

function invert(A: Float64Array[]): Float64Array[] {
  const n = A.length;
  const M = A.map((r, i) => Float64Array.from([...r, ...Array.from({ length: n }, (_, j) => (i === j ? 1 : 0))]));
  for (let k = 0; k < n; k++) {
    const p = M[k][k];
    for (let j = 0; j < 2 * n; j++) M[k][j] /= p;
    for (let i = 0; i < n; i++) {
      if (i === k) continue;
      const f = M[i][k];
      for (let j = 0; j < 2 * n; j++) M[i][j] -= f * M[k][j];
    }
  }
  return M.map((r) => r.slice(n));
}
