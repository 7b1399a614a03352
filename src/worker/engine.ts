/**
 * The engine: one profile's memory agent, its catalog vectors and its IndexedDB store,
 * behind the {@link EngineApi} RPC contract. Runs inside the worker (`worker.ts` exposes it);
 * nothing here touches the DOM.
 *
 * Durability: `track` makes the event durable (`store.appendEvent`) BEFORE the agent
 * processes it, then saves the whole state in one transaction. A crash in between leaves a
 * pending event in the store; `init` replays it on the saved state, and the saved state marks
 * it processed, so every event is applied exactly once to the persisted memory.
 */
import { MemoryAgent } from '../agent/agent.js';
import { ItemVectors } from '../agent/items.js';
import { markProcessed, validateInteraction } from '../core/memory.js';
import type { AtomicMemory, MemoryEvent, MemoryState, Profile } from '../core/types.js';
import { createHashingEmbedder } from '../embed/hashing.js';
import type { Embedder } from '../embed/types.js';
import { MemoryStore, StorageQuotaError } from '../store/index.js';
import type { ExportFile } from '../store/file.js';
import { serializeError } from './errors.js';
import type {
  EngineApi,
  EngineEvent,
  EngineEventMap,
  EngineEventName,
  EngineListener,
  EngineOptions,
  RecommendationResult,
  TrackInput,
} from './protocol.js';

interface Session {
  options: EngineOptions;
  store: MemoryStore;
  items: ItemVectors;
  agent: MemoryAgent;
}

function embedderFor(options: EngineOptions): Embedder {
  // why: 256 buckets, not the default 64: fewer collisions between unrelated words of a real catalog.
  if (options.embedder === 'hashing') return createHashingEmbedder({ dim: 256 });
  throw new TypeError(`embedder must be 'hashing' (USE-lite and MiniLM come next), got ${String(options.embedder)}`);
}

/** {@link EngineApi} implementation. One instance per worker. */
export class Engine implements EngineApi {
  private listener: EngineListener | undefined;
  private session: Session | undefined;
  /** Every operation runs after the previous one: no interleaved read-modify-write of the state. */
  private queue: Promise<unknown> = Promise.resolve();

  subscribe(listener: EngineListener): void {
    if (typeof listener !== 'function') throw new TypeError('subscribe: listener must be a function (a Comlink.proxy)');
    this.listener = listener;
  }

  init(options: EngineOptions): Promise<void> {
    return this.serial(async () => {
      if (!options || typeof options !== 'object') throw new TypeError('init: options must be an object');
      if (!Array.isArray(options.catalog)) throw new TypeError('init: options.catalog must be an array of items');
      const embedder = embedderFor(options);
      const items = new ItemVectors(embedder, options.catalog);
      await items.warm((done, total) => this.emit('progress', { stage: 'embed-catalog', done, total }));
      const store = await MemoryStore.open({ profile: options.profile });
      try {
        const state = await store.load();
        this.session?.store.close();
        this.session = { options, store, items, agent: this.agentFor(items, options, state) };
        await this.replay();
      } catch (e) {
        store.close();
        throw e;
      }
    });
  }

  track(interaction: TrackInput): Promise<void> {
    return this.serial(async () => {
      const { store, agent } = this.ready();
      if (!interaction || typeof interaction !== 'object') throw new TypeError('interaction must be an object');
      const it = validateInteraction({ item: interaction.item, action: interaction.action, at: interaction.at ?? Date.now() });
      agent.items.item(it.item); // unknown item → UnknownItemError before anything is written
      const ev: MemoryEvent = { seq: agent.snapshot.nextSeq, item: it.item, at: it.at, action: it.action, pending: true };
      await this.write(() => store.appendEvent(ev));
      // observe appends the same event (same seq) to the in-memory state, then processes every pending one.
      await agent.observe(it);
      await this.write(() => store.saveState(agent.snapshot));
    });
  }

  recommend(candidates: string[]): Promise<RecommendationResult[]> {
    return this.serial(async () => {
      const ranked = await this.ready().agent.recommend(candidates);
      return ranked.map((r) => ({ id: r.id, score: r.score, explanations: r.explanations }));
    });
  }

  memories(): Promise<AtomicMemory[]> {
    return this.serial(async () => this.ready().agent.memories());
  }

  profile(): Promise<Profile | null> {
    return this.serial(async () => this.ready().agent.profile());
  }

  forget(memoryId: string): Promise<boolean> {
    return this.serial(async () => {
      const { store, agent } = this.ready();
      if (typeof memoryId !== 'string' || !memoryId) throw new TypeError('forget: memoryId must be a non-empty string');
      const done = agent.forget(memoryId);
      if (done) await this.write(() => store.saveState(agent.snapshot));
      return done;
    });
  }

  export(): Promise<ExportFile> {
    return this.serial(async () => this.ready().store.export());
  }

  import(file: unknown): Promise<void> {
    return this.serial(async () => {
      const s = this.ready();
      await this.write(() => s.store.import(file));
      await this.reload(s);
    });
  }

  erase(): Promise<void> {
    return this.serial(async () => {
      const s = this.ready();
      await this.write(() => s.store.erase());
      await this.reload(s);
    });
  }

  // ——— internals ———

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private ready(): Session {
    if (!this.session) throw new Error('the engine is not initialised: call init(options) first');
    return this.session;
  }

  private agentFor(items: ItemVectors, options: EngineOptions, state: MemoryState): MemoryAgent {
    return new MemoryAgent({ items, state, config: options.config, onLifecycle: (e) => this.emit('memory', e) });
  }

  /** Rebuild the agent from what the store now holds (after import / erase). */
  private async reload(s: Session): Promise<void> {
    s.agent = this.agentFor(s.items, s.options, await s.store.load());
    await this.replay();
  }

  /**
   * Process events that were durable but not yet processed (a crash between `appendEvent`
   * and `saveState`), then save. Pending events of items no longer in the catalog are
   * dropped from processing (marked done) with an `error` event, so one stale id cannot
   * block startup forever.
   */
  private async replay(): Promise<void> {
    const { store, agent, items } = this.ready();
    const pending = agent.snapshot.events.filter((e) => e.pending);
    if (pending.length === 0) return;
    for (const ev of pending) {
      if (items.has(ev.item)) continue;
      markProcessed(agent.snapshot, ev.seq);
      this.emit('error', { name: 'UnknownItemError', message: `pending event ${ev.seq} of unknown item "${ev.item}" was skipped` });
    }
    await agent.processPending();
    await this.write(() => store.saveState(agent.snapshot));
  }

  /** A store write; a full disk is reported (`error` event) and the engine continues in memory. */
  private async write(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      if (!(e instanceof StorageQuotaError)) throw e;
      this.emit('error', serializeError(e));
    }
  }

  private emit<K extends EngineEventName>(type: K, payload: EngineEventMap[K]): void {
    const l = this.listener;
    if (!l) return;
    try {
      // a Comlink proxy returns a promise; a vanished listener must never break the engine.
      const r = l({ type, payload } as EngineEvent) as unknown;
      if (r instanceof Promise) r.catch(() => undefined);
    } catch {
      // ignore
    }
  }
}
