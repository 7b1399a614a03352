import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { resolveConfig } from '../src/core/config.js';
import {
  actionWeight,
  appendEvent,
  createState,
  decay,
  extract,
  forget,
  markProcessed,
  memorySimilarity,
  merge,
  pendingEvents,
  reinforce,
  resynthesize,
  salience,
  validateInteraction,
  weaken,
  type OpContext,
} from '../src/core/memory.js';
import type { AtomicMemory, Embedding, Interaction, MemoryState } from '../src/core/types.js';
import { ACTION_WEIGHTS } from '../src/core/types.js';
import { dot, norm, normalize } from '../src/core/vector.js';

const EMB = 'test-3@1';
const DAY = 86_400_000;
const T0 = Date.UTC(2024, 0, 1);

function emb(v: number[], embedderId = EMB): Embedding {
  return { embedderId, vector: Float32Array.from(v) };
}

function ctxAt(now: number, prefix = 'm'): OpContext {
  let n = 0;
  return { now, newId: () => `${prefix}${++n}` };
}

function clone<T>(x: T): T {
  return structuredClone(x);
}

describe('validateInteraction', () => {
  it('defaults the action to click', () => {
    expect(validateInteraction({ item: 'heat', at: T0 })).toEqual({ item: 'heat', at: T0, action: 'click' });
  });

  it.each([
    [{ item: '', at: T0 }, /interaction\.item must be a non-empty string/],
    [{ item: 42, at: T0 }, /interaction\.item/],
    [{ item: 'heat', at: Number.NaN }, /interaction\.at must be a finite number .*got NaN/],
    [{ item: 'heat', at: Infinity }, /interaction\.at/],
    [{ item: 'heat', at: '2024-01-01' }, /interaction\.at/],
    [{ item: 'heat', at: T0, action: 'love' }, /interaction\.action must be one of view, click.*got love/],
    [null, /interaction must be an object/],
  ])('rejects %j with a TypeError naming the field', (bad, msg) => {
    expect(() => validateInteraction(bad as unknown as Interaction)).toThrow(TypeError);
    expect(() => validateInteraction(bad as unknown as Interaction)).toThrow(msg);
  });

  it('does not accept Object.prototype names as actions', () => {
    expect(() => validateInteraction({ item: 'x', at: 1, action: 'toString' as never })).toThrow(/action/);
  });
});

describe('tier 1: event FIFO', () => {
  it('assigns monotonic sequence numbers starting at 1', () => {
    const cfg = resolveConfig({ maxEvents: 3 });
    const s = createState();
    const seqs: number[] = [];
    for (let i = 0; i < 10; i++) {
      const ev = appendEvent(s, cfg, validateInteraction({ item: `i${i}`, at: T0 + i, action: 'view' }));
      seqs.push(ev.seq);
      markProcessed(s, ev.seq);
    }
    expect(seqs).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(s.nextSeq).toBe(11);
  });

  it('drops the oldest processed events beyond maxEvents', () => {
    const cfg = resolveConfig({ maxEvents: 3 });
    const s = createState();
    for (let i = 0; i < 6; i++) markProcessed(s, appendEvent(s, cfg, validateInteraction({ item: `i${i}`, at: T0 + i })).seq);
    expect(s.events.map((e) => e.item)).toEqual(['i3', 'i4', 'i5']);
  });

  it('never drops a pending event, even beyond the bound', () => {
    const cfg = resolveConfig({ maxEvents: 2 });
    const s = createState();
    for (let i = 0; i < 5; i++) appendEvent(s, cfg, validateInteraction({ item: `p${i}`, at: T0 + i }));
    expect(s.events).toHaveLength(5);
    expect(pendingEvents(s).map((e) => e.item)).toEqual(['p0', 'p1', 'p2', 'p3', 'p4']);
    // once processed, the next append drops the processed ones (only pending remain beyond the bound)
    markProcessed(s, 1);
    markProcessed(s, 2);
    markProcessed(s, 3);
    expect(s.events).toHaveLength(5); // trimming happens on append, not on markProcessed
    appendEvent(s, cfg, validateInteraction({ item: 'p5', at: T0 + 5 }));
    expect(s.events.map((e) => e.item)).toEqual(['p3', 'p4', 'p5']);
    expect(s.events.every((e) => e.pending)).toBe(true);
    // and when enough are processed, it is back within the bound
    markProcessed(s, 4);
    markProcessed(s, 5);
    appendEvent(s, cfg, validateInteraction({ item: 'p6', at: T0 + 6 }));
    expect(s.events.map((e) => e.item)).toEqual(['p5', 'p6']);
  });

  it('drops processed events before older pending ones', () => {
    const cfg = resolveConfig({ maxEvents: 2 });
    const s = createState();
    appendEvent(s, cfg, validateInteraction({ item: 'old-pending', at: T0 }));
    markProcessed(s, appendEvent(s, cfg, validateInteraction({ item: 'done', at: T0 + 1 })).seq);
    appendEvent(s, cfg, validateInteraction({ item: 'new', at: T0 + 2 }));
    expect(s.events.map((e) => e.item)).toEqual(['old-pending', 'new']);
  });

  it('FIFO invariants hold for any append/process sequence (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(fc.boolean(), { maxLength: 40 }), (maxEvents, ops) => {
        const cfg = resolveConfig({ maxEvents });
        const s = createState();
        let appended = 0;
        const processedSeqs = new Set<number>();
        for (const processOldest of ops) {
          if (processOldest && pendingEvents(s).length) {
            const seq = pendingEvents(s)[0].seq;
            markProcessed(s, seq);
            processedSeqs.add(seq);
          } else {
            appendEvent(s, cfg, validateInteraction({ item: `i${appended}`, at: T0 + appended }));
            appended++;
            // right after an append: bounded unless the excess is all pending
            const processed = s.events.filter((e) => !e.pending).length;
            expect(s.events.length <= maxEvents || processed === 0).toBe(true);
          }
          const seqs = s.events.map((e) => e.seq);
          // oldest first, strictly increasing
          for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1]);
        }
        // every event never processed is still there, as pending
        const pending = pendingEvents(s).map((e) => e.seq);
        const expected = Array.from({ length: appended }, (_, i) => i + 1).filter((q) => !processedSeqs.has(q));
        expect(pending).toEqual(expected);
        expect(s.nextSeq).toBe(appended + 1);
      }),
    );
  });

  it('rejects a bad interaction and leaves the state unchanged', () => {
    const cfg = resolveConfig();
    const s = createState();
    appendEvent(s, cfg, validateInteraction({ item: 'heat', at: T0 }));
    const before = clone(s);
    // validated where it enters (the engine, the agent's observe), before the state is touched
    expect(() => validateInteraction({ item: '', at: T0 })).toThrow(/item/);
    expect(() => validateInteraction({ item: 'heat', at: Number.NaN })).toThrow(/at/);
    expect(() => validateInteraction({ item: 'heat', at: T0, action: 'adore' as never })).toThrow(/action/);
    expect(s).toEqual(before);
  });

  it('markProcessed is idempotent and counts each event once', () => {
    const cfg = resolveConfig();
    const s = createState();
    const ev = appendEvent(s, cfg, validateInteraction({ item: 'heat', at: T0 }));
    expect(markProcessed(s, ev.seq)).toBe(true);
    expect(markProcessed(s, ev.seq)).toBe(false);
    expect(markProcessed(s, 999)).toBe(false);
    expect(s.signal.eventsSinceSweep).toBe(1);
    expect(s.signal.eventsSinceSynthesis).toBe(1);
    expect(pendingEvents(s)).toEqual([]);
  });

  it('actionWeight follows ACTION_WEIGHTS with click as default', () => {
    expect(actionWeight(undefined)).toBe(ACTION_WEIGHTS.click);
    expect(actionWeight('dislike')).toBeLessThan(0);
    expect(actionWeight('purchase')).toBe(1);
  });
});

describe('extract', () => {
  it('forms a memory linked to the item with strength = initialStrength × weight and a unit embedding', () => {
    const cfg = resolveConfig({ initialStrength: 0.4 });
    const s = createState();
    const { memory, event } = extract(s, cfg, ctxAt(T0), {
      item: 'heat',
      vector: emb([3, 4, 0]),
      weight: 0.5,
      content: 'Shows some interest in crime thrillers such as Heat (1995)',
      category: 'Crime',
    });
    expect(s.memories).toEqual([memory]);
    expect(memory.id).toBe('m1');
    expect(memory.items).toEqual(['heat']);
    expect(memory.strength).toBeCloseTo(0.2, 12);
    expect(memory.evidence).toBe(0.5);
    expect(memory.links).toEqual([]);
    expect(memory.category).toBe('Crime');
    expect(memory.embedding.embedderId).toBe(EMB);
    expect(norm(memory.embedding.vector)).toBeCloseTo(1, 6);
    expect([...memory.embedding.vector]).toEqual([expect.closeTo(0.6, 6), expect.closeTo(0.8, 6), 0]);
    expect(memory.createdAt).toBe(T0);
    expect(memory.updatedAt).toBe(T0);
    expect(event).toEqual({ op: 'extract', memoryId: 'm1', at: T0, detail: 'heat' });
  });

  it('a negative weight forms an "avoids" memory with positive evidence', () => {
    const cfg = resolveConfig();
    const s = createState();
    const { memory } = extract(s, cfg, ctxAt(T0), { item: 'titanic', vector: emb([0, 1, 0]), weight: -1, content: 'Avoids romance', category: 'Romance' });
    expect(memory.strength).toBeCloseTo(-cfg.initialStrength, 12);
    expect(memory.evidence).toBe(1);
  });

  it('does not alias the input vector', () => {
    const s = createState();
    const v = emb([1, 0, 0]);
    const { memory } = extract(s, resolveConfig(), ctxAt(T0), { item: 'a', vector: v, weight: 1, content: 'c', category: 'C' });
    v.vector[0] = 42;
    expect(memory.embedding.vector[0]).toBe(1);
  });

  it.each([
    ['a NaN vector', { vector: emb([Number.NaN, 1, 0]), weight: 1 }, /NaN/],
    ['an infinite vector', { vector: emb([Infinity, 1, 0]), weight: 1 }, /NaN or Infinity/],
    ['a zero vector', { vector: emb([0, 0, 0]), weight: 1 }, /zero/],
    ['a zero weight', { vector: emb([1, 0, 0]), weight: 0 }, /non-zero finite weight/],
    ['a NaN weight', { vector: emb([1, 0, 0]), weight: Number.NaN }, /non-zero finite weight/],
  ])('rejects %s and adds nothing', (_name, bad, msg) => {
    const s = createState();
    const ids: string[] = [];
    const ctx: OpContext = { now: T0, newId: () => (ids.push('x'), 'x') };
    expect(() => extract(s, resolveConfig(), ctx, { item: 'a', content: 'c', category: 'C', ...bad })).toThrow(msg);
    expect(s.memories).toEqual([]);
  });
});

function freshMemory(over: Partial<AtomicMemory> = {}): AtomicMemory {
  return {
    id: 'crime',
    content: 'Enjoys crime thrillers such as Heat (1995)',
    category: 'Crime',
    embedding: emb([1, 0, 0]),
    items: ['heat'],
    strength: 0.3,
    evidence: 1,
    links: ['c1'],
    createdAt: T0,
    updatedAt: T0,
    ...over,
  };
}

describe('reinforce', () => {
  it('moves the embedding toward the item, raises strength, adds evidence and links the item', () => {
    const cfg = resolveConfig({ learningRate: 0.2 });
    const m = freshMemory();
    const item = emb([0, 1, 0]);
    const simBefore = dot(m.embedding.vector, item.vector);
    const e = reinforce(m, cfg, ctxAt(T0 + DAY), {
      item: 'fargo',
      vector: item,
      weight: 1,
      content: 'Enjoys crime thrillers such as Fargo (1996) and Heat (1995)',
    });
    expect(dot(m.embedding.vector, item.vector)).toBeGreaterThan(simBefore);
    expect(norm(m.embedding.vector)).toBeCloseTo(1, 6);
    // evidence-weighted running mean: alpha = 1 / (1 + 1) → halfway
    expect(m.embedding.vector[0]).toBeCloseTo(Math.SQRT1_2, 5);
    expect(m.embedding.vector[1]).toBeCloseTo(Math.SQRT1_2, 5);
    expect(m.strength).toBeCloseTo(0.3 + 0.2 * 1 * (1 - 0.3), 12);
    expect(m.evidence).toBe(2);
    expect(m.items).toEqual(['heat', 'fargo']);
    expect(m.content).toMatch(/Fargo/);
    expect(m.category).toBe('Crime');
    expect(m.links).toEqual(['c1']);
    expect(m.updatedAt).toBe(T0 + DAY);
    expect(m.createdAt).toBe(T0);
    expect(e).toEqual({ op: 'reinforce', memoryId: 'crime', at: T0 + DAY, detail: 'fargo' });
  });

  it('keeps the old statement when no new content is given', () => {
    const m = freshMemory();
    reinforce(m, resolveConfig(), ctxAt(T0), { item: 'fargo', vector: emb([1, 0, 0]), weight: 1 });
    expect(m.content).toBe('Enjoys crime thrillers such as Heat (1995)');
  });

  it('strength grows toward 1 and never exceeds it', () => {
    const cfg = resolveConfig({ learningRate: 1 });
    const m = freshMemory({ strength: 0.9 });
    let prev = m.strength;
    for (let i = 0; i < 50; i++) {
      reinforce(m, cfg, ctxAt(T0 + i), { item: `i${i}`, vector: emb([1, 0.1, 0]), weight: 1 });
      expect(m.strength).toBeLessThanOrEqual(1);
      expect(m.strength).toBeGreaterThanOrEqual(prev);
      prev = m.strength;
    }
    expect(m.strength).toBeCloseTo(1, 6);
  });

  it('strength stays in [-1, 1] for any sequence of weights (property)', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(fc.constantFrom(...Object.values(ACTION_WEIGHTS)), { minLength: 1, maxLength: 30 }),
        (lr, ws) => {
          const cfg = resolveConfig({ learningRate: lr });
          const m = freshMemory();
          ws.forEach((w, i) => reinforce(m, cfg, ctxAt(T0), { item: `i${i}`, vector: emb([1, i % 3, 0]), weight: w }));
          expect(m.strength).toBeGreaterThanOrEqual(-1);
          expect(m.strength).toBeLessThanOrEqual(1);
          expect(m.evidence).toBeCloseTo(1 + ws.reduce((a, w) => a + Math.abs(w), 0), 9);
        },
      ),
    );
  });

  it('a dislike folded into a negative memory makes it more negative', () => {
    const m = freshMemory({ strength: -0.3 });
    reinforce(m, resolveConfig({ learningRate: 0.2 }), ctxAt(T0), { item: 'titanic', vector: emb([1, 0, 0]), weight: -1 });
    expect(m.strength).toBeCloseTo(-0.3 - 0.2 * (1 - 0.3), 12);
    expect(m.evidence).toBe(2);
  });

  it('keeps at most maxItemsPerMemory items, most recent last, and re-seen items move to the end', () => {
    const cfg = resolveConfig({ maxItemsPerMemory: 3 });
    const m = freshMemory({ items: [] });
    for (const it of ['a', 'b', 'c', 'd', 'b']) reinforce(m, cfg, ctxAt(T0), { item: it, vector: emb([1, 0, 0]), weight: 0.5 });
    expect(m.items).toEqual(['c', 'd', 'b']);
  });

  it('rejects a vector of another embedder, leaving the memory unchanged', () => {
    const m = freshMemory();
    const before = clone(m);
    expect(() => reinforce(m, resolveConfig(), ctxAt(T0 + 1), { item: 'fargo', vector: emb([0, 1, 0], 'other@1'), weight: 1 })).toThrow(/embedder mismatch/);
    expect(m).toEqual(before);
  });

  it('rejects a vector of the wrong dimension or with NaN, leaving the memory unchanged', () => {
    const m = freshMemory();
    const before = clone(m);
    expect(() => reinforce(m, resolveConfig(), ctxAt(T0 + 1), { item: 'fargo', vector: emb([0, 1]), weight: 1 })).toThrow(
      /dimension 2 does not match the memory's 3/,
    );
    expect(() => reinforce(m, resolveConfig(), ctxAt(T0 + 1), { item: 'fargo', vector: emb([0, Number.NaN, 0]), weight: 1 })).toThrow(/NaN/);
    expect(m).toEqual(before);
  });
});

describe('weaken', () => {
  it('lowers strength by learningRate × amount × (1 + s)', () => {
    const cfg = resolveConfig({ learningRate: 0.2 });
    const m = freshMemory({ strength: 0.5 });
    const e = weaken(m, cfg, ctxAt(T0 + 5), 0.25, 'misled');
    expect(m.strength).toBeCloseTo(0.5 - 0.2 * 0.25 * 1.5, 12);
    expect(m.updatedAt).toBe(T0 + 5);
    expect(e).toEqual({ op: 'weaken', memoryId: 'crime', at: T0 + 5, detail: 'misled' });
  });

  it('never goes below −1, even with a large amount', () => {
    const cfg = resolveConfig({ learningRate: 1 });
    const m = freshMemory({ strength: 0.9 });
    for (let i = 0; i < 20; i++) {
      weaken(m, cfg, ctxAt(T0), 5);
      expect(m.strength).toBeGreaterThanOrEqual(-1);
    }
    expect(m.strength).toBe(-1);
  });

  it('leaves items, evidence and the embedding alone', () => {
    const m = freshMemory();
    weaken(m, resolveConfig(), ctxAt(T0), 1);
    expect(m.items).toEqual(['heat']);
    expect(m.evidence).toBe(1);
    expect([...m.embedding.vector]).toEqual([1, 0, 0]);
  });

  it('rejects a negative or NaN amount', () => {
    const m = freshMemory();
    expect(() => weaken(m, resolveConfig(), ctxAt(T0), -1)).toThrow(/≥ 0/);
    expect(() => weaken(m, resolveConfig(), ctxAt(T0), Number.NaN)).toThrow(RangeError);
    expect(m.strength).toBe(0.3);
  });
});

function stateWith(...ms: AtomicMemory[]): MemoryState {
  const s = createState();
  s.memories = ms;
  return s;
}

describe('merge', () => {
  it('absorbs b into a: items unioned, evidence-weighted strength and embedding, links kept, b removed', () => {
    const cfg = resolveConfig();
    const a = freshMemory({
      id: 'a',
      items: ['heat', 'fargo'],
      strength: 0.6,
      evidence: 3,
      links: ['c1'],
      embedding: emb([1, 0, 0]),
      updatedAt: T0 + 2 * DAY,
      createdAt: T0 + DAY,
    });
    const b = freshMemory({
      id: 'b',
      items: ['casino', 'heat'],
      strength: 0.2,
      evidence: 1,
      links: ['c2', 'c1'],
      embedding: emb([0, 1, 0]),
      updatedAt: T0,
      createdAt: T0,
    });
    const s = stateWith(a, b);
    const e = merge(s, cfg, ctxAt(T0 + 3 * DAY), 'a', 'b', { content: 'Loves crime films', category: 'Crime' });
    expect(s.memories.map((m) => m.id)).toEqual(['a']);
    // b is older, so its items come first; duplicates appear once, most recent last
    expect(a.items).toEqual(['casino', 'heat', 'fargo']);
    expect(a.strength).toBeCloseTo((0.6 * 3 + 0.2 * 1) / 4, 12);
    expect(a.evidence).toBe(4);
    expect(a.links).toEqual(['c1', 'c2']);
    expect(a.embedding.vector[0]).toBeCloseTo(3 / Math.sqrt(10), 6);
    expect(a.embedding.vector[1]).toBeCloseTo(1 / Math.sqrt(10), 6);
    expect(a.content).toBe('Loves crime films');
    expect(a.createdAt).toBe(T0);
    expect(a.updatedAt).toBe(T0 + 3 * DAY);
    expect(e).toEqual({ op: 'merge', memoryId: 'a', otherId: 'b', at: T0 + 3 * DAY });
  });

  it('puts the more recently updated memory items last', () => {
    const a = freshMemory({ id: 'a', items: ['a1'], updatedAt: T0 });
    const b = freshMemory({ id: 'b', items: ['b1'], updatedAt: T0 + DAY });
    const s = stateWith(a, b);
    merge(s, resolveConfig(), ctxAt(T0 + 2 * DAY), 'a', 'b', { content: 'x', category: 'X' });
    expect(a.items).toEqual(['a1', 'b1']);
  });

  it('bounds the merged items to maxItemsPerMemory, keeping the most recent', () => {
    const a = freshMemory({ id: 'a', items: ['a1', 'a2', 'a3'], updatedAt: T0 + DAY });
    const b = freshMemory({ id: 'b', items: ['b1', 'b2'], updatedAt: T0 });
    const s = stateWith(a, b);
    merge(s, resolveConfig({ maxItemsPerMemory: 3 }), ctxAt(T0 + 2 * DAY), 'a', 'b', { content: 'x', category: 'X' });
    expect(a.items).toEqual(['a1', 'a2', 'a3']);
  });

  it('rejects self-merge, unknown ids and mixed embedders without changing anything', () => {
    const cfg = resolveConfig();
    const a = freshMemory({ id: 'a' });
    const b = freshMemory({ id: 'b', embedding: emb([0, 1, 0], 'other@1') });
    const s = stateWith(a, b);
    const before = clone(s);
    const text = { content: 'x', category: 'X' };
    expect(() => merge(s, cfg, ctxAt(T0), 'a', 'a', text)).toThrow(/itself/);
    expect(() => merge(s, cfg, ctxAt(T0), 'a', 'nope', text)).toThrow(/unknown memory nope/);
    expect(() => merge(s, cfg, ctxAt(T0), 'ghost', 'a', text)).toThrow(/unknown memory ghost/);
    expect(() => merge(s, cfg, ctxAt(T0), 'a', 'b', text)).toThrow(/different embedders/);
    expect(s).toEqual(before);
  });
});

describe('forget', () => {
  it('removes the memory and returns a lifecycle event', () => {
    const s = stateWith(freshMemory({ id: 'a' }), freshMemory({ id: 'b' }));
    expect(forget(s, ctxAt(T0), 'a', 'asked')).toEqual({ op: 'forget', memoryId: 'a', at: T0, detail: 'asked' });
    expect(s.memories.map((m) => m.id)).toEqual(['b']);
  });
  it('returns null for an unknown id and changes nothing', () => {
    const s = stateWith(freshMemory({ id: 'a' }));
    expect(forget(s, ctxAt(T0), 'zzz')).toBeNull();
    expect(s.memories).toHaveLength(1);
  });
});

describe('resynthesize', () => {
  it('stores the narrative truncated to profileMaxChars and resets the signal counters', () => {
    const cfg = resolveConfig({ profileMaxChars: 10 });
    const s = createState();
    s.signal = { predictionErrors: 4, eventsSinceSynthesis: 17, eventsSinceSweep: 6 };
    const e = resynthesize(s, cfg, ctxAt(T0), 'Main interests: crime thrillers.', ['a', 'b']);
    expect(s.profile).toEqual({ narrative: 'Main inter', sources: ['a', 'b'], updatedAt: T0 });
    expect(s.signal).toEqual({ predictionErrors: 0, eventsSinceSynthesis: 0, eventsSinceSweep: 6 });
    expect(e.op).toBe('resynthesize');
  });
  it('keeps a short narrative whole', () => {
    const s = createState();
    resynthesize(s, resolveConfig(), ctxAt(T0), 'Likes noir.', []);
    expect(s.profile?.narrative).toBe('Likes noir.');
  });
});

describe('decay and salience', () => {
  const cfg = resolveConfig({ halfLifeDays: 10 });
  it('halves at halfLifeDays, quarters at twice that', () => {
    expect(decay(cfg, T0, T0)).toBe(1);
    expect(decay(cfg, T0, T0 + 10 * DAY)).toBeCloseTo(0.5, 12);
    expect(decay(cfg, T0, T0 + 20 * DAY)).toBeCloseTo(0.25, 12);
  });
  it('treats a future updatedAt as fresh (no boost above 1)', () => {
    expect(decay(cfg, T0 + DAY, T0)).toBe(1);
  });
  it('salience = strength × decay, keeping the sign', () => {
    const m = freshMemory({ strength: -0.8, updatedAt: T0 });
    expect(salience(cfg, m, T0 + 10 * DAY)).toBeCloseTo(-0.4, 12);
  });
  it('memorySimilarity is the cosine of unit embeddings', () => {
    const a = freshMemory({ embedding: { embedderId: EMB, vector: normalize([1, 1, 0]) } });
    const b = freshMemory({ embedding: emb([1, 0, 0]) });
    expect(memorySimilarity(a, b)).toBeCloseTo(Math.SQRT1_2, 6);
  });
});

describe('lastEventSeq (forgetting by activity)', () => {
  it('extract and reinforce record the event seq; weaken does not; merge keeps the later one', () => {
    const cfg = resolveConfig({});
    const s = createState();
    const ctx = ctxAt(T0);
    const { memory: a } = extract(s, cfg, ctx, { item: 'a', vector: emb([1, 0, 0]), weight: 1, seq: 3, content: 'a', category: 'A' });
    expect(a.lastEventSeq).toBe(3);
    reinforce(a, cfg, ctx, { item: 'a2', vector: emb([1, 0.1, 0]), weight: 1, seq: 9 });
    expect(a.lastEventSeq).toBe(9);
    // a replayed older event never moves it back
    reinforce(a, cfg, ctx, { item: 'a3', vector: emb([1, 0.1, 0]), weight: 1, seq: 5 });
    expect(a.lastEventSeq).toBe(9);
    weaken(a, cfg, ctxAt(T0 + DAY), 0.5, 'misled');
    expect(a.lastEventSeq).toBe(9);
    const { memory: b } = extract(s, cfg, ctx, { item: 'b', vector: emb([0.9, 0.1, 0]), weight: 1, seq: 12, content: 'b', category: 'A' });
    merge(s, cfg, ctx, a.id, b.id, { content: 'ab', category: 'A' });
    expect(s.memories.find((m) => m.id === a.id)!.lastEventSeq).toBe(12);
    // without a seq (older callers), nothing is recorded
    const { memory: c } = extract(s, cfg, ctx, { item: 'c', vector: emb([0, 0, 1]), weight: 1, content: 'c', category: 'C' });
    expect('lastEventSeq' in c).toBe(false);
  });
});
