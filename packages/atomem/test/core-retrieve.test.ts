import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { retrieve, retrieveOwn, type CommunityContext, type KnownCommunity } from '../src/core/retrieve.js';
import type { AtomicMemory } from '../src/core/types.js';
import { dot, normalize } from '../src/core/vector.js';

function at(deg: number): Float32Array {
  const r = (deg * Math.PI) / 180;
  return Float32Array.from([Math.cos(r), Math.sin(r)]);
}

function mem(id: string, vector: Float32Array, strength = 0.5): AtomicMemory {
  return {
    id,
    content: `memory ${id}`,
    category: 'X',
    embedding: { embedderId: 'plane@1', vector },
    items: [],
    strength,
    evidence: 1,
    links: [],
    createdAt: 0,
    updatedAt: 0,
  };
}

function community(id: string, deg: number): KnownCommunity {
  return { view: { id, size: 4, prototype: at(deg) }, summary: `community ${id}`, itemTotal: 0 };
}

describe('retrieveOwn', () => {
  const ms = [mem('crime', at(0)), mem('noir', at(20)), mem('scifi', at(90)), mem('romance', at(180))];

  it('returns the top-k with similarity ≥ tau, best first', () => {
    const r = retrieveOwn(ms, at(15), 2, 0.5);
    expect(r.map((x) => x.memory.id)).toEqual(['noir', 'crime']);
    expect(r[0].similarity).toBeCloseTo(Math.cos((5 * Math.PI) / 180), 6);
    expect(r[1].similarity).toBeCloseTo(Math.cos((15 * Math.PI) / 180), 6);
  });

  it('k = 1 keeps only the best, even when it comes last', () => {
    expect(retrieveOwn(ms, at(19), 1, 0).map((x) => x.memory.id)).toEqual(['noir']);
    expect(retrieveOwn([...ms].reverse(), at(2), 1, 0).map((x) => x.memory.id)).toEqual(['crime']);
  });

  it('excludes memories below tau, even if fewer than k remain', () => {
    const r = retrieveOwn(ms, at(80), 3, 0.9);
    expect(r.map((x) => x.memory.id)).toEqual(['scifi']);
    expect(retrieveOwn(ms, at(45), 3, 0.99)).toEqual([]);
  });

  it('includes a memory at exactly tau', () => {
    const v = Float32Array.from([1, 0]);
    expect(retrieveOwn([mem('a', v)], v, 1, dot(v, v))).toHaveLength(1);
  });

  it('a tie keeps the earlier memory', () => {
    const r = retrieveOwn([mem('first', at(10)), mem('second', at(-10))], at(0), 1, 0);
    expect(r.map((x) => x.memory.id)).toEqual(['first']);
  });

  it('returns nothing for no memories', () => {
    expect(retrieveOwn([], at(0), 3, -1)).toEqual([]);
  });

  it('throws on a dimension mismatch', () => {
    expect(() => retrieveOwn(ms, Float32Array.from([1, 0, 0]), 1, 0)).toThrow(/dimension mismatch/);
  });

  it('agrees with a brute-force sort (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 359 }), { maxLength: 15 }),
        fc.integer({ min: 0, max: 359 }),
        fc.integer({ min: 1, max: 5 }),
        fc.double({ min: -1, max: 1, noNaN: true }),
        (degs, q, k, tau) => {
          const memories = degs.map((d, i) => mem(`m${i}`, at(d)));
          const query = at(q);
          const got = retrieveOwn(memories, query, k, tau);
          const want = memories
            .map((m, i) => ({ i, s: dot(m.embedding.vector, query) }))
            .filter((x) => x.s >= tau)
            .sort((a, b) => b.s - a.s || a.i - b.i)
            .slice(0, k);
          expect(got.map((g) => g.similarity)).toEqual(want.map((w) => w.s));
          for (let i = 1; i < got.length; i++) expect(got[i].similarity).toBeLessThanOrEqual(got[i - 1].similarity);
        },
      ),
    );
  });
});

describe('retrieve (local to global)', () => {
  const crime = mem('crime', at(0));
  const noir = mem('noir', at(10));
  const scifi = mem('scifi', at(90));
  const c1 = community('c1', 5);
  const c2 = community('c2', 0);
  const c3 = community('c3', 90);
  const ctx: CommunityContext = {
    byMemory: new Map([
      ['crime', [c1, c2]],
      ['noir', [c1]],
      ['scifi', [c3]],
    ]),
  };

  it('without a community context, returns own memories only', () => {
    const r = retrieve([crime, noir, scifi], at(3), { k2: 2, tau: 0.5 });
    expect(r.own.map((x) => x.memory.id)).toEqual(['crime', 'noir']);
    expect(r.communities).toEqual([]);
  });

  it('reaches communities only through retrieved memories, deduplicated, with the memory that led there', () => {
    const r = retrieve([crime, noir, scifi], at(8), { k2: 2, tau: 0.5 }, ctx);
    expect(r.own.map((x) => x.memory.id)).toEqual(['noir', 'crime']);
    // c1 is reached via noir first (best memory), then c2 via crime; never c3 (scifi not retrieved)
    expect(r.communities.map((c) => [c.community.view.id, c.via.memory.id])).toEqual([
      ['c1', 'noir'],
      ['c2', 'crime'],
    ]);
  });

  it('k2 limits the path to the global tier', () => {
    const r = retrieve([crime, noir, scifi], at(8), { k2: 1, tau: 0.5 }, ctx);
    expect(r.communities.map((c) => c.community.view.id)).toEqual(['c1']);
  });

  it('no retrieved memory → no community, however close its prototype', () => {
    const r = retrieve([crime, noir, scifi], normalize([1, 1]), { k2: 3, tau: 0.99 }, ctx);
    expect(r.own).toEqual([]);
    expect(r.communities).toEqual([]);
  });

  it('a memory without communities is still retrieved', () => {
    const lonely = mem('lonely', at(45));
    const r = retrieve([lonely], at(45), { k2: 1, tau: 0.5 }, ctx);
    expect(r.own.map((x) => x.memory.id)).toEqual(['lonely']);
    expect(r.communities).toEqual([]);
  });
});
