import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { resolveConfig, type AtomemConfig } from '../src/core/config.js';
import { appendEvent, validateInteraction } from '../src/core/memory.js';
import { rulesPlanner } from '../src/core/planner.js';
import { DAY, NOW, mem, state } from '../../../test/fixtures/planner-state.js';

const cfg: AtomemConfig = resolveConfig({ sweepEvery: 5, mergeThreshold: 0.95, synthesizeEvery: 10, synthesizeOnErrors: 3, maxMemories: 10 });
// cos(10°) ≈ 0.985 ≥ 0.95; cos(30°) ≈ 0.866 < 0.95

describe('rulesPlanner', () => {
  it('asks to process pending events only when there are some', () => {
    const s = state([]);
    expect(rulesPlanner(s, cfg, NOW).processPending).toBe(false);
    appendEvent(s, cfg, validateInteraction({ item: 'heat', at: NOW }));
    expect(rulesPlanner(s, cfg, NOW).processPending).toBe(true);
  });

  it('does not sweep before sweepEvery processed events', () => {
    const faded = mem('faded', 90, { strength: 0.01, evidence: 0.3 });
    const s = state([mem('a', 0), mem('b', 5), faded], { eventsSinceSweep: cfg.sweepEvery - 1 });
    const plan = rulesPlanner(s, cfg, NOW);
    expect(plan.merge).toEqual([]);
    expect(plan.forget).toEqual([]);
  });

  it('merges a near-duplicate pair once sweepEvery is reached, keeping the one with more evidence', () => {
    const s = state([mem('a', 0, { evidence: 1 }), mem('b', 5, { evidence: 4 }), mem('far', 60)], { eventsSinceSweep: cfg.sweepEvery });
    const plan = rulesPlanner(s, cfg, NOW);
    expect(plan.merge).toEqual([['b', 'a']]);
    expect(plan.forget).toEqual([]);
  });

  it('never merges memories of opposite polarity, however similar', () => {
    const s = state([mem('likes', 0, { strength: 0.5 }), mem('avoids', 1, { strength: -0.5 })], { eventsSinceSweep: 99 });
    expect(rulesPlanner(s, cfg, NOW).merge).toEqual([]);
  });

  it('merges two negative near-duplicates', () => {
    const s = state([mem('n1', 0, { strength: -0.4 }), mem('n2', 2, { strength: -0.6, evidence: 5 })], { eventsSinceSweep: 99 });
    expect(rulesPlanner(s, cfg, NOW).merge).toEqual([['n2', 'n1']]);
  });

  it('does not merge below mergeThreshold', () => {
    const s = state([mem('a', 0), mem('b', 30)], { eventsSinceSweep: 99 });
    expect(rulesPlanner(s, cfg, NOW).merge).toEqual([]);
  });

  it('uses each memory at most once, most similar pair first', () => {
    // a–b at 8°, b–c at 2°, a–c at 10°: all ≥ threshold; b–c is most similar.
    const s = state([mem('a', 0, { evidence: 5 }), mem('b', 8, { evidence: 2 }), mem('c', 10, { evidence: 3 })], { eventsSinceSweep: 99 });
    const plan = rulesPlanner(s, cfg, NOW);
    expect(plan.merge).toEqual([['c', 'b']]);
  });

  it('merge pairs are disjoint for any layout (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.boolean(), fc.integer({ min: 1, max: 9 })), { maxLength: 12 }), (specs) => {
        const ms = specs.map(([deg, neg, ev], i) => mem(`m${i}`, deg, { strength: neg ? -0.5 : 0.5, evidence: ev }));
        const plan = rulesPlanner(state(ms, { eventsSinceSweep: 99 }), cfg, NOW);
        const seen = new Set<string>();
        for (const [keep, absorb] of plan.merge) {
          expect(keep).not.toBe(absorb);
          expect(seen.has(keep) || seen.has(absorb)).toBe(false);
          seen.add(keep);
          seen.add(absorb);
          const k = ms.find((m) => m.id === keep)!;
          const a = ms.find((m) => m.id === absorb)!;
          expect(Math.sign(k.strength)).toBe(Math.sign(a.strength));
          expect(k.evidence).toBeGreaterThanOrEqual(a.evidence);
        }
        // no memory is both merged and forgotten
        for (const f of plan.forget) expect(seen.has(f.id)).toBe(false);
      }),
    );
  });

  it('forgets faded memories with little evidence, keeps faded ones with a lot of evidence', () => {
    const old = NOW - 400 * DAY; // ≈ 4.4 half-lives at 90 days → decay ≈ 0.046
    const s = state(
      [
        mem('faded-weak', 0, { strength: 0.5, evidence: 1, updatedAt: old }),
        mem('faded-strong-evidence', 40, { strength: 0.5, evidence: 10, updatedAt: old }),
        mem('fresh-weak', 80, { strength: 0.5, evidence: 1 }),
        mem('tiny', 120, { strength: 0.01, evidence: 0.5 }),
      ],
      { eventsSinceSweep: cfg.sweepEvery },
    );
    const plan = rulesPlanner(s, cfg, NOW);
    expect(plan.forget.map((f) => f.id).sort()).toEqual(['faded-weak', 'tiny']);
    expect(plan.forget.every((f) => /faded/.test(f.reason))).toBe(true);
  });

  it('forgets by activity: a weakly supported memory no recent event touched (forgetAfterEvents)', () => {
    const act = resolveConfig({ sweepEvery: 5, mergeThreshold: 0.95, maxMemories: 10, forgetAfterEvents: 40 });
    const s = state(
      [
        mem('stale-weak', 0, { evidence: 1, lastEventSeq: 10 }), // 60 events ago
        mem('stale-strong', 40, { evidence: 4, lastEventSeq: 10 }), // reinforced: kept
        mem('recent-weak', 80, { evidence: 1, lastEventSeq: 50 }), // 20 events ago
        mem('legacy', 120, { evidence: 1 }), // stored before lastEventSeq existed: time only
      ],
      { eventsSinceSweep: 99 },
    );
    s.nextSeq = 71; // last event seq 70
    const plan = rulesPlanner(s, act, NOW);
    expect(plan.forget).toEqual([{ id: 'stale-weak', reason: 'not seen again in the last 40 events' }]);
    // off by default: the same state forgets nothing with forgetAfterEvents 0
    expect(rulesPlanner(s, resolveConfig({ sweepEvery: 5, mergeThreshold: 0.95, maxMemories: 10, forgetAfterEvents: 0 }), NOW).forget).toEqual([]);
    // the boundary: exactly forgetAfterEvents events since → forgotten; one fewer → kept
    s.nextSeq = 50; // last seq 49, 39 events after seq 10
    expect(rulesPlanner(s, act, NOW).forget).toEqual([]);
    s.nextSeq = 51;
    expect(rulesPlanner(s, act, NOW).forget.map((f) => f.id)).toEqual(['stale-weak']);
  });

  it('forgets a faded negative memory too (|salience| matters, not its sign)', () => {
    const s = state([mem('avoid', 0, { strength: -0.02, evidence: 1 })], { eventsSinceSweep: 99 });
    expect(rulesPlanner(s, cfg, NOW).forget.map((f) => f.id)).toEqual(['avoid']);
    const strongNeg = state([mem('avoid', 0, { strength: -0.9, evidence: 1 })], { eventsSinceSweep: 99 });
    expect(rulesPlanner(strongNeg, cfg, NOW).forget).toEqual([]);
  });

  it('enforces maxMemories by forgetting the least salient, even before sweepEvery', () => {
    const small = { ...cfg, maxMemories: 3 };
    const ms = [
      mem('strong', 0, { strength: 0.9, evidence: 5 }),
      mem('weakest', 40, { strength: 0.1, evidence: 2 }),
      mem('mid', 80, { strength: 0.5, evidence: 3 }),
      mem('weak', 120, { strength: 0.2, evidence: 2 }),
      mem('avoid', 160, { strength: -0.8, evidence: 4 }),
    ];
    const plan = rulesPlanner(state(ms, { eventsSinceSweep: 0 }), small, NOW);
    expect(plan.forget.map((f) => f.id).sort()).toEqual(['weak', 'weakest']);
    expect(plan.forget.every((f) => /cap/.test(f.reason))).toBe(true);
  });

  it('counts merges and faded forgets toward the cap before forgetting more', () => {
    const small = { ...cfg, maxMemories: 3 };
    const ms = [
      mem('a', 0, { strength: 0.9, evidence: 5 }),
      mem('a-dup', 2, { strength: 0.8, evidence: 1 }),
      mem('faded', 60, { strength: 0.01, evidence: 0.5 }),
      mem('b', 100, { strength: 0.6, evidence: 3 }),
      mem('c', 150, { strength: 0.3, evidence: 2 }),
    ];
    const plan = rulesPlanner(state(ms, { eventsSinceSweep: 0 }), small, NOW);
    expect(plan.merge).toEqual([['a', 'a-dup']]);
    // 5 − 1 merged − 1 faded = 3 = cap: nothing more to forget
    expect(plan.forget).toEqual([{ id: 'faded', reason: expect.stringMatching(/faded/) }]);
  });

  it('within the cap, a healthy memory is never forgotten', () => {
    const plan = rulesPlanner(state([mem('a', 0), mem('b', 90)], { eventsSinceSweep: 99 }), cfg, NOW);
    expect(plan.forget).toEqual([]);
  });

  describe('resynthesis', () => {
    it('when there is no profile yet and there are memories', () => {
      expect(rulesPlanner(state([mem('a', 0)], {}, false), cfg, NOW).resynthesize).toBe(true);
    });
    it('never with no memories', () => {
      expect(rulesPlanner(state([], { eventsSinceSynthesis: 100, predictionErrors: 100 }, false), cfg, NOW).resynthesize).toBe(false);
    });
    it('not when the profile is fresh', () => {
      const s = state([mem('a', 0)], { eventsSinceSynthesis: cfg.synthesizeEvery - 1, predictionErrors: cfg.synthesizeOnErrors - 1 });
      expect(rulesPlanner(s, cfg, NOW).resynthesize).toBe(false);
    });
    it('after synthesizeEvery processed events', () => {
      expect(rulesPlanner(state([mem('a', 0)], { eventsSinceSynthesis: cfg.synthesizeEvery }), cfg, NOW).resynthesize).toBe(true);
    });
    it('after synthesizeOnErrors prediction errors', () => {
      expect(rulesPlanner(state([mem('a', 0)], { predictionErrors: cfg.synthesizeOnErrors }), cfg, NOW).resynthesize).toBe(true);
    });
  });

  it('is pure: the same input gives the same plan and the state is not touched', () => {
    const s = state([mem('a', 0, { evidence: 1 }), mem('b', 3), mem('faded', 90, { strength: 0.01, evidence: 0.2 })], { eventsSinceSweep: 99 }, false);
    const before = structuredClone(s);
    const p1 = rulesPlanner(s, cfg, NOW);
    const p2 = rulesPlanner(s, cfg, NOW);
    expect(p1).toEqual(p2);
    expect(s).toEqual(before);
  });

  it('ages memories with the given time: the same memory fades later on', () => {
    const s = state([mem('a', 0, { strength: 0.2, evidence: 1 })], { eventsSinceSweep: 99 });
    expect(rulesPlanner(s, cfg, NOW).forget).toEqual([]);
    // 0.2 × 0.5^(360/90) = 0.0125 < 0.05
    expect(rulesPlanner(s, cfg, NOW + 360 * DAY).forget.map((f) => f.id)).toEqual(['a']);
  });
});
