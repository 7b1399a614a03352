/**
 * Protocol v2 of the index service (src/protocol/index-v2.ts): Privacy Pass issuance for the
 * attester, token-gated local-DP reports in, one immutable release per epoch out.
 *
 * Epoch life cycle: reports of epoch e are accepted during e and, for `graceMs`, after it (a
 * device's random delay may land near the end). At end(e) + grace the aggregation job runs:
 * histogram → LDP estimates → release (only with ≥ `minReports` reports; communities only with
 * ≥ `minContributors` estimated contributors) → the cells and tombstones of e are deleted and
 * the WAL checkpointed. A service started after an epoch's deadline aggregates it at start.
 * The job is {@link V2Controller.aggregate}: a pure function of (histogram, item space,
 * parameters), the seam where a batch engine takes over (docs/SCALING.md).
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ReportHistogram, buildRelease, ldpParams, DEFAULT_LDP, type ItemCommunities, type ItemSpace } from 'atomem/engine';
import {
  INDEX_V2_LIMITS,
  INDEX_V2_PATHS,
  INDEX_V2_VERSION,
  ITEM_ID_PATTERN,
  epochOf,
  isValidItemId,
  DEFAULT_EPOCH_MS,
  type HealthV2Response,
  type IssueRequest,
  type IssueResponse,
  type LdpParams,
  type Release,
  type ReportRequest,
  type ReportResponse,
  type TokenKeyResponse,
} from 'atomem/protocol';
import { clusterItemSpace, type ClusterOptions, type ClusterPhase } from './clusters.js';
import { ReportStore } from './report-store.js';
import { DataDir, MARKER_FILE, StorageError, StorageHealth, type StorageFailure } from './storage.js';
import { PrivacyPassIssuer, generateIssuerKey, type TokenIssuer } from './tokens.js';

/** Options of protocol v2 (`IndexServiceOptions.v2`). */
export interface V2Options {
  /**
   * The shop's public item space (the catalog vector file): communities and prototypes are
   * built from it. A function is called once at start (e.g. to read and decode the file).
   */
  space: ItemSpace | (() => Promise<ItemSpace>);
  /** Epoch length. Default one day. */
  epochMs?: number;
  /** Reports accepted after an epoch's end for this long. Default 10 % of the epoch. */
  graceMs?: number;
  /** Estimated contributors a community needs to be released. Default 20 (tests may pass a negative number: every community). */
  minContributors?: number;
  /** Reports an epoch needs before anything is released for it. Default 50. */
  minReports?: number;
  /** Local-DP parameters devices must use. Default {@link DEFAULT_LDP}. */
  ldp?: { epsPermanent: number; epsInstant: number; ell: number; cohorts: number };
  /**
   * Secret the attester (the shop's server) sends as `authorization: Bearer <key>` to get
   * tokens issued. Without it the issuance endpoint answers 404 and tokens can only be issued
   * in-process ({@link V2Controller.issuer}).
   */
  attesterKey?: string;
  /** Issuer name in token challenges. Default `atomem-index`. */
  issuerName?: string;
  /** Clustering of the item space. */
  clusters?: ClusterOptions;
  /** Clock (tests and the benchmark's simulated time). Default `Date.now`. */
  now?: () => number;
  /** How often the aggregation job checks for due epochs (ms). Default 60 000; 0 = never (call `tick`). */
  tickMs?: number;
  /** Releases kept. Default 30. */
  keepReleases?: number;
  /**
   * When the catalog's embedder or dimension differs from the one the data dir recorded at its
   * first start: `false` (default) refuses to start (a catalog file of the wrong embedder is a
   * configuration mistake); `true` records the new space and goes on (releases of the old
   * space stay until they age out; a shop that re-embeds its catalog on purpose).
   */
  replaceSpace?: boolean;
}

/** The running v2 part of a service. */
export interface V2Controller {
  readonly store: ReportStore;
  /**
   * Resolves when the item space is read and checked and the issuer key is loaded: from then on
   * tokens are issued, reports accepted, releases and health served, while the item space's
   * communities may still be computed (health says `clustering`).
   */
  readonly serving: Promise<void>;
  /** Resolves when the communities of the item space are computed too (aggregation needs them). */
  readonly ready: Promise<void>;
  readonly ldp: LdpParams;
  readonly epochMs: number;
  /** The token issuer (the attester's path in-process: the demo and the benchmark use it). */
  issuer(): TokenIssuer;
  /** The communities of the item space (throws 503 `not_ready` while they are computed). */
  communities(): ItemCommunities;
  /** While the communities are computed: the phase and the share of it done; undefined once they are. */
  clustering(): { phase: ClusterPhase; share: number } | undefined;
  /** Current epoch of the service clock. */
  epoch(): number;
  /** Build, store and return the release of `epoch` now (undefined when too few reports); deletes its reports. */
  aggregate(epoch: number): Release | undefined;
  /** Aggregate every stored epoch whose deadline (end + grace) has passed. */
  tick(): void;
  /** Stops the item-space clustering if it still runs (its worker ends; `ready` rejects). */
  stopLoading(): void;
  close(): void;
}

class V2Error extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

const reportSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['v', 'epoch', 'token', 'report'],
  properties: {
    v: { const: 2 },
    epoch: { type: 'integer', minimum: 0 },
    token: { type: 'string', minLength: 16, maxLength: INDEX_V2_LIMITS.maxTokenChars, pattern: '^[A-Za-z0-9_-]+$' },
    report: {
      type: 'object',
      additionalProperties: false,
      required: ['cohort', 'bucket'],
      properties: { cohort: { type: 'integer', minimum: 0 }, bucket: { type: 'integer', minimum: 0 } },
    },
  },
} as const;

const issueSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['v', 'epoch', 'request'],
  properties: {
    v: { const: 2 },
    epoch: { type: 'integer', minimum: 0 },
    request: { type: 'string', minLength: 16, maxLength: INDEX_V2_LIMITS.maxTokenRequestChars, pattern: '^[A-Za-z0-9_-]+$' },
  },
} as const;

/**
 * The item space must be usable and safe to send to shoppers: every id follows the item-id
 * grammar ({@link ITEM_ID_PATTERN}), ids are unique, all vectors have one dimension. Throws a
 * RangeError naming the first bad entry.
 */
export function checkSpace(space: ItemSpace): void {
  if (space.vectors.length !== space.ids.length) throw new RangeError(`v2: the item space has ${space.ids.length} ids but ${space.vectors.length} vectors`);
  const dim = space.vectors[0]?.length ?? 0;
  if (!(dim >= 1)) throw new RangeError('v2: the item space has 0-dimensional vectors');
  const seen = new Set<string>();
  space.ids.forEach((id, i) => {
    if (!isValidItemId(id)) throw new RangeError(`v2: item id ${printable(id)} (entry ${i} of the catalog) does not follow the item-id grammar (${ITEM_ID_PATTERN}): ids are shown to shoppers, so controls, bidi and zero-width characters, whitespace and < > & " ' \` are refused. Fix: rename it in the catalog vector file.`);
    if (seen.has(id)) throw new RangeError(`v2: item id ${JSON.stringify(id)} appears twice in the catalog`);
    seen.add(id);
    if (space.vectors[i].length !== dim) throw new RangeError(`v2: item ${id} has a ${space.vectors[i].length}-d vector, the others ${dim}-d`);
  });
}

/** `JSON.stringify`, with every character outside printable ASCII as `\uXXXX` (safe in logs and terminals). */
function printable(s: string): string {
  return JSON.stringify(s).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Register the v2 routes on `app` and start the epoch job. `fail` formats error bodies the
 * same way as the rest of the service.
 */
export function registerV2(
  app: FastifyInstance,
  dataDir: string | DataDir,
  options: V2Options,
  extra: {
    synchronous?: 'normal' | 'full';
    fail: (reply: FastifyReply, status: number, code: string, message: string, retryAfterSeconds?: number) => FastifyReply;
    /** Shared storage health of the service (a failed write is recorded there). */
    storage?: StorageHealth;
    maxBytes?: number;
    integrityCheck?: boolean;
    /** Whether a request carries the metrics token; without it `/v2/metrics` answers 404. */
    metricsAllowed?: (req: FastifyRequest) => boolean;
    /** The service's metrics body. */
    metrics?: () => Record<string, unknown>;
  },
): V2Controller {
  const epochMs = options.epochMs ?? DEFAULT_EPOCH_MS;
  if (!(Number.isInteger(epochMs) && epochMs >= 1)) throw new RangeError(`v2.epochMs must be a positive integer, got ${epochMs}`);
  const graceMs = options.graceMs ?? Math.floor(epochMs / 10);
  if (!(graceMs >= 0 && graceMs < epochMs)) throw new RangeError(`v2.graceMs must be in [0, epochMs), got ${graceMs}`);
  const minContributors = options.minContributors ?? 20;
  const minReports = options.minReports ?? 50;
  if (!Number.isFinite(minContributors)) throw new RangeError(`v2.minContributors must be a finite number, got ${minContributors}`);
  if (!(Number.isInteger(minReports) && minReports >= 1)) throw new RangeError(`v2.minReports must be an integer ≥ 1, got ${minReports}`);
  if (options.attesterKey !== undefined && options.attesterKey.length < 16) throw new RangeError('v2.attesterKey must be at least 16 characters');
  const ldp = options.ldp ? ldpParams(options.ldp) : { ...DEFAULT_LDP };
  const now = options.now ?? Date.now;
  const keep = options.keepReleases ?? 30;
  const dir = typeof dataDir === 'string' ? DataDir.open(dataDir) : dataDir;
  const store = ReportStore.open(dir, { synchronous: extra.synchronous, maxBytes: extra.maxBytes, integrityCheck: extra.integrityCheck === false ? 'off' : 'quick' });
  const storage = extra.storage ?? new StorageHealth();
  /**
   * A write of the report store: refused at once while the file is known corrupt, classified
   * when it fails (507 full, 503 corrupt / I/O / read-only, with Retry-After; health names it).
   */
  const write = <T>(what: string, fn: () => T): T => {
    const blocked = storage.blocked(store.file);
    if (blocked) throw storageError(blocked);
    try {
      const r = fn();
      storage.ok(store.file);
      return r;
    } catch (err) {
      const f = storage.fail(err, store.file);
      if (f === undefined) throw err;
      app.log.error({ err: { code: (err as { code?: string }).code, message: (err as Error).message }, file: store.file, state: f.state }, `v2: ${what} failed`);
      throw storageError(f);
    }
  };
  const storageError = (f: StorageFailure) => new V2Error(f.status, f.code, f.message, f.retryAfterSeconds);
  /**
   * The latest release's epoch for health and metrics: cached by the store (read at load and
   * again after a publish); a storage failure of that read degrades health (named there) instead
   * of failing the health route with a 500.
   */
  const latestRelease = (): number | null => {
    try {
      return store.latestRelease() ?? null;
    } catch (err) {
      const f = storage.fail(err, store.file);
      if (f === undefined) throw err;
      app.log.error({ err: { code: (err as { code?: string }).code, message: (err as Error).message }, file: store.file, state: f.state }, 'v2: reading the latest release failed');
      return null;
    }
  };

  let space: ItemSpace | undefined;
  let communities: ItemCommunities | undefined;
  let issuer: TokenIssuer | undefined;
  let loadError: Error | undefined;
  /** Phase and share of the item-space clustering done (health says them while loading). */
  let clustering: { phase: ClusterPhase; share: number } = { phase: 'knn', share: 0 };
  /** How the item kNN graph was built and its recall@k measured on a sample (health, once clustered). */
  let knnInfo: { method: string; recall: number | null } | undefined;
  /** Stops the clustering worker when the service closes mid-load. */
  const stopClustering = new AbortController();
  let markServing!: () => void;
  let failServing!: (err: Error) => void;
  const serving = new Promise<void>((resolve, reject) => ((markServing = resolve), (failServing = reject)));
  serving.catch(() => {});
  const ready = (async () => {
    space = typeof options.space === 'function' ? await options.space() : options.space;
    if (!space || space.ids.length === 0) throw new Error('v2: the item space is empty (configure the catalog vector file)');
    checkSpace(space);
    // The registry of the item space (embedder id → dimension) is fixed by the first configured catalog, in the marker.
    const dim = space.vectors[0].length;
    const had = dir.marker?.space;
    if (had && (had.embedderId !== space.embedderId || had.dim !== dim) && options.replaceSpace) {
      app.log.warn({ from: had, to: { embedderId: space.embedderId, dim } }, 'v2: the item space changed (replaceSpace)');
      dir.update((m) => (m.space = { embedderId: space!.embedderId, dim }));
    } else if (had && (had.embedderId !== space.embedderId || had.dim !== dim)) {
      throw new StorageError(
        'mismatch',
        dir.file(MARKER_FILE),
        `the data dir ${dir.path} holds releases of the item space ${had.embedderId} (${had.dim}-d), but the configured catalog is ${space.embedderId} (${dim}-d). Fix: configure the catalog vector file of ${had.embedderId}, serve the new embedder from a new data dir, or replace the space on purpose (--replace-item-space).`,
      );
    }
    if (!had) dir.update((m) => (m.space = { embedderId: space!.embedderId, dim }));
    let stored = store.getMeta('issuerKey');
    if (stored === undefined) {
      stored = JSON.stringify(await generateIssuerKey());
      write('storing the issuer key', () => store.setMeta('issuerKey', stored!));
    }
    issuer = await PrivacyPassIssuer.load(JSON.parse(stored), options.issuerName ?? 'atomem-index');
    // why: health answers from memory; the first read of the latest release happens here, not in a health request
    latestRelease();
    // why: ingestion (token, report) and releases need no communities, only aggregation does: a
    // large or changed catalog (minutes of clustering at 1M items) does not take them down
    markServing();
    // why: kNN graph and Louvain run in a worker thread (large catalogs): the event loop answers meanwhile
    const run = await clusterItemSpace(space, options.clusters, { dir: dir.path, signal: stopClustering.signal, onProgress: (share, phase) => (clustering = { phase, share }) });
    app.log.info({ items: space.ids.length, communities: run.communities.communities.length, source: run.source, worker: run.worker, ms: Math.round(run.ms), knnMs: Math.round(run.knnMs), louvainMs: Math.round(run.louvainMs), knn: run.knn.method, knnRecall: run.knn.recall, ...(run.knn.cellsRecall !== undefined ? { cellsRecall: run.knn.cellsRecall } : {}) }, 'v2: item space clustered');
    knnInfo = { method: run.knn.method, recall: Number.isFinite(run.knn.recall) ? Math.round(run.knn.recall * 1000) / 1000 : null };
    communities = run.communities;
    // epochs that closed while clustering are aggregated now
    tick();
  })().catch((err: Error) => {
    loadError = err;
    // a failure before serving rejects `serving` too (after it, a no-op: the routes answer 503 from now on)
    failServing(err);
    if (stopClustering.signal.aborted) app.log.info('v2: loading stopped (the service closed)');
    else app.log.error({ err }, 'v2: loading failed');
    throw err;
  });
  ready.catch(() => {});

  const clusteringNow = (): string => `${clustering.phase === 'knn' ? 'kNN graph' : 'communities, Louvain'} ${Math.round(clustering.share * 100)} %`;
  /** Tokens, reports, health: the item space and the issuer (the communities may still be computed). */
  const requireServing = (): { space: ItemSpace; issuer: TokenIssuer } => {
    if (loadError) throw new V2Error(503, 'not_ready', `v2 failed to load: ${loadError.message}`);
    if (!space || !issuer) throw new V2Error(503, 'not_ready', 'v2 is loading the item space', 5);
    return { space, issuer };
  };
  /** Aggregation: the communities too. */
  const requireReady = (): { space: ItemSpace; communities: ItemCommunities; issuer: TokenIssuer } => {
    const { space: sp, issuer: iss } = requireServing();
    if (!communities) throw new V2Error(503, 'not_ready', `v2 is clustering the item space (${clusteringNow()})`, 5);
    return { space: sp, communities, issuer: iss };
  };

  const epoch = () => epochOf(now(), epochMs);
  /** Epochs whose reports are accepted now: the current one, and the previous one during the grace period. */
  const acceptsEpoch = (e: number): boolean => {
    const t = now();
    const cur = epochOf(t, epochMs);
    return e === cur || (e === cur - 1 && t < (cur * epochMs) + graceMs);
  };

  const aggregate = (e: number): Release | undefined => {
    const { space: sp, communities: cs } = requireReady();
    const hist = new ReportHistogram(ldp);
    for (const c of store.cells(e)) hist.add({ cohort: c.cohort, bucket: c.bucket }, c.n);
    const release = hist.total >= minReports ? buildRelease({ epoch: e, epochMs, space: sp, communities: cs, hist, ldp, minContributors }) : undefined;
    write(`publishing epoch ${e}`, () => store.publish(e, release ? JSON.stringify(release) : undefined, keep));
    app.log.info({ epoch: e, reports: hist.total, released: release !== undefined }, 'v2: epoch aggregated');
    return release;
  };

  function tick(): void {
    if (!communities) return;
    const t = now();
    for (const e of store.openEpochs()) if (t >= (e + 1) * epochMs + graceMs) aggregate(e);
  }
  const timer = (options.tickMs ?? 60_000) > 0 ? setInterval(() => {
    try {
      tick();
    } catch (err) {
      app.log.error({ err }, 'v2: aggregation failed');
    }
  }, options.tickMs ?? 60_000) : undefined;
  timer?.unref();

  const onError = (err: unknown, reply: FastifyReply) => {
    if (err instanceof V2Error) return extra.fail(reply, err.statusCode, err.code, err.message, err.retryAfterSeconds);
    throw err;
  };

  app.register(async (api) => {
    const noLimit = { rateLimit: false as const };
    api.get(INDEX_V2_PATHS.health, { config: noLimit }, async (_req, reply): Promise<HealthV2Response | FastifyReply> => {
      try {
        const { space: sp } = requireServing();
        const latest = latestRelease();
        const st = storage.status();
        if (st.state !== 'ok') reply.code(503);
        // why: answered from memory (latestEpoch is cached by the store), no database read
        return {
          status: st.state === 'ok' ? 'ok' : 'degraded',
          version: INDEX_V2_VERSION,
          embedderId: sp.embedderId,
          epochMs,
          epoch: epoch(),
          latestRelease: latest,
          ldp,
          minContributors,
          minReports,
          graceMs,
          space: { items: sp.ids.length, dim: sp.vectors[0]?.length ?? 0, communities: communities?.communities.length ?? 0, ...(knnInfo ? { knn: knnInfo } : {}) },
          ...(communities ? {} : { clustering: { phase: clustering.phase, share: Math.round(clustering.share * 100) / 100 } }),
          storage: st,
        };
      } catch (e) {
        return onError(e, reply);
      }
    });

    api.get('/v2/metrics', { config: noLimit }, async (req, reply) => {
      if (!extra.metricsAllowed?.(req)) return extra.fail(reply, 404, 'not_found', 'no route GET /v2/metrics (metrics need the metrics token)');
      reply.header('cache-control', 'no-store');
      return { ...(extra.metrics?.() ?? {}), storage: storage.status(), latestRelease: latestRelease() };
    });

    // why: the other routes are rate limited per client address (the attester's issuance is allow-listed by its key)
    api.get(INDEX_V2_PATHS.tokenKey, async (_req, reply): Promise<TokenKeyResponse | FastifyReply> => {
      try {
        const { issuer: iss } = requireServing();
        reply.header('cache-control', 'public, max-age=3600');
        return iss.key();
      } catch (e) {
        return onError(e, reply);
      }
    });

    api.post<{ Body: IssueRequest }>(INDEX_V2_PATHS.issue, { schema: { body: issueSchema } }, async (req, reply): Promise<IssueResponse | FastifyReply> => {
      if (options.attesterKey === undefined) return extra.fail(reply, 404, 'not_found', `no route POST ${INDEX_V2_PATHS.issue} (no attester key configured)`);
      const auth = req.headers.authorization;
      if (typeof auth !== 'string' || !auth.startsWith('Bearer ') || !sameSecret(auth.slice(7), options.attesterKey)) {
        return extra.fail(reply, 401, 'unauthorized', 'token issuance is for the attester only (authorization: Bearer <attester key>)');
      }
      try {
        const { issuer: iss } = requireServing();
        // why the next epoch too: devices fetch their next epoch's token ahead, at an unrelated moment
        if (!acceptsEpoch(req.body.epoch) && req.body.epoch !== epoch() + 1) throw new V2Error(400, 'wrong_epoch', `epoch ${req.body.epoch} is neither open nor the next (current ${epoch()})`);
        return { response: await iss.issue(req.body.request) };
      } catch (e) {
        if (e instanceof TypeError) return extra.fail(reply, 400, 'bad_request', e.message);
        return onError(e, reply);
      }
    });

    api.post<{ Body: ReportRequest }>(INDEX_V2_PATHS.report, { schema: { body: reportSchema } }, async (req, reply): Promise<ReportResponse | FastifyReply> => {
      // why: one report per connection, so a kept-alive socket cannot tie a device's requests together
      reply.header('connection', 'close');
      reply.header('cache-control', 'no-store');
      try {
        const { issuer: iss } = requireServing();
        const { epoch: e, token, report } = req.body;
        if (report.cohort >= ldp.cohorts || report.bucket >= ldp.g) throw new V2Error(400, 'bad_request', `report must have cohort < ${ldp.cohorts} and bucket < ${ldp.g}`);
        // why: one answer for every token failure (invalid, spent, other epoch): the reply tells nothing about other reports
        const refused = () => new V2Error(403, 'token_refused', 'the token is not valid for a report of this epoch (invalid, already spent, or the epoch is closed)');
        if (!acceptsEpoch(e)) throw refused();
        const nonce = await iss.verify(token, e);
        if (nonce === undefined) throw refused();
        if (!acceptsEpoch(e) || !write('storing a report', () => store.spend(nonce, e, report.cohort, report.bucket))) throw refused();
        reply.code(202);
        return { accepted: true };
      } catch (err) {
        return onError(err, reply);
      }
    });

    const sendRelease = (reply: FastifyReply, e: number | undefined, immutable: boolean) => {
      const body = e === undefined ? undefined : store.release(e);
      if (body === undefined) return extra.fail(reply, 404, 'not_found', e === undefined ? 'no release published yet' : `no release for epoch ${e}`);
      // why: `latest` changes when an epoch is published; a cached copy would hand a device last epoch's
      // release (`no-cache` = revalidate every time; the ETag names the epoch)
      reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'public, no-cache');
      reply.header('etag', `"release-${e}"`);
      return reply.type('application/json').send(body);
    };
    api.get(INDEX_V2_PATHS.latest, async (_req, reply) => sendRelease(reply, store.latestRelease(), false));
    api.get<{ Params: { epoch: string } }>('/v2/releases/:epoch', async (req, reply) => {
      if (!/^[0-9]{1,15}$/.test(req.params.epoch)) return extra.fail(reply, 400, 'bad_request', 'epoch must be a non-negative integer (or latest)');
      return sendRelease(reply, Number(req.params.epoch), true);
    });
  });

  return {
    store,
    serving,
    ready,
    ldp,
    epochMs,
    issuer: () => requireServing().issuer,
    communities: () => requireReady().communities,
    clustering: () => (communities ? undefined : { ...clustering }),
    epoch,
    aggregate,
    tick,
    stopLoading() {
      if (!communities) stopClustering.abort(new Error('v2: the service closed while clustering the item space'));
    },
    close() {
      if (timer) clearInterval(timer);
      store.close();
    },
  };
}
