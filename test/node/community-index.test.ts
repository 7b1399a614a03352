import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { createInProcessIndex, InvalidUploadError, type InProcessIndex, type SharedMemoryUpload } from '../../packages/atomem/src/community/index.js';
import { clustered, rng, unit } from '../fixtures/index-wire.js';

const EMB = 'test-embedder@1/float32';

function up(id: string, vector: Float32Array, items?: string[]): SharedMemoryUpload {
  return { id, embedderId: EMB, vector, ...(items ? { items } : {}) };
}

function snapshot(ix: InProcessIndex) {
  return {
    stats: ix.stats(),
    comms: [...ix.graph.communities()].map(([id, m]) => `${id}:${[...m].sort().join(',')}`).sort(),
  };
}

describe('in-process index: validation', () => {
  it('rejects bad batches with clear errors and leaves state untouched', async () => {
    const ix = createInProcessIndex({ embedderId: EMB });
    const gen = clustered(1, 8, 2, 0.1);
    ix.upsertSync([up('a', gen(0)), up('b', gen(0))]);
    ix.upsertSync([up('c', gen(0))]);
    const before = snapshot(ix);
    const good = up('new', gen(0));
    const cases: [SharedMemoryUpload[], RegExp][] = [
      [[good, { ...up('x', gen(0)), embedderId: 'other@2' }], /"other@2".*"test-embedder@1\/float32"/],
      [[good, up('x', new Float32Array(7).fill(1))], /7 dimensions, expected 8/],
      [[good, up('x', Float32Array.from([NaN, 1, 1, 1, 1, 1, 1, 1]))], /NaN/],
      [[good, up('x', Float32Array.from([Infinity, 1, 1, 1, 1, 1, 1, 1]))], /Infinity/],
      [[good, up('x', new Float32Array(8))], /zero/],
      [[good, up('', gen(0))], /empty id/],
      [[good, up('x', gen(0)), up('x', gen(0))], /twice/],
      [[good, { ...up('x', gen(0)), vector: [1, 0, 0, 0, 0, 0, 0, 0] as unknown as Float32Array }], /Float32Array/],
      [[good, up('x', gen(0), ['ok', ''])], /items/],
    ];
    for (const [batch, msg] of cases) {
      expect(() => ix.upsertSync(batch)).toThrow(msg);
      expect(() => ix.upsertSync(batch)).toThrow(InvalidUploadError);
      await expect(ix.upsert(batch)).rejects.toThrow(InvalidUploadError);
      expect(snapshot(ix)).toEqual(before);
      expect(ix.graph.has('new')).toBe(false);
    }
    // the error points at the offending upload
    try {
      ix.upsertSync([good, up('', gen(0))]);
    } catch (e) {
      expect((e as InvalidUploadError).index).toBe(1);
      expect((e as Error).name).toBe('InvalidUploadError');
    }
  });

  it('fixes the dimension with the first vector, also within the first batch', () => {
    const ix = createInProcessIndex({ embedderId: EMB });
    expect(ix.dim).toBeUndefined();
    expect(() => ix.upsertSync([up('a', unit([1, 0, 0])), up('b', unit([1, 0]))])).toThrow(/2 dimensions, expected 3/);
    expect(ix.dim).toBeUndefined();
    ix.upsertSync([up('a', unit([1, 0, 0]))]);
    expect(ix.dim).toBe(3);
    ix.deleteSync(['a']);
    expect(() => ix.upsertSync([up('b', unit([1, 0]))])).toThrow(/expected 3/); // stays fixed when empty
  });

  it('normalises non-unit vectors (and does not touch the caller’s array)', () => {
    const ix = createInProcessIndex({ embedderId: EMB });
    const v = Float32Array.from([3, 4]);
    ix.upsertSync([up('a', v)]);
    expect([...ix.graph.vector('a')!].map((x) => +x.toFixed(6))).toEqual([0.6, 0.8]);
    expect([...v]).toEqual([3, 4]);
  });

  it('rejects bad options', () => {
    expect(() => createInProcessIndex({ embedderId: '' })).toThrow(TypeError);
    expect(() => createInProcessIndex({ embedderId: EMB, minCommunitySize: 0 })).toThrow(RangeError);
    expect(() => createInProcessIndex({ embedderId: EMB, itemNoise: -1 })).toThrow(RangeError);
    expect(() => createInProcessIndex({ embedderId: EMB, tau: 2 })).toThrow(RangeError);
    expect(() => createInProcessIndex({ embedderId: EMB, k1: 1.5 })).toThrow(RangeError);
  });
});

describe('in-process index: releases', () => {
  /** Three devices, one tight cluster: every later memory links to earlier ones. */
  function cluster(ix: InProcessIndex, withItems = false) {
    const gen = clustered(3, 16, 1, 0.05);
    ix.upsertSync([up('u1-a', gen(), withItems ? ['i1', 'i2'] : undefined)]);
    ix.upsertSync([up('u2-a', gen(), withItems ? ['i1'] : undefined)]);
    ix.upsertSync([up('u3-a', gen(), withItems ? ['i1', 'i3'] : undefined), up('u3-b', gen())]);
    return gen;
  }

  it('excludes the asker’s own vectors from members and reports own ids', async () => {
    const ix = createInProcessIndex({ embedderId: EMB });
    cluster(ix);
    const [view, ...rest] = await ix.communities(['u3-a', 'u3-b', 'unknown']);
    expect(rest).toEqual([]);
    expect(view.size).toBe(4);
    expect(view.ownIds).toEqual(['u3-a', 'u3-b']);
    expect(view.members).toHaveLength(2);
    const own = [ix.graph.vector('u3-a')!, ix.graph.vector('u3-b')!];
    const others = [ix.graph.vector('u1-a')!, ix.graph.vector('u2-a')!];
    for (const m of view.members) {
      expect(own.some((o) => o.every((x, i) => x === m[i]))).toBe(false);
      expect(others.some((o) => o.every((x, i) => x === m[i]))).toBe(true);
    }
    expect(view.id).toBe(ix.graph.communityOf('u1-a'));
    expect(view.prototype).toEqual(ix.graph.prototype(view.id));
    expect(view.items).toBeUndefined(); // nobody uploaded items
    expect(await ix.communities([])).toEqual([]);
  });

  it('releases item aggregates only when members uploaded items, noised deterministically', () => {
    const exact = createInProcessIndex({ embedderId: EMB });
    cluster(exact, true);
    expect(exact.communitiesSync(['u1-a'])[0].items).toEqual({ i1: 3, i2: 1, i3: 1 });

    const noisy = (seed: number) => {
      const ix = createInProcessIndex({ embedderId: EMB, itemNoise: 1, seed });
      cluster(ix, true);
      return ix;
    };
    const a = noisy(5);
    const first = a.communitiesSync(['u1-a'])[0].items!;
    expect(a.communitiesSync(['u2-a'])[0].items).toEqual(first); // same state → same noise
    expect(noisy(5).communitiesSync(['u1-a'])[0].items).toEqual(first);
    expect(noisy(6).communitiesSync(['u1-a'])[0].items).not.toEqual(first);
    for (const v of Object.values(first)) expect(v).toBeGreaterThan(0);
  });

  it('upsert replaces a memory (vector, community, items)', () => {
    const ix = createInProcessIndex({ embedderId: EMB, minCommunitySize: 1 });
    const gen = clustered(9, 16, 2, 0.05);
    ix.upsertSync([up('a', gen(0))]);
    ix.upsertSync([up('b', gen(0), ['i1'])]);
    ix.upsertSync([up('c', gen(1))]);
    const cA = ix.graph.communityOf('a');
    expect(ix.graph.communityOf('b')).toBe(cA);
    const v = gen(1);
    const ch = ix.upsertSync([up('b', v)]);
    expect(ix.graph.size).toBe(3);
    expect(ch.added).toEqual(['b']);
    expect(ix.graph.communityOf('b')).toBe(ix.graph.communityOf('c'));
    expect(ix.graph.communityOf('b')).not.toBe(cA);
    expect([...ix.graph.vector('b')!].every((x, i) => Math.abs(x - v[i]) < 1e-6)).toBe(true);
    expect(ix.communitiesSync(['b'])[0].items).toBeUndefined(); // the new version uploaded no items
    expect(ix.communitiesSync(['a'])[0].size).toBe(1);
  });

  it('delete removes memories; unknown ids are ignored', async () => {
    const ix = createInProcessIndex({ embedderId: EMB });
    cluster(ix);
    await ix.delete(['u1-a', 'nope']);
    expect(ix.graph.has('u1-a')).toBe(false);
    expect(ix.graph.size).toBe(3);
    await ix.delete(['u2-a']);
    // 2 left (< 3): nothing released any more
    expect(await ix.communities(['u3-a'])).toEqual([]);
  });

  it('maxMembers keeps the members most similar to the asker’s memories', () => {
    const ix = createInProcessIndex({ embedderId: EMB, maxMembers: 1, tau: 0.1 });
    // own memory at 0°; others at 20° and 50° (cos ≥ 0.1) in separate batches
    const at = (d: number) => Float32Array.from([Math.cos((d * Math.PI) / 180), Math.sin((d * Math.PI) / 180)]);
    ix.upsertSync([up('o', at(0))]);
    ix.upsertSync([up('p', at(50))]);
    ix.upsertSync([up('q', at(20))]);
    const [view] = ix.communitiesSync(['o']);
    expect(view.size).toBe(3);
    expect(view.members).toHaveLength(1);
    expect(view.members[0][0]).toBeCloseTo(Math.cos((20 * Math.PI) / 180), 6);
  });

  it('stats report shape and what is releasable', () => {
    const ix = createInProcessIndex({ embedderId: EMB });
    expect(ix.stats()).toMatchObject({ memories: 0, communities: 0, dim: undefined, releasableCommunities: 0 });
    cluster(ix);
    ix.upsertSync([up('far', unit(Array.from({ length: 16 }, (_, i) => (i === 0 ? -1 : 0))))]);
    const s = ix.stats();
    expect(s).toMatchObject({ memories: 5, communities: 2, singletons: 1, largestCommunity: 4, dim: 16 });
    expect(s).toMatchObject({ releasableCommunities: 1, releasableMemories: 4 });
  });

  it('k-anonymity holds under random operations (fuzz)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 2, max: 5 }),
        fc.constantFrom(0.3, 0.5, 0.8),
        fc.integer({ min: 1, max: 3 }),
        (seed, k, tau, k1) => {
          const r = rng(seed);
          const gen = clustered(seed, 6, 3, 0.6);
          const ix = createInProcessIndex({ embedderId: EMB, minCommunitySize: k, tau, k1, itemNoise: 0.5, seed });
          const live: string[] = [];
          let next = 0;
          for (let step = 0; step < 60; step++) {
            const roll = r();
            if (roll < 0.5 || live.length === 0) {
              const n = 1 + Math.floor(r() * 4);
              const batch = Array.from({ length: n }, () => up(`m${next++}`, gen(), r() < 0.5 ? [`i${Math.floor(r() * 5)}`] : undefined));
              ix.upsertSync(batch);
              live.push(...batch.map((b) => b.id));
            } else if (roll < 0.7) {
              const gone = live.splice(Math.floor(r() * live.length), 1 + Math.floor(r() * 2));
              ix.deleteSync(gone);
            } else if (roll < 0.8) {
              const id = live[Math.floor(r() * live.length)];
              ix.upsertSync([up(id, gen())]);
            }
            // ask for a random subset (plus an unknown id) and check every response
            const asked = live.filter(() => r() < 0.3).concat(['ghost']);
            const views = ix.communitiesSync(asked);
            const askedSet = new Set(asked);
            const seenIds = new Set<string>();
            for (const v of views) {
              expect(v.size).toBeGreaterThanOrEqual(k);
              expect(v.size).toBe(ix.graph.communitySize(v.id));
              expect(seenIds.has(v.id)).toBe(false);
              seenIds.add(v.id);
              expect(v.ownIds.length).toBeGreaterThan(0);
              for (const o of v.ownIds) {
                expect(askedSet.has(o)).toBe(true);
                expect(ix.graph.communityOf(o)).toBe(v.id);
              }
              expect(v.members.length).toBe(v.size - v.ownIds.length);
              if (v.items) for (const c of Object.values(v.items)) expect(c).toBeGreaterThan(0);
            }
            // every asked id in a big-enough community is answered; none in a small one
            for (const id of asked) {
              const c = ix.graph.communityOf(id);
              const released = views.some((v) => v.ownIds.includes(id));
              expect(released).toBe(c !== undefined && ix.graph.communitySize(c) >= k);
            }
          }
        },
      ),
      { numRuns: 25 },
    );
  });
});
