/**
 * The shelf's reasons: each card's reasons are the sources of its own score
 * relative to the list, worded by what the shopper did, with correct plurals, no positive reason
 * on a negative score, and reasons for the shop model's signals too.
 */
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../src/core/config.js';
import { explain as explainWhy } from '../src/core/explain.js';
import { rank, type Candidate, type RankedItem, type Reason } from '../src/core/rank.js';
import type { AtomicMemory } from '../src/core/types.js';
import { normalize } from '../src/core/vector.js';
import { phrase, pluralOf } from '../src/reason/rules.js';
import { ShopScorer } from '../src/shop/score.js';
import { trainShopModel, type ShopInteraction } from '../src/shop/train.js';
import { Rng } from '@atomem/bench/rng';
import { ShopKnowledge } from '../src/shop/device.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import fc from 'fast-check';
import { MemoryAgent, type RecommendOptions } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { withinSession } from '../src/agent/shelf.js';
import { diversify } from '../src/core/diversify.js';
import { CATALOG, T0, MIN, makeAgent } from '../../../test/fixtures/llm-agent.js';
import { CATALOG as FILMS_ALL, TAU as FILM_TAU, embedder as filmEmbedder } from '../../../test/fixtures/film-catalog.js';
import { renderReasons, renderWhy } from '../src/reason/wording.js';

/** The card's reasons in the default English wording. */
const explain = (...args: Parameters<typeof explainWhy>): string[] => renderReasons(explainWhy(...args));
const LOW_SCORE_SENTENCE = 'Little in your memory points to this item.';

const NOW = Date.UTC(2024, 5, 1);
const v = (...xs: number[]) => normalize(xs);
function mem(id: string, vector: Float32Array, strength: number, items: string[] = []): AtomicMemory {
  return {
    id,
    content: `Enjoys ${id}`,
    category: id,
    embedding: { embedderId: 'axes', vector },
    items,
    strength,
    evidence: 3,
    links: [],
    createdAt: NOW,
    updatedAt: NOW,
  };
}
const titles: Record<string, string> = { a1: 'Trail Tent', a2: 'Ridge Backpack', b1: 'Sonic Speaker', b2: 'Bass Headphones' };
const titleOf = (id: string) => titles[id];
const card = (reasons: Reason[], score = 1): RankedItem => ({
  id: 'x',
  score,
  features: { memory: 0, profile: 0, recent: 0, prototype: 0, members: 0, communityItems: 0, popularity: 0, related: 0 },
  reasons,
});

describe('plurals of categories', () => {
  it('uncountable departments describe items; countable nouns get a correct plural', () => {
    expect(phrase(['Audio'])).toBe('audio items');
    expect(phrase(['Outdoor', 'Audio'])).toBe('outdoor and audio items');
    expect(phrase(['Crime', 'Thriller'])).toBe('crime thrillers');
    expect(phrase(['Comedy'])).toBe('comedies');
    expect(pluralOf('Watch')).toBe('watches');
    expect(pluralOf('Toys')).toBe('toys');
    expect(pluralOf('Key')).toBe('keys');
    expect(phrase(['Books'])).toBe('books');
  });
});

describe('explain: wording', () => {
  it('says bought / added to your cart / looked at, from the action', () => {
    const recent = (action?: 'purchase' | 'cart' | 'click') =>
      explain(card([{ kind: 'recent', item: 'b1', similarity: 0.9, contribution: 0.5, ...(action ? { action } : {}) }]), titleOf);
    expect(recent('purchase')).toEqual(['Because you recently bought Sonic Speaker.']);
    expect(recent('cart')).toEqual(['Because you recently added Sonic Speaker to your cart.']);
    expect(recent('click')).toEqual(['Because you recently looked at Sonic Speaker.']);
    const m = explain(
      card([{ kind: 'memory', memoryId: 'm', content: 'Enjoys audio items', similarity: 0.8, contribution: 0.4, item: 'b2' }]),
      titleOf,
      3,
      () => 'purchase',
    );
    expect(m).toEqual(['Close to Bass Headphones, which you bought: your interest “Enjoys audio items”.']);
  });

  it('no positive reason on a card with a negative score', () => {
    const out = explain(card([{ kind: 'recent', item: 'b1', similarity: 0.9, contribution: 0.5 }], -0.2), titleOf);
    expect(out).toEqual([LOW_SCORE_SENTENCE]);
    expect(out.join(' ')).not.toMatch(/because|matches|close to/i);
  });

  it("shop-model signals get reasons naming the shopper's item", () => {
    const shop = (signal: string, item?: string) =>
      explain(card([{ kind: 'shop', signal, contribution: 1, ...(item ? { item } : {}) }]), titleOf, 3, (id) => (id === 'b1' ? 'purchase' : 'click'));
    expect(shop('ease', 'b1')).toEqual(['People who bought Sonic Speaker also bought this.']);
    expect(shop('knnRecent', 'a1')).toEqual(['People who bought Trail Tent (you looked at it) also bought this.']);
    expect(shop('markov', 'b1')).toEqual(['Often bought right after Sonic Speaker.']);
    expect(shop('vecRecent', 'a2')).toEqual(['Shoppers who like Ridge Backpack (you looked at it) like this too.']);
    expect(shop('sasrec', 'b1')).toEqual(['Often comes next after Sonic Speaker.']);
    expect(shop('pop')).toEqual(['Popular in this shop.']);
  });
});

describe('rank: reasons relative to the list', () => {
  // axes: outdoor, audio, kitchen
  const outdoor = mem('outdoor', v(1, 0, 0), 0.6, ['a1', 'a2']);
  const audio = mem('audio', v(0, 1, 0), 0.6, ['b1', 'b2']);
  const cands: Candidate[] = [
    { id: 'tent2', vector: v(1, 0.1, 0) },
    { id: 'speaker2', vector: v(0.1, 1, 0) },
    { id: 'pan', vector: v(0, 0, 1) },
  ];
  const cfg = resolveConfig({ tau: 0.5 });
  const itemVectors = new Map([
    ['a1', v(1, 0, 0.1)],
    ['a2', v(1, 0.2, 0)],
    ['b1', v(0.2, 1, 0)],
    ['b2', v(0, 1, 0.1)],
  ]);

  it('each card is explained by the memory that moved it, naming the closest linked item', () => {
    const out = rank({ memories: [outdoor, audio], candidates: cands, now: NOW, itemVectors }, cfg);
    const by = new Map(out.map((o) => [o.id, o]));
    expect(by.get('tent2')!.reasons[0]).toMatchObject({ kind: 'memory', memoryId: 'outdoor', item: 'a2' });
    expect(by.get('speaker2')!.reasons[0]).toMatchObject({ kind: 'memory', memoryId: 'audio', item: 'b1' });
    // the kitchen item is below the list's mean: nothing positive to say
    expect(by.get('pan')!.score).toBeLessThan(0);
    expect(explain(by.get('pan')!, titleOf)).toEqual([LOW_SCORE_SENTENCE]);
  });

  it('a recent event names the item that moved THIS card, not the strongest event everywhere', () => {
    const recent = [
      { item: 'b1', vector: itemVectors.get('b1')!, weight: 1, action: 'purchase' as const },
      { item: 'a1', vector: itemVectors.get('a1')!, weight: 0.5, action: 'cart' as const },
    ];
    const out = rank({ memories: [], candidates: cands, recent, now: NOW }, cfg);
    const by = new Map(out.map((o) => [o.id, o]));
    expect(explain(by.get('speaker2')!, titleOf)[0]).toBe('Because you recently bought Sonic Speaker.');
    expect(explain(by.get('tent2')!, titleOf)[0]).toBe('Because you recently added Trail Tent to your cart.');
  });

  it('a signal every card shares equally gives no reason', () => {
    const memories = [mem('even', v(1, 1, 1), 0.5)];
    const same: Candidate[] = [
      { id: 'p', vector: v(1, 0, 0) },
      { id: 'q', vector: v(0, 1, 0) },
      { id: 'r', vector: v(0, 0, 1) },
    ];
    for (const o of rank({ memories, candidates: same, now: NOW }, resolveConfig({ tau: 0.9 }))) expect(o.reasons).toEqual([]);
  });
});

describe('shop-model sources', () => {
  it('names the history item behind each list and vector signal', () => {
    const rng = new Rng(3);
    const catalog = [...Array.from({ length: 10 }, (_, i) => `A${i}`), ...Array.from({ length: 10 }, (_, i) => `B${i}`)];
    const log: ShopInteraction[] = [];
    for (const g of ['A', 'B'])
      for (let u = 0; u < 40; u++)
        rng
          .sampleWithoutReplacement(
            Array.from({ length: 10 }, (_, i) => `${g}${i}`),
            5,
          )
          .forEach((item, k) => log.push({ user: `${g}${u}`, item, at: k, action: 'purchase' }));
    const r = new Rng(4);
    const model = trainShopModel(log, { catalog, dim: 4, iterations: 30, random: () => r.next() });
    const sc = new ShopScorer(model);
    const history = [
      { item: 'A0', at: 1, action: 'purchase' as const },
      { item: 'B0', at: 2, action: 'click' as const },
    ];
    const cands = ['A5', 'B5'];
    const src = sc.sources(history, cands);
    for (const name of ['ease', 'knn', 'vec']) expect(src[name]).toEqual(['A0', 'B0']);
    // the most recent item is the markov source of whatever it leads to
    expect(src.markov.every((x) => x === undefined || x === 'B0')).toBe(true);
  });
});

describe('agent: action-aware explanations', () => {
  it('a purchase is explained as bought, not looked at', async () => {
    const agent = makeAgent();
    await agent.observe({ item: 'heat', at: T0 + MIN, action: 'purchase' });
    await agent.observe({ item: 'alien', at: T0 + 2 * MIN, action: 'click' });
    const out = await agent.recommend(['fargo', 'casino', 'matrix', 'titanic', 'emma']);
    const text = out.flatMap((r) => r.why.map(renderWhy)).join(' ');
    const heat = CATALOG.find((i) => i.id === 'heat')!.title;
    expect(text).toContain(`bought ${heat}`);
    expect(text).not.toContain(`looked at ${heat}`);
  });
});

describe('recommend: exclude, first visit, diversification', () => {
  const FILMS = ['heat', 'fargo', 'casino', 'alien', 'matrix', 'titanic', 'emma'];

  it("exclude: 'bought' (the default) drops purchases, 'seen' the recent events' items, 'interacted' the whole history, [] nothing; bad rules throw", async () => {
    const agent = makeAgent({ config: { recentEvents: 1 } });
    await agent.observe({ item: 'heat', at: T0 + MIN, action: 'purchase' });
    await agent.observe({ item: 'alien', at: T0 + 2 * MIN, action: 'click' });
    const ids = async (exclude?: RecommendOptions['exclude']) => (await agent.recommend(FILMS, exclude ? { exclude } : {})).map((r) => r.id).sort();
    expect(await ids()).toEqual(FILMS.filter((x) => x !== 'heat').sort());
    expect(await ids([])).toEqual([...FILMS].sort());
    expect(await ids('bought')).toEqual(FILMS.filter((x) => x !== 'heat').sort());
    expect(await ids('seen')).toEqual(FILMS.filter((x) => x !== 'alien').sort()); // recentEvents: 1 → only the last event
    expect(await ids(['bought', 'seen'])).toEqual(FILMS.filter((x) => x !== 'heat' && x !== 'alien').sort());
    expect(await ids('interacted')).toEqual(FILMS.filter((x) => x !== 'heat' && x !== 'alien').sort());
    await expect(agent.recommend(FILMS, { exclude: 'cart' as never })).rejects.toThrow(/unknown rule "cart"/);
    await expect(agent.recommend(FILMS, { diversify: 'yes' as never })).rejects.toThrow(TypeError);
  });

  it('a first visit is not catalog order: the variety order spans the genres first', async () => {
    const agent = makeAgent();
    const out = await agent.recommend(FILMS);
    const first3 = out.slice(0, 3).map((r) => CATALOG.find((i) => i.id === r.id)!.categories![0]);
    expect(new Set(first3).size).toBe(3);
    expect(out.map((r) => r.id)).not.toEqual(FILMS);
  });

  it('diversify: a two-interest shopper gets both interests in the first row; off keeps the ranker order; same scores', async () => {
    let n = 0;
    const agent = new MemoryAgent({
      items: new ItemVectors(filmEmbedder, FILMS_ALL),
      clock: () => T0 + 60 * MIN,
      newId: () => `m${++n}`,
      config: { tau: FILM_TAU, diversityDepth: 2 },
    });
    let t = T0;
    // a strong crime interest (bought, again and again), a second one in sci-fi (carted)
    for (const id of ['heat', 'fargo', 'heat', 'fargo', 'heat']) await agent.observe({ item: id, at: (t += MIN), action: 'purchase' });
    for (const id of ['alien', 'matrix', 'alien']) await agent.observe({ item: id, at: (t += MIN), action: 'cart' });
    const cands = ['godfather', 'casino', 'solaris', 'contact', 'notting', 'emma'];
    const genre = (id: string) => FILMS_ALL.find((i) => i.id === id)!.categories![0];
    const off = await agent.recommend(cands, { diversify: false });
    const on = await agent.recommend(cands);
    expect(off.slice(0, 2).map((r) => genre(r.id))).toEqual(['Crime', 'Crime']);
    expect(
      on
        .slice(0, 2)
        .map((r) => genre(r.id))
        .sort(),
    ).toEqual(['Crime', 'Sci-Fi']);
    expect(on.map((r) => r.score)).toEqual(off.map((r) => r.score));
    // the card brought in for the second interest never reads "little in your memory points to it"
    const promoted = on.slice(0, 2).find((r) => genre(r.id) === 'Sci-Fi')!;
    expect(off.find((r) => r.id === promoted.id)!.score).toBeLessThan(0); // below the list's mean in the ranker's order…
    expect(promoted.why.map(renderWhy)[0]).toMatch(/^For another of your interests: “Enjoys sci-fi/); // …so it says why it is here
    expect(on.slice(2).map((r) => r.id)).toEqual(off.filter((r) => !on.slice(0, 2).some((x) => x.id === r.id)).map((r) => r.id));
    // config.diversity 0 is off too
    const plain = new MemoryAgent({
      items: new ItemVectors(filmEmbedder, FILMS_ALL),
      clock: () => T0 + 60 * MIN,
      newId: () => `p${++n}`,
      config: { tau: FILM_TAU, diversityDepth: 2, diversity: 0 },
      state: structuredClone(agent.snapshot),
    });
    expect((await plain.recommend(cands)).map((r) => r.id)).toEqual(off.map((r) => r.id));
  });
});

describe('diversify (pure)', () => {
  const a = v(1, 0, 0);
  const b = v(0, 1, 0);
  const ranked = [
    { score: 3, vector: v(1, 0.05, 0) },
    { score: 2.9, vector: v(1, 0, 0.05) },
    { score: 2.8, vector: v(1, 0.02, 0.02) },
    { score: 2, vector: v(0.05, 1, 0) },
    { score: 0, vector: v(0, 0, 1) },
    { score: 0, vector: v(0, 0.1, 1) },
  ];
  it('puts the second interest into the first row, keeps the order at minShare 0 or with one aspect', () => {
    expect(
      diversify(
        ranked,
        [
          { vector: a, weight: 2 },
          { vector: b, weight: 1 },
        ],
        { minShare: 0.1, depth: 2, tau: 0.5 },
      ),
    ).toEqual([0, 3, 1, 2, 4, 5]);
    expect(
      diversify(
        ranked,
        [
          { vector: a, weight: 2 },
          { vector: b, weight: 1 },
        ],
        { minShare: 0, depth: 2, tau: 0.5 },
      ),
    ).toEqual([0, 1, 2, 3, 4, 5]);
    expect(diversify(ranked, [{ vector: a, weight: 2 }], { minShare: 0.1, depth: 4, tau: 0.5 })).toEqual([0, 1, 2, 3, 4, 5]);
  });
  it('is a permutation (property)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(fc.double({ min: -5, max: 5, noNaN: true }), fc.double({ min: -1, max: 1, noNaN: true }), fc.double({ min: -1, max: 1, noNaN: true })),
          { minLength: 0, maxLength: 40 },
        ),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 12 }),
        (xs, lambda, depth) => {
          const r = xs.map(([s, x, y]) => ({ score: s, vector: v(x + 1e-3, y, 0.1) })).sort((p, q) => q.score - p.score);
          const order = diversify(
            r,
            [
              { vector: a, weight: 1 },
              { vector: b, weight: 1 },
            ],
            { minShare: lambda, depth, tau: 0.2 },
          );
          expect([...order].sort((p, q) => p - q)).toEqual(r.map((_, i) => i));
        },
      ),
    );
  });
});

describe('diversify (pure): minimal change', () => {
  const a = v(1, 0, 0);
  const b = v(0, 1, 0);
  const c = v(0, 0, 1);
  it('a weak interest (below minShare) gets no seat; a covered row is unchanged; the replaced card is the lowest one no interest needs', () => {
    const ranked = [v(1, 0, 0), v(1, 0.1, 0), v(0, 0.1, 1), v(1, 0, 0.1), v(0.1, 1, 0)].map((vector, i) => ({ score: 10 - i, vector }));
    // b holds 1/11 < 0.1 of the weight: no seat
    expect(
      diversify(
        ranked,
        [
          { vector: a, weight: 10 },
          { vector: b, weight: 1 },
        ],
        { minShare: 0.1, depth: 3, tau: 0.5 },
      ),
    ).toEqual([0, 1, 2, 3, 4]);
    // a, b and c strong; row [0,1,2] covers a and c: b's card (4) replaces 1 (a still covered by 0), not 2 (the only c)
    expect(
      diversify(
        ranked,
        [
          { vector: a, weight: 3 },
          { vector: b, weight: 2 },
          { vector: c, weight: 2 },
        ],
        { minShare: 0.1, depth: 3, tau: 0.5 },
      ),
    ).toEqual([0, 2, 4, 1, 3]);
  });
});

describe('with the shop model loaded', () => {
  function shopAgent() {
    const rng = new Rng(5);
    const catalog = [...Array.from({ length: 10 }, (_, i) => `A${i}`), ...Array.from({ length: 10 }, (_, i) => `B${i}`)];
    const log: ShopInteraction[] = [];
    // popularity falls with the index: item k is bought by about (10 - k) of every 10 shoppers
    for (const g of ['A', 'B'])
      for (let u = 0; u < 40; u++)
        for (let k = 0; k < 10; k++) if (rng.next() < (10 - k) / 10) log.push({ user: `${g}${u}`, item: `${g}${k}`, at: k, action: 'purchase' });
    const r = new Rng(6);
    const model = trainShopModel(log, { catalog, dim: 4, iterations: 30, random: () => r.next() });
    const items = new ItemVectors(
      createHashingEmbedder({ dim: 32 }),
      catalog.map((id) => ({ id, title: `Item ${id}`, categories: [id[0] === 'A' ? 'Tents' : 'Speakers'] })),
    );
    items.useShop(new ShopKnowledge('test-file', model));
    return { agent: new MemoryAgent({ items, clock: () => 1e6 }), model, catalog };
  }

  it("ranks with shopWeightsLive at a live moment (after the file's log ended) and shopWeights at a replayed one", async () => {
    const DAY = 86_400_000;
    const catalog = Array.from({ length: 12 }, (_, i) => `C${i}`);
    const log: ShopInteraction[] = [];
    // C0–C9 sold all month long, most of all early on; C11 sold only in the log's last week (days 24–29)
    for (let u = 0; u < 40; u++)
      for (let k = 0; k < 10; k++) if ((u + k) % 3 !== 0) log.push({ user: `u${u}`, item: `C${k}`, at: (k % 20) * DAY, action: 'purchase' });
    for (let u = 0; u < 8; u++) log.push({ user: `u${u}`, item: 'C11', at: (24 + (u % 6)) * DAY, action: 'purchase' });
    const r = new Rng(7);
    const model = trainShopModel(log, { catalog, dim: 4, iterations: 30, random: () => r.next() });
    expect(model.popRecent!.end).toBe(29 * DAY);
    const items = new ItemVectors(
      createHashingEmbedder({ dim: 32 }),
      catalog.map((id) => ({ id, title: `Item ${id}` })),
    );
    items.useShop(new ShopKnowledge('live-file', model));
    const agent = new MemoryAgent({
      items,
      clock: () => 31 * DAY,
      // the replay set would sink C11 at a live moment: only the live set puts it first
      config: { shopWeights: { pop: 5, popRecent: -5 }, shopWeightsLive: { popRecent: 50, pop: -5 } },
    });
    await agent.observe({ item: 'C0', at: 30 * DAY, action: 'purchase' });
    const live = await agent.recommend(catalog, { exclude: 'bought' });
    expect(live[0].id).toBe('C11');
    // a replay at day 10: the window is in the future (popRecent 0) and pop leads
    const replay = await agent.recommend(catalog, { exclude: 'bought', now: 10 * DAY });
    expect(replay[0].id).not.toBe('C11');
    expect(replay.findIndex((c) => c.id === 'C11')).toBeGreaterThan(5);
    // within a session (the shopper acted 10 minutes ago) the visit ranks with shopWeights too
    await agent.observe({ item: 'C1', at: 31 * DAY - 10 * 60_000, action: 'purchase' });
    const session = await agent.recommend(catalog, { exclude: 'bought' });
    expect(session[0].id).not.toBe('C11');
    expect(session.findIndex((c) => c.id === 'C11')).toBeGreaterThan(5);
    // … and once the session has lapsed (sessionGapMinutes, 30) the live set again
    const later = await agent.recommend(catalog, { exclude: 'bought', now: 31 * DAY + 21 * 60_000 });
    expect(later[0].id).toBe('C11');
  });

  it('withinSession: the latest event less than the gap before now (any order; none is a returning visit)', () => {
    expect(withinSession([], 100 * 60_000, 30)).toBe(false);
    expect(withinSession([{ at: 80 * 60_000 }, { at: 10 * 60_000 }], 100 * 60_000, 30)).toBe(true);
    expect(withinSession([{ at: 10 * 60_000 }, { at: 70 * 60_000 }], 100 * 60_000, 30)).toBe(false);
    expect(withinSession([{ at: 71 * 60_000 }], 100 * 60_000, 30)).toBe(true);
    expect(withinSession([{ at: 71 * 60_000 }], 100 * 60_000, 0)).toBe(false);
  });

  it("a first visit is ordered by the shop model's popularity (not catalog order), and says so", async () => {
    const { agent, model, catalog } = shopAgent();
    const out = await agent.recommend(catalog);
    const pop = (id: string) => model.popularity[model.items.indexOf(id)];
    for (let i = 1; i < out.length; i++) expect(pop(out[i - 1].id)).toBeGreaterThanOrEqual(pop(out[i].id));
    expect(out.map((r) => r.id)).not.toEqual(catalog);
    expect(out[0].reasons[0]).toMatchObject({ kind: 'prior', prior: 'shop-popularity' });
    expect(out[0].why.map(renderWhy)[0]).toBe('Popular in this shop (you have not browsed yet).');
  });

  it('after a purchase, a card moved by the shop model names the bought item', async () => {
    const { agent, catalog } = shopAgent();
    await agent.observe({ item: 'A0', at: 1e6 - 1000, action: 'purchase' });
    const out = await agent.recommend(catalog, { exclude: 'bought' });
    expect(out.some((r) => r.id === 'A0')).toBe(false);
    const text = out.slice(0, 8).flatMap((r) => r.why.map(renderWhy));
    expect(
      text.some((t) =>
        /^(People who bought Item A0 also bought this|Often bought right after Item A0|Shoppers who like Item A0 like this too|Often comes next after Item A0)\.$/.test(
          t,
        ),
      ),
    ).toBe(true);
  });
});
