import { describe, expect, it } from 'vitest';
import { checkConfigNames, DEFAULT_CONFIG } from '../src/core/config.js';
import { InvalidCatalogError } from '../src/errors.js';
import { editDistance, nearestName, OPTION_NAMES } from '../src/options.js';
import { validateCatalog } from '../src/worker/catalog.js';

// The run-time checks behind createAtomem's refusals (the browser side: packages/atomem/test/browser/client-errors.test.ts).

describe('nearest valid name', () => {
  it('edit distance', () => {
    expect(editDistance('embeder', 'embedder')).toBe(1);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('Catalog', 'catalog')).toBe(0);
  });

  it('suggests a near name, nothing for a stranger', () => {
    const top = [...OPTION_NAMES.engine, ...OPTION_NAMES.client];
    expect(nearestName('embeder', top)).toBe('embedder');
    expect(nearestName('catalogVector', top)).toBe('catalogVectors');
    expect(nearestName('onprogress', top)).toBe('onProgress');
    expect(nearestName('colour', top)).toBeUndefined();
  });
});

describe('config knobs', () => {
  it('every knob of the defaults (and of weights) is accepted; a typo names the knob', () => {
    expect(() => checkConfigNames({ ...DEFAULT_CONFIG })).not.toThrow();
    expect(() => checkConfigNames({ weights: { ...DEFAULT_CONFIG.weights }, shopWeights: { anySignal: 1 }, intentWeights: { intent: 1 } })).not.toThrow();
    expect(() => checkConfigNames({ tua: 0.3 })).toThrow(/atomem config: unknown option "tua" — did you mean "tau"\?/);
    expect(() => checkConfigNames({ weights: { profil: 1 } })).toThrow(/weights: unknown option "profil" — did you mean "profile"\?/);
    expect(() => checkConfigNames({ weights: { profil: 1 } })).toThrow(TypeError);
    expect(() => checkConfigNames(null)).toThrow(TypeError);
  });
});

describe('catalog validation', () => {
  const ok = [
    { id: 'tent', title: 'Tent', categories: ['Outdoor'], description: 'a tent' },
    { id: 'stove', title: '' },
  ];
  const refused = (catalog: unknown): InvalidCatalogError => {
    try {
      validateCatalog(catalog);
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidCatalogError);
      return e as InvalidCatalogError;
    }
    throw new Error('expected a refusal');
  };

  it('accepts a valid catalog (an empty title too: the text falls back to the id)', () => {
    expect(() => validateCatalog(ok)).not.toThrow();
    expect(() => validateCatalog([])).not.toThrow();
  });

  it('names the offending item and the case', () => {
    expect(refused({ items: ok })).toMatchObject({ reason: 'not-array', index: -1 });
    expect(refused([...ok, null])).toMatchObject({
      reason: 'item',
      index: 2,
      message: 'catalog[2] must be an object { id, title, categories?, description? }, got null',
    });
    expect(refused([...ok, { title: 'Boots' }])).toMatchObject({
      reason: 'id',
      index: 2,
      itemId: '',
      message: 'catalog[2] ("Boots") needs a non-empty string id, got undefined',
    });
    expect(refused([...ok, { id: 7, title: 'Boots' }])).toMatchObject({ reason: 'id', index: 2 });
    expect(refused([...ok, { id: 'boo\u0000ts', title: 'Boots' }])).toMatchObject({
      reason: 'id',
      index: 2,
      message: 'catalog[2]: its id holds a NUL character (\\u0000), which item ids may not',
    });
    expect(refused([...ok, { id: 'boots' }])).toMatchObject({
      reason: 'title',
      index: 2,
      itemId: 'boots',
      message: 'catalog[2] (id "boots") needs a string title, got undefined',
    });
    expect(refused([...ok, { id: 'boots', title: 'Boots', categories: 'Outdoor' }])).toMatchObject({ reason: 'categories', itemId: 'boots' });
    expect(refused([...ok, { id: 'boots', title: 'Boots', description: 7 }])).toMatchObject({ reason: 'description', itemId: 'boots' });
    expect(refused([...ok, { id: 'tent', title: 'Tent again' }])).toMatchObject({
      reason: 'duplicate',
      index: 2,
      itemId: 'tent',
      message: 'catalog[2] (id "tent") repeats the id of catalog[0]: catalog ids must be unique',
    });
  });
});
