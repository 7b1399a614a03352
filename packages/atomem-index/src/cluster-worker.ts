/**
 * The clustering worker of {@link clusterItemSpace} (./clusters.ts): builds the kNN graph of
 * the job's vectors (`knnOfMatrix`: cells, HNSW or both, `threads` threads) unless the job brings a persisted one,
 * posts it (the main thread persists it at once), runs Louvain on it and posts the membership.
 * Progress messages at most every 200 ms. Runs off the service's event loop, so health answers
 * during the whole clustering.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { knnOfMatrix, louvainOfKnn, type ClusterJob, type ClusterPhase, type ClusterWorkerMessage } from './clusters.js';

const port = parentPort;
if (!port) throw new Error('cluster-worker: run it as a worker thread (clusterItemSpace starts it)');
const job = workerData as ClusterJob;
const post = (m: ClusterWorkerMessage, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);
let last = -Infinity;
const progress = (phase: ClusterPhase) => {
  // why: each phase announces itself at once, then at most every 200 ms
  post({ type: 'progress', phase, share: 0 });
  last = performance.now();
  return (share: number) => {
    const now = performance.now();
    if (now - last < 200) return;
    last = now;
    post({ type: 'progress', phase, share });
  };
};

let knn = job.knn;
if (!knn) {
  if (!job.flat) throw new Error('cluster-worker: the job has neither vectors nor a kNN graph');
  const t0 = performance.now();
  knn = knnOfMatrix(job.flat, job.n, job.dim, job.options, progress('knn'));
  // why: a copy (structured clone) goes to the main thread, this thread keeps its arrays for Louvain
  post({ type: 'knn', knn, ms: performance.now() - t0 });
}
const t1 = performance.now();
const r = louvainOfKnn(job.n, knn, job.options, progress('communities'));
post({ type: 'done', membership: r.membership, resolution: r.resolution, runs: r.runs, louvainMs: performance.now() - t1, graphMs: r.graphMs }, [
  r.membership.buffer as ArrayBuffer,
]);
