/**
 * `atomem-relay`: an Oblivious HTTP relay (RFC 9458) that also batches, run by a party other
 * than the shop (the relay and the index must not collude).
 *
 * - `POST /relay` (`message/ohttp-req`): an encapsulated report request from a device. The relay
 *   cannot read it (it is sealed to the index gateway's key). It keeps the body and nothing
 *   else: no client address, no header, no arrival time. With `flushEveryMs` > 0 (default one
 *   day) it answers 202 at once and holds the request; at each multiple of `flushEveryMs` on the
 *   clock (with the index's epoch length: at every epoch's end) it forwards everything held to
 *   the gateway, in a uniformly random order (CSPRNG Fisher–Yates), from its own address. The
 *   index then sees every report of the period arrive in one burst from the relay, so neither
 *   the device's address nor the moment it reported (its time of day) reaches the index. With
 *   `flushEveryMs` = 0 it forwards at once and returns the gateway's encapsulated answer
 *   (the address is hidden, the timing is not).
 * - `GET /ohttp-keys` (`application/ohttp-keys`): the gateway's key configuration as the relay
 *   fetched it (at start, then hourly): one copy for every device, so the gateway cannot hand
 *   each device a key of its own to tell them apart.
 * - `GET /health`.
 *
 * Held requests live in memory: a graceful stop (SIGTERM) forwards them first; a crash loses
 * them (the devices were told 202; each loses one epoch's report). The log has no address, no
 * header and no body: method, URL, status, and per flush the count forwarded.
 */
import { randomInt } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import cors from '@fastify/cors';
import rateLimit from '@fastify/rate-limit';
import { OHTTP_GATEWAY_PATHS, OHTTP_MAX_REQUEST_BYTES, OHTTP_MEDIA, OHTTP_RELAY_PATHS, decodeKeys } from 'atomem/protocol';
import { addressKeyer, corsOriginOption, installConnectionCaps, resolveNetworkLimits, type CorsOrigins, type NetworkLimits } from './edge.js';
import { loggerConfig, type LoggerOption } from './log.js';

/** Options of {@link createRelay}. */
export interface RelayOptions {
  /** The index service root (its gateway: `POST /v2/ohttp`, `GET /v2/ohttp-keys`), e.g. `https://index.shop.example`. */
  gateway: string;
  /**
   * Hold requests and forward them every this many ms, at multiples of it on the clock (set it
   * to the index's epoch length: the batch then leaves at each epoch's end, within the index's
   * grace period). 0: forward each request at once. Default 86 400 000 (one day, the index's
   * default epoch).
   */
  flushEveryMs?: number;
  /** Requests held at most (more answer 503 until the next flush). Default 200 000. */
  maxHeld?: number;
  /**
   * Largest encapsulated request, bytes. Default 8 192 (a local-DP report). A relay in front of a
   * Prio3 leader needs room for an upload: about 22 × the catalog's item count plus 2 KiB
   * ({@link prio3RelayBytes}); mind `maxHeld` × this of memory while batching.
   */
  maxBodyBytes?: number;
  /** Requests forwarded to the gateway at a time during a flush. Default 4. */
  concurrency?: number;
  /** Requests per window per client address on every route but health. Default 30 per minute; `false` disables. */
  rateLimit?: { max: number; timeWindow: number | string } | false;
  /** Behind a reverse proxy: fastify's `trustProxy` (see the index service). Default false. */
  trustProxy?: boolean | number | string | string[];
  /** Origins (shop pages) whose browsers may call the relay. Default `'*'` (any; no credentials are ever accepted). */
  corsOrigins?: CorsOrigins;
  /** Timeouts and connection caps (as the index service's). */
  network?: NetworkLimits;
  /** How often the gateway's key configuration is fetched again. Default one hour. */
  keysRefreshMs?: number;
  /** Clock. Default `Date.now`. */
  now?: () => number;
  /** As the index service's `logger`: JSON lines without addresses, headers or bodies. */
  logger?: LoggerOption;
}

/** What one flush did. */
export interface FlushResult {
  forwarded: number;
  /** Requests the gateway did not take after 3 attempts (network error, 5xx, 429; dropped). */
  failed: number;
  /** Gateway answers by status. */
  statuses: Record<number, number>;
}

/** A running relay. */
export interface Relay {
  readonly app: FastifyInstance;
  /** Listen on `host:port` (port 0 = any free port); resolves to the base URL. */
  listen(options: { port: number; host?: string }): Promise<string>;
  /** Forward everything held now (what the timer does at each flush moment). */
  flush(): Promise<FlushResult>;
  /** Requests held. */
  held(): number;
  /** The next scheduled flush (ms since 1970), undefined when not batching. */
  nextFlushAt(): number | undefined;
  /** Stop accepting, forward what is held, close. Idempotent. */
  close(): Promise<void>;
}

/**
 * Room a relay needs for a Prio3 upload over `items` catalog items: the leader's input share is
 * 16 bytes per item (plus its proof, ≈ 32 × √items bytes), base64 in JSON (× 4/3), padded to
 * 1 KiB, inside binary HTTP and HPKE; 22 bytes per item and 16 KiB on top cover it.
 */
export function prio3RelayBytes(items: number): number {
  return Math.max(OHTTP_MAX_REQUEST_BYTES, 22 * items + 16_384 + Math.ceil(60 * Math.sqrt(items)));
}

/** Uniformly random permutation in place (Fisher–Yates with the CSPRNG). */
export function shuffle<T>(a: T[]): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Build a relay (throws RangeError on a bad option). */
export function createRelay(options: RelayOptions): Relay {
  if (!options || typeof options.gateway !== 'string' || !/^https?:\/\//.test(options.gateway))
    throw new RangeError('relay: gateway must be the http(s) URL of the atomem-index service');
  const gateway = options.gateway.replace(/\/+$/, '');
  const every = options.flushEveryMs ?? 86_400_000;
  if (!Number.isInteger(every) || every < 0) throw new RangeError(`relay: flushEveryMs must be an integer ≥ 0, got ${every}`);
  const maxHeld = options.maxHeld ?? 200_000;
  const concurrency = options.concurrency ?? 4;
  if (!Number.isInteger(maxHeld) || maxHeld < 1) throw new RangeError('relay: maxHeld must be an integer ≥ 1');
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError('relay: concurrency must be an integer ≥ 1');
  const maxBody = options.maxBodyBytes ?? OHTTP_MAX_REQUEST_BYTES;
  if (!Number.isInteger(maxBody) || maxBody < OHTTP_MAX_REQUEST_BYTES)
    throw new RangeError(`relay: maxBodyBytes must be an integer ≥ ${OHTTP_MAX_REQUEST_BYTES}`);
  const now = options.now ?? Date.now;
  const network = resolveNetworkLimits(options.network, options.trustProxy);
  const limit = options.rateLimit ?? { max: 30, timeWindow: 60_000 };

  const app = Fastify({
    logger: loggerConfig(options.logger),
    trustProxy: (options.trustProxy ?? false) as boolean | string | string[],
    bodyLimit: maxBody,
    connectionTimeout: network.idleTimeoutMs,
    requestTimeout: network.requestTimeoutMs,
    keepAliveTimeout: network.keepAliveTimeoutMs,
    maxRequestsPerSocket: network.maxRequestsPerSocket,
    http: { headersTimeout: network.headersTimeoutMs, requestTimeout: network.requestTimeoutMs, connectionsCheckingInterval: 1000 },
  });
  installConnectionCaps(app.server, network);
  const error = (code: string, message: string) => ({ error: code, message });
  app.setNotFoundHandler((req, reply) => reply.code(404).send(error('not_found', `no route ${req.method} ${req.url.split('?')[0]}`)));
  app.setErrorHandler((err: { statusCode?: number; code?: string; message: string }, req, reply) => {
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return reply.code(413).send(error('too_large', `body exceeds ${maxBody} bytes`));
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return reply.code(415).send(error('unsupported_media_type', `body must be ${OHTTP_MEDIA.request}`));
    if (err.statusCode === 429) return reply.code(429).send(error('rate_limited', err.message));
    if (err.statusCode !== undefined && err.statusCode < 500) return reply.code(err.statusCode).send(error('bad_request', err.message));
    req.log.error({ err }, 'request failed');
    return reply.code(500).send(error('internal', 'internal error'));
  });
  app.register(cors, {
    origin: corsOriginOption(options.corsOrigins ?? '*'),
    methods: ['GET', 'POST'],
    allowedHeaders: ['content-type'],
    credentials: false,
    maxAge: 600,
  });
  if (limit !== false) {
    const keyOf = addressKeyer();
    app.register(rateLimit, {
      global: true,
      max: limit.max,
      timeWindow: limit.timeWindow,
      cache: 50_000,
      keyGenerator: (req: FastifyRequest) => keyOf(req.ip),
    });
  }

  let held: Uint8Array[] = [];
  let closing: Promise<void> | undefined;
  let keys: { body: Uint8Array; at: number } | undefined;
  let keysFetch: Promise<void> | undefined;

  const fetchKeys = (): Promise<void> => {
    keysFetch ??= (async () => {
      try {
        const res = await fetch(`${gateway}${OHTTP_GATEWAY_PATHS.keys}`, { cache: 'no-store', redirect: 'error' });
        if (!res.ok) throw new Error(`HTTP ${res.status}`);
        const body = new Uint8Array(await res.arrayBuffer());
        if (decodeKeys(body).length === 0) throw new Error('no usable key configuration');
        keys = { body, at: now() };
      } catch (err) {
        app.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'fetching the gateway key configuration failed');
      } finally {
        keysFetch = undefined;
      }
    })();
    return keysFetch;
  };
  const keysTimer = setInterval(() => void fetchKeys(), options.keysRefreshMs ?? 3_600_000);
  keysTimer.unref();

  /** One request to the gateway, with up to 3 attempts for network errors, 429 and 5xx. */
  async function forward(body: Uint8Array): Promise<Response | undefined> {
    for (let attempt = 0; attempt < 3; attempt++) {
      if (attempt > 0) await sleep(500 * 2 ** attempt);
      try {
        // why: the body and the media type only; nothing of the device's request travels on
        const res = await fetch(`${gateway}${OHTTP_GATEWAY_PATHS.gateway}`, {
          method: 'POST',
          headers: { 'content-type': OHTTP_MEDIA.request },
          body: Buffer.from(body),
          redirect: 'error',
        });
        if (res.status !== 429 && res.status < 500) return res;
        await res.arrayBuffer();
      } catch {
        // retried
      }
    }
    return undefined;
  }

  let flushing: Promise<FlushResult> | undefined;
  async function flushNow(): Promise<FlushResult> {
    const batch = shuffle(held);
    held = [];
    const result: FlushResult = { forwarded: 0, failed: 0, statuses: {} };
    if (batch.length === 0) return result;
    const started = now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, batch.length) }, async () => {
        while (next < batch.length) {
          const body = batch[next++];
          const res = await forward(body);
          if (!res) {
            result.failed++;
            continue;
          }
          await res.arrayBuffer();
          result.forwarded++;
          result.statuses[res.status] = (result.statuses[res.status] ?? 0) + 1;
        }
      }),
    );
    app.log.info({ forwarded: result.forwarded, failed: result.failed, statuses: result.statuses, ms: now() - started }, 'flushed');
    return result;
  }
  const flush = (): Promise<FlushResult> => {
    // why: one flush at a time; a second call waits for the first, then forwards what arrived since
    const run = (flushing ?? Promise.resolve(undefined)).then(() => flushNow());
    flushing = run;
    return run;
  };

  let timer: NodeJS.Timeout | undefined;
  let nextAt: number | undefined;
  const schedule = () => {
    if (every === 0 || closing) return;
    nextAt = (Math.floor(now() / every) + 1) * every;
    timer = setTimeout(
      () => {
        void flush().catch((err: unknown) => app.log.error({ err }, 'flush failed'));
        schedule();
      },
      Math.max(0, nextAt - now()),
    );
  };

  app.register(async (api) => {
    api.addContentTypeParser(OHTTP_MEDIA.request, { parseAs: 'buffer', bodyLimit: maxBody }, (_req, body, done) => done(null, body));
    api.get(OHTTP_RELAY_PATHS.health, { config: { rateLimit: false } }, async (_req, reply) => {
      reply.header('cache-control', 'no-store');
      return { status: keys ? 'ok' : 'degraded', batching: every > 0, flushEveryMs: every, nextFlushAt: nextAt ?? null, gatewayKeys: keys ? 'ok' : 'missing' };
    });
    api.get(OHTTP_RELAY_PATHS.keys, async (_req, reply) => {
      if (!keys || now() - keys.at > 2 * (options.keysRefreshMs ?? 3_600_000)) await fetchKeys();
      if (!keys) return reply.code(503).header('retry-after', '5').send(error('not_ready', 'the gateway key configuration is not available'));
      reply.header('cache-control', 'public, max-age=3600');
      return reply.type(OHTTP_MEDIA.keys).send(Buffer.from(keys.body));
    });
    api.post<{ Body: Buffer }>(OHTTP_RELAY_PATHS.relay, async (req, reply) => {
      reply.header('cache-control', 'no-store');
      if (!Buffer.isBuffer(req.body)) return reply.code(415).send(error('unsupported_media_type', `body must be ${OHTTP_MEDIA.request}`));
      if (closing) return reply.code(503).header('retry-after', '5').send(error('closing', 'the relay is shutting down'));
      const body = new Uint8Array(req.body);
      if (every > 0) {
        if (held.length >= maxHeld)
          return reply.code(503).header('retry-after', '60').send(error('full', 'the relay holds as many requests as it may until the next flush'));
        held.push(body);
        return reply.code(202).send({ held: true });
      }
      const res = await forward(body);
      if (!res) return reply.code(502).send(error('gateway_unreachable', 'the gateway did not answer'));
      if (res.status !== 200 || res.headers.get('content-type') !== OHTTP_MEDIA.response) {
        await res.arrayBuffer();
        return reply.code(502).send(error('gateway_refused', `the gateway answered HTTP ${res.status}`));
      }
      return reply.type(OHTTP_MEDIA.response).send(Buffer.from(await res.arrayBuffer()));
    });
  });

  return {
    app,
    async listen({ port, host = '127.0.0.1' }) {
      await app.listen({ port, host, listenTextResolver: () => 'relay listening' });
      await fetchKeys();
      if (timer === undefined) schedule();
      const addr = app.server.address();
      if (addr === null || typeof addr === 'string') throw new Error('unexpected server address');
      return `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
    },
    flush,
    held: () => held.length,
    nextFlushAt: () => nextAt,
    close() {
      closing ??= (async () => {
        if (timer) clearTimeout(timer);
        clearInterval(keysTimer);
        await app.close();
        await flush();
      })();
      return closing;
    },
  };
}
