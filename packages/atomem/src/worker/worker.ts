/**
 * Module worker entry: its only job is to start the engine once (`start.ts`).
 *
 * The library build keeps this module alone in its chunk (`vite.worker.config.ts`): every
 * other chunk, eager or lazy, imports shared chunks and never this entry, and the guard in
 * `startEngine` makes a second evaluation of anything harmless.
 */
import { startEngine } from './start.js';

startEngine();
