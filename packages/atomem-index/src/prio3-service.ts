/**
 * The index service as a Prio3 aggregator (`--prio3-role leader|helper`): two services, run by
 * two parties, aggregate the devices' Prio3 reports (atomem's sync/prio3-report.ts) so that
 * neither sees a report, and a report counts only if its proof holds.
 *
 * - Both serve `GET /v2/prio3/config`: their HPKE public key, the VDAF and the item list.
 * - The leader (the shop's index) takes uploads (`POST /v2/prio3/upload`, one Privacy Pass
 *   token of the epoch each, the same tokens as the local-DP report) and stores them sealed.
 * - When an epoch's upload window closes (end + grace), the leader prepares every report with
 *   its share and sends the helper, in batches, the helper's sealed shares with its own
 *   preparation shares (`POST /v2/prio3/aggregate`); the helper prepares its shares, decides each
 *   proof, sums the accepted ones and answers the preparation messages; the leader sums the same
 *   reports. Then the leader collects (`POST /v2/prio3/collect`): the helper answers its
 *   aggregate share with its noise added, once per epoch and only for a batch of at least
 *   `minReports`; the leader adds its own noise, combines, and stores the release
 *   (`GET /v2/prio3/releases/latest`, `/v2/prio3/releases/:epoch`).
 * - Peer requests carry `authorization: Bearer <peer key>`; the peer key (shared by the two
 *   operators, never by devices) also derives the VDAF verification key.
 *
 * State (./prio3-store.ts): sealed uploads, the epochs' aggregation claims and the releases
 * (leader), seen report nonces and the running aggregate shares (helper), this aggregator's HPKE
 * seed — in `prio3.sqlite` of the data dir, or in the PostgreSQL database of `--store`, shared by
 * several instances of the role (a token pays once across them, one instance aggregates an epoch,
 * a release is stored once). A storage failure answers 507 / 503 with `Retry-After`.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_LDP, PRIO3_HPKE_SUITE, PRIO3_PATHS, b64, prio3ChunkLength, type Prio3Config, type Prio3Upload } from 'atomem/engine';
import { PRIO3_MIN_SHARE, Prio3Aggregator, buildPrio3Release, cryptoUniform, prio3Threshold, type Prio3Release } from './prio3-aggregator.js';
import type { V2Controller } from './v2.js';
import type { Prio3Store } from './prio3-store.js';

/** Options of the Prio3 aggregator role (`IndexServiceOptions.prio3`). */
export interface Prio3ServiceOptions {
  role: 'leader' | 'helper';
  /** The other aggregator's root URL (the leader calls the helper; the helper does not call out). */
  peerUrl: string;
  /** Leader: the helper's root as devices reach it (in the config devices read). Default `peerUrl`. */
  helperPublicUrl?: string;
  /** Secret shared by the two operators (bearer of peer requests; derives the verification key). At least 16 characters. */
  peerKey: string;
  /** ε per device per epoch of each aggregator's noise (discrete Laplace, scale ℓ/ε). Default 1. */
  epsilon?: number;
  /**
   * Counts below this are not released. Default `prio3Threshold`: at least ⌈3 × the release
   * noise's standard deviation⌉, and high enough that a release shows an item nobody reported
   * with probability ≤ 5 % over the whole catalog.
   */
  threshold?: number;
  /**
   * Share of the epoch's accepted reports a count must reach on top of `threshold` to be
   * released (`prio3MinCount`), in [0, 1). Default `PRIO3_MIN_SHARE` (0.1): fake reports lift an
   * item nobody holds into the release only when they are ≥ 10 % of the epoch's reports.
   */
  minShare?: number;
  /** Items a device reports at most (its last ℓ distinct). Default the local-DP ℓ (10). */
  ell?: number;
  /** Accepted reports an epoch needs before anything is released (the helper refuses a smaller collection). Default 50. */
  minReports?: number;
  /** Uploads of an epoch are accepted this long after its end. Default 10 % of the epoch. */
  graceMs?: number;
  /** How often the leader closes due epochs (ms). Default 10 000; 0 = never (call `close`). */
  tickMs?: number;
  /** Noise source, [0, 1) (tests). Default the OS CSPRNG. */
  uniform?: () => number;
}

/** The running Prio3 role of a service. */
export interface Prio3Controller {
  readonly role: 'leader' | 'helper';
  /** Resolves once the item space is read and the HPKE key loaded. */
  readonly ready: Promise<void>;
  /** Leader: aggregate `epoch` with the helper now and store its release (undefined: too few accepted reports). */
  close(epoch: number): Promise<Prio3Release | undefined>;
  /** Leader: the stored release of `epoch`. */
  release(epoch: number): Promise<Prio3Release | undefined>;
  stop(): Promise<void>;
}

/** How long a leader instance's claim on an epoch's aggregation holds before another instance may take it over (ms). */
const CLAIM_LEASE_MS = 300_000;

/** {@link registerPrio3}'s store calls: the failure was answered already. */
const ANSWERED = Symbol('answered');

type Fail = (reply: FastifyReply, status: number, code: string, message: string) => FastifyReply;

interface AggregateRequest {
  epoch: number;
  reports: { nonce: string; publicShare: string; helperShare: { enc: string; ct: string }; leaderPrepShare: string }[];
}
interface AggregateResponse {
  results: ({ prepMessage: string } | { error: string })[];
}

const sealedSchema = {
  type: 'object',
  required: ['enc', 'ct'],
  additionalProperties: false,
  properties: { enc: { type: 'string', maxLength: 256 }, ct: { type: 'string', maxLength: 8_000_000 } },
} as const;
const uploadSchema = {
  type: 'object',
  required: ['epoch', 'token', 'nonce', 'publicShare', 'leaderShare', 'helperShare'],
  additionalProperties: false,
  properties: {
    epoch: { type: 'integer', minimum: 0 },
    token: { type: 'string', maxLength: 4096 },
    nonce: { type: 'string', maxLength: 64 },
    publicShare: { type: 'string', maxLength: 256 },
    leaderShare: sealedSchema,
    helperShare: sealedSchema,
  },
} as const;

export function registerPrio3(
  app: FastifyInstance,
  state: Prio3Store,
  o: Prio3ServiceOptions,
  v2: V2Controller,
  items: () => Promise<readonly string[]>,
  fail: Fail,
): Prio3Controller {
  if (o.role !== 'leader' && o.role !== 'helper') throw new RangeError(`prio3: role must be leader or helper, got ${String(o.role)}`);
  if (typeof o.peerKey !== 'string' || o.peerKey.length < 16)
    throw new RangeError('prio3: the peer key must be at least 16 characters (ATOMEM_PRIO3_PEER_KEY)');
  let peer: URL;
  try {
    peer = new URL(o.peerUrl);
  } catch {
    throw new RangeError(`prio3: --prio3-peer must be a URL, got ${String(o.peerUrl)}`);
  }
  let helperPublic: string;
  try {
    helperPublic = new URL(o.helperPublicUrl ?? o.peerUrl).href.replace(/\/+$/, '');
  } catch {
    throw new RangeError(`prio3: the helper's public URL must be a URL, got ${String(o.helperPublicUrl)}`);
  }
  const epsilon = o.epsilon ?? 1;
  if (!(epsilon > 0 && epsilon <= 20)) throw new RangeError(`prio3: epsilon must be in (0, 20], got ${epsilon}`);
  const ell = o.ell ?? DEFAULT_LDP.ell;
  const scale = ell / epsilon;
  if (o.threshold !== undefined && !(o.threshold >= 0)) throw new RangeError(`prio3: threshold must be ≥ 0, got ${o.threshold}`);
  let threshold = o.threshold ?? 0;
  const minShare = o.minShare ?? PRIO3_MIN_SHARE;
  if (!(minShare >= 0 && minShare < 1)) throw new RangeError(`prio3: minShare must be in [0, 1), got ${o.minShare}`);
  const minReports = o.minReports ?? 50;
  const graceMs = o.graceMs ?? Math.floor(v2.epochMs / 10);
  const uniform = o.uniform ?? cryptoUniform;

  let agg: Prio3Aggregator | undefined;
  let itemIds: readonly string[] = [];
  const ready = (async () => {
    await v2.serving;
    await state.init();
    // why: with a shared store every instance of the role decrypts with the first instance's key
    const seed = await state.hpkeSeed(o.role, randomBytes(32));
    itemIds = await items();
    threshold = o.threshold ?? prio3Threshold(scale, itemIds.length);
    agg = await Prio3Aggregator.create({ role: o.role, length: itemIds.length, peerKey: o.peerKey, hpkeSeed: seed });
  })();
  ready.catch((err: unknown) => app.log.error({ err }, 'prio3: loading failed'));
  const need = (reply: FastifyReply): Prio3Aggregator | undefined => {
    if (!agg) fail(reply, 503, 'not_ready', 'the prio3 aggregator is loading');
    return agg;
  };
  const isPeer = (req: FastifyRequest): boolean => {
    const h = req.headers.authorization ?? '';
    const want = Buffer.from(`Bearer ${o.peerKey}`);
    const got = Buffer.from(h);
    return got.length === want.length && timingSafeEqual(got, want);
  };
  /** The upload window (the store refuses an epoch whose aggregation began, in the upload's transaction). */
  const acceptsEpoch = (e: number): boolean => {
    const now = Date.now();
    const current = Math.floor(now / v2.epochMs);
    return e === current || (e === current - 1 && now < (e + 1) * v2.epochMs + graceMs);
  };
  /** A store failure as an answer (507 full, 503 otherwise, with Retry-After); other errors are rethrown. */
  const stored = async <T>(reply: FastifyReply, fn: () => Promise<T>): Promise<T | typeof ANSWERED> => {
    try {
      return await fn();
    } catch (err) {
      const f = state.classify(err);
      if (!f) throw err;
      app.log.error({ store: state.name, state: f.state }, 'prio3: the store failed');
      reply.header('retry-after', String(f.retryAfterSeconds));
      fail(reply, f.status, f.code, `prio3: ${f.message}`);
      return ANSWERED;
    }
  };
  const bodyLimit = () => Math.max(1 << 20, (agg?.length ?? 0) * 16 * 2 + (1 << 16));

  app.get(PRIO3_PATHS.config, async (_req, reply): Promise<Prio3Config | FastifyReply> => {
    const a = need(reply);
    if (!a) return reply;
    reply.header('cache-control', 'no-store');
    return {
      role: o.role,
      hpkePublicKey: a.publicKey,
      hpkeSuite: PRIO3_HPKE_SUITE,
      vdaf: { name: 'Prio3SumVec', length: itemIds.length, bits: 1, chunkLength: prio3ChunkLength(itemIds.length) },
      items: [...itemIds],
      ell,
      epsilon,
      epochMs: v2.epochMs,
      ...(o.role === 'leader' ? { helperUrl: helperPublic } : {}),
    };
  });

  if (o.role === 'leader') {
    app.post<{ Body: Prio3Upload }>(PRIO3_PATHS.upload, { bodyLimit: 8 << 20, schema: { body: uploadSchema } }, async (req, reply) => {
      // why: one report per connection (as the local-DP report), nothing cached
      reply.header('connection', 'close');
      reply.header('cache-control', 'no-store');
      const a = need(reply);
      if (!a) return reply;
      const u = req.body;
      if (JSON.stringify(u).length > bodyLimit()) return fail(reply, 413, 'too_large', 'upload larger than the catalog needs');
      const refused = () =>
        fail(reply, 403, 'token_refused', 'the token is not valid for a report of this epoch (invalid, already spent, or the epoch is closed)');
      if (!acceptsEpoch(u.epoch)) return refused();
      let nonceBytes: Uint8Array;
      let pub: Uint8Array;
      try {
        nonceBytes = b64.decode(u.nonce);
        pub = b64.decode(u.publicShare);
        if (nonceBytes.length !== a.vdaf.nonceSize) throw new TypeError(`nonce must be ${a.vdaf.nonceSize} bytes`);
        a.decodePublicShare(pub);
        b64.decode(u.leaderShare.ct);
        b64.decode(u.helperShare.ct);
      } catch (e) {
        return fail(reply, 400, 'bad_request', `malformed upload: ${(e as Error).message}`);
      }
      const tokenNonce = await v2.issuer().verify(u.token, u.epoch);
      if (tokenNonce === undefined) return refused();
      const r = await stored(reply, () => state.putUpload(tokenNonce, u.epoch, u.nonce, JSON.stringify(u)));
      if (r === ANSWERED) return reply;
      if (r !== 'stored') return refused();
      reply.code(202);
      return { accepted: true };
    });
    const sendRelease = (reply: FastifyReply, body: string | undefined) => {
      if (body === undefined) return fail(reply, 404, 'not_found', 'no prio3 release for this epoch');
      reply.header('cache-control', 'no-store');
      return reply.type('application/json').send(body);
    };
    app.get(PRIO3_PATHS.latest, async (_req, reply) => {
      const body = await stored(reply, () => state.latestRelease());
      return body === ANSWERED ? reply : sendRelease(reply, body);
    });
    app.get<{ Params: { epoch: string } }>(PRIO3_PATHS.release, async (req, reply) => {
      const e = Number(req.params.epoch);
      if (!Number.isInteger(e) || e < 0) return fail(reply, 400, 'bad_request', 'epoch must be a non-negative integer');
      const body = await stored(reply, () => state.release(e));
      return body === ANSWERED ? reply : sendRelease(reply, body);
    });
  } else {
    app.post<{ Body: AggregateRequest }>(PRIO3_PATHS.aggregate, { bodyLimit: 64 << 20 }, async (req, reply): Promise<AggregateResponse | FastifyReply> => {
      if (!isPeer(req)) return fail(reply, 401, 'unauthorized', 'peer requests need the peer key');
      const a = need(reply);
      if (!a) return reply;
      const { epoch, reports } = req.body ?? ({} as AggregateRequest);
      if (!Number.isInteger(epoch) || !Array.isArray(reports)) return fail(reply, 400, 'bad_request', 'expected { epoch, reports[] }');
      // why: a batch answered before gets that answer again, unchanged (the leader resumes a stopped aggregation from the start)
      const id = jobId(epoch, reports);
      const answered = await stored(reply, () => state.jobAnswer(epoch, id));
      if (answered === ANSWERED) return reply;
      if (answered !== undefined) return reply.type('application/json').send(answered);
      // why: the proof work holds no lock; the store then marks the nonces seen and adds the fresh outputs in one transaction
      const outs: (bigint[] | 'invalid_proof' | 'undecryptable')[] = [];
      const msgs: (Uint8Array | undefined)[] = [];
      for (const r of reports) {
        try {
          const nonce = b64.decode(r.nonce);
          const pub = b64.decode(r.publicShare);
          const input = await a.open(epoch, nonce, pub, r.helperShare);
          const mine = await a.prepare(nonce, pub, input);
          const msg = await a.combine([a.decodePrepShare(b64.decode(r.leaderPrepShare)), mine.share]);
          const out = msg && a.finish(mine.state, msg);
          outs.push(msg && out ? out : 'invalid_proof');
          msgs.push(msg && out ? msg : undefined);
        } catch {
          outs.push('undecryptable');
          msgs.push(undefined);
        }
      }
      const answer = (fresh: boolean[]): AggregateResponse => ({
        results: outs.map((out, i) => (!fresh[i] ? { error: 'replayed' } : typeof out === 'string' ? { error: out } : { prepMessage: b64.encode(msgs[i]!) })),
      });
      const fresh = await stored(reply, () =>
        state.accumulate(
          epoch,
          reports.map((r) => String(r.nonce)),
          (prev, isFresh) => {
            let sum = prev.share !== undefined ? a.decodeVector(prev.share) : a.zero();
            let n = prev.n;
            outs.forEach((out, i) => {
              if (isFresh[i] && typeof out !== 'string') {
                sum = a.sum(sum, out);
                n++;
              }
            });
            return { share: a.encodeVector(sum), n };
          },
          { id, answer: (f) => JSON.stringify(answer(f)) },
        ),
      );
      if (fresh === ANSWERED) return reply;
      if (fresh === 'collected') return fail(reply, 409, 'collected', `epoch ${epoch} was collected: no more reports`);
      // a copy of this batch was answered meanwhile (sent twice at once): its answer
      if (!Array.isArray(fresh)) return reply.type('application/json').send(fresh.replayed);
      return answer(fresh);
    });
    app.post<{ Body: { epoch: number; reports: number } }>(PRIO3_PATHS.collect, async (req, reply) => {
      if (!isPeer(req)) return fail(reply, 401, 'unauthorized', 'peer requests need the peer key');
      const a = need(reply);
      if (!a) return reply;
      const { epoch, reports } = req.body ?? ({} as { epoch: number; reports: number });
      if (!Number.isInteger(epoch) || !Number.isInteger(reports)) return fail(reply, 400, 'bad_request', 'expected { epoch, reports }');
      // why: one noisy answer per epoch (a second draw would average the noise away): the store flips `collected` and stores
      // the answer under a lock; asked again with the same count (a leader that resumes) it answers that same draw
      const row = await stored(reply, () =>
        state.collect(epoch, reports, minReports, (share) =>
          JSON.stringify({ reports, share: a.encodeVector(a.noisy(a.decodeVector(share), scale, uniform)) }),
        ),
      );
      if (row === ANSWERED) return reply;
      if (!row.ok) {
        if (row.error === 'not_found') return fail(reply, 404, 'not_found', `no aggregate for epoch ${epoch}`);
        if (row.error === 'collected') return fail(reply, 409, 'collected', `epoch ${epoch} was collected already`);
        if (row.error === 'batch_mismatch')
          return fail(reply, 409, 'batch_mismatch', `the helper aggregated ${row.n} reports of epoch ${epoch}, the leader ${reports}`);
        return fail(reply, 400, 'batch_too_small', `${row.n} reports: a collection needs at least ${minReports}`);
      }
      return reply.type('application/json').send(row.answer);
    });
  }

  const peerPost = async <T>(path: string, body: unknown): Promise<T> => {
    const res = await fetch(new URL(path, peer), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${o.peerKey}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(120_000),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`prio3: the helper answered ${res.status} to ${path}: ${text.slice(0, 300)}`);
    return JSON.parse(text) as T;
  };

  let closing: Promise<unknown> = Promise.resolve();
  const closeNow = async (epoch: number): Promise<Prio3Release | undefined> => {
    await ready;
    const a = agg!;
    // why: one instance aggregates an epoch; another one waits for its release (or takes over once its lease ran out)
    let claim = await state.claim(epoch, CLAIM_LEASE_MS);
    while (!claim.claimed && !claim.done) {
      await new Promise((r) => setTimeout(r, 500));
      claim = await state.claim(epoch, CLAIM_LEASE_MS);
    }
    if (!claim.claimed) return claim.release === undefined ? undefined : (JSON.parse(claim.release) as Prio3Release);
    const rows = claim.uploads.map((body) => ({ body }));
    let sum = a.zero();
    let accepted = 0;
    let rejected = 0;
    const BATCH = 50;
    for (let i = 0; i < rows.length; i += BATCH) {
      const batch: { state: Parameters<Prio3Aggregator['finish']>[0]; req: AggregateRequest['reports'][number] }[] = [];
      for (const { body } of rows.slice(i, i + BATCH)) {
        const u = JSON.parse(body) as Prio3Upload;
        try {
          const nonce = b64.decode(u.nonce);
          const pub = b64.decode(u.publicShare);
          const mine = await a.prepare(nonce, pub, await a.open(epoch, nonce, pub, u.leaderShare));
          batch.push({
            state: mine.state,
            req: { nonce: u.nonce, publicShare: u.publicShare, helperShare: u.helperShare, leaderPrepShare: b64.encode(a.encodePrepShare(mine.share)) },
          });
        } catch {
          rejected++;
        }
      }
      if (batch.length === 0) continue;
      const { results } = await peerPost<AggregateResponse>(PRIO3_PATHS.aggregate, { epoch, reports: batch.map((b) => b.req) });
      results.forEach((r, j) => {
        const out = 'prepMessage' in r ? a.finish(batch[j].state, b64.decode(r.prepMessage)) : undefined;
        if (!out) {
          rejected++;
          return;
        }
        sum = a.sum(sum, out);
        accepted++;
      });
    }
    if (accepted < minReports) {
      await state.finish(epoch, undefined);
      app.log.info({ epoch, accepted, rejected, minReports }, 'prio3: too few accepted reports, nothing released');
      return undefined;
    }
    const helper = await peerPost<{ reports: number; share: string }>(PRIO3_PATHS.collect, { epoch, reports: accepted });
    const noisy = a.unshard(a.noisy(sum, scale, uniform), a.decodeVector(helper.share));
    let communities: { id: string; items: string[] }[] | undefined;
    try {
      communities = v2.communities().communities;
    } catch {
      communities = undefined;
    }
    const release = buildPrio3Release({
      epoch,
      epochMs: v2.epochMs,
      items: itemIds,
      noisy,
      reports: accepted,
      rejected,
      ell,
      epsilon,
      threshold,
      minShare,
      communities,
    });
    // why: a release is stored once; what is stored is what every instance serves
    const kept = await state.finish(epoch, JSON.stringify(release));
    app.log.info({ epoch, accepted, rejected }, 'prio3: release stored');
    return kept === undefined ? release : (JSON.parse(kept) as Prio3Release);
  };
  const close = (epoch: number): Promise<Prio3Release | undefined> => {
    const next = closing.then(() => closeNow(epoch));
    closing = next.catch(() => {});
    return next;
  };

  const tickMs = o.tickMs ?? 10_000;
  const inFlight = new Set<number>();
  const timer =
    o.role === 'leader' && tickMs > 0
      ? setInterval(async () => {
          let due: number[];
          try {
            due = await state.dueEpochs(v2.epochMs, Date.now() - graceMs);
          } catch (err) {
            app.log.error(
              { err: { code: (err as { code?: string }).code, message: (err as Error).message }, store: state.name },
              'prio3: reading due epochs failed',
            );
            return;
          }
          for (const e of due) {
            if (inFlight.has(e)) continue;
            inFlight.add(e);
            close(e)
              .finally(() => inFlight.delete(e))
              .catch((err: unknown) => app.log.error({ err, epoch: e }, 'prio3: aggregation failed'));
          }
        }, tickMs)
      : undefined;
  timer?.unref();

  return {
    role: o.role,
    ready,
    close,
    async release(e) {
      const body = await state.release(e);
      return body === undefined ? undefined : (JSON.parse(body) as Prio3Release);
    },
    async stop() {
      if (timer) clearInterval(timer);
      await closing.catch(() => {});
      await state.close();
    },
  };
}

/**
 * The id of an aggregation batch: a digest of the epoch and its reports as uploaded (nonce,
 * public share, the helper's sealed share), so a batch sent again is recognised
 * (./prio3-store.ts `AggregationJob`) and a different batch never takes its answer.
 */
function jobId(epoch: number, reports: AggregateRequest['reports']): string {
  const h = createHash('sha256').update(`prio3-job\n${epoch}\n`);
  for (const r of reports) h.update(`${r.nonce}\n${r.publicShare}\n${r.helperShare?.enc}\n${r.helperShare?.ct}\n`);
  return h.digest('base64url');
}
