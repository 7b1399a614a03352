import { afterEach, describe, expect, it } from 'vitest';
import {
  CatalogVectorsError,
  createAtomem,
  DisposedError,
  InvalidCatalogError,
  InvalidImportError,
  InvalidIntentError,
  UnknownItemError,
  WorkerError,
  type Atomem,
  type CreateAtomemOptions,
} from '../../src/client/index.js';
import type { Item } from '../../src/core/types.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';

// The page's view of atomem's errors, in real Chromium with the real module Worker and IndexedDB:
// dispose() abandons calls in flight at once, errors thrown in the worker arrive as instances of
// the exported classes, and bad options or catalogs are refused with a message naming the culprit.

const catalog: Item[] = ['trail', 'road', 'court', 'boot'].flatMap((n) => [
  { id: `shoes-${n}`, title: `${n} shoes`, categories: ['Shoes'], description: `leather running shoes ${n}` },
  { id: `books-${n}`, title: `${n} novel`, categories: ['Books'], description: `paperback fiction ${n}` },
]);

const { profile, deleteAll } = profileTracker('client-errors-');
const open: Atomem[] = [];
async function start(options: Partial<CreateAtomemOptions> & { profile: string }): Promise<Atomem> {
  const a = await createAtomem({ catalog, embedder: 'hashing', config: { tau: 0.3 }, ...options });
  open.push(a);
  return a;
}
const rejection = (p: Promise<unknown>): Promise<unknown> =>
  p.then(
    () => {
      throw new Error('expected a rejection');
    },
    (e: unknown) => e,
  );
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await deleteAll();
});

describe('dispose()', () => {
  // a large catalog, ranked whole: a recommend that takes the worker a while
  const big: Item[] = Array.from({ length: 20_000 }, (_, i) => ({
    id: `p${i}`,
    title: `product ${i} ${['tent', 'stove', 'boots', 'kettle', 'novel'][i % 5]}`,
    categories: [`dept${i % 40}`],
    description: `item number ${i} of the big catalog`,
  }));
  const ids = big.map((i) => i.id);

  it('rejects a slow recommend in flight with DisposedError at once, and every later call', async () => {
    const a = await start({ profile: profile('slow'), catalog: big });
    for (let i = 0; i < 12; i++) await a.track({ item: `p${i * 7}`, action: i % 3 ? 'click' : 'purchase', at: 1_000 + i });
    // how long the worker needs for one such recommend (the in-flight case below must be slower than its wait)
    const t = performance.now();
    await a.recommend(ids);
    const full = performance.now() - t;
    expect(full).toBeGreaterThan(100);

    let settled: 'resolved' | 'rejected' | null = null;
    const inFlight = a.recommend(ids);
    inFlight.then(
      () => (settled = 'resolved'),
      () => (settled = 'rejected'),
    );
    await sleep(Math.min(50, full / 4));
    expect(settled).toBe(null); // still running in the worker
    const t0 = performance.now();
    a.dispose();
    const err = await rejection(inFlight);
    const ms = performance.now() - t0;
    expect(err).toBeInstanceOf(DisposedError);
    expect(err).toBeInstanceOf(Error);
    expect((err as DisposedError).name).toBe('DisposedError');
    expect((err as DisposedError).method).toBe('recommend');
    expect((err as Error).message).toMatch(/disposed while recommend\(\) was in flight/);
    // promptly: not when the worker would have answered (relative to a full recommend, so a loaded machine does not fail it)
    expect(ms).toBeLessThan(Math.max(100, full / 3));

    for (const later of [a.recommend(['p1']), a.track({ item: 'p1' }), a.memories(), a.status()]) {
      const e = await rejection(later);
      expect(e).toBeInstanceOf(DisposedError);
      expect((e as Error).message).toMatch(/is disposed: \w+\(\) needs a new createAtomem\(\)/);
    }
    a.dispose(); // idempotent
  }, 120_000); // why: 20k items tracked and ranked twice; minutes on a loaded 2-core machine

  it('a worker that fails during a call rejects that call with a WorkerError at once; the next call gets a new worker', async () => {
    const workers: Worker[] = [];
    const a = await start({
      profile: profile('crash'),
      catalog: big,
      worker: () => {
        const w = new Worker(new URL('../../src/worker/worker.ts', import.meta.url), { type: 'module' });
        workers.push(w);
        return w;
      },
    });
    await a.track({ item: 'p7', action: 'purchase', at: 1_000 });
    let settled = false;
    const inFlight = a.recommend(ids);
    inFlight.then(
      () => (settled = true),
      () => (settled = true),
    );
    await sleep(20);
    expect(settled).toBe(false);
    // the browser fires `error` on the Worker object when its script fails
    workers[0].dispatchEvent(new ErrorEvent('error', { message: 'simulated crash' }));
    const err = await rejection(inFlight);
    expect(err).toBeInstanceOf(WorkerError);
    expect((err as Error).message).toContain('simulated crash');
    expect((await a.recommend(['p1', 'p2'])).length).toBe(2);
    expect(workers.length).toBe(2);
  }, 120_000);

  it('rejects a call made just before dispose() (the immediate case) and every other call in flight', async () => {
    const a = await start({ profile: profile('immediate') });
    const calls = [a.recommend(catalog.map((i) => i.id)), a.memories(), a.track({ item: 'shoes-road', action: 'purchase' })];
    a.dispose();
    const errors = await Promise.all(calls.map(rejection));
    expect(errors.map((e) => (e as DisposedError).method)).toEqual(['recommend', 'memories', 'track']);
    for (const e of errors) expect(e).toBeInstanceOf(DisposedError);
  });
});

describe('errors cross the worker as instances of the exported classes', () => {
  it('UnknownItemError, InvalidIntentError, InvalidImportError, and the platform TypeError', async () => {
    const a = await start({ profile: profile('classes') });
    const unknown = await rejection(a.track({ item: 'no-such-item', at: 1 }));
    expect(unknown).toBeInstanceOf(UnknownItemError);
    expect((unknown as UnknownItemError).itemId).toBe('no-such-item');
    expect((unknown as Error).message).toContain('no-such-item');
    expect((unknown as Error).stack).toBeTruthy();
    expect(await rejection(a.recommend(['shoes-trail', 'nope']))).toBeInstanceOf(UnknownItemError);

    const intent = await rejection(a.recommend(['shoes-trail'], { intent: '   ' }));
    expect(intent).toBeInstanceOf(InvalidIntentError);
    expect(intent).toBeInstanceOf(TypeError); // InvalidIntentError is a TypeError
    expect((intent as InvalidIntentError).reason).toBe('empty');

    const imp = await rejection(a.import({ format: 'nonsense' }));
    expect(imp).toBeInstanceOf(InvalidImportError);
    expect(typeof (imp as InvalidImportError).field).toBe('string');

    const bad = await rejection(a.track({ item: 'shoes-trail', at: Number.NaN }));
    expect(bad).toBeInstanceOf(TypeError);
    expect(bad).not.toBeInstanceOf(UnknownItemError);
    const typo = await rejection(a.recommend(['shoes-trail'], { exlude: 'bought' } as never));
    expect(typo).toBeInstanceOf(TypeError);
    expect((typo as Error).message).toMatch(/unknown option "exlude" — did you mean "exclude"\?/);
    expect(await a.memories()).toEqual([]); // nothing was written by the failed calls
  });

  it('error events are instances too: a missing catalogVectors file is a CatalogVectorsError', async () => {
    const events: Error[] = [];
    await start({ profile: profile('events'), catalogVectors: '/no-such-catalog-vectors.bin', onError: (e) => events.push(e) });
    await expect.poll(() => events.length).toBeGreaterThan(0);
    expect(events[0]).toBeInstanceOf(CatalogVectorsError);
    expect(events[0].message).toContain('no-such-catalog-vectors.bin');
  });

  it('a worker that cannot load rejects createAtomem with a WorkerError', async () => {
    const err = await rejection(
      createAtomem({ profile: profile('no-worker'), catalog, embedder: 'hashing', worker: () => new Worker('/no-such-worker.js', { type: 'module' }) }),
    );
    expect(err).toBeInstanceOf(WorkerError);
  });
});

describe('bad options and catalogs are refused, naming the culprit', () => {
  it('an option typo (plain JavaScript) is a TypeError naming the nearest valid option', async () => {
    const typo = await rejection(createAtomem({ profile: profile('typo'), catalog, embeder: 'hashing' } as never));
    expect(typo).toBeInstanceOf(TypeError);
    expect((typo as Error).message).toMatch(/createAtomem: unknown option "embeder" — did you mean "embedder"\?/);

    const nested = await rejection(createAtomem({ profile: profile('typo-llm'), catalog, embedder: 'hashing', llm: { promtApi: true } } as never));
    expect((nested as Error).message).toMatch(/llm: unknown option "promtApi" — did you mean "promptApi"\?/);
    const index = await rejection(
      createAtomem({ profile: profile('typo-index'), catalog, embedder: 'hashing', index: { url: 'http://127.0.0.1:9', privcy: 'receive' } } as never),
    );
    expect((index as Error).message).toMatch(/index: unknown option "privcy" — did you mean "privacy"\?/);
    // config knobs are checked in the worker, before anything loads; the TypeError crosses as one
    const knob = await rejection(createAtomem({ profile: profile('typo-config'), catalog, embedder: 'hashing', config: { tua: 0.3 } } as never));
    expect(knob).toBeInstanceOf(TypeError);
    expect((knob as Error).message).toMatch(/unknown option "tua" — did you mean "tau"\?/);
    // a removed privacy level is refused by name
    const level = await rejection(
      createAtomem({ profile: profile('old-level'), catalog, embedder: 'hashing', index: { url: 'http://127.0.0.1:9', privacy: 'embeddings' } } as never),
    );
    expect(level).toBeInstanceOf(TypeError);
    expect((level as Error).message).toMatch(/index\.privacy must be 'off', 'receive' or 'contribute', got 'embeddings'/);
  });

  it('a catalog item without a title is named (position and id)', async () => {
    const bad = [...catalog.slice(0, 3), { id: 'tent-2p', description: 'no title here' } as unknown as Item, ...catalog.slice(3)];
    const err = await rejection(createAtomem({ profile: profile('no-title'), catalog: bad, embedder: 'hashing' }));
    expect(err).toBeInstanceOf(InvalidCatalogError);
    expect(err).toBeInstanceOf(TypeError);
    expect(err).toMatchObject({ reason: 'title', index: 3, itemId: 'tent-2p' });
    expect((err as Error).message).toBe('catalog[3] (id "tent-2p") needs a string title, got undefined');
  });

  it('duplicate catalog ids are refused', async () => {
    const dup = [...catalog, { id: 'shoes-road', title: 'Road shoes, again' }];
    const err = await rejection(createAtomem({ profile: profile('dup'), catalog: dup, embedder: 'hashing' }));
    expect(err).toBeInstanceOf(InvalidCatalogError);
    expect(err).toMatchObject({ reason: 'duplicate', index: catalog.length, itemId: 'shoes-road' });
    expect((err as Error).message).toBe(`catalog[${catalog.length}] (id "shoes-road") repeats the id of catalog[2]: catalog ids must be unique`);
  });
});
