/**
 * Module worker entry: exposes one {@link Engine} over Comlink. Start it with
 * `new Worker(new URL('./worker.ts', import.meta.url), { type: 'module' })` (what
 * `createAtomem` does) and talk to it through `Comlink.wrap<EngineApi>(worker)`.
 */
import { expose } from 'comlink';
import { Engine } from './engine.js';
import { installErrorTransfer } from './errors.js';

installErrorTransfer();
expose(new Engine());
