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
 * SQLite transaction (memories + the links relation extraction just made) → response. Bad input
 * never changes state. If anything fails after validation, the in-memory indexes are rebuilt
 * from SQLite (the source of truth) and the client gets a 500.
 *
 * Restart: memories are replayed oldest first together with their persisted links (a scripted
 * {@link VectorSearch} hands the graph the stored links instead of searching), so the rebuilt
 * communities are exactly the connected components of the stored link graph: the state the
 * service acknowledged, not a re-derivation that would differ after deletions. Community ids
 * (`c1`, `c2`, …) are renumbered by a restart.
 *
 * Privacy: no IP address is used or logged (rate limits key on the anonymous `x-atomem-client`
 * header, `trustProxy` is off, the request log serializer keeps only method and URL, and pino's
 * `pid`/`hostname` bindings are dropped); released communities have ≥ k members and noisy item
 * counts with a secret per-data-dir seed.
 */

import { createHash, randomInt, timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import cors from '@fastify/cors';
import { createInProcessIndex, type CommunityView, type InProcessIndex, type SharedMemoryUpload, type VectorHit, type VectorSearch } from 'atomem/engine';
import {
  INDEX_LIMITS,
  INDEX_PATHS,
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

/** Header carrying the client's anonymous per-session rate-limit token (not in index-v1.ts yet). */
export { CLIENT_HEADER } from 'atomem/protocol';
import { CLIENT_HEADER } from 'atomem/protocol';
/** Accepted shape of the {@link CLIENT_HEADER} value; anything else falls into the global bucket. */
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
  /** k of k-anonymity: communities with fewer members are never released. Default 3. */
  minCommunitySize?: number;
  /** Laplace scale b of released item counts. Default 1. */
  itemNoise?: number;
  /** Seed of the item-count noise. Default: a secret random seed stored in the data dir. */
  noiseSeed?: number;
  /** Neighbours per new memory (STEAM k1). Default 2. */
  k1?: number;
  /** Minimum link similarity (STEAM tau). Default 0.5. */
  tau?: number;
  /** Cap on member vectors released per community. Default 64. */
  maxMembers?: number;
  /** Which members to release beyond `maxMembers`. Default `similar`. */
  memberSelection?: 'similar' | 'sample';
  /** Release each own memory's ≤ `hops` neighbourhood instead of whole components. Default: whole components. */
  hops?: number;
  /** Rate limit per {@link CLIENT_HEADER} token (one shared bucket without it); `false` disables. Default 600 per minute. */
  rateLimit?: { max: number; timeWindow: number | string } | false;
  /**
   * Origins (shop pages) allowed to call the service from a browser: a list, or `true` for any
   * (no cookies or credentials are ever accepted, so any origin is safe for this API). Default true.
   */
  corsOrigins?: string[] | true;
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
  /** Resolves once the memories are loaded from disk (before that, routes answer 503 `not_ready`). */
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
  /** Stop accepting requests, finish in-flight ones, close the store. Idempotent. */
  close(): Promise<void>;
}

/** A 4xx/5xx answer with its protocol error code. */
class HttpError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Wraps the real neighbour index. While a `script` is set (restart), `searchMany` returns the
 * scripted hits (the persisted links of the batch being replayed, in batch order) instead of
 * searching. Relies on CommunityGraph.addBatch calling `searchMany` once per batch, with the
 * batch's vectors in order, and only when the store is non-empty (asserted by the hit count).
 */
class ReplayableSearch implements VectorSearch {
  constructor(
    readonly inner: HnswVectorSearch,
    private readonly script: () => VectorHit[][] | undefined,
  ) {}
  get dim(): number {
    return this.inner.dim;
  }
  get size(): number {
    return this.inner.size;
  }
  has(id: string): boolean {
    return this.inner.has(id);
  }
  add(id: string, vector: ArrayLike<number>): void {
    this.inner.add(id, vector);
  }
  remove(id: string): boolean {
    return this.inner.remove(id);
  }
  vector(id: string): Float32Array | undefined {
    return this.inner.vector(id);
  }
  search(query: ArrayLike<number>, k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[] {
    return this.searchMany([query], k, minSim, filter)[0];
  }
  searchMany(queries: readonly ArrayLike<number>[], k: number, minSim: number, filter?: (id: string) => boolean): VectorHit[][] {
    const s = this.script();
    if (s === undefined) return this.inner.searchMany(queries, k, minSim, filter);
    if (s.length !== queries.length) throw new Error(`replay: ${queries.length} queries for ${s.length} scripted link lists`);
    return s;
  }
}

/** Per-embedder state. */
interface Space {
  readonly embedderId: string;
  index: InProcessIndex;
  search: ReplayableSearch | undefined;
  /** Scripted links during a replay. */
  script: VectorHit[][] | undefined;
  /** Dimension locked by the first upload ever (persisted). */
  dim: number | undefined;
}

const ROUTE_NAMES: Record<string, string> = Object.fromEntries(Object.entries(INDEX_PATHS).map(([k, v]) => [v, k]));
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
 * Build the service: opens (or creates) the store in `dataDir`, registers the routes and starts
 * loading the stored memories (see {@link IndexService.ready}). Throws
 * {@link import('./store.js').DataDirInUseError} when another process holds the data dir.
 */
export function createIndexService(options: IndexServiceOptions): IndexService {
  const { dataDir, minCommunitySize = 3 } = options;
  if (!options.legacyV1 && !options.v2) throw new RangeError('configure protocol v2 (options.v2 with the item space) or, deprecated, legacyV1');
  if (!options.legacyV1) return buildService(options, [], undefined);
  const embedderIds = [...new Set(options.embedderIds ?? [])];
  if (embedderIds.length === 0) throw new RangeError('embedderIds must name at least one embedder (legacy v1)');
  for (const e of embedderIds) {
    if (typeof e !== 'string' || e.length === 0 || e.length > INDEX_LIMITS.maxIdLength) {
      throw new RangeError(`embedder id ${JSON.stringify(e)} must be 1–${INDEX_LIMITS.maxIdLength} characters`);
    }
  }
  if (!Number.isInteger(minCommunitySize) || minCommunitySize < 1) throw new RangeError(`minCommunitySize must be an integer ≥ 1, got ${minCommunitySize}`);

  const store = MemoryStore.open(dataDir, { synchronous: options.synchronous, createdAtResolutionMs: options.createdAtResolutionMs });
  try {
    return buildService(options, embedderIds, store);
  } catch (err) {
    store.close();
    throw err;
  }
}

/** {@link createIndexService} once the v1 store (legacy only) is open. */
function buildService(options: IndexServiceOptions, embedderIds: string[], legacyStore: MemoryStore | undefined): IndexService {
  const legacy = legacyStore !== undefined;
  // why: without legacyV1 there is no v1 state; an in-memory stand-in keeps the v1 code paths typed (they are never routed)
  const store = legacyStore ?? (undefined as unknown as MemoryStore);
  const { minCommunitySize = 3, itemNoise = 1, k1, tau, maxMembers = 64, memberSelection, hops, rateLimit: limit = { max: 600, timeWindow: 60_000 } } = options;
  let seed = options.noiseSeed;
  if (seed === undefined && legacy) {
    const stored = store.getMeta('noiseSeed');
    seed = stored === undefined ? randomInt(0, 2 ** 31) : Number(stored);
    if (stored === undefined) store.setMeta('noiseSeed', String(seed));
  }
  const noiseSeed = seed ?? 0;

  const spaces = new Map<string, Space>();
  let loading = false;
  const newSpace = (embedderId: string, dim: number | undefined): Space => {
    const space: Space = { embedderId, index: undefined as unknown as InProcessIndex, search: undefined, script: undefined, dim };
    space.index = createInProcessIndex({
      embedderId,
      k1,
      tau,
      minCommunitySize,
      itemNoise,
      seed: noiseSeed,
      maxMembers,
      memberSelection,
      hops,
      createVectorSearch: (d) => {
        const inner = new HnswVectorSearch(d, options.vectorIndex);
        if (loading) inner.suspend();
        space.search = new ReplayableSearch(inner, () => space.script);
        return space.search;
      },
    });
    return space;
  };
  const resetSpaces = (): void => {
    if (!legacy) return;
    const dims = store.embedderDims();
    for (const s of spaces.values()) s.search?.inner.dispose();
    spaces.clear();
    for (const e of embedderIds) spaces.set(e, newSpace(e, dims.get(e)));
  };
  resetSpaces();

  let ready = false;
  let loadError: Error | undefined;
  let loaded = 0;
  let unserved = 0;
  let closed = false;
  const startedAt = Date.now();
  const requests: Record<string, number> = {};
  const rejected: Record<string, number> = {};

  /**
   * Replay every stored memory with its persisted links, oldest first, in chunks in which no
   * memory links to another of the same chunk (CommunityGraph never links within a batch).
   * A generator so the first load can yield to the event loop between pages while a recovery
   * runs it to the end synchronously.
   */
  function* replay(): Generator<void, void, void> {
    loading = true;
    loaded = 0;
    unserved = 0;
    const pending = new Map<string, { memories: StoredMemory[]; links: VectorHit[][]; ids: Set<string> }>();
    const flush = (space: Space): void => {
      const p = pending.get(space.embedderId);
      if (p === undefined || p.memories.length === 0) return;
      space.script = p.links;
      try {
        space.index.upsertSync(p.memories.map((m) => toUpload(m)));
      } finally {
        space.script = undefined;
      }
      loaded += p.memories.length;
      pending.delete(space.embedderId);
    };
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
          const space = spaces.get(m.embedderId);
          if (space === undefined) {
            unserved++;
            continue;
          }
          const links = bySrc.get(m.id) ?? [];
          let p = pending.get(m.embedderId);
          if (p !== undefined && links.some((l) => p!.ids.has(l.id))) {
            flush(space);
            p = undefined;
          }
          if (p === undefined) pending.set(m.embedderId, (p = { memories: [], links: [], ids: new Set() }));
          p.memories.push(m);
          p.links.push(links);
          p.ids.add(m.id);
        }
        after = page.memories[page.memories.length - 1].seq;
        yield;
      }
      for (const space of spaces.values()) flush(space);
    } finally {
      loading = false;
      for (const space of spaces.values()) space.search?.inner.resume();
    }
  }

  const toUpload = (m: StoredMemory): SharedMemoryUpload => ({
    id: m.id,
    embedderId: m.embedderId,
    vector: dequantize(m.vector),
    ...(m.items !== undefined ? { items: m.items } : {}),
  });

  /** After a failure mid-mutation: drop the in-memory state and rebuild it from SQLite. */
  const recover = (): void => {
    resetSpaces();
    for (const _ of replay());
  };

  const app = Fastify({
    logger: loggerConfig(options.logger),
    trustProxy: false,
    bodyLimit: INDEX_LIMITS.maxBodyBytes,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // why: reject (not strip) unknown fields, never coerce "3" → 3 or null → 0
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
  });

  let v2: V2Controller | undefined;
  let v2Registered!: () => void;
  // why: v2 registers below (it needs `fail`); the load waits for that, then for v2's item space
  const v2Started = new Promise<void>((r) => (v2Registered = r));
  const ready$ = (async () => {
    await v2Started;
    await v2?.ready;
    if (!legacy) {
      ready = true;
      return;
    }
    const steps = replay();
    while (!closed && !steps.next().done) await new Promise<void>((r) => setImmediate(r));
    if (closed) {
      steps.return();
      return;
    }
    ready = true;
    app.log.info({ memories: loaded, unserved }, 'index loaded');
  })().catch((err: Error) => {
    loadError = err;
    app.log.error({ err }, 'loading the index failed');
    throw err;
  });
  // why: the promise is also exposed; keep an unobserved rejection from crashing the process
  ready$.catch(() => {});

  const count = (bag: Record<string, number>, key: string): void => {
    bag[key] = (bag[key] ?? 0) + 1;
  };
  const fail = (reply: FastifyReply, status: number, code: string, message: string): FastifyReply => {
    count(rejected, code);
    const body: ErrorResponse = { error: code, message };
    return reply.code(status).type('application/json').send(body);
  };

  app.setErrorHandler((err: FastifyError & { validation?: { keyword: string; instancePath: string }[] }, req, reply) => {
    if (err instanceof HttpError) return fail(reply, err.statusCode, err.code, err.message);
    if (err.validation) {
      const tooMany = err.validation.some((v) => v.keyword === 'maxItems');
      return fail(reply, tooMany ? 413 : 400, tooMany ? 'too_large' : 'bad_request', err.message);
    }
    switch (err.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return fail(reply, 413, 'too_large', `request body exceeds ${INDEX_LIMITS.maxBodyBytes} bytes`);
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
    count(requests, ROUTE_NAMES[req.routeOptions.url ?? ''] ?? 'other');
  });

  // browsers call the index from the shop's pages (another origin); no credentials, ever
  app.register(cors, { origin: options.corsOrigins ?? true, methods: ['GET', 'POST'], allowedHeaders: ['content-type', CLIENT_HEADER], credentials: false, maxAge: 600 });

  if (limit !== false) {
    app.register(rateLimit, {
      global: true,
      max: limit.max,
      timeWindow: limit.timeWindow,
      // why: anonymous per-session token, never the IP; no header → one shared bucket
      keyGenerator: (req: FastifyRequest) => {
        const h = req.headers[CLIENT_HEADER];
        return typeof h === 'string' && CLIENT_TOKEN_PATTERN.test(h) ? `c:${h}` : 'global';
      },
      errorResponseBuilder: (_req, ctx) => new HttpError(429, 'rate_limited', `rate limit exceeded (${ctx.max} requests per window), retry in ${ctx.after}`),
    });
  }

  const requireReady = (): void => {
    if (loadError) throw new HttpError(503, 'not_ready', 'the index failed to load its data; see the service log');
    if (!ready || loading) throw new HttpError(503, 'not_ready', `the index is loading (${loaded} memories so far)`);
  };

  const health = (): HealthResponse => {
    let memories = unserved;
    let communities = 0;
    for (const s of spaces.values()) {
      memories += s.index.graph.size;
      communities += s.index.stats().releasableCommunities;
    }
    return { status: 'ok', version: INDEX_PROTOCOL_VERSION, embedderIds, memories, communities, minCommunitySize, itemNoise };
  };

  /** Validate a whole upsert batch; returns what to write, or throws an {@link HttpError}. */
  const planUpsert = (memories: UpsertRequest['memories']) => {
    const seen = new Map<string, number>();
    const batchDims = new Map<string, number>();
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
      const locked = space.dim ?? batchDims.get(m.embedderId);
      if (locked !== undefined && m.dim !== locked) {
        throw new HttpError(400, 'wrong_dimension', `${at}.dim is ${m.dim} but this index holds ${locked}-dimensional vectors for ${at}.embedderId`);
      }
      batchDims.set(m.embedderId, m.dim);
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
    const newDims = [...batchDims].filter(([e]) => spaces.get(e)!.dim === undefined);
    return { rows, newDims };
  };

  if (options.v2) v2 = registerV2(app, options.dataDir, options.v2, { synchronous: options.synchronous, legacyV1: legacy, fail });
  v2Registered();

  if (legacy) app.register(async (api) => {
    api.get(INDEX_PATHS.health, { config: { rateLimit: false } }, async (): Promise<HealthResponse> => {
      requireReady();
      return health();
    });

    api.get(INDEX_PATHS.metrics, async (): Promise<MetricsResponse> => {
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
      const { rows, newDims } = planUpsert(req.body.memories);
      if (rows.length === 0) return { accepted: 0 };
      try {
        // A memory re-uploaded under another embedder leaves its old space first.
        for (const r of rows) {
          if (r.previous === undefined || r.previous === r.mem.embedderId) continue;
          const from = spaces.get(r.previous);
          if (from === undefined) unserved--;
          else from.index.deleteSync([r.mem.id]);
        }
        const groups = new Map<Space, SharedMemoryUpload[]>();
        for (const r of rows) {
          let g = groups.get(r.space);
          if (g === undefined) groups.set(r.space, (g = []));
          g.push({ id: r.mem.id, embedderId: r.mem.embedderId, vector: dequantize(r.mem.vector), ...(r.mem.items ? { items: r.mem.items } : {}) });
        }
        for (const [space, uploads] of groups) space.index.upsertSync(uploads);
        // The links relation extraction just made: every neighbour of a new memory is older.
        const links: StoredLink[] = [];
        for (const r of rows) for (const n of r.space.index.graph.neighbours(r.mem.id)) links.push({ src: r.mem.id, dst: n.id, sim: n.sim });
        store.upsert(
          rows.map((r) => r.mem),
          links,
          newDims,
        );
        for (const [e, d] of newDims) spaces.get(e)!.dim = d;
      } catch (err) {
        recover();
        throw err;
      }
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
      let deleted: number;
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
          else space.index.deleteSync(ids);
        }
        deleted = store.delete([...found.keys()]);
      } catch (err) {
        recover();
        throw err;
      }
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
        return { communities: views.filter((v) => v.size >= minCommunitySize).map(toWire) };
      },
    );
  });

  let closing: Promise<void> | undefined;
  return {
    app,
    ready: ready$,
    get store(): MemoryStore {
      if (!legacy) throw new Error('service.store: the v1 store exists only with legacyV1');
      return store;
    },
    v2,
    async listen({ port, host = '127.0.0.1' }) {
      await app.listen({ port, host, listenTextResolver: () => 'index service listening' });
      const addr = app.server.address();
      if (addr === null || typeof addr === 'string') throw new Error('unexpected server address');
      const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      return `http://${h}:${addr.port}`;
    },
    index: (embedderId) => spaces.get(embedderId)?.index,
    vectorStats: (embedderId) => spaces.get(embedderId)?.search?.inner.stats(),
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
        await ready$.catch(() => {});
        await app.close();
        for (const s of spaces.values()) s.search?.inner.dispose();
        v2?.close();
        legacyStore?.close();
      })();
      return closing;
    },
  };
}
