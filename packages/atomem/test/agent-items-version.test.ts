/**
 * `ItemVectors.version` (what the shelf's kept linked items and recent signals are checked
 * against): it changes when an item vector may have changed — items added or replaced, centring,
 * a seeded vector — and not when a missing vector is computed, which leaves every earlier vector
 * the same object.
 */
import { describe, expect, it } from 'vitest';
import { ItemVectors } from '../src/agent/items.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';

const catalog = Array.from({ length: 6 }, (_, i) => ({ id: `p${i}`, title: `product ${i}` }));

describe('ItemVectors.version', () => {
  it('changes with the catalog, centring and seeding; not when a missing vector is computed', async () => {
    const items = new ItemVectors(createHashingEmbedder({ dim: 16 }), catalog);
    const v0 = items.version;
    const [a] = await items.vectorsOf(['p0']);
    await items.vectorsOf(['p1', 'p2']);
    expect(items.version).toBe(v0);
    expect(items.cached('p0')).toBe(a);
    items.add([{ id: 'p0', title: 'product 0 renamed' }]);
    const v1 = items.version;
    expect(v1).not.toBe(v0);
    expect(items.cached('p0')).toBeUndefined();
    await items.centre();
    const v2 = items.version;
    expect(v2).not.toBe(v1);
    const [b] = await items.vectorsOf(['p1']);
    expect(items.version).toBe(v2);
    expect(items.cached('p1')).toBe(b);
    items.seed('p1', new Float32Array(16).fill(1));
    expect(items.version).not.toBe(v2);
    expect(items.cached('p1')).not.toBe(b);
  });
});
