/**
 * Building an epoch's release: a pure function of (the epoch's cells, the item space, its
 * communities, the LDP parameters) — {@link buildReleaseBody} — run in a worker thread by
 * {@link buildReleaseOffThread} so the service keeps answering while it runs.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ReportHistogram, buildRelease, type ItemCommunities, type ItemSpace } from 'atomem/engine';
import type { LdpParams } from 'atomem/protocol';
import type { Cell } from './report-store.js';

/** Everything the build needs (structured-cloned into the worker). */
export interface ReleaseJob {
  epoch: number;
  epochMs: number;
  space: ItemSpace;
  communities: ItemCommunities;
  cells: Cell[];
  ldp: LdpParams;
  minContributors: number;
  minReports: number;
}

/** The release body (JSON) of the job, or undefined when the epoch has fewer than `minReports` reports; and the report count. */
export function buildReleaseBody(job: ReleaseJob): { body: string | undefined; reports: number } {
  const hist = new ReportHistogram(job.ldp);
  for (const c of job.cells) hist.add({ cohort: c.cohort, bucket: c.bucket }, c.n);
  if (hist.total < job.minReports) return { body: undefined, reports: hist.total };
  const release = buildRelease({
    epoch: job.epoch,
    epochMs: job.epochMs,
    space: job.space,
    communities: job.communities,
    hist,
    ldp: job.ldp,
    minContributors: job.minContributors,
  });
  return { body: JSON.stringify(release), reports: hist.total };
}

/** {@link buildReleaseBody} in ./release-worker (.ts from source through tsx, .js when built). */
export function buildReleaseOffThread(job: ReleaseJob): Promise<{ body: string | undefined; reports: number }> {
  const here = import.meta.url;
  const fromSource = here.endsWith('.ts');
  const url = new URL(fromSource ? './release-worker.ts' : './release-worker.js', here);
  return new Promise((resolve, reject) => {
    // why: from source (tests, `--import tsx` scripts) the worker's TypeScript goes through tsx's
    // API: Node 20 does not pass the main thread's loader hooks on to a worker
    const worker = fromSource
      ? new Worker(
          new URL(
            `data:text/javascript,${encodeURIComponent(`import { register } from ${JSON.stringify(pathToFileURL(createRequire(here).resolve('tsx/esm/api')).href.replace(/index\.cjs$/, 'index.mjs'))}; register(); await import(${JSON.stringify(url.href)});`)}`,
          ),
          { workerData: job },
        )
      : new Worker(url, { workerData: job });
    let done = false;
    worker.once('message', (m: { body: string | undefined; reports: number }) => {
      done = true;
      resolve(m);
      void worker.terminate();
    });
    worker.once('error', (err) => {
      done = true;
      reject(err);
    });
    worker.once('exit', (code) => {
      if (!done) reject(new Error(`release worker exited (${code}) without a result`));
    });
  });
}
