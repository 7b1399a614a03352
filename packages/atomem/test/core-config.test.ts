import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { DEFAULT_CONFIG, EMBEDDER_TAU, resolveConfig, tauFor, type AtomemConfig } from '../src/core/config.js';
import { addScaled, assertSameDim, cosine, dot, isFiniteVector, meanNormalized, norm, normalize } from '../src/core/vector.js';

describe('resolveConfig', () => {
  it('returns the defaults when given nothing, as a fresh object', () => {
    const cfg = resolveConfig();
    expect(cfg).toEqual(DEFAULT_CONFIG);
    expect(cfg).not.toBe(DEFAULT_CONFIG);
    expect(cfg.weights).not.toBe(DEFAULT_CONFIG.weights);
    // mutating the result never leaks into the frozen defaults
    cfg.tau = 0.9;
    cfg.weights.memory = 7;
    expect(DEFAULT_CONFIG.tau).toBe(0.5);
    expect(DEFAULT_CONFIG.weights.memory).toBe(0.1);
  });

  it('keeps the STEAM paper settings as defaults', () => {
    expect(DEFAULT_CONFIG.tau).toBe(0.5);
    expect(DEFAULT_CONFIG.k1).toBe(2);
    expect(DEFAULT_CONFIG.k2).toBe(1);
  });

  it('overrides only the given knobs', () => {
    const cfg = resolveConfig({ tau: 0.7, maxMemories: 3 });
    expect(cfg.tau).toBe(0.7);
    expect(cfg.maxMemories).toBe(3);
    expect(cfg.k2).toBe(DEFAULT_CONFIG.k2);
    expect(cfg.learningRate).toBe(DEFAULT_CONFIG.learningRate);
  });

  it('merges partial weights over the default weights', () => {
    const cfg = resolveConfig({ weights: { popularity: 0, prototype: 2.5 } });
    expect(cfg.weights).toEqual({ ...DEFAULT_CONFIG.weights, popularity: 0, prototype: 2.5 });
  });

  const bad: [string, Partial<AtomemConfig>][] = [
    ['tau', { tau: 1.5 }],
    ['tau', { tau: Number.NaN }],
    ['k1', { k1: 0 }],
    ['k2', { k2: 1.5 }],
    ['maxEvents', { maxEvents: 0 }],
    ['recentEvents', { recentEvents: -1 }],
    ['maxItemsPerMemory', { maxItemsPerMemory: 0 }],
    ['maxMemories', { maxMemories: 2.2 }],
    ['learningRate', { learningRate: 1.01 }],
    ['initialStrength', { initialStrength: -0.1 }],
    ['mergeThreshold', { mergeThreshold: 2 }],
    ['forgetThreshold', { forgetThreshold: -0.5 }],
    ['forgetMinEvidence', { forgetMinEvidence: -1 }],
    ['halfLifeDays', { halfLifeDays: 0 }],
    ['sweepEvery', { sweepEvery: 0 }],
    ['synthesizeEvery', { synthesizeEvery: Infinity }],
    ['synthesizeOnErrors', { synthesizeOnErrors: 0 }],
    ['profileMaxChars', { profileMaxChars: -1 }],
    ['shareRecentEvents', { shareRecentEvents: -2 }],
  ];
  it.each(bad)('rejects an out-of-range %s with a RangeError naming it', (name, partial) => {
    expect(() => resolveConfig(partial)).toThrow(RangeError);
    expect(() => resolveConfig(partial)).toThrow(new RegExp(`config: ${name} must be`));
  });

  it('rejects a negative or non-finite weight, naming weights.<key>', () => {
    expect(() => resolveConfig({ weights: { recent: -1 } })).toThrow(/weights\.recent/);
    expect(() => resolveConfig({ weights: { prototype: Number.NaN } })).toThrow(/weights\.prototype/);
  });

  it('rejects a non-number knob (e.g. a string from a form) instead of coercing it', () => {
    expect(() => resolveConfig({ k2: '3' as unknown as number })).toThrow(/k2/);
  });

  it('says "an integer" for integer knobs', () => {
    expect(() => resolveConfig({ k1: 2.5 })).toThrow(/k1 must be an integer in \[1, 1000\], got 2\.5/);
    expect(() => resolveConfig({ tau: 2 })).toThrow(/tau must be in \[-1, 1\], got 2/);
  });

  it('accepts the inclusive bounds', () => {
    expect(() => resolveConfig({ tau: -1, learningRate: 0, initialStrength: 1, profileMaxChars: 0, recentEvents: 0 })).not.toThrow();
    expect(resolveConfig({ tau: 1 }).tau).toBe(1);
  });

  it('accepts any valid tau and keeps it exactly (property)', () => {
    fc.assert(
      fc.property(fc.double({ min: -1, max: 1, noNaN: true }), (tau) => {
        expect(resolveConfig({ tau }).tau).toBe(tau);
      }),
    );
  });
});

describe('tauFor', () => {
  it('uses the calibrated value for a known embedder', () => {
    expect(tauFor('use-lite@0.2.0/uint8')).toBe(EMBEDDER_TAU['use-lite@0.2.0/uint8']);
    expect(tauFor('use-lite@0.2.0/uint8')).toBeGreaterThan(0.5);
  });
  it("falls back to the paper's 0.5 for an unknown embedder", () => {
    expect(tauFor('hashing-256@1')).toBe(0.5);
    expect(tauFor('')).toBe(0.5);
  });
  // BUG (src/core/config.ts tauFor): `EMBEDDER_TAU[embedderId] ?? 0.5` reads inherited
  // Object.prototype members, so tauFor('toString') returns a function (and the agent's
  // resolveConfig then throws "tau must be in [-1, 1], got function …").
  it('returns a number even for ids that collide with Object.prototype members', () => {
    for (const id of ['toString', 'constructor', 'hasOwnProperty', '__proto__']) {
      expect(typeof tauFor(id)).toBe('number');
      expect(tauFor(id)).toBe(0.5);
    }
  });
});

describe('vector helpers', () => {
  it('dot / norm / cosine', () => {
    expect(dot([1, 2, 3], [4, 5, 6])).toBe(32);
    expect(norm([3, 4])).toBe(5);
    expect(cosine([1, 0], [0, 2])).toBe(0);
    expect(cosine([2, 0], [5, 0])).toBeCloseTo(1, 12);
    expect(cosine([0, 0], [1, 0])).toBe(0);
  });

  it('dimension mismatch throws a clear RangeError', () => {
    expect(() => dot([1, 2], [1, 2, 3])).toThrow(/dimension mismatch: 2 vs 3/);
    expect(() => assertSameDim(new Float32Array(4), new Float32Array(5))).toThrow(RangeError);
    expect(() => addScaled(new Float32Array(2), [1, 2, 3])).toThrow(RangeError);
  });

  it('normalize returns a unit copy and rejects zero / NaN vectors', () => {
    const src = Float32Array.from([3, 4]);
    const n = normalize(src);
    expect(n).not.toBe(src);
    expect(src[0]).toBe(3);
    expect(norm(n)).toBeCloseTo(1, 6);
    expect(() => normalize([0, 0])).toThrow(/zero vector/);
    expect(() => normalize([1, Number.NaN])).toThrow(/NaN/);
    expect(() => normalize([Infinity, 0])).toThrow(/NaN or Infinity/);
  });

  it('meanNormalized weights vectors and rejects an empty list', () => {
    const m = meanNormalized(
      [
        [1, 0],
        [0, 1],
      ],
      [3, 1],
    );
    expect(m[0]).toBeGreaterThan(m[1]);
    expect(norm(m)).toBeCloseTo(1, 6);
    expect(() => meanNormalized([])).toThrow(RangeError);
  });

  it('isFiniteVector', () => {
    expect(isFiniteVector(Float32Array.from([1, 2]))).toBe(true);
    expect(isFiniteVector([1, Number.NaN])).toBe(false);
    expect(isFiniteVector([-Infinity])).toBe(false);
  });
});
