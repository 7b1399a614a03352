/**
 * Starts the engine of this worker: one {@link Engine} exposed over Comlink.
 * - As a dedicated `Worker` (default; one engine per tab) it serves its one page.
 * - As a `SharedWorker` (`createAtomem({ shared: true })`) every connecting tab gets a port to
 *   the SAME engine: one model in memory, one writer for the profile.
 *
 * Importing this module has no effect; {@link startEngine} does the work, at most once per
 * worker global (see `worker.ts`).
 */
import { expose } from 'comlink';
import { Engine } from './engine.js';
import { installErrorTransfer } from './errors.js';

interface SharedScope {
  onconnect: ((e: MessageEvent) => void) | null;
}

/** The flag on the worker global that says an engine was exposed (a `Symbol.for`, so every copy of this module sees the same one). */
export const STARTED = Symbol.for('atomem.worker.started');

/**
 * Expose one engine on this worker global, unless one already was. Returns false when it did
 * nothing: a second evaluation of the worker's chunks (a bundler or dev server loading a chunk
 * under a second URL) must never answer with a second, uninitialised engine.
 */
export function startEngine(scope: typeof globalThis = globalThis): boolean {
  const flags = scope as unknown as Record<symbol, true | undefined>;
  if (flags[STARTED]) return false;
  flags[STARTED] = true;
  installErrorTransfer();
  const isShared = typeof (scope as { SharedWorkerGlobalScope?: unknown }).SharedWorkerGlobalScope === 'function' && 'onconnect' in scope;
  if (isShared) {
    const engine = new Engine({ shared: true });
    (scope as unknown as SharedScope).onconnect = (e: MessageEvent) => {
      const port = e.ports[0];
      expose(engine, port);
      port.start();
    };
  } else {
    expose(new Engine(), scope as unknown as Worker);
  }
  return true;
}
