import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Embedder } from '../src/embed/types.js';
import { createUseLiteEmbedder, USE_LITE_ID } from '../src/embed/use-lite.js';
import { createUseLitePool } from '../src/embed/use-lite-pool.js';
import { runVectorsCli } from '../src/vectors-cli.js';

// `atomem-vectors --threads N`: USE-lite on N worker threads, each with its own model, gives
// the in-process embedder's vectors (up to float rounding) in the caller's order.

const TEXTS = [
  'Two-person dome tent. Lightweight waterproof tent for camping.',
  'Down sleeping bag',
  'Cast iron frying pan: heavy skillet that sears steaks',
  "Chef's knife",
  'Mystery novel set in a foggy harbour town, with a detective and a long list of suspects who all lie',
  'Electric kettle',
  'Trail guide to the Alps',
];

let pool: Embedder;
let single: Embedder;

beforeAll(async () => {
  [pool, single] = await Promise.all([createUseLitePool(2), createUseLiteEmbedder()]);
}, 120_000);

afterAll(async () => {
  await pool?.dispose?.();
  await single?.dispose?.();
});

describe('createUseLitePool', () => {
  it("has the shipped model's id and dim, and the in-process embedder's vectors in the caller's order", async () => {
    expect(pool.id).toBe(USE_LITE_ID);
    expect(pool.dim).toBe(512);
    const [a, b] = await Promise.all([pool.embed(TEXTS), single.embed(TEXTS)]);
    expect(a).toHaveLength(TEXTS.length);
    a.forEach((e, i) => {
      expect(e.embedderId).toBe(USE_LITE_ID);
      let diff = 0;
      e.vector.forEach((x, d) => (diff = Math.max(diff, Math.abs(x - b[i].vector[d]))));
      expect(diff, TEXTS[i]).toBeLessThan(1e-5);
    });
    // fewer texts than threads, and concurrent calls, keep their order
    const [one, two] = await Promise.all([pool.embed([TEXTS[2]]), pool.embed([TEXTS[4], TEXTS[0], TEXTS[1]])]);
    expect(one[0].vector[0]).toBeCloseTo(b[2].vector[0], 5);
    expect(two.map((e) => e.vector[0])).toEqual([b[4], b[0], b[1]].map((e) => expect.closeTo(e.vector[0], 5)));
  }, 60_000);

  it("names the caller's index of a text a thread rejects, and keeps working", async () => {
    await expect(pool.embed(['ok', 'fine', 'also fine', '   '])).rejects.toThrow(/texts\[3\]/);
    await expect(pool.embed(['a tent'])).resolves.toHaveLength(1);
  }, 60_000);

  it('refuses a bad thread count, and calls after dispose', async () => {
    await expect(createUseLitePool(0)).rejects.toThrow(/threads must be a positive integer/);
    const p = await createUseLitePool(1);
    await p.dispose?.();
    await expect(p.embed(['tent'])).rejects.toThrow(/disposed/);
  }, 60_000);

  it('atomem-vectors --threads: a positive integer', async () => {
    let err = '';
    const code = await runVectorsCli(['--catalog', 'x.json', '--out', 'y.bin', '--threads', '0'], {
      stdout: { write: () => true },
      stderr: { write: (s: string) => (err += s) },
    });
    expect(code).toBe(2);
    expect(err).toMatch(/--threads must be an integer in 1\.\.64/);
  });
});
