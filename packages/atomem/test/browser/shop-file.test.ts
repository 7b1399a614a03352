import { afterEach, describe, expect, it } from 'vitest';
import { cdp } from 'vitest/browser';
import type { Atomem } from '../../src/client/index.js';
import type { Item } from '../../src/core/types.js';
import { itemText } from '../../src/embed/cache.js';
import { createHashingEmbedder } from '../../src/embed/hashing.js';
import { encodeCatalogVectors } from '../../src/protocol/catalog-vectors-v1.js';
import { encodeCatalogFile } from '../../src/protocol/catalog-vectors-v2.js';
import { decodeCatalogHead, shardsFor } from '../../src/protocol/catalog-vectors-v3.js';
import { FILE_CACHE_DB } from '../../src/worker/shop-file-cache.js';
import { profileTracker } from '../../../../test/fixtures/idb.js';
import { startHashingAtomem } from '../../../../test/fixtures/hashing-atomem.js';
import catalog from '../../../../test/fixtures/shop-file/catalog.json';

// The shop's published file, format v2, made in Node by the command in
// test/fixtures/shop-file/README.md (`atomem-vectors --log` over a made-up order log in which wok
// buyers also buy trail and road shoes) and served over HTTP by the test server (it sends an
// ETag). Real worker, real fetch, real IndexedDB; the page's network is watched through the
// Chrome DevTools Protocol (the worker's requests included: the file's own request must show).
const SHOP_FILE = '/test/fixtures/shop-file/catalog-v2.bin';
const SHOP_URL = new URL(SHOP_FILE, location.href).href;
const items = catalog as Item[];
const ids = items.map((i) => i.id);

const profiles = profileTracker('shopfile-');
const open: Atomem[] = [];
const urls: string[] = [];
/** Network watches to end before the next test (a CDP event after the run closes the RPC is an error). */
const stops: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  for (const a of open.splice(0)) a.dispose();
  for (const u of urls.splice(0)) URL.revokeObjectURL(u);
  await profiles.deleteAll();
  await new Promise<void>((resolve) => {
    const req = indexedDB.deleteDatabase(FILE_CACHE_DB);
    req.onsuccess = req.onerror = req.onblocked = () => resolve();
  });
});

async function start(name: string, catalogVectors?: string, profile = profiles.profile(name)) {
  return startWith(name, items, catalogVectors, profile);
}

async function startWith(name: string, catalogItems: Item[], catalogVectors?: string, profile = profiles.profile(name)) {
  const started = await startHashingAtomem(profile, catalogItems, catalogVectors);
  open.push(started.a);
  return started;
}

/**
 * Every request the page and its workers start, as absolute URLs: the page's Network domain, and
 * each worker's (auto-attached, paused until its Network domain is on, so no request is missed).
 */
async function watchNetwork(): Promise<{ urls: () => string[]; stop: () => Promise<void> }> {
  // why a map: a worker attached by several watches (one per test, same session) reports a request once per attachment
  const byId = new Map<string, string>();
  const seen = { push: (id: string, url: string) => void byId.set(id, url) };
  const session = cdp();
  // why first: the test server creates the CDP session on the first command; listeners registered before it are lost
  await session.send('Network.enable');
  let id = 1;
  let probeSeen = false;
  const onPage = (e: { requestId: string; request: { url: string } }) => seen.push(`page:${e.requestId}`, e.request.url);
  const onAttach = (e: { sessionId: string; targetInfo: { type: string; url: string } }) => {
    if (e.targetInfo.url.startsWith('blob:')) probeSeen = true;
    const send = (method: string) => session.send('Target.sendMessageToTarget', { sessionId: e.sessionId, message: JSON.stringify({ id: id++, method }) });
    // why the catch: a worker may be gone before its commands arrive (the probe's, a disposed engine's)
    send('Network.enable')
      .then(() => send('Runtime.runIfWaitingForDebugger'))
      .catch(() => undefined);
  };
  const onWorker = (e: { message: string }) => {
    const m = JSON.parse(e.message) as { method?: string; params?: { requestId: string; request?: { url: string } } };
    if (m.method === 'Network.requestWillBeSent' && m.params?.request) seen.push(`worker:${m.params.requestId}`, m.params.request.url);
  };
  session.on('Network.requestWillBeSent', onPage);
  session.on('Target.attachedToTarget', onAttach);
  session.on('Target.receivedMessageFromTarget', onWorker);
  await session.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: true, flatten: false });
  // why: the listeners above reach the test server asynchronously; a probe worker proves the watch
  // sees workers before the test starts the engine's
  const probe = URL.createObjectURL(new Blob(['postMessage(1)'], { type: 'text/javascript' }));
  for (let i = 0; i < 50 && !probeSeen; i++) {
    const w = new Worker(probe);
    await new Promise((r) => setTimeout(r, 100));
    w.terminate();
  }
  URL.revokeObjectURL(probe);
  if (!probeSeen) throw new Error('the network watch does not see workers');
  const stop = async () => {
    await session.send('Target.setAutoAttach', { autoAttach: false, waitForDebuggerOnStart: false, flatten: false });
    await session.send('Network.disable');
    session.off('Network.requestWillBeSent', onPage);
    session.off('Target.attachedToTarget', onAttach);
    session.off('Target.receivedMessageFromTarget', onWorker);
  };
  stops.push(stop);
  return { urls: () => [...byId.values()], stop };
}

// why: the purchase is the latest event — the shop model's sequence signals (SASRec, Markov, vecRecent) weigh
// what came last, and in the log skillet viewers buy the other pans
const shopper = async (a: Atomem) => {
  await a.track({ item: 'p-skillet', action: 'view', at: 1_000 });
  await a.track({ item: 'p-wok', action: 'purchase', at: 2_000 });
};

describe('the shop model in the catalog vector file (v2)', () => {
  it('ranks with the shop model: a wok buyer gets the shoes wok buyers bought; the content space alone ranks pans; nothing leaves the host', async () => {
    const network = await watchNetwork();
    const withShop = await start('shop', SHOP_FILE);
    const status = await withShop.a.status();
    expect(status.catalog).toMatchObject({ url: SHOP_URL, version: 2, source: 'download', shop: { items: 8, sequence: 'sasrec', epsilon: null } });
    expect(status.catalog!.bytes).toBeGreaterThan(100_000);
    // progress arrives on its own message channel, possibly after createAtomem resolved: poll
    await expect
      .poll(() =>
        withShop.progress.some(
          (p) => p.stage === 'catalog' && p.phase === 'download' && p.unit === 'bytes' && p.loaded === p.total && p.total === status.catalog!.bytes,
        ),
      )
      .toBe(true);
    // every content vector came from the file (nothing embedded here)
    await expect.poll(() => withShop.progress.filter((p) => p.stage === 'catalog' && p.unit === 'items').at(-1)?.total).toBe(0);

    // the same content vectors as v1 (no shop part): the content space
    const embedder = createHashingEmbedder({ dim: 256 });
    const v1 = URL.createObjectURL(
      new Blob([
        encodeCatalogVectors(
          embedder,
          items,
          (await embedder.embed(items.map((it) => itemText(it)))).map((e) => e.vector),
        ) as BlobPart,
      ]),
    );
    urls.push(v1);
    const content = await start('content', v1);
    expect((await content.a.status()).catalog).toMatchObject({ version: 1, shop: null });

    for (const s of [withShop, content]) await shopper(s.a);
    const cands = ids.filter((id) => id !== 'p-wok' && id !== 'p-skillet');
    const shopRank = (await withShop.a.recommend(cands)).map((r) => r.id);
    const contentRank = (await content.a.recommend(cands)).map((r) => r.id);
    expect(new Set(shopRank.slice(0, 2))).toEqual(new Set(['p-trail', 'p-road']));
    expect(['p-saucepan', 'p-griddle']).toContain(contentRank[0]);
    expect(shopRank).not.toEqual(contentRank);
    // memories live in the shop's space
    expect((await withShop.a.memories()).map((m) => m.embedding.embedderId)).toEqual([`shop:${status.catalog!.shop!.id}`, `shop:${status.catalog!.shop!.id}`]);
    expect(withShop.errors).toEqual([]);
    expect(content.errors).toEqual([]);

    const files = network.urls().filter((u) => u.endsWith(SHOP_FILE));
    expect(files.length).toBe(1); // the worker's request is seen, so the watch covers the worker
    const offHost = network.urls().filter((u) => !u.startsWith(location.origin) && !u.startsWith('blob:') && !u.startsWith('data:'));
    expect(offHost).toEqual([]);
  });

  it('a returning shopper revalidates the file (304: no body) and ranks with the cached shop model; a new profile on the origin downloads the content rows', async () => {
    const first = await start('again', SHOP_FILE);
    await shopper(first.a);
    const want = (await first.a.recommend(ids)).map((r) => [r.id, r.score]);
    const shopId = (await first.a.status()).catalog!.shop!.id;
    first.a.dispose();
    const network = await watchNetwork();
    const again = await start('again', SHOP_FILE, first.profile);
    const st = await again.a.status();
    expect(st.catalog).toMatchObject({ version: 2, source: 'revalidated', shop: { id: shopId } });
    // why poll: the worker's requests reach this page through CDP target messages, possibly after status() resolved (failed once in CI)
    const shopRequests = () => network.urls().filter((u) => u.endsWith(SHOP_FILE)).length;
    await expect.poll(shopRequests).toBe(1);
    const got = (await again.a.recommend(ids)).map((r) => [r.id, r.score]);
    expect(shopRequests()).toBe(1); // one revalidation, no second download
    expect(got.map((r) => r[0])).toEqual(want.map((r) => r[0]));
    got.forEach((r, i) => expect(r[1]).toBeCloseTo(want[i][1] as number, 9)); // the same models, summed in another order
    expect(again.progress.some((p) => p.stage === 'catalog' && p.phase === 'download')).toBe(false); // (checked late: progress has its own channel)
    expect(again.errors).toEqual([]);
    // another profile: its item vectors are not cached, so the whole file is downloaded
    const other = await start('other', SHOP_FILE);
    expect((await other.a.status()).catalog).toMatchObject({ source: 'download', shop: { sequence: 'sasrec' } });
  });

  it('a v2 file without a shop part (no order log) behaves as v1: content vectors from the file, the content space', async () => {
    const embedder = createHashingEmbedder({ dim: 256 });
    const vectors = (await embedder.embed(items.map((it) => itemText(it)))).map((e) => e.vector);
    const url = URL.createObjectURL(new Blob([encodeCatalogFile({ embedder, items, vectors }) as BlobPart]));
    urls.push(url);
    const s = await start('noshop', url);
    expect((await s.a.status()).catalog).toMatchObject({ version: 2, source: 'download', shop: null });
    await expect.poll(() => s.progress.filter((p) => p.stage === 'catalog' && p.unit === 'items').at(-1)?.total).toBe(0);
    await shopper(s.a);
    expect((await s.a.memories()).every((m) => m.embedding.embedderId === 'hashing-256@1')).toBe(true);
    expect(s.errors).toEqual([]);
  });

  it('a corrupt v2 file is an error event and the engine runs in the content space, embedding here', async () => {
    const bytes = new Uint8Array(await (await fetch(SHOP_FILE)).arrayBuffer());
    bytes[bytes.length - 100] ^= 0xff;
    const bad = URL.createObjectURL(new Blob([bytes as BlobPart]));
    urls.push(bad);
    const s = await start('corrupt', bad);
    await expect.poll(() => s.errors.length).toBeGreaterThan(0);
    expect(s.errors[0]).toMatchObject({ name: 'CatalogVectorsError' });
    expect(s.errors[0].message).toMatch(/checksum of section "sasrec.items"|checksum of section "sasrec"/);
    expect((await s.a.status()).catalog).toMatchObject({ shop: null });
    await expect.poll(() => s.progress.filter((p) => p.stage === 'catalog' && p.unit === 'items').at(-1)?.total).toBe(items.length);
    await shopper(s.a);
    const spaces = (await s.a.memories()).map((m) => m.embedding.embedderId);
    expect(spaces.length).toBeGreaterThan(0);
    expect(spaces.every((id) => id === 'hashing-256@1')).toBe(true);
  });
});

// The same shop published as format v3 (a head and four shards of two items), made from the v2
// file by the repository's command (test/fixtures/shop-file/README.md).
const V3_FILE = '/test/fixtures/shop-file/catalog-v3.bin';
const V3_URL = new URL(V3_FILE, location.href).href;

describe('the catalog vector file as a head and shards (v3)', () => {
  it("fetches the head and only the shards of the page's items, embeds nothing, and ranks as the v2 file does", async () => {
    const head = decodeCatalogHead(new Uint8Array(await (await fetch(V3_FILE)).arrayBuffer()));
    expect(head.header.shards).toHaveLength(4);
    const network = await watchNetwork();
    const page = items.filter((it) => ['p-wok', 'p-skillet', 'p-trail', 'p-road', 'p-saucepan'].includes(it.id));
    const want = shardsFor(
      head,
      page.map((it) => it.id),
    );
    expect(want.length).toBeLessThan(4); // the page does not need every shard
    const s = await startWith('v3', page, V3_FILE);
    const st = await s.a.status();
    expect(st.catalog).toMatchObject({ url: V3_URL, version: 3, source: 'download', shop: { id: `v3-${head.id}`, items: 8, sequence: 'sasrec' } });
    await expect.poll(() => s.progress.filter((p) => p.stage === 'catalog' && p.unit === 'items').at(-1)?.total).toBe(0); // nothing embedded here
    const shardUrls = (): string[] => network.urls().filter((u) => u.includes('catalog-v3.bin.shards/'));
    await expect.poll(() => shardUrls().length).toBe(want.length);
    expect(new Set(shardUrls())).toEqual(new Set(want.map((k) => new URL(head.header.shards[k].name, V3_URL).href)));
    expect(network.urls().filter((u) => u === V3_URL)).toHaveLength(1);

    // the v2 file of the same model on the same page ranks alike (int8 rows, same lists)
    const v2 = await startWith('v2', page, SHOP_FILE);
    for (const x of [s, v2]) await shopper(x.a);
    const cands = ['p-trail', 'p-road', 'p-saucepan'];
    const r3 = (await s.a.recommend(cands)).map((r) => r.id);
    const r2 = (await v2.a.recommend(cands)).map((r) => r.id);
    expect(new Set(r3.slice(0, 2))).toEqual(new Set(['p-trail', 'p-road']));
    expect(r3).toEqual(r2);
    expect((await s.a.memories()).map((m) => m.embedding.embedderId)).toEqual([`shop:v3-${head.id}`, `shop:v3-${head.id}`]);
    expect(s.errors).toEqual([]);
  });

  it("a returning shopper revalidates the head (304) and fetches no shard; a page with a new item fetches only that item's shard", async () => {
    const page = items.filter((it) => ['p-wok', 'p-skillet'].includes(it.id));
    const first = await startWith('v3again', page, V3_FILE);
    await shopper(first.a);
    const want = (await first.a.recommend(['p-wok', 'p-skillet'])).map((r) => r.id);
    first.a.dispose();
    const head = decodeCatalogHead(new Uint8Array(await (await fetch(V3_FILE)).arrayBuffer()));
    const network = await watchNetwork();
    const again = await startWith('v3again', page, V3_FILE, first.profile);
    expect((await again.a.status()).catalog).toMatchObject({ version: 3, source: 'revalidated', shop: { id: `v3-${head.id}` } });
    await expect.poll(() => network.urls().filter((u) => u === V3_URL).length).toBe(1);
    expect((await again.a.recommend(['p-wok', 'p-skillet'])).map((r) => r.id)).toEqual(want);
    expect(network.urls().filter((u) => u.includes('.shards/'))).toEqual([]);
    again.a.dispose();
    // another page of the shop (another profile, same origin cache): only the shards not cached yet
    const other = ['p-wok', 'p-road'];
    const newShards = shardsFor(head, other).filter(
      (k) =>
        !shardsFor(
          head,
          page.map((it) => it.id),
        ).includes(k),
    );
    expect(newShards).toHaveLength(1); // p-road's shard is not one of the first page's (the fixture's ids hash apart)
    const third = await startWith(
      'v3other',
      items.filter((it) => other.includes(it.id)),
      V3_FILE,
    );
    expect((await third.a.status()).catalog).toMatchObject({ version: 3, shop: { id: `v3-${head.id}` } });
    await expect.poll(() => network.urls().filter((u) => u.includes('.shards/')).length).toBe(newShards.length);
    expect(third.errors).toEqual([]);
  });

  it("on a later page only the new page's shards are requested; the earlier products' shards are never requested, even when no longer cached", async () => {
    const head = decodeCatalogHead(new Uint8Array(await (await fetch(V3_FILE)).arrayBuffer()));
    const firstPage = items.filter((it) => ['p-wok', 'p-skillet'].includes(it.id));
    const first = await startWith('v3history', firstPage, V3_FILE);
    await shopper(first.a);
    first.a.dispose();
    const secondIds = ['p-trail', 'p-road', 'p-saucepan'];
    const network = await watchNetwork();
    const second = await startWith(
      'v3history',
      items.filter((it) => secondIds.includes(it.id)),
      V3_FILE,
      first.profile,
    );
    const got = await second.a.recommend(secondIds);
    expect(new Set(got.slice(0, 2).map((r) => r.id))).toEqual(new Set(['p-trail', 'p-road']));
    const cachedBefore = new Set(
      shardsFor(
        head,
        firstPage.map((it) => it.id),
      ),
    );
    const expected = shardsFor(head, secondIds)
      .filter((k) => !cachedBefore.has(k))
      .map((k) => new URL(head.header.shards[k].name, V3_URL).href);
    await expect.poll(() => network.urls().filter((u) => u.includes('.shards/')).length).toBe(expected.length);
    // why after the poll: the network log can trail the worker's fetches on a loaded machine
    const requested = new Set(network.urls().filter((u) => u.includes('.shards/')));
    expect(requested).toEqual(new Set(expected));
    expect(second.errors).toEqual([]);
    second.a.dispose();
    // without the cached shards of the earlier products (e.g. the origin's cache was cleared) they
    // are not requested: a request depends on the page's products only
    const historyOnly = cachedBefore.size
      ? [...cachedBefore].filter((k) => !shardsFor(head, secondIds).includes(k)).map((k) => new URL(head.header.shards[k].name, V3_URL).href)
      : [];
    expect(historyOnly.length).toBeGreaterThan(0);
    await new Promise<void>((resolve, reject) => {
      const req = indexedDB.open(FILE_CACHE_DB);
      req.onerror = () => reject(req.error);
      req.onsuccess = () => {
        const tx = req.result.transaction('shards', 'readwrite');
        for (const u of historyOnly) tx.objectStore('shards').delete(u);
        tx.oncomplete = () => (req.result.close(), resolve());
        tx.onerror = () => reject(tx.error);
      };
    });
    const before = network.urls().length;
    const third = await startWith(
      'v3history',
      items.filter((it) => secondIds.includes(it.id)),
      V3_FILE,
      first.profile,
    );
    const without = await third.a.recommend(secondIds);
    expect(without.map((r) => r.id).sort()).toEqual([...secondIds].sort());
    expect(
      network
        .urls()
        .slice(before)
        .filter((u) => historyOnly.includes(u)),
    ).toEqual([]);
    expect(third.errors).toEqual([]);
  });

  it('a head whose shards cannot be fetched is an error event; the items are embedded here, in the content space', async () => {
    const head = new Uint8Array(await (await fetch(V3_FILE)).arrayBuffer());
    // a blob: head: its relative shard names resolve against nothing
    const url = URL.createObjectURL(new Blob([head as BlobPart]));
    urls.push(url);
    const s = await startWith('v3blob', items.slice(0, 3), url);
    await expect.poll(() => s.errors.length).toBeGreaterThan(0);
    expect(s.errors[0]).toMatchObject({ name: 'CatalogVectorsError' });
    expect(s.errors[0].message).toMatch(/shards cannot be found relative to it/);
    await expect.poll(() => s.progress.filter((p) => p.stage === 'catalog' && p.unit === 'items').at(-1)?.total).toBe(3);
    expect((await s.a.status()).catalog).toMatchObject({ shop: null });
  });
});
