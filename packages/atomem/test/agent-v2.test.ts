// The agent's side of protocol v2: what a report samples, at most one report per epoch, the
// memoized randomization kept in the state (and in IndexedDB), local matching of the release
// and the popularity signal it feeds into ranking.
import 'fake-indexeddb/auto';
import { describe, expect, it } from 'vitest';
import { MemoryAgent } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { DEFAULT_LDP, ReportHistogram, makeReport } from '../src/community/ldp.js';
import { buildRelease } from '../src/community/release.js';
import { MemoryStore } from '../src/store/store.js';
import { CATALOG, MIN, T0, TAU, embedder, interactions } from '../../../test/fixtures/film-catalog.js';
import { mulberry32 as rng } from '@atomem/bench/rng';

const catalog = new ItemVectors(embedder, CATALOG);

async function fan(items: string[]) {
  const ev = interactions();
  const a = new MemoryAgent({ items: catalog, clock: () => T0 + 600 * MIN, config: { tau: TAU } });
  for (const id of items) await a.observe(ev(id, 'purchase'));
  return a;
}

describe('MemoryAgent, protocol v2', () => {
  it('reports sample the recent liked items; one report per epoch; the memo is kept in the state and the store', async () => {
    const a = await fan(['heat', 'fargo', 'heat', 'alien']);
    const dislike = interactions();
    await a.observe({ ...dislike('titanic', 'dislike'), at: T0 + 500 * MIN });
    expect(a.reportItems()).toEqual(['fargo', 'heat', 'alien']); // distinct, most recent last, no dislikes
    const r = rng(1);
    const rep = a.makeReport(7, DEFAULT_LDP, r)!;
    expect(rep.cohort).toBeLessThan(DEFAULT_LDP.cohorts);
    expect(rep.bucket).toBeLessThan(DEFAULT_LDP.g);
    a.markReported(7);
    expect(a.makeReport(7, DEFAULT_LDP, r)).toBeUndefined();
    expect(a.makeReport(6, DEFAULT_LDP, r)).toBeUndefined();
    // memoized permanent randomization survives a save and a reload (a restarted device cannot be averaged)
    for (let e = 8; e < 40; e++) {
      a.makeReport(e, DEFAULT_LDP, r);
      a.markReported(e);
    }
    const memo = structuredClone(a.snapshot.reporting!.memo);
    expect(Object.keys(memo).sort()).toEqual(['alien', 'fargo', 'heat']);
    const store = await MemoryStore.open({ profile: `v2-${Date.now()}` });
    try {
      await store.saveState(a.snapshot);
      const back = await store.load();
      expect(back.reporting).toEqual({ memo, lastEpoch: 39 });
    } finally {
      store.close();
    }
  });

  it('useRelease links memories to released prototypes and feeds the release popularity into ranking', async () => {
    const a = await fan(['heat', 'fargo', 'godfather']);
    // a population that loves `casino` more than anything
    const hist = new ReportHistogram(DEFAULT_LDP);
    const r = rng(2);
    for (let d = 0; d < 4000; d++) hist.add(makeReport(d % 4 ? ['casino'] : ['matrix'], { ...DEFAULT_LDP, ell: 1 }, {}, r));
    const ids = CATALOG.map((c) => c.id);
    const space = { embedderId: catalog.embedderId, ids, vectors: (await catalog.vectorsOf(ids)).map((v) => v.vector) };
    const communities = {
      communities: [
        { id: 'k0', items: ['heat', 'fargo', 'godfather', 'casino'] },
        { id: 'k1', items: ['alien', 'matrix', 'solaris', 'contact'] },
        { id: 'k2', items: ['notting', 'titanic', 'casablanca', 'emma'] },
      ],
    };
    const release = buildRelease({ epoch: 1, epochMs: 1000, space, communities, hist, ldp: { ...DEFAULT_LDP, ell: 1 }, minContributors: -1e9 });
    const linked = await a.useRelease(release);
    expect(linked).toBeGreaterThan(0);
    expect(a.memories().some((m) => m.links[0] === 'k0')).toBe(true);
    const recs = await a.recommend(['casino', 'matrix', 'emma']);
    const byId = new Map(recs.map((x) => [x.id, x]));
    expect(byId.get('casino')!.features.popularity).toBeGreaterThan(byId.get('emma')!.features.popularity);
    expect(byId.get('casino')!.reasons.some((x) => x.kind === 'popular')).toBe(true);
    // another vector space, or none: nothing linked, no popularity
    expect(await a.useRelease({ ...release, embedderId: 'other' })).toBe(0);
    expect((await a.recommend(['casino'])).every((x) => x.features.popularity === 0)).toBe(true);
  });
});
