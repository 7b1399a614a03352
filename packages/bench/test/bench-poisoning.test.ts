/**
 * bench:poisoning on the tiny made-up MovieLens folder: well-formed fake reports count once
 * each under Prio3, forged ones (20 at the target) are refused by the proof check, local DP
 * lifts the target further per fake report, the release rule (threshold + minimum share) needs
 * more than 10 % of the reports as fakes to show the target, and the figures repeat for a seed.
 */
import { rmSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { writeMovieLensTiny } from '../../../test/fixtures/movielens-tiny.js';
import { formatPoisoning, runPoisoning } from '../src/poisoning.js';

const dir = writeMovieLensTiny();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench:poisoning', () => {
  it('counts each well-formed fake once, refuses forged reports, repeats for a seed', { timeout: 120_000 }, async () => {
    const run = () => runPoisoning({ data: dir, kcore: 0, seed: 3, fakes: 4, forged: 3, epsilon: 1 });
    const a = await run();
    expect(a.devices).toBe(5);
    // item 7 is in the catalog, rated by nobody
    expect(a.target).toBe('7');
    expect(a.prio3.fakesAccepted).toBe(4);
    expect(a.prio3.forgedAccepted).toBe(0);
    // local DP: one fake report moves the estimate by ℓ/(p* − q) ≫ 1
    expect(a.ldp.rankAfter).toBeLessThanOrEqual(a.ldp.rankBefore);
    // the release rule: the target is shown only with more than the minimum share (0.1) of the reports as fakes,
    // and the threshold alone lets it in with fewer
    expect(a.prio3.minShare).toBe(0.1);
    expect(a.prio3.shown.share).toBeGreaterThan(0.1);
    expect(a.prio3.shown.fakes).toBeGreaterThanOrEqual(a.prio3.thresholdOnly.fakes);
    expect(a.prio3.shown.releasedItems).toBeLessThanOrEqual(a.prio3.thresholdOnly.releasedItems);
    const none = await runPoisoning({ data: dir, kcore: 0, seed: 3, fakes: 4, forged: 3, epsilon: 1, minShare: 0 });
    expect(none.prio3.shown).toEqual(a.prio3.thresholdOnly);
    const b = await run();
    expect({ ...b, ms: 0 }).toEqual({ ...a, ms: 0 });
    expect(formatPoisoning(a, 3)).toMatch(/\| Prio3 \(ε = 1 per release/);
  });
});
