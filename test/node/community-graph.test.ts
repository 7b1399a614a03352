import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { FlatVectorStore } from '../../packages/atomem/src/community/vectors.js';
import { CommunityGraph, DEFAULT_MAX_COMMUNITY_SIZE, aggregateItems, prototypeOf, type CommunityChanges, type GraphEdge } from '../../packages/atomem/src/community/index.js';

/** Unit vector in the plane at `deg` degrees (sim of two = cos of their angle difference). */
function at(deg: number): Float32Array {
  const r = (deg * Math.PI) / 180;
  return Float32Array.from([Math.cos(r), Math.sin(r)]);
}

/** An exact store that counts searches and scans (restore must do neither). */
class FlatStoreSpy extends FlatVectorStore {
  constructor(dim: number, private readonly onSearch: () => void) {
    super(dim);
  }
  override searchMany(...args: Parameters<FlatVectorStore['searchMany']>) {
    this.onSearch();
    return super.searchMany(...args);
  }
  override scanMany(...args: Parameters<FlatVectorStore['scanMany']>) {
    this.onSearch();
    return super.scanMany(...args);
  }
}

function dotp(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Partition as a canonical, comparable value. */
function canon(parts: Iterable<string[]>): string[] {
  return [...parts].map((p) => [...p].sort().join(',')).sort();
}

/** Every invariant the graph promises, checked against from-scratch recomputation. */
function checkInvariants(g: CommunityGraph, ids: Iterable<string>, tau: number): void {
  const comms = g.communities();
  // incremental partition = connected components from scratch
  expect(canon(comms.values())).toEqual(canon(g.recomputeAll()));
  // every memory in exactly one community, and communityOf agrees
  const seen = new Map<string, string>();
  for (const [cid, members] of comms) {
    expect(members.length).toBeGreaterThan(0);
    for (const m of members) {
      expect(seen.has(m)).toBe(false);
      seen.set(m, cid);
      expect(g.communityOf(m)).toBe(cid);
    }
  }
  const all = [...ids];
  expect(seen.size).toBe(all.length);
  expect(g.size).toBe(all.length);
  for (const id of all) expect(seen.has(id)).toBe(true);
  // undirected edges with sim ≥ tau; edge count agrees
  let degree = 0;
  for (const id of all) {
    for (const nb of g.neighbours(id)) {
      degree++;
      expect(nb.sim).toBeGreaterThanOrEqual(tau - 1e-6);
      expect(g.neighbours(nb.id).some((x) => x.id === id)).toBe(true);
    }
  }
  expect(g.stats().edges * 2).toBe(degree);
  // prototypes and item counts equal their from-scratch values
  for (const [cid, members] of comms) {
    const want = prototypeOf(members.map((m) => g.vector(m)!));
    const got = g.prototype(cid)!;
    for (let i = 0; i < want.length; i++) expect(got[i]).toBeCloseTo(want[i], 4);
    const wantItems = aggregateItems(members.map((m) => g.itemsOf(m)));
    expect(g.itemCounts(cid)).toEqual(wantItems);
  }
}

describe('relation extraction', () => {
  it('never links memories of the same batch', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.5 });
    const ch = g.addBatch([
      { id: 'a', vector: at(0) },
      { id: 'b', vector: at(0) },
      { id: 'c', vector: at(1) },
    ]);
    expect(g.neighbours('a')).toEqual([]);
    expect(g.neighbours('b')).toEqual([]);
    expect(g.stats().edges).toBe(0);
    expect(g.communityCount).toBe(3);
    expect(ch.createdCommunities).toHaveLength(3);
    // a later batch links to them
    g.addBatch([{ id: 'd', vector: at(2) }]);
    const nd = g.neighbours('d');
    expect(nd).toHaveLength(2); // k1 = 2 of the three candidates
    expect(nd[0].id).toBe('c'); // closest first (cos 1° beats cos 2°)
  });

  it('links mutual top-k1 memories with sim ≥ tau only', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.5 });
    // four existing memories, separate batches; x (0°) ranks a and b first, and enters their lists
    g.addBatch([{ id: 'a', vector: at(10) }]); // sim to new(0°) = cos 10 = 0.985
    g.addBatch([{ id: 'd', vector: at(-70) }]); // cos 70 = 0.342 < tau
    g.addBatch([{ id: 'b', vector: at(-30) }]); // cos 30 = 0.866
    g.addBatch([{ id: 'c', vector: at(55) }]); // cos 55 = 0.574
    g.addBatch([{ id: 'x', vector: at(0) }]);
    const nb = g.neighbours('x');
    expect(nb.map((n) => n.id)).toEqual(['a', 'b']); // top-2, c (0.574) is third
    expect(nb[0].sim).toBeCloseTo(Math.cos((10 * Math.PI) / 180), 5);
    expect(nb[1].sim).toBeCloseTo(Math.cos((30 * Math.PI) / 180), 5);

    const strict = new CommunityGraph({ k1: 2, tau: 0.9 });
    strict.addBatch([{ id: 'a', vector: at(10) }]);
    strict.addBatch([{ id: 'b', vector: at(-30) }]);
    strict.addBatch([{ id: 'x', vector: at(0) }]);
    expect(strict.neighbours('x').map((n) => n.id)).toEqual(['a']); // b is below tau
  });

  it('k1 = 0 links nothing', () => {
    const g = new CommunityGraph({ k1: 0 });
    g.addBatch([{ id: 'a', vector: at(0) }]);
    g.addBatch([{ id: 'b', vector: at(0) }]);
    expect(g.stats().edges).toBe(0);
    expect(g.communityCount).toBe(2);
  });

  it('rejects bad batches without changing state', () => {
    const g = new CommunityGraph();
    g.addBatch([{ id: 'a', vector: at(0) }]);
    const before = canon(g.communities().values());
    expect(() => g.addBatch([{ id: 'b', vector: at(1) }, { id: '', vector: at(2) }])).toThrow(/empty id/);
    expect(() => g.addBatch([{ id: 'b', vector: at(1) }, { id: 'b', vector: at(2) }])).toThrow(/twice/);
    expect(() => g.addBatch([{ id: 'b', vector: [1, 0, 0] }])).toThrow(/3 dimensions, expected 2/);
    expect(() => g.addBatch([{ id: 'b', vector: [NaN, 1] }])).toThrow(/finite/);
    expect(() => g.addBatch([{ id: 'b', vector: [0, 0] }])).toThrow(/zero/);
    expect(canon(g.communities().values())).toEqual(before);
    expect(g.has('b')).toBe(false);
  });
});

describe('community maintenance', () => {
  /** A = chain 0°,20°,40° (3 members); B = chain 80°,100° (2 members); tau = 0.9 ≈ 25.8°. */
  function twoCommunities(): { g: CommunityGraph; A: string; B: string } {
    const g = new CommunityGraph({ k1: 2, tau: 0.9 });
    for (const [id, deg] of [['a1', 0], ['a2', 20], ['a3', 40], ['b1', 80], ['b2', 100]] as const) {
      g.addBatch([{ id, vector: at(deg) }]);
    }
    const A = g.communityOf('a1')!;
    const B = g.communityOf('b1')!;
    expect(A).not.toBe(B);
    expect(g.members(A).sort()).toEqual(['a1', 'a2', 'a3']);
    expect(g.members(B).sort()).toEqual(['b1', 'b2']);
    return { g, A, B };
  }

  it('uses deterministic counter ids', () => {
    const { A, B } = twoCommunities();
    expect(A).toBe('c1');
    expect(B).toBe('c2');
  });

  it('a bridging memory merges two communities; the larger keeps its id', () => {
    const { g, A, B } = twoCommunities();
    const ch = g.addBatch([{ id: 'x', vector: at(60) }]);
    expect(g.neighbours('x').map((n) => n.id).sort()).toEqual(['a3', 'b1']);
    expect(g.communityOf('x')).toBe(A);
    expect(g.communityOf('b2')).toBe(A);
    expect(g.members(B)).toEqual([]);
    expect(ch.mergedCommunities).toEqual(new Map([[B, A]]));
    expect(ch.added).toEqual(['x']);
    expect(ch.changed).toEqual(
      new Map([
        ['x', { to: A }],
        ['b1', { from: B, to: A }],
        ['b2', { from: B, to: A }],
      ]),
    );
    expect(ch.createdCommunities).toEqual([]);
    checkInvariants(g, ['a1', 'a2', 'a3', 'b1', 'b2', 'x'], 0.9);
  });

  it('merges cascade through long chains (relabelling goes beyond 2 hops)', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.9 });
    // A: 5-member chain 0°..80°; B: 4-member chain 190°..130°, inserted far end first, so
    // relabelling B from the bridge must walk 4 hops.
    const a = [0, 20, 40, 60, 80];
    const b = [190, 170, 150, 130];
    a.forEach((d, i) => g.addBatch([{ id: `a${i}`, vector: at(d) }]));
    b.forEach((d, i) => g.addBatch([{ id: `b${i}`, vector: at(d) }]));
    const A = g.communityOf('a0')!;
    const B = g.communityOf('b0')!;
    expect(g.members(A)).toHaveLength(5);
    expect(g.members(B)).toHaveLength(4);
    const ch = g.addBatch([{ id: 'y', vector: at(105) }]); // cos 25 = .906 to a4 and to b3
    expect(g.neighbours('y').map((n) => n.id).sort()).toEqual(['a4', 'b3']);
    for (const id of ['b0', 'b1', 'b2', 'b3', 'y']) expect(g.communityOf(id)).toBe(A);
    expect(ch.mergedCommunities).toEqual(new Map([[B, A]]));
    expect(ch.changed.size).toBe(5);
    checkInvariants(g, [...a.map((_, i) => `a${i}`), ...b.map((_, i) => `b${i}`), 'y'], 0.9);
  });

  it('on equal sizes the older community keeps its id', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.9 });
    g.addBatch([{ id: 'p1', vector: at(0) }]);
    g.addBatch([{ id: 'p2', vector: at(20) }]);
    g.addBatch([{ id: 'q1', vector: at(80) }]);
    g.addBatch([{ id: 'q2', vector: at(60) }]);
    const P = g.communityOf('p1')!;
    const Q = g.communityOf('q1')!;
    const ch = g.addBatch([{ id: 'x', vector: at(40) }]);
    expect(g.communityOf('q1')).toBe(P);
    expect(ch.mergedCommunities.get(Q)).toBe(P);
  });

  it('removing the bridge splits; the larger part keeps the id, the other gets a new one', () => {
    const { g, A, B } = twoCommunities();
    g.addBatch([{ id: 'x', vector: at(60) }]);
    const ch = g.remove(['x']);
    expect(ch.removed).toEqual(['x']);
    expect(g.communityOf('a1')).toBe(A);
    const nb = g.communityOf('b1')!;
    expect(nb).not.toBe(A);
    expect(nb).not.toBe(B); // ids are never reused
    expect(nb).toBe('c3'); // c1 = A, c2 = B, x joined A, so the split-off part is the third id
    expect(ch.splitCommunities).toEqual(new Map([[A, [nb]]]));
    expect(ch.createdCommunities).toEqual([nb]);
    expect(ch.changed).toEqual(
      new Map([
        ['b1', { from: A, to: nb }],
        ['b2', { from: A, to: nb }],
      ]),
    );
    checkInvariants(g, ['a1', 'a2', 'a3', 'b1', 'b2'], 0.9);
  });

  it('removing a leaf or the last member does not split; emptied communities vanish', () => {
    const { g, A, B } = twoCommunities();
    expect(() => g.remove('a3' as unknown as string[])).toThrow(TypeError);
    const ch = g.remove(['a3', 'unknown']);
    expect(ch.removed).toEqual(['a3']);
    expect(ch.changed.size).toBe(0);
    expect(ch.splitCommunities.size).toBe(0);
    expect(g.communityOf('a1')).toBe(A);
    const ch2 = g.remove(['b1', 'b2']);
    expect(ch2.removedCommunities).toEqual([B]);
    expect(g.communities().has(B)).toBe(false);
    checkInvariants(g, ['a1', 'a2'], 0.9);
  });

  it('upsert of an existing id is remove + add', () => {
    const { g, A, B } = twoCommunities();
    // move b2 (100°) next to a1: it leaves B and joins A
    const ch = g.addBatch([{ id: 'b2', vector: at(-10) }]);
    expect(ch.added).toEqual(['b2']);
    expect(ch.removed).toEqual([]);
    expect(ch.changed.get('b2')).toEqual({ from: B, to: A });
    expect(g.neighbours('b2').map((n) => n.id)).toEqual(['a1']);
    expect(g.members(B)).toEqual(['b1']);
    checkInvariants(g, ['a1', 'a2', 'a3', 'b1', 'b2'], 0.9);
    // re-upserting the same vector keeps everything and reports the memory as added
    const ch2 = g.addBatch([{ id: 'b2', vector: at(-10) }]);
    expect(ch2.changed.get('b2')).toEqual({ from: A, to: A });
    expect(ch2.createdCommunities).toEqual([]);
    expect(ch2.mergedCommunities.size).toBe(0);
  });

  it('an upsert that splits and re-merges reports no transient communities', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.9 });
    for (const [id, deg] of [['a', 0], ['m', 20], ['b', 40]] as const) g.addBatch([{ id, vector: at(deg) }]);
    const C = g.communityOf('a')!;
    const ch = g.addBatch([{ id: 'm', vector: at(21) }]); // the bridge is replaced by a bridge
    expect(g.communityOf('a')).toBe(C);
    expect(g.communityOf('b')).toBe(C);
    expect(ch.createdCommunities).toEqual([]);
    expect(ch.mergedCommunities.size).toBe(0);
    expect(ch.splitCommunities.size).toBe(0);
    expect([...ch.changed.keys()]).toEqual(['m']);
  });

  it('stats: histogram, singletons, largest share', () => {
    const { g } = twoCommunities();
    g.addBatch([{ id: 'far', vector: at(250) }]);
    const s = g.stats();
    expect(s).toMatchObject({ memories: 6, edges: 3, communities: 3, singletons: 1, largestCommunity: 3 });
    expect(s.largestShare).toBeCloseTo(0.5);
    expect(s.sizeHistogram).toEqual({ '1': 1, '2': 1, '3-4': 1 });
  });
});

describe('prototypes in the graph', () => {
  it('prototype = normalised mean of members; items counted per member', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.5 });
    g.addBatch([{ id: 'a', vector: at(0), items: ['i1', 'i2'] }]);
    g.addBatch([{ id: 'b', vector: [2, 2], items: ['i1', 'i1'] }]); // normalised on insert; dup counts once
    g.addBatch([{ id: 'c', vector: at(90) }]); // no items uploaded
    const cid = g.communityOf('a')!;
    expect(g.members(cid).sort()).toEqual(['a', 'b', 'c']);
    const mean = [1 + Math.SQRT1_2 + 0, 0 + Math.SQRT1_2 + 1];
    const n = Math.hypot(...mean);
    const p = g.prototype(cid)!;
    expect(p[0]).toBeCloseTo(mean[0] / n, 6);
    expect(p[1]).toBeCloseTo(mean[1] / n, 6);
    expect(g.itemCounts(cid)).toEqual(new Map([['i1', 2], ['i2', 1]]));
    g.remove(['a', 'b']);
    const c = g.communityOf('c')!;
    expect(g.itemCounts(c)).toBeUndefined(); // nobody left uploaded items
    expect([...g.prototype(c)!].map((x) => +x.toFixed(6))).toEqual([0, 1]);
  });
});

describe('mutual top-k1 maintenance', () => {
  it('an insert can push a memory out of a list: the link goes and the community splits', () => {
    // k1 = 1: a (0°) and b (10°) are each other's best → linked. c at 3° becomes a's best (cos 3°
    // beats cos 10°), a drops b, and c's best is a: a–c linked, b alone.
    const g = new CommunityGraph({ k1: 1, tau: 0.9 });
    g.addBatch([{ id: 'a', vector: at(0) }]);
    g.addBatch([{ id: 'b', vector: at(10) }]);
    const AB = g.communityOf('a')!;
    expect(g.communityOf('b')).toBe(AB);
    const ch = g.addBatch([{ id: 'c', vector: at(3) }]);
    expect(g.neighbours('a').map((n) => n.id)).toEqual(['c']);
    expect(g.neighbours('b')).toEqual([]);
    expect(g.candidates('b').map((n) => n.id)).toEqual(['c']); // b's best is c, but c prefers a
    expect(g.communityOf('c')).toBe(AB); // {a, c} and {b} hold one old member each: the part with the smaller first id keeps it
    expect(g.communityOf('b')).not.toBe(AB);
    expect(ch.splitCommunities).toEqual(new Map([[AB, [g.communityOf('b')!]]]));
    expect(new Set(ch.relinked)).toEqual(new Set(['a', 'b', 'c']));
    expect(g.recomputeFromScratch()).toEqual({ edges: g.edges(), partition: g.recomputeAll() });
  });

  it('a removal refills lists: new links appear and communities merge', () => {
    const g = new CommunityGraph({ k1: 1, tau: 0.9 });
    g.addBatch([{ id: 'a', vector: at(0) }]);
    g.addBatch([{ id: 'b', vector: at(10) }]);
    g.addBatch([{ id: 'c', vector: at(3) }]);
    expect(g.communityOf('b')).not.toBe(g.communityOf('a'));
    const ch = g.remove(['c']);
    expect(g.neighbours('a').map((n) => n.id)).toEqual(['b']); // a's list refilled with b
    expect(g.communityOf('a')).toBe(g.communityOf('b'));
    expect(ch.mergedCommunities.size).toBe(1);
    expect(new Set(ch.relinked)).toEqual(new Set(['a', 'b']));
  });

  it('ties rank the smaller id first, whatever the insertion order', () => {
    for (const order of [['p', 'q', 'x'], ['x', 'q', 'p'], ['q', 'x', 'p']]) {
      const g = new CommunityGraph({ k1: 1, tau: 0.5 });
      const vec: Record<string, Float32Array> = { p: at(20), q: at(20), x: at(0) };
      for (const id of order) g.addBatch([{ id, vector: vec[id] }]);
      expect(g.candidates('x').map((n) => n.id)).toEqual(['p']); // p and q tie for x: p is the smaller id
      // p and q are identical (sim 1): each other's best, so x's choice is not returned: x stays alone
      expect(g.edges().map((e) => `${e[0]}-${e[1]}`)).toEqual(['p-q']);
      expect(g.communityOf('x')).not.toBe(g.communityOf('p'));
    }
  });

  it('explicit batch tags: memories sharing a tag are never linked, across calls too', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.5 });
    g.addBatch([{ id: 'a', vector: at(0), batch: 'dev1' }]);
    g.addBatch([{ id: 'b', vector: at(1), batch: 'dev1' }]);
    expect(g.edges()).toEqual([]);
    g.addBatch([
      { id: 'c', vector: at(2), batch: 'dev2' },
      { id: 'd', vector: at(3), batch: 'dev3' },
    ]);
    // c and d are of one call but of different devices: linked to each other and to a, b
    expect(g.neighbours('c').map((n) => n.id).sort()).toEqual(['b', 'd']);
    expect(g.neighbours('d').map((n) => n.id).sort()).toEqual(['b', 'c']);
    expect(g.recomputeFromScratch().edges).toEqual(g.edges());
  });

  it('restore() rebuilds links and communities from persisted candidate lists without searching', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.8 });
    for (let i = 0; i < 30; i++) g.addBatch([{ id: `m${i}`, vector: at((i * 37) % 120), items: [`i${i % 4}`] }]);
    const saved = [...g.communities().values()].flat().map((id) => ({ id, vector: g.vector(id)!, items: [...(g.itemsOf(id) ?? [])], candidates: g.candidates(id) }));
    let searched = 0;
    const h = new CommunityGraph({
      k1: 2,
      tau: 0.8,
      createVectorSearch: (d) => {
        const inner = new FlatStoreSpy(d, () => searched++);
        return inner;
      },
    });
    h.restore(saved);
    expect(searched).toBe(0);
    expect(h.edges()).toEqual(g.edges());
    expect(canon(h.communities().values())).toEqual(canon(g.communities().values()));
    for (const id of g.communities().keys()) expect(h.itemCounts(h.communityOf(g.members(id)[0])!)).toEqual(g.itemCounts(id));
    expect(() => h.restore(saved)).toThrow(/empty graph/);
  });
});

describe('chaining', () => {
  /** A long line: 2,000 points 0.05° apart on an arc, each its own upload. */
  function line(g: CommunityGraph, n = 2000): void {
    for (let i = 0; i < n; i++) g.addBatch([{ id: `p${String(i).padStart(4, '0')}`, vector: at(i * 0.05) }]);
  }

  it('a long line of points no longer makes one giant community', () => {
    const g = new CommunityGraph({ k1: 2, tau: 0.99 });
    line(g);
    const s = g.stats();
    // mutual top-2 on a line is a path: the old "link to your top-k1 predecessors" rule and plain
    // components both give one community of 2,000; the cap cuts it
    expect(s.edges).toBeGreaterThan(1900);
    expect(s.largestCommunity).toBeLessThanOrEqual(DEFAULT_MAX_COMMUNITY_SIZE);
    expect(s.largestShare).toBeLessThanOrEqual(0.13);
    expect(g.recomputeAll()).toEqual(g.recomputeFromScratch().partition);
    // each community is a connected stretch of the line
    for (const members of g.communities().values()) {
      const idx = members.map((m) => Number(m.slice(1))).sort((a, b) => a - b);
      expect(idx[idx.length - 1] - idx[0] + 1).toBe(idx.length);
    }
    const small = new CommunityGraph({ k1: 2, tau: 0.99, maxCommunitySize: 50 });
    line(small);
    expect(small.stats().largestCommunity).toBeLessThanOrEqual(50);
    const uncapped = new CommunityGraph({ k1: 2, tau: 0.99, maxCommunitySize: Infinity });
    line(uncapped, 600);
    expect(uncapped.stats().largestCommunity).toBe(600); // what the cap is for
  });
});

// ───────────────────────── property test ─────────────────────────

/** Brute-force reference: relation extraction and partition from scratch on the live set. */
function reference(live: Map<string, { v: Float32Array; tag: string }>, k1: number, tau: number, cap: number): { edges: GraphEdge[]; lists: Map<string, string[]>; partition: string[] } {
  const ids = [...live.keys()].sort();
  const lists = new Map<string, { id: string; sim: number }[]>();
  for (const x of ids) {
    const vx = live.get(x)!;
    const cand = ids
      .filter((y) => y !== x && live.get(y)!.tag !== vx.tag)
      .map((y) => ({ id: y, sim: dotp(vx.v, live.get(y)!.v) }))
      .filter((c) => c.sim >= tau)
      .sort((a, b) => b.sim - a.sim || (a.id < b.id ? -1 : 1));
    lists.set(x, cand.slice(0, k1));
  }
  const edges: GraphEdge[] = [];
  for (const x of ids) for (const c of lists.get(x)!) if (x < c.id && lists.get(c.id)!.some((e) => e.id === x)) edges.push([x, c.id, c.sim]);
  edges.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1));
  // size-capped single linkage, strongest first, ties by ids
  const order = [...edges].sort((a, b) => b[2] - a[2] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1));
  const group = new Map(ids.map((id) => [id, [id]]));
  for (const [a, b] of order) {
    const ga = group.get(a)!;
    const gb = group.get(b)!;
    if (ga === gb || ga.length + gb.length > cap) continue;
    const merged = [...ga, ...gb];
    for (const m of merged) group.set(m, merged);
  }
  return { edges, lists: new Map([...lists].map(([k, l]) => [k, l.map((e) => e.id)])), partition: canon(new Set(group.values())) };
}

type Op =
  | { kind: 'add'; tags: boolean; batch: { centre: number; angle: number; noise: number[]; scale: number; items: number[] | null; tag: number }[] }
  | { kind: 'remove'; picks: number[] }
  | { kind: 'upsert'; picks: number[]; centre: number; angle: number; noise: number[]; scale: number };

describe('incremental relation extraction and communities = recomputation from scratch (property)', () => {
  it('holds after every addBatch / upsert / remove on clustered random vectors', () => {
    const arb = fc
      .record({
        dim: fc.integer({ min: 3, max: 8 }),
        k1: fc.integer({ min: 1, max: 4 }),
        tau: fc.constantFrom(0.3, 0.5, 0.7, 0.85, 0.95),
        cap: fc.constantFrom(Infinity, 2, 3, 5, 8),
        centres: fc.integer({ min: 1, max: 4 }),
        // curve mode: points on a circle in the first two dims (+ small noise), with a high tau,
        // so the graph is made of chains: merges and splits then relabel over many hops
        curve: fc.boolean(),
        // a few exact duplicates: ties in similarity, broken by id
        dup: fc.boolean(),
      })
      .map((cfg) => (cfg.curve ? { ...cfg, tau: cfg.tau < 0.85 ? 0.97 : cfg.tau } : cfg))
      .chain((cfg) => {
        const vec = fc.array(fc.double({ min: -1, max: 1, noNaN: true }), { minLength: cfg.dim, maxLength: cfg.dim });
        const scale = fc.constantFrom(0.05, 0.3, 0.8);
        const angle = fc.integer({ min: 0, max: 359 });
        const centre = fc.integer({ min: 0, max: cfg.centres - 1 });
        const op: fc.Arbitrary<Op> = fc.oneof(
          {
            weight: 3,
            arbitrary: fc.record({
              kind: fc.constant('add' as const),
              tags: fc.boolean(),
              batch: fc.array(
                fc.record({ centre, angle, noise: vec, scale, items: fc.option(fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 })), tag: fc.integer({ min: 0, max: 3 }) }),
                { minLength: 1, maxLength: 5 },
              ),
            }),
          },
          { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), picks: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }) }) },
          {
            weight: 1,
            arbitrary: fc.record({ kind: fc.constant('upsert' as const), picks: fc.array(fc.nat(), { minLength: 1, maxLength: 3 }), centre, angle, noise: vec, scale }),
          },
        );
        return fc.record({
          cfg: fc.constant(cfg),
          centreVecs: fc.array(vec, { minLength: cfg.centres, maxLength: cfg.centres }),
          ops: fc.array(op, { minLength: 1, maxLength: 40, size: 'max' }),
        });
      });

    let steps = 0;
    fc.assert(
      fc.property(arb, ({ cfg, centreVecs, ops }) => {
        const g = new CommunityGraph({ k1: cfg.k1, tau: cfg.tau, maxCommunitySize: cfg.cap });
        const make = (c: number, angle: number, noise: number[], scale: number): number[] => {
          const r = ((cfg.dup ? Math.round(angle / 45) * 45 : angle) * Math.PI) / 180;
          const v = cfg.curve
            ? noise.map((x, i) => (i === 0 ? Math.cos(r) : i === 1 ? Math.sin(r) : cfg.dup ? 0 : 0.02 * x))
            : centreVecs[c].map((x, i) => x + (cfg.dup ? 0 : scale * noise[i]));
          return Math.hypot(...v) > 1e-6 ? v : [1, ...v.slice(1).map(() => 0)];
        };
        const live = new Map<string, { v: Float32Array; tag: string }>();
        let next = 0;
        let call = 0;
        for (const op of ops) {
          const before = new Map([...live.keys()].map((id) => [id, g.communityOf(id)!]));
          const prevIds = new Set(live.keys());
          let ch: CommunityChanges;
          let batch: { id: string; vector: number[]; items?: string[]; batch?: string }[] = [];
          const tag = `call${call++}`;
          if (op.kind === 'remove') {
            const ids = [...live.keys()];
            const gone = ids.length === 0 ? [] : op.picks.map((p) => ids[p % ids.length]);
            ch = g.remove(gone);
            for (const id of gone) live.delete(id);
            expect(new Set(ch.removed)).toEqual(new Set(gone));
          } else {
            if (op.kind === 'add') {
              batch = op.batch.map((m) => ({
                id: `m${next++}`,
                vector: make(m.centre, m.angle, m.noise, m.scale),
                ...(m.items === null ? {} : { items: m.items.map((i) => `i${i}`) }),
                ...(op.tags ? { batch: `dev${m.tag}` } : {}),
              }));
            } else {
              const ids = [...live.keys()];
              if (ids.length === 0) continue;
              const chosen = [...new Set(op.picks.map((p) => ids[p % ids.length]))];
              batch = chosen.map((id, j) => ({ id, vector: make(op.centre, op.angle + 7 * j, op.noise.map((x) => x * (j + 1)), op.scale) }));
            }
            ch = g.addBatch(batch);
            for (const m of batch) live.set(m.id, { v: g.vector(m.id)!, tag: m.batch ?? tag });
          }
          steps++;
          // incremental links, lists and partition = the brute-force reference = recomputeFromScratch
          const ref = reference(live, cfg.k1, cfg.tau, cfg.cap);
          expect(g.edges()).toEqual(ref.edges);
          for (const id of live.keys()) expect(g.candidates(id).map((n) => n.id)).toEqual(ref.lists.get(id));
          expect(canon(g.communities().values())).toEqual(ref.partition);
          const scratch = g.recomputeFromScratch();
          expect(scratch.edges).toEqual(ref.edges);
          expect(canon(scratch.partition)).toEqual(ref.partition);
          checkInvariants(g, live.keys(), cfg.tau);
          for (const members of g.communities().values()) expect(members.length).toBeLessThanOrEqual(cfg.cap);
          // change set: every memory whose community differs is reported, with correct from/to
          for (const id of live.keys()) {
            const now = g.communityOf(id)!;
            const was = before.get(id);
            const c = ch.changed.get(id);
            if (!prevIds.has(id) || was !== now || batch.some((m) => m.id === id)) {
              expect(c).toBeDefined();
              expect(c!.to).toBe(now);
              expect(c!.from).toBe(prevIds.has(id) ? was : undefined);
            } else {
              expect(c).toBeUndefined();
            }
          }
          for (const [from, to] of ch.mergedCommunities) {
            expect(g.communities().has(from)).toBe(false);
            expect(g.communities().has(to)).toBe(true);
          }
          for (const id of ch.createdCommunities) expect(g.communities().has(id)).toBe(true);
          for (const id of ch.removedCommunities) expect(g.communities().has(id)).toBe(false);
          for (const id of ch.relinked) expect(live.has(id)).toBe(true);
        }
      }),
      { numRuns: 200, seed: 2026 },
    );
    expect(steps).toBeGreaterThan(2000);
  });

  it('holds for several seeds (seeded loop, 60-dim clustered vectors, larger sets)', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      let s = seed * 2654435761;
      const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32);
      const dim = 60;
      const centres = Array.from({ length: 6 }, () => Array.from({ length: dim }, () => rnd() - 0.5));
      const cap = [Infinity, 10, 25][seed % 3];
      const g = new CommunityGraph({ k1: 1 + (seed % 3), tau: 0.3, maxCommunitySize: cap });
      const live = new Map<string, { v: Float32Array; tag: string }>();
      let next = 0;
      for (let step = 0; step < 120; step++) {
        const r = rnd();
        const tag = `call${step}`;
        if (r < 0.6 || live.size < 5) {
          const c = centres[Math.floor(rnd() * centres.length)];
          const batch = Array.from({ length: 1 + Math.floor(rnd() * 6) }, () => ({ id: `s${next++}`, vector: c.map((x) => x + 0.4 * (rnd() - 0.5)) }));
          g.addBatch(batch);
          for (const m of batch) live.set(m.id, { v: g.vector(m.id)!, tag });
        } else if (r < 0.8) {
          const ids = [...live.keys()];
          const gone = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => ids[Math.floor(rnd() * ids.length)]);
          g.remove(gone);
          for (const id of gone) live.delete(id);
        } else {
          const ids = [...live.keys()];
          const c = centres[Math.floor(rnd() * centres.length)];
          const chosen = [...new Set(Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => ids[Math.floor(rnd() * ids.length)]))];
          g.addBatch(chosen.map((id) => ({ id, vector: c.map((x) => x + 0.4 * (rnd() - 0.5)) })));
          for (const id of chosen) live.set(id, { v: g.vector(id)!, tag });
        }
        const ref = reference(live, g.k1, g.tau, cap);
        expect(g.edges()).toEqual(ref.edges);
        expect(canon(g.communities().values())).toEqual(ref.partition);
        expect(g.recomputeFromScratch().edges).toEqual(ref.edges);
      }
      expect(live.size).toBeGreaterThan(30);
    }
  });
});
