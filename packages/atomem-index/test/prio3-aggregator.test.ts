/**
 * Prio3 aggregation in-process: the device's encoder (atomem's sync/prio3-report.ts) against the
 * two aggregators' preparation (src/prio3-aggregator.ts) — well-formed reports are summed
 * exactly, a report whose share encodes 20 for one item fails the proof check, one share alone
 * is uniform whatever the report, and the noise has the stated spread; the release rule
 * (threshold + minimum share of the reports) makes fake reports below that share unable to list
 * an item nobody holds.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { b64, encodePrio3Upload, prio3Measurement } from 'atomem/engine';
import {
  PRIO3_MIN_SHARE,
  Prio3Aggregator,
  buildPrio3Release,
  discreteLaplace,
  prio3MinCount,
  prio3Threshold,
  releaseNoiseStd,
  releaseNoiseTail,
} from '../src/prio3-aggregator.js';
import { mulberry32 } from '@atomem/bench/rng';

const ITEMS = Array.from({ length: 64 }, (_, i) => `item-${String(i).padStart(2, '0')}`);
const PEER = 'peer-secret-for-the-test';

async function pair() {
  const leader = await Prio3Aggregator.create({ role: 'leader', length: ITEMS.length, peerKey: PEER, hpkeSeed: randomBytes(32) });
  const helper = await Prio3Aggregator.create({ role: 'helper', length: ITEMS.length, peerKey: PEER, hpkeSeed: randomBytes(32) });
  return { leader, helper };
}

/** Both aggregators prepare one upload; the output shares, or undefined when refused. */
async function run(leader: Prio3Aggregator, helper: Prio3Aggregator, up: Awaited<ReturnType<typeof encodePrio3Upload>>, tamper?: (s: bigint[]) => void) {
  const nonce = b64.decode(up.nonce);
  const pub = b64.decode(up.publicShare);
  const li = await leader.open(up.epoch, nonce, pub, up.leaderShare);
  if (tamper) tamper(li.measurementShare);
  const hi = await helper.open(up.epoch, nonce, pub, up.helperShare);
  const lp = await leader.prepare(nonce, pub, li);
  const hp = await helper.prepare(nonce, pub, hi);
  // the shares travel as bytes between the services
  const msg = await helper.combine([leader.decodePrepShare(leader.encodePrepShare(lp.share)), hp.share]);
  if (msg === undefined) return undefined;
  const lo = leader.finish(lp.state, msg);
  const ho = helper.finish(hp.state, msg);
  if (!lo || !ho) return undefined;
  return { lo, ho, li };
}

describe('prio3 aggregation (in-process)', () => {
  it('sums well-formed reports exactly; refuses a share that encodes 20 for one item', async () => {
    const { leader, helper } = await pair();
    const keys = { leader: { hpkePublicKey: leader.publicKey }, helper: { hpkePublicKey: helper.publicKey } };
    const devices = [ITEMS.slice(0, 3), [ITEMS[1], ITEMS[5]], [ITEMS[5], 'not-in-catalog'], []];
    let la = leader.zero();
    let ha = helper.zero();
    for (const recent of devices) {
      const up = await encodePrio3Upload({ measurement: prio3Measurement(recent, ITEMS, 10), epoch: 7, token: 't', ...keys });
      const r = await run(leader, helper, up);
      expect(r).toBeDefined();
      la = leader.sum(la, r!.lo);
      ha = helper.sum(ha, r!.ho);
    }
    const counts = leader.unshard(la, ha);
    const expected = ITEMS.map((id) => devices.filter((d) => d.includes(id)).length);
    expect(counts).toEqual(expected);

    // the malformed report: the leader's measurement share moved by 19 at item 3, so the shares add up to 20 there
    const up = await encodePrio3Upload({ measurement: prio3Measurement([ITEMS[3]], ITEMS, 10), epoch: 7, token: 't', ...keys });
    const refused = await run(leader, helper, up, (s) => {
      s[3] = (s[3] + 19n) % leader.field.modulus;
    });
    expect(refused).toBeUndefined();
    // a share sealed to the leader does not open at the helper, nor for another epoch
    await expect(helper.open(7, b64.decode(up.nonce), b64.decode(up.publicShare), up.leaderShare)).rejects.toThrow();
    await expect(leader.open(8, b64.decode(up.nonce), b64.decode(up.publicShare), up.leaderShare)).rejects.toThrow();
  });

  it("one aggregator's share alone is uniform, whatever the report", async () => {
    const { leader, helper } = await pair();
    const keys = { leader: { hpkePublicKey: leader.publicKey }, helper: { hpkePublicKey: helper.publicKey } };
    // 200 reports that hold item 0 and 200 that do not: the leader's share of entry 0, top byte
    const topByte = async (holds: boolean) => {
      const hist = new Array<number>(16).fill(0);
      for (let i = 0; i < 200; i++) {
        const up = await encodePrio3Upload({ measurement: prio3Measurement(holds ? [ITEMS[0]] : [ITEMS[1]], ITEMS, 10), epoch: 1, token: 't', ...keys });
        const share = await leader.open(1, b64.decode(up.nonce), b64.decode(up.publicShare), up.leaderShare);
        // the field's modulus is 2^128 − 28·2^64 + 1: its top 4 bits are (nearly) uniform for a uniform element
        hist[Number(share.measurementShare[0] >> 124n)]++;
      }
      return hist;
    };
    const chi2 = (h: number[]) => {
      const n = h.reduce((a, b) => a + b, 0);
      return h.reduce((a, o) => a + (o - n / 16) ** 2 / (n / 16), 0);
    };
    const a = await topByte(true);
    const b = await topByte(false);
    // χ² with 15 degrees of freedom: 99.9th percentile 37.7
    expect(chi2(a)).toBeLessThan(37.7);
    expect(chi2(b)).toBeLessThan(37.7);
    // two-sample χ² (holds vs not), 15 degrees of freedom
    const two = a.reduce((s, x, i) => s + (x + b[i] > 0 ? (x - b[i]) ** 2 / (x + b[i]) : 0), 0);
    expect(two).toBeLessThan(37.7);
    void helper;
  });

  it('discrete Laplace noise has the stated spread; the release suppresses counts below the threshold', () => {
    let s = 42;
    const u = () => {
      s = (s * 1103515245 + 12345) % 2 ** 31;
      return s / 2 ** 31;
    };
    const scale = 10;
    const xs = Array.from({ length: 20000 }, () => discreteLaplace(scale, u) + discreteLaplace(scale, u));
    const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
    const std = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length);
    expect(Math.abs(mean)).toBeLessThan(0.5);
    expect(std / releaseNoiseStd(scale)).toBeGreaterThan(0.95);
    expect(std / releaseNoiseStd(scale)).toBeLessThan(1.05);
    const r = buildPrio3Release({
      epoch: 3,
      epochMs: 1000,
      items: ['a', 'b', 'c'],
      noisy: [50, 7, -3],
      reports: 60,
      rejected: 1,
      ell: 10,
      epsilon: 1,
      threshold: 30,
      communities: [
        { id: 'k0', items: ['a', 'b'] },
        { id: 'k1', items: ['c'] },
      ],
    });
    // the default rule: threshold 30 + ⌈0.1 × 60⌉ = 36
    expect(r.mechanism).toMatchObject({ threshold: 30, minShare: PRIO3_MIN_SHARE, minCount: 36 });
    expect(r.counts).toEqual({ a: 50 });
    expect(r.communities).toEqual([{ id: 'k0', examples: ['a'] }]);
    expect(r.mechanism.epsilon).toBe(1);
    expect(r.mechanism.scale).toBe(10);
  });
});

describe('release threshold', () => {
  it('the exact noise tail matches a seeded simulation; the default threshold keeps pure-noise items out of ≥ 95 % of releases', () => {
    const u = mulberry32(9);
    const n = 200_000;
    let hits = 0;
    for (let i = 0; i < n; i++) if (discreteLaplace(10, u) + discreteLaplace(10, u) >= 30) hits++;
    const p = releaseNoiseTail(10, 30);
    // binomial standard error ≈ 0.00055
    expect(Math.abs(hits / n - p)).toBeLessThan(0.003);
    // ε = 1, ℓ = 10 over 1,682 items: 3σ = 60 would show ≈ 9 pure-noise items per release
    expect(1682 * releaseNoiseTail(10, 60)).toBeGreaterThan(5);
    const t = prio3Threshold(10, 1682);
    expect(t).toBeGreaterThanOrEqual(Math.ceil(3 * releaseNoiseStd(10)));
    expect(1682 * releaseNoiseTail(10, t)).toBeLessThanOrEqual(0.05);
    expect(1682 * releaseNoiseTail(10, t - 1)).toBeGreaterThan(0.05);
  });
});

describe('release rule: threshold + minimum share of the reports', () => {
  it('computes the minimum count and refuses bad settings', () => {
    expect(prio3MinCount(115, 943)).toBe(115 + 95);
    expect(prio3MinCount(115, 950)).toBe(115 + 95);
    expect(prio3MinCount(115, 943, 0)).toBe(115);
    expect(prio3MinCount(0, 0)).toBe(0);
    expect(() => prio3MinCount(115, 943, 1)).toThrow(/minShare must be in \[0, 1\)/);
    expect(() => prio3MinCount(115, 943, -0.1)).toThrow(/minShare/);
    expect(() => prio3MinCount(115, 9.5)).toThrow(/reports must be an integer/);
    expect(() =>
      buildPrio3Release({ epoch: 1, epochMs: 1, items: ['a'], noisy: [1], reports: 1, rejected: 0, ell: 10, epsilon: 1, threshold: 0, minShare: Number.NaN }),
    ).toThrow(/minShare/);
  });

  it('fake reports under the minimum share never list an item nobody holds while its noise is below the threshold', () => {
    const threshold = prio3Threshold(10, 1349);
    const release = (noise: number, honest: number, fakes: number, minShare: number) =>
      buildPrio3Release({
        epoch: 1,
        epochMs: 1,
        items: ['target', 'other'],
        noisy: [noise + fakes, 0],
        reports: honest + fakes,
        rejected: 0,
        ell: 10,
        epsilon: 1,
        threshold,
        minShare,
      }).counts.target !== undefined;
    let checked = 0;
    for (const honest of [50, 200, 943, 5000]) {
      for (let noise = -100; noise < threshold; noise += 7) {
        let f = 0;
        while (!release(noise, honest, f, PRIO3_MIN_SHARE)) f++;
        // the smallest number of fakes that lists the target is more than 10 % of the epoch's reports
        expect(f / (honest + f)).toBeGreaterThan(PRIO3_MIN_SHARE);
        // … and one fewer is not listed (the rule is monotone in the fakes)
        expect(release(noise, honest, f - 1, PRIO3_MIN_SHARE)).toBe(false);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
    // the threshold alone does not hold it: a target whose noise is 3σ needs far fewer than 10 %
    let g = 0;
    while (!release(60, 943, g, 0)) g++;
    expect(g / (943 + g)).toBeLessThan(0.07);
  });

  it('releases an item honest devices hold when its count clears both parts, and lists it as the example of its community', () => {
    const r = buildPrio3Release({
      epoch: 2,
      epochMs: 1000,
      items: ['a', 'b', 'c'],
      noisy: [250, 209, 120],
      reports: 943,
      rejected: 0,
      ell: 10,
      epsilon: 1,
      threshold: 115,
      communities: [{ id: 'k0', items: ['a', 'b', 'c'] }],
    });
    expect(r.mechanism.minCount).toBe(210);
    expect(r.counts).toEqual({ a: 250 });
    expect(r.communities).toEqual([{ id: 'k0', examples: ['a'] }]);
  });
});
