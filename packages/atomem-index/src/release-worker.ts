/**
 * The release build of an epoch ({@link buildReleaseOffThread}, ./release-build.ts) in a worker
 * thread: the epoch's histogram → LDP estimates → the release JSON. Its cost grows with items ×
 * cohorts (seconds at tens of thousands of items), so it runs off the service's event loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { buildReleaseBody, type ReleaseJob } from './release-build.js';

if (!parentPort) throw new Error('release-worker: run it as a worker thread (buildReleaseOffThread starts it)');
parentPort.postMessage(buildReleaseBody(workerData as ReleaseJob));
