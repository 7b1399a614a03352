import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { resolveConfig, type AtomemConfig } from '../src/core/config.js';
import { explain as explainWhy } from '../src/core/explain.js';
import { rank, type Candidate, type RankedItem, type RankInput, type Reason } from '../src/core/rank.js';
import type { CommunityContext, KnownCommunity } from '../src/core/retrieve.js';
import type { AtomicMemory } from '../src/core/types.js';
import { normalize } from '../src/core/vector.js';
import { renderReasons } from '../src/reason/wording.js';

/** The card's reasons in the default English wording. */
const explain = (...args: Parameters<typeof explainWhy>): string[] => renderReasons(explainWhy(...args));

const DAY = 86_400_000;
const NOW = Date.UTC(2024, 5, 1);

/** Three axes: crime, sci-fi, romance. */
const CRIME = [1, 0, 0];
const SCIFI = [0, 1, 0];
const ROMANCE = [0, 0, 1];
function v(...parts: [number[], number][]): Float32Array {
  const out = [0, 0, 0];
  for (const [axis, w] of parts) for (let i = 0; i < 3; i++) out[i] += axis[i] * w;
  return normalize(out);
}

function mem(id: string, vector: Float32Array, strength: number, over: Partial<AtomicMemory> = {}): AtomicMemory {
  return {
    id,
    content: `Enjoys ${id} films`,
    category: id,
    embedding: { embedderId: 'axes@1', vector },
    items: [],
    strength,
    evidence: 2,
    links: [],
    createdAt: NOW,
    updatedAt: NOW,
    ...over,
  };
}

const heat: Candidate = { id: 'heat', vector: v([CRIME, 1], [SCIFI, 0.1]) };
const alien: Candidate = { id: 'alien', vector: v([SCIFI, 1], [CRIME, 0.1]) };
const titanic: Candidate = { id: 'titanic', vector: v([ROMANCE, 1], [SCIFI, 0.1]) };

const cfg: AtomemConfig = resolveConfig({ tau: 0.5, k2: 1 });
const onlyMemory: AtomemConfig = resolveConfig({ tau: 0.5, k2: 1, weights: { profile: 0, recent: 0, prototype: 0, communityItems: 0, popularity: 0 } });

function input(over: Partial<RankInput>): RankInput {
  return { memories: [], candidates: [heat, alien, titanic], now: NOW, ...over };
}

function known(id: string, prototype: Float32Array, size: number, items?: Record<string, number>, summary = `${id} summary`): KnownCommunity {
  const itemTotal = items ? Object.values(items).reduce((a, b) => a + b, 0) : 0;
  return { view: { id, size, prototype, ...(items ? { items } : {}) }, summary, itemTotal };
}

describe('rank', () => {
  it('returns [] for no candidates', () => {
    expect(rank(input({ candidates: [] }), cfg)).toEqual([]);
  });

  it('ranks the candidate closest to a strong memory first, with a reason naming the memory', () => {
    const crime = mem('crime', v([CRIME, 1]), 0.8);
    const out = rank(input({ memories: [crime], candidates: [titanic, alien, heat] }), cfg);
    expect(out[0].id).toBe('heat');
    expect(out[0].score).toBeGreaterThan(out[1].score);
    const r = out[0].reasons[0];
    expect(r).toMatchObject({ kind: 'memory', memoryId: 'crime', content: 'Enjoys crime films' });
    expect(r.kind === 'memory' && r.similarity).toBeGreaterThan(0.99);
    expect(r.contribution).toBeGreaterThan(0);
    // unrelated candidates are below tau: no memory reason
    for (const o of out.slice(1)) expect(o.reasons.some((x) => x.kind === 'memory')).toBe(false);
  });

  it('a negative-strength memory pushes its items below unrelated ones', () => {
    const avoid = mem('romance', v([ROMANCE, 1]), -0.7);
    const out = rank(input({ memories: [avoid] }), cfg);
    expect(out.map((o) => o.id)).toEqual(['heat', 'alien', 'titanic']);
    expect(out[2].features.memory).toBeLessThan(0);
    expect(out[2].reasons[0]).toMatchObject({ kind: 'memory', memoryId: 'romance' });
    expect(out[2].reasons[0].contribution).toBeLessThan(0);
  });

  it('a stronger memory outranks a weaker one for their respective items', () => {
    const out = rank(input({ memories: [mem('crime', v([CRIME, 1]), 0.3), mem('scifi', v([SCIFI, 1]), 0.9)] }), cfg);
    expect(out.map((o) => o.id)).toEqual(['alien', 'heat', 'titanic']);
  });

  it('an old memory counts less than a fresh one (decay)', () => {
    const ms = [mem('crime', v([CRIME, 1]), 0.8, { updatedAt: NOW - 365 * DAY }), mem('scifi', v([SCIFI, 1]), 0.8)];
    const out = rank(input({ memories: ms }), cfg);
    expect(out.map((o) => o.id)).toEqual(['alien', 'heat', 'titanic']);
    const heatOut = out.find((o) => o.id === 'heat')!;
    const alienOut = out.find((o) => o.id === 'alien')!;
    expect(heatOut.features.memory).toBeLessThan(alienOut.features.memory / 10);
  });

  it('ties keep the input order', () => {
    const cands = [titanic, heat, alien];
    expect(rank(input({ candidates: cands }), cfg).map((o) => o.id)).toEqual(['titanic', 'heat', 'alien']);
    // equal memory support for two candidates: their input order decides
    const twin: Candidate = { id: 'heat-twin', vector: heat.vector };
    const out = rank(input({ memories: [mem('crime', v([CRIME, 1]), 0.8)], candidates: [alien, twin, heat] }), cfg);
    expect(out.map((o) => o.id)).toEqual(['heat-twin', 'heat', 'alien']);
    expect(out[0].score).toBe(out[1].score);
  });

  it('a candidate nobody knows gets no reasons and score 0', () => {
    const out = rank(input({}), cfg);
    for (const o of out) {
      expect(o.score).toBe(0);
      expect(o.reasons).toEqual([]);
    }
  });

  it('throws on candidates of mixed dimensions', () => {
    expect(() => rank(input({ candidates: [heat, { id: 'odd', vector: Float32Array.from([1, 0]) }] }), cfg)).toThrow(/candidate odd: dimension 2, expected 3/);
  });

  it('throws when memories and candidates differ in dimension', () => {
    const flat = mem('flat', Float32Array.from([1, 0]), 0.5);
    expect(() => rank(input({ memories: [flat] }), cfg)).toThrow(/dimension mismatch/);
  });

  it('a zero weight switches its signal off', () => {
    const crime = mem('crime', v([CRIME, 1]), 0.8);
    const off = resolveConfig({ tau: 0.5, weights: { memory: 0, profile: 0 } });
    const out = rank(input({ memories: [crime], candidates: [titanic, alien, heat] }), off);
    expect(out.map((o) => o.id)).toEqual(['titanic', 'alien', 'heat']);
    // the feature is still computed and reported
    expect(out[2].features.memory).toBeGreaterThan(0);
  });

  it('standardises within the list: scaling every strength by a positive factor changes no score (property)', () => {
    fc.assert(
      fc.property(
        // strengths below 1e-6 are 0 here: squaring denormals underflows, which is no ranking question
        fc.array(
          fc.tuple(
            fc.constantFrom(CRIME, SCIFI, ROMANCE),
            fc.double({ min: -1, max: 1, noNaN: true }).map((x) => (Math.abs(x) < 1e-6 ? 0 : x)),
          ),
          { minLength: 1, maxLength: 3 },
        ),
        fc.double({ min: 0.05, max: 1, noNaN: true }),
        (specs, factor) => {
          const ms = specs.map(([axis, s], i) => mem(`m${i}`, v([axis, 1]), s));
          const scaled = ms.map((m) => ({ ...m, strength: m.strength * factor }));
          const cfg3 = { ...onlyMemory, k2: 3 };
          const a = rank(input({ memories: ms }), cfg3);
          const b = rank(input({ memories: scaled }), cfg3);
          expect(b.map((o) => o.id)).toEqual(a.map((o) => o.id));
          a.forEach((o, i) => expect(b[i].score).toBeCloseTo(o.score, 6));
        },
      ),
    );
  });

  it('recent events pull similar candidates up, with a reason naming the item', () => {
    const out = rank(input({ recent: [{ item: 'blade-runner', vector: v([SCIFI, 1]), weight: 1 }] }), cfg);
    expect(out[0].id).toBe('alien');
    expect(out[0].reasons[0]).toMatchObject({ kind: 'recent', item: 'blade-runner' });
    expect(out[0].features.recent).toBeGreaterThan(out[1].features.recent);
  });

  it('a recent dislike pushes similar candidates down', () => {
    const out = rank(input({ recent: [{ item: 'notebook', vector: v([ROMANCE, 1]), weight: -1 }] }), cfg);
    expect(out[out.length - 1].id).toBe('titanic');
    expect(out[out.length - 1].features.recent).toBeLessThan(0);
  });

  describe('communities', () => {
    const crime = mem('crime', v([CRIME, 1]), 0.5);
    // crime fans who also like sci-fi
    const c1 = known('c1', v([CRIME, 1], [SCIFI, 0.5]), 3, { alien: 5, heat: 3 }, 'crime fans who love Alien');
    // the release's popularity estimates as shares (MemoryAgent.useRelease)
    const ctx: CommunityContext = {
      byMemory: new Map([['crime', [c1]]]),
      itemShares: new Map([
        ['alien', 5 / 8],
        ['heat', 3 / 8],
      ]),
    };

    it('the reason names the community with its summary and size', () => {
      const out = rank(input({ memories: [crime], communities: ctx }), cfg);
      const heatOut = out.find((o) => o.id === 'heat')!;
      const comm = heatOut.reasons.find((r) => r.kind === 'community');
      expect(comm).toMatchObject({ kind: 'community', communityId: 'c1', summary: 'crime fans who love Alien', size: 3 });
      expect(heatOut.reasons.some((r) => r.kind === 'memory' && r.memoryId === 'crime')).toBe(true);
    });

    it('community signals only reach candidates through a retrieved own memory', () => {
      const out = rank(input({ memories: [crime], communities: ctx }), cfg);
      const alienOut = out.find((o) => o.id === 'alien')!;
      // alien is not near the crime memory: no community reason, no communityItems feature
      expect(alienOut.reasons.some((r) => r.kind === 'community')).toBe(false);
      expect(alienOut.features.communityItems).toBe(0);
      // …but the popularity prior reads the release's estimates
      expect(alienOut.features.popularity).toBeCloseTo(5 / 8, 12);
      expect(alienOut.reasons.find((r) => r.kind === 'popular')).toMatchObject({ kind: 'popular', share: 5 / 8 });
    });

    it('communityItems is the item share of the reached community (from view.items)', () => {
      const out = rank(input({ memories: [crime], communities: ctx }), cfg);
      const heatOut = out.find((o) => o.id === 'heat')!;
      expect(heatOut.features.communityItems).toBeCloseTo(3 / 8, 12);
      expect(heatOut.features.popularity).toBeCloseTo(3 / 8, 12);
      expect(out.find((o) => o.id === 'titanic')!.features.popularity).toBe(0);
      expect(out.find((o) => o.id === 'titanic')!.reasons.some((r) => r.kind === 'popular')).toBe(false);
    });

    it('popularity alone can order otherwise unknown candidates', () => {
      const pop = resolveConfig({ weights: { memory: 0, profile: 0, recent: 0, prototype: 0, communityItems: 0, popularity: 1 } });
      const out = rank(input({ memories: [], communities: ctx, candidates: [titanic, heat, alien] }), pop);
      expect(out.map((o) => o.id)).toEqual(['alien', 'heat', 'titanic']);
    });

    it('without item estimates and popularity shares there is no popularity or communityItems signal', () => {
      const noItems = known('c9', c1.view.prototype, 3);
      const out = rank(input({ memories: [crime], communities: { byMemory: new Map([['crime', [noItems]]]) } }), cfg);
      for (const o of out) {
        expect(o.features.popularity).toBe(0);
        expect(o.features.communityItems).toBe(0);
      }
    });

    it('prototype similarity is reported per reached community', () => {
      const out = rank(input({ memories: [crime], communities: ctx }), cfg);
      const heatOut = out.find((o) => o.id === 'heat')!;
      expect(heatOut.features.prototype).toBeGreaterThan(0.8);
    });
  });
});

describe('explain', () => {
  const titleOf = (id: string) => ({ heat: 'Heat (1995)', alien: 'Alien (1979)' })[id];
  function item(reasons: Reason[]): RankedItem {
    return { id: 'x', score: 1, features: { memory: 0, profile: 0, recent: 0, prototype: 0, communityItems: 0, popularity: 0 }, reasons };
  }

  it('quotes the memory content with its similarity', () => {
    const out = explain(
      item([{ kind: 'memory', memoryId: 'm1', content: 'Enjoys crime thrillers such as Heat (1995)', similarity: 0.876, contribution: 0.5 }]),
      titleOf,
    );
    expect(out).toEqual(['Matches your interest: “Enjoys crime thrillers such as Heat (1995)” (similarity 0.88).']);
  });

  it('names the recent item by title, falling back to its id', () => {
    expect(explain(item([{ kind: 'recent', item: 'alien', similarity: 0.9, contribution: 0.2 }]), titleOf)).toEqual([
      'Because you recently looked at Alien (1979).',
    ]);
    expect(explain(item([{ kind: 'recent', item: 'sku-42', similarity: 0.9, contribution: 0.2 }]), titleOf)).toEqual([
      'Because you recently looked at sku-42.',
    ]);
  });

  it('describes a community by its summary, or by its size when it has none', () => {
    expect(explain(item([{ kind: 'community', communityId: 'c1', summary: 'crime fans', size: 5, contribution: 1 }]), titleOf)[0]).toBe(
      'Shoppers with a similar taste also chose it (crime fans).',
    );
    expect(explain(item([{ kind: 'community', communityId: 'c1', summary: '', size: 5, contribution: 1 }]), titleOf)[0]).toMatch(/a community of 5/);
  });

  it('gives popularity as a percentage', () => {
    expect(explain(item([{ kind: 'popular', share: 0.125, contribution: 0.1 }]), titleOf)[0]).toMatch(/12\.5% of their picks/);
  });

  it('writes no sentence for non-positive contributions', () => {
    const out = explain(
      item([
        { kind: 'memory', memoryId: 'pos', content: 'Enjoys crime', similarity: 0.9, contribution: 0.4 },
        { kind: 'memory', memoryId: 'zero', content: 'Shows no interest', similarity: 0.9, contribution: 0 },
        { kind: 'memory', memoryId: 'neg', content: 'Avoids romance', similarity: 0.9, contribution: -0.4 },
      ]),
      titleOf,
    );
    expect(out).toHaveLength(1);
    expect(out[0]).toMatch(/Enjoys crime/);
    expect(out.join(' ')).not.toMatch(/Avoids|no interest/);
  });

  it('falls back to one sentence when nothing supports the item', () => {
    expect(explain(item([]), titleOf)).toEqual(['No memory supports this item yet.']);
    expect(explain(item([{ kind: 'memory', memoryId: 'neg', content: 'Avoids romance', similarity: 0.9, contribution: -1 }]), titleOf)).toEqual([
      'No memory supports this item yet.',
    ]);
  });

  it('keeps at most `max` sentences, strongest first (in the reasons order)', () => {
    const reasons: Reason[] = [0.9, 0.5, 0.3, 0.2].map((c, i) => ({
      kind: 'memory',
      memoryId: `m${i}`,
      content: `interest ${i}`,
      similarity: 0.8,
      contribution: c,
    }));
    expect(explain(item(reasons), titleOf)).toHaveLength(3);
    expect(explain(item(reasons), titleOf, 2).map((s) => s.match(/interest (\d)/)![1])).toEqual(['0', '1']);
  });

  it('explains a real ranking: the top item quotes the memory and the community', () => {
    const crime = mem('crime', v([CRIME, 1]), 0.8, { content: 'Loves crime thrillers such as Heat (1995)' });
    const c1 = known('c1', v([CRIME, 1]), 2, { heat: 4 }, 'crime buffs');
    // the community's part of the score: its prototype's similarity (weighted here; 0 in the content defaults)
    const withPrototype = resolveConfig({ tau: 0.5, k2: 1, weights: { prototype: 1 } });
    const out = rank(input({ memories: [crime], communities: { byMemory: new Map([['crime', [c1]]]) } }), withPrototype);
    const text = explain(out[0], titleOf).join(' ');
    expect(out[0].id).toBe('heat');
    expect(text).toContain('“Loves crime thrillers such as Heat (1995)”');
    expect(text).toContain('crime buffs');
  });
});
