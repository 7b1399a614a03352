import { describe, expect, it } from 'vitest';
import { createInProcessIndex } from '../../packages/atomem/src/community/index.js';
import { rank } from '../../packages/atomem/src/core/rank.js';
import { resolveConfig } from '../../packages/atomem/src/core/config.js';
import type { KnownCommunity } from '../../packages/atomem/src/core/retrieve.js';

const EMB = 'e@1';
// All vectors close together: one community, so `related` is about items only.
const vec = (x: number) => Float32Array.from([1, x, 0]);

describe('related items (level items)', () => {
  function build(minCommunitySize = 2) {
    const ix = createInProcessIndex({ embedderId: EMB, tau: 0.5, k1: 3, minCommunitySize });
    ix.upsertSync([{ id: 'o1', embedderId: EMB, vector: vec(0), items: ['a', 'b'] }]);
    ix.upsertSync([{ id: 'm1', embedderId: EMB, vector: vec(0.1), items: ['a', 'x'] }]);
    ix.upsertSync([{ id: 'm2', embedderId: EMB, vector: vec(0.2), items: ['b', 'x', 'y'] }]);
    ix.upsertSync([{ id: 'm3', embedderId: EMB, vector: vec(0.3), items: ['z'] }]);
    return ix;
  }

  it('weights the items of members sharing the asker’s items; members sharing nothing add nothing', () => {
    const [view] = build().communitiesSync(['o1']);
    expect(view.related).toBeDefined();
    const rel = view.related!;
    // m1 shares 1 of 2 items (1/√2), m2 shares 1 of 3 (1/√3); m3 shares none.
    expect(rel.x).toBeCloseTo(1 / Math.SQRT2 + 1 / Math.sqrt(3), 6);
    expect(rel.y).toBeCloseTo(1 / Math.sqrt(3), 6);
    expect(rel.z).toBeUndefined();
    // plain aggregates still count every member once
    expect(view.items!.z).toBe(1);
  });

  it('is withheld below k overlapping members, and absent at level embeddings', () => {
    expect(build(3).communitiesSync(['o1'])[0].related).toBeUndefined();
    const ix = createInProcessIndex({ embedderId: EMB, tau: 0.5, k1: 3, minCommunitySize: 2 });
    ix.upsertSync([{ id: 'o1', embedderId: EMB, vector: vec(0) }]);
    ix.upsertSync([{ id: 'm1', embedderId: EMB, vector: vec(0.1) }]);
    ix.upsertSync([{ id: 'm2', embedderId: EMB, vector: vec(0.2) }]);
    expect(ix.communitiesSync(['o1'])[0].related).toBeUndefined();
  });

  it('follows replacements and deletions', () => {
    const ix = build();
    ix.upsertSync([{ id: 'm1', embedderId: EMB, vector: vec(0.1), items: ['q'] }]); // m1 no longer shares 'a'
    expect(ix.communitiesSync(['o1'])[0].related).toBeUndefined(); // only m2 overlaps now: below k = 2
    ix.upsertSync([{ id: 'm4', embedderId: EMB, vector: vec(0.15), items: ['a', 'w'] }]);
    expect(ix.communitiesSync(['o1'])[0].related!.w).toBeCloseTo(1 / Math.SQRT2, 6);
    ix.deleteSync(['m4']);
    expect(ix.communitiesSync(['o1'])[0].related).toBeUndefined();
  });

  it('the ranker turns it into the `related` signal and an "also picked" reason', () => {
    const [view] = build().communitiesSync(['o1']);
    const known: KnownCommunity = { view, summary: 's', itemTotal: 1, relatedTotal: Object.values(view.related!).reduce((a, b) => a + b, 0) };
    const cfg = resolveConfig({ weights: { memory: 0, profile: 0, recent: 0, prototype: 0, members: 0, communityItems: 0, popularity: 0, related: 1 } });
    const out = rank(
      {
        memories: [],
        candidates: [
          { id: 'z', vector: vec(0) },
          { id: 'x', vector: vec(0) },
          { id: 'y', vector: vec(0) },
        ],
        communities: { byMemory: new Map([['own', [known]]]) },
        now: 0,
      },
      cfg,
    );
    expect(out.map((o) => o.id)).toEqual(['x', 'y', 'z']);
    expect(out[0].reasons.some((r) => r.kind === 'alsoPicked')).toBe(true);
  });
});
