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
 */
import { INDEX_V2_PATHS, type ErrorV2Response, type HealthV2Response, type Release, type ReportRequest, type WireReport } from '../protocol/index-v2.js';
import type { TokenProvider } from './tokens.js';

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
  body: ReportRequest;
  at: number;
}

/** The fetch options of every request to the index (checked in Chromium by the tests). */
export const WIRE_INIT = Object.freeze({
  credentials: 'omit',
  cache: 'no-store',
  referrerPolicy: 'no-referrer',
  redirect: 'error',
} as const satisfies RequestInit);

/** v2 over HTTP. */
export class ReportClient {
  private readonly base: string;
  private readonly doFetch: typeof fetch;
  private readonly timeoutMs: number;
  private last: SentReport | undefined;

  constructor(private readonly opts: ReportClientOptions) {
    if (!opts || typeof opts.url !== 'string' || !/^https?:\/\//.test(opts.url)) throw new TypeError('ReportClient: url must be an http(s) URL');
    if (!opts.tokens || typeof opts.tokens.token !== 'function') throw new TypeError('ReportClient: tokens must be a TokenProvider');
    this.base = opts.url.replace(/\/+$/, '');
    this.doFetch = opts.fetch ?? ((...a) => globalThis.fetch(...a));
    this.timeoutMs = opts.timeoutMs ?? 15_000;
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
    await this.request('POST', INDEX_V2_PATHS.report, body);
  }

  private async request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let res: Response;
    try {
      res = await this.doFetch(`${this.base}${path}`, {
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
