/**
 * The export file format (versioned JSON) and its strict validation.
 */
import type { AtomicMemory, MemoryEvent, MemoryState, PlannerSignal, Profile } from '../core/types.js';
import { ACTION_WEIGHTS } from '../core/types.js';
import { InvalidImportError } from './errors.js';

/** An atomic memory as exported: the vector is a plain number array. */
export type ExportedMemory = Omit<AtomicMemory, 'embedding'> & { embedding: { embedderId: string; vector: number[] } };

/** A MemoryState as exported (JSON-safe). */
export type ExportedState = Omit<MemoryState, 'memories'> & { memories: ExportedMemory[] };

/** What `MemoryStore.export()` returns and `import()` accepts (`JSON.stringify` it to save). */
export interface ExportFile {
  format: 'atomem-export';
  version: 1;
  /** ISO 8601 time of the export. */
  exportedAt: string;
  state: ExportedState;
}

const EXPORT_FORMAT = 'atomem-export';
const EXPORT_VERSION = 1;

/** Serialize a state (deep copy; Float32Array → number[], exact). */
export function toExportFile(state: MemoryState, now: Date = new Date()): ExportFile {
  return {
    format: EXPORT_FORMAT,
    version: EXPORT_VERSION,
    exportedAt: now.toISOString(),
    state: {
      version: 1,
      nextSeq: state.nextSeq,
      events: state.events.map((e) => ({ ...e })),
      memories: state.memories.map((m) => ({
        ...m,
        embedding: { embedderId: m.embedding.embedderId, vector: Array.from(m.embedding.vector) },
        items: [...m.items],
        links: [...m.links],
      })),
      profile: state.profile ? { ...state.profile, sources: [...state.profile.sources] } : null,
      signal: { ...state.signal },
    },
  };
}

const ACTIONS = new Set(Object.keys(ACTION_WEIGHTS));

function fail(field: string, problem: string): never {
  throw new InvalidImportError(field, problem);
}

function obj(v: unknown, field: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) fail(field, `must be an object, got ${describe(v)}`);
  return v as Record<string, unknown>;
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'number') return String(v);
  return typeof v;
}

function str(v: unknown, field: string, nonEmpty = false): string {
  if (typeof v !== 'string') fail(field, `must be a string, got ${describe(v)}`);
  if (nonEmpty && v.length === 0) fail(field, 'must be a non-empty string');
  return v;
}

function num(v: unknown, field: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) fail(field, `must be a finite number, got ${describe(v)}`);
  return v;
}

function int(v: unknown, field: string, min: number): number {
  const n = num(v, field);
  if (!Number.isInteger(n) || n < min) fail(field, `must be an integer ≥ ${min}, got ${n}`);
  return n;
}

function strArray(v: unknown, field: string): string[] {
  if (!Array.isArray(v)) fail(field, `must be an array, got ${describe(v)}`);
  return v.map((s, i) => str(s, `${field}[${i}]`));
}

function arr(v: unknown, field: string): unknown[] {
  if (!Array.isArray(v)) fail(field, `must be an array, got ${describe(v)}`);
  return v;
}

function parseEvent(v: unknown, f: string): MemoryEvent {
  const o = obj(v, f);
  const action = str(o.action, `${f}.action`);
  if (!ACTIONS.has(action)) fail(`${f}.action`, `must be one of ${[...ACTIONS].join(', ')}, got ${action}`);
  if (typeof o.pending !== 'boolean') fail(`${f}.pending`, `must be a boolean, got ${describe(o.pending)}`);
  return {
    seq: int(o.seq, `${f}.seq`, 1),
    item: str(o.item, `${f}.item`, true),
    at: num(o.at, `${f}.at`),
    action: action as MemoryEvent['action'],
    pending: o.pending,
  };
}

function parseMemory(v: unknown, f: string, dims: Map<string, number>): AtomicMemory {
  const o = obj(v, f);
  const e = obj(o.embedding, `${f}.embedding`);
  const embedderId = str(e.embedderId, `${f}.embedding.embedderId`, true);
  const raw = arr(e.vector, `${f}.embedding.vector`);
  if (raw.length === 0) fail(`${f}.embedding.vector`, 'must not be empty');
  const vector = new Float32Array(raw.length);
  raw.forEach((x, i) => {
    const field = `${f}.embedding.vector[${i}]`;
    vector[i] = num(x, field);
    // why: a finite double can still overflow float32 (e.g. 1e39 → Infinity).
    if (!Number.isFinite(vector[i])) fail(field, `overflows float32: ${String(x)}`);
  });
  const dim = dims.get(embedderId);
  if (dim === undefined) dims.set(embedderId, vector.length);
  else if (dim !== vector.length) fail(`${f}.embedding.vector`, `has dimension ${vector.length}, other memories of embedder ${embedderId} have ${dim}`);
  const strength = num(o.strength, `${f}.strength`);
  if (strength < -1 || strength > 1) fail(`${f}.strength`, `must be in [-1, 1], got ${strength}`);
  const evidence = num(o.evidence, `${f}.evidence`);
  if (evidence < 0) fail(`${f}.evidence`, `must be ≥ 0, got ${evidence}`);
  return {
    id: str(o.id, `${f}.id`, true),
    content: str(o.content, `${f}.content`),
    category: str(o.category, `${f}.category`),
    embedding: { embedderId, vector },
    items: strArray(o.items, `${f}.items`),
    strength,
    evidence,
    links: strArray(o.links, `${f}.links`),
    createdAt: num(o.createdAt, `${f}.createdAt`),
    updatedAt: num(o.updatedAt, `${f}.updatedAt`),
    ...(o.lastEventSeq !== undefined ? { lastEventSeq: int(o.lastEventSeq, `${f}.lastEventSeq`, 0) } : {}),
  };
}

function parseProfile(v: unknown, f: string): Profile | null {
  if (v === null) return null;
  const o = obj(v, f);
  return { narrative: str(o.narrative, `${f}.narrative`), sources: strArray(o.sources, `${f}.sources`), updatedAt: num(o.updatedAt, `${f}.updatedAt`) };
}

function parseSignal(v: unknown, f: string): PlannerSignal {
  const o = obj(v, f);
  const n = (k: keyof PlannerSignal): number => {
    const x = num(o[k], `${f}.${k}`);
    if (x < 0) fail(`${f}.${k}`, `must be ≥ 0, got ${x}`);
    return x;
  };
  return { predictionErrors: n('predictionErrors'), eventsSinceSynthesis: n('eventsSinceSynthesis'), eventsSinceSweep: n('eventsSinceSweep') };
}

/**
 * Validate an import file completely and return the MemoryState it holds (fresh objects,
 * Float32Array vectors). Throws {@link InvalidImportError} naming the first bad field.
 */
export function parseExportFile(file: unknown): MemoryState {
  const root = obj(file, '');
  if (root.format !== EXPORT_FORMAT) fail('format', `must be "${EXPORT_FORMAT}", got ${JSON.stringify(root.format) ?? 'undefined'}`);
  if (root.version !== EXPORT_VERSION)
    fail('version', `must be ${EXPORT_VERSION} (this version of atomem reads version ${EXPORT_VERSION}), got ${JSON.stringify(root.version) ?? 'undefined'}`);
  const at = str(root.exportedAt, 'exportedAt');
  if (Number.isNaN(Date.parse(at))) fail('exportedAt', `must be an ISO 8601 date, got ${JSON.stringify(at)}`);
  const s = obj(root.state, 'state');
  if (s.version !== 1) fail('state.version', `must be 1, got ${JSON.stringify(s.version) ?? 'undefined'}`);
  const nextSeq = int(s.nextSeq, 'state.nextSeq', 1);
  const events = arr(s.events, 'state.events').map((e, i) => parseEvent(e, `state.events[${i}]`));
  const seqs = new Set<number>();
  events.forEach((e, i) => {
    if (seqs.has(e.seq)) fail(`state.events[${i}].seq`, `duplicates sequence number ${e.seq}`);
    if (e.seq >= nextSeq) fail(`state.events[${i}].seq`, `must be < state.nextSeq (${nextSeq}), got ${e.seq}`);
    seqs.add(e.seq);
  });
  const dims = new Map<string, number>();
  const memories = arr(s.memories, 'state.memories').map((m, i) => parseMemory(m, `state.memories[${i}]`, dims));
  const ids = new Set<string>();
  memories.forEach((m, i) => {
    if (ids.has(m.id)) fail(`state.memories[${i}].id`, `duplicates memory id ${JSON.stringify(m.id)}`);
    ids.add(m.id);
  });
  return { version: 1, nextSeq, events, memories, profile: parseProfile(s.profile, 'state.profile'), signal: parseSignal(s.signal, 'state.signal') };
}
