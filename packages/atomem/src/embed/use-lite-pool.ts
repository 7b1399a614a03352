/**
 * USE-lite on several Node worker threads, for `atomem-vectors` on a large catalog. tfjs' WASM
 * backend runs on one core in Node, so one embedder is bound to one core; each thread here loads its own embedder (`use-lite-worker.ts`, the same shipped
 * weights and id); every `embed()` call is ordered by text length and cut into chunks that the
 * threads pull, longest first, each as soon as it is free.
 *
 * The vectors equal the in-process embedder's up to float rounding (a forward pass pads its
 * batch to the longest text, and the parts batch the texts differently): below 1e-5 per
 * component in packages/atomem/test/use-lite-pool.test.ts.
 */
import { Worker } from 'node:worker_threads';
import type { Embedding } from '../core/types.js';
import type { Embedder } from './types.js';
import { USE_LITE_DIM } from './use-lite-id.js';
import { SerialEmbedQueue } from './validate.js';

/** Texts per message to a thread (4 of USE-lite's forward passes): on 4,000 product texts, 2 threads, 64 per message gave 79 items/s, 128 86, 256 88–93, 512 81–96, 1,024 70 (two chunks, one long, one short). */
const POOL_CHUNK = 256;
/** The smallest chunk (one forward pass): chunks shrink towards the end of a call, so the threads finish together. */
const POOL_MIN_CHUNK = 64;

/** Messages of a pool thread. */
export type PoolReply = { ready: string } | { vectors: Float32Array[] } | { error: string };

interface Thread {
  worker: Worker;
  /** The reply to the message in flight. */
  next: () => Promise<PoolReply>;
}

/** A thread running `use-lite-worker`; from TypeScript sources (tsx, vitest) it registers tsx's loader first. */
function startWorker(): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./use-lite-worker.js', import.meta.url));
  // why: Node 20 does not apply the parent's `--import tsx` loader to worker threads.
  const entry = new URL('./use-lite-worker.ts', import.meta.url).href;
  const boot = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry)}); }).catch((e) => { console.error(e); process.exit(1); });`;
  return new Worker(boot, { eval: true });
}

function thread(): Thread {
  const worker = startWorker();
  let waiting: { resolve: (r: PoolReply) => void; reject: (e: Error) => void } | null = null;
  const fail = (e: Error): void => {
    const w = waiting;
    waiting = null;
    w?.reject(e);
  };
  worker.on('message', (r: PoolReply) => {
    const w = waiting;
    waiting = null;
    w?.resolve(r);
  });
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`USE-lite thread exited (code ${code})`)));
  return {
    worker,
    next: () => new Promise<PoolReply>((resolve, reject) => (waiting = { resolve, reject })),
  };
}

/**
 * Start `threads` USE-lite threads (each loads the shipped uint8 weights) and return one
 * {@link Embedder} over them. Rejects, after stopping the threads, when one fails to load.
 */
export async function createUseLitePool(threads: number): Promise<Embedder> {
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`createUseLitePool: threads must be a positive integer, got ${threads}`);
  const pool = Array.from({ length: threads }, thread);
  const stop = (): Promise<unknown> => Promise.all(pool.map((t) => t.worker.terminate()));
  let id: string;
  try {
    const ready = await Promise.all(pool.map((t) => t.next()));
    const bad = ready.find((r) => !('ready' in r));
    if (bad) throw new Error('error' in bad ? bad.error : 'USE-lite thread did not start');
    id = (ready[0] as { ready: string }).ready;
    if (ready.some((r) => (r as { ready: string }).ready !== id)) throw new Error('USE-lite threads loaded different models');
  } catch (e) {
    await stop();
    throw e;
  }
  const queue = new SerialEmbedQueue<Embedding[]>();
  let disposed = false;
  return {
    id,
    dim: USE_LITE_DIM,
    embed: (texts) =>
      queue.run(texts, async (snapshot) => {
        if (disposed) throw new Error('USE-lite pool has been disposed');
        // why: a forward pass pads to its longest text, so a chunk of texts of similar length pads
        // least; the longest chunks go first and each thread pulls the next chunk when it is free,
        // so the threads finish together. Chunks shrink as the call's work runs out (half of
        // each thread's share of what is left, at most POOL_CHUNK, at least one forward pass), so the thread that
        // finishes last waits on a small chunk, not a 256-text one.
        const order = snapshot.map((_, i) => i).sort((a, b) => snapshot[b].length - snapshot[a].length || a - b);
        const chunks: number[][] = [];
        for (let at = 0; at < order.length; ) {
          const size = Math.max(POOL_MIN_CHUNK, Math.min(POOL_CHUNK, Math.ceil((order.length - at) / (2 * threads))));
          chunks.push(order.slice(at, at + size));
          at += size;
        }
        const out = new Array<Embedding>(snapshot.length);
        let next = 0;
        const work = async (t: Thread, ti: number): Promise<void> => {
          while (next < chunks.length) {
            const chunk = chunks[next++];
            const reply = t.next();
            t.worker.postMessage({ texts: chunk.map((i) => snapshot[i]) });
            const r = await reply;
            if ('error' in r) {
              next = chunks.length;
              // why: the thread names texts[j] of its chunk; name the index in the caller's texts.
              throw new Error(r.error.replace(/texts\[(\d+)\]/g, (_m, j: string) => `texts[${chunk[Number(j)]}]`));
            }
            if (!('vectors' in r) || r.vectors.length !== chunk.length) {
              next = chunks.length;
              throw new Error(`USE-lite thread ${ti} answered ${'vectors' in r ? r.vectors.length : 'no'} vectors for ${chunk.length} texts`);
            }
            r.vectors.forEach((vector, k) => {
              out[chunk[k]] = { embedderId: id, vector };
            });
          }
        };
        // why: allSettled, so no thread still has a chunk in flight when the call fails (its reply would meet the next call)
        const settled = await Promise.allSettled(pool.map(work));
        const failed = settled.find((x): x is PromiseRejectedResult => x.status === 'rejected');
        if (failed) throw failed.reason;
        return out;
      }),
    async dispose() {
      if (disposed) return;
      disposed = true;
      await queue.idle();
      await stop();
    },
  };
}
