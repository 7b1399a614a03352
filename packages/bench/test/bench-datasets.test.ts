import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { compareIds, DatasetError, kcore, loadAgentCF, loadDataset, loadJsonl, loadMovieLens } from '../src/datasets.js';
import type { Interaction } from 'atomem/engine';
import type { Dataset } from '../src/types.js';
import { writeMovieLensTiny } from '../../../test/fixtures/movielens-tiny.js';

const FIXTURES = resolve(import.meta.dirname, '../../../test/fixtures');

const ML_TINY = writeMovieLensTiny();
const ids = (d: Dataset) => Object.fromEntries([...d.sequences].map(([u, s]) => [u, s.map((x) => x.item)]));

const tmp = mkdtempSync(join(tmpdir(), 'atomem-bench-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
/** A temp folder with the given files. */
function folder(files: Record<string, string | Buffer>, name = `d${n++}`): string {
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  return dir;
}

describe('compareIds', () => {
  it('sorts numeric ids numerically, before other ids, which sort by code units', () => {
    expect(['10', '9', 'b', '1a', 'B', '100', '010'].sort(compareIds)).toEqual(['9', '010', '10', '100', '1a', 'B', 'b']);
    expect(compareIds('7', '7')).toBe(0);
  });
});

describe('loadMovieLens (made-up fixture)', () => {
  it('decodes Latin-1 titles, genres from the flags, release date as description', () => {
    const d = loadMovieLens(ML_TINY, { kcore: 0 });
    expect(d.format).toBe('movielens');
    expect(d.items.get('1')).toEqual({ id: '1', title: 'Le Café Noir (1994)', categories: ['Comedy', 'Drama'], description: 'Released 01-Jan-1994.' });
    expect(d.items.get('5')!.title).toBe('Næstved Nights (1995)');
    expect(d.items.get('4')).toEqual({ id: '4', title: 'Harbour Lights (1996)', categories: ['Drama'] });
    expect(d.items.get('6')!.categories).toEqual(['unknown']);
  });

  it('sorts by (timestamp, numeric item id) and stores ms timestamps', () => {
    const d = loadMovieLens(ML_TINY, { kcore: 0 });
    expect(ids(d)['1']).toEqual(['1', '2', '9', '10', '3']); // 9 and 10 rated in the same second
    expect(d.sequences.get('1')![0]).toEqual({ item: '1', at: 100_000, action: 'rate' });
    expect(d.items.size).toBe(9); // k = 0 filters nothing: unrated item 7 stays in the catalog
    expect(loadMovieLens(ML_TINY, { kcore: 1 }).items.has('7')).toBe(false);
  });

  it('applies the k-core (default 5) and prunes the catalog to the surviving items', () => {
    const k2 = loadMovieLens(ML_TINY, { kcore: 2 });
    expect(ids(k2)).toEqual({ '1': ['1', '2', '9', '3'], '2': ['1', '2', '4', '5'], '3': ['2', '3', '1'], '5': ['1', '2', '3', '4', '5', '9'] });
    expect([...k2.items.keys()].sort(compareIds)).toEqual(['1', '2', '3', '4', '5', '9']);
    const k3 = loadMovieLens(ML_TINY, { kcore: 3 });
    expect(ids(k3)).toEqual({ '1': ['1', '2', '3'], '3': ['2', '3', '1'], '5': ['1', '2', '3'] });
    expect(loadMovieLens(ML_TINY).sequences.size).toBe(0);
  });

  it('names file and line of malformed input, and missing files', () => {
    const genre = 'unknown|0\nAction|1\n';
    const item = '1|A (1990)|||u|0|1\n2|B (1991)|||u|1|0\n';
    expect(() => loadMovieLens(join(tmp, 'nope'))).toThrow(/data directory not found/);
    expect(() => loadMovieLens(folder({ 'u.genre': genre, 'u.item': item }))).toThrow(/missing file .*u\.data/);
    expect(() => loadMovieLens(folder({ 'u.genre': genre, 'u.item': item, 'u.data': '1\t1\t5\t10\n1\t2\t5\n' }))).toThrow(
      /u\.data:2: expected 4 tab-separated fields/,
    );
    expect(() => loadMovieLens(folder({ 'u.genre': genre, 'u.item': item, 'u.data': '1\t1\t5\t10\n\n1\t3\t5\t11\n' }))).toThrow(
      /u\.data:3: item 3 is not in u\.item/,
    );
    expect(() => loadMovieLens(folder({ 'u.genre': genre, 'u.item': '1|A|||u|0\n', 'u.data': '' }))).toThrow(/u\.item:1: expected 7/);
    expect(() => loadMovieLens(folder({ 'u.genre': genre, 'u.item': '1|A|||u|0|2\n', 'u.data': '' }))).toThrow(/u\.item:1: genre flag/);
  });
});

describe('loadAgentCF (made-up fixture)', () => {
  const d = loadAgentCF(join(FIXTURES, 'agentcf-tiny'));

  it('rebuilds each sequence from the step rows (train, valid, test; windows included)', () => {
    expect(d.name).toBe('agentcf-tiny');
    expect(ids(d)).toEqual({
      '10': ['100', '101', '102', '103', '104', '105'],
      '20': ['110', '111', '112', '113', '114'],
      '30': ['100', '110', '120'],
    });
    expect(d.sequences.get('10')!.map((x) => x.at)).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('reads the item file (found as the only *.item), categories split on ";", entities decoded', () => {
    expect(d.items.size).toBe(21);
    expect(d.items.get('101')).toEqual({ id: '101', title: 'Made-up Album 101', categories: ['Jazz', 'Bebop'] });
    expect(d.items.get('107')!.title).toBe("Rock & Roll 'Forever'");
  });

  it('keeps the candidate pools in file order', () => {
    expect(d.candidatePools!.get('20')).toEqual(['114', '110', '100', '101', '102']);
    expect(d.candidatePools!.get('10')).toHaveLength(13);
  });

  it('rejects rows that contradict the sequence and names the line', () => {
    const head = 'user_id:token\titem_id_list:token_seq\titem_id:token\n';
    const dir = folder(
      {
        'x.train.inter': `${head}1\t5\t6\n`,
        'x.valid.inter': `${head}1\t5 6\t7\n`,
        'x.test.inter': `${head}1\t9 9\t8\n`,
        'x.random': '1\t1 2 3\n',
      },
      'x',
    );
    expect(() => loadAgentCF(dir)).toThrow(/x\.test\.inter:2: history of user 1/);
    const bad = folder({ 'y.test.inter': 'user_id\titem_id_list:token_seq\n', 'y.random': '' }, 'y');
    expect(() => loadAgentCF(bad)).toThrow(/y\.test\.inter:1: header column "user_id"/);
  });
});

describe('loadJsonl (made-up fixture)', () => {
  const d = loadJsonl(join(FIXTURES, 'jsonl-tiny'));

  it('reads items (numeric ids as strings) and every item is in the catalog', () => {
    expect(d.items.size).toBe(14);
    expect(d.items.get('11')).toEqual({ id: '11', title: 'Gift Card' });
    expect(d.items.get('sku-1')!.description).toBe('Light trail shoe');
  });

  it('sorts by (at, id), accepts ISO dates, skips unknown items with a count', () => {
    expect(ids(d)).toEqual({ alice: ['sku-1', 'sku-2', 'sku-7', 'sku-8'], bob: ['sku-3', 'sku-9', '11'], '42': ['sku-4', 'sku-5'] });
    expect(d.sequences.get('bob')![0]).toEqual({ item: 'sku-3', at: 1_700_000_000_000, action: 'click' });
    expect(d.warnings).toEqual(['jsonl: skipped 1 interactions whose item is not in items.jsonl']);
  });

  it('names file and line of malformed lines', () => {
    const items = '{"id":"a","title":"A"}\n';
    expect(() => loadJsonl(folder({ 'items.jsonl': items, 'interactions.jsonl': '{"user":"u","item":"a","at":1}\n\n{oops\n' }))).toThrow(
      /interactions\.jsonl:3: invalid JSON/,
    );
    expect(() => loadJsonl(folder({ 'items.jsonl': items, 'interactions.jsonl': '{"user":"u","item":"a"}\n' }))).toThrow(/interactions\.jsonl:1: "at"/);
    expect(() => loadJsonl(folder({ 'items.jsonl': items, 'interactions.jsonl': '{"user":"u","item":"a","at":1,"action":"eat"}\n' }))).toThrow(
      /unknown action "eat"/,
    );
    expect(() => loadJsonl(folder({ 'items.jsonl': `${items}{"id":"a","title":"B"}\n`, 'interactions.jsonl': '' }))).toThrow(/items\.jsonl:2: duplicate/);
    expect(() => loadJsonl(folder({ 'items.jsonl': '{"id":"a"}\n', 'interactions.jsonl': '' }))).toThrow(/items\.jsonl:1: "title"/);
    expect(() => loadJsonl(folder({ 'items.jsonl': items }))).toThrow(/missing file .*interactions\.jsonl/);
    expect(() => loadDataset('jsonl', join(tmp, 'absent'))).toThrow(DatasetError);
  });
});

describe('kcore', () => {
  const x = (item: string, at: number): Interaction => ({ item, at });
  it('repeats until stable (hand case)', () => {
    // k = 2. Round 1 drops item d (1 interaction) → user w falls to 1 interaction and goes;
    // round 2: item c now has 1 interaction (only v) → dropped → user v falls to 1 and goes.
    const d: Dataset = {
      name: 'hand',
      items: new Map(['a', 'b', 'c', 'd', 'e'].map((id) => [id, { id, title: id }])),
      sequences: new Map([
        ['u', [x('a', 1), x('b', 2)]],
        ['t', [x('a', 1), x('b', 2), x('a', 3)]],
        ['v', [x('a', 1), x('c', 2)]],
        ['w', [x('c', 1), x('d', 2)]],
      ]),
    };
    const k = kcore(d, 2, { pruneCatalog: true });
    expect(ids(k)).toEqual({ u: ['a', 'b'], t: ['a', 'b', 'a'] });
    expect([...k.items.keys()]).toEqual(['a', 'b']);
    expect(kcore(d, 2).items.size).toBe(5); // catalog kept without pruneCatalog
    expect(kcore(d, 0)).toBe(d);
    expect(ids(d).w).toEqual(['c', 'd']); // input untouched
    expect(() => kcore(d, -1)).toThrow(RangeError);
  });
});
