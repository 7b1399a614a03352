/**
 * The index scale benchmark (`npm run bench:index`) at a tiny size: JSON shape, sanity of the
 * figures, and the int8 usearch adapter against the exact flat store.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { main, markdownTables, runIndexScaleSize, SyntheticMemories, type IndexScaleResult } from '../../packages/bench/src/index-scale.js';
import { UsearchVectorSearch } from '../../packages/bench/src/usearch-search.js';
import { FlatVectorStore } from '../../packages/atomem/src/community/vectors.js';

const dir = mkdtempSync(join(tmpdir(), 'atomem-index-scale-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const small = { searchQueries: 150, updateOps: 45, exactQueries: 50, recomputeRuns: 2 };

function checkSane(r: IndexScaleResult, memories: number): void {
  expect(r.memories).toBe(memories);
  for (const k of ['insertPerSec', 'searchP50Ms', 'searchP99Ms', 'communityUpdateP50Ms', 'communityUpdateP99Ms', 'rssMB', 'incrementalVsFullRatio', 'fullRecomputeMs'] as const) {
    expect(Number.isFinite(r[k]), k).toBe(true);
    expect(r[k], k).toBeGreaterThan(0);
  }
  expect(r.searchP99Ms).toBeGreaterThanOrEqual(r.searchP50Ms);
  expect(r.communityUpdateP99Ms).toBeGreaterThanOrEqual(r.communityUpdateP50Ms);
  expect(r.incrementalVsFullRatio).toBeGreaterThan(1);
  expect(r.incrementalVsRebuildRatio).toBeGreaterThan(r.incrementalVsFullRatio);
  expect(r.recomputeMatches).toBe(true);
  // clustered data: tau-links and non-trivial communities form, without one giant component
  // (links are mutual top-k1 since DECISIONS 39: fewer than the old one-per-new-memory rule's)
  expect(r.edges).toBeGreaterThan(memories / 10);
  expect(r.communities).toBeGreaterThan(10);
  expect(r.largestCommunity).toBeGreaterThanOrEqual(3);
  expect(r.largestCommunity).toBeLessThan(memories / 2);
  expect(r.recallAtK1).toBeGreaterThanOrEqual(0.9);
  expect(r.exactSearchP50Ms).toBeGreaterThan(0);
  const b = r.loadBreakdown;
  expect(b.vectorInsert + b.vectorSearch + b.graphAndValidation).toBeCloseTo(1, 5);
}

describe('bench:index', () => {
  it('writes { results: [...] } with the required fields (--json)', async () => {
    const file = join(dir, 'out.json');
    // the table goes to stdout and progress to stderr: keep the test output clean
    let stdout = '';
    const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stdout += String(chunk);
      return true;
    });
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const code = await main(['--sizes', '2000', '--engine', 'usearch', '--in-process', '--no-progress', '--queries', '150', '--updates', '45', '--json', file]).finally(() => {
      out.mockRestore();
      err.mockRestore();
    });
    expect(code).toBe(0);
    expect(stdout).toContain('| 2,000 |');
    const json = JSON.parse(readFileSync(file, 'utf8')) as { results: IndexScaleResult[]; config: Record<string, unknown> };
    expect(json.results).toHaveLength(1);
    const r = json.results[0];
    for (const k of ['memories', 'insertPerSec', 'searchP50Ms', 'searchP99Ms', 'communityUpdateP50Ms', 'rssMB', 'incrementalVsFullRatio']) {
      expect(typeof (r as unknown as Record<string, unknown>)[k], k).toBe('number');
    }
    expect(json.config.engine).toBe('usearch');
    checkSane(r, 2000);
  });

  it('runs on the service adapter (HNSW once ≥ 2,048 vectors) with sane figures', () => {
    const r = runIndexScaleSize(3000, { ...small, engine: 'server' });
    checkSane(r, 3000);
    expect(markdownTables([r])).toContain('| 3,000 |');
  });

  it('runs on the exact flat store (the graph default): recall 1, one scan per update', () => {
    const r = runIndexScaleSize(2000, { ...small, engine: 'flat' });
    expect(r.engine).toBe('flat');
    expect(r.recallAtK1).toBe(1);
    expect(r.linkQuality!.fewerLinksRate).toBe(0);
    expect(r.recomputeMatches).toBe(true);
    expect(r.communityUpdateP99Ms).toBeGreaterThanOrEqual(r.communityUpdateP50Ms);
  });

  it('rejects sizes below one batch', () => {
    expect(() => runIndexScaleSize(5, { batch: 10 })).toThrow(RangeError);
  });

  it('generates deterministic unit-ish int8-decoded vectors and 22-char ids', () => {
    const a = new SyntheticMemories(64, 7);
    const b = new SyntheticMemories(64, 7);
    expect(Array.from(a.vector(12))).toEqual(Array.from(b.vector(12)));
    expect(Array.from(a.vector(12))).not.toEqual(Array.from(a.vector(12, 'query')));
    const v = a.vector(3);
    const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
    expect(n).toBeGreaterThan(0.95);
    expect(n).toBeLessThan(1.05);
    for (const x of v) expect(Math.round(x * 127)).toBeCloseTo(x * 127, 4);
    expect(SyntheticMemories.id(42)).toHaveLength(22);
  });
});

describe('UsearchVectorSearch', () => {
  it('agrees with the exact flat store through adds, replaces, removes and filters', () => {
    const dim = 32;
    const data = new SyntheticMemories(dim, 11, 20, 4, 0.1);
    const unit = (v: Float32Array) => {
      const n = Math.sqrt(v.reduce((s, x) => s + x * x, 0));
      return v.map((x) => x / n);
    };
    const us = new UsearchVectorSearch(dim, { initialCapacity: 16 });
    const flat = new FlatVectorStore(dim);
    for (let i = 0; i < 400; i++) {
      const v = unit(data.vector(i));
      us.add(`m${i}`, v);
      flat.add(`m${i}`, v);
    }
    for (let i = 0; i < 100; i += 3) {
      expect(us.remove(`m${i}`)).toBe(true);
      flat.remove(`m${i}`);
    }
    expect(us.remove('nope')).toBe(false);
    for (let i = 400; i < 450; i++) {
      const v = unit(data.vector(i)); // new ids reuse freed slots
      us.add(`m${i}`, v);
      flat.add(`m${i}`, v);
    }
    const moved = unit(data.vector(9999));
    us.add('m1', moved); // replace
    flat.add('m1', moved);
    expect(us.size).toBe(flat.size);
    expect(us.has('m0')).toBe(false);
    expect(us.has('m1')).toBe(true);
    const back = us.vector('m1')!;
    expect(back.reduce((s, x, j) => s + x * moved[j], 0)).toBeGreaterThan(0.999);
    let agree = 0;
    let total = 0;
    for (let q = 0; q < 60; q++) {
      const query = unit(data.vector(q, 'query'));
      const filter = (id: string) => !id.endsWith('7');
      const exact = flat.search(query, 3, 0.3, filter);
      const got = us.search(query, 3, 0.3, filter);
      for (const h of got) {
        expect(h.sim).toBeGreaterThanOrEqual(0.3);
        expect(filter(h.id)).toBe(true);
      }
      const ids = new Set(got.map((h) => h.id));
      agree += exact.filter((h) => ids.has(h.id)).length;
      total += exact.length;
      const many = us.searchMany([query, query], 3, 0.3, filter);
      expect(many[0].map((h) => h.id)).toEqual(got.map((h) => h.id));
    }
    expect(total).toBeGreaterThan(0);
    expect(agree / total).toBeGreaterThan(0.95);
    expect(us.search(moved, 1, -1)[0].id).toBe('m1');
  });
});
