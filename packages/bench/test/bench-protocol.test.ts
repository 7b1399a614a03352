import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadAgentCF } from '../src/datasets.js';
import { buildProtocol, drawUsers, evaluableUsers, SAMPLE_LENGTH, testCases, validationCases } from '../src/protocol.js';
import type { Dataset } from '../src/types.js';
import { randomDataset } from '../../../test/fixtures/synthetic.js';

const data = randomDataset({ users: 300, items: 80, minLen: 1, maxLen: 30, seed: 11 });

describe('protocol loo: users', () => {
  it('evaluates users with at least 3 interactions only', () => {
    const ev = evaluableUsers(data);
    for (const [u, seq] of data.sequences) expect(ev.includes(u)).toBe(seq.length >= 3);
    expect(ev.length).toBeLessThan(data.sequences.size);
    expect(testCases(data).cases.map((c) => c.user)).toEqual(ev);
  });

  it('draws --users N without replacement, deterministic for a seed, prefix-stable', () => {
    const a = drawUsers(data, 50, 2026);
    expect(new Set(a).size).toBe(50);
    expect(drawUsers(data, 50, 2026)).toEqual(a);
    expect(drawUsers(data, 50, 1)).not.toEqual(a);
    const b = drawUsers(data, 51, 2026);
    for (const u of a) expect(b).toContain(u);
    expect(() => drawUsers(data, 100_000)).toThrow(/only \d+ evaluable/);
    expect(() => drawUsers(data, 0)).toThrow(RangeError);
  });
});

describe('protocol loo: cases', () => {
  const { cases, histories } = testCases(data, { seed: 2026 });

  it('same seed → same users and candidates; another seed → other candidates', () => {
    expect(testCases(data, { seed: 2026 }).cases).toEqual(cases);
    const other = testCases(data, { seed: 2027 }).cases;
    expect(other.map((c) => c.candidates)).not.toEqual(cases.map((c) => c.candidates));
  });

  it('holds out the last interaction; history is everything before; 10 distinct candidates, exactly one positive', () => {
    for (const c of cases) {
      const seq = data.sequences.get(c.user)!;
      expect(c.test).toEqual(seq[seq.length - 1]);
      expect(c.history).toEqual(seq.slice(0, -1));
      expect(c.candidates).toHaveLength(10);
      expect(new Set(c.candidates).size).toBe(10);
      const seen = new Set(seq.map((x) => x.item));
      expect(c.candidates.filter((id) => seen.has(id))).toEqual([c.test.item]);
      for (const id of c.candidates) expect(data.items.has(id)).toBe(true);
    }
  });

  it('a user keeps their candidates whatever --users is', () => {
    const few = testCases(data, { seed: 2026, users: 20 }).cases;
    const byUser = new Map(cases.map((c) => [c.user, c.candidates]));
    for (const c of few) expect(c.candidates).toEqual(byUser.get(c.user));
  });

  it('full: histories of every user = all but their last interaction', () => {
    expect(histories.size).toBe(data.sequences.size);
    for (const [u, seq] of data.sequences) expect(histories.get(u)).toEqual(seq.slice(0, -1));
  });

  it('the positive position carries no information (spread uniformly over 10 slots)', () => {
    const big = randomDataset({ users: 3000, items: 200, minLen: 3, maxLen: 12, seed: 5 });
    const counts = new Array(10).fill(0);
    for (const c of testCases(big).cases) counts[c.candidates.indexOf(c.test.item)]++;
    const expected = 3000 / 10;
    const chi = counts.reduce((s, k) => s + (k - expected) ** 2 / expected, 0);
    expect(chi).toBeLessThan(27.88); // χ²(9) at p = 0.001
  });
});

describe('protocol loo: settings and validation', () => {
  it('sample keeps each evaluated user last 8 (6 train, validation, test); only they exist', () => {
    const full = testCases(data, { users: 40 });
    const sample = testCases(data, { users: 40, setting: 'sample' });
    expect(sample.histories.size).toBe(40);
    sample.cases.forEach((c, k) => {
      const seq = data.sequences.get(c.user)!;
      const last8 = seq.slice(-SAMPLE_LENGTH);
      expect(c.test).toEqual(full.cases[k].test);
      expect(c.history).toEqual(last8.slice(0, -1));
      expect(c.history.length).toBe(Math.min(seq.length, SAMPLE_LENGTH) - 1);
      expect(sample.histories.get(c.user)).toEqual(c.history);
      expect(c.candidates).toEqual(full.cases[k].candidates);
    });
  });

  it('validation cases target the second-to-last item with training-only histories and own negatives', () => {
    const v = validationCases(data, { users: 60 });
    const t = testCases(data, { users: 60 });
    v.cases.forEach((c, k) => {
      const seq = data.sequences.get(c.user)!;
      expect(c.test).toEqual(seq[seq.length - 2]);
      expect(c.history).toEqual(seq.slice(0, -2));
      const seen = new Set(seq.map((x) => x.item));
      expect(c.candidates.filter((id) => seen.has(id))).toEqual([c.test.item]); // the test item is no negative
      expect(c.candidates).not.toEqual(t.cases[k].candidates);
    });
    for (const [u, seq] of data.sequences) expect(v.histories.get(u)).toEqual(seq.slice(0, Math.max(0, seq.length - 2)));
    expect(buildProtocol(data, { users: 60, target: 'validation', setting: 'sample' }).cases[0].history.length).toBeLessThanOrEqual(6);
  });

  it('agentcf pools: the first 9 that are neither target nor history; short pools completed and counted', () => {
    const d: Dataset = loadAgentCF(resolve(import.meta.dirname, '../../../test/fixtures/agentcf-tiny'));
    const p = testCases(d);
    const get = (u: string) => p.cases.find((c) => c.user === u)!;
    expect([...get('10').candidates].sort()).toEqual(['105', '111', '112', '113', '115', '116', '117', '118', '119', '120'].sort());
    expect([...get('30').candidates].sort()).toEqual(['101', '102', '103', '104', '105', '106', '107', '108', '109', '120'].sort());
    const c20 = get('20');
    expect(c20.candidates).toEqual(expect.arrayContaining(['114', '100', '101', '102']));
    expect(c20.candidates.filter((id) => ['110', '111', '112', '113'].includes(id))).toEqual([]);
    expect(p.warnings).toEqual([expect.stringMatching(/^1 candidate pools had fewer than 9/)]);
    expect(testCases(d)).toEqual(p);
  });
});
