/**
 * Wire protocol v2 of the shared community index: every request and response body, the paths,
 * the limits, the report encoding and the release file. The service (`atomem-index`) and the
 * device client (`src/sync/report-client.ts`) both import this one file.
 *
 * Privacy rules the shapes encode (see docs/PRIVACY.md):
 * - **Nothing per record comes back.** The index publishes one immutable release per epoch:
 *   community prototypes built from the shop's public item space and per-item frequency
 *   estimates. A device downloads it with a plain GET and matches its memories locally; no
 *   read request carries anything about the shopper.
 * - **One report per device per epoch**, and a report is ONE number pair: `(cohort, bucket)`,
 *   the output of a local-DP randomizer (optimal local hashing over the shopper's recent
 *   items, padding-and-sampling, RAPPOR-style memoized permanent randomization plus fresh
 *   instantaneous randomization). No vector, no id, no item in clear. Fixed size.
 * - **One Privacy Pass token per report** (RFC 9578, publicly verifiable blind RSA): the shop
 *   attests its shopper and rate-limits one token per shopper per epoch; the index verifies
 *   and spends it. Tokens are unlinkable to their issuance, so reports stay anonymous while
 *   Sybils cannot add reports without tokens.
 * - No client header, no cookies (`credentials: 'omit'`), no deletion ids (there is no per-report
 *   handle that could link a shopper's reports).
 */

/** Protocol version, also the path prefix (`/v2/…`). */
export const INDEX_V2_VERSION = 2;

/** Endpoints. */
export const INDEX_V2_PATHS = {
  /** GET → {@link HealthV2Response}. */
  health: '/v2/health',
  /** GET → {@link TokenKeyResponse}: the issuer's public key (cacheable). */
  tokenKey: '/v2/token-key',
  /**
   * POST {@link IssueRequest} → {@link IssueResponse}. Only for the attester (the shop's
   * server, `authorization: Bearer <attester key>`), which rate-limits one token per shopper
   * per epoch; 404 when the service has no attester key configured.
   */
  issue: '/v2/tokens',
  /** POST {@link ReportRequest} → {@link ReportResponse} (202). The connection is closed after each. */
  report: '/v2/reports',
  /** GET → {@link Release} of the latest published epoch (cacheable for a short while). */
  latest: '/v2/releases/latest',
  /** GET `/v2/releases/<epoch>` → {@link Release} (immutable). */
  release: (epoch: number) => `/v2/releases/${epoch}`,
} as const;

/**
 * Grammar of item ids (catalog ids in the item space and in releases): 1–128
 * characters, each a letter or digit of any script, a combining mark, or one of `. _ : / @ + ~ # = -`;
 * the first a letter or digit. Excluded on purpose: whitespace, control and format characters
 * (bidi overrides such as U+202E, zero-width characters), lone surrogates, and `< > & " ' \``
 * (ids are shown to other shoppers). The service refuses a catalog with another id, naming it.
 */
export const ITEM_ID_PATTERN = '^[\\p{L}\\p{N}][\\p{L}\\p{N}\\p{M}._:/@+~#=-]{0,127}$';

/** Whether `id` follows {@link ITEM_ID_PATTERN}. */
export function isValidItemId(id: unknown): id is string {
  return typeof id === 'string' && id.length <= 512 && ITEM_ID_RE.test(id);
}
const ITEM_ID_RE = new RegExp(ITEM_ID_PATTERN, 'u');

/** Hard limits; the service answers 400 / 413 beyond them. */
export const INDEX_V2_LIMITS = {
  /** Request body size in bytes (a report is ~600 B). */
  maxBodyBytes: 8_192,
  /** Serialized Privacy Pass token (type 2, 2048-bit key: 2 + 32 + 32 + 32 + 256 bytes) in base64url. */
  maxTokenChars: 512,
  /** Serialized token request (type 2: 3 + 256 bytes) in base64url. */
  maxTokenRequestChars: 512,
} as const;

/**
 * Local-DP parameters of a report. Published in every release and in health, so a device can
 * check what it is asked to run.
 */
export interface LdpParams {
  /** Mechanism name: optimal local hashing with permanent + instantaneous randomized response. */
  mechanism: 'olh-rappor';
  /** Number of public hash cohorts (a report names one; many devices share each). */
  cohorts: number;
  /** Hash range g of the local hashing. */
  g: number;
  /** Padding length ℓ: a device samples one of ℓ slots (its recent items, then dummies). */
  ell: number;
  /** ε of the memoized permanent randomization (bound per item over any number of epochs). */
  epsPermanent: number;
  /** ε of the fresh instantaneous randomization on top of it. */
  epsInstant: number;
  /** ε of one report (the composed channel; ≤ both), i.e. per shopper per epoch. */
  epsilon: number;
  /** δ per shopper per epoch (0: pure ε-LDP). */
  delta: number;
}

/** Epoch number of a time: ⌊ms / epochMs⌋. */
export function epochOf(ms: number, epochMs: number): number {
  return Math.floor(ms / epochMs);
}

/** Default epoch length: one day. */
export const DEFAULT_EPOCH_MS = 86_400_000;

/** The dummy slot of padding-and-sampling (never a catalog id: ids are non-empty). */
export const DUMMY_ITEM = '';

/** 32-bit string hash of an item id (cyrb53's first half, public domain): the item's key in {@link olhBucketOf}. */
export function itemHash(item: string): number {
  let h1 = 0xdeadbeef ^ 0x2;
  let h2 = 0x41c6ce57 ^ 0x2;
  for (let i = 0; i < item.length; i++) {
    const ch = item.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507);
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  return h1 >>> 0;
}

/** murmur3's 32-bit finalizer: a bijective avalanche mix. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The bucket of an item (by its {@link itemHash}) for a cohort: two mixing rounds of (item, cohort), mod g. */
export function olhBucketOf(hash: number, cohort: number, g: number): number {
  return fmix32(fmix32(hash ^ Math.imul(cohort + 1, 0x9e3779b1)) + cohort) % g;
}

/**
 * The public hash family of local hashing: item → bucket in [0, g) for a cohort. Both sides
 * compute it identically; the service hashes each item once and mixes in the cohorts.
 */
export function olhBucket(cohort: number, item: string, g: number): number {
  return olhBucketOf(itemHash(item), cohort, g);
}

/** The randomized part of a report: which cohort's hash, and the randomized bucket. */
export interface WireReport {
  cohort: number;
  bucket: number;
}

export interface ReportRequest {
  v: 2;
  /** The epoch the report (and its token) belongs to. */
  epoch: number;
  /** Serialized Privacy Pass token (base64url) whose challenge is {@link tokenChallengeContext} of `epoch`. */
  token: string;
  report: WireReport;
}

export interface ReportResponse {
  accepted: true;
}

export interface IssueRequest {
  v: 2;
  epoch: number;
  /** Serialized token request (base64url). */
  request: string;
}

export interface IssueResponse {
  /** Serialized token response (base64url). */
  response: string;
}

export interface TokenKeyResponse {
  /** Issuer name used in token challenges. */
  issuerName: string;
  /** Issuer public key, RSASSA-PSS SPKI (base64url), as RFC 9578 publishes it. */
  publicKey: string;
}

/** One community of the release: public prototype and the aggregate of reports that fell in it. */
export interface ReleaseCommunity {
  id: string;
  /** Normalised mean of the community's item vectors (int8 base64, see {@link encodeVector}). */
  prototype: string;
  /** Catalog items of the community (public: the clustering runs on the public item space). */
  items: string[];
  /**
   * Estimated distinct contributors: Σ of the community's item estimates / ℓ, an unbiased
   * estimate of a lower bound on the devices with at least one recent item in the community
   * (each device holds at most ℓ items).
   */
  contributors: number;
  /** Item → estimated number of devices with it among their recent items (clipped at 0, only > 0 kept). */
  counts: Record<string, number>;
}

/** The release of one epoch: aggregates only, never a report or a record. */
export interface Release {
  v: 2;
  epoch: number;
  /** Epoch length in ms (epoch e covers [e·epochMs, (e+1)·epochMs)). */
  epochMs: number;
  /** Vector space of the prototypes (a device with another embedder cannot match). */
  embedderId: string;
  dim: number;
  /** Reports aggregated (= tokens spent in the epoch). */
  reports: number;
  /** Communities are released only with at least this many estimated contributors. */
  minContributors: number;
  /** The mechanism and the privacy guarantee per shopper per epoch. */
  ldp: LdpParams;
  /** Released communities. */
  communities: ReleaseCommunity[];
  /** Item → estimated number of devices with it among their recent items (all reports; > 0 only). */
  popularity: Record<string, number>;
}

/** Run-time state of the service's storage (health's `storage`). */
export interface StorageStatusWire {
  /** `ok`, or what fails: `full` (disk or size limit), `corrupt`, `readonly`, `io`. */
  state: 'ok' | 'full' | 'corrupt' | 'readonly' | 'io';
  /** The failing file. */
  file?: string;
  /** What failed and the fix. */
  message?: string;
  since?: string;
  refusedWrites?: number;
}

/**
 * GET `/v2/health`: 200 with `status: 'ok'`; 503 with `status: 'degraded'` while writes fail
 * (the `storage` field says why; releases are still served), 503 `not_ready` while loading.
 * Answered from memory (no database read), never rate limited.
 */
export interface HealthV2Response {
  status: 'ok' | 'degraded';
  version: 2;
  embedderId: string;
  epochMs: number;
  /** Current epoch of the service clock. */
  epoch: number;
  /** Latest published release epoch, or null. */
  latestRelease: number | null;
  ldp: LdpParams;
  minContributors: number;
  /** Reports needed in an epoch before anything is released for it. */
  minReports: number;
  /** Reports accepted after an epoch's end for this long (random delays near the end). */
  graceMs: number;
  /**
   * The item space: catalog items and their communities (0 while they are being computed); once
   * clustered, how its kNN graph was built (`exact`, `cells`, `cells+cells`, `cells+hnsw`, `hnsw`) and the
   * graph's recall@k measured on a sample of items against their exact kNN (null: not measured).
   */
  space: { items: number; dim: number; communities: number; knn?: { method: string; recall: number | null } };
  /**
   * Present while the item space's communities are computed (a first start, a changed catalog):
   * the phase (`knn` graph, then Louvain's `communities`) and the share of it done (0–1). Tokens,
   * reports and releases are served meanwhile; epochs that end are aggregated once it is done.
   */
  clustering?: { phase: 'knn' | 'communities'; share: number };
  storage: StorageStatusWire;
  /**
   * The highest epoch the service has closed (aggregated; its release, if any, published), or null;
   * `clock: 'behind'` while the host's clock is behind it (tokens and reports are then refused).
   * Absent from services that predate it.
   */
  epochs?: { closedThrough: number | null; clock: 'ok' | 'behind'; message?: string };
}

/** Every 4xx/5xx body. */
export interface ErrorV2Response {
  /**
   * `bad_request`, `token_refused` (invalid, spent or of another epoch: one answer for all),
   * `wrong_epoch`, `unauthorized` (issuance without the attester key), `not_found`, `too_large`,
   * `not_ready`, `rate_limited` (429, `Retry-After`), `storage_full` (507, `Retry-After`),
   * `storage_corrupt` / `storage_unavailable` (503, `Retry-After`), `internal`.
   */
  error: string;
  message: string;
}

/** The 32-byte Privacy Pass redemption context of an epoch: SHA-256 of `atomem-epoch:<epoch>`. */
export async function tokenChallengeContext(epoch: number): Promise<Uint8Array> {
  return new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(`atomem-epoch:${epoch}`)));
}

/** Bytes → base64url (no padding). */
export function toBase64Url(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** base64url → bytes. Throws `TypeError` on bad input. */
export function fromBase64Url(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) throw new TypeError('not base64url');
  const b64 = text.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (text.length % 4)) % 4);
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

// ——— vectors on the wire (release prototypes): int8, base64 ———

/** Quantize a (unit) vector to int8: round(v × 127), clamped. */
export function quantize(v: ArrayLike<number>): Int8Array {
  const q = new Int8Array(v.length);
  for (let i = 0; i < v.length; i++) q[i] = Math.max(-127, Math.min(127, Math.round(v[i] * 127)));
  return q;
}

/** Back to float (÷ 127). Renormalise if you need a unit vector. */
export function dequantize(q: Int8Array): Float32Array {
  const v = new Float32Array(q.length);
  for (let i = 0; i < q.length; i++) v[i] = q[i] / 127;
  return v;
}

function toBase64Std(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64Std(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** A float vector as wire text: quantized to int8, base64. */
export function encodeVector(v: ArrayLike<number>): string {
  const q = quantize(v);
  return toBase64Std(new Uint8Array(q.buffer, q.byteOffset, q.byteLength));
}

/** Wire text → int8 vector. Throws `TypeError` on bad base64. */
export function decodeInt8(b64: string): Int8Array {
  const bytes = fromBase64Std(b64);
  return new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Wire text → float vector (÷ 127). */
export function decodeVector(b64: string): Float32Array {
  return dequantize(decodeInt8(b64));
}
