/**
 * The three tiers and the six lifecycle operations, as pure functions over a MemoryState.
 * No I/O: text comes from a Reasoner and vectors from an Embedder, both passed in by the agent.
 * Operations mutate the state they are given (the caller owns it) and return what changed.
 */
import type { AtomemConfig } from './config.js';
import type { Action, AtomicMemory, Embedding, Interaction, LifecycleEvent, MemoryEvent, MemoryState } from './types.js';
import { ACTION_WEIGHTS } from './types.js';
import { addScaled, dot, isFiniteVector, normalize } from './vector.js';

/** Time and ids, injected so the core stays deterministic and testable. */
export interface OpContext {
  now: number;
  newId(): string;
}

const DAY_MS = 86_400_000;
const ACTIONS = new Set(Object.keys(ACTION_WEIGHTS));

/** A fresh, empty memory. */
export function createState(): MemoryState {
  return {
    version: 1,
    nextSeq: 1,
    events: [],
    memories: [],
    profile: null,
    signal: { predictionErrors: 0, eventsSinceSynthesis: 0, eventsSinceSweep: 0 },
  };
}

declare const validated: unique symbol;

/**
 * An interaction that passed {@link validateInteraction} (the type says so; nothing is added at
 * run time): what {@link appendEvent} takes, so input is checked once, where it enters.
 */
export type ValidInteraction = Required<Interaction> & { readonly [validated]: true };

/** Validate an interaction (`action` defaults to `click`); throws a TypeError naming the bad field. */
export function validateInteraction(i: Interaction): ValidInteraction {
  if (!i || typeof i !== 'object') throw new TypeError('interaction must be an object');
  if (typeof i.item !== 'string' || i.item.length === 0) throw new TypeError('interaction.item must be a non-empty string');
  if (typeof i.at !== 'number' || !Number.isFinite(i.at)) throw new TypeError(`interaction.at must be a finite number (epoch ms), got ${String(i.at)}`);
  const action = i.action ?? 'click';
  if (!ACTIONS.has(action)) throw new TypeError(`interaction.action must be one of ${[...ACTIONS].join(', ')}, got ${String(action)}`);
  return { item: i.item, at: i.at, action } as ValidInteraction;
}

/** Tier 1: append a validated interaction to the bounded FIFO as pending. Returns the event as stored (with its sequence number). */
export function appendEvent(state: MemoryState, cfg: AtomemConfig, i: ValidInteraction): MemoryEvent {
  const ev: MemoryEvent = { seq: state.nextSeq++, item: i.item, at: i.at, action: i.action, pending: true };
  state.events.push(ev);
  // why: a FIFO bounds tier 1; pending events are never dropped before they are processed.
  while (state.events.length > cfg.maxEvents) {
    const idx = state.events.findIndex((e) => !e.pending);
    if (idx < 0) break;
    state.events.splice(idx, 1);
  }
  return ev;
}

/** How many durable events are not yet turned into memory. */
export function pendingCount(state: MemoryState): number {
  let n = 0;
  for (const e of state.events) if (e.pending) n++;
  return n;
}

/** Mark an event processed (idempotent). Returns false when it was already processed or is unknown. */
export function markProcessed(state: MemoryState, seq: number): boolean {
  const ev = state.events.find((e) => e.seq === seq);
  if (!ev?.pending) return false;
  ev.pending = false;
  state.signal.eventsSinceSweep++;
  state.signal.eventsSinceSynthesis++;
  return true;
}

/** Events not yet turned into memory, oldest first. */
export function pendingEvents(state: MemoryState): MemoryEvent[] {
  return state.events.filter((e) => e.pending);
}

/** Weight of an action (positive supports an interest, negative contradicts it). */
export function actionWeight(action: Action | undefined): number {
  return ACTION_WEIGHTS[action ?? 'click'];
}

/** Time decay of a memory's salience: 0.5^(age / half-life). */
export function decay(cfg: AtomemConfig, updatedAt: number, now: number): number {
  const days = Math.max(0, now - updatedAt) / DAY_MS;
  return 0.5 ** (days / cfg.halfLifeDays);
}

/** Strength × recency: how much a memory should count now. */
export function salience(cfg: AtomemConfig, m: AtomicMemory, now: number): number {
  return m.strength * decay(cfg, m.updatedAt, now);
}

function checkVector(v: Float32Array, dim?: number): void {
  if (!isFiniteVector(v)) throw new RangeError('embedding contains NaN or Infinity');
  if (dim !== undefined && v.length !== dim) throw new RangeError(`embedding dimension ${v.length} does not match the memory's ${dim}`);
}

function clampStrength(s: number): number {
  return Math.max(-1, Math.min(1, s));
}

function pushItem(items: string[], item: string, max: number): void {
  const at = items.indexOf(item);
  if (at >= 0) items.splice(at, 1);
  items.push(item);
  if (items.length > max) items.splice(0, items.length - max);
}

/** Input shared by extract and reinforce. */
export interface EvidenceInput {
  item: string;
  /** The item's embedding (same embedder as the memories). */
  vector: Embedding;
  /** Action weight (see ACTION_WEIGHTS); negative forms an "avoids" memory. */
  weight: number;
  /** Sequence number of the event this evidence comes from (kept as the memory's `lastEventSeq`). */
  seq?: number;
}

/** Operation 1 — extract (STEAM formation): a new atomic memory from one interaction. */
export function extract(
  state: MemoryState,
  cfg: AtomemConfig,
  ctx: OpContext,
  input: EvidenceInput & { content: string; category: string },
): { memory: AtomicMemory; event: LifecycleEvent } {
  checkVector(input.vector.vector);
  if (!Number.isFinite(input.weight) || input.weight === 0) throw new RangeError('extract needs a non-zero finite weight');
  const memory: AtomicMemory = {
    id: ctx.newId(),
    content: input.content,
    category: input.category,
    embedding: { embedderId: input.vector.embedderId, vector: normalize(input.vector.vector) },
    items: [input.item],
    strength: clampStrength(cfg.initialStrength * input.weight),
    evidence: Math.abs(input.weight),
    links: [],
    createdAt: ctx.now,
    updatedAt: ctx.now,
    ...(input.seq !== undefined ? { lastEventSeq: input.seq } : {}),
  };
  state.memories.push(memory);
  return { memory, event: { op: 'extract', memoryId: memory.id, at: ctx.now, detail: input.item } };
}

/**
 * Operation 2 — reinforce (STEAM consolidation): fold an interaction into a memory: its item
 * joins `I`, the embedding moves toward the item (evidence-weighted running mean), strength
 * grows toward 1, and the statement may be rewritten.
 */
export function reinforce(
  memory: AtomicMemory,
  cfg: AtomemConfig,
  ctx: OpContext,
  input: EvidenceInput & { content?: string; category?: string },
): LifecycleEvent {
  if (input.vector.embedderId !== memory.embedding.embedderId) {
    throw new RangeError(`embedder mismatch: memory ${memory.embedding.embedderId}, item ${input.vector.embedderId}`);
  }
  checkVector(input.vector.vector, memory.embedding.vector.length);
  if (!Number.isFinite(input.weight) || input.weight === 0) throw new RangeError('reinforce needs a non-zero finite weight');
  const w = Math.abs(input.weight);
  const alpha = Math.max(0.05, w / (memory.evidence + w));
  const v = new Float32Array(memory.embedding.vector);
  for (let i = 0; i < v.length; i++) v[i] *= 1 - alpha;
  addScaled(v, input.vector.vector, alpha);
  memory.embedding = { embedderId: memory.embedding.embedderId, vector: normalize(v) };
  pushItem(memory.items, input.item, cfg.maxItemsPerMemory);
  memory.strength = clampStrength(memory.strength + cfg.learningRate * input.weight * (1 - Math.sign(input.weight) * memory.strength));
  memory.evidence += w;
  if (input.content) memory.content = input.content;
  if (input.category) memory.category = input.category;
  memory.updatedAt = ctx.now;
  if (input.seq !== undefined) memory.lastEventSeq = Math.max(memory.lastEventSeq ?? input.seq, input.seq);
  return { op: 'reinforce', memoryId: memory.id, at: ctx.now, detail: input.item };
}

/** Operation 3 — weaken: contrary evidence (a dislike, or a memory that misled a prediction). */
export function weaken(memory: AtomicMemory, cfg: AtomemConfig, ctx: OpContext, amount: number, reason?: string): LifecycleEvent {
  if (!Number.isFinite(amount) || amount < 0) throw new RangeError(`weaken amount must be ≥ 0, got ${amount}`);
  memory.strength = clampStrength(memory.strength - cfg.learningRate * amount * (1 + memory.strength));
  memory.updatedAt = ctx.now;
  return { op: 'weaken', memoryId: memory.id, at: ctx.now, detail: reason };
}

/**
 * Operation 4 — merge: `b` is absorbed into `a` (items unioned, evidence-weighted embedding
 * and strength, community links kept), `b` is removed.
 */
export function merge(
  state: MemoryState,
  cfg: AtomemConfig,
  ctx: OpContext,
  aId: string,
  bId: string,
  text: { content: string; category: string },
): LifecycleEvent {
  if (aId === bId) throw new RangeError('cannot merge a memory with itself');
  const a = state.memories.find((m) => m.id === aId);
  const b = state.memories.find((m) => m.id === bId);
  if (!a || !b) throw new RangeError(`merge: unknown memory ${!a ? aId : bId}`);
  if (a.embedding.embedderId !== b.embedding.embedderId) throw new RangeError('merge: memories of different embedders');
  const ea = Math.max(a.evidence, 1e-6);
  const eb = Math.max(b.evidence, 1e-6);
  const v = new Float32Array(a.embedding.vector.length);
  addScaled(v, a.embedding.vector, ea);
  addScaled(v, b.embedding.vector, eb);
  a.embedding = { embedderId: a.embedding.embedderId, vector: normalize(v) };
  const byTime = a.updatedAt >= b.updatedAt ? [...b.items, ...a.items] : [...a.items, ...b.items];
  a.items = [];
  for (const it of byTime) pushItem(a.items, it, cfg.maxItemsPerMemory);
  a.strength = clampStrength((a.strength * ea + b.strength * eb) / (ea + eb));
  a.evidence += b.evidence;
  a.links = [...new Set([...a.links, ...b.links])];
  a.content = text.content;
  a.category = text.category;
  a.createdAt = Math.min(a.createdAt, b.createdAt);
  a.updatedAt = ctx.now;
  if (a.lastEventSeq !== undefined || b.lastEventSeq !== undefined) a.lastEventSeq = Math.max(a.lastEventSeq ?? -Infinity, b.lastEventSeq ?? -Infinity);
  state.memories = state.memories.filter((m) => m !== b);
  return { op: 'merge', memoryId: a.id, otherId: b.id, at: ctx.now };
}

/** Operation 5 — forget: drop a memory. Returns null when it does not exist. */
export function forget(state: MemoryState, ctx: OpContext, memoryId: string, reason?: string): LifecycleEvent | null {
  const before = state.memories.length;
  state.memories = state.memories.filter((m) => m.id !== memoryId);
  if (state.memories.length === before) return null;
  return { op: 'forget', memoryId, at: ctx.now, detail: reason };
}

/** Operation 6 — resynthesize: store a new profile narrative (tier 3), truncated to the cap. */
export function resynthesize(state: MemoryState, cfg: AtomemConfig, ctx: OpContext, narrative: string, sources: string[]): LifecycleEvent {
  state.profile = { narrative: narrative.slice(0, cfg.profileMaxChars), sources, updatedAt: ctx.now };
  state.signal.eventsSinceSynthesis = 0;
  state.signal.predictionErrors = 0;
  return { op: 'resynthesize', memoryId: 'profile', at: ctx.now };
}

/** Cosine between two memories (unit vectors). */
export function memorySimilarity(a: AtomicMemory, b: AtomicMemory): number {
  return dot(a.embedding.vector, b.embedding.vector);
}
