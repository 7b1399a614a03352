import { afterEach, describe, expect, it } from 'vitest';
import { createAtomem, renderWhy, type Atomem, type ProgressEvent, type Why } from '../../src/client/index.js';
import { MemoryStore } from '../../src/store/index.js';
import type { Item } from '../../src/core/types.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';

// Real Chromium, a real module Worker (Vite-bundled from new URL(..., import.meta.url)), real IndexedDB.

const dept = (d: string, words: string, names: string[]): Item[] =>
  names.map((n) => ({ id: `${d.toLowerCase()}-${n}`, title: `${n} ${d.toLowerCase()}`, categories: [d], description: `${words} ${n}` }));

const catalog: Item[] = [
  ...dept('Shoes', 'leather running shoes sneakers footwear', ['trail', 'road', 'court', 'boot']),
  ...dept('Kitchen', 'cooking pan kitchen cookware stove', ['skillet', 'wok', 'saucepan', 'griddle']),
  ...dept('Books', 'paperback novel fiction reading book', ['mystery', 'fantasy', 'romance', 'thriller']),
];

const { profile, deleteAll } = profileTracker('worker-');
const open: Atomem[] = [];
async function start(p: string): Promise<Atomem> {
  const a = await createAtomem({ profile: p, catalog, embedder: 'hashing', config: { tau: 0.3 } });
  open.push(a);
  return a;
}

afterEach(async () => {
  for (const a of open.splice(0)) a.dispose();
  await deleteAll();
});

describe('worker engine through createAtomem', () => {
  it('learns a department from clicks, ranks it first with explanations, and links the clicked items', async () => {
    const a = await start(profile('rank'));
    const ops: string[] = [];
    a.on('memory', (e) => ops.push(e.op));
    await a.track({ item: 'kitchen-skillet', action: 'click', at: 1_000 });
    await a.track({ item: 'kitchen-wok', action: 'cart', at: 2_000 });
    await a.track({ item: 'kitchen-saucepan', action: 'purchase', at: 3_000 });

    const recs = await a.recommend(['shoes-trail', 'books-mystery', 'kitchen-griddle', 'shoes-boot', 'books-fantasy']);
    expect(recs.map((r) => r.id)[0]).toBe('kitchen-griddle');
    expect(recs[0].explanations.length).toBeGreaterThan(0);
    expect(recs[0].score).toBeGreaterThan(recs[recs.length - 1].score);

    const mems = await a.memories();
    expect(mems.length).toBeGreaterThan(0);
    expect(mems.flatMap((m) => m.items)).toContain('kitchen-skillet');
    expect(mems[0].embedding.vector).toBeInstanceOf(Float32Array);
    // lifecycle events arrive over the Comlink.proxy callback (asynchronously)
    await expect.poll(() => ops.length).toBeGreaterThan(0);
    expect(ops).toContain('extract');
  });

  it("reasons cross the worker as data and are worded on the page: the default English, or the shop's renderWhy", async () => {
    const a = await start(profile('why'));
    await a.track({ item: 'kitchen-skillet', action: 'click', at: 1_000 });
    await a.track({ item: 'kitchen-wok', action: 'cart', at: 2_000 });
    const ids = ['shoes-trail', 'books-mystery', 'kitchen-griddle', 'kitchen-saucepan'];
    const recs = await a.recommend(ids);
    const why = recs.flatMap((r) => r.why);
    expect(why.length).toBeGreaterThan(0);
    // each sentence is the default renderer's for that reason, in order
    for (const r of recs) expect(r.explanations).toEqual(r.why.map(renderWhy));
    // the reasons name the shopper's items by id and title, with what they did
    const named = why.flatMap((w) => ('items' in w && w.items ? w.items.map((it) => ({ ...it, action: 'action' in w ? w.action : undefined })) : []));
    expect(named.some((n) => n.id === 'kitchen-wok' && n.title === 'wok kitchen' && n.action === 'cart')).toBe(true);
    // a shop's renderer (here: the kind and the items' ids) replaces the wording; a failing one falls back per sentence
    const b = await createAtomem({
      profile: profile('why'),
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      renderWhy: (w: Why) => {
        if (w.kind === 'low-score') throw new Error('not translated');
        return `${w.kind}:${'items' in w && w.items ? w.items.map((i) => i.id).join(',') : ''}`;
      },
    });
    open.push(b);
    const mine = await b.recommend(ids);
    for (const r of mine)
      r.why.forEach((w, i) =>
        expect(r.explanations[i]).toBe(
          w.kind === 'low-score' ? renderWhy(w) : `${w.kind}:${'items' in w && w.items ? w.items.map((x) => x.id).join(',') : ''}`,
        ),
      );
    await expect(createAtomem({ catalog, embedder: 'hashing', renderWhy: 'fr' as never })).rejects.toThrow(/renderWhy must be a function/);
  });

  it('keeps memories across dispose + createAtomem with the same profile (reload)', async () => {
    const p = profile('reload');
    const a = await start(p);
    await a.track({ item: 'books-mystery', action: 'purchase', at: 1_000 });
    await a.track({ item: 'books-thriller', action: 'click', at: 2_000 });
    const before = await a.memories();
    expect(before.length).toBeGreaterThan(0);
    a.dispose();
    await expect(a.memories()).rejects.toThrow(/disposed/);

    const b = await start(p);
    const after = await b.memories();
    expect(after.map((m) => [m.id, m.content, m.items])).toEqual(before.map((m) => [m.id, m.content, m.items]));
    const recs = await b.recommend(['shoes-road', 'books-romance', 'kitchen-wok']);
    expect(recs[0].id).toBe('books-romance');
  });

  it('rethrows worker errors with their name, message and details', async () => {
    const a = await start(profile('errors'));
    const err = await a.track({ item: 'no-such-item', at: 1 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).name).toBe('UnknownItemError');
    expect((err as Error).message).toContain('no-such-item');
    expect((err as Error & { itemId?: string }).itemId).toBe('no-such-item');
    expect((err as Error).stack).toBeTruthy();

    await expect(a.recommend(['shoes-trail', 'nope'])).rejects.toMatchObject({ name: 'UnknownItemError' });
    await expect(a.track({ item: 'shoes-trail', at: Number.NaN })).rejects.toMatchObject({ name: 'TypeError' });
    await expect(a.import({ format: 'nonsense' })).rejects.toMatchObject({ name: 'InvalidImportError' });
    // nothing was written by the failed calls
    expect(await a.memories()).toEqual([]);
  });

  it('round-trips export → erase → import with equal memories', async () => {
    const a = await start(profile('roundtrip'));
    await a.track({ item: 'shoes-trail', action: 'purchase', at: 1_000 });
    await a.track({ item: 'kitchen-wok', action: 'click', at: 2_000 });
    await a.track({ item: 'shoes-road', action: 'like', at: 3_000 });
    const before = await a.memories();
    expect(before.length).toBeGreaterThan(0);
    const file = await a.export();
    const json = JSON.parse(JSON.stringify(file)) as unknown; // what a download/upload would carry

    await a.erase();
    expect(await a.memories()).toEqual([]);

    await a.import(json);
    expect(await a.memories()).toEqual(before);
    // and the imported state is live: tracking continues from it
    await a.track({ item: 'shoes-court', action: 'click', at: 4_000 });
    expect((await a.memories()).flatMap((m) => m.items)).toContain('shoes-court');
  });

  it('a second evaluation of the start module in the same worker exposes nothing: one engine answers every call', async () => {
    let report: unknown;
    const a = await createAtomem({
      profile: profile('double-start'),
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      worker: () => {
        const w = new Worker(new URL('./double-start.worker.ts', import.meta.url), { type: 'module' });
        w.addEventListener('message', (e: MessageEvent) => {
          if (e.data && typeof e.data === 'object' && 'doubleStart' in e.data) report = e.data.doubleStart;
        });
        return w;
      },
    });
    open.push(a);
    await expect.poll(() => report).toBeDefined();
    // the first copy exposed the engine, the second (a distinct module instance) did nothing
    expect(report).toEqual([true, false, true]);
    // a second, uninitialised engine would answer some of these with "the engine is not initialised"
    for (let i = 0; i < 5; i++) await a.track({ item: 'books-mystery', action: 'click', at: 1_000 + i });
    const ranked = await a.recommend(['books-thriller', 'kitchen-wok', 'shoes-trail']);
    expect(ranked[0].id).toBe('books-thriller');
    expect((await Promise.all(Array.from({ length: 10 }, () => a.status()))).every((s) => s.embedder.kind === 'hashing')).toBe(true);
  });

  it("recommend's exclude and diversify options cross the worker: bought / seen items left out, bad options rejected", async () => {
    const a = await start(profile('exclude'));
    await a.track({ item: 'kitchen-wok', action: 'purchase', at: 1_000 });
    await a.track({ item: 'kitchen-skillet', action: 'click', at: 2_000 });
    const all = catalog.map((i) => i.id);
    const ids = async (opts: Parameters<Atomem['recommend']>[1]) => (await a.recommend(all, opts)).map((r) => r.id);
    expect(await ids({})).not.toContain('kitchen-wok'); // the default: what was bought is left out
    expect(await ids({ exclude: [] })).toContain('kitchen-wok');
    expect(await ids({ exclude: 'bought' })).not.toContain('kitchen-wok');
    const fresh = await ids({ exclude: ['bought', 'seen'], diversify: false });
    expect(fresh).not.toContain('kitchen-wok');
    expect(fresh).not.toContain('kitchen-skillet');
    expect(fresh).toHaveLength(all.length - 2);
    await expect(a.recommend(all, { exclude: 'cart' as never })).rejects.toMatchObject({ name: 'TypeError' });
  });

  it('replaces a dead worker on the next call; state comes back from IndexedDB', async () => {
    const workers: Worker[] = [];
    const p = profile('restart');
    const a = await createAtomem({
      profile: p,
      catalog,
      embedder: 'hashing',
      config: { tau: 0.3 },
      worker: () => {
        const w = new Worker(new URL('../../src/worker/worker.ts', import.meta.url), { type: 'module' });
        workers.push(w);
        return w;
      },
    });
    open.push(a);
    const errors: string[] = [];
    a.on('error', (e) => errors.push(e.name));
    await a.track({ item: 'books-fantasy', action: 'purchase', at: 1_000 });
    const before = await a.memories();
    // simulate the worker dying: the browser fires `error` on the Worker object
    workers[0].dispatchEvent(new ErrorEvent('error', { message: 'simulated crash' }));
    expect(errors).toEqual(['WorkerError']);
    const after = await a.memories();
    expect(workers.length).toBe(2);
    expect(after).toEqual(before);
  });

  it('reports catalog embedding progress during init', async () => {
    const seen: ProgressEvent[] = [];
    const a = await createAtomem({ profile: profile('progress'), catalog, embedder: 'hashing', onProgress: (p) => seen.push(p) });
    open.push(a);
    await expect.poll(() => seen.length).toBeGreaterThan(0);
    await expect.poll(() => seen[seen.length - 1]).toEqual({ stage: 'catalog', phase: 'ready', loaded: catalog.length, total: catalog.length, unit: 'items' });
    expect(seen[0]).toEqual({ stage: 'catalog', phase: 'embed', loaded: 0, total: catalog.length, unit: 'items' });
  });

  it('a profile made with one embedder opens with another: memories move into the new space', async () => {
    const p = profile('switch');
    const a = await start(p);
    await a.track({ item: 'kitchen-wok', action: 'purchase', at: 1_000 });
    const before = await a.memories();
    a.dispose();
    const b = await createAtomem({ profile: p, catalog, embedder: { kind: 'hashing', dim: 64 }, config: { tau: 0.3 } });
    open.push(b);
    const after = await b.memories();
    expect(after.map((m) => [m.id, m.content])).toEqual(before.map((m) => [m.id, m.content]));
    expect(after.every((m) => m.embedding.vector.length === 64)).toBe(true);
    expect((await b.recommend(['shoes-road', 'kitchen-griddle']))[0].id).toBe('kitchen-griddle');
  });

  it('reuses the catalog vectors cached by the last visit; only an edited or new item is embedded again', async () => {
    const p = profile('vector-cache');
    const first: ProgressEvent[] = [];
    const a = await createAtomem({ profile: p, catalog, embedder: 'hashing', onProgress: (e) => first.push(e) });
    open.push(a);
    await expect.poll(() => first.at(-1)).toMatchObject({ stage: 'catalog', phase: 'ready', total: catalog.length });
    a.dispose();
    const edited = catalog.map((it, i) => (i === 0 ? { ...it, description: `${it.description} now waterproof` } : it));
    const next = [...edited, { id: 'books-poetry', title: 'poetry books', categories: ['Books'] }];
    const second: ProgressEvent[] = [];
    const b = await createAtomem({ profile: p, catalog: next, embedder: 'hashing', onProgress: (e) => second.push(e) });
    open.push(b);
    await expect.poll(() => second.at(-1)).toMatchObject({ stage: 'catalog', phase: 'ready', loaded: 2, total: 2 });
    b.dispose();
    const third: ProgressEvent[] = [];
    const c = await createAtomem({ profile: p, catalog: next, embedder: 'hashing', onProgress: (e) => third.push(e) });
    open.push(c);
    await expect.poll(() => third.at(-1)).toMatchObject({ stage: 'catalog', phase: 'ready', loaded: 0, total: 0 });
    expect((await c.recommend(['books-poetry', 'shoes-trail'])).length).toBe(2);
  });

  it('replays an event made durable before a crash exactly once', async () => {
    const p = profile('replay');
    // a crash between appendEvent and processing: the store holds one pending event
    const store = await MemoryStore.open({ profile: p });
    await store.appendEvent({ seq: 1, item: 'shoes-boot', at: 1_000, action: 'purchase', pending: true });
    store.close();

    const a = await start(p);
    const mems = await a.memories();
    expect(mems.flatMap((m) => m.items)).toEqual(['shoes-boot']);
    const evidence = mems[0].evidence;
    a.dispose();

    const b = await start(p);
    const again = await b.memories();
    expect(again.map((m) => [m.id, m.evidence, m.items])).toEqual([[mems[0].id, evidence, ['shoes-boot']]]);
    const file = await b.export();
    expect(file.state.events.map((e) => [e.seq, e.pending])).toEqual([[1, false]]);
    // the next tracked event continues the sequence
    await b.track({ item: 'shoes-trail', at: 2_000 });
    expect((await b.export()).state.events.map((e) => e.seq)).toEqual([1, 2]);
  });
});
