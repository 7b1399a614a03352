/** Single-item memories that were never reinforced are absorbed into the interest they belong to. */
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../src/core/config.js';
import { rulesPlanner, singletonAbsorptions } from '../src/core/planner.js';
import { MemoryAgent } from '../src/agent/agent.js';
import { ItemVectors } from '../src/agent/items.js';
import { CATALOG, MIN, T0, embedder } from '../../../test/fixtures/film-catalog.js';
import { NOW, mem, state } from '../../../test/fixtures/planner-state.js';

// tau 0.9 → absorbed at cos ≥ 0.81 (≈ 35.9°)
const cfg = resolveConfig({ tau: 0.9, sweepEvery: 1 });

const host = (id: string, deg: number) => mem(id, deg, { items: [`${id}-1`, `${id}-2`], evidence: 4 });

describe('singletonAbsorptions', () => {
  it('absorbs a never-reinforced singleton into its nearest multi-item memory at cos ≥ tau × absorbSingletons', () => {
    const ms = [host('outdoor', 0), host('audio', 90), mem('poles', 20, { evidence: 1 }), mem('far', 45, { evidence: 1 })];
    const used = new Set<string>();
    const out = singletonAbsorptions(ms, cfg, used, NOW);
    expect(out.map(([, keep, absorb]) => [keep, absorb])).toEqual([['outdoor', 'poles']]);
    expect(out[0][0]).toBeCloseTo(Math.cos((20 * Math.PI) / 180), 6);
  });

  it('leaves alone: reinforced memories, multi-item ones, other polarity, and everything at absorbSingletons 0', () => {
    const ms = [
      host('outdoor', 0),
      mem('strong', 10, { evidence: 2 }),
      mem('pair', 10, { items: ['a', 'b'], evidence: 1 }),
      mem('dislike', 5, { evidence: 1, strength: -0.4 }),
    ];
    expect(singletonAbsorptions(ms, cfg, new Set(), NOW)).toEqual([]);
    expect(
      singletonAbsorptions([host('outdoor', 0), mem('poles', 5, { evidence: 1 })], resolveConfig({ tau: 0.9, absorbSingletons: 0 }), new Set(), NOW),
    ).toEqual([]);
  });

  it('the rules planner merges them at a due sweep, never when no sweep is due', () => {
    const ms = () => [host('outdoor', 0), mem('poles', 20, { evidence: 1 })];
    expect(rulesPlanner(state(ms(), { eventsSinceSweep: 1 }), cfg, NOW).merge).toEqual([['outdoor', 'poles']]);
    expect(rulesPlanner(state(ms(), { eventsSinceSweep: 0 }), resolveConfig({ tau: 0.9, sweepEvery: 5 }), NOW).merge).toEqual([]);
  });

  it('an agent ends with no single-item memory next to an interest it belongs to', async () => {
    // tau 0.95 on the hashing space: no two films consolidate, so every film forms its own memory
    const run = async (absorbSingletons: number) => {
      let n = 0;
      const agent = new MemoryAgent({
        items: new ItemVectors(embedder, CATALOG),
        clock: () => T0 + 60 * MIN,
        newId: () => `m${++n}`,
        config: { tau: 0.95, sweepEvery: 4, absorbSingletons },
      });
      let t = T0;
      for (const id of ['heat', 'heat', 'fargo', 'godfather', 'casino', 'heat', 'alien', 'alien', 'matrix', 'solaris', 'heat', 'alien'])
        await agent.observe({ item: id, at: (t += MIN), action: 'click' });
      return agent.memories().filter((m) => m.items.length === 1 && m.evidence < 1.5).length;
    };
    expect(await run(0)).toBeGreaterThanOrEqual(4);
    expect(await run(0.6)).toBe(0);
  });
});
