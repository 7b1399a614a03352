/**
 * DEPRECATED: protocol v1 is insecure (docs/PRIVACY.md); the engine uses protocol v2
 * (`report-client.ts`). Kept for the privacy benchmark's "before" figures and old services.
 *
 * The shared index over HTTP: a {@link SharedIndex} speaking wire protocol v1
 * (`src/protocol/index-v1.ts`) to the `atomem-index` service. The agent's `sync` works with it
 * unchanged. What it sends is inspectable (`lastPayload()`), for the demo and audits.
 *
 * Deletion tokens: each shared copy's token is HMAC-SHA256(device secret, copy id); only its
 * SHA-256 goes up with the copy. The secret stays on the device, so only this device can
 * delete its copies, and nothing links two copies of one device.
 */
import type { CommunityView, SharedIndex, SharedMemoryUpload } from '../community/types.js';
import {
  CLIENT_HEADER,
  INDEX_LIMITS,
  INDEX_PATHS,
  decodeVector,
  encodeVector,
  hashToken,
  type CommunitiesRequest,
  type CommunitiesResponse,
  type DeleteRequest,
  type ErrorResponse,
  type HealthResponse,
  type UpsertRequest,
  type WireMemory,
} from '../protocol/index-v1.js';

/** Options of {@link HttpIndex}. */
export interface HttpIndexOptions {
  /** Service root, e.g. `https://index.shop.example` (paths `/v1/…` are appended). */
  url: string;
  /** The embedder (vector space) id uploads and queries use. */
  embedderId: string;
  /** This device's secret (from `MemoryStore.deviceSecret()`); deletion tokens derive from it. */
  secret: string;
  /**
   * Standard deviation of Gaussian noise added to each vector before upload (then
   * re-normalised). Default 0. Blurs the vector against inversion at some cost in matching.
   */
  noise?: number;
  /** `fetch` to use. Default: global `fetch`. */
  fetch?: typeof fetch;
  /** Per-request time limit. Default 15 000 ms. */
  timeoutMs?: number;
  /**
   * Anonymous rate-limit token sent as `x-atomem-client`: random per instance by default
   * (per page session), never derived from the user or device.
   */
  clientToken?: string;
}

/** An HTTP failure; `retryable` is true for network errors, timeouts, 429 and 5xx. */
export class IndexHttpError extends Error {
  override name = 'IndexHttpError';
  constructor(
    message: string,
    /** HTTP status, 0 for network errors and timeouts. */
    readonly status: number,
    /** The service's error code (`wrong_dimension`, `forbidden`, ...) or `network` / `timeout`. */
    readonly code: string,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** The last request body sent, as it went on the wire. */
export interface Payload {
  path: string;
  body: unknown;
  at: number;
}

function randomToken(bytes = 16): string {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(bytes));
  return btoa(String.fromCharCode(...b)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

function gaussian(): number {
  const u = globalThis.crypto.getRandomValues(new Uint32Array(2));
  const a = (u[0] + 1) / 4294967297;
  const b = (u[1] + 1) / 4294967297;
  return Math.sqrt(-2 * Math.log(a)) * Math.cos(2 * Math.PI * b);
}

/**
 * Gaussian noise of standard deviation `sigma` per component, then re-normalised: what
 * {@link HttpIndex} applies to each vector before upload when `noise` is set.
 */
export function addGaussianNoise(v: Float32Array, sigma: number): Float32Array {
  if (!(sigma > 0)) return v;
  const out = new Float32Array(v.length);
  let n = 0;
  for (let i = 0; i < v.length; i++) {
    out[i] = v[i] + sigma * gaussian();
    n += out[i] * out[i];
  }
  n = Math.sqrt(n) || 1;
  for (let i = 0; i < out.length; i++) out[i] /= n;
  return out;
}

/** {@link SharedIndex} over HTTP. */
export class HttpIndex implements SharedIndex {
  readonly embedderId: string;
  private readonly base: string;
  private readonly doFetch: typeof fetch;
  private readonly timeoutMs: number;
  private readonly noise: number;
  private readonly clientToken: string;
  private readonly keyPromise: Promise<CryptoKey>;
  private last: Payload | undefined;

  constructor(options: HttpIndexOptions) {
    if (!options || typeof options.url !== 'string' || !/^https?:\/\//.test(options.url)) throw new TypeError('HttpIndex: url must be an http(s) URL');
    if (typeof options.embedderId !== 'string' || !options.embedderId) throw new TypeError('HttpIndex: embedderId must be a non-empty string');
    if (typeof options.secret !== 'string' || options.secret.length < 16) throw new TypeError('HttpIndex: secret must be a string of at least 16 characters');
    if (options.noise !== undefined && !(options.noise >= 0)) throw new RangeError('HttpIndex: noise must be ≥ 0');
    this.base = options.url.replace(/\/+$/, '');
    this.embedderId = options.embedderId;
    this.doFetch = options.fetch ?? ((...a) => globalThis.fetch(...a));
    this.timeoutMs = options.timeoutMs ?? 15_000;
    this.noise = options.noise ?? 0;
    this.clientToken = options.clientToken ?? randomToken();
    this.keyPromise = globalThis.crypto.subtle.importKey('raw', new TextEncoder().encode(options.secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  }

  /** The last request body sent (a copy), or undefined before the first. */
  lastPayload(): Payload | undefined {
    return this.last ? structuredClone(this.last) : undefined;
  }

  /** The deletion token of a shared copy (HMAC of its id under the device secret, base64url). */
  async tokenFor(id: string): Promise<string> {
    const sig = await globalThis.crypto.subtle.sign('HMAC', await this.keyPromise, new TextEncoder().encode(id));
    return btoa(String.fromCharCode(...new Uint8Array(sig))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  /** GET /v1/health. */
  async health(): Promise<HealthResponse> {
    return (await this.request('GET', INDEX_PATHS.health)) as HealthResponse;
  }

  async upsert(batch: readonly SharedMemoryUpload[]): Promise<void> {
    for (let i = 0; i < batch.length; i += INDEX_LIMITS.maxBatch) {
      const memories: WireMemory[] = await Promise.all(
        batch.slice(i, i + INDEX_LIMITS.maxBatch).map(async (u) => {
          if (u.embedderId !== this.embedderId) throw new TypeError(`upload ${u.id}: embedder ${u.embedderId}, index ${this.embedderId}`);
          return {
            id: u.id,
            tokenHash: await hashToken(await this.tokenFor(u.id)),
            embedderId: u.embedderId,
            dim: u.vector.length,
            vector: encodeVector(addGaussianNoise(u.vector, this.noise)),
            ...(u.items && u.items.length ? { items: u.items.slice(0, INDEX_LIMITS.maxItems) } : {}),
          };
        }),
      );
      const body: UpsertRequest = { v: 1, memories };
      await this.request('POST', INDEX_PATHS.upsert, body);
    }
  }

  async delete(ids: readonly string[]): Promise<void> {
    const deletions = await Promise.all(ids.map(async (id) => ({ id, token: await this.tokenFor(id) })));
    await this.deleteWithTokens(deletions);
  }

  /** Delete copies whose tokens are already known (queued before the secret was erased). */
  async deleteWithTokens(deletions: readonly { id: string; token: string }[]): Promise<void> {
    for (let i = 0; i < deletions.length; i += INDEX_LIMITS.maxBatch) {
      const body: DeleteRequest = { v: 1, deletions: deletions.slice(i, i + INDEX_LIMITS.maxBatch).map((d) => ({ ...d })) };
      await this.request('POST', INDEX_PATHS.delete, body);
    }
  }

  async communities(ownIds: readonly string[]): Promise<CommunityView[]> {
    const out: CommunityView[] = [];
    for (let i = 0; i < ownIds.length; i += INDEX_LIMITS.maxIds) {
      const body: CommunitiesRequest = { v: 1, embedderId: this.embedderId, ids: ownIds.slice(i, i + INDEX_LIMITS.maxIds) };
      const res = (await this.request('POST', INDEX_PATHS.communities, body)) as CommunitiesResponse;
      for (const c of res.communities) {
        out.push({
          id: c.id,
          size: c.size,
          prototype: decodeVector(c.prototype),
          members: c.members.map(decodeVector),
          ...(c.items ? { items: c.items } : {}),
          ...(c.related ? { related: c.related } : {}),
          ownIds: c.ownIds,
        });
      }
    }
    return out;
  }

  private async request(method: 'GET' | 'POST', path: string, body?: unknown): Promise<unknown> {
    if (body !== undefined) this.last = { path, body, at: Date.now() };
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let res: Response;
    try {
      res = await this.doFetch(`${this.base}${path}`, {
        method,
        headers: { 'content-type': 'application/json', [CLIENT_HEADER]: this.clientToken },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: ctrl.signal,
      });
    } catch (e) {
      const timedOut = ctrl.signal.aborted;
      throw new IndexHttpError(
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
      throw new IndexHttpError(`${method} ${path}: HTTP ${res.status} with a non-JSON body: ${text.slice(0, 200)}`, res.status, 'malformed', res.status >= 500);
    }
    if (!res.ok) {
      const err = json as Partial<ErrorResponse>;
      throw new IndexHttpError(
        `${method} ${path}: HTTP ${res.status} ${err.error ?? ''}: ${err.message ?? text.slice(0, 200)}`,
        res.status,
        err.error ?? `http_${res.status}`,
        res.status === 429 || res.status >= 500,
      );
    }
    return json;
  }
}
