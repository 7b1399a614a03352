/**
 * The device's client of protocol v2 (src/protocol/index-v2.ts): downloads the public release,
 * and sends at most one local-DP report per epoch, at a random moment of the epoch.
 *
 * On the wire: `credentials: 'omit'` (the shop's cookies never reach the index, even when both
 * share one origin), no custom header, `cache: 'no-store'` for the report, a plain GET for the
 * release (the same URL and bytes for everyone: it says nothing about the shopper). The service
 * closes the connection after each report, so two reports never share a socket.
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

  /** Send one report for `epoch` with a fresh token. */
  async send(epoch: number, report: WireReport): Promise<void> {
    const token = await this.opts.tokens.token(epoch);
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
        // why: the shop's cookies must never reach the index, even on one origin
        credentials: 'omit',
        // why: reports are never cached or revalidated; the release is a public, cacheable file
        cache: method === 'POST' ? 'no-store' : 'default',
        headers: body === undefined ? undefined : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: ctrl.signal,
        referrerPolicy: 'no-referrer',
      });
    } catch (e) {
      const timedOut = ctrl.signal.aborted;
      throw new ReportHttpError(`${method} ${path}: ${timedOut ? `no answer within ${this.timeoutMs} ms` : `network error: ${e instanceof Error ? e.message : String(e)}`}`, 0, timedOut ? 'timeout' : 'network', true);
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
      throw new ReportHttpError(`${method} ${path}: HTTP ${res.status} ${err.error ?? ''}: ${err.message ?? text.slice(0, 200)}`, res.status, err.error ?? `http_${res.status}`, res.status === 429 || res.status >= 500);
    }
    return json;
  }
}

/**
 * When to send the epoch's report: a uniformly random moment in what remains of the epoch
 * (minus a safety margin), so the report's arrival time says nothing about the visit that
 * triggered it. Returns the delay in ms from `now`.
 */
export function reportDelay(now: number, epoch: number, epochMs: number, random: () => number, margin = 0.05): number {
  const end = (epoch + 1) * epochMs - margin * epochMs;
  return Math.max(0, Math.floor(random() * Math.max(0, end - now)));
}
