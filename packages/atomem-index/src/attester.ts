/**
 * The reference attester: the shop's side of Privacy Pass issuance (RFC 9576's attester; the
 * index is the issuer). It knows the shopper — by the shop's own account, never by a cookie it
 * would mint itself — and gives each account at most `perAccount` tokens per epoch (default 1:
 * one report per account per epoch, whatever devices, private windows or `erase()` the shopper
 * uses). Visitors without an account get none unless the shop opens a pool for them
 * (`anonymousPerEpoch`: that many tokens per epoch for ALL anonymous visitors together, first
 * come first served — a Sybil can drain it, never exceed it).
 *
 * The request it forwards is blinded: it never sees the token, so it cannot recognise the report
 * it paid for. Tokens may be asked for the current epoch or the next one: a device fetches its
 * next epoch's token at a random moment of this epoch (see atomem's sync/schedule.ts), so
 * issuance and report times are independent.
 *
 * @example
 * const attester = new Attester({ issue: issueInProcess(service.v2!.issuer()), epoch: () => service.v2!.epoch() });
 * registerAttester(app, { path: '/shop/atomem-token', attester, accountOf: (req) => req.session?.userId });
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { INDEX_V2_PATHS, type IssueRequest, type IssueResponse } from 'atomem/protocol';
import type { TokenIssuer } from './tokens.js';

/** A refusal of the attester: HTTP status, a stable code and a message. */
export class AttesterError extends Error {
  override name = 'AttesterError';
  constructor(
    readonly status: number,
    readonly code: 'bad_request' | 'wrong_epoch' | 'no_account' | 'token_limit' | 'issuer_failed',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Where the per-account counts live. The default keeps them in memory (one server process); a
 * shop with several processes passes one backed by its shared store (the operation must be
 * atomic: check and increment in one step).
 */
export interface AttesterBudgetStore {
  /** Take one of `limit` units of `key` for `epoch`: true when one was left (and is now taken). */
  take(key: string, epoch: number, limit: number): boolean | Promise<boolean>;
  /** Give back a unit taken for a request that was not issued (malformed, issuer down). */
  refund(key: string, epoch: number): void | Promise<void>;
  /** Forget epochs before `epoch`. */
  prune(epoch: number): void | Promise<void>;
}

/** {@link AttesterBudgetStore} in memory. */
export class MemoryBudgetStore implements AttesterBudgetStore {
  private readonly counts = new Map<number, Map<string, number>>();
  take(key: string, epoch: number, limit: number): boolean {
    let m = this.counts.get(epoch);
    if (!m) this.counts.set(epoch, (m = new Map()));
    const n = m.get(key) ?? 0;
    if (n >= limit) return false;
    m.set(key, n + 1);
    return true;
  }
  refund(key: string, epoch: number): void {
    const m = this.counts.get(epoch);
    const n = m?.get(key) ?? 0;
    if (m && n > 0) m.set(key, n - 1);
  }
  prune(epoch: number): void {
    for (const e of this.counts.keys()) if (e < epoch) this.counts.delete(e);
  }
}

/** Options of {@link Attester}. */
export interface AttesterOptions {
  /** Issue a blinded request: {@link issueInProcess} or {@link issueViaIndex}. */
  issue: (request: IssueRequest) => Promise<IssueResponse>;
  /** The index's current epoch. */
  epoch: () => number;
  /** Tokens per account per epoch. Default 1. */
  perAccount?: number;
  /** Tokens per epoch for all visitors without an account together. Default 0 (none). */
  anonymousPerEpoch?: number;
  /** Where counts live. Default in memory. */
  store?: AttesterBudgetStore;
}

const ANONYMOUS = '\0anonymous';

/** The reference attester (see the module comment). */
export class Attester {
  readonly perAccount: number;
  readonly anonymousPerEpoch: number;
  private readonly store: AttesterBudgetStore;

  constructor(private readonly opts: AttesterOptions) {
    if (!opts || typeof opts.issue !== 'function' || typeof opts.epoch !== 'function') throw new TypeError('Attester: issue and epoch must be functions');
    this.perAccount = opts.perAccount ?? 1;
    this.anonymousPerEpoch = opts.anonymousPerEpoch ?? 0;
    if (!Number.isInteger(this.perAccount) || this.perAccount < 0)
      throw new RangeError(`Attester: perAccount must be an integer ≥ 0, got ${String(opts.perAccount)}`);
    if (!Number.isInteger(this.anonymousPerEpoch) || this.anonymousPerEpoch < 0)
      throw new RangeError(`Attester: anonymousPerEpoch must be an integer ≥ 0, got ${String(opts.anonymousPerEpoch)}`);
    this.store = opts.store ?? new MemoryBudgetStore();
  }

  /**
   * A token for `account` (undefined: an anonymous visitor), or an {@link AttesterError}:
   * 400 malformed or an epoch other than the current or next one, 403 no account (and no
   * anonymous pool), 429 the account's (or the pool's) budget of that epoch is spent.
   */
  async attest(account: string | undefined, body: unknown): Promise<IssueResponse> {
    const b = body as Partial<IssueRequest> | null;
    if (
      !b ||
      typeof b !== 'object' ||
      b.v !== 2 ||
      !Number.isInteger(b.epoch) ||
      typeof b.request !== 'string' ||
      b.request.length === 0 ||
      b.request.length > 1024
    ) {
      throw new AttesterError(400, 'bad_request', 'expected { v: 2, epoch: <integer>, request: <base64url token request> }');
    }
    const cur = this.opts.epoch();
    const epoch = b.epoch!;
    if (epoch !== cur && epoch !== cur + 1)
      throw new AttesterError(400, 'wrong_epoch', `tokens are for the current epoch (${cur}) or the next one, not ${epoch}`);
    if (account !== undefined && (typeof account !== 'string' || account.length === 0))
      throw new TypeError('Attester: account must be a non-empty string or undefined');
    const key = account === undefined ? ANONYMOUS : `a:${account}`;
    const limit = account === undefined ? this.anonymousPerEpoch : this.perAccount;
    if (account === undefined && limit === 0) throw new AttesterError(403, 'no_account', 'tokens are for signed-in shoppers only');
    await this.store.prune(cur);
    if (!(await this.store.take(key, epoch, limit))) {
      throw new AttesterError(
        429,
        'token_limit',
        account === undefined ? `the anonymous pool of epoch ${epoch} is spent` : `this account has its ${limit} token(s) for epoch ${epoch}`,
      );
    }
    try {
      return await this.opts.issue({ v: 2, epoch, request: b.request! });
    } catch (e) {
      await this.store.refund(key, epoch);
      if (e instanceof TypeError) throw new AttesterError(400, 'bad_request', e.message);
      throw new AttesterError(502, 'issuer_failed', `the issuer failed: ${e instanceof Error ? e.message : String(e)}`);
    }
  }
}

/** Issue with the index's issuer in the same process (the shop's server embeds the index). */
export function issueInProcess(issuer: TokenIssuer | (() => TokenIssuer)): AttesterOptions['issue'] {
  return async (req) => ({ response: await (typeof issuer === 'function' ? issuer() : issuer).issue(req.request) });
}

/** Issue through the index's HTTP issuance endpoint with the attester key (`v2.attesterKey`). */
export function issueViaIndex(indexUrl: string, attesterKey: string, doFetch: typeof fetch = (...a) => globalThis.fetch(...a)): AttesterOptions['issue'] {
  const url = `${indexUrl.replace(/\/+$/, '')}${INDEX_V2_PATHS.issue}`;
  return async (req) => {
    const res = await doFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${attesterKey}` },
      body: JSON.stringify(req),
    });
    const text = await res.text();
    if (res.status === 400) throw new TypeError(`the index refused the token request: ${text.slice(0, 200)}`);
    if (!res.ok) throw new Error(`the index answered HTTP ${res.status}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as IssueResponse;
  };
}

/**
 * Mount the attester on a fastify server at `path`. `accountOf` reads the shop's own
 * authentication (undefined: not signed in). Every answer closes its connection and is never
 * cached: the device's report, sent later, never travels on the socket that carried its
 * identified token request.
 */
export function registerAttester(app: FastifyInstance, o: { path: string; attester: Attester; accountOf: (req: FastifyRequest) => string | undefined }): void {
  app.post(o.path, async (req, reply) => {
    reply.header('connection', 'close').header('cache-control', 'no-store');
    try {
      return await o.attester.attest(o.accountOf(req), req.body);
    } catch (e) {
      if (e instanceof AttesterError) return reply.code(e.status).send({ error: e.code, message: e.message });
      throw e;
    }
  });
}
