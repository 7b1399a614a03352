/**
 * A gradient thread of {@link trainSasrec}: reads the shared parameters, writes the gradient
 * of one chunk into its shared slot, answers with the chunk's loss.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { Layout } from './layout.js';
import { GradCore, type ChunkData } from './train-core.js';

interface Init {
  layout: Layout;
  maxRows: number;
  maxSeqs: number;
  paramsSab: SharedArrayBuffer;
  gradsSab: SharedArrayBuffer;
  dropout: number;
  /** Softmax items per chunk (0: BCE). */
  softmaxItems?: number;
}

const init = workerData as Init;
const core = new GradCore(init.layout, init.maxRows, init.maxSeqs, { softmaxItems: init.softmaxItems ?? 0 });
const params = new Float32Array(init.paramsSab);
const P = init.layout.size;

parentPort!.on('message', (msg: { chunk: number; data: ChunkData; norm: number; seed: Uint32Array }) => {
  try {
    const g = new Float32Array(init.gradsSab, msg.chunk * P * 4, P);
    // assign: the chunk's gradient overwrites its slot (with sparse embeddings: the touched rows)
    const loss = core.lossAndGrad(params, g, msg.data, msg.norm, init.dropout, msg.seed, true);
    parentPort!.postMessage({ loss });
  } catch (e) {
    parentPort!.postMessage({ error: (e as Error).stack ?? String(e) });
  }
});
