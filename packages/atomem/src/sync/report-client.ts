/**
 * The device's client of protocol v2 (src/protocol/index-v2.ts): downloads the public release,
 * and sends at most one local-DP report per epoch, at a random moment of the epoch.
 *
 * On the wire ({@link WIRE_INIT}): `credentials: 'omit'` (the shop's cookies never reach the
 * index, even when both share one origin; in Chromium an uncredentialed request also never
 * shares a connection with a credentialed one, such as the attester's), no custom header,
 * `cache: 'no-store'` for every request — the report and also the release and health: the
 * browser neither stores the answer nor revalidates it, so an index cannot plant an ETag (or a
 * Last-Modified date) that a later fetch would send back as `If-None-Match`. The service closes
 * the connection after each report, so two reports never share a socket; the page cannot pick a
 * fresh connection itself (fetch has no such option), see docs/PRIVACY.md.
 *
 * With `relay` (Oblivious HTTP, RFC 9458; src/protocol/ohttp.ts) the report goes to the relay
 * instead, encapsulated to the index gateway's key (read from the relay, which serves one copy
 * to every device): the relay sees the device's address but not the report; the index sees the
 * report but only the relay's address, and — with a batching relay — only its flush time. The
 * release and health stay direct (the same public file for everyone). The HPKE code is loaded
 * only when a relay is configured.
 */
import { INDEX_V2_PATHS, type ErrorV2Response, type HealthV2Response, type Release, type ReportRequest, type WireReport } from '../protocol/index-v2.js';
import type { TokenProvider } from './tokens.js';
import type { KeyConfig } from '../protocol/ohttp.js';
import { PRIO3_PATHS, checkPrio3Pair, type Prio3Config, type Prio3Endpoints, type Prio3Upload } from './prio3-report.js';

/** Options of {@link ReportClient}. */
export interface ReportClientOptions {
  /** Index service root, e.g. `https://index.shop.example`. */
  url: string;
  /** Where the device's per-epoch token comes from (the shop's attester). */
  tokens: TokenProvider;
  /** `fetch` to use. Default: global `fetch`. */
  fetch?: typeof fetch;
  /** Per-request time limit. Default 15 000 ms. */
  timeoutMs?: number;
  /** An Oblivious HTTP relay (`atomem-relay`) root, e.g. `https://relay.example`: reports go through it, encapsulated to the index's gateway. */
  relay?: string;
}

/** An HTTP failure of v2; `retryable` for network errors, timeouts, 429 and 5xx. */
export class ReportHttpError extends Error {
  override name = 'ReportHttpError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** What the client last sent (for audits and the demo's inspector). */
export interface SentReport {
  path: string;
  body: ReportRequest | Prio3Upload;
  at: number;
  /** Through a relay: `held` (a batching relay took it, to forward at its next flush) or `forwarded` (the index's answer came back through it). */
  relayed?: 'held' | 'forwarded';
}

/** The fetch options of every request to the index (checked in Chromium by the tests). */
export const WIRE_INIT = Object.freeze({
  credentials: 'omit',
  cache: 'no-store',
  referrerPolicy: 'no-referrer',
  redirect: 'error',
} as const satisfies RequestInit);

/** The length every report's JSON is padded to (with spaces) when it goes through a relay. */
export const RELAY_REPORT_BYTES = 1024;

/** v2 over HTTP. */
export class ReportClient {
  private readonly base: string;
  private readonly doFetch: typeof fetch;
  private readonly timeoutMs: number;
  private readonly relay: string | undefined;
  private relayKey: Promise<KeyConfig> | undefined;
  private last: SentReport | undefined;

  constructor(private readonly opts: ReportClientOptions) {
    if (!opts || typeof opts.url !== 'string' || !/^https?:\/\//.test(opts.url)) throw new TypeError('ReportClient: url must be an http(s) URL');
    if (!opts.tokens || typeof opts.tokens.token !== 'function') throw new TypeError('ReportClient: tokens must be a TokenProvider');
    this.base = opts.url.replace(/\/+$/, '');
    this.doFetch = opts.fetch ?? ((...a) => globalThis.fetch(...a));
    this.timeoutMs = opts.timeoutMs ?? 15_000;
    if (opts.relay !== undefined && (typeof opts.relay !== 'string' || !/^https?:\/\//.test(opts.relay)))
      throw new TypeError('ReportClient: relay must be an http(s) URL (an atomem-relay root)');
    this.relay = opts.relay?.replace(/\/+$/, '');
  }

  /** The last report sent (a copy), or undefined. */
  lastReport(): SentReport | undefined {
    return this.last ? structuredClone(this.last) : undefined;
  }

  /** GET /v2/health. */
  async health(): Promise<HealthV2Response> {
    return (await this.request('GET', INDEX_V2_PATHS.health)) as HealthV2Response;
  }

  /** The latest release (undefined while none is published). */
  async latestRelease(): Promise<Release | undefined> {
    try {
      return (await this.request('GET', INDEX_V2_PATHS.latest)) as Release;
    } catch (e) {
      if (e instanceof ReportHttpError && e.status === 404) return undefined;
      throw e;
    }
  }

  /** A token for `epoch` from the configured provider (fetch it an epoch ahead: sync/schedule.ts). */
  token(epoch: number): Promise<string> {
    return this.opts.tokens.token(epoch);
  }

  /** Send one report for `epoch` with `token` (default: a token fetched now, which links by time; tests only). */
  async send(epoch: number, report: WireReport, token?: string): Promise<void> {
    token ??= await this.opts.tokens.token(epoch);
    const body: ReportRequest = { v: 2, epoch, token, report: { cohort: report.cohort, bucket: report.bucket } };
    this.last = { path: INDEX_V2_PATHS.report, body, at: Date.now() };
    // why padded: every encapsulated report has the same length, so its size tells an observer of both links nothing
    if (this.relay !== undefined)
      this.last.relayed = await this.sendThroughRelay(this.relay, INDEX_V2_PATHS.report, JSON.stringify(body).padEnd(RELAY_REPORT_BYTES, ' '));
    else await this.request('POST', INDEX_V2_PATHS.report, body);
  }

  /**
   * The Prio3 configuration of the index (the leader) and of the helper it names, checked to agree
   * (sync/prio3-report.ts); undefined when the index runs no Prio3 leader (404 or no helper named).
   */
  async prio3(): Promise<Prio3Endpoints | undefined> {
    let leader: Prio3Config;
    try {
      leader = (await this.request('GET', PRIO3_PATHS.config)) as Prio3Config;
    } catch (e) {
      if (e instanceof ReportHttpError && e.status === 404) return undefined;
      throw e;
    }
    if (leader.role !== 'leader' || typeof leader.helperUrl !== 'string' || !/^https?:\/\//.test(leader.helperUrl)) return undefined;
    const helperUrl = leader.helperUrl.replace(/\/+$/, '');
    const helper = (await this.request('GET', PRIO3_PATHS.config, undefined, helperUrl)) as Prio3Config;
    checkPrio3Pair(leader, helper);
    return { leader, helper, helperUrl };
  }

  /** The latest Prio3 release (undefined while none is published). */
  async latestPrio3Release(): Promise<unknown> {
    try {
      return await this.request('GET', PRIO3_PATHS.latest);
    } catch (e) {
      if (e instanceof ReportHttpError && e.status === 404) return undefined;
      throw e;
    }
  }

  /** Upload one Prio3 report (its shares sealed to both aggregators) to the leader, through the relay when one is configured. */
  async sendPrio3(upload: Prio3Upload): Promise<void> {
    this.last = { path: PRIO3_PATHS.upload, body: upload, at: Date.now() };
    const text = JSON.stringify(upload);
    // why padded to a multiple of 1 KiB: every upload of one catalog then has the same length
    if (this.relay !== undefined)
      this.last.relayed = await this.sendThroughRelay(this.relay, PRIO3_PATHS.upload, text.padEnd(Math.ceil((text.length + 1) / 1024) * 1024, ' '));
    else await this.request('POST', PRIO3_PATHS.upload, upload);
  }

  /** A request (its JSON body) as binary HTTP, encapsulated to the gateway's key, POSTed to the relay. */
  private async sendThroughRelay(relay: string, innerPath: string, bodyText: string): Promise<'held' | 'forwarded'> {
    const ohttp = await import('../protocol/ohttp.js');
    const path = `${ohttp.OHTTP_RELAY_PATHS.relay} (relay)`;
    this.relayKey ??= this.fetchRelay(relay, ohttp.OHTTP_RELAY_PATHS.keys, 'GET').then(async (res) => {
      const [config] = ohttp.decodeKeys(new Uint8Array(await res.arrayBuffer()));
      if (!config) throw new ReportHttpError('the relay serves no gateway key atomem can use', res.status, 'malformed', false);
      return config;
    });
    this.relayKey.catch(() => (this.relayKey = undefined));
    const config = await this.relayKey;
    const inner = await ohttp.encodeBinaryRequest(
      new Request(`${this.base}${innerPath}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: bodyText }),
    );
    const exchange = await ohttp.encapsulateRequest(config, inner);
    const res = await this.fetchRelay(relay, ohttp.OHTTP_RELAY_PATHS.relay, 'POST', exchange.request, ohttp.OHTTP_MEDIA.request);
    if (res.status === 202) {
      await res.arrayBuffer();
      return 'held';
    }
    if (res.headers.get('content-type') !== ohttp.OHTTP_MEDIA.response)
      throw new ReportHttpError(`POST ${path}: HTTP ${res.status} without an encapsulated answer`, res.status, 'malformed', true);
    const answer = ohttp.decodeBinaryResponse(await exchange.openResponse(new Uint8Array(await res.arrayBuffer())));
    const text = await answer.text();
    if (!answer.ok) {
      let err: Partial<ErrorV2Response> = {};
      try {
        err = JSON.parse(text) as ErrorV2Response;
      } catch {
        // not JSON: the status says it
      }
      throw new ReportHttpError(
        `POST ${innerPath} through the relay: HTTP ${answer.status} ${err.error ?? ''}: ${err.message ?? text.slice(0, 200)}`,
        answer.status,
        err.error ?? `http_${answer.status}`,
        answer.status === 429 || answer.status >= 500,
      );
    }
    return 'forwarded';
  }

  /** One request to the relay ({@link WIRE_INIT}); throws {@link ReportHttpError} unless 2xx. */
  private async fetchRelay(relay: string, path: string, method: 'GET' | 'POST', body?: Uint8Array, type?: string): Promise<Response> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let res: Response;
    try {
      res = await this.doFetch(`${relay}${path}`, {
        method,
        ...WIRE_INIT,
        headers: type ? { 'content-type': type } : undefined,
        body: body ? (body.slice().buffer as ArrayBuffer) : undefined,
        signal: ctrl.signal,
      });
    } catch (e) {
      const timedOut = ctrl.signal.aborted;
      throw new ReportHttpError(
        `${method} ${path} (relay): ${timedOut ? `no answer within ${this.timeoutMs} ms` : `network error: ${e instanceof Error ? e.message : String(e)}`}`,
        0,
        timedOut ? 'timeout' : 'network',
        true,
      );
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok) {
      const text = await res.text();
      let code = `relay_${res.status}`;
      try {
        code = (JSON.parse(text) as ErrorV2Response).error ?? code;
      } catch {
        // not JSON
      }
      throw new ReportHttpError(
        `${method} ${path} (relay): HTTP ${res.status}: ${text.slice(0, 200)}`,
        res.status,
        code,
        res.status === 429 || res.status >= 500,
      );
    }
    return res;
  }

  private async request(method: 'GET' | 'POST', path: string, body?: unknown, base = this.base): Promise<unknown> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let res: Response;
    try {
      res = await this.doFetch(`${base}${path}`, {
        method,
        // why: no cookies to the index (even on one origin), nothing cached or revalidated (no
        // planted ETag comes back), no referrer, no redirect to another host
        ...WIRE_INIT,
        headers: body === undefined ? undefined : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: ctrl.signal,
      });
    } catch (e) {
      const timedOut = ctrl.signal.aborted;
      throw new ReportHttpError(
        `${method} ${path}: ${timedOut ? `no answer within ${this.timeoutMs} ms` : `network error: ${e instanceof Error ? e.message : String(e)}`}`,
        0,
        timedOut ? 'timeout' : 'network',
        true,
      );
    } finally {
      clearTimeout(timer);
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      throw new ReportHttpError(`${method} ${path}: HTTP ${res.status} with a non-JSON body`, res.status, 'malformed', res.status >= 500);
    }
    if (!res.ok) {
      const err = json as Partial<ErrorV2Response>;
      throw new ReportHttpError(
        `${method} ${path}: HTTP ${res.status} ${err.error ?? ''}: ${err.message ?? text.slice(0, 200)}`,
        res.status,
        err.error ?? `http_${res.status}`,
        res.status === 429 || res.status >= 500,
      );
    }
    return json;
  }
}

/** @deprecated by sync/schedule.ts ({@link randomMomentIn}); kept for the benchmark's epoch runner. */
export { randomMomentIn as reportDelay } from './schedule.js';
