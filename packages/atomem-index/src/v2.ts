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
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ReportHistogram, buildRelease, ldpParams, DEFAULT_LDP, type ItemCommunities, type ItemSpace } from 'atomem/engine';
import {
  INDEX_V2_LIMITS,
  INDEX_V2_PATHS,
  INDEX_V2_VERSION,
  epochOf,
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
import { clusterItems, type ClusterOptions } from './clusters.js';
import { ReportStore } from './report-store.js';
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
}

/** The running v2 part of a service. */
export interface V2Controller {
  readonly store: ReportStore;
  /** Resolves when the item space, the communities and the issuer key are loaded. */
  readonly ready: Promise<void>;
  readonly ldp: LdpParams;
  readonly epochMs: number;
  /** The token issuer (the attester's path in-process: the demo and the benchmark use it). */
  issuer(): TokenIssuer;
  /** The communities of the item space. */
  communities(): ItemCommunities;
  /** Current epoch of the service clock. */
  epoch(): number;
  /** Build, store and return the release of `epoch` now (undefined when too few reports); deletes its reports. */
  aggregate(epoch: number): Release | undefined;
  /** Aggregate every stored epoch whose deadline (end + grace) has passed. */
  tick(): void;
  close(): void;
}

class V2Error extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
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
  dataDir: string,
  options: V2Options,
  extra: { synchronous?: 'normal' | 'full'; legacyV1: boolean; fail: (reply: FastifyReply, status: number, code: string, message: string) => FastifyReply },
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
  const store = ReportStore.open(dataDir, { synchronous: extra.synchronous });

  let space: ItemSpace | undefined;
  let communities: ItemCommunities | undefined;
  let issuer: TokenIssuer | undefined;
  let loadError: Error | undefined;
  const ready = (async () => {
    space = typeof options.space === 'function' ? await options.space() : options.space;
    if (!space || space.ids.length === 0) throw new Error('v2: the item space is empty (configure the catalog vector file)');
    communities = clusterItems(space, options.clusters);
    let stored = store.getMeta('issuerKey');
    if (stored === undefined) {
      stored = JSON.stringify(await generateIssuerKey());
      store.setMeta('issuerKey', stored);
    }
    issuer = await PrivacyPassIssuer.load(JSON.parse(stored), options.issuerName ?? 'atomem-index');
    tick();
  })().catch((err: Error) => {
    loadError = err;
    app.log.error({ err }, 'v2: loading failed');
    throw err;
  });
  ready.catch(() => {});

  const requireReady = (): { space: ItemSpace; communities: ItemCommunities; issuer: TokenIssuer } => {
    if (loadError) throw new V2Error(503, 'not_ready', `v2 failed to load: ${loadError.message}`);
    if (!space || !communities || !issuer) throw new V2Error(503, 'not_ready', 'v2 is loading the item space');
    return { space, communities, issuer };
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
    store.publish(e, release ? JSON.stringify(release) : undefined, keep);
    app.log.info({ epoch: e, reports: hist.total, released: release !== undefined }, 'v2: epoch aggregated');
    return release;
  };

  function tick(): void {
    if (!space) return;
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
    if (err instanceof V2Error) return extra.fail(reply, err.statusCode, err.code, err.message);
    throw err;
  };

  app.register(async (api) => {
    const noLimit = { rateLimit: false as const };
    api.get(INDEX_V2_PATHS.health, { config: noLimit }, async (_req, reply): Promise<HealthV2Response | FastifyReply> => {
      try {
        const { space: sp } = requireReady();
        return { status: 'ok', version: INDEX_V2_VERSION, embedderId: sp.embedderId, epochMs, epoch: epoch(), latestRelease: store.latestRelease() ?? null, ldp, minContributors, minReports, graceMs, legacyV1: extra.legacyV1 };
      } catch (e) {
        return onError(e, reply);
      }
    });

    api.get(INDEX_V2_PATHS.tokenKey, { config: noLimit }, async (_req, reply): Promise<TokenKeyResponse | FastifyReply> => {
      try {
        const { issuer: iss } = requireReady();
        reply.header('cache-control', 'public, max-age=3600');
        return iss.key();
      } catch (e) {
        return onError(e, reply);
      }
    });

    api.post<{ Body: IssueRequest }>(INDEX_V2_PATHS.issue, { schema: { body: issueSchema }, config: noLimit }, async (req, reply): Promise<IssueResponse | FastifyReply> => {
      if (options.attesterKey === undefined) return extra.fail(reply, 404, 'not_found', `no route POST ${INDEX_V2_PATHS.issue} (no attester key configured)`);
      const auth = req.headers.authorization;
      if (typeof auth !== 'string' || !auth.startsWith('Bearer ') || !sameSecret(auth.slice(7), options.attesterKey)) {
        return extra.fail(reply, 401, 'unauthorized', 'token issuance is for the attester only (authorization: Bearer <attester key>)');
      }
      try {
        const { issuer: iss } = requireReady();
        if (!acceptsEpoch(req.body.epoch)) throw new V2Error(400, 'wrong_epoch', `epoch ${req.body.epoch} is not open (current ${epoch()})`);
        return { response: await iss.issue(req.body.request) };
      } catch (e) {
        if (e instanceof TypeError) return extra.fail(reply, 400, 'bad_request', e.message);
        return onError(e, reply);
      }
    });

    api.post<{ Body: ReportRequest }>(INDEX_V2_PATHS.report, { schema: { body: reportSchema }, config: noLimit }, async (req, reply): Promise<ReportResponse | FastifyReply> => {
      // why: one report per connection, so a kept-alive socket cannot tie a device's requests together
      reply.header('connection', 'close');
      reply.header('cache-control', 'no-store');
      try {
        requireReady();
        const { epoch: e, token, report } = req.body;
        if (report.cohort >= ldp.cohorts || report.bucket >= ldp.g) throw new V2Error(400, 'bad_request', `report must have cohort < ${ldp.cohorts} and bucket < ${ldp.g}`);
        // why: one answer for every token failure (invalid, spent, other epoch): the reply tells nothing about other reports
        const refused = () => new V2Error(403, 'token_refused', 'the token is not valid for a report of this epoch (invalid, already spent, or the epoch is closed)');
        if (!acceptsEpoch(e)) throw refused();
        const nonce = await issuer!.verify(token, e);
        if (nonce === undefined) throw refused();
        if (!acceptsEpoch(e) || !store.spend(nonce, e, report.cohort, report.bucket)) throw refused();
        reply.code(202);
        return { accepted: true };
      } catch (err) {
        return onError(err, reply);
      }
    });

    const sendRelease = (reply: FastifyReply, e: number | undefined, immutable: boolean) => {
      const body = e === undefined ? undefined : store.release(e);
      if (body === undefined) return extra.fail(reply, 404, 'not_found', e === undefined ? 'no release published yet' : `no release for epoch ${e}`);
      reply.header('cache-control', immutable ? 'public, max-age=31536000, immutable' : 'public, max-age=300');
      reply.header('etag', `"release-${e}"`);
      return reply.type('application/json').send(body);
    };
    api.get(INDEX_V2_PATHS.latest, { config: noLimit }, async (_req, reply) => sendRelease(reply, store.latestRelease(), false));
    api.get<{ Params: { epoch: string } }>('/v2/releases/:epoch', { config: noLimit }, async (req, reply) => {
      if (!/^[0-9]{1,15}$/.test(req.params.epoch)) return extra.fail(reply, 400, 'bad_request', 'epoch must be a non-negative integer (or latest)');
      return sendRelease(reply, Number(req.params.epoch), true);
    });
  });

  return {
    store,
    ready,
    ldp,
    epochMs,
    issuer: () => requireReady().issuer,
    communities: () => requireReady().communities,
    epoch,
    aggregate,
    tick,
    close() {
      if (timer) clearInterval(timer);
      store.close();
    },
  };
}
