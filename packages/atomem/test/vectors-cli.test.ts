import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Item } from '../src/core/types.js';
import { itemText } from '../src/embed/cache.js';
import { createHashingEmbedder } from '../src/embed/hashing.js';
import { BROWSER_HASHING_DIM, runVectorsCli } from '../src/vectors-cli.js';
import { CATALOG_VECTORS_VERSION, CatalogVectorsError, decodeCatalogVectors, encodeCatalogVectors, itemTextHash } from '../src/protocol/catalog-vectors-v1.js';
import { buildEmbedder } from '../src/worker/embedders.js';

const ITEMS: Item[] = [
  { id: 'sku-1', title: 'Red trail running shoes', categories: ['Shoes', 'Running'], description: 'Grippy sole, light mesh upper.' },
  { id: 'sku-2', title: 'Blue denim jacket', description: 'Classic fit.' },
  { id: 'sku-3', title: 'Merino wool scarf', categories: ['Accessories'] },
  { id: 'sku-4', title: 'Espresso machine', categories: ['Kitchen', 'Coffee'] },
  { id: 'sku-5', title: 'Hiking backpack 30 L', categories: ['Outdoor'] },
];

/** The float32 bit patterns of a vector (bit-identical means these are equal, -0 and NaN included). */
const bits = (v: Float32Array): number[] => Array.from(new Uint32Array(v.buffer, v.byteOffset, v.length));

/** A hand-made file: magic, version, header length, header text, padding, then `body`. */
function craft(header: string, body: Uint8Array = new Uint8Array(0), opts: { magic?: string; version?: number; headerLength?: number } = {}): Uint8Array {
  const json = new TextEncoder().encode(header);
  const start = (12 + json.length + 3) & ~3;
  const out = new Uint8Array(start + body.length);
  out.set(new TextEncoder().encode(opts.magic ?? 'ATMV'), 0);
  const view = new DataView(out.buffer);
  view.setUint32(4, opts.version ?? 1, true);
  view.setUint32(8, opts.headerLength ?? json.length, true);
  out.set(json, 12);
  out.set(body, start);
  return out;
}

/** Offset of the first vector value of a file made by {@link encodeCatalogVectors}. */
const vectorsStart = (file: Uint8Array): number => (12 + new DataView(file.buffer, file.byteOffset).getUint32(8, true) + 3) & ~3;

function sampleVectors(dim: number, n: number): Float32Array[] {
  return Array.from({ length: n }, (_, i) => Float32Array.from({ length: dim }, (_, d) => Math.sin(i * 31 + d) / (d + 1)));
}

function expectInvalid(bytes: Uint8Array, why: RegExp): void {
  let error: unknown;
  try {
    decodeCatalogVectors(bytes);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(CatalogVectorsError);
  expect((error as Error).name).toBe('CatalogVectorsError');
  expect((error as Error).message).toMatch(/^not a valid catalog vector file: /);
  expect((error as Error).message).toMatch(why);
}

describe('catalog vector file v1', () => {
  it('round-trips ids, text hashes and bit-identical vectors', () => {
    const vectors = sampleVectors(7, ITEMS.length);
    // awkward floats: -0, the smallest subnormal, the largest float32, an unrounded double
    vectors[0].set([-0, 1.4e-45, 3.4028234663852886e38, 0.1], 0);
    const bytes = encodeCatalogVectors({ id: 'test-embedder@1', dim: 7 }, ITEMS, vectors, '2026-01-02T03:04:05.000Z');
    expect(new TextDecoder().decode(bytes.subarray(0, 4))).toBe('ATMV');
    expect(vectorsStart(bytes) % 4).toBe(0);
    expect(bytes.length).toBe(vectorsStart(bytes) + ITEMS.length * 7 * 4);

    const file = decodeCatalogVectors(bytes);
    expect(file.header).toEqual({
      version: CATALOG_VECTORS_VERSION,
      embedder: 'test-embedder@1',
      dim: 7,
      items: ITEMS.map((it) => [it.id, itemTextHash(it)]),
      createdAt: '2026-01-02T03:04:05.000Z',
    });
    expect([...file.vectors.keys()]).toEqual(ITEMS.map((it) => it.id));
    ITEMS.forEach((it, i) => {
      const row = file.vectors.get(it.id)!;
      expect(row.hash).toBe(itemTextHash(it));
      expect(row.vector).toBeInstanceOf(Float32Array);
      expect(bits(row.vector)).toEqual(bits(vectors[i]));
    });
    expect(Object.is(file.vectors.get('sku-1')!.vector[0], -0)).toBe(true);
    // an ArrayBuffer and an unaligned view into a larger buffer decode the same
    expect(bits(decodeCatalogVectors(bytes.slice().buffer).vectors.get('sku-5')!.vector)).toEqual(bits(vectors[4]));
    const shifted = new Uint8Array(bytes.length + 3);
    shifted.set(bytes, 3);
    expect(bits(decodeCatalogVectors(shifted.subarray(3)).vectors.get('sku-3')!.vector)).toEqual(bits(vectors[2]));
  });

  it('round-trips an empty catalog', () => {
    const file = decodeCatalogVectors(encodeCatalogVectors({ id: 'e', dim: 3 }, [], []));
    expect(file.header.items).toEqual([]);
    expect(file.vectors.size).toBe(0);
  });

  describe('decode rejects a malformed file with a CatalogVectorsError', () => {
    const good = (): Uint8Array => encodeCatalogVectors({ id: 'e@1', dim: 4 }, ITEMS.slice(0, 2), sampleVectors(4, 2));
    const header = (h: Record<string, unknown>): string => JSON.stringify({ version: 1, embedder: 'e@1', dim: 4, items: [], ...h });

    it('bad magic', () => {
      expectInvalid(craft(header({}), undefined, { magic: 'ATMX' }), /does not start with "ATMV"/);
      expectInvalid(new TextEncoder().encode('{"version":1}'), /does not start with "ATMV"/);
      expectInvalid(new Uint8Array(0), /does not start with "ATMV"/);
      expectInvalid(new TextEncoder().encode('ATMV'), /does not start with "ATMV"/); // shorter than the fixed header
    });

    it('another format version', () => {
      expectInvalid(craft(header({}), undefined, { version: 2 }), /format version 2, this atomem reads 1/);
      expectInvalid(craft(header({ version: 2 })), /header version is not 1/);
    });

    it('a truncated header', () => {
      const bytes = good();
      expectInvalid(bytes.subarray(0, 40), /header is truncated/);
      expectInvalid(craft(header({}), undefined, { headerLength: 0xffffffff }), /header is truncated/);
    });

    it('a header that is not JSON (or not UTF-8, or not an object)', () => {
      expectInvalid(craft('{"version":1, oops'), /header is not UTF-8 JSON/);
      const latin1 = craft('{"embedder":"cafX"}');
      latin1[12 + '{"embedder":"caf'.length] = 0xe9; // "é" written in Latin-1: not UTF-8
      expectInvalid(latin1, /header is not UTF-8 JSON/);
      expectInvalid(craft('null'), /header is not an object/);
      expectInvalid(craft(header({ embedder: '' })), /no embedder id/);
      expectInvalid(craft(header({ items: {} })), /no item list/);
      expectInvalid(craft(header({ items: [['a']] }), new Uint8Array(16)), /item row 0 is not \[id, textHash\]/);
    });

    it('a byte length that does not match the header', () => {
      const bytes = good();
      const longer = new Uint8Array(bytes.length + 4);
      longer.set(bytes);
      expectInvalid(longer, new RegExp(`it has ${bytes.length + 4} bytes, 2 items × 4 dimensions need ${bytes.length}`));
      expectInvalid(bytes.subarray(0, bytes.length - 4), new RegExp(`it has ${bytes.length - 4} bytes, 2 items × 4 dimensions need ${bytes.length}`));
    });

    it('duplicate item ids', () => {
      expectInvalid(
        craft(
          header({
            items: [
              ['a', '1'],
              ['a', '2'],
            ],
          }),
          new Uint8Array(2 * 4 * 4),
        ),
        /item "a" appears twice/,
      );
    });

    it('NaN or Infinity in a vector', () => {
      for (const bad of [NaN, Infinity, -Infinity]) {
        const bytes = good();
        new DataView(bytes.buffer).setFloat32(vectorsStart(bytes) + (4 + 2) * 4, bad, true); // row 1, dimension 2
        expectInvalid(bytes, new RegExp(`the vector of "sku-2" holds ${String(bad)}`));
      }
    });

    it('dim out of range or not an integer', () => {
      for (const dim of [0, -1, 65537, 1.5, '4', null]) expectInvalid(craft(header({ dim })), /dim .* is not an integer in 1\.\.65536/);
    });
  });

  describe('encode rejects inconsistent input', () => {
    it('a different number of items and vectors', () => {
      expect(() => encodeCatalogVectors({ id: 'e', dim: 4 }, ITEMS, sampleVectors(4, 4))).toThrow(/5 items but 4 vectors/);
    });
    it('duplicate item ids', () => {
      expect(() => encodeCatalogVectors({ id: 'e', dim: 4 }, [ITEMS[0], { ...ITEMS[1], id: 'sku-1' }], sampleVectors(4, 2))).toThrow(
        /item "sku-1" appears twice/,
      );
    });
    it('a vector of the wrong dimension', () => {
      const vectors = sampleVectors(4, 2);
      vectors[1] = new Float32Array(3);
      expect(() => encodeCatalogVectors({ id: 'e', dim: 4 }, ITEMS.slice(0, 2), vectors)).toThrow(/the vector of "sku-2" has 3 dimensions, the embedder 4/);
    });
  });

  describe('itemTextHash', () => {
    const base: Item = { id: 'x', title: 'Fargo (1996)', categories: ['Crime', 'Drama'], description: 'Snow and a wood chipper.' };
    const h = itemTextHash(base);

    it('changes when the embedded text changes', () => {
      expect(itemTextHash({ ...base, title: 'Fargo (1997)' })).not.toBe(h);
      expect(itemTextHash({ ...base, categories: ['Crime'] })).not.toBe(h);
      expect(itemTextHash({ ...base, categories: ['Crime', 'Comedy'] })).not.toBe(h);
      expect(itemTextHash({ ...base, categories: undefined })).not.toBe(h);
      expect(itemTextHash({ ...base, description: 'Snow.' })).not.toBe(h);
      expect(itemTextHash({ ...base, description: undefined })).not.toBe(h);
    });

    it('does not change with fields that are not embedded, nor with the id', () => {
      const extra = { ...base, price: 12.99, stock: 3, image: 'https://shop.example/fargo.jpg' } as Item;
      expect(itemTextHash(extra)).toBe(h);
      expect(itemTextHash({ ...extra, price: 9.99 } as Item)).toBe(h);
      expect(itemTextHash({ ...base, id: 'y' })).toBe(h);
    });

    it('follows the embedded text exactly (whitespace collapsed, repeated categories dropped)', () => {
      expect(itemTextHash({ ...base, title: '  Fargo\n(1996) ' })).toBe(h);
      expect(itemTextHash({ ...base, categories: ['Crime', 'Drama', 'Crime'] })).toBe(h);
      expect(h).toMatch(/^[0-9a-f]{1,8}$/);
    });
  });
});

describe('atomem-vectors CLI', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'atomem-vectors-'));
    process.env.XDG_CACHE_HOME = mkdtempSync(join(tmpdir(), 'atomem-vectors-cache-')); // the CLI's default disk cache, away from ~/.cache
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const code = await runVectorsCli(argv, { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } });
    return { code, stdout, stderr };
  }

  function catalogFile(name: string, content: unknown): string {
    const path = join(dir, name);
    writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
    return path;
  }

  /** Nothing but the given files in the temp dir: no output, no leftover temporary file. */
  function expectOnly(...names: string[]): void {
    expect(readdirSync(dir).sort()).toEqual([...names].sort());
  }

  async function hashingVectors(dim: number, items: readonly Item[]): Promise<Float32Array[]> {
    const embs = await createHashingEmbedder({ dim }).embed(items.map((it) => itemText(it)));
    return embs.map((e) => e.vector);
  }

  it("writes a file that decodes, with the browser engine's hashing id and the embedder's vectors", async () => {
    const catalog = catalogFile(
      'catalog.json',
      ITEMS.map((it, i) => ({ ...it, price: 10 + i, inStock: true })),
    );
    const out = join(dir, 'vectors.bin');
    const r = await run('--catalog', catalog, '--out', out, '--embedder', 'hashing', '--no-progress');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expectOnly('catalog.json', 'vectors.bin');

    const browser = await buildEmbedder('hashing', undefined, () => undefined);
    expect(browser.embedder.dim).toBe(BROWSER_HASHING_DIM);
    const bytes = readFileSync(out);
    const file = decodeCatalogVectors(bytes);
    expect(file.header.embedder).toBe(browser.embedder.id);
    expect(file.header.embedder).toBe('hashing-256@1');
    expect(file.header.dim).toBe(256);
    expect(file.header.items).toEqual(ITEMS.map((it) => [it.id, itemTextHash(it)]));
    const direct = await browser.embedder.embed(ITEMS.map((it) => itemText(it)));
    ITEMS.forEach((it, i) => expect(bits(file.vectors.get(it.id)!.vector)).toEqual(bits(direct[i].vector)));

    const summary = r.stdout.trim();
    expect(r.stdout.split('\n').filter(Boolean)).toHaveLength(1);
    expect(summary).toContain(out);
    expect(summary).toMatch(/ 5 items, embedder hashing-256@1, dim 256, /);
    expect(summary).toContain(` ${bytes.length} bytes, `);
    expect(summary).toMatch(/ [0-9.]+ s \(model load [0-9.]+ s\); 0 from the cache, 5 embedded at [0-9]+ items\/s \(cache /);
  });

  it('--dim gives the id the browser engine gives { kind: "hashing", dim }', async () => {
    const out = join(dir, 'v64.bin');
    const r = await run('--catalog', catalogFile('c.json', ITEMS), '--out', out, '--embedder', 'hashing', '--dim', '64', '--no-progress');
    expect(r.code).toBe(0);
    const browser = await buildEmbedder({ kind: 'hashing', dim: 64 }, undefined, () => undefined);
    const file = decodeCatalogVectors(readFileSync(out));
    expect(file.header.embedder).toBe(browser.embedder.id);
    expect(file.header.dim).toBe(64);
    const direct = await hashingVectors(64, ITEMS);
    ITEMS.forEach((it, i) => expect(bits(file.vectors.get(it.id)!.vector)).toEqual(bits(direct[i])));
  });

  it('reads an array, { items }, and JSON Lines alike; --batch does not change the vectors', async () => {
    const jsonl = `${ITEMS.map((it) => JSON.stringify(it)).join('\n')}\n\n`;
    const inputs = [catalogFile('a.json', ITEMS), catalogFile('b.json', { items: ITEMS, shop: 'demo' }), catalogFile('c.jsonl', jsonl)];
    const vectorsOf = async (catalog: string, ...extra: string[]) => {
      const out = join(dir, 'out.bin');
      const r = await run('--catalog', catalog, '--out', out, '--embedder', 'hashing', '--no-progress', ...extra);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const file = decodeCatalogVectors(readFileSync(out));
      return file.header.items.map(([id, hash]) => [id, hash, bits(file.vectors.get(id)!.vector)]);
    };
    const expected = await vectorsOf(inputs[0]);
    expect(expected.map((row) => row[0])).toEqual(ITEMS.map((it) => it.id));
    for (const input of inputs.slice(1)) expect(await vectorsOf(input)).toEqual(expected);
    expect(await vectorsOf(inputs[0], '--batch', '2')).toEqual(expected);
  });

  it('replaces an existing output file and leaves no temporary file', async () => {
    const out = join(dir, 'vectors.bin');
    writeFileSync(out, 'old');
    const r = await run('--catalog', catalogFile('c.json', ITEMS), '--out', out, '--embedder', 'hashing', '--no-progress');
    expect(r.code).toBe(0);
    expect(decodeCatalogVectors(readFileSync(out)).vectors.size).toBe(5);
    expectOnly('c.json', 'vectors.bin');
  });

  it('draws a progress bar on stderr unless --no-progress', async () => {
    const r = await run('--catalog', catalogFile('c.json', ITEMS), '--out', join(dir, 'v.bin'), '--embedder', 'hashing', '--batch', '2');
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('5/5 items');
  });

  describe('bad input: exit 2, a clear message, no output file', () => {
    const cases: [string, () => [name: string, content: unknown] | null, string[], RegExp][] = [
      ['a missing catalog file', () => null, [], /cannot read --catalog .*missing\.json: no such file/],
      ['invalid JSON', () => ['c.json', '[{"id": "a", "title": "x"},'], [], /c\.json is not valid JSON/],
      ['an invalid JSON Lines line', () => ['c.jsonl', '{"id":"a","title":"x"}\n{"id":"b",\n'], [], /c\.jsonl: line 2 is not valid JSON/],
      [
        'neither an array nor { items }',
        () => ['c.json', { products: ITEMS }],
        [],
        /expected a JSON array of items or an object \{ "items": \[\.\.\.\] \}, got an object without an "items" array/,
      ],
      ['an empty catalog', () => ['c.json', []], [], /the catalog has no items/],
      [
        'a duplicate id',
        () => ['c.json', [...ITEMS, { id: 'sku-2', title: 'Again' }]],
        [],
        /item 5 \("sku-2"\): id "sku-2" already used by item 1; ids must be unique/,
      ],
      [
        'a duplicate id in JSON Lines (names the lines)',
        () => ['c.jsonl', '{"id":"a","title":"x"}\n\n{"id":"a","title":"y"}\n'],
        [],
        /line 3: item 1 \("a"\): id "a" already used by item 0 \(line 1\)/,
      ],
      [
        'an item without a title',
        () => ['c.json', [ITEMS[0], { id: 'sku-9', description: 'no title' }]],
        [],
        /item 1 \("sku-9"\): "title" is missing, expected a string/,
      ],
      ['an item without an id', () => ['c.json', [ITEMS[0], { title: 'anonymous' }]], [], /item 1: "id" is missing, expected a non-empty string/],
      ['an empty id', () => ['c.json', [{ id: '', title: 'x' }]], [], /item 0: "id" is an empty string, expected a non-empty string/],
      ['a non-object item', () => ['c.json', [ITEMS[0], 'sku-2']], [], /item 1 is a string, expected an object/],
      [
        'categories not an array',
        () => ['c.json', [{ id: 'a', title: 'x', categories: 'Shoes' }]],
        [],
        /item 0 \("a"\): "categories" is a string, expected an array of strings/,
      ],
      [
        'a category not a string',
        () => ['c.json', [{ id: 'a', title: 'x', categories: ['Shoes', 3] }]],
        [],
        /item 0 \("a"\): categories\[1\] is number, expected a string/,
      ],
      [
        'a description not a string',
        () => ['c.json', [{ id: 'a', title: 'x', description: null }]],
        [],
        /item 0 \("a"\): "description" is null, expected a string/,
      ],
      ['an unknown embedder', () => ['c.json', ITEMS], ['--embedder', 'word2vec'], /argument 'word2vec' is invalid\. Allowed choices are use-lite, hashing/],
      ['--dim with use-lite', () => ['c.json', ITEMS], ['--dim', '64'], /--dim applies to --embedder hashing only/],
      ['--dim out of range', () => ['c.json', ITEMS], ['--embedder', 'hashing', '--dim', '1'], /--dim must be an integer in 2\.\.65536/],
      ['--batch 0', () => ['c.json', ITEMS], ['--embedder', 'hashing', '--batch', '0'], /--batch must be an integer in 1\.\./],
      ['an unknown option', () => ['c.json', ITEMS], ['--embeder', 'hashing'], /unknown option '--embeder'/],
    ];
    for (const [label, content, extra, message] of cases) {
      it(label, async () => {
        const c = content();
        const catalog = c ? catalogFile(c[0], c[1]) : join(dir, 'missing.json');
        const out = join(dir, 'vectors.bin');
        const r = await run('--catalog', catalog, '--out', out, '--no-progress', ...extra);
        expect(r.code).toBe(2);
        expect(r.stderr).toMatch(message);
        expect(r.stdout).toBe('');
        expect(existsSync(out)).toBe(false);
        expectOnly(...(c ? [c[0]] : []));
      });
    }

    it('missing --catalog or --out', async () => {
      const r1 = await run('--out', join(dir, 'v.bin'));
      expect(r1.code).toBe(2);
      expect(r1.stderr).toMatch(/required option '--catalog <file>' not specified/);
      const r2 = await run('--catalog', catalogFile('c.json', ITEMS));
      expect(r2.code).toBe(2);
      expect(r2.stderr).toMatch(/required option '--out <file>' not specified/);
      expectOnly('c.json');
    });

    it('a failed run leaves an existing output file untouched', async () => {
      const out = join(dir, 'vectors.bin');
      writeFileSync(out, 'previous good file');
      const r = await run(
        '--catalog',
        catalogFile('c.json', [ITEMS[0], { id: 'sku-1', title: 'dup' }]),
        '--out',
        out,
        '--embedder',
        'hashing',
        '--no-progress',
      );
      expect(r.code).toBe(2);
      expect(readFileSync(out, 'utf8')).toBe('previous good file');
      expectOnly('c.json', 'vectors.bin');
    });

    it('--out in a directory that does not exist', async () => {
      const out = join(dir, 'no', 'such', 'vectors.bin');
      const r = await run('--catalog', catalogFile('c.json', ITEMS), '--out', out, '--embedder', 'hashing', '--no-progress');
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`--out ${out}: directory ${join(dir, 'no', 'such')} does not exist (create it first)`);
      expect(existsSync(join(dir, 'no'))).toBe(false);
    });

    it('--out naming a directory', async () => {
      const r = await run('--catalog', catalogFile('c.json', ITEMS), '--out', dir, '--embedder', 'hashing', '--no-progress');
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/is a directory; give a file name/);
      expectOnly('c.json');
    });
  });

  it('--help exits 0', async () => {
    const r = await run('--help');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Usage: atomem-vectors/);
    expect(r.stdout).toMatch(/--embedder <kind>/);
  });

  it("use-lite: the browser engine's default id and the vectors USE-lite gives directly", async () => {
    const catalog = catalogFile('c.json', ITEMS);
    const out = join(dir, 'use-lite.bin');
    const r = await run('--catalog', catalog, '--out', out, '--no-progress');
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const { createUseLiteEmbedder, USE_LITE_ID } = await import('../src/embed/use-lite.js');
    const file = decodeCatalogVectors(readFileSync(out));
    // the browser builds the same UseLite class (buildEmbedder 'use-lite'), whose id is a constant
    expect(file.header.embedder).toBe(USE_LITE_ID);
    expect(file.header.dim).toBe(512);
    expect(r.stdout).toMatch(/ 5 items, embedder use-lite@0\.2\.0\/uint8, dim 512, /);
    const use = await createUseLiteEmbedder();
    try {
      // one call with the same 5 texts, as the CLI made: same batch, so bit-identical
      const direct = await use.embed(ITEMS.map((it) => itemText(it)));
      ITEMS.forEach((it, i) => {
        const row = file.vectors.get(it.id)!;
        expect(row.hash).toBe(itemTextHash(it));
        expect(bits(row.vector)).toEqual(bits(direct[i].vector));
      });
    } finally {
      await use.dispose?.();
    }
  }, 120_000);
});
