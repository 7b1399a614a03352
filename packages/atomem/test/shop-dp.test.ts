import { describe, expect, it } from 'vitest';
import { erfc, gaussianDelta, gaussianNoiseMultiplier } from '../src/shop/dp.js';
import {
  contributionWeight,
  secureRandom,
  sensitivities,
  trainShopModel,
  type ShopInteraction,
  type ShopStatistics,
  type TrainOptions,
} from '../src/shop/train.js';
import { decodeShopModel, encodeShopModel } from '../src/protocol/shop-model-v1.js';
import { Rng } from '@atomem/bench/rng';

const seeded = (seed: number) => {
  const r = new Rng(seed);
  return () => r.next();
};

/** `users` users, each picking `per` random items of `items` (distinct), at increasing times. */
function randomLog(users: number, items: number, per: number, seed = 1): { log: ShopInteraction[]; catalog: string[] } {
  const rng = new Rng(seed);
  const catalog = Array.from({ length: items }, (_, i) => `i${i}`);
  const log: ShopInteraction[] = [];
  for (let u = 0; u < users; u++)
    rng.sampleWithoutReplacement(catalog, per).forEach((item, k) => log.push({ user: `u${u}`, item, at: k * 1000, action: 'purchase' }));
  return { log, catalog };
}

function stats(log: ShopInteraction[], opts: TrainOptions): { s: ShopStatistics; model: ReturnType<typeof trainShopModel> } {
  let s: ShopStatistics | undefined;
  const model = trainShopModel(log, { dim: 4, iterations: 5, ...opts, onStatistics: (x) => (s = x) });
  return { s: s!, model };
}

function std(xs: number[]): number {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length;
  return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / xs.length);
}

describe('analytic Gaussian calibration', () => {
  it('erfc matches known values', () => {
    expect(erfc(0)).toBe(1);
    expect(erfc(1)).toBeCloseTo(0.157299207050285, 12);
    expect(erfc(2)).toBeCloseTo(0.004677734981047, 13);
    expect(erfc(3) / 2.209049699858544e-5).toBeCloseTo(1, 9);
    expect(erfc(5) / 1.537459794428035e-12).toBeCloseTo(1, 8);
    expect(erfc(-1)).toBeCloseTo(2 - 0.157299207050285, 12);
  });

  it('gives the smallest noise multiplier whose δ meets the target, tighter than the classical bound', () => {
    for (const eps of [0.5, 1, 4, 8]) {
      const z = gaussianNoiseMultiplier(eps, 1e-6);
      expect(gaussianDelta(z, eps)).toBeLessThanOrEqual(1e-6 * (1 + 1e-9));
      expect(gaussianDelta(z * 0.999, eps)).toBeGreaterThan(1e-6);
      if (eps < 1) expect(z).toBeLessThan(Math.sqrt(2 * Math.log(1.25 / 1e-6)) / eps);
    }
    expect(gaussianNoiseMultiplier(1, 1e-6)).toBeGreaterThan(gaussianNoiseMultiplier(4, 1e-6));
    expect(gaussianNoiseMultiplier(Infinity, 1e-6)).toBe(0);
    expect(() => gaussianNoiseMultiplier(0, 1e-6)).toThrow(RangeError);
    expect(() => gaussianNoiseMultiplier(1, 0)).toThrow(RangeError);
  });
});

describe('contribution bounds', () => {
  it('caps each user at L2 norm √m per statistic, whatever their history length', () => {
    const m = 16;
    const sens = sensitivities(m);
    for (const count of [1, 5, 16, 17, 100, 5000]) {
      const w = contributionWeight(count, m);
      expect(w).toBeLessThanOrEqual(1);
      expect(w * Math.sqrt(count)).toBeLessThanOrEqual(sens.popularity + 1e-12);
      // co-occurrence upper triangle with diagonal: w² per pair
      expect(Math.sqrt((w ** 4 * (count * count + count)) / 2)).toBeLessThanOrEqual(sens.gram + 1e-9);
    }
  });

  it('one heavy user changes each released statistic by at most its sensitivity (same noise, neighbouring logs)', () => {
    const { log, catalog } = randomLog(120, 30, 8);
    const heavy: ShopInteraction[] = [];
    const rng = new Rng(9);
    for (let t = 0; t < 400; t++) heavy.push({ user: 'heavy', item: catalog[rng.int(catalog.length)], at: 1e6 + t, action: 'purchase' });
    const opts: TrainOptions = { catalog, epsilon: 4, maxItemsPerUser: 6, dpItems: catalog.length };
    const a = stats(log, { ...opts, random: seeded(7) }).s;
    const b = stats([...log, ...heavy], { ...opts, random: seeded(7) }).s;
    expect(Array.from(b.domain)).toEqual(Array.from(a.domain));
    const sens = sensitivities(6);
    const l2 = (x: ArrayLike<number>, y: ArrayLike<number>, keep: (k: number) => boolean = () => true) => {
      let s = 0;
      for (let k = 0; k < x.length; k++) if (keep(k)) s += (x[k] - y[k]) ** 2;
      return Math.sqrt(s);
    };
    const N = a.domain.length;
    const dPop = l2(a.popularity, b.popularity);
    expect(dPop).toBeGreaterThan(0.5);
    expect(dPop).toBeLessThanOrEqual(sens.popularity + 1e-4); // f32 rounding
    const dGram = l2(a.gram, b.gram, (k) => k % N >= Math.floor(k / N)); // upper triangle with diagonal
    expect(dGram).toBeGreaterThan(0.5);
    expect(dGram).toBeLessThanOrEqual(sens.gram + 1e-9);
    const dT = l2(a.transitions!, b.transitions!);
    expect(dT).toBeGreaterThan(0.5);
    expect(dT).toBeLessThanOrEqual(sens.transitions + 1e-9);
  });
});

describe('noise', () => {
  it('has the stated standard deviation on every released statistic', () => {
    const { log, catalog } = randomLog(3000, 300, 40, 2);
    const opts: TrainOptions = { catalog, epsilon: 1, dpItems: 60 };
    const noisy = stats(log, { ...opts, random: seeded(3) });
    const sigma = noisy.model.privacy!.sigma;
    // exact weighted statistics, recomputed here from the definition
    const w = contributionWeight(40, 16);
    const pop = new Float64Array(300);
    for (const x of log) pop[Number(x.item.slice(1))] += w;
    const popResid = Array.from(noisy.s.popularity, (v, i) => v - pop[i]);
    expect(Math.min(...noisy.s.popularity)).toBeGreaterThan(0); // no clipping in this regime
    expect(std(popResid) / sigma.popularity).toBeGreaterThan(0.88);
    expect(std(popResid) / sigma.popularity).toBeLessThan(1.12);
    const dom = Array.from(noisy.s.domain);
    const slot = new Map(dom.map((i, s) => [i, s]));
    const N = dom.length;
    const G = new Float64Array(N * N);
    const byUser = new Map<string, number[]>();
    for (const x of log) {
      const s = slot.get(Number(x.item.slice(1)));
      if (s === undefined) continue;
      let r = byUser.get(x.user);
      if (!r) byUser.set(x.user, (r = []));
      r.push(s);
    }
    for (const r of byUser.values()) for (const p of r) for (const q of r) G[p * N + q] += w * w;
    const gramResid: number[] = [];
    for (let p = 0; p < N; p++)
      for (let q = p; q < N; q++) {
        gramResid.push(noisy.s.gram[p * N + q] - G[p * N + q]);
        expect(noisy.s.gram[p * N + q]).toBe(noisy.s.gram[q * N + p]);
      }
    expect(std(gramResid) / sigma.gram).toBeGreaterThan(0.93);
    expect(std(gramResid) / sigma.gram).toBeLessThan(1.07);
    // the stated σ are one Gaussian mechanism: Σ (Δ_b/σ_b)² = 1/z²
    const sens = sensitivities(16);
    const total = (sens.popularity / sigma.popularity) ** 2 + (sens.gram / sigma.gram) ** 2 + (sens.transitions / sigma.transitions) ** 2;
    expect(total).toBeCloseTo(1 / sigma.noiseMultiplier ** 2, 9);
    expect(sigma.noiseMultiplier).toBeCloseTo(gaussianNoiseMultiplier(1, 1e-6), 12);
  });

  it('ε = ∞ publishes the exact, unweighted statistics', () => {
    const { log, catalog } = randomLog(50, 20, 5, 4);
    const { s, model } = stats(log, { catalog });
    const pop = new Float64Array(20);
    for (const x of log) pop[Number(x.item.slice(1))]++;
    expect(Array.from(s.popularity)).toEqual(Array.from(pop));
    expect(model.privacy).toBeUndefined();
  });
});

describe('the DP file', () => {
  it('states (ε, δ) and the mechanism, and carries no exact counts', () => {
    const { log, catalog } = randomLog(100, 20, 6, 5);
    const model = trainShopModel(log, { catalog, epsilon: 2, dim: 4, iterations: 5, random: seeded(1) });
    const back = decodeShopModel(encodeShopModel(model));
    expect(back.privacy).toMatchObject({ epsilon: 2, delta: 1e-6, maxItemsPerUser: 16 });
    expect(back.privacy!.mechanism).toMatch(/Gaussian/);
    expect(back.info.users).toBeUndefined();
    expect(back.info.interactions).toBeUndefined();
    expect(back.info.trainSeconds).toBeUndefined();
  });

  it('needs a public catalog (and a public trend range), and never lists items seen only in the log', () => {
    const { log, catalog } = randomLog(30, 10, 4, 6);
    expect(() => trainShopModel(log, { epsilon: 1, random: seeded(1) })).toThrow(/catalog/);
    expect(() => trainShopModel(log, { catalog, epsilon: 1, trend: true, random: seeded(1) })).toThrow(/trendRange/);
    const extra = [...log, { user: 'u1', item: 'secret', at: 5 }];
    expect(trainShopModel(extra, { catalog, epsilon: 1, dim: 2, random: seeded(1) }).items).not.toContain('secret');
  });

  it('draws noise from node:crypto by default', () => {
    const r = secureRandom();
    const xs = Array.from({ length: 20000 }, r);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...xs)).toBeLessThan(1);
    expect(Math.abs(xs.reduce((a, b) => a + b, 0) / xs.length - 0.5)).toBeLessThan(0.01);
    const { log, catalog } = randomLog(30, 10, 4, 6);
    const a = trainShopModel(log, { catalog, epsilon: 1, dim: 2 });
    const b = trainShopModel(log, { catalog, epsilon: 1, dim: 2 });
    expect(Array.from(a.popularity)).not.toEqual(Array.from(b.popularity));
  });
});
