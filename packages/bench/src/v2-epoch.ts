/**
 * One simulated epoch of protocol v2 through the REAL service (in-process fastify, requests
 * by `inject`, a temporary data dir, the service's shipped defaults): every device gets a
 * Privacy Pass token through the attester route, sends its local-DP report, the clock moves
 * past the epoch's deadline, the aggregation job builds the release, and the release is read
 * back with the public GET. The benchmark's `contribute` level and `bench:privacy` both run it.
 *
 * It also returns the operator's full view: every request body as it arrived, with the
 * simulated arrival time (the device's random delay), for the attacks.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createIndexService, type IndexService, type V2Options } from 'atomem-index';
import { blindTokenRequest, reportDelay, type ItemSpace, type ItemVectors, type MemoryAgent } from 'atomem/engine';
import { DEFAULT_EPOCH_MS, INDEX_V2_PATHS, type IssueResponse, type Release, type ReportRequest, type TokenKeyResponse } from 'atomem/protocol';
import { Rng } from './rng.js';

/** The public item space of a catalog, as the service is configured with it. */
export async function itemSpaceOf(items: ItemVectors, ids: readonly string[]): Promise<ItemSpace> {
  const sorted = [...ids].sort();
  const vecs = await items.vectorsOf(sorted);
  return { embedderId: items.embedderId, ids: sorted, vectors: vecs.map((v) => v.vector) };
}

/** One report as the operator logged it. */
export interface LoggedReport {
  /** Simulated device (ground truth for the attacks; never sent). */
  device: string;
  /** Arrival time (ms, simulated clock). */
  at: number;
  body: ReportRequest;
}

/** Options of {@link runEpoch}. */
export interface EpochOptions {
  space: ItemSpace;
  /** Devices that report this epoch (user id → agent). */
  devices: ReadonlyMap<string, MemoryAgent>;
  /** Epoch number (simulated). */
  epoch: number;
  seed: number;
  /** Service v2 overrides (default: the shipped defaults). */
  v2?: Partial<Omit<V2Options, 'space' | 'now' | 'tickMs' | 'attesterKey'>>;
  /** Keep this data dir (and service) open for several epochs; default a fresh temp dir closed at the end. */
  service?: { service: IndexService; clock: { now: number } };
  onProgress?: (done: number, total: number) => void;
}

const ATTESTER_KEY = 'bench-attester-key-0123456789';

/** A v2 service in a temp dir with a simulated clock (for several epochs). */
export async function openBenchService(
  space: ItemSpace,
  v2: EpochOptions['v2'] = {},
): Promise<{ service: IndexService; clock: { now: number }; dispose(): Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'atomem-bench-v2-'));
  const clock = { now: 0 };
  const service = createIndexService({ dataDir, rateLimit: false, v2: { ...v2, space, now: () => clock.now, tickMs: 0, attesterKey: ATTESTER_KEY } });
  await service.ready;
  return {
    service,
    clock,
    async dispose() {
      await service.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Run one epoch (see the module comment). Returns the release (undefined when too few reports) and the request log. */
export async function runEpoch(o: EpochOptions): Promise<{ release: Release | undefined; log: LoggedReport[] }> {
  const own = o.service ? undefined : await openBenchService(o.space, o.v2);
  const { service, clock } = o.service ?? own!;
  try {
    const v2 = service.v2!;
    const epochMs = v2.epochMs ?? DEFAULT_EPOCH_MS;
    const start = o.epoch * epochMs;
    clock.now = start;
    const key = (await service.app.inject({ method: 'GET', url: INDEX_V2_PATHS.tokenKey })).json() as TokenKeyResponse;
    // every device draws its random moment in the epoch; requests arrive in that order
    const plan = [...o.devices.keys()].map((device) => {
      const r = Rng.derive(o.seed, 'delay', o.epoch, device);
      return { device, delay: reportDelay(start, o.epoch, epochMs, () => r.next()) };
    });
    plan.sort((a, b) => a.delay - b.delay || (a.device < b.device ? -1 : 1));
    const log: LoggedReport[] = [];
    let done = 0;
    for (const { device, delay } of plan) {
      const agent = o.devices.get(device)!;
      // why: a fresh stream per epoch, as a device's CSPRNG would be
      const rng = Rng.derive(o.seed, 'ldp', o.epoch, device);
      const report = agent.makeReport(o.epoch, v2.ldp, () => rng.next());
      o.onProgress?.(++done, plan.length);
      if (!report) continue;
      clock.now = start + delay;
      const blind = await blindTokenRequest(key, o.epoch);
      const issued = await service.app.inject({
        method: 'POST',
        url: INDEX_V2_PATHS.issue,
        headers: { authorization: `Bearer ${ATTESTER_KEY}` },
        payload: { v: 2, epoch: o.epoch, request: blind.request },
      });
      if (issued.statusCode !== 200) throw new Error(`attester: HTTP ${issued.statusCode} ${issued.body}`);
      const token = await blind.finalize((issued.json() as IssueResponse).response);
      const body: ReportRequest = { v: 2, epoch: o.epoch, token, report };
      const res = await service.app.inject({ method: 'POST', url: INDEX_V2_PATHS.report, payload: body });
      if (res.statusCode !== 202) throw new Error(`report: HTTP ${res.statusCode} ${res.body}`);
      agent.markReported(o.epoch);
      log.push({ device, at: clock.now, body });
    }
    const health = (await service.app.inject({ method: 'GET', url: INDEX_V2_PATHS.health })).json() as { graceMs: number };
    clock.now = (o.epoch + 1) * epochMs + health.graceMs;
    await v2.tick();
    const got = await service.app.inject({ method: 'GET', url: INDEX_V2_PATHS.release(o.epoch) });
    const release = got.statusCode === 200 ? (got.json() as Release) : undefined;
    return { release, log };
  } finally {
    await own?.dispose();
  }
}
