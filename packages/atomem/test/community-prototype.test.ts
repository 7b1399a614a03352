import { describe, expect, it } from 'vitest';
import { prototypeOf } from '../src/community/prototype.js';

describe('prototypes', () => {
  it('prototypeOf = normalised mean', () => {
    const p = prototypeOf([
      [1, 0, 0],
      [0, 1, 0],
      [0, 1, 0],
    ]);
    const n = Math.hypot(1, 2);
    expect(p[0]).toBeCloseTo(1 / n, 6);
    expect(p[1]).toBeCloseTo(2 / n, 6);
    expect(p[2]).toBe(0);
  });

  it('no vectors → an empty prototype; vectors that cancel → the zero vector', () => {
    expect(prototypeOf([])).toEqual(new Float32Array(0));
    expect(
      prototypeOf([
        [1, 0],
        [-1, 0],
      ]),
    ).toEqual(new Float32Array([0, 0]));
  });
});
