/**
 * The shared community index as an HTTP service: protocol v2 (packages/atomem/src/protocol/index-v2.ts; routes
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
import type { Server } from 'node:http';
import { Worker } from 'node:worker_threads';
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import cors from '@fastify/cors';
import { INDEX_V2_LIMITS, INDEX_V2_PATHS, OHTTP_GATEWAY_PATHS, type ErrorV2Response } from 'atomem/protocol';
import { registerV2, type V2Controller, type V2Options } from './v2.js';
import { registerPrio3, type Prio3Controller, type Prio3ServiceOptions } from './prio3-service.js';
import { PostgresPrio3Store, SqlitePrio3Store } from './prio3-store.js';
import { registerOhttpGateway, type OhttpGateway, type OhttpGatewayOptions } from './ohttp-gateway.js';
import { DataDir, StorageHealth, type StorageFailure, type SyncLevel } from './storage.js';
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
import { loggerConfig, type LoggerOption } from './log.js';

export type { LogStream } from './log.js';

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
  logger?: LoggerOption;
  /**
   * When an acknowledged report or upload is on disk with the SQLite store (./storage.ts
   * `SyncLevel`). Default `group`: acknowledged after an fsync of the WAL shared by the writes
   * waiting for it, so acknowledged writes survive SIGKILL and a power cut; `full`: an fsync in
   * every commit (the same promise, at a higher cost per write); `normal`: no fsync before the
   * acknowledgement (survives SIGKILL, not a power cut or OS crash).
   */
  synchronous?: SyncLevel;
  /** Verifiable aggregation: this service as the Prio3 leader or helper (./prio3-service.ts). Default off. */
  prio3?: Prio3ServiceOptions;
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
  /**
   * Listen on `host:port` (port 0 = any free port); resolves to the base URL. Logs no address.
   * With `healthPort` a second listener on the same host answers `GET /v2/health` only (see
   * {@link IndexService.healthUrl}).
   */
  listen(options: { port: number; host?: string; healthPort?: number }): Promise<string>;
  /**
   * Base URL of the separate health listener once {@link IndexService.listen} opened it with
   * `healthPort`, else undefined. It runs on its own thread with its own small connection cap
   * and timeouts, so orchestrators' probes are answered while the main listener is full of
   * clients; it serves the main route's answer refreshed every 250 ms, and 503 once that is 5 s
   * old (the main event loop blocked).
   */
  readonly healthUrl: string | undefined;
  /** The Prio3 aggregator role, when configured. */
  readonly prio3?: Prio3Controller;
  /** Storage health (what `/v2/health` reports as `storage`). */
  readonly storage: StorageHealth;
  /** Edge counters: open and refused connections, rate-limited requests. */
  readonly edge: EdgeCounters;
  /** The Oblivious HTTP gateway (undefined with `ohttp: false`). */
  readonly ohttp: OhttpGateway | undefined;
  /** Stop accepting requests, finish in-flight ones, close the store. Idempotent. */
  close(): Promise<void>;
}

/** Accept queue of the main listener (the kernel caps it at net.core.somaxconn). */
const LISTEN_BACKLOG = 4096;

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

  // why: the item space is read once, for v2 and the Prio3 aggregator
  let space$: ReturnType<Extract<V2Options['space'], () => unknown>> | undefined;
  const spaceOnce = () =>
    (space$ ??= typeof options.v2.space === 'function' ? options.v2.space() : Promise.resolve(options.v2.space as Exclude<V2Options['space'], () => unknown>));
  const v2 = registerV2(
    app,
    dir,
    { ...options.v2, space: spaceOnce },
    {
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
    },
  );
  if (options.ohttp !== false) gateway = registerOhttpGateway(app, { options: options.ohttp ?? {}, serving: v2.serving, store: () => v2.backend, fail });
  const prio3 = options.prio3
    ? registerPrio3(
        app,
        options.store !== undefined && options.store !== 'sqlite'
          ? new PostgresPrio3Store(options.store)
          : SqlitePrio3Store.open(dir, { synchronous: options.synchronous }),
        options.prio3,
        v2,
        async () => (await spaceOnce()).ids,
        fail,
      )
    : undefined;
  const serving$ = v2.serving
    .then(() => prio3?.ready)
    .catch((err: Error) => {
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
  let healthServer: { url: string; close(): Promise<void> } | undefined;
  let healthUrl: string | undefined;
  return {
    app,
    serving: serving$,
    ready: ready$,
    v2,
    prio3,
    storage,
    edge,
    ohttp: gateway,
    get healthUrl() {
      return healthUrl;
    },
    async listen({ port, host = '127.0.0.1', healthPort }) {
      if (healthPort !== undefined && !(Number.isInteger(healthPort) && healthPort >= 0 && healthPort < 65536))
        throw new RangeError(`healthPort must be a port number (0 = any free port), got ${String(healthPort)}`);
      // why: Node's default accept queue (511) overflows under a crowd re-taking its slots; a dropped SYN costs the client a 1 s retransmit (capped by net.core.somaxconn)
      await app.listen({ port, host, backlog: LISTEN_BACKLOG, listenTextResolver: () => 'index service listening' });
      if (healthPort !== undefined) {
        healthServer = await startHealthListener(app, host, healthPort);
        healthUrl = healthServer.url;
      }
      return baseUrl(app.server);
    },
    close() {
      closing ??= (async () => {
        // why: a close during the item-space clustering ends its worker instead of waiting for it
        v2.stopLoading();
        await ready$.catch(() => {});
        await healthServer?.close();
        await app.close();
        await prio3?.stop();
        loop.dispose();
        await v2.close();
      })();
      return closing;
    },
  };
}

function baseUrl(server: Server): string {
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('unexpected server address');
  const h = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `http://${h}:${addr.port}`;
}

/** The health listener's thread (plain JS: no loader needed from source or built). */
const HEALTH_THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const { path, staleMs } = workerData;
let last;
parentPort.on('message', (m) => { if (m.type === 'snapshot') last = { at: Date.now(), status: m.status, headers: m.headers, body: m.body }; });
const json = (res, status, body, method) => {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(method === 'HEAD' ? undefined : JSON.stringify(body));
};
const server = http.createServer({ headersTimeout: 5000, requestTimeout: 5000, keepAliveTimeout: 5000, connectionsCheckingInterval: 1000 }, (req, res) => {
  if ((req.method !== 'GET' && req.method !== 'HEAD') || (req.url || '').split('?')[0] !== path)
    return json(res, 404, { error: 'not_found', message: 'this listener answers GET ' + path + ' only' }, req.method);
  const age = last ? Date.now() - last.at : Infinity;
  if (age > staleMs)
    return json(res, 503, { error: 'not_ready', message: last ? 'the service has not refreshed its health for ' + Math.round(age / 1000) + ' s (event loop blocked?)' : 'the service is starting' }, req.method);
  res.writeHead(last.status, { ...last.headers, 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : last.body);
});
server.maxConnections = 64;
server.setTimeout(15000);
parentPort.on('message', (m) => {
  if (m.type === 'listen') server.listen(m.port, m.host, () => parentPort.postMessage({ type: 'listening', port: server.address().port }));
  if (m.type === 'close') { server.closeAllConnections(); server.close(() => process.exit(0)); }
});
server.on('error', (err) => parentPort.postMessage({ type: 'error', message: err.message }));
`;

/**
 * The separate health listener: its own thread (own event loop, so a main thread busy with a
 * crowd of connections does not delay it), its own cap of 64 open connections and short
 * timeouts (it is for the orchestrator's probes, not the public). It answers `GET` / `HEAD
 * /v2/health` with the main route's answer, refreshed every 250 ms by the main thread (through
 * `app.inject`), anything else 404; when the main thread has not refreshed it for 5 s (its
 * event loop blocked) it answers 503 `not_ready`.
 */
async function startHealthListener(app: FastifyInstance, host: string, port: number): Promise<{ url: string; close(): Promise<void> }> {
  const worker = new Worker(HEALTH_THREAD, { eval: true, workerData: { path: INDEX_V2_PATHS.health, staleMs: 5000 } });
  const refresh = async () => {
    try {
      const r = await app.inject({ method: 'GET', url: INDEX_V2_PATHS.health });
      const headers: Record<string, string> = { 'content-type': String(r.headers['content-type'] ?? 'application/json') };
      if (r.headers['retry-after'] !== undefined) headers['retry-after'] = String(r.headers['retry-after']);
      worker.postMessage({ type: 'snapshot', status: r.statusCode, headers, body: r.body });
    } catch {
      // the next refresh tries again; after 5 s without one the listener answers 503
    }
  };
  await refresh();
  const timer = setInterval(refresh, 250);
  timer.unref();
  const listening = await new Promise<number>((resolve, reject) => {
    worker.on('message', (m: { type: string; port?: number; message?: string }) => {
      if (m.type === 'listening') resolve(m.port!);
      if (m.type === 'error') reject(new Error(`health listener: ${m.message}`));
    });
    worker.once('error', reject);
    worker.postMessage({ type: 'listen', port, host });
  }).catch(async (err: unknown) => {
    clearInterval(timer);
    await worker.terminate();
    throw err;
  });
  const h = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${h}:${listening}`,
    async close() {
      clearInterval(timer);
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage({ type: 'close' });
      const kill = setTimeout(() => void worker.terminate(), 2000);
      await exited;
      clearTimeout(kill);
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
