/**
 * A thread of `use-lite-pool.ts`: loads USE-lite (the shipped uint8 weights), answers
 * `{ ready: id }`, then one `{ vectors }` (or `{ error }`) per `{ texts }` message.
 */
import { parentPort } from 'node:worker_threads';
import type { PoolReply } from './use-lite-pool.js';
import { createUseLiteEmbedder } from './use-lite.js';

const port = parentPort!;
const post = (r: PoolReply, transfer: ArrayBuffer[] = []): void => port.postMessage(r, transfer);

createUseLiteEmbedder().then(
  (embedder) => {
    port.on('message', (msg: { texts: string[] }) => {
      embedder.embed(msg.texts).then(
        (out) => {
          const vectors = out.map((e) => e.vector);
          post({ vectors }, [...new Set(vectors.map((v) => v.buffer as ArrayBuffer))]);
        },
        (e: unknown) => post({ error: e instanceof Error ? e.message : String(e) }),
      );
    });
    post({ ready: embedder.id });
  },
  (e: unknown) => post({ error: e instanceof Error ? e.message : String(e) }),
);
