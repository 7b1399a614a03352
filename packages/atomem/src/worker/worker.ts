/**
 * Module worker entry: exposes one {@link Engine} over Comlink.
 * - As a dedicated `Worker` (default; one engine per tab) it serves its one page.
 * - As a `SharedWorker` (`createAtomem({ shared: true })`) every connecting tab gets a port to
 *   the SAME engine: one model in memory, one writer for the profile.
 */
import { expose } from 'comlink';
import { Engine } from './engine.js';
import { installErrorTransfer } from './errors.js';

installErrorTransfer();

interface SharedScope {
  onconnect: ((e: MessageEvent) => void) | null;
}

const scope = globalThis as unknown as Partial<SharedScope> & { constructor?: { name?: string } };
const isShared = typeof (globalThis as { SharedWorkerGlobalScope?: unknown }).SharedWorkerGlobalScope === 'function' && 'onconnect' in scope;

if (isShared) {
  const engine = new Engine({ shared: true });
  (scope as SharedScope).onconnect = (e: MessageEvent) => {
    const port = e.ports[0];
    expose(engine, port);
    port.start();
  };
} else {
  expose(new Engine());
}
