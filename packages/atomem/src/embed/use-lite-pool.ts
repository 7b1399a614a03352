/**
 * USE-lite on several Node worker threads, for `atomem-vectors` on a large catalog. tfjs' WASM
 * backend runs on one core in Node, so one embedder is bound to one core; each thread here loads its own embedder (`use-lite-worker.ts`, the same shipped
 * weights and id) and every `embed()` call is split into one contiguous part per thread.
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
        const size = Math.ceil(snapshot.length / pool.length);
        const parts = pool.map((_, i) => snapshot.slice(i * size, (i + 1) * size)).filter((p) => p.length > 0);
        const replies = await Promise.all(
          parts.map((part, i) => {
            const reply = pool[i].next();
            pool[i].worker.postMessage({ texts: part });
            return reply;
          }),
        );
        const out: Embedding[] = [];
        replies.forEach((r, i) => {
          if ('error' in r) {
            // why: the thread names texts[j] of its part; name the index in the caller's texts.
            throw new Error(r.error.replace(/texts\[(\d+)\]/g, (_m, j: string) => `texts[${i * size + Number(j)}]`));
          }
          if (!('vectors' in r) || r.vectors.length !== parts[i].length)
            throw new Error(`USE-lite thread ${i} answered ${'vectors' in r ? r.vectors.length : 'no'} vectors for ${parts[i].length} texts`);
          for (const vector of r.vectors) out.push({ embedderId: id, vector });
        });
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
