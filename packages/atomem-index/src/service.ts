/**
 * The shared community index as an HTTP service: protocol v2 (src/protocol/index-v2.ts; routes
 * in ./v2.ts): token-gated local-DP reports in, one aggregate release per epoch out. Its
 * communities are clusters of the shop's item space (the catalog vector file), computed at start.
 *
 * Edge (./edge.ts, every route): header / request / idle timeouts, a cap on connections in all
 * and per client address, rate limits per client address (never a header the client chooses),
 * tight body limits, CORS only for configured origins (default: same origin), metrics only with
 * a token. Health is answered from memory and never rate limited.
 *
 * State (./store.ts): embedded SQLite by default, or PostgreSQL shared by N instances
 * (`store: 'postgres://…'`). Epochs only move forward: a closed epoch is never reopened, whatever
 * the wall clock says (health says when it is behind). Storage faults are retried with backoff
 * and clear by themselves.
 *
 * Storage (./storage.ts): the data dir's marker and `quick_check` refuse a lost, foreign or
 * corrupted file at start; a failed write at run time is classified, named in health, and
 * answered 507 / 503 with `Retry-After`.
 *
 * Privacy: no IP address is logged or stored. The client address keys rate limits and the
 * connection cap in memory only (a keyed hash for rate limits; see ./edge.ts); `trustProxy` is
 * off unless configured; the request log serializer keeps only method and URL, and pino's
 * `pid`/`hostname` bindings are dropped.
 */

import { timingSafeEqual } from 'node:crypto';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import cors from '@fastify/cors';
import { INDEX_V2_LIMITS, INDEX_V2_PATHS, OHTTP_GATEWAY_PATHS, type ErrorV2Response } from 'atomem/protocol';
import { registerV2, type V2Controller, type V2Options } from './v2.js';
import { registerOhttpGateway, type OhttpGateway, type OhttpGatewayOptions } from './ohttp-gateway.js';
import { DataDir, StorageHealth, type StorageFailure } from './storage.js';
import { isPostgresUrl, redactUrl } from './pg-store.js';
import {
  LoopDelay,
  addressKeyer,
  corsOriginOption,
  installConnectionCaps,
  openFileLimit,
  resolveNetworkLimits,
  type CorsOrigins,
  type EdgeCounters,
  type NetworkLimits,
} from './edge.js';

/** Where log lines go when the service is given logger options (pino destination). */
export interface LogStream {
  write(line: string): void;
}

/** Options of {@link createIndexService}. */
export interface IndexServiceOptions {
  /** Directory of the SQLite files (created if missing). One service per directory. */
  dataDir: string;
  /**
   * Where the state (spent tokens, histograms, releases, the issuer key) lives: omitted or
   * `sqlite` = `reports.sqlite` in the data dir (one instance); a `postgres://…` URL = a
   * PostgreSQL database shared by every instance (./pg-store.ts). The data dir still holds the
   * marker and the item-space cache.
   */
  store?: string;
  /** Protocol v2: the item space and the epoch, LDP and token settings. */
  v2: V2Options;
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
   * Bearer token of the metrics route (`/v2/metrics`: per-route counters are a side channel on
   * other shoppers' activity). Without it that route answers 404.
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
  /**
   * `false` (default): no logging. `true` or options: JSON lines (pino) to `stream` (default
   * stdout) at `level` (default `info`), never with IP addresses or host names.
   */
  logger?: boolean | { level?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'; stream?: LogStream };
  /** SQLite `synchronous` (see ./report-store.ts). Default `normal`: acknowledged writes survive SIGKILL. */
  synchronous?: 'normal' | 'full';
  /**
   * The Oblivious HTTP gateway (./ohttp-gateway.ts: `GET /v2/ohttp-keys`, `POST /v2/ohttp`) for
   * reports that devices send through a relay (`atomem-relay`). On by default; `false` removes
   * the two routes.
   */
  ohttp?: OhttpGatewayOptions | false;
}

/** A running service. */
export interface IndexService {
  /** The fastify app (routes registered; call {@link IndexService.listen} or `app.listen`). */
  readonly app: FastifyInstance;
  /**
   * Resolves once every route is served: the item space read and the issuer key loaded (before
   * that, routes answer 503 `not_ready`). The communities may still be computed then (health
   * says `clustering`; aggregation waits for them).
   */
  readonly serving: Promise<void>;
  /** Resolves once the service is {@link serving} and the item-space communities are computed too. */
  readonly ready: Promise<void>;
  /** The protocol v2 part: epochs, releases, the issuer, the communities. */
  readonly v2: V2Controller;
  /** Listen on `host:port` (port 0 = any free port); resolves to the base URL. Logs no address. */
  listen(options: { port: number; host?: string }): Promise<string>;
  /** Storage health (what `/v2/health` reports as `storage`). */
  readonly storage: StorageHealth;
  /** Edge counters: open and refused connections, rate-limited requests. */
  readonly edge: EdgeCounters;
  /** The Oblivious HTTP gateway (undefined with `ohttp: false`). */
  readonly ohttp: OhttpGateway | undefined;
  /** Stop accepting requests, finish in-flight ones, close the store. Idempotent. */
  close(): Promise<void>;
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

const ROUTE_NAMES: Record<string, string> = {
  ...Object.fromEntries(
    Object.entries(INDEX_V2_PATHS)
      .filter(([, v]) => typeof v === 'string')
      .map(([k, v]) => [v as string, `v2.${k}`]),
  ),
  '/v2/releases/:epoch': 'v2.release',
  '/v2/metrics': 'v2.metrics',
  [OHTTP_GATEWAY_PATHS.gateway]: 'ohttp.gateway',
  [OHTTP_GATEWAY_PATHS.keys]: 'ohttp.keys',
};

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
 * starts loading (see {@link IndexService.ready}). Throws {@link import('./storage.js').StorageError}
 * (the data dir or one of its files cannot be used: the message names it and the fix),
 * {@link import('./storage.js').DataDirInUseError} when another process holds the data dir, or
 * RangeError on a bad option.
 */
export function createIndexService(options: IndexServiceOptions): IndexService {
  if (!options.v2) throw new RangeError('options.v2 is required: the item space (the catalog vector file) and the epoch settings');
  // why: validate every option before the data dir is touched
  const network = resolveNetworkLimits(options.network, options.trustProxy);
  corsOriginOption(options.corsOrigins);
  if (options.metricsToken !== undefined && options.metricsToken.length < 16) throw new RangeError('metricsToken must be at least 16 characters');
  if (options.store !== undefined && options.store !== 'sqlite' && !isPostgresUrl(options.store))
    throw new RangeError(`store must be 'sqlite' or a postgres:// URL, got ${redactUrl(options.store)}`);
  const dir = DataDir.open(options.dataDir);
  const { rateLimit: limit = { max: 600, timeWindow: 60_000 } } = options;
  const storage = new StorageHealth();
  const startedAt = Date.now();
  const requests: Record<string, number> = {};
  const rejected: Record<string, number> = {};
  const loop = new LoopDelay();

  const app = Fastify({
    logger: loggerConfig(options.logger),
    // why: fastify accepts a hop count at run time (proxy-addr), its types omit it
    trustProxy: (options.trustProxy ?? false) as boolean | string | string[],
    bodyLimit: INDEX_V2_LIMITS.maxBodyBytes,
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
  const edge = installConnectionCaps(app.server, {
    ...network,
    maxConnections: Math.min(network.maxConnections, fdLimit !== undefined ? Math.max(64, Math.floor(fdLimit / 2)) : Infinity),
  });

  const count = (bag: Record<string, number>, key: string): void => {
    bag[key] = (bag[key] ?? 0) + 1;
  };
  const fail = (reply: FastifyReply, status: number, code: string, message: string, retryAfterSeconds?: number): FastifyReply => {
    count(rejected, code);
    const body: ErrorV2Response = { error: code, message };
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
        return fail(reply, 413, 'too_large', `request body exceeds ${req.routeOptions.bodyLimit ?? INDEX_V2_LIMITS.maxBodyBytes} bytes`);
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

  // browsers call the index from the shop's pages (maybe another origin); no credentials, ever
  app.register(cors, {
    origin: corsOriginOption(options.corsOrigins),
    methods: ['GET', 'POST'],
    allowedHeaders: ['content-type'],
    credentials: false,
    maxAge: 600,
  });

  const attesterKey = options.v2.attesterKey;
  let gateway: OhttpGateway | undefined;
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
      // and the gateway's inner requests were counted as the outer POST /v2/ohttp (its own limit)
      allowList: (req: FastifyRequest) =>
        (attesterKey !== undefined && req.url === INDEX_V2_PATHS.issue && bearerIs(req.headers.authorization, attesterKey)) || gateway?.isInner(req) === true,
      onExceeded: () => {
        edge.rateLimited++;
      },
      errorResponseBuilder: (_req, ctx) =>
        new HttpError(429, 'rate_limited', `rate limit exceeded (${ctx.max} requests per window per client address), retry in ${ctx.after}`),
    });
  }

  /** Metrics need `authorization: Bearer <metricsToken>`; without a configured token the routes are absent. */
  const metricsAllowed = (req: FastifyRequest): boolean => options.metricsToken !== undefined && bearerIs(req.headers.authorization, options.metricsToken);

  const v2 = registerV2(app, dir, options.v2, {
    synchronous: options.synchronous,
    postgresUrl: options.store !== undefined && options.store !== 'sqlite' ? options.store : undefined,
    fail,
    storage,
    maxBytes: options.storage?.maxBytes,
    integrityCheck: options.storage?.integrityCheck !== false,
    metricsAllowed,
    metrics: () => ({
      requests: { ...requests },
      rejected: { ...rejected },
      edge: { ...edge },
      loopDelayMs: loop.read(),
      uptimeSeconds: Math.round((Date.now() - startedAt) / 1000),
      rssBytes: process.memoryUsage.rss(),
    }),
  });
  if (options.ohttp !== false) gateway = registerOhttpGateway(app, { options: options.ohttp ?? {}, serving: v2.serving, store: () => v2.backend, fail });
  const serving$ = v2.serving.catch((err: Error) => {
    app.log.error({ err }, 'loading the index failed');
    throw err;
  });
  const ready$ = (async () => {
    await serving$;
    await v2.ready;
  })();
  // why: the promises are also exposed; keep an unobserved rejection from crashing the process
  serving$.catch(() => {});
  ready$.catch(() => {});

  let closing: Promise<void> | undefined;
  return {
    app,
    serving: serving$,
    ready: ready$,
    v2,
    storage,
    edge,
    ohttp: gateway,
    async listen({ port, host = '127.0.0.1' }) {
      await app.listen({ port, host, listenTextResolver: () => 'index service listening' });
      const addr = app.server.address();
      if (addr === null || typeof addr === 'string') throw new Error('unexpected server address');
      const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
      return `http://${h}:${addr.port}`;
    },
    close() {
      closing ??= (async () => {
        // why: a close during the item-space clustering ends its worker instead of waiting for it
        v2.stopLoading();
        await ready$.catch(() => {});
        await app.close();
        loop.dispose();
        await v2.close();
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
