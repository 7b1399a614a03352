/**
 * A worker that evaluates the engine's start module twice, under two URLs — what a dev server
 * adding `?v=…` to one import did to atomem's worker graph — and calls `startEngine` from both
 * copies. Posts `{ doubleStart: [first, second, distinctCopies] }` (packages/atomem/test/browser/worker.test.ts).
 */
import { startEngine } from '../../src/worker/start.js';

const first = startEngine();
const copy = (await import(/* @vite-ignore */ new URL('../../src/worker/start.ts?copy=2', import.meta.url).href)) as typeof import('../../src/worker/start.js');
const second = copy.startEngine();
postMessage({ doubleStart: [first, second, copy.startEngine !== startEngine] });
