/**
 * The index's Oblivious HTTP gateway (RFC 9458; wire format in `atomem/protocol`, ohttp.ts).
 *
 * Devices that are configured with a relay (`index.relay`) encapsulate their report request to
 * this gateway's key and send it to the relay (`atomem-relay`, ./relay.ts, run by another party).
 * The relay forwards it here from its own address; the gateway decapsulates the binary HTTP
 * request and dispatches it in-process to the report route (`POST /v2/reports`) or the Prio3
 * upload route (`POST /v2/prio3/upload`, when this service is the Prio3 leader) — the only inner
 * routes served: anything else answers an encapsulated 404 — then encapsulates the answer.
 *
 * - `GET /v2/ohttp-keys` (`application/ohttp-keys`): the key configuration. Devices read it
 *   through the relay, which serves one copy to every device (a gateway that handed each device
 *   its own key could tell them apart).
 * - `POST /v2/ohttp` (`message/ohttp-req` → `message/ohttp-res`).
 *
 * The key (X25519) is generated at first start and kept in the state store beside the issuer
 * key, so every instance sharing a PostgreSQL store serves the same one.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  GatewayKey,
  INDEX_V2_LIMITS,
  INDEX_V2_PATHS,
  OHTTP_GATEWAY_PATHS,
  OHTTP_MAX_REQUEST_BYTES,
  OHTTP_MEDIA,
  OhttpError,
  decodeBinaryRequest,
  encodeBinaryResponse,
} from 'atomem/protocol';
import { PRIO3_PATHS } from 'atomem/engine';
import type { IndexStore } from './store.js';

/** Largest encapsulated request the gateway takes: a Prio3 upload (the leader's upload route takes 8 MiB) with room for HPKE and binary HTTP. */
const MAX_ENCAPSULATED_BYTES = (8 << 20) + 4096;

/** Options of the gateway (`IndexServiceOptions.ohttp`). */
export interface OhttpGatewayOptions {
  /**
   * Requests per window per client address on `POST /v2/ohttp`: a relay forwards every
   * device's report from its one address, in a burst at each flush. Default 60 000 per minute.
   * `false`: no limit.
   */
  rateLimit?: { max: number; timeWindow: number | string } | false;
}

/** The running gateway. */
export interface OhttpGateway {
  /** True for the in-process inner requests the gateway dispatches (exempt from the per-address rate limit: the outer request was counted). */
  isInner(req: FastifyRequest): boolean;
  /** The gateway's key (after the service is serving). */
  key(): Promise<GatewayKey>;
}

const INNER_HEADER = 'x-atomem-ohttp-inner';
const META_KEY = 'ohttpKey';

type Fail = (reply: FastifyReply, status: number, code: string, message: string, retryAfterSeconds?: number) => FastifyReply;

/** Register the gateway's two routes; the key is read (or created) from `store` once `serving` resolves. */
export function registerOhttpGateway(
  app: FastifyInstance,
  o: { options: OhttpGatewayOptions; serving: Promise<void>; store: () => IndexStore; fail: Fail },
): OhttpGateway {
  // why: marks the gateway's own inject() requests; a client cannot guess it (and the inner headers are never copied)
  const secret = randomBytes(24).toString('base64url');
  let serving = false;
  o.serving.then(
    () => (serving = true),
    () => {},
  );
  let key$: Promise<GatewayKey> | undefined;
  const key = (): Promise<GatewayKey> => {
    // why: before the service serves, answer 503 at once (as every v2 route does) instead of waiting
    if (!serving) return Promise.reject(new Error('not serving yet'));
    key$ ??= (async () => {
      await o.serving;
      const store = o.store();
      let stored = await store.getMeta(META_KEY);
      if (stored === undefined) {
        const fresh = JSON.stringify({ keyId: 1, privateKey: Buffer.from(GatewayKey.randomPrivateKey()).toString('hex') });
        // why: with a shared store the first instance's key wins; every instance decapsulates with it
        stored = await store.putMetaIfAbsent(META_KEY, fresh);
      }
      const k = JSON.parse(stored) as { keyId: number; privateKey: string };
      return GatewayKey.fromPrivateKey(k.keyId, new Uint8Array(Buffer.from(k.privateKey, 'hex')));
    })();
    key$.catch(() => (key$ = undefined));
    return key$;
  };
  const limit = o.options.rateLimit ?? { max: 60_000, timeWindow: 60_000 };

  app.register(async (api) => {
    api.addContentTypeParser(
      OHTTP_MEDIA.request,
      { parseAs: 'buffer', bodyLimit: Math.max(OHTTP_MAX_REQUEST_BYTES, MAX_ENCAPSULATED_BYTES) },
      (_req, body, done) => done(null, body),
    );

    api.get(OHTTP_GATEWAY_PATHS.keys, async (_req, reply) => {
      let k: GatewayKey;
      try {
        k = await key();
      } catch {
        return o.fail(reply, 503, 'not_ready', 'the gateway key is not loaded yet', 1);
      }
      reply.header('cache-control', 'public, max-age=3600');
      return reply.type(OHTTP_MEDIA.keys).send(Buffer.from(k.keys()));
    });

    api.post<{ Body: Buffer }>(OHTTP_GATEWAY_PATHS.gateway, { config: { rateLimit: limit === false ? false : limit } }, async (req, reply) => {
      reply.header('cache-control', 'no-store');
      if (!Buffer.isBuffer(req.body)) return o.fail(reply, 415, 'unsupported_media_type', `body must be ${OHTTP_MEDIA.request}`);
      let k: GatewayKey;
      try {
        k = await key();
      } catch {
        return o.fail(reply, 503, 'not_ready', 'the gateway key is not loaded yet', 1);
      }
      let exchange: Awaited<ReturnType<GatewayKey['decapsulate']>>;
      let inner: Request;
      try {
        exchange = await k.decapsulate(new Uint8Array(req.body));
        inner = decodeBinaryRequest(exchange.message);
      } catch (e) {
        // why: one answer for every decapsulation failure (RFC 9458 section 5.2: no detail to a relay)
        return o.fail(
          reply,
          400,
          'bad_request',
          e instanceof OhttpError ? 'the encapsulated request cannot be decapsulated' : 'the inner request is not binary HTTP',
        );
      }
      const answer = await dispatch(inner);
      const sealed = await exchange.sealResponse(await encodeBinaryResponse(answer));
      return reply.type(OHTTP_MEDIA.response).send(Buffer.from(sealed));
    });
  });

  /** The inner request, answered by the report route in-process. */
  async function dispatch(inner: Request): Promise<Response> {
    const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
    let path: string;
    try {
      path = new URL(inner.url).pathname;
    } catch {
      path = '';
    }
    if (inner.method !== 'POST' || (path !== INDEX_V2_PATHS.report && path !== PRIO3_PATHS.upload))
      return json(404, { error: 'not_found', message: `the gateway serves POST ${INDEX_V2_PATHS.report} and POST ${PRIO3_PATHS.upload} only` });
    const body = new Uint8Array(await inner.arrayBuffer());
    const max = path === PRIO3_PATHS.upload ? 8 << 20 : INDEX_V2_LIMITS.maxBodyBytes;
    if (body.length > max) return json(413, { error: 'too_large', message: `request body exceeds ${max} bytes` });
    // why: only the media type is taken from the inner request; the device sends no other header
    const res = await app.inject({
      method: 'POST',
      url: path,
      headers: { 'content-type': inner.headers.get('content-type') ?? 'application/json', [INNER_HEADER]: secret },
      payload: Buffer.from(body),
    });
    return new Response(res.body, { status: res.statusCode, headers: { 'content-type': String(res.headers['content-type'] ?? 'application/json') } });
  }

  return {
    isInner(req) {
      const h = req.headers[INNER_HEADER];
      return typeof h === 'string' && h.length === secret.length && timingSafeEqual(Buffer.from(h), Buffer.from(secret));
    },
    key,
  };
}
