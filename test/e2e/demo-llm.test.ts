/**
 * End to end: the demo shop with a language model configured by the server's environment
 * (apps/demo/server.ts → `GET /demo-config.json` → `createAtomem({ llm })`), in headless Debian
 * Chromium driven by playwright. The inspector's "Language model" section must show every model
 * call, the cost per operation and every fallback to rules with its reason.
 *
 * 1. A scripted OpenAI-compatible server (node:http on 127.0.0.1, port 0, CORS for the page's
 *    origin) answers each chat completion with JSON that satisfies the request's schema, except
 *    the profile synthesis, which gets markup that is not JSON: that operation falls back to
 *    rules, visibly (and the markup must stay text). Writes inspector-llm.png (see SCREENSHOTS).
 *    A rerank request (`rerank@2`) gets the candidates' labels in reverse order, each with the
 *    reason `Model pick <label>`: the shelf's rerank toggle must show that order and mark those
 *    reasons as the model's, and stop calling the model once unchecked.
 * 2. If the toy GGUF `../shared/models/stories260K/stories260K.gguf` exists: the server streams
 *    it at `/models/stories260K.gguf` and the page runs it with wllama (WASM); quality is not
 *    judged, only that the model is active and its calls (or fallbacks) reach the inspector.
 *
 * Needs `npm run build` (dist/) first; builds demo/dist/ itself when it is missing.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Page } from 'playwright';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { minimalValue } from '../../packages/atomem/src/models/scripted.js';
import { buildDemoPage, idle, launchChromium, SCREENSHOTS as SHOTS, startDemo, type Demo } from './demo-server.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GGUF = resolve(ROOT, '..', 'shared', 'models', 'stories260K', 'stories260K.gguf');
const MODEL_NAME = 'scripted-test';
const API_KEY = 'test-key-not-secret';
/** The profile synthesis gets this instead of JSON: markup, to prove model text never becomes DOM. */
const GARBAGE = '<b data-injected="1">Sure!</b> The shopper loves cooking.';
const KITCHEN = ['kitchen-001', 'kitchen-002', 'kitchen-003', 'kitchen-004', 'kitchen-005', 'kitchen-006', 'kitchen-007', 'kitchen-008'];
const BOOKS = ['books-001', 'books-002', 'books-003', 'books-004', 'books-005', 'books-006'];

let browser: Browser;

/** Hosts the page may talk to: the demo origin and the local model server, nothing else. */
function isLocal(url: string): boolean {
  if (url.startsWith('data:') || url.startsWith('blob:')) return true;
  try {
    const host = new URL(url).hostname;
    return host === '127.0.0.1' || host === 'localhost';
  } catch {
    return false;
  }
}

/** A fresh browser context (its own IndexedDB and OPFS) that records every request URL. */
async function newContext(width = 1280): Promise<{ context: BrowserContext; page: Page; seen: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  const seen: string[] = [];
  context.on('request', (r) => seen.push(r.url()));
  return { context, page: await context.newPage(), seen };
}

async function clickAll(page: Page, ids: string[], action: 'click' | 'cart' | 'purchase' = 'click'): Promise<void> {
  for (const id of ids) await page.locator(`#grid [data-id="${id}"] button[data-action="${action}"]`).click();
}

/** The cost table's cell `column` (0 = first number column) of the row of `operation` (or the total). */
async function costCell(page: Page, operation: string | 'total', column: number): Promise<string> {
  const row = operation === 'total' ? page.locator('#llm-costs tfoot tr') : page.locator(`#llm-costs tbody tr[data-operation="${operation}"]`);
  return (await row.locator('td').nth(column).innerText()).trim();
}
const COL = { requests: 0, byLlm: 1, calls: 2, repairs: 3, toRules: 4, tokens: 5, ms: 6 } as const;
/** The first number of a cell (`1,234`, `530/15` → 530, `2\ninvalid 2` → 2). */
const num = (s: string): number => Number(/\d[\d,]*/.exec(s)?.[0].replace(/,/g, '') ?? 'NaN');

beforeAll(async () => {
  buildDemoPage();
  browser = await launchChromium();
  mkdirSync(SHOTS, { recursive: true });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('the demo with an OpenAI-compatible model server (scripted)', () => {
  let model: Server;
  let modelUrl = '';
  let demo: Demo;
  let context: BrowserContext;
  let page: Page;
  let seen: string[] = [];
  /** What the model server received: one entry per chat completion. */
  const calls: { operation: 'profile' | 'reflect' | 'plan' | 'rerank' | 'other'; model: string; auth: string | undefined; garbage: boolean }[] = [];
  let preflights = 0;

  /** Answer a chat completion: schema-valid JSON, a sensible `reflect` and `planLifecycle`, the reverse order for `rerank`, garbage for the profile. */
  function answer(
    body: { model: string; messages: { role: string; content: string }[]; response_format?: { json_schema?: { schema?: Record<string, unknown> } } },
    headers: IncomingHttpHeaders,
  ): string {
    const schema = (body.response_format?.json_schema?.schema ?? {}) as { properties?: Record<string, unknown> };
    const props = Object.keys(schema.properties ?? {});
    const user = body.messages.find((m) => m.role === 'user')?.content ?? '';
    const rerank = props.includes('ranking') || user.startsWith('Task: order the candidates');
    const operation = props.includes('narrative')
      ? 'profile'
      : props.includes('decision')
        ? 'reflect'
        : props.includes('resynthesize')
          ? 'plan'
          : rerank
            ? 'rerank'
            : 'other';
    calls.push({ operation, model: body.model, auth: headers.authorization, garbage: operation === 'profile' });
    if (operation === 'profile') return GARBAGE;
    const data = JSON.parse(/<data>\n([\s\S]*)\n<\/data>/.exec(user)?.[1] ?? '{}') as {
      tau?: number;
      supporting?: { label: string; similarity: number }[];
      synthesisSuggested?: boolean;
      candidates?: { label: string }[];
    };
    if (operation === 'reflect') {
      // consolidate into the first supporting memory at least tau away, else form a new one
      const fit = (data.supporting ?? []).find((s) => s.similarity >= (data.tau ?? 1));
      return JSON.stringify({
        decision: fit ? 'consolidate' : 'form',
        target: fit?.label ?? '',
        misled: [],
        insight: fit ? 'The item fits an existing interest.' : 'A new interest.',
      });
    }
    if (operation === 'plan') {
      // no merges or forgets; rewrite the profile when the engine suggests it (that request then gets garbage)
      return JSON.stringify({ merge: [], forget: [], resynthesize: data.synthesisSuggested === true, reason: 'Upkeep as suggested.' });
    }
    if (operation === 'rerank') {
      // a valid permutation: every candidate label of the data once, in reverse (the engine's last first)
      const labels = (data.candidates ?? []).map((c) => c.label).reverse();
      return JSON.stringify({ ranking: labels.map((label) => ({ item: label, why: `Model pick ${label}` })) });
    }
    return JSON.stringify(minimalValue(schema, () => 'Likes kitchen tools like these'));
  }
  const rerankCalls = (): number => calls.filter((c) => c.operation === 'rerank').length;

  beforeAll(async () => {
    model = createServer((req, res) => {
      const cors = {
        'access-control-allow-origin': '*',
        'access-control-allow-methods': 'POST, OPTIONS',
        'access-control-allow-headers': 'content-type, authorization',
        'access-control-max-age': '600',
      };
      if (req.method === 'OPTIONS') {
        preflights++;
        res.writeHead(204, cors).end();
        return;
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404, { ...cors, 'content-type': 'text/plain' }).end('not found');
        return;
      }
      let raw = '';
      req.setEncoding('utf8').on('data', (c: string) => (raw += c));
      req.on('end', () => {
        const body = JSON.parse(raw);
        const content = answer(body, req.headers);
        const promptChars = (body.messages as { content: string }[]).reduce((n, m) => n + m.content.length, 0);
        res.writeHead(200, { ...cors, 'content-type': 'application/json' }).end(
          JSON.stringify({
            choices: [{ message: { role: 'assistant', content } }],
            usage: { prompt_tokens: Math.ceil(promptChars / 4), completion_tokens: Math.ceil(content.length / 4) },
          }),
        );
      });
    });
    await new Promise<void>((r) => model.listen(0, '127.0.0.1', r));
    modelUrl = `http://127.0.0.1:${(model.address() as AddressInfo).port}/v1`;
    demo = await startDemo({ ATOMEM_OPENAI_URL: modelUrl, ATOMEM_OPENAI_MODEL: MODEL_NAME, ATOMEM_OPENAI_KEY: API_KEY, ATOMEM_LLM_BUDGET: '60/20' });
    ({ context, page, seen } = await newContext());
    // why 180 s: a fresh data folder's first start also trains the shop model on the demo's order log
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    await demo?.stop();
    await new Promise((r) => model?.close(r));
  });

  it('the server announces the model and hands it to the page at /demo-config.json', async () => {
    expect(demo.stderr()).toContain(`language model: OpenAI-compatible ${MODEL_NAME} at ${modelUrl}`);
    expect(demo.stderr()).toContain('60 calls per 20 events');
    expect(demo.stderr()).not.toContain(API_KEY);
    const config = await (await fetch(`${demo.base}/demo-config.json`)).json();
    expect(config).toEqual({
      llm: { openai: { baseUrl: modelUrl, model: MODEL_NAME, apiKey: API_KEY }, budget: { maxCalls: 60, perEvents: 20 } },
      catalogVectors: '/catalog-vectors.bin',
    });
    expect((await fetch(`${demo.base}/models/anything.gguf`)).status).toBe(404); // no GGUF configured
  });

  it('the inspector shows the model active, its calls and costs, and a fallback to rules with its reason', async () => {
    await page.goto(`${demo.base}/`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    // the model "loads" in the background; the status says which one runs the memory operations
    await expect.poll(() => page.locator('#llm').getAttribute('data-active'), { timeout: 20_000 }).toBe('true');
    expect(await page.locator('#llm').getAttribute('data-mode')).toBe('remote');
    expect(await page.locator('#status').innerText()).toContain(`remote: openai:${MODEL_NAME}`);
    expect(await page.locator('#llm-summary').innerText()).toContain(`openai:${MODEL_NAME}`);
    expect(await page.locator('#llm-details').isVisible()).toBe(true);

    await page.locator('#departments button[data-dept="Kitchen"]').click();
    await clickAll(page, KITCHEN.slice(0, 5));
    await clickAll(page, KITCHEN.slice(5, 6), 'cart');
    await page.locator('#departments button[data-dept="Books"]').click();
    await clickAll(page, BOOKS.slice(0, 4));

    // successful model calls (memory processing may wait for a pause, hence the polls)
    const okRows = page.locator('#llm-feed li.llm-event.call.ok');
    await expect.poll(() => okRows.count(), { timeout: 30_000 }).toBeGreaterThan(0);
    expect(await okRows.first().innerText()).toMatch(/✓ LLM .*@\d+ · (first attempt|repair \d+) · \d+ → \d+ tokens · \d+ ms/);
    // the profile synthesis got garbage: a failed call, a repair, then a fallback to rules with its reason
    const fallbackRows = page.locator('#llm-feed li.llm-event.fallback[data-operation="synthesizeProfile"]');
    if ((await fallbackRows.count()) === 0) {
      // more actions: the profile is resynthesised after a few prediction errors or events
      await page.locator('#departments button[data-dept="Kitchen"]').click();
      await clickAll(page, KITCHEN.slice(6));
      await page.locator('#departments button[data-dept="Books"]').click();
      await clickAll(page, BOOKS.slice(4));
    }
    await expect.poll(() => fallbackRows.count(), { timeout: 30_000 }).toBeGreaterThan(0);
    const fallback = fallbackRows.first();
    expect(await fallback.getAttribute('data-reason')).toBe('invalid');
    expect(await fallback.innerText()).toMatch(/↩ rules .*profile synthesizeProfile@\d+ fell back to rules: invalid answer — .*not valid JSON/);
    const failed = page.locator('#llm-feed li.llm-event.call.failed[data-operation="synthesizeProfile"]');
    expect(await failed.count()).toBeGreaterThanOrEqual(2); // first attempt + one repair
    expect(await page.locator('#llm-feed').innerText()).toMatch(/repair 1/);
    expect(calls.some((c) => c.garbage)).toBe(true);
    // model text stays text: the markup in the answer never became an element
    expect(await page.locator('[data-injected]').count()).toBe(0);

    // the cost table (refreshed shortly after the events): calls, tokens, the fallback by reason
    await expect.poll(async () => num(await costCell(page, 'total', COL.calls)), { timeout: 10_000 }).toBeGreaterThan(0);
    await expect.poll(async () => await costCell(page, 'synthesizeProfile', COL.toRules), { timeout: 10_000 }).toMatch(/^[1-9]\d*\s+invalid [1-9]\d*$/);
    expect(num(await costCell(page, 'synthesizeProfile', COL.repairs))).toBeGreaterThan(0);
    expect(num(await costCell(page, 'total', COL.byLlm))).toBeGreaterThan(0);
    expect(await costCell(page, 'total', COL.tokens)).toMatch(/^[1-9][\d,]*\/[1-9][\d,]*$/);
    expect(await page.locator('#llm-costs thead th[scope="col"]').count()).toBe(8);
    expect(await page.locator('#llm-costs tbody th[scope="row"]').count()).toBeGreaterThanOrEqual(5);
    expect(await page.locator('#llm-budget').innerText()).toMatch(/Budget: \d+ of 60 model calls used in the current window of 20 events, \d+ left/);
    expect(await page.locator('#llm-feed').getAttribute('aria-live')).toBe('off');
    // the feed is capped
    expect(await page.locator('#llm-feed li').count()).toBeLessThanOrEqual(50);

    // what the model server saw: the configured model name and key, from the page (CORS preflight answered)
    expect(calls.length).toBeGreaterThan(0);
    expect(calls.every((c) => c.model === MODEL_NAME && c.auth === `Bearer ${API_KEY}`)).toBe(true);
    expect(preflights).toBeGreaterThan(0);
    // the page only ever talked to the demo origin and the local model server
    expect(seen.some((u) => u.startsWith(`${modelUrl}/chat/completions`))).toBe(true);
    expect(seen.filter((u) => !isLocal(u))).toEqual([]);

    await idle(page);
    await page.evaluate(() => {
      const el = document.getElementById('inspector')!;
      el.style.position = 'static';
      el.style.maxHeight = 'none';
      document.getElementById('llm')!.scrollIntoView();
    });
    await page.locator('#inspector').screenshot({ path: join(SHOTS, 'inspector-llm.png') });
    await page.evaluate(() => document.getElementById('inspector')!.removeAttribute('style'));
  }, 90_000);

  it('fits a narrow phone screen (the cost table scrolls inside its own box)', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    await expect.poll(() => page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)).toBeLessThanOrEqual(0);
    expect(await page.locator('#llm-costs').isVisible()).toBe(true);
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('lets the model rerank the shelf when the shopper opts in: its order, its marked reasons, its costs; off again when unchecked', async () => {
    // a fresh page (its own worker, so the call budget is not the one the tests above spent)
    const { context: ctx, page: p, seen: urls } = await newContext();
    const shelfIds = () => p.locator('#shelf .card').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.id ?? ''));
    const firstWhy = p.locator('#shelf > li').first().locator('.why li').first();
    const toggle = p.getByRole('checkbox', { name: 'Let the model rerank the shelf (one model call per refresh)' });
    await p.goto(`${demo.base}/`);
    await p.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    await expect.poll(() => p.locator('#llm').getAttribute('data-active'), { timeout: 20_000 }).toBe('true');
    // offered with a model, unchecked by default: the shelf is the engine's, no rerank call
    await expect.poll(() => toggle.isEnabled(), { timeout: 10_000 }).toBe(true);
    expect(await p.locator('#rerank-control').isVisible()).toBe(true);
    expect(await toggle.isChecked()).toBe(false);
    await p.locator('#departments button[data-dept="Kitchen"]').click();
    await clickAll(p, KITCHEN.slice(0, 3));
    await expect.poll(() => p.locator('#shelf .card').count(), { timeout: 10_000 }).toBe(8);
    expect(await p.locator('#shelf').getAttribute('data-rerank')).toBe('off');
    expect(await p.locator('#shelf .why li.model-why').count()).toBe(0);
    expect(rerankCalls()).toBe(0);
    const before = await shelfIds();

    // checked: one rerank call per refresh; the scripted model reverses the engine's top 8
    const callsBefore = rerankCalls();
    await toggle.check();
    await expect.poll(() => firstWhy.innerText(), { timeout: 20_000 }).toMatch(/^model\s+Model pick C8$/);
    expect(rerankCalls()).toBeGreaterThan(callsBefore);
    expect(await p.locator('#shelf').getAttribute('data-rerank')).toBe('model');
    expect(await firstWhy.getAttribute('data-source')).toBe('model');
    // every shelf item's first reason is the model's, marked; the engine's own reasons follow
    expect(await p.locator('#shelf .why li:first-child.model-why').count()).toBe(8);
    expect(await p.locator('#shelf > li').last().locator('.why li').first().innerText()).toMatch(/^model\s+Model pick C1$/);
    expect(await p.locator('#shelf > li').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.engineRank))).toEqual([
      '8',
      '7',
      '6',
      '5',
      '4',
      '3',
      '2',
      '1',
    ]);
    expect(await p.locator('#for-you-hint').innerText()).toMatch(/language model reordered the top 8/);
    const after = await shelfIds();
    expect(after).toHaveLength(8);
    expect(after).not.toEqual(before);
    // the cost table's rerank row and the feed show the call, answered by the model
    await expect.poll(async () => num(await costCell(p, 'rerank', COL.calls)), { timeout: 10_000 }).toBeGreaterThan(0);
    await expect.poll(async () => num(await costCell(p, 'rerank', COL.byLlm)), { timeout: 10_000 }).toBeGreaterThan(0);
    expect(await p.locator('#llm-feed li.llm-event.call.ok[data-operation="rerank"]').count()).toBeGreaterThan(0);
    expect(await p.locator('[data-injected]').count()).toBe(0);

    // the choice is remembered: after a reload the shelf is reranked again once the model is back
    expect(await p.evaluate(() => localStorage.getItem('atomem-demo-rerank'))).toBe('on');
    await p.reload();
    await p.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    await expect.poll(() => toggle.isChecked(), { timeout: 20_000 }).toBe(true);
    await expect.poll(() => firstWhy.innerText(), { timeout: 20_000 }).toMatch(/^model\s+Model pick C8$/);

    // unchecked: the engine's order and reasons, no model text, and no more rerank calls
    await toggle.uncheck();
    await expect.poll(() => p.locator('#shelf').getAttribute('data-rerank'), { timeout: 10_000 }).toBe('off');
    expect(await p.locator('#shelf').innerText()).not.toContain('Model pick');
    expect(await p.locator('#shelf .why li.model-why').count()).toBe(0);
    expect(await p.evaluate(() => localStorage.getItem('atomem-demo-rerank'))).toBe('off');
    const callsOff = rerankCalls();
    await p.locator('#departments button[data-dept="Kitchen"]').click();
    await clickAll(p, KITCHEN.slice(3, 4)); // refreshes the shelf
    await expect.poll(() => p.locator('#notice').innerText(), { timeout: 10_000 }).toContain('Viewed');
    await idle(p);
    expect(await p.locator('#shelf').innerText()).not.toContain('Model pick');
    expect(rerankCalls()).toBe(callsOff);
    expect(urls.filter((u) => !isLocal(u))).toEqual([]);
    await ctx.close();
  }, 120_000);

  it('without a model the section says the rules reasoner is in use and how to configure one', async () => {
    const other = await newContext();
    await other.page.route('**/demo-config.json', (r) => r.fulfill({ json: { llm: null, catalogVectors: '/catalog-vectors.bin' } }));
    await other.page.goto(`${demo.base}/`);
    await other.page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    const text = await other.page.locator('#llm').innerText();
    expect(text).toMatch(/rules reasoner is in use/);
    expect(text).toMatch(/ATOMEM_GGUF/);
    expect(text).toMatch(/ATOMEM_OPENAI_URL/);
    expect(await other.page.locator('#llm').getAttribute('data-active')).toBe('false');
    expect(await other.page.locator('#llm-details').isVisible()).toBe(false);
    // no model, no rerank choice
    expect(await other.page.locator('#rerank-control').isVisible()).toBe(false);
    expect(await other.page.locator('#rerank-toggle').isDisabled()).toBe(true);
    expect(other.seen.filter((u) => !isLocal(u))).toEqual([]);
    await other.context.close();
  }, 60_000);
});

describe.skipIf(!existsSync(GGUF))('the demo with a GGUF served by the demo server (wllama, toy model)', () => {
  let demo: Demo;
  let context: BrowserContext;
  let page: Page;
  let seen: string[] = [];

  beforeAll(async () => {
    demo = await startDemo({ ATOMEM_GGUF: GGUF, ATOMEM_LLM_BUDGET: '40/20' });
    ({ context, page, seen } = await newContext());
    // why 180 s: a fresh data folder's first start also trains the shop model on the demo's order log
  }, 180_000);

  afterAll(async () => {
    await context?.close();
    await demo?.stop();
  });

  it('streams the GGUF same-origin with its size (GET and HEAD), never from elsewhere', async () => {
    const size = statSync(GGUF).size;
    const url = `${demo.base}/models/stories260K.gguf`;
    const head = await fetch(url, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(Number(head.headers.get('content-length'))).toBe(size);
    const get = await fetch(url);
    expect(Number(get.headers.get('content-length'))).toBe(size);
    expect((await get.arrayBuffer()).byteLength).toBe(size);
    expect((await fetch(`${demo.base}/models/..%2Fpackage.json`)).status).toBe(404);
    expect(await (await fetch(`${demo.base}/demo-config.json`)).json()).toEqual({
      llm: { wllama: { model: '/models/stories260K.gguf' }, budget: { maxCalls: 40, perEvents: 20 } },
      catalogVectors: '/catalog-vectors.bin',
    });
    expect(demo.stderr()).toContain(`wllama (WASM) ${GGUF}`);
  });

  it('runs the model in the page with wllama; its calls or fallbacks reach the inspector', async () => {
    await page.goto(`${demo.base}/`);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 60_000 });
    await expect.poll(() => page.locator('#llm').getAttribute('data-active'), { timeout: 45_000 }).toBe('true');
    expect(await page.locator('#llm').getAttribute('data-mode')).toBe('wasm');
    expect(await page.locator('#status').innerText()).toMatch(/wasm: wllama:stories260K/);
    await clickAll(page, KITCHEN.slice(0, 3));
    await expect.poll(() => page.locator('#llm-feed li.llm-event').count(), { timeout: 45_000 }).toBeGreaterThan(0);
    await expect.poll(async () => num(await costCell(page, 'total', COL.requests)), { timeout: 45_000 }).toBeGreaterThan(0);
    expect(seen).toContain(`${demo.base}/models/stories260K.gguf`);
    expect(seen.filter((u) => !isLocal(u))).toEqual([]);
    // only the demo origin here: no model server, no CDN
    expect(seen.filter((u) => !u.startsWith(`${demo.base}/`) && !u.startsWith('data:') && !u.startsWith('blob:'))).toEqual([]);
  }, 90_000);
});
