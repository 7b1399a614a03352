// The service's neighbour index: usearch HNSW above a size threshold, exact flat scan below,
// exact re-scoring of HNSW candidates, replace/remove semantics, bulk (re)builds.
import { describe, expect, it } from 'vitest';
import { createInProcessIndex, FlatVectorStore } from '../../packages/atomem/src/community/index.js';
import { HnswVectorSearch, hnswVectorSearch } from '../../packages/atomem-index/src/vector-index.js';
import { clustered } from '../fixtures/index-wire.js';

const dotp = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
};

describe('HnswVectorSearch', () => {
  it('agrees with the exact store: exact similarities, bound, order, high recall (i8 and f32)', () => {
    for (const quantization of ['i8', 'f32'] as const) {
      const dim = 32;
      const gen = clustered(1, dim, 20, 0.6);
      const exact = new FlatVectorStore(dim);
      const hnsw = new HnswVectorSearch(dim, { exactBelow: 0, quantization });
      for (let i = 0; i < 1500; i++) {
        const v = gen();
        exact.add(`m${i}`, v);
        hnsw.add(`m${i}`, v);
      }
      expect(hnsw.size).toBe(1500);
      expect(hnsw.stats()).toMatchObject({ hnsw: true });
      let found = 0;
      let total = 0;
      const queries = Array.from({ length: 100 }, () => gen());
      const many = hnsw.searchMany(queries, 5, 0.3);
      queries.forEach((q, qi) => {
        const truth = exact.search(q, 5, 0.3);
        const got = hnsw.search(q, 5, 0.3);
        expect(many[qi]).toEqual(got);
        for (let i = 0; i < got.length; i++) {
          expect(got[i].sim).toBeCloseTo(dotp(q, exact.vector(got[i].id)!), 5);
          expect(got[i].sim).toBeGreaterThanOrEqual(0.3);
          if (i > 0) expect(got[i].sim).toBeLessThanOrEqual(got[i - 1].sim);
        }
        const ids = new Set(got.map((h) => h.id));
        found += truth.filter((h) => ids.has(h.id)).length;
        total += truth.length;
      });
      expect(found / total, quantization).toBeGreaterThan(0.95);
      expect(hnsw.stats().hnswSearches).toBe(200);
      hnsw.dispose();
    }
  });

  it('applies filters (widening the candidate list) and returns everything when k exceeds the size', () => {
    const dim = 16;
    const gen = clustered(2, dim, 4, 0.5);
    const exact = new FlatVectorStore(dim);
    const hnsw = new HnswVectorSearch(dim, { exactBelow: 0 });
    for (let i = 0; i < 400; i++) {
      const v = gen();
      exact.add(`m${i}`, v);
      hnsw.add(`m${i}`, v);
    }
    const rare = (id: string) => id.endsWith('7');
    for (let t = 0; t < 20; t++) {
      const q = gen();
      const got = hnsw.search(q, 3, -1, rare);
      expect(got.every((h) => rare(h.id))).toBe(true);
      expect(got.map((h) => h.id)).toEqual(exact.search(q, 3, -1, rare).map((h) => h.id));
    }
    expect(hnsw.search(gen(), 10_000, -1)).toHaveLength(400);
    expect(hnsw.search(gen(), 0, -1)).toEqual([]);
  });

  it('replace, remove, has, vector; exact below the threshold with hysteresis; rebuild after many removals', () => {
    const dim = 8;
    const gen = clustered(3, dim, 2, 0.3);
    const s = new HnswVectorSearch(dim, { exactBelow: 20 });
    for (let i = 0; i < 19; i++) s.add(`m${i}`, gen(0));
    expect(s.stats().hnsw).toBe(false);
    s.add('m19', gen(0));
    expect(s.stats()).toMatchObject({ hnsw: true, builds: 1, size: 20 });
    // Replace moves m0 to the other cluster.
    const far = gen(1);
    s.add('m0', far);
    expect(s.size).toBe(20);
    expect(Array.from(s.vector('m0')!)).toEqual(Array.from(far));
    expect(s.search(far, 1, -1)[0].id).toBe('m0');
    expect(s.remove('m0')).toBe(true);
    expect(s.remove('m0')).toBe(false);
    expect(s.has('m0')).toBe(false);
    expect(s.search(far, 19, -1).map((h) => h.id)).not.toContain('m0');
    // Dropping below exactBelow / 2 frees the graph; searches are exact again.
    for (let i = 1; i < 12; i++) s.remove(`m${i}`);
    expect(s.stats()).toMatchObject({ hnsw: false, size: 8 });
    const exactBefore = s.stats().exactSearches;
    expect(s.search(gen(0), 3, -1)).toHaveLength(3);
    expect(s.stats().exactSearches).toBe(exactBefore + 1);
    // Many replacements leave tombstones in usearch: the graph is rebuilt from the exact copy.
    const t = new HnswVectorSearch(dim, { exactBelow: 0 });
    for (let i = 0; i < 50; i++) t.add(`x${i}`, gen());
    for (let round = 0; round < 25; round++) for (let i = 0; i < 50; i++) t.add(`x${i}`, gen());
    expect(t.stats().builds).toBeGreaterThan(1);
    expect(t.size).toBe(50);
    const q = gen();
    expect(t.search(q, 50, -1)).toHaveLength(50);
  });

  it('suspend() keeps only the exact store; resume() builds the graph in one pass', () => {
    const dim = 8;
    const gen = clustered(4, dim, 3, 0.4);
    const s = new HnswVectorSearch(dim, { exactBelow: 10 });
    s.suspend();
    for (let i = 0; i < 100; i++) s.add(`m${i}`, gen());
    s.remove('m5');
    expect(s.stats()).toMatchObject({ hnsw: false, builds: 0, size: 99 });
    expect(s.search(gen(), 2, -1)).toHaveLength(2);
    s.resume();
    expect(s.stats()).toMatchObject({ hnsw: true, builds: 1, size: 99 });
    expect(s.search(gen(), 99, -1)).toHaveLength(99);
  });

  it('drives createInProcessIndex: same communities as the exact store on separated clusters', () => {
    const dim = 24;
    const gen = clustered(5, dim, 6, 0.35);
    const a = createInProcessIndex({ embedderId: 'e', minCommunitySize: 3 });
    const b = createInProcessIndex({ embedderId: 'e', minCommunitySize: 3, createVectorSearch: hnswVectorSearch({ exactBelow: 0 }) });
    for (let batch = 0; batch < 60; batch++) {
      const ups = Array.from({ length: 5 }, (_, i) => ({ id: `m${batch}-${i}`, embedderId: 'e', vector: gen() }));
      a.upsertSync(ups);
      b.upsertSync(ups);
    }
    const parts = (ix: typeof a) => ix.graph.recomputeAll();
    const pa = parts(a);
    const pb = parts(b);
    // HNSW is approximate: allow a handful of links to differ, never a merged cluster structure.
    expect(pb.length).toBeGreaterThan(0);
    expect(Math.abs(pa.length - pb.length)).toBeLessThanOrEqual(3);
    const largest = (p: string[][]) => p.map((x) => x.length).sort((x, y) => y - x).slice(0, 6);
    expect(largest(pb)).toEqual(largest(pa));
  });

  it('mutual top-k1 over HNSW (approximate: bounded searches) stays within 2 % of the exact links after inserts and deletes', () => {
    const dim = 32;
    const gen = clustered(7, dim, 40, 0.5);
    const a = createInProcessIndex({ embedderId: 'e', tau: 0.5 });
    const b = createInProcessIndex({ embedderId: 'e', tau: 0.5, createVectorSearch: hnswVectorSearch({ exactBelow: 0 }) });
    const ids: string[] = [];
    let r = 12345;
    const rnd = () => ((r = (r * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let batch = 0; batch < 400; batch++) {
      const ups = Array.from({ length: 5 }, (_, i) => ({ id: `m${batch}-${i}`, embedderId: 'e', vector: gen() }));
      a.upsertSync(ups);
      b.upsertSync(ups);
      ids.push(...ups.map((u) => u.id));
      if (rnd() < 0.5) {
        const gone = ids.splice(Math.floor(rnd() * ids.length), 1);
        a.deleteSync(gone);
        b.deleteSync(gone);
      }
    }
    const key = (e: [string, string, number]) => `${e[0]}|${e[1]}`;
    const ea = new Set(a.graph.edges().map(key));
    const eb = new Set(b.graph.edges().map(key));
    const shared = [...ea].filter((e) => eb.has(e)).length;
    expect(ea.size).toBeGreaterThan(500);
    expect(shared / (ea.size + eb.size - shared)).toBeGreaterThanOrEqual(0.98);
    // the exact store's incremental graph is its recomputation from scratch, exactly
    const scratch = a.graph.recomputeFromScratch();
    expect(scratch.edges).toEqual(a.graph.edges());
    expect(scratch.partition).toEqual(a.graph.recomputeAll());
  });
});
