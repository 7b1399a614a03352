import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeShopModel, encodeShopModel, type ShopModel } from '../src/protocol/shop-model-v1.js';
import { assembleCatalogFile, decodeCatalogHead, decodeCatalogShard, encodeCatalogFileV3 } from '../src/protocol/catalog-vectors-v3.js';
import { trainShopModel, type ShopInteraction } from '../src/shop/train.js';
import { ShopScorer } from '../src/shop/score.js';
import { fitWeights } from '../src/shop/fit.js';
import { main } from '../src/shop/cli.js';

const DAY = 86_400_000;
const T0 = Date.UTC(2025, 0, 1);
const catalog = Array.from({ length: 30 }, (_, i) => `sku-${i}`);

/**
 * 40 users over 30 days: every user buys items 0–9 early (days 0–19); in the last week (days
 * 23–29) users 0–11 buy item 20 (days 23 and 24 twice each: distinct users count once), users 0–4 item 21 and
 * user 0 item 22. The log's last event is day 29.
 */
function log(): ShopInteraction[] {
  const rows: ShopInteraction[] = [];
  for (let u = 0; u < 40; u++) {
    for (let k = 0; k < 4; k++) rows.push({ user: `u${u}`, item: catalog[(u + k) % 10], at: T0 + ((u + k) % 20) * DAY, action: 'purchase' });
  }
  for (let u = 0; u < 12; u++) {
    rows.push({ user: `u${u}`, item: 'sku-20', at: T0 + 23 * DAY + u * 1000, action: 'purchase' });
    rows.push({ user: `u${u}`, item: 'sku-20', at: T0 + 24 * DAY + u * 1000, action: 'purchase' });
  }
  for (let u = 0; u < 5; u++) rows.push({ user: `u${u}`, item: 'sku-21', at: T0 + 26 * DAY, action: 'purchase' });
  rows.push({ user: 'u0', item: 'sku-22', at: T0 + 29 * DAY, action: 'purchase' });
  return rows;
}

/** Item id → recent count, rounded to an integer (a decoded file's counts are within u8 quantisation). */
const countsOf = (m: ShopModel): Record<string, number> =>
  Object.fromEntries(Array.from(m.popRecent!.items, (i, k) => [m.items[i], Math.round(m.popRecent!.counts[k])]));

describe('recent popularity (popRecent)', () => {
  const model = trainShopModel(log(), { catalog, dim: 4, random: () => 0.5 });

  it('counts distinct users per item over the last 7 days before the log ends, listing only items with a count', () => {
    expect(model.popRecent).toBeDefined();
    expect(model.popRecent!.days).toBe(7);
    expect(model.popRecent!.end).toBe(T0 + 29 * DAY);
    expect(countsOf(model)).toEqual({ 'sku-20': 12, 'sku-21': 5, 'sku-22': 1 });
    // the window is relative to the log's last event: 20 days back, the early items count too
    const wide = trainShopModel(log(), { catalog, dim: 4, random: () => 0.5, recentDays: 20 });
    expect(countsOf(wide)['sku-20']).toBe(12);
    expect(Object.keys(countsOf(wide)).length).toBeGreaterThan(3);
  });

  it('is off with recentDays 0 and under differential privacy; refuses a bad window', () => {
    expect(trainShopModel(log(), { catalog, dim: 4, random: () => 0.5, recentDays: 0 }).popRecent).toBeUndefined();
    expect(trainShopModel(log(), { catalog, dim: 4, random: () => 0.5, epsilon: 4 }).popRecent).toBeUndefined();
    expect(() => trainShopModel(log(), { catalog, recentDays: -1 })).toThrow(/recentDays/);
  });

  it('round-trips through the shop model file within its u8 quantisation, and costs a few bytes per listed item', () => {
    const bytes = encodeShopModel(model);
    const back = decodeShopModel(bytes);
    expect(back.popRecent!.days).toBe(7);
    expect(back.popRecent!.end).toBe(model.popRecent!.end);
    expect(Array.from(back.popRecent!.items)).toEqual(Array.from(model.popRecent!.items));
    for (let k = 0; k < back.popRecent!.counts.length; k++) {
      const c = model.popRecent!.counts[k];
      expect(Math.abs(back.popRecent!.counts[k] - c)).toBeLessThanOrEqual(0.02 * 12);
      expect(back.popRecent!.counts[k]).toBeGreaterThan(0);
    }
    // idempotent: decode → encode gives the same bytes
    expect(encodeShopModel(back)).toEqual(bytes);
    const without = encodeShopModel({ ...model, popRecent: undefined });
    // 3 listed items: 6 bytes of data, the rest is the header's entry and two section-table rows
    expect(bytes.length - without.length).toBeLessThan(250);
  });

  it('a file without it (written before it existed) still loads, and its popRecent signal is 0', () => {
    const { popRecent: _, ...old } = model;
    const bytes = encodeShopModel(old);
    expect(new TextDecoder().decode(bytes.subarray(12, 12 + new DataView(bytes.buffer).getUint32(8, true)))).not.toContain('popRecent');
    const back = decodeShopModel(bytes);
    expect(back.popRecent).toBeUndefined();
    const s = new ShopScorer(back).signals([{ item: 'sku-1', at: T0 + 29 * DAY, action: 'purchase' }], ['sku-20', 'sku-21', 'sku-3']);
    expect(Array.from(s.popRecent)).toEqual([0, 0, 0]);
  });

  it('refuses malformed recent-popularity sections', () => {
    const bytes = encodeShopModel(model);
    const h = new DataView(bytes.buffer).getUint32(8, true);
    const header = JSON.parse(new TextDecoder().decode(bytes.subarray(12, 12 + h)));
    const rewrite = (edit: (x: Record<string, unknown>) => void): Uint8Array => {
      const x = structuredClone(header);
      edit(x);
      const json = new TextEncoder().encode(JSON.stringify(x));
      const start = (12 + json.length + 3) & ~3;
      const oldStart = (12 + h + 3) & ~3;
      const out = new Uint8Array(start + bytes.length - oldStart);
      out.set(bytes.subarray(0, 12));
      new DataView(out.buffer).setUint32(8, json.length, true);
      out.set(json, 12);
      out.set(bytes.subarray(oldStart), start);
      return out;
    };
    expect(() => decodeShopModel(rewrite((x) => ((x.popRecent as { items: number }).items = 2)))).toThrow(RangeError);
    expect(() => decodeShopModel(rewrite((x) => ((x.popRecent as { days: number }).days = 0)))).toThrow(/popRecent/);
    expect(() => decodeShopModel(rewrite((x) => (x.items as string[]).splice(21)))).toThrow(RangeError);
    expect(() => encodeShopModel({ ...model, popRecent: { ...model.popRecent!, counts: Float32Array.from([1, 0, 2]) } })).toThrow(/count 0/);
    expect(() => encodeShopModel({ ...model, popRecent: { ...model.popRecent!, items: Uint32Array.from([21, 20, 22]) } })).toThrow(/ascending/);
  });

  it('the scorer gives every candidate log(1 + its recent count) at a live moment, whatever the shopper did', () => {
    const scorer = new ShopScorer(decodeShopModel(encodeShopModel(model)));
    const history = [{ item: 'sku-2', at: T0, action: 'purchase' as const }];
    const candidates = ['sku-20', 'sku-21', 'sku-22', 'sku-3', 'unknown-id'];
    // a visit the day after the log ended (the file's window is days 22–29)
    const s = scorer.signals(history, candidates, T0 + 30 * DAY);
    expect(s.popRecent[0]).toBeCloseTo(Math.log1p(12), 1);
    expect(s.popRecent[1]).toBeCloseTo(Math.log1p(5), 1);
    expect(s.popRecent[2]).toBeCloseTo(Math.log1p(1), 1);
    expect(s.popRecent[3]).toBe(0);
    // the same at the log's end, and a year later (the file is stale but still the latest word)
    expect(scorer.signals(history, candidates, T0 + 29 * DAY).popRecent).toEqual(s.popRecent);
    expect(scorer.signals(history, candidates, T0 + 400 * DAY).popRecent).toEqual(s.popRecent);
  });

  it("is 0 at a moment inside the file's log (a replay of a past visit): the window holds its future", () => {
    const scorer = new ShopScorer(decodeShopModel(encodeShopModel(model)));
    const end = model.popRecent!.end;
    expect(end).toBe(T0 + 29 * DAY);
    expect(scorer.live(end)).toBe(true);
    expect(scorer.live(end - 1)).toBe(false);
    expect(scorer.live(Number.NaN)).toBe(false);
    const history = [{ item: 'sku-2', at: T0, action: 'purchase' as const }];
    expect([...scorer.signals(history, ['sku-20', 'sku-21'], end - DAY).popRecent]).toEqual([0, 0]);
    // without `now`, the moment is the history's last event (day 0 here: a replay)
    expect([...scorer.signals(history, ['sku-20', 'sku-21']).popRecent]).toEqual([0, 0]);
    // a file without the window has no live moment
    expect(new ShopScorer({ ...model, popRecent: undefined }).live(end)).toBe(false);
  });

  it('travels in a format v3 head with global item indices: the assembled model names the same items', () => {
    const dim = 4;
    const embedder = { id: 'toy@1', dim };
    const items = catalog.map((id) => ({ id, title: id }));
    const vectors = catalog.map((_, i) => Float32Array.from({ length: dim }, (_, d) => (d === i % dim ? 1 : 0.1)));
    const enc = encodeCatalogFileV3({ embedder, items, vectors, shop: { model }, shardSize: 4, shardPrefix: 's/' });
    const head = decodeCatalogHead(enc.head);
    const shards = head.header.shards.map((ref, k) => decodeCatalogShard(head, k, enc.shards.find((s) => s.name === ref.name)!.bytes));
    const file = assembleCatalogFile(head, shards);
    const m = file.shop!.model;
    const full = countsOf(decodeShopModel(encodeShopModel(model)));
    expect(countsOf(m)).toEqual(full);
    // some shards only: the model holds the loaded items, each with the same count
    const some = shards.filter((s) => s.ids.includes('sku-20') || s.ids.includes('sku-22'));
    expect(some.length).toBeLessThan(shards.length);
    const part = assembleCatalogFile(head, some).shop!.model;
    const loaded = new Set(part.items);
    expect(countsOf(part)).toEqual(Object.fromEntries(Object.entries(full).filter(([id]) => loaded.has(id))));
    expect(countsOf(part)['sku-20']).toBe(12);
    // a head without it still decodes
    const plain = encodeCatalogFileV3({ embedder, items, vectors, shop: { model: { ...model, popRecent: undefined } }, shardSize: 4, shardPrefix: 's/' });
    expect(decodeCatalogHead(plain.head).popRecent).toBeUndefined();
  });
});

describe('fitWeights with excluded list members', () => {
  it('excluded items are standardised with the list but never compete with the positive', () => {
    // signal a ranks the positive first among the competitors; the excluded items (the shopper's
    // own) score higher on a. With them excluded, a gets a large positive weight.
    const cases = Array.from({ length: 40 }, (_, c) => {
      const m = 20;
      const a = Float64Array.from({ length: m }, (_, i) => (i < 5 ? 10 : i === 5 ? 5 : Math.sin(c * 7 + i)));
      const b = Float64Array.from({ length: m }, (_, i) => Math.cos(c * 3 + i));
      const exclude = Uint8Array.from({ length: m }, (_, i) => (i < 5 ? 1 : 0));
      return { signals: { a, b }, positive: 5, exclude };
    });
    const w = fitWeights(cases, ['a', 'b']);
    expect(w.a).toBe(1);
    const withoutExclusion = fitWeights(
      cases.map(({ signals, positive }) => ({ signals, positive })),
      ['a', 'b'],
    );
    // competing with the owned items, a alone cannot put the positive first: the fit differs
    expect(withoutExclusion).not.toEqual(w);
  });
});

describe('atomem-shop --recent-days', () => {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-recent-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'items.jsonl'), catalog.map((id) => JSON.stringify({ id, title: id })).join('\n'));
  writeFileSync(
    join(dir, 'log.jsonl'),
    log()
      .map((r) => JSON.stringify(r))
      .join('\n'),
  );
  const run = async (extra: string[]) => {
    let err = '';
    const out = join(dir, `m${extra.join('')}.bin`);
    const code = await main(
      ['--interactions', join(dir, 'log.jsonl'), '--items', join(dir, 'items.jsonl'), '--out', out, '--dim', '4', '--no-progress', ...extra],
      {
        stdout: () => {},
        stderr: (s) => (err += s),
      },
    );
    return { code, err, model: code === 0 ? decodeShopModel(readFileSync(out)) : undefined };
  };

  it('defaults to a week, takes another window, 0 turns it off, and refuses a negative one', async () => {
    expect(countsOf((await run([])).model!)).toEqual({ 'sku-20': 12, 'sku-21': 5, 'sku-22': 1 });
    expect(countsOf((await run(['--recent-days', '4'])).model!)).toEqual({ 'sku-21': 5, 'sku-22': 1 });
    expect((await run(['--recent-days', '0'])).model!.popRecent).toBeUndefined();
    const bad = await run(['--recent-days', '-2']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/--recent-days/);
  });
});
