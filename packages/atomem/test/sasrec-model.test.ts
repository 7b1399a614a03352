/**
 * SASRec inference and its binary format (src/shop/sasrec/model.ts): round trips in float32,
 * float16 and int8, errors on malformed buffers, argument checks.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '@atomem/bench/rng';
import { makeLayout, weightsView } from '../src/shop/sasrec/layout.js';
import {
  deserializeSasrec,
  encodeHistory,
  fromHalf,
  namedTensors,
  sasrecKernel,
  scoreItems,
  serializeSasrec,
  setSasrecKernel,
  toHalf,
  type SasrecWeights,
} from '../src/shop/sasrec/model.js';
import { initWeights } from '../src/shop/sasrec/train.js';

function model(seed = 1): SasrecWeights {
  const lay = makeLayout({ maxLen: 12, dim: 16, blocks: 2, heads: 2 }, 30);
  const rng = new Rng(`model-${seed}`);
  const p = Float32Array.from(initWeights(lay, seed), (x) => x + (rng.next() - 0.5) * 0.1);
  p.fill(0, lay.itemEmb, lay.itemEmb + 16);
  return weightsView(lay, p);
}

describe('SASRec binary format', () => {
  const w = model();
  const hist = [3, 1, 4, 1, 5, 9, 2, 6];
  const items = Int32Array.from({ length: 30 }, (_, i) => i + 1);

  it('float32 round trip is exact', () => {
    const bytes = serializeSasrec(w);
    expect(String.fromCharCode(...bytes.subarray(0, 4))).toBe('SASR');
    const back = deserializeSasrec(bytes);
    expect(back.config).toEqual(w.config);
    expect(back.numItems).toBe(30);
    for (const [[name, a], [, b]] of namedTensors(w).map((t, i) => [t, namedTensors(back)[i]] as const)) expect(b, name).toEqual(a);
    expect(encodeHistory(back, hist)).toEqual(encodeHistory(w, hist));
  });

  it('reads from an unaligned offset inside a larger buffer', () => {
    const bytes = serializeSasrec(w);
    const big = new Uint8Array(bytes.length + 3);
    big.set(bytes, 3);
    expect(deserializeSasrec(big.subarray(3)).itemEmb).toEqual(w.itemEmb);
  });

  it('float16 and int8 item embeddings: smaller files, scores close to float32', () => {
    const f32 = serializeSasrec(w);
    const f16 = serializeSasrec(w, { itemEmbedding: 'f16' });
    const i8 = serializeSasrec(w, { itemEmbedding: 'int8' });
    expect(f16.length).toBeLessThan(f32.length);
    expect(i8.length).toBeLessThan(f16.length);
    const ref = scoreItems(w, encodeHistory(w, hist), items);
    for (const [bytes, tol] of [
      [f16, 2e-3],
      [i8, 2e-2],
    ] as const) {
      const back = deserializeSasrec(bytes);
      const s = scoreItems(back, encodeHistory(back, hist), items);
      const scale = Math.max(...ref.map(Math.abs));
      for (let i = 0; i < s.length; i++) expect(Math.abs(s[i] - ref[i]) / scale).toBeLessThan(tol);
      // the other tensors stay float32, exactly
      expect(back.blocks[1].wq).toEqual(w.blocks[1].wq);
    }
  });

  it('half-precision conversion: exact for representable values, round to nearest, overflow to infinity', () => {
    for (const x of [0, 1, -2, 0.5, 65504, 2 ** -24, -(2 ** -14)]) expect(fromHalf(toHalf(x))).toBe(x);
    expect(fromHalf(toHalf(1 + 2 ** -11))).toBe(1); // tie → even
    expect(fromHalf(toHalf(1 + 3 * 2 ** -11))).toBe(1 + 2 ** -9);
    expect(fromHalf(toHalf(1e6))).toBe(Infinity);
    expect(Number.isNaN(fromHalf(toHalf(NaN)))).toBe(true);
  });

  describe('malformed buffers throw a RangeError that says what is wrong', () => {
    const good = serializeSasrec(w);
    const hlen = new DataView(good.buffer).getUint32(8, true);
    const withHeader = (edit: (h: Record<string, unknown>) => void) => {
      const h = JSON.parse(new TextDecoder().decode(good.subarray(12, 12 + hlen)));
      edit(h);
      const json = new TextEncoder().encode(JSON.stringify(h).padEnd(hlen, ' ').slice(0, hlen));
      const out = good.slice();
      out.set(json, 12);
      return out;
    };
    const cases: Array<[string, Uint8Array, RegExp]> = [
      ['empty', new Uint8Array(0), /shorter than/],
      ['bad magic', Uint8Array.from([...good.subarray(0, 12)]).map((b, i) => (i === 0 ? 0x58 : b)), /magic/],
      ['future version', good.slice().map((b, i) => (i === 4 ? 9 : b)), /version 9/],
      ['header past the end', good.subarray(0, 40), /runs past the end/],
      ['truncated data', good.subarray(0, good.length - 8), /runs past the end/],
      ['not JSON', good.slice().map((b, i) => (i === 12 ? 0x7b + 1 : b)), /JSON/],
      ['wrong shape', withHeader((h) => ((h.tensors as Array<{ shape: number[] }>)[1].shape = [11, 16])), /shape/],
      ['bad config', withHeader((h) => ((h.config as { dim: number }).dim = 15)), /multiple|dim/],
      ['bad dtype', withHeader((h) => ((h.tensors as Array<{ dtype: string }>)[2].dtype = 'f64')), /dtype/],
      ['renamed tensor', withHeader((h) => ((h.tensors as Array<{ name: string }>)[0].name = 'itemEmX')), /expected itemEmb/],
    ];
    for (const [name, bytes, msg] of cases) {
      it(name, () => {
        expect(() => deserializeSasrec(bytes)).toThrow(RangeError);
        expect(() => deserializeSasrec(bytes)).toThrow(msg);
      });
    }
    it('a NaN in the data', () => {
      const bad = good.slice();
      const dataStart = (12 + hlen + 3) & ~3;
      new DataView(bad.buffer).setFloat32(dataStart + 16 * 4 + 4, NaN, true);
      expect(() => deserializeSasrec(bad)).toThrow(/non-finite/);
    });
  });
});

describe('SASRec inference', () => {
  const w = model(2);

  it('rejects item indices outside 1..numItems and vectors of the wrong length', () => {
    expect(() => encodeHistory(w, [1, 0])).toThrow(RangeError);
    expect(() => encodeHistory(w, [31])).toThrow(/outside 1\.\.30/);
    expect(() => encodeHistory(w, [1.5])).toThrow(RangeError);
    expect(() => scoreItems(w, new Float32Array(3), [1])).toThrow(/length 3/);
    expect(() => scoreItems(w, new Float32Array(16), [0])).toThrow(RangeError);
  });

  it('an empty history gives the zero vector; order and recency matter', () => {
    expect([...encodeHistory(w, [])].every((x) => x === 0)).toBe(true);
    const a = encodeHistory(w, [1, 2, 3]);
    expect(encodeHistory(w, [3, 2, 1])).not.toEqual(a);
    expect(encodeHistory(w, [1, 2, 3])).toEqual(a);
    expect(a.every(Number.isFinite)).toBe(true);
  });

  it('the WebAssembly SIMD and the plain JS inference agree, and weights may change between calls', () => {
    const hist = Array.from({ length: 20 }, (_, i) => 1 + ((i * 7) % 30));
    setSasrecKernel('js');
    expect(sasrecKernel(w.config)).toBe('js');
    const js = encodeHistory(w, hist);
    setSasrecKernel('auto');
    const auto = encodeHistory(w, hist);
    for (let c = 0; c < 16; c++) expect(Math.abs(auto[c] - js[c])).toBeLessThan(1e-5);
    const saved = w.blocks[0].wq[5];
    w.blocks[0].wq[5] += 0.5;
    try {
      expect(encodeHistory(w, hist)).not.toEqual(auto);
    } finally {
      w.blocks[0].wq[5] = saved;
    }
    expect(encodeHistory(w, hist)).toEqual(auto);
  });

  it('scoreItems is the dot product with the shared item embedding', () => {
    const u = encodeHistory(w, [4, 5]);
    const [s] = scoreItems(w, u, [7]);
    let ref = 0;
    for (let c = 0; c < 16; c++) ref += u[c] * w.itemEmb[7 * 16 + c];
    expect(s).toBeCloseTo(ref, 5);
  });
});
