/**
 * The main-thread client: a tiny typed facade over the engine worker (Comlink RPC).
 * All memory work, embedding and IndexedDB access happen in the worker.
 *
 * @example
 * const atomem = await createAtomem({ profile: 'alice', catalog, embedder: 'hashing' });
 * atomem.on('memory', (e) => console.log(e.op, e.memoryId));
 * await atomem.track({ item: 'fargo', action: 'click' });
 * const ranked = await atomem.recommend(['heat', 'alien']);
 */
import { proxy, wrap, type Remote } from 'comlink';
import { installErrorTransfer } from '../worker/errors.js';
import type { EngineApi, EngineEvent, EngineEventMap, EngineEventName, EngineOptions, ProgressEvent } from '../worker/protocol.js';

export type {
  EngineOptions,
  EngineEventMap,
  EngineEventName,
  ProgressEvent,
  RecommendationResult,
  SerializedError,
  TrackInput,
} from '../worker/protocol.js';

/** Options of {@link createAtomem}: the engine's options plus where the worker comes from. */
export interface CreateAtomemOptions extends EngineOptions {
  /**
   * The worker running `src/worker/worker.ts`, or a factory for it. Default: a new module
   * worker. With a factory (or the default) a dead worker is replaced on the next call; a
   * given `Worker` instance cannot be replaced, so calls after its death reject.
   */
  worker?: Worker | (() => Worker);
  /** Progress listener registered before `init` runs (so it sees the catalog embedding); same as `on('progress', cb)`. */
  onProgress?: (progress: ProgressEvent) => void;
}

/**
 * The on-device memory engine, as the page sees it: the engine's methods (documented once,
 * in `EngineApi` of the worker protocol) minus its wiring, plus events and disposal.
 * Every method runs in the worker.
 */
export interface Atomem extends Omit<EngineApi, 'subscribe' | 'init'> {
  /** Listen to `progress`, `memory` (lifecycle) or `error` events. Returns an unsubscribe function. */
  on<K extends EngineEventName>(event: K, cb: (payload: EngineEventMap[K]) => void): () => void;
  /** Terminate the worker. Later calls reject. */
  dispose(): void;
}

interface Connection {
  worker: Worker;
  remote: Remote<EngineApi>;
  dead: boolean;
}

/**
 * Start the engine worker, initialise it (open the profile's IndexedDB, load memories,
 * replay pending events) and return the client. Rejects if `init` fails (the worker is then
 * terminated).
 */
export async function createAtomem(options: CreateAtomemOptions): Promise<Atomem> {
  installErrorTransfer();
  const { worker: given, onProgress, ...engineOptions } = options;
  const listeners = new Map<EngineEventName, Set<(payload: never) => void>>();
  if (onProgress) listeners.set('progress', new Set([onProgress as (payload: never) => void]));
  let disposed = false;
  let usedGiven = false;

  const dispatch = (ev: EngineEvent): void => {
    for (const cb of listeners.get(ev.type) ?? []) {
      try {
        (cb as (p: unknown) => void)(ev.payload);
      } catch (e) {
        setTimeout(() => {
          throw e; // a listener's bug surfaces as an uncaught error, never breaks the engine
        });
      }
    }
  };

  const makeWorker = (): Worker => {
    if (typeof given === 'function') return given();
    if (given) {
      if (usedGiven) throw new Error('the given worker died and cannot be restarted: pass a factory () => Worker');
      usedGiven = true;
      return given;
    }
    return new Worker(new URL('../worker/worker.ts', import.meta.url), { type: 'module' });
  };

  const connect = async (): Promise<Connection> => {
    const worker = makeWorker();
    const conn: Connection = { worker, remote: wrap<EngineApi>(worker), dead: false };
    worker.addEventListener('error', (e) => {
      conn.dead = true;
      dispatch({ type: 'error', payload: { name: 'WorkerError', message: `the engine worker failed: ${e.message || 'unknown error'}` } });
    });
    try {
      await conn.remote.subscribe(proxy(dispatch));
      await conn.remote.init(engineOptions);
    } catch (e) {
      worker.terminate();
      throw e;
    }
    return conn;
  };

  let current: Promise<Connection> = connect();
  await current;

  /** The live connection; a dead worker is replaced (state comes back from IndexedDB). */
  const engine = async (): Promise<Remote<EngineApi>> => {
    if (disposed) throw new Error('atomem is disposed');
    const p = current;
    const conn = await p;
    if (!conn.dead) return conn.remote;
    if (current === p) {
      conn.worker.terminate();
      current = connect();
      current.catch(() => undefined);
    }
    return (await current).remote;
  };

  return {
    track: async (interaction) => (await engine()).track(interaction),
    recommend: async (candidates) => (await engine()).recommend(candidates),
    memories: async () => (await engine()).memories(),
    profile: async () => (await engine()).profile(),
    forget: async (memoryId) => (await engine()).forget(memoryId),
    export: async () => (await engine()).export(),
    import: async (file) => (await engine()).import(file),
    erase: async () => (await engine()).erase(),
    on(event, cb) {
      let set = listeners.get(event);
      if (!set) listeners.set(event, (set = new Set()));
      set.add(cb as (payload: never) => void);
      return () => void set.delete(cb as (payload: never) => void);
    },
    dispose() {
      if (disposed) return;
      disposed = true;
      listeners.clear();
      current.then((c) => c.worker.terminate(), () => undefined);
    },
  };
}
