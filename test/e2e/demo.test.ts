/**
 * End to end: the demo shop (apps/demo/server.ts: index service + built page + built library on one
 * origin) in headless Debian Chromium driven by playwright. Needs `npm run build` (dist/) first;
 * builds the demo page (demo/dist/) itself when it is missing. Writes shop.png and
 * inspector.png into test-results/screenshots/ (`ATOMEM_SCREENSHOTS=docs/screenshots`: the README's).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDemoPage, idle, launchChromium, SCREENSHOTS as SHOTS, startDemo, type Demo } from './demo-server.js';

const DEPT = 'Kitchen';

let demo: Demo | undefined;
let base = '';
/** Every request line the server logged (`METHOD /path`), in order: what went over the wire. */
const wire: string[] = [];
let browser: Browser;
let context: BrowserContext;
let page: Page;
/** Requests the browser made to anything but the demo origin. */
const offsite: string[] = [];
const seen: string[] = [];
let seeded: number | null = null;

async function health(): Promise<{ latestRelease: number | null; epoch: number }> {
  return (await (await fetch(`${base}/v2/health`)).json()) as { latestRelease: number | null; epoch: number };
}

/** Departments of the "For you" shelf, best first. */
async function shelfDepartments(): Promise<string[]> {
  return page.locator('#shelf .card').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.dept ?? ''));
}

/** Fences sent so far (each a unique path). */
let fences = 0;

/**
 * Wait until the page has nothing pending, then until the server has logged every request it
 * got before now: a request of this test's own to a unique path must show in `wire` (the server
 * logs on its stderr, which can arrive after the response).
 */
async function quiet(): Promise<void> {
  await idle(page);
  const path = `/e2e-fence-${++fences}`;
  await fetch(`${base}${path}`);
  await expect.poll(() => wire.includes(`GET ${path}`)).toBe(true);
}

async function clickProduct(id: string, action: 'click' | 'cart' | 'purchase' = 'click'): Promise<void> {
  await page.locator(`#grid [data-id="${id}"] button[data-action="${action}"]`).click();
}

beforeAll(async () => {
  buildDemoPage();
  // 10-second epochs: the device fetches its token an epoch ahead and reports in the next epoch
  demo = await startDemo({ DEMO_SHOPPERS: '60', DEMO_LOG_REQUESTS: '1', DEMO_EPOCH_MS: '10000' }, (chunk) => {
    for (const m of chunk.matchAll(/^request (\S+ \S+(?: cookie)?)$/gm)) wire.push(m[1]);
  });
  base = demo.base;
  expect(demo.stderr()).toContain(`data folder ${demo.dataDir}`);
  seeded = (await health()).latestRelease;
  browser = await launchChromium();
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  context.on('request', (r) => {
    const url = r.url();
    seen.push(url);
    if (!url.startsWith(`${base}/`) && !url.startsWith('data:') && !url.startsWith('blob:')) offsite.push(url);
  });
  page = await context.newPage();
  mkdirSync(SHOTS, { recursive: true });
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await demo?.stop();
});

describe('the demo shop in headless Chromium', () => {
  it('starts with a seeded population and loads the page with no request leaving localhost', async () => {
    // the release of the previous epoch, from the simulated shoppers' reports
    // (10-second epochs: the seeded release is of an epoch shortly before this one)
    expect(seeded).not.toBeNull();
    expect(seeded!).toBeLessThan((await health()).epoch);
    const logged = wire.filter((w) => w.startsWith('GET /v2/releases/latest')).length;
    const release = (await (await fetch(`${base}/v2/releases/latest`)).json()) as { communities: unknown[]; reports: number };
    // why: the server logs a request on its stdout, which can arrive after the response; this
    // test's own GET must be on the wire before the page's requests are counted
    await expect.poll(() => wire.filter((w) => w.startsWith('GET /v2/releases/latest')).length).toBe(logged + 1);
    expect(release.reports).toBe(60);
    expect(release.communities.length).toBeGreaterThan(0);
    const loaded = wire.length; // the page's own requests from here on
    await page.goto(`${base}/`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
    await expect.poll(() => page.locator('#shelf .card').count()).toBe(8);
    expect(await page.locator('#grid .card').count()).toBeGreaterThanOrEqual(300);
    await expect.poll(() => page.locator('#status').innerText()).toMatch(/use-lite on WASM/);
    expect(await page.locator('#status').innerText()).toMatch(/rules/);
    // the page's build (atomem + atomem/vite, like a shop's): atomem's worker and its chunks came from the demo origin
    expect(seen.some((u) => new RegExp(`^${base}/assets/atomem-[0-9a-f]+/worker/worker\\.js$`).test(u))).toBe(true);
    expect(seen.some((u) => new RegExp(`^${base}/assets/atomem-[0-9a-f]+/worker/engine-[\\w-]+\\.js$`).test(u))).toBe(true);
    // the server embedded the catalog at start: this first visit fetched its vectors, embedded no
    // product, and so never fetched USE-lite (code, wasm or weights)
    expect(seen).toContain(`${base}/catalog-vectors.bin`);
    expect(seen.filter((u) => u.includes('/use-lite/') || u.includes('/tfjs-wasm/'))).toEqual([]);
    expect(await page.locator('#status').innerText()).toMatch(/not loaded/);
    const status = await page.locator('#status').innerText();
    expect(status).toMatch(/catalog ready/);
    expect(status).not.toMatch(/catalog ready \d+\/\d+ items/);
    // the file is v2: the shop model learned from the demo's made-up order log ranks on the device
    expect(status).toMatch(/the shop's model \(catalog vector file v2, 300 products \+ sasrec; download\)/);
    expect(offsite).toEqual([]);
    // sharing is off until the shopper turns it on: nothing goes to the index, no report, no token
    expect(await page.locator('#privacy').inputValue()).toBe('off');
    await quiet();
    expect(wire.slice(loaded).filter((w) => w.includes('/v2/') || w.includes('/shop/atomem-token'))).toEqual([]);
  }, 180_000);

  it(`clicking items of one department (${DEPT}) moves it up the "For you" shelf, with explanations`, async () => {
    const before = await shelfDepartments();
    const share = (d: string[]) => d.filter((x) => x === DEPT).length;
    // the shopper turns sharing on (the rest of this file checks what it sends)
    await page.selectOption('#privacy', 'contribute');
    await expect.poll(() => page.locator('#notice').innerText(), { timeout: 30_000 }).toMatch(/Contributing/);
    await page.locator('#departments button[data-dept="Kitchen"]').click();
    const ids = ['kitchen-001', 'kitchen-002', 'kitchen-003', 'kitchen-004', 'kitchen-005'];
    for (const id of ids) await clickProduct(id);
    await clickProduct('kitchen-006', 'cart');
    await expect.poll(async () => share(await shelfDepartments()), { timeout: 30_000 }).toBeGreaterThan(Math.max(share(before), 3));
    await idle(page);
    const after = await shelfDepartments();
    expect(after[0]).toBe(DEPT);
    expect(share(after)).toBeGreaterThan(share(before));
    expect(await page.locator('#shelf .why li').count()).toBeGreaterThan(0);
    await page.locator('#for-you').scrollIntoViewIfNeeded();
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: join(SHOTS, 'shop.png') });
  }, 120_000);

  it('the inspector shows a new memory with the clicked items linked, events, profile, status and the payload', async () => {
    const titles = await page
      .locator('#grid .card')
      .evaluateAll((els) =>
        els
          .filter((e) =>
            ['kitchen-001', 'kitchen-002', 'kitchen-003', 'kitchen-004', 'kitchen-005', 'kitchen-006'].includes((e as HTMLElement).dataset.id ?? ''),
          )
          .map((e) => e.querySelector('h4')!.textContent!.trim()),
      );
    expect(titles).toHaveLength(6);
    await expect.poll(() => page.locator('#memories .memory').count()).toBeGreaterThan(0);
    const text = await page.locator('#memories').innerText();
    expect(text).toMatch(/Kitchen/);
    expect(titles.filter((t) => text.includes(t)).length).toBeGreaterThanOrEqual(3);
    expect(await page.locator('#events li').count()).toBeGreaterThan(0);
    expect(await page.locator('#events').innerText()).toMatch(/formed/);
    // syncEvery 3: the page fetched the public release (a plain GET) and matched it locally
    await expect.poll(() => wire.filter((w) => w.startsWith('GET /v2/releases/latest')).length, { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(() => page.locator('#memories .community').count(), { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(() => page.locator('#communities svg line').count(), { timeout: 10_000 }).toBeGreaterThan(0);
    // contribute: a token from the shop's attester for the next epoch, then one report in that epoch
    await expect.poll(() => wire.filter((w) => w.startsWith('POST /v2/reports')).length, { timeout: 45_000 }).toBeGreaterThanOrEqual(1);
    const tokenAt = wire.findIndex((w) => w.startsWith('POST /shop/atomem-token'));
    expect(tokenAt).toBeGreaterThanOrEqual(0);
    expect(tokenAt).toBeLessThan(wire.findIndex((w) => w.startsWith('POST /v2/reports')));
    await expect.poll(() => page.locator('#payload').innerText(), { timeout: 15_000 }).toMatch(/\/v2\/reports/);
    const payload = await page.locator('#payload').innerText();
    expect(payload).not.toMatch(/Kitchen|kitchen-0/); // a randomized (cohort, bucket): no text, no item ids
    expect(payload).toMatch(/"cohort"/);
    // the shop's cookie exists on this origin, but no request to the index carries it
    expect((await context.cookies()).map((c) => c.name)).toContain('demo_shopper');
    expect(wire.filter((w) => w.includes('/v2/') && w.endsWith(' cookie'))).toEqual([]);
    // more actions: no extra release fetch or report (at most one of each per epoch)
    const epochBefore = (await health()).epoch;
    const releasesBefore = wire.filter((w) => w.startsWith('GET /v2/releases/latest')).length;
    const reportsBefore = wire.filter((w) => w.startsWith('POST /v2/reports')).length;
    await clickProduct('kitchen-001', 'purchase');
    await clickProduct('kitchen-002', 'purchase');
    await clickProduct('kitchen-003', 'cart');
    await quiet();
    const epochsPassed = (await health()).epoch - epochBefore;
    expect(wire.filter((w) => w.startsWith('POST /v2/reports')).length - reportsBefore).toBeLessThanOrEqual(epochsPassed + 1);
    expect(wire.filter((w) => w.startsWith('GET /v2/releases/latest')).length - releasesBefore).toBeLessThanOrEqual(epochsPassed + 1);
    await idle(page);
    // the whole inspector, not just its scrolled viewport
    await page.evaluate(() => {
      const el = document.getElementById('inspector')!;
      el.style.position = 'static';
      el.style.maxHeight = 'none';
    });
    await page.locator('#inspector').screenshot({ path: join(SHOTS, 'inspector.png') });
    await page.evaluate(() => document.getElementById('inspector')!.removeAttribute('style'));
  }, 120_000);

  it('switching privacy to off stops every request to the index (on the wire)', async () => {
    await page.selectOption('#privacy', 'off');
    await expect.poll(() => page.locator('#notice').innerText(), { timeout: 30_000 }).toMatch(/Sharing is off/);
    await expect.poll(() => page.locator('#memories .community').count(), { timeout: 30_000 }).toBe(0);
    const mark = wire.length;
    for (const id of ['kitchen-007', 'kitchen-008', 'kitchen-009', 'kitchen-010']) await clickProduct(id, 'cart');
    await clickProduct('kitchen-011', 'purchase');
    await clickProduct('kitchen-012');
    await quiet();
    expect(wire.slice(mark).filter((w) => w.includes('/v2/'))).toEqual([]);
    expect(offsite).toEqual([]);
  }, 120_000);

  it('a reload keeps the memory (IndexedDB) and the privacy choice', async () => {
    await page.selectOption('#privacy', 'receive');
    await expect.poll(() => page.locator('#memories .community').count(), { timeout: 30_000 }).toBeGreaterThan(0);
    await idle(page);
    const statements = async () => page.locator('#memories .statement').allInnerTexts();
    const before = await statements();
    expect(before.length).toBeGreaterThan(0);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
    await expect.poll(statements, { timeout: 30_000 }).toEqual(before);
    expect(await page.locator('#privacy').inputValue()).toBe('receive');
    // receive sends nothing
    expect(wire.filter((w) => w.startsWith('POST /v2/reports')).length).toBe(1);
  }, 180_000);

  it('"What are you shopping for?" re-ranks the shelf live with memory + intent; the inspector shows what it selected; the words stay in the tab', async () => {
    const box = page.getByRole('searchbox', { name: 'What are you shopping for?' });
    const explanations = () => page.locator('#shelf .why').allInnerTexts();
    const mark = seen.length;
    // an intent far from this Kitchen shopper's memory: the shelf follows the words
    await box.fill('a tent and hiking boots for the mountains');
    await expect.poll(async () => (await shelfDepartments()).slice(0, 3), { timeout: 60_000 }).toEqual(['Outdoor', 'Outdoor', 'Outdoor']);
    expect(await page.locator('#shelf').getAttribute('data-intent')).toBe('on');
    expect((await explanations()).join('\n')).toContain('Matches what you asked for: “a tent and hiking boots for the mountains”.');
    await expect.poll(() => page.locator('#intent-summary').innerText(), { timeout: 30_000 }).toMatch(/a tent and hiking boots/);
    // an intent that meets the memory: it selects the Kitchen memories and says how they met
    await box.fill('a new frying pan for cooking');
    await expect.poll(async () => (await shelfDepartments())[0], { timeout: 60_000 }).toBe('Kitchen');
    await expect.poll(() => page.locator('#intent-memories .memory').count(), { timeout: 30_000 }).toBeGreaterThan(0);
    expect(await page.locator('#intent-memories').innerText()).toMatch(/Kitchen/);
    expect(await page.locator('#memories .memory[data-intent-selected="true"]').count()).toBeGreaterThan(0);
    await expect
      .poll(async () => (await explanations()).join('\n'), { timeout: 30_000 })
      .toMatch(/You asked for “a new frying pan for cooking”; you (looked at|added|bought) /);
    await page.locator('#inspector').screenshot({ path: join(SHOTS, 'intent-inspector.png') });
    // cleared: memory alone again
    await page.getByRole('button', { name: 'Clear' }).click();
    await expect.poll(() => page.locator('#shelf').getAttribute('data-intent'), { timeout: 30_000 }).toBe('off');
    expect((await explanations()).join('\n')).not.toContain('asked for');
    // why: the inspector's intent panel re-renders after the shelf's data-intent flips, not with it
    await expect.poll(() => page.locator('#intent-memories .memory').count(), { timeout: 30_000 }).toBe(0);
    // never stored (localStorage, IndexedDB), never in a request
    const stored = await page.evaluate(async () => {
      const out: string[] = [JSON.stringify({ ...localStorage })];
      for (const info of await indexedDB.databases()) {
        const db = await new Promise<IDBDatabase>((res, rej) => {
          const r = indexedDB.open(info.name!);
          r.onsuccess = () => res(r.result);
          r.onerror = () => rej(r.error);
        });
        for (const name of Array.from(db.objectStoreNames)) {
          const rows = await new Promise<unknown[]>((res, rej) => {
            const r = db.transaction(name).objectStore(name).getAll();
            r.onsuccess = () => res(r.result);
            r.onerror = () => rej(r.error);
          });
          out.push(JSON.stringify(rows, (_k, v) => (ArrayBuffer.isView(v) ? [] : v)));
        }
        db.close();
      }
      return out.join('\n');
    });
    expect(stored.length).toBeGreaterThan(100);
    expect(stored).not.toMatch(/frying pan for cooking|hiking boots for the mountains/);
    expect(seen.slice(mark).filter((u) => /frying pan for|boots for the mountains/i.test(decodeURIComponent(u.replace(/\+/g, ' '))))).toEqual([]);
    expect(offsite).toEqual([]);
  }, 180_000);

  it('forget me asks first, then empties the memory here (the index holds nothing tied to this shopper)', async () => {
    const before = await page.locator('#memories .memory').count();
    expect(before).toBeGreaterThan(0);
    await page.locator('#forget-me').click();
    await expect.poll(() => page.locator('#forget-me-confirm').isVisible()).toBe(true);
    await page.locator('#forget-me-no').click();
    await idle(page);
    expect(await page.locator('#memories .memory').count()).toBe(before); // cancelled: nothing erased
    await page.locator('#forget-me').click();
    await page.locator('#forget-me-yes').click();
    await expect.poll(() => page.locator('#memories').innerText(), { timeout: 30_000 }).toMatch(/No memories yet/);
    await page.reload();
    await page.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
    await expect.poll(() => page.locator('#memories').innerText(), { timeout: 30_000 }).toMatch(/No memories yet/);
    expect(offsite).toEqual([]);
  }, 180_000);

  it('works on a narrow phone screen (one column, no horizontal scroll)', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 375, height: 800 });
    await phone.goto(`${base}/`);
    await phone.waitForSelector('body[data-ready="true"]', { timeout: 120_000 });
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    await phone.close();
  }, 120_000);
});
