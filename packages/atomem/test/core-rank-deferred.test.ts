/**
 * `rankDeferred` (the one-pass ranking of a shortlist whose cards' reasons are made only when
 * shown) gives exactly what `rank` gives with `deferItems`: the same order, scores, features and,
 * for every card asked, the same reasons — on random lists with memories (some sharing an id),
 * recent events (repeated items), communities with item shares and popularity, shop signals with
 * and without sources, and reasons given by the caller; with and without the kept dot products.
 */
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../src/core/config.js';
import { linkedItems, nameLinkedItems, rank, rankDeferred, type Candidate, type RankInput, type Reason } from '../src/core/rank.js';
import type { CommunityContext, KnownCommunity } from '../src/core/retrieve.js';
import type { Action, AtomicMemory } from '../src/core/types.js';
import { DotCache, normalize } from '../src/core/vector.js';
import { Rng } from '@atomem/bench/rng';

const NOW = Date.UTC(2025, 0, 1);
const DIM = 12;

function scenario(seed: number): RankInput {
  const rng = new Rng(seed);
  const vec = () => normalize(Float32Array.from({ length: DIM }, () => rng.next() - 0.5));
  const candidates: Candidate[] = Array.from({ length: 20 + rng.int(60) }, (_, i) => ({ id: `c${i}`, vector: vec() }));
  const ids = candidates.map((c) => c.id);
  const memories: AtomicMemory[] = Array.from({ length: 1 + rng.int(8) }, (_, i) => ({
    // a repeated id now and then (the first memory of an id wins its unit, as rank does)
    id: `m${rng.next() < 0.15 ? 0 : i}`,
    content: `interest ${i}`,
    category: 'x',
    embedding: { embedderId: 'e', vector: vec() },
    items: rng.sampleWithoutReplacement(ids, 3),
    strength: rng.next() < 0.2 ? -0.5 : 0.2 + rng.next(),
    evidence: 1 + rng.int(5),
    links: [],
    createdAt: NOW - 1e9,
    updatedAt: NOW - rng.int(30) * 86_400_000,
  }));
  const actions: Action[] = ['purchase', 'click', 'cart', 'view'];
  const recentItems = rng.sampleWithoutReplacement(ids, 6);
  const recent = Array.from({ length: 10 }, () => {
    const item = recentItems[rng.int(recentItems.length)];
    return { item, vector: candidates[ids.indexOf(item)].vector, weight: rng.next(), action: actions[rng.int(actions.length)] };
  });
  const communities: KnownCommunity[] = Array.from({ length: 3 }, (_, k) => {
    const items = Object.fromEntries(rng.sampleWithoutReplacement(ids, 8).map((id) => [id, 1 + rng.int(9)]));
    return {
      view: { id: `k${k}`, size: 10 + k, prototype: vec(), items },
      summary: `community ${k}`,
      itemTotal: Object.values(items).reduce((a, b) => a + b, 0),
    };
  });
  const ctx: CommunityContext = {
    byMemory: new Map(memories.map((m, i) => [m.id, [communities[i % 3], communities[(i + 1) % 3]]])),
    itemShares: new Map(rng.sampleWithoutReplacement(ids, 10).map((id) => [id, rng.next() / 10])),
  };
  const n = candidates.length;
  const extra = {
    ease: Float64Array.from({ length: n }, () => rng.next()),
    sasrec: Float64Array.from({ length: n }, () => rng.next() - 0.5),
    intent: Float64Array.from({ length: n }, () => rng.next()),
  };
  const extraSources = { ease: ids.map((_, i) => (i % 3 ? recentItems[i % recentItems.length] : undefined)), sasrec: new Array<string | undefined>(n) };
  const extraReasons: Reason[][] = ids.map((_, i) => (i % 4 === 0 ? [{ kind: 'intent', intent: 'a gift', similarity: 0.4, contribution: 0.3 }] : []));
  const itemVectors = new Map(candidates.map((c) => [c.id, c.vector]));
  return {
    memories,
    candidates,
    recent,
    communities: ctx,
    now: NOW,
    extra,
    extraSources,
    itemVectors,
    extraReasons,
    weights: { memory: 1, profile: 0.7, recent: 0.5, prototype: 0.3, communityItems: 0.4, popularity: 0.2, ease: 1, sasrec: 0.6, intent: 0.5 },
    deferItems: true,
  };
}

describe('rankDeferred', () => {
  const cfg = resolveConfig({ tau: 0.1, k2: 2 });
  it('equals rank with deferItems: order, scores, features, and each card’s reasons', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const input = scenario(seed);
      const kept = seed % 2 ? { dots: new DotCache(), memoryDots: new DotCache() } : {};
      const want = rank(input, cfg);
      const got = rankDeferred({ ...input, ...kept }, cfg);
      expect(got.ranked.map((r) => [r.id, r.score, r.features])).toEqual(want.map((r) => [r.id, r.score, r.features]));
      // exact (not only close): the same bits
      expect(JSON.stringify(got.ranked.map((r) => [r.id, r.score, r.features]))).toBe(JSON.stringify(want.map((r) => [r.id, r.score, r.features])));
      for (const w of want) expect(JSON.stringify(got.reasons(w.id))).toBe(JSON.stringify(w.reasons));
    }
  });

  it('rank naming linked items equals rankDeferred plus nameLinkedItems; a kept LinkedItems names the same again', () => {
    for (let seed = 41; seed <= 70; seed++) {
      const input = { ...scenario(seed), deferItems: false };
      const dots = seed % 2 ? new DotCache() : undefined;
      const want = rank(input, cfg);
      const lazy = rankDeferred({ ...input, deferItems: true, dots }, cfg);
      const kept = linkedItems(input.memories, input.itemVectors!, dots);
      for (const w of want) {
        const reasons = lazy.reasons(w.id);
        nameLinkedItems(reasons, input.candidates.find((c) => c.id === w.id)!, kept);
        expect(JSON.stringify(reasons)).toBe(JSON.stringify(w.reasons));
      }
      // the kept list's named items read back (a second call with the same LinkedItems)
      expect(JSON.stringify(rank({ ...input, linked: kept, dots }, cfg))).toBe(JSON.stringify(want));
      expect(JSON.stringify(rank({ ...input, linked: kept, dots }, cfg))).toBe(JSON.stringify(want));
    }
  });

  it('an unknown id is an error; no candidates, nothing', () => {
    const input = scenario(3);
    expect(() => rankDeferred(input, cfg).reasons('nope')).toThrow(/not a candidate/);
    expect(rankDeferred({ ...input, candidates: [] }, cfg).ranked).toEqual([]);
  });
});
