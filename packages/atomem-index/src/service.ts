/**
 * The shared community index as an HTTP service. Protocol v2 (src/protocol/index-v2.ts, the
 * default; routes in ./v2.ts): token-gated local-DP reports in, one aggregate release per epoch
 * out. Protocol v1 (below) is DEPRECATED and INSECURE (docs/PRIVACY.md: its records link, its
 * communities leak member vectors, k counts records) and served only with `legacyV1: true`.
 *
 * v1 (wire protocol v1, src/protocol/index-v1.ts):
 * fastify for HTTP and JSON-schema validation, SQLite ({@link MemoryStore}) for durability,
 * one {@link createInProcessIndex} per embedder with a usearch-backed {@link HnswVectorSearch}.
 *
 * Request life cycle of a mutation (all synchronous once the body is parsed, so requests never
 * interleave): schema validation → semantic validation of the WHOLE batch (embedder, base64,
 * dimension, zero vector, duplicate ids, replay, deletion tokens) → in-memory update → one
 * SQLite transaction (memories + every candidate list the update changed) → response. Bad input
 * never changes state. If anything fails after validation, the in-memory indexes are rebuilt
 * from SQLite (the source of truth) and the client gets a 500.
 *
 * Relation extraction (CommunityGraph): mutual top-k1 links between memories of different
 * uploads, communities = size-capped components. Below `exactBelow` memories (512) the
 * neighbour index scans exactly and the graph equals a recomputation from scratch; from there
 * on search is approximate (HNSW; a new memory is offered to the lists of its
 * `reverseCandidates` nearest memories, not to every list it would enter), so the live graph is
 * close to, not equal to, a recomputation (test/node/server-vector-index.test.ts).
 *
 * Restart: memories are restored with their persisted candidate lists (no search), so the
 * rebuilt links and communities are exactly the state the service acknowledged. The upload
 * groups are not persisted (they would link a device's memories in the file): after a restart
 * each memory is its own group, so a later list refill may link two memories that came in one
 * upload before the restart. Community ids (`c1`, `c2`, …) are renumbered by a restart. A file
 * written under the old rule (links new → older, no meta `linkRule`) is relinked once on load.
 *
 * Edge (./edge.ts, every route, v1 and v2): header / request / idle timeouts, a cap on
 * connections in all and per client address, rate limits per client address (never a header the
 * client chooses), tight body limits, CORS only for configured origins (default: same origin),
 * metrics only with a token. Health is answered from memory and never rate limited.
 *
 * Storage (./storage.ts): the data dir's marker and `quick_check` refuse a lost, foreign or
 * corrupted file at start; a failed write at run time is classified, named in health, and
 * answered 507 / 503 with `Retry-After` (v1: the in-memory index is then rebuilt from SQLite in
 * the background, the event loop is never blocked by it).
 *
 * Privacy: no IP address is logged or stored. The client address keys rate limits and the
 * connection cap in memory only (a keyed hash for rate limits; see ./edge.ts); `trustProxy` is
 * off unless configured; the request log serializer keeps only method and URL, and pino's
 * `pid`/`hostname` bindings are dropped. v1: released communities have ≥ k members and noisy
 * item counts with a secret per-data-dir seed.
 */

import { createHash, randomInt, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import cors from '@fastify/cors';
import { createInProcessIndex, type CommunityView, type InProcessIndex, type SharedMemoryUpload, type VectorHit, type VectorSearch } from 'atomem/engine';
import {
  INDEX_LIMITS,
  INDEX_PATHS,
  INDEX_V2_LIMITS,
  INDEX_V2_PATHS,
  INDEX_PROTOCOL_VERSION,
  dequantize,
  encodeVector,
  type CommunitiesRequest,
  type CommunitiesResponse,
  type DeleteRequest,
  type DeleteResponse,
  type ErrorResponse,
  type HealthResponse,
  type MetricsResponse,
  type UpsertRequest,
  type UpsertResponse,
  type WireCommunity,
} from 'atomem/protocol';
import { communitiesBodySchema, deleteBodySchema, upsertBodySchema } from './schemas.js';
import { MemoryStore, type NewMemory, type StoredLink, type StoredMemory } from './store.js';
import { HnswVectorSearch, type HnswOptions, type HnswStats } from './vector-index.js';
import { registerV2, type V2Controller, type V2Options } from './v2.js';
import { KNOWN_EMBEDDER_DIMS } from './defaults.js';
import { DataDir, StorageError, StorageHealth, type StorageFailure } from './storage.js';
import { LoopDelay, addressKeyer, corsOriginOption, installConnectionCaps, openFileLimit, resolveNetworkLimits, type CorsOrigins, type EdgeCounters, type NetworkLimits } from './edge.js';

/**
 * Header of v1 clients (an anonymous per-session token). The service no longer keys anything on
 * it (a client chooses it freely); browsers may still send it, so CORS allows it.
 */
export { CLIENT_HEADER } from 'atomem/protocol';
import { CLIENT_HEADER } from 'atomem/protocol';
/** Shape of the {@link CLIENT_HEADER} value v1 clients send (ignored by the service). */
export const CLIENT_TOKEN_PATTERN = /^[A-Za-z0-9_-]{8,128}$/;

/** Where log lines go when the service is given logger options (pino destination). */
export interface LogStream {
  write(line: string): void;
}

/** Options of {@link createIndexService}. */
export interface IndexServiceOptions {
  /** Directory of the SQLite files (created if missing). One service per directory. */
  dataDir: string;
  /** Protocol v2 (the default protocol): the item space and the epoch, LDP and token settings. */
  v2?: V2Options;
  /**
   * Also serve the DEPRECATED, INSECURE protocol v1 (`/v1/…`: raw memory vectors in, member
   * vectors out; see docs/PRIVACY.md). Default false. Only for the privacy benchmark's "before"
   * figures and old clients during a migration.
   */
  legacyV1?: boolean;
  /** v1 only: embedder ids served; uploads and queries for other ids get 400 `unknown_embedder`. */
  embedderIds?: string[];
  /**
   * v1 only: the vector dimension of every served embedder (the registry, fixed by
   * configuration: an upload of another dimension gets 400 `wrong_dimension`, and a data dir
   * holding another dimension for an embedder refuses the start). Required for each id of
   * `embedderIds` except the browser engine's own embedders (`KNOWN_EMBEDDER_DIMS`).
   */
  embedderDims?: Record<string, number>;
  /** k of k-anonymity: communities with fewer members are never released. Default 3. */
  minCommunitySize?: number;
  /** Laplace scale b of released item counts. Default 1. */
  itemNoise?: number;
  /** Seed of the item-count noise. Default: a secret random seed stored in the data dir. */
  noiseSeed?: number;
  /** Links per memory: mutual top-k1 (STEAM k1). Default 2. */
  k1?: number;
  /** Minimum link similarity (STEAM tau). Default 0.5. */
  tau?: number;
  /** Largest community (bigger components are cut, strongest links kept). Default: the graph's (128). */
  maxCommunitySize?: number;
  /** Cap on member vectors released per community. Default 64. */
  maxMembers?: number;
  /** Which members to release beyond `maxMembers`. Default `similar`. */
  memberSelection?: 'similar' | 'sample';
  /** Release each own memory's ≤ `hops` neighbourhood instead of whole components. Default: whole components. */
  hops?: number;
  /**
   * Rate limit per client address (the socket's peer, or with `trustProxy` the address the
   * proxy reports; see ./edge.ts), over every route but health; the attester's issuance
   * requests (valid attester key) are exempt. `false` disables. Default 600 per minute.
   */
  rateLimit?: { max: number; timeWindow: number | string } | false;
  /**
   * Behind a reverse proxy or load balancer: fastify's `trustProxy` (`true`, a hop count, or the
   * proxy addresses / CIDRs to trust), so the client address is taken from `X-Forwarded-For`
   * as set by that proxy. Default false: the socket's peer is the client (a client cannot choose
   * its address). With it the per-address connection cap is off by default (the proxy's job).
   */
  trustProxy?: boolean | number | string | string[];
  /**
   * Origins (shop pages) allowed to read answers from a browser on another origin: exact
   * origins (`https://shop.example`) and regular expressions, or `'*'` for any real origin (no
   * credentials are ever accepted). `null` is never allowed. Default: none (same origin only).
   */
  corsOrigins?: CorsOrigins;
  /**
   * Bearer token of the metrics routes (`/v2/metrics`, v1 `/v1/metrics`: per-route counters
   * are a side channel on other shoppers' activity). Without it those routes answer 404.
   */
  metricsToken?: string;
  /** Timeouts and connection caps (./edge.ts). */
  network?: NetworkLimits;
  /** Storage checks and limits (./storage.ts). */
  storage?: {
    /** Size limit per database file in bytes (writes beyond it answer 507 as on a full disk). Default none. */
    maxBytes?: number;
    /** `quick_check` every file at start. Default true. */
    integrityCheck?: boolean;
  };
  /** v1 only: member vectors in one communities answer, over all its communities (a 512-d answer stays under ~200 KB). Default 256. */
  maxResponseMembers?: number;
  /**
   * `false` (default): no logging. `true` or options: JSON lines (pino) to `stream` (default
   * stdout) at `level` (default `info`), never with IP addresses or host names.
   */
  logger?: boolean | { level?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'; stream?: LogStream };
  /** SQLite `synchronous` (see src/server/store.ts). Default `normal`: acknowledged writes survive SIGKILL. */
  synchronous?: 'normal' | 'full';
  /** Resolution of stored `createdAt`. Default one hour. */
  createdAtResolutionMs?: number;
  /** Neighbour index options (exact below `exactBelow` vectors, HNSW above). */
  vectorIndex?: HnswOptions;
}

/** A running service. */
export interface IndexService {
  /** The fastify app (routes registered; call {@link IndexService.listen} or `app.listen`). */
  readonly app: FastifyInstance;
  /**
   * Resolves once every route is served: v1's memories loaded from disk, v2's item space read
   * and its issuer key loaded (before that, routes answer 503 `not_ready`). v2's communities may
   * still be computed then (health says `clustering`; aggregation waits for them).
   */
  readonly serving: Promise<void>;
  /** Resolves once the service is {@link serving} and v2's item-space communities are computed too. */
  readonly ready: Promise<void>;
  /** The v1 store (only with `legacyV1`; throws otherwise). Read it in tests and tools. */
  readonly store: MemoryStore;
  /** The v2 part (undefined without `v2` options). */
  readonly v2: V2Controller | undefined;
  /** Listen on `host:port` (port 0 = any free port); resolves to the base URL. Logs no address. */
  listen(options: { port: number; host?: string }): Promise<string>;
  /** The in-process index of an embedder (undefined if not served). Read only. */
  index(embedderId: string): InProcessIndex | undefined;
  /** Counters of an embedder's neighbour index (undefined before its first vector). */
  vectorStats(embedderId: string): HnswStats | undefined;
  /** Current communities of an embedder as sorted member-id lists, ordered by first id. */
  partition(embedderId: string): string[][];
  /** Storage health (what `/v2/health` reports as `storage`). */
  readonly storage: StorageHealth;
  /** Edge counters: open and refused connections, rate-limited requests. */
  readonly edge: EdgeCounters;
  /** Stop accepting requests, finish in-flight ones, close the store. Idempotent. */
  close(): Promise<void>;
}

/** Meta key and value marking a v1 store whose links are candidate lists (mutual top-k1 rule). */
const LINK_RULE_KEY = 'linkRule';
const LINK_RULE = 'mutual-top-k1';

/** The candidate lists of `ids` in `space` as link rows (a removed id has none). */
function candidateLinks(space: Space, ids: Iterable<string>): StoredLink[] {
  const out: StoredLink[] = [];
  for (const id of ids) for (const n of space.index.graph.candidates(id)) out.push({ src: id, dst: n.id, sim: n.sim });
  return out;
}

/** A 4xx/5xx answer with its protocol error code. */
export class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** A storage failure as an answer: 507 / 503 with `Retry-After`. */
export function storageHttpError(f: StorageFailure): HttpError {
  return new HttpError(f.status, f.code, f.message, f.retryAfterSeconds);
}

/** Per-embedder state. */
interface Space {
  readonly embedderId: string;
  index: InProcessIndex;
  search: HnswVectorSearch | undefined;
  /** Dimension, fixed by configuration (`embedderDims`). */
  dim: number;
}

const ROUTE_NAMES: Record<string, string> = Object.fromEntries(Object.entries(INDEX_PATHS).map(([k, v]) => [v, k]));
const V2_ROUTE_NAMES: Record<string, string> = {
  ...Object.fromEntries(Object.entries(INDEX_V2_PATHS).filter(([, v]) => typeof v === 'string').map(([k, v]) => [v as string, `v2.${k}`])),
  '/v2/releases/:epoch': 'v2.release',
  '/v2/metrics': 'v2.metrics',
};
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Strict base64 → int8 values (undefined when not canonical base64). */
function decodeStrict(b64: string): Int8Array | undefined {
  if (!BASE64.test(b64)) return undefined;
  const buf = Buffer.from(b64, 'base64');
  return new Int8Array(buf.buffer, buf.byteOffset, buf.byteLength).slice();
}

function toWire(v: CommunityView): WireCommunity {
  const w: WireCommunity = {
    id: v.id,
    size: v.size,
    prototype: encodeVector(v.prototype),
    members: v.members.map((m) => encodeVector(m)),
    ownIds: v.ownIds,
  };
  if (v.items !== undefined) w.items = v.items;
  if (v.related !== undefined) w.related = v.related;
  return w;
}

function loggerConfig(option: IndexServiceOptions['logger']) {
  if (option === undefined || option === false) return false;
  const o = option === true ? {} : option;
  return {
    level: o.level ?? 'info',
    ...(o.stream ? { stream: o.stream } : {}),
    // why: pino's default bindings carry pid and hostname; the service logs neither
    base: null,
    serializers: {
      // why: fastify's default req serializer logs remoteAddress, remotePort and host
      req: (req: { method?: string; url?: string }) => ({ method: req.method, url: req.url }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
  };
}

/**
 * Build the service: opens (or creates) the data dir and its stores, registers the routes and
 * starts loading (see {@link IndexService.ready}). Throws {@link StorageError} (the data dir or
 * one of its files cannot be used: the message names it and the fix),
 * {@link import('./store.js').DataDirInUseError} when another process holds the data dir, or
 * RangeError on a bad option.
 */
export function createIndexService(options: IndexServiceOptions): IndexService {
  const { minCommunitySize = 3 } = options;
  if (!options.legacyV1 && !options.v2) throw new RangeError('configure protocol v2 (options.v2 with the item space) or, deprecated, legacyV1');
  // why: validate every option before the data dir is touched
  const network = resolveNetworkLimits(options.network, options.trustProxy);
  corsOriginOption(options.corsOrigins);
  if (options.metricsToken !== undefined && options.metricsToken.length < 16) throw new RangeError('metricsToken must be at least 16 characters');
  const embedderIds = options.legacyV1 ? [...new Set(options.embedderIds ?? [])] : [];
  const dims = new Map<string, number>();
  if (options.legacyV1) {
    if (embedderIds.length === 0) throw new RangeError('embedderIds must name at least one embedder (legacy v1)');
    for (const e of embedderIds) {
      if (typeof e !== 'string' || e.length === 0 || e.length > INDEX_LIMITS.maxIdLength) {
        throw new RangeError(`embedder id ${JSON.stringify(e)} must be 1–${INDEX_LIMITS.maxIdLength} characters`);
      }
      const d = options.embedderDims?.[e] ?? KNOWN_EMBEDDER_DIMS[e];
      if (!(Number.isInteger(d) && d! >= 1 && d! <= INDEX_LIMITS.maxDim)) {
        throw new RangeError(`embedder ${e}: its dimension must be configured (embedderDims[${JSON.stringify(e)}] / --embedder ${e}=<dim>, an integer in 1..${INDEX_LIMITS.maxDim}), got ${String(d)}; the first upload no longer sets it`);
      }
      dims.set(e, d!);
    }
    if (!Number.isInteger(minCommunitySize) || minCommunitySize < 1) throw new RangeError(`minCommunitySize must be an integer ≥ 1, got ${minCommunitySize}`);
  }
  const dir = DataDir.open(options.dataDir);
  if (!options.legacyV1) return buildService(options, dir, network, [], new Map(), undefined);
  const store = MemoryStore.open(dir, { synchronous: options.synchronous, createdAtResolutionMs: options.createdAtResolutionMs, maxBytes: options.storage?.maxBytes, integrityCheck: options.storage?.integrityCheck === false ? 'off' : 'quick' });
  try {
    const stored = store.embedderDims();
    for (const [e, d] of dims) {
      const had = stored.get(e);
      if (had !== undefined && had !== d) {
        throw new StorageError(
          'mismatch',
          store.file,
          `${store.file} holds ${had}-dimensional vectors for embedder ${e}, but the service is configured with ${d} (embedderDims / --embedder ${e}=${d}). Fix: configure ${e}=${had}, or serve the new embedder from another data dir.`,
        );
      }
    }
    const missing = [...dims].filter(([e]) => !stored.has(e));
    if (missing.length) store.upsert([], [], missing);
    return buildService(options, dir, network, embedderIds, dims, store);
  } catch (err) {
    store.close();
    throw err;
  }
}

/** {@link createIndexService} once the options are checked and the v1 store (legacy only) is open. */
function buildService(
  options: IndexServiceOptions,
  dir: DataDir,
  network: ReturnType<typeof resolveNetworkLimits>,
  embedderIds: string[],
  dims: Map<string, number>,
  legacyStore: MemoryStore | undefined,
): IndexService {
  const legacy = legacyStore !== undefined;
  // why: without legacyV1 there is no v1 state; the v1 code paths below are never routed then
  const store = legacyStore ?? (undefined as unknown as MemoryStore);
  const { minCommunitySize = 3, itemNoise = 1, k1, tau, maxMembers = 64, memberSelection, hops, rateLimit: limit = { max: 600, timeWindow: 60_000 }, maxResponseMembers = 256 } = options;
  let seed = options.noiseSeed;
  if (seed === undefined && legacy) {
    const stored = store.getMeta('noiseSeed');
    seed = stored === undefined ? randomInt(0, 2 ** 31) : Number(stored);
    if (stored === undefined) store.setMeta('noiseSeed', String(seed));
  }
  // why: an empty file is written under the current link rule from the start; only a file with
  // memories and no marker holds the old rule's links
  if (legacy && store.getMeta(LINK_RULE_KEY) === undefined && store.count() === 0) store.setMeta(LINK_RULE_KEY, LINK_RULE);
  const noiseSeed = seed ?? 0;
  const storage = new StorageHealth();

  const spaces = new Map<string, Space>();
  let loading = false;
  const newSpace = (embedderId: string): Space => {
    const space: Space = { embedderId, index: undefined as unknown as InProcessIndex, search: undefined, dim: dims.get(embedderId)! };
    space.index = createInProcessIndex({
      embedderId,
      k1,
      tau,
      maxCommunitySize: options.maxCommunitySize,
      minCommunitySize,
      itemNoise,
      seed: noiseSeed,
      maxMembers,
      memberSelection,
      hops,
      createVectorSearch: (d) => {
        const inner = new HnswVectorSearch(d, options.vectorIndex);
        if (loading) inner.suspend();
        space.search = inner;
        return inner;
      },
    });
    return space;
  };
  const resetSpaces = (): void => {
    if (!legacy) return;
    for (const s of spaces.values()) s.search?.dispose();
    spaces.clear();
    for (const e of embedderIds) spaces.set(e, newSpace(e));
  };
  resetSpaces();

  let ready = false;
  let loadError: Error | undefined;
  let loaded = 0;
  let unserved = 0;
  let closed = false;
  /** v1: the in-memory index is being rebuilt from SQLite after a failed write. */
  let rebuilding: Promise<void> | undefined;
  const startedAt = Date.now();
  const requests: Record<string, number> = {};
  const rejected: Record<string, number> = {};
  const loop = new LoopDelay();

  /**
   * Load every stored memory with its persisted candidate list, page by page (a generator, so
   * both the first load and a rebuild yield to the event loop between pages), then restore each
   * space in one pass without searching. A file of the old link rule is relinked (searches, once).
   */
  function* replay(): Generator<void, void, void> {
    loading = true;
    loaded = 0;
    unserved = 0;
    const pending = new Map<string, (SharedMemoryUpload & { candidates: VectorHit[] })[]>();
    const oldRule = store.getMeta(LINK_RULE_KEY) !== LINK_RULE;
    try {
      let after = 0;
      for (;;) {
        const page = store.page(after, 2048);
        if (page.memories.length === 0) break;
        const bySrc = new Map<string, VectorHit[]>();
        for (const l of page.links) {
          let list = bySrc.get(l.src);
          if (list === undefined) bySrc.set(l.src, (list = []));
          list.push({ id: l.dst, sim: l.sim });
        }
        for (const m of page.memories) {
          if (!spaces.has(m.embedderId)) {
            unserved++;
            continue;
          }
          let p = pending.get(m.embedderId);
          if (p === undefined) pending.set(m.embedderId, (p = []));
          p.push({ ...toUpload(m), candidates: oldRule ? [] : (bySrc.get(m.id) ?? []) });
        }
        after = page.memories[page.memories.length - 1].seq;
        yield;
      }
      for (const [e, uploads] of pending) {
        const space = spaces.get(e)!;
        if (!oldRule) {
          space.index.restoreSync(uploads);
          loaded += uploads.length;
          continue;
        }
        // why: the old rule's links (new → older) are no candidate lists; derive them anew, one
        // memory per upload (the upload groups were never stored), and persist them
        space.search?.resume();
        const relinked = new Set<string>();
        for (const u of uploads) {
          const { candidates: _, ...upload } = u;
          for (const id of space.index.upsertSync([upload]).relinked) relinked.add(id);
          loaded++;
        }
        store.relink(candidateLinks(space, relinked), [...relinked]);
        yield;
      }
      if (oldRule) store.setMeta(LINK_RULE_KEY, LINK_RULE);
    } finally {
      loading = false;
      for (const space of spaces.values()) space.search?.resume();
    }
  }

  const toUpload = (m: StoredMemory): SharedMemoryUpload => ({
    id: m.id,
    embedderId: m.embedderId,
    vector: dequantize(m.vector),
    ...(m.items !== undefined ? { items: m.items } : {}),
  });

  /** Run a replay to its end, yielding to the event loop between pages. */
  const runReplay = async (): Promise<boolean> => {
    const steps = replay();
    while (!closed && !steps.next().done) await new Promise<void>((r) => setImmediate(r));
    if (closed) {
      steps.return();
      return false;
    }
    return true;
  };

  /**
   * After a failure mid-mutation (the in-memory index is ahead of SQLite): rebuild it from
   * SQLite, the source of truth, in the background; v1 routes answer 503 `not_ready` meanwhile.
   */
  const startRebuild = (): void => {
    if (rebuilding || closed) return;
    ready = false;
    rebuilding = (async () => {
      try {
        resetSpaces();
        await runReplay();
        ready = true;
        app.log.info({ memories: loaded }, 'index rebuilt from the store after a failed write');
      } catch (err) {
        loadError = err as Error;
        app.log.error({ err }, 'rebuilding the index from the store failed');
      } finally {
        rebuilding = undefined;
      }
    })();
  };

  const app = Fastify({
    logger: loggerConfig(options.logger),
    // why: fastify accepts a hop count at run time (proxy-addr), its types omit it
    trustProxy: (options.trustProxy ?? false) as boolean | string | string[],
    bodyLimit: legacy ? INDEX_LIMITS.maxBodyBytes : INDEX_V2_LIMITS.maxBodyBytes,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // why: fastify's defaults are 0 (no limit); see ./edge.ts
    connectionTimeout: network.idleTimeoutMs,
    requestTimeout: network.requestTimeoutMs,
    keepAliveTimeout: network.keepAliveTimeoutMs,
    maxRequestsPerSocket: network.maxRequestsPerSocket,
    // why: Node checks the header and request timeouts every connectionsCheckingInterval (default 30 s)
    http: { headersTimeout: network.headersTimeoutMs, requestTimeout: network.requestTimeoutMs, connectionsCheckingInterval: 1000 },
    // why: reject (not strip) unknown fields, never coerce "3" → 3 or null → 0
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
  });
  const fdLimit = openFileLimit();
  const edge = installConnectionCaps(app.server, { ...network, maxConnections: Math.min(network.maxConnections, fdLimit !== undefined ? Math.max(64, Math.floor(fdLimit / 2)) : Infinity) });

  let v2: V2Controller | undefined;
  let v2Registered!: () => void;
  // why: v2 registers below (it needs `fail`); the load waits for that, then for v2's item space
  const v2Started = new Promise<void>((r) => (v2Registered = r));
  const serving$ = (async () => {
    await v2Started;
    await v2?.serving;
    if (!legacy) {
      ready = true;
      return;
    }
    if (!(await runReplay())) return;
    ready = true;
    app.log.info({ memories: loaded, unserved }, 'index loaded');
  })().catch((err: Error) => {
    loadError = err;
    app.log.error({ err }, 'loading the index failed');
    throw err;
  });
  const ready$ = (async () => {
    await serving$;
    await v2?.ready;
  })();
  // why: the promises are also exposed; keep an unobserved rejection from crashing the process
  serving$.catch(() => {});
  ready$.catch(() => {});

  const count = (bag: Record<string, number>, key: string): void => {
    bag[key] = (bag[key] ?? 0) + 1;
  };
  const fail = (reply: FastifyReply, status: number, code: string, message: string, retryAfterSeconds?: number): FastifyReply => {
    count(rejected, code);
    const body: ErrorResponse = { error: code, message };
    if (retryAfterSeconds !== undefined) reply.header('retry-after', String(retryAfterSeconds));
    return reply.code(status).type('application/json').send(body);
  };

  app.setErrorHandler((err: FastifyError & { validation?: { keyword: string; instancePath: string }[] }, req, reply) => {
    if (err instanceof HttpError) return fail(reply, err.statusCode, err.code, err.message, err.retryAfterSeconds);
    if (err.validation) {
      const tooMany = err.validation.some((v) => v.keyword === 'maxItems');
      return fail(reply, tooMany ? 413 : 400, tooMany ? 'too_large' : 'bad_request', err.message);
    }
    switch (err.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return fail(reply, 413, 'too_large', `request body exceeds ${req.routeOptions.bodyLimit ?? INDEX_LIMITS.maxBodyBytes} bytes`);
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return fail(reply, 415, 'unsupported_media_type', 'body must be application/json');
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return fail(reply, 400, 'bad_request', 'body is empty; expected a JSON object');
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return fail(reply, 400, 'bad_request', 'body is not valid JSON');
      case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
        return fail(reply, 400, 'bad_request', 'content-length does not match the body');
    }
    if (err.statusCode === 429) return fail(reply, 429, 'rate_limited', err.message);
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) return fail(reply, err.statusCode, 'bad_request', err.message);
    req.log.error({ err }, 'request failed');
    return fail(reply, 500, 'internal', 'internal error; the request had no effect');
  });
  app.setNotFoundHandler((req, reply) => fail(reply, 404, 'not_found', `no route ${req.method} ${req.url.split('?')[0]}`));
  app.addHook('onRequest', async (req) => {
    count(requests, ROUTE_NAMES[req.routeOptions.url ?? ''] ?? V2_ROUTE_NAMES[req.routeOptions.url ?? ''] ?? 'other');
  });

  // browsers call the index from the shop's pages (maybe another origin); no credentials, ever
  app.register(cors, { origin: corsOriginOption(options.corsOrigins), methods: ['GET', 'POST'], allowedHeaders: ['content-type', CLIENT_HEADER], credentials: false, maxAge: 600 });

  const attesterKey = options.v2?.attesterKey;
  if (limit !== false) {
    const keyOf = addressKeyer();
    app.register(rateLimit, {
      global: true,
      max: limit.max,
      timeWindow: limit.timeWindow,
      // why: enough buckets that many addresses cannot evict an abuser's bucket
      cache: 50_000,
      // why: the address costs the client something (it cannot choose it); a header it chooses would not
      keyGenerator: (req: FastifyRequest) => keyOf(req.ip),
      // why: the attester (the shop's server, authenticated by its key) asks for tokens on behalf of all its shoppers
      allowList: (req: FastifyRequest) => attesterKey !== undefined && req.url === INDEX_V2_PATHS.issue && bearerIs(req.headers.authorization, attesterKey),
      onExceeded: () => {
        edge.rateLimited++;
      },
      errorResponseBuilder: (_req, ctx) => new HttpError(429, 'rate_limited', `rate limit exceeded (${ctx.max} requests per window per client address), retry in ${ctx.after}`),
    });
  }

  /** Metrics need `authorization: Bearer <metricsToken>`; without a configured token the routes are absent. */
  const metricsAllowed = (req: FastifyRequest): boolean => options.metricsToken !== undefined && bearerIs(req.headers.authorization, options.metricsToken);

  const requireReady = (): void => {
    if (loadError) throw new HttpError(503, 'not_ready', 'the index failed to load its data; see the service log', 60);
    if (rebuilding) throw new HttpError(503, 'not_ready', `the index is rebuilding from ${store.file} after a failed write (${loaded} memories so far)`, 5);
    if (!ready || loading) throw new HttpError(503, 'not_ready', `the index is loading (${loaded} memories so far)`, 5);
  };

  /** v1 health body, recomputed at most once a second (it walks every community) and after every write. */
  let healthCache: { at: number; body: HealthResponse } | undefined;
  const health = (): HealthResponse => {
    const now = Date.now();
    if (healthCache && now - healthCache.at < 1000) return { ...healthCache.body, storage: storage.status() };
    let memories = unserved;
    let communities = 0;
    for (const s of spaces.values()) {
      memories += s.index.graph.size;
      communities += s.index.stats().releasableCommunities;
    }
    const body: HealthResponse = { status: storage.healthy ? 'ok' : 'degraded', version: INDEX_PROTOCOL_VERSION, embedderIds, memories, communities, minCommunitySize, itemNoise, storage: storage.status() };
    healthCache = { at: now, body };
    return body;
  };

  /**
   * Writes of v1: refused before touching memory while the store is failing (a probe gets
   * through every 5 s), classified when they fail, and followed by a background rebuild when
   * the in-memory index got ahead of SQLite.
   */
  let lastProbe = 0;
  const beforeWrite = (): void => {
    const blocked = storage.blocked(store.file);
    if (blocked) throw storageHttpError(blocked);
    const f = storage.failure(store.file);
    if (f && Date.now() - lastProbe < 5000) throw storageHttpError(f);
    if (f) lastProbe = Date.now();
  };
  const afterFailedWrite = (err: unknown): never => {
    startRebuild();
    const f = storage.fail(err, store.file);
    if (f) {
      healthCache = undefined;
      lastProbe = Date.now();
      app.log.error({ err: { code: (err as { code?: string }).code, message: (err as Error).message }, file: store.file, state: f.state }, 'v1: write failed');
      throw storageHttpError(f);
    }
    throw err;
  };

  /** Memories whose candidate lists the current mutation changed, per space (emptied by `changedLists`). */
  const relinkedBySpace = new Map<Space, Set<string>>();
  const relinkedIn = (space: Space): Set<string> => {
    let set = relinkedBySpace.get(space);
    if (set === undefined) relinkedBySpace.set(space, (set = new Set()));
    return set;
  };
  /** The changed lists as rows to write (and forget them). */
  const changedLists = (): { links: StoredLink[]; relinked: string[] } => {
    const links: StoredLink[] = [];
    const relinked: string[] = [];
    for (const [space, ids] of relinkedBySpace) {
      links.push(...candidateLinks(space, ids));
      relinked.push(...ids);
    }
    relinkedBySpace.clear();
    return { links, relinked };
  };

  /** Validate a whole upsert batch; returns what to write, or throws an {@link HttpError}. */
  const planUpsert = (memories: UpsertRequest['memories']) => {
    const seen = new Map<string, number>();
    const rows: { mem: NewMemory; space: Space; previous: string | undefined }[] = [];
    memories.forEach((m, i) => {
      const at = `memories[${i}]`;
      const first = seen.get(m.id);
      if (first !== undefined) throw new HttpError(400, 'bad_request', `${at}.id repeats memories[${first}].id; ids must be unique within a batch`);
      seen.set(m.id, i);
      const space = spaces.get(m.embedderId);
      if (space === undefined) {
        throw new HttpError(400, 'unknown_embedder', `${at}.embedderId is not served by this index (served: ${embedderIds.join(', ')})`);
      }
      const q = decodeStrict(m.vector);
      if (q === undefined) throw new HttpError(400, 'bad_request', `${at}.vector is not valid base64`);
      if (q.length !== m.dim) throw new HttpError(400, 'wrong_dimension', `${at}.vector decodes to ${q.length} int8 values but ${at}.dim is ${m.dim}`);
      if (m.dim !== space.dim) {
        throw new HttpError(400, 'wrong_dimension', `${at}.dim is ${m.dim} but this index serves ${space.dim}-dimensional vectors for ${at}.embedderId`);
      }
      if (q.every((x) => x === 0)) throw new HttpError(400, 'bad_request', `${at}.vector is all zeros (it has no direction)`);
      const stored = store.get(m.id);
      if (stored !== undefined && !sameHex(stored.tokenHash, m.tokenHash)) {
        throw new HttpError(409, 'conflict', `${at}.id is already stored with another tokenHash; upload under a fresh id`);
      }
      rows.push({
        mem: { id: m.id, tokenHash: m.tokenHash, embedderId: m.embedderId, dim: m.dim, vector: q, items: m.items },
        space,
        previous: stored?.embedderId,
      });
    });
    return rows;
  };

  if (options.v2) {
    v2 = registerV2(app, dir, options.v2, {
      synchronous: options.synchronous,
      legacyV1: legacy,
      fail,
      storage,
      maxBytes: options.storage?.maxBytes,
      integrityCheck: options.storage?.integrityCheck !== false,
      metricsAllowed,
      metrics: () => ({ requests: { ...requests }, rejected: { ...rejected }, edge: { ...edge }, loopDelayMs: loop.read(), uptimeSeconds: Math.round((Date.now() - startedAt) / 1000), rssBytes: process.memoryUsage.rss() }),
    });
  }
  v2Registered();

  if (legacy) app.register(async (api) => {
    api.get(INDEX_PATHS.health, { config: { rateLimit: false } }, async (_req, reply): Promise<HealthResponse | FastifyReply> => {
      requireReady();
      const h = health();
      if (h.status !== 'ok') reply.code(503);
      return h;
    });

    api.get(INDEX_PATHS.metrics, async (req, reply): Promise<MetricsResponse | FastifyReply> => {
      if (!metricsAllowed(req)) return fail(reply, 404, 'not_found', `no route GET ${INDEX_PATHS.metrics} (metrics need the metrics token)`);
      const h = health();
      return {
        memories: h.memories,
        communities: h.communities,
        requests: { ...requests },
        rejected: { ...rejected },
        uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
        rssBytes: process.memoryUsage.rss(),
      };
    });

    api.post<{ Body: UpsertRequest }>(INDEX_PATHS.upsert, { schema: { body: upsertBodySchema } }, async (req): Promise<UpsertResponse> => {
      requireReady();
      const rows = planUpsert(req.body.memories);
      if (rows.length === 0) return { accepted: 0 };
      beforeWrite();
      relinkedBySpace.clear();
      try {
        // A memory re-uploaded under another embedder leaves its old space first.
        for (const r of rows) {
          if (r.previous === undefined || r.previous === r.mem.embedderId) continue;
          const from = spaces.get(r.previous);
          if (from === undefined) unserved--;
          else for (const id of from.index.deleteSync([r.mem.id]).relinked) relinkedIn(from).add(id);
        }
        const groups = new Map<Space, SharedMemoryUpload[]>();
        for (const r of rows) {
          let g = groups.get(r.space);
          if (g === undefined) groups.set(r.space, (g = []));
          g.push({ id: r.mem.id, embedderId: r.mem.embedderId, vector: dequantize(r.mem.vector), ...(r.mem.items ? { items: r.mem.items } : {}) });
        }
        for (const [space, uploads] of groups) for (const id of space.index.upsertSync(uploads).relinked) relinkedIn(space).add(id);
        // Every candidate list the update changed (new memories', evictions, refills).
        const { links, relinked } = changedLists();
        store.upsert(
          rows.map((r) => r.mem),
          links,
          [],
          relinked,
        );
      } catch (err) {
        afterFailedWrite(err);
      }
      storage.ok(store.file);
      healthCache = undefined;
      return { accepted: rows.length };
    });

    api.post<{ Body: DeleteRequest }>(INDEX_PATHS.delete, { schema: { body: deleteBodySchema } }, async (req): Promise<DeleteResponse> => {
      requireReady();
      const found = new Map<string, string>();
      req.body.deletions.forEach((d, i) => {
        const stored = store.get(d.id);
        if (stored === undefined) return;
        if (!sameHex(stored.tokenHash, sha256Hex(d.token))) {
          throw new HttpError(403, 'forbidden', `deletions[${i}].token is not the deletion token of deletions[${i}].id; nothing was deleted`);
        }
        found.set(d.id, stored.embedderId);
      });
      if (found.size === 0) return { deleted: 0 };
      beforeWrite();
      relinkedBySpace.clear();
      let deleted = 0;
      try {
        const byEmbedder = new Map<string, string[]>();
        for (const [id, e] of found) {
          let list = byEmbedder.get(e);
          if (list === undefined) byEmbedder.set(e, (list = []));
          list.push(id);
        }
        for (const [e, ids] of byEmbedder) {
          const space = spaces.get(e);
          if (space === undefined) unserved -= ids.length;
          else for (const id of space.index.deleteSync(ids).relinked) relinkedIn(space).add(id);
        }
        const { links, relinked } = changedLists();
        deleted = store.delete([...found.keys()], links, relinked);
      } catch (err) {
        afterFailedWrite(err);
      }
      storage.ok(store.file);
      healthCache = undefined;
      return { deleted };
    });

    api.post<{ Body: CommunitiesRequest }>(
      INDEX_PATHS.communities,
      { schema: { body: communitiesBodySchema } },
      async (req): Promise<CommunitiesResponse> => {
        requireReady();
        const space = spaces.get(req.body.embedderId);
        if (space === undefined) {
          throw new HttpError(400, 'unknown_embedder', `embedderId is not served by this index (served: ${embedderIds.join(', ')})`);
        }
        const views = space.index.communitiesSync(req.body.ids);
        // Defence in depth: the index already releases only communities with ≥ k members.
        const released = views.filter((v) => v.size >= minCommunitySize);
        // Per-response cap: at most maxResponseMembers member vectors over all communities.
        let budget = maxResponseMembers;
        return {
          communities: released.map((v) => {
            const take = Math.max(0, Math.min(v.members.length, budget));
            budget -= take;
            return toWire(take === v.members.length ? v : { ...v, members: v.members.slice(0, take) });
          }),
        };
      },
    );
  });

  let closing: Promise<void> | undefined;
  return {
    app,
    serving: serving$,
    ready: ready$,
    get store(): MemoryStore {
      if (!legacy) throw new Error('service.store: the v1 store exists only with legacyV1');
      return store;
    },
    v2,
    storage,
    edge,
    async listen({ port, host = '127.0.0.1' }) {
      await app.listen({ port, host, listenTextResolver: () => 'index service listening' });
      const addr = app.server.address();
      if (addr === null || typeof addr === 'string') throw new Error('unexpected server address');
      const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      return `http://${h}:${addr.port}`;
    },
    index: (embedderId) => spaces.get(embedderId)?.index,
    vectorStats: (embedderId) => spaces.get(embedderId)?.search?.stats(),
    partition(embedderId) {
      const s = spaces.get(embedderId);
      if (s === undefined) return [];
      return [...s.index.graph.communities().values()]
        .map((m) => [...m].sort())
        .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    },
    close() {
      closing ??= (async () => {
        closed = true;
        // why: a close during the item-space clustering ends its worker instead of waiting for it
        v2?.stopLoading();
        await ready$.catch(() => {});
        await rebuilding;
        await app.close();
        loop.dispose();
        for (const s of spaces.values()) s.search?.dispose();
        v2?.close();
        legacyStore?.close();
      })();
      return closing;
    },
  };
}

/** `authorization: Bearer <secret>`, compared in constant time. */
function bearerIs(header: string | undefined, secret: string): boolean {
  if (typeof header !== 'string' || !header.startsWith('Bearer ')) return false;
  const a = Buffer.from(header.slice(7));
  const b = Buffer.from(secret);
  return a.length === b.length && timingSafeEqual(a, b);
}
