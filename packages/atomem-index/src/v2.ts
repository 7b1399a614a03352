/**
 * Protocol v2 of the index service (packages/atomem/src/protocol/index-v2.ts): Privacy Pass issuance for the
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
import { ldpParams, DEFAULT_LDP, type ItemCommunities, type ItemSpace } from 'atomem/engine';
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
import { buildReleaseOffThread } from './release-build.js';
import { DataDir, MARKER_FILE, StorageError, StorageHealth, type StorageFailure, type StorageStatus, type SyncLevel } from './storage.js';
import { SqliteIndexStore, type IndexStore } from './store.js';
import { PostgresIndexStore } from './pg-store.js';
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
   * Store upkeep period (ms): SQLite checkpoints its WAL (PASSIVE) after writes, so acknowledged
   * reports are in the main file within this long; with PostgreSQL the closed-epoch floor and the
   * latest release are read again (other instances close epochs too). Default 2000; 0 = never.
   */
  maintenanceMs?: number;
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
  /** The embedded SQLite store (seeding scripts publish through it); throws with a PostgreSQL store. */
  readonly store: ReportStore;
  /** The state store in use (SQLite or PostgreSQL). */
  readonly backend: IndexStore;
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
  /**
   * Close `epoch` now: build and store its release (once: a closed epoch keeps the release it
   * has) and delete its reports. Resolves to the release as stored (undefined: too few reports).
   */
  aggregate(epoch: number): Promise<Release | undefined>;
  /** Aggregate every stored epoch whose deadline (end + grace) has passed. */
  tick(): Promise<void>;
  /** Read the closed-epoch floor and the latest release from the store again. */
  refresh(): Promise<void>;
  /** Stops the item-space clustering if it still runs (its worker ends; `ready` rejects). */
  stopLoading(): void;
  close(): Promise<void>;
}

/** What `/v2/health` answers: the protocol's fields, plus the store and the epoch state. */
export interface ServiceHealth extends HealthV2Response {
  storage: StorageStatus;
  /** `sqlite` (embedded) or `postgres` (shared by every instance). */
  store: 'sqlite' | 'postgres';
  /**
   * The closed-epoch floor (closed epochs are never reopened) and the wall clock against it:
   * `behind` when the clock is at or below a closed epoch (tokens and reports refused; `message` says why).
   */
  epochs: { closedThrough: number | null; clock: 'ok' | 'behind'; message?: string };
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
    if (!isValidItemId(id))
      throw new RangeError(
        `v2: item id ${printable(id)} (entry ${i} of the catalog) does not follow the item-id grammar (${ITEM_ID_PATTERN}): ids are shown to shoppers, so controls, bidi and zero-width characters, whitespace and < > & " ' \` are refused. Fix: rename it in the catalog vector file.`,
      );
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
    synchronous?: SyncLevel;
    fail: (reply: FastifyReply, status: number, code: string, message: string, retryAfterSeconds?: number) => FastifyReply;
    /** Shared storage health of the service (a failed write is recorded there). */
    storage?: StorageHealth;
    maxBytes?: number;
    integrityCheck?: boolean;
    /** Whether a request carries the metrics token; without it `/v2/metrics` answers 404. */
    metricsAllowed?: (req: FastifyRequest) => boolean;
    /** The service's metrics body. */
    metrics?: () => Record<string, unknown>;
    /** A PostgreSQL connection URL: the state lives there (shared by instances), not in the data dir. */
    postgresUrl?: string;
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
  /** The embedded SQLite store (absent with a shared PostgreSQL store). */
  const sqlite =
    extra.postgresUrl === undefined
      ? ReportStore.open(dir, { synchronous: extra.synchronous, maxBytes: extra.maxBytes, integrityCheck: extra.integrityCheck === false ? 'off' : 'quick' })
      : undefined;
  const store: IndexStore = sqlite ? new SqliteIndexStore(sqlite) : new PostgresIndexStore(extra.postgresUrl!);
  const storage = extra.storage ?? new StorageHealth();
  const maintenanceMs = options.maintenanceMs ?? 2000;
  let stopped = false;
  /** Writes since the last upkeep (SQLite: a PASSIVE checkpoint is due). */
  let dirty = false;

  /** A storage failure of `err` recorded in health (undefined: not a storage failure). */
  const recordFailure = (err: unknown, what: string): StorageFailure | undefined => {
    const f = storage.fail(err, store.name, (e) => store.classify(e));
    if (f === undefined) return undefined;
    app.log.error({ err: { code: (err as { code?: string }).code, message: (err as Error).message }, store: store.name, state: f.state }, `v2: ${what} failed`);
    // why: health clears and due epochs close by themselves once the fault is gone, without traffic
    if (f.state !== 'corrupt') scheduleRecovery();
    return f;
  };
  /**
   * A write of the store: refused at once while it is known corrupt, classified when it fails
   * (507 full, 503 corrupt / I/O / read-only, with Retry-After; health names it).
   */
  const write = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    const blocked = storage.blocked(store.name);
    if (blocked) throw storageError(blocked);
    try {
      const r = await fn();
      storage.ok(store.name);
      dirty = true;
      return r;
    } catch (err) {
      const f = recordFailure(err, what);
      if (f === undefined) throw err;
      throw storageError(f);
    }
  };
  const storageError = (f: StorageFailure) => new V2Error(f.status, f.code, f.message, f.retryAfterSeconds);

  /** Highest closed epoch (cached: read at load, after each close and by the upkeep loop). */
  let floor = -1;
  /** SQLite: the store's own caches (a seeding script may close an epoch through `v2.store`); PostgreSQL: ours. */
  const currentFloor = (): number => (floor = Math.max(floor, sqlite ? sqlite.closedThrough() : floor));
  const currentLatest = (): number | undefined => (sqlite ? sqlite.latestRelease() : latest);
  /** Latest released epoch (cached the same way; health answers from memory). */
  let latest: number | undefined;
  const refresh = async (): Promise<void> => {
    floor = Math.max(floor, await store.closedThrough());
    latest = await store.latestRelease();
  };

  // Recovery: while a storage fault lasts, probe the store with backoff (0.25 s doubling to 2 s),
  // close the epochs that came due meanwhile, and clear health once a write succeeds.
  let recoveryTimer: NodeJS.Timeout | undefined;
  let backoffMs = 0;
  /** Set while loading waits for the store (health names it). */
  let waitingFor: string | undefined;
  function scheduleRecovery(): void {
    if (recoveryTimer || stopped) return;
    backoffMs = backoffMs === 0 ? 250 : Math.min(backoffMs * 2, 2000);
    recoveryTimer = setTimeout(() => {
      recoveryTimer = undefined;
      void (async () => {
        try {
          if (!storage.healthy) await write('probing the store', () => store.probe());
          await refresh();
          await tick();
          backoffMs = 0;
          app.log.info({ store: store.name }, 'v2: the store takes writes again');
        } catch {
          // recorded (and rescheduled) by write(); anything else: try again
          scheduleRecovery();
        }
      })();
    }, backoffMs);
    recoveryTimer.unref();
  }
  /** A load step that needs the store: retried with the same backoff until it works or the service closes. */
  const untilStored = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    for (let wait = 250; ; wait = Math.min(wait * 2, 2000)) {
      try {
        const r = await fn();
        storage.ok(store.name);
        waitingFor = undefined;
        return r;
      } catch (err) {
        const f = storage.fail(err, store.name, (e) => store.classify(e));
        if (f === undefined || f.state === 'corrupt' || stopped) throw err;
        waitingFor = `${what}: ${f.message} (retrying)`;
        app.log.error({ store: store.name, state: f.state }, `v2: ${what} failed; retrying in ${wait} ms`);
        await new Promise((r) => setTimeout(r, wait).unref());
      }
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
    if (store instanceof PostgresIndexStore) await untilStored('connecting to the store', () => store.init());
    let stored = await untilStored('reading the issuer key', () => store.getMeta('issuerKey'));
    if (stored === undefined) {
      const fresh = JSON.stringify(await generateIssuerKey());
      // why: with a shared store the first instance's key wins; every instance signs with it
      stored = await untilStored('storing the issuer key', () => store.putMetaIfAbsent('issuerKey', fresh));
    }
    issuer = await PrivacyPassIssuer.load(JSON.parse(stored), options.issuerName ?? 'atomem-index');
    // why: health answers from memory; the first reads of the floor and the latest release happen here
    await untilStored('reading the epoch state', refresh);
    // why: ingestion (token, report) and releases need no communities, only aggregation does: a
    // large or changed catalog (minutes of clustering at 1M items) does not take them down
    markServing();
    // why: kNN graph and Louvain run in a worker thread (large catalogs): the event loop answers meanwhile
    const run = await clusterItemSpace(space, options.clusters, {
      dir: dir.path,
      signal: stopClustering.signal,
      onProgress: (share, phase) => (clustering = { phase, share }),
    });
    app.log.info(
      {
        items: space.ids.length,
        communities: run.communities.communities.length,
        source: run.source,
        worker: run.worker,
        ms: Math.round(run.ms),
        knnMs: Math.round(run.knnMs),
        louvainMs: Math.round(run.louvainMs),
        knn: run.knn.method,
        knnRecall: run.knn.recall,
        ...(run.knn.cellsRecall !== undefined ? { cellsRecall: run.knn.cellsRecall } : {}),
      },
      'v2: item space clustered',
    );
    knnInfo = { method: run.knn.method, recall: Number.isFinite(run.knn.recall) ? Math.round(run.knn.recall * 1000) / 1000 : null };
    communities = run.communities;
    // epochs that closed while clustering are aggregated now; a storage fault here is retried
    // by the recovery loop (health names it meanwhile), it does not fail the load
    await tick().catch((err: unknown) => {
      if (!(err instanceof V2Error)) app.log.error({ err }, 'v2: aggregation failed');
      scheduleRecovery();
    });
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
    if (waitingFor) throw new V2Error(503, 'not_ready', `v2 is waiting for its store (${waitingFor})`, 2);
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
  /**
   * The wall clock behind the closed epochs (stepped back past a release): tokens and reports
   * are refused until it passes them again; health says so.
   */
  const clockBehind = (): boolean => epoch() <= currentFloor();
  /** Epochs whose reports are accepted now: the current one, and the previous one during the grace period; never a closed one. */
  const acceptsEpoch = (e: number): boolean => {
    if (e <= currentFloor()) return false;
    const t = now();
    const cur = epochOf(t, epochMs);
    return e === cur || (e === cur - 1 && t < cur * epochMs + graceMs);
  };
  const clockMessage = (): string =>
    `the service clock (epoch ${epoch()}, ${new Date(now()).toISOString()}) is behind the last closed epoch ${currentFloor()}: closed epochs are never reopened, so tokens and reports are refused until the clock passes epoch ${currentFloor()}. Fix: correct the host's clock (NTP)`;

  const aggregate = async (e: number): Promise<Release | undefined> => {
    const { space: sp, communities: cs } = requireReady();
    let reports = 0;
    const closed = await write(`closing epoch ${e}`, () =>
      store.closeEpoch(
        e,
        async (cells) => {
          // why: items × cohorts of work (seconds at tens of thousands of items): off the event loop
          const built = await buildReleaseOffThread({ epoch: e, epochMs, space: sp, communities: cs, cells, ldp, minContributors, minReports });
          reports = built.reports;
          return built.body;
        },
        keep,
      ),
    );
    floor = Math.max(floor, closed.closedThrough);
    latest = await store.latestRelease();
    if (closed.closedNow) app.log.info({ epoch: e, reports, released: closed.release !== undefined }, 'v2: epoch aggregated');
    return closed.release === undefined ? undefined : (JSON.parse(closed.release) as Release);
  };

  /** Aggregate every stored epoch whose deadline has passed (one run at a time). */
  let ticking: Promise<void> | undefined;
  function tick(): Promise<void> {
    if (!ticking) {
      // why: `.finally` runs after the assignment (a microtask), also when the run ends synchronously
      ticking = (async () => {
        if (!communities) return;
        const t = now();
        for (const e of await store.openEpochs()) if (t >= (e + 1) * epochMs + graceMs) await aggregate(e);
      })().finally(() => {
        ticking = undefined;
      });
    }
    return ticking;
  }
  const timer =
    (options.tickMs ?? 60_000) > 0
      ? setInterval(() => {
          tick().catch((err: unknown) => {
            if (!(err instanceof V2Error)) app.log.error({ err }, 'v2: aggregation failed');
          });
        }, options.tickMs ?? 60_000)
      : undefined;
  timer?.unref();
  // Upkeep: SQLite checkpoints its WAL (PASSIVE) after writes, so acknowledged reports reach the
  // main file within seconds; with a shared store, the floor and the latest release other
  // instances closed are read again.
  const upkeep =
    maintenanceMs > 0
      ? setInterval(() => {
          if (!issuer || !storage.healthy) return;
          const due = store.kind === 'postgres' || dirty;
          if (!due) return;
          dirty = false;
          (async () => {
            await store.maintain();
            if (store.kind === 'postgres') await refresh();
          })().catch((err: unknown) => {
            if (recordFailure(err, 'store upkeep') === undefined) app.log.error({ err }, 'v2: store upkeep failed');
          });
        }, maintenanceMs)
      : undefined;
  upkeep?.unref();

  const onError = (err: unknown, reply: FastifyReply) => {
    if (err instanceof V2Error) return extra.fail(reply, err.statusCode, err.code, err.message, err.retryAfterSeconds);
    throw err;
  };

  app.register(async (api) => {
    const noLimit = { rateLimit: false as const };
    api.get(INDEX_V2_PATHS.health, { config: noLimit }, async (_req, reply): Promise<ServiceHealth | FastifyReply> => {
      try {
        const { space: sp } = requireServing();
        const st = storage.status();
        const behind = clockBehind();
        if (st.state !== 'ok' || behind) reply.code(503);
        // why: answered from memory (floor and latest release are cached), no store read
        return {
          status: st.state === 'ok' && !behind ? 'ok' : 'degraded',
          version: INDEX_V2_VERSION,
          embedderId: sp.embedderId,
          epochMs,
          epoch: epoch(),
          latestRelease: currentLatest() ?? null,
          ldp,
          minContributors,
          minReports,
          graceMs,
          space: {
            items: sp.ids.length,
            dim: sp.vectors[0]?.length ?? 0,
            communities: communities?.communities.length ?? 0,
            ...(knnInfo ? { knn: knnInfo } : {}),
          },
          ...(communities ? {} : { clustering: { phase: clustering.phase, share: Math.round(clustering.share * 100) / 100 } }),
          storage: st,
          store: store.kind,
          epochs: behind
            ? { closedThrough: currentFloor(), clock: 'behind', message: clockMessage() }
            : { closedThrough: currentFloor() < 0 ? null : currentFloor(), clock: 'ok' },
        };
      } catch (e) {
        return onError(e, reply);
      }
    });

    api.get('/v2/metrics', { config: noLimit }, async (req, reply) => {
      if (!extra.metricsAllowed?.(req)) return extra.fail(reply, 404, 'not_found', 'no route GET /v2/metrics (metrics need the metrics token)');
      reply.header('cache-control', 'no-store');
      return { ...(extra.metrics?.() ?? {}), storage: storage.status(), latestRelease: currentLatest() ?? null, closedThrough: currentFloor() };
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
        if (!acceptsEpoch(req.body.epoch) && !(req.body.epoch === epoch() + 1 && !clockBehind() && req.body.epoch > currentFloor()))
          throw new V2Error(
            400,
            'wrong_epoch',
            clockBehind()
              ? `epoch ${req.body.epoch} is not open: ${clockMessage()}`
              : req.body.epoch <= currentFloor()
                ? `epoch ${req.body.epoch} is closed (closed through ${currentFloor()})`
                : `epoch ${req.body.epoch} is neither open nor the next (current ${epoch()})`,
          );
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
        if (report.cohort >= ldp.cohorts || report.bucket >= ldp.g)
          throw new V2Error(400, 'bad_request', `report must have cohort < ${ldp.cohorts} and bucket < ${ldp.g}`);
        // why: one answer for every token failure (invalid, spent, other epoch): the reply tells nothing about other reports
        const refused = () =>
          new V2Error(403, 'token_refused', 'the token is not valid for a report of this epoch (invalid, already spent, or the epoch is closed)');
        if (!acceptsEpoch(e)) throw refused();
        const nonce = await iss.verify(token, e);
        if (nonce === undefined) throw refused();
        // why: the store refuses a closed epoch inside the spending transaction too (another instance may have closed it)
        if (!acceptsEpoch(e) || (await write('storing a report', () => store.spend(nonce, e, report.cohort, report.bucket))) !== 'counted') throw refused();
        reply.code(202);
        return { accepted: true };
      } catch (err) {
        return onError(err, reply);
      }
    });

    const sendRelease = async (reply: FastifyReply, e: number | undefined, immutable: boolean) => {
      let body: string | undefined;
      try {
        body = e === undefined ? undefined : await store.release(e);
      } catch (err) {
        const f = recordFailure(err, 'reading a release');
        if (f === undefined) throw err;
        return onError(storageError(f), reply);
      }
      if (body === undefined) return extra.fail(reply, 404, 'not_found', e === undefined ? 'no release published yet' : `no release for epoch ${e}`);
      // why: `latest` changes when an epoch is published; a cached copy would hand a device last epoch's
      // release (`no-cache` = revalidate every time; the ETag names the epoch)
      reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'public, no-cache');
      reply.header('etag', `"release-${e}"`);
      return reply.type('application/json').send(body);
    };
    api.get(INDEX_V2_PATHS.latest, async (_req, reply) => {
      let e: number | undefined;
      try {
        // why: with a shared store another instance may have published since the cache was read
        e = sqlite ? sqlite.latestRelease() : await store.latestRelease();
      } catch (err) {
        const f = recordFailure(err, 'reading the latest release');
        if (f === undefined) throw err;
        return onError(storageError(f), reply);
      }
      return sendRelease(reply, e, false);
    });
    api.get<{ Params: { epoch: string } }>('/v2/releases/:epoch', async (req, reply) => {
      if (!/^[0-9]{1,15}$/.test(req.params.epoch)) return extra.fail(reply, 400, 'bad_request', 'epoch must be a non-negative integer (or latest)');
      return sendRelease(reply, Number(req.params.epoch), true);
    });
  });

  return {
    get store(): ReportStore {
      if (!sqlite) throw new Error('v2.store is the embedded SQLite store; this service uses PostgreSQL (use v2.backend)');
      return sqlite;
    },
    backend: store,
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
    async refresh() {
      await refresh();
    },
    stopLoading() {
      if (!communities) stopClustering.abort(new Error('v2: the service closed while clustering the item space'));
    },
    async close() {
      stopped = true;
      if (timer) clearInterval(timer);
      if (upkeep) clearInterval(upkeep);
      if (recoveryTimer) clearTimeout(recoveryTimer);
      await ticking?.catch(() => {});
      try {
        if (storage.healthy) await store.maintain();
      } catch {
        // the store is failing; closing it is all that is left
      }
      await store.close();
    },
  };
}
