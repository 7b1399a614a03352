/**
 * Wire protocol v1 of the shared community index: every request and response body, the
 * paths, the limits and the vector encoding. The service (`src/server/`) and the sync client
 * (`src/sync/`) both import this one file; nothing else defines the wire.
 *
 * Privacy rules the shapes encode:
 * - A memory travels under a fresh random id (never a user or device id) with the SHA-256 hash
 *   of a secret deletion token that only the device knows; deleting needs the token itself.
 * - Vectors travel quantized to int8 (unit vector × 127, rounded) with their embedder id.
 * - Item ids travel only at privacy level `items`.
 * - No field identifies a user, a device or a session.
 */

/** Protocol version, also the path prefix (`/v1/…`). */
export const INDEX_PROTOCOL_VERSION = 1;

/**
 * Header carrying the anonymous rate-limit token: random per page session, never derived from
 * a user or device (the service buckets requests by it; without it, one shared bucket).
 */
export const CLIENT_HEADER = 'x-atomem-client';

/** Endpoints. Bodies are JSON; health and metrics are GET, the rest POST. */
export const INDEX_PATHS = {
  /** GET → {@link HealthResponse}; 200 once the service is ready. */
  health: '/v1/health',
  /** GET → {@link MetricsResponse}. */
  metrics: '/v1/metrics',
  /** POST {@link UpsertRequest} → {@link UpsertResponse}. */
  upsert: '/v1/memories',
  /** POST {@link DeleteRequest} → {@link DeleteResponse}. */
  delete: '/v1/memories/delete',
  /** POST {@link CommunitiesRequest} → {@link CommunitiesResponse}. */
  communities: '/v1/communities',
} as const;

/** Hard limits; the service answers 413 / 400 beyond them. */
export const INDEX_LIMITS = {
  /** Memories per upsert, deletions per delete. */
  maxBatch: 256,
  /** Own ids per communities query. */
  maxIds: 512,
  /** Request body size in bytes. */
  maxBodyBytes: 1_048_576,
  /** Vector dimension. */
  maxDim: 2048,
  /** Item ids per memory (level `items`). */
  maxItems: 64,
  /** Length of ids, item ids and embedder ids. */
  maxIdLength: 128,
} as const;

/** Ids: 8–128 chars of `[A-Za-z0-9_-]` (the client uses 22-char base64url of 16 random bytes). */
export const ID_PATTERN = '^[A-Za-z0-9_-]{8,128}$';
/** Deletion token hashes: SHA-256, lowercase hex. */
export const TOKEN_HASH_PATTERN = '^[0-9a-f]{64}$';
/** Deletion tokens: 16–128 chars of `[A-Za-z0-9_-]`. */
export const TOKEN_PATTERN = '^[A-Za-z0-9_-]{16,128}$';

/** One anonymized memory as uploaded. */
export interface WireMemory {
  /** Fresh random id of this shared copy. */
  id: string;
  /** SHA-256 (hex) of the secret deletion token. */
  tokenHash: string;
  /** Embedder (vector space) id; the service refuses ids it was not configured for. */
  embedderId: string;
  /** Vector dimension (the decoded length of `vector`). */
  dim: number;
  /** int8 vector, base64 (see {@link encodeVector}). */
  vector: string;
  /** Catalog item ids of the memory's interactions (privacy level `items` only). */
  items?: string[];
}

export interface UpsertRequest {
  v: 1;
  memories: WireMemory[];
}

export interface UpsertResponse {
  /** Memories stored (new or replaced). Durable when this response is sent. */
  accepted: number;
}

export interface DeleteRequest {
  v: 1;
  /** Each shared copy with its deletion token (the service checks it against the stored hash). */
  deletions: { id: string; token: string }[];
}

export interface DeleteResponse {
  /** Copies deleted (unknown ids count as already deleted and are not an error). */
  deleted: number;
}

export interface CommunitiesRequest {
  v: 1;
  embedderId: string;
  /** The asker's own shared ids. */
  ids: string[];
}

/** A community as released (only with at least k members). */
export interface WireCommunity {
  id: string;
  /** Members in the community (≥ k). */
  size: number;
  /** Prototype (normalised mean) vector, int8 base64. */
  prototype: string;
  /** Member vectors (not the asker's own), int8 base64, at most the service's cap. */
  members: string[];
  /** Noisy item counts of the members (level `items` uploads only), Laplace scale in {@link HealthResponse.itemNoise}. */
  items?: Record<string, number>;
  /** Items of members that share items with the asker's memories (noisy), when released. */
  related?: Record<string, number>;
  /** Which of the asker's ids are in this community. */
  ownIds: string[];
}

export interface CommunitiesResponse {
  communities: WireCommunity[];
}

/** 200 with `status: 'ok'`; 503 with `status: 'degraded'` while writes fail (see `storage`). */
export interface HealthResponse {
  status: 'ok' | 'degraded';
  version: 1;
  /** Embedder ids accepted. */
  embedderIds: string[];
  memories: number;
  /** Released (≥ k) communities. */
  communities: number;
  /** k of k-anonymity. */
  minCommunitySize: number;
  /** Laplace scale b of item-count noise. */
  itemNoise: number;
  /** Storage state (`ok`, or what fails and the fix); see the v2 protocol's `StorageStatusWire`. */
  storage?: { state: string; file?: string; message?: string; since?: string; refusedWrites?: number };
}

export interface MetricsResponse {
  memories: number;
  communities: number;
  requests: Record<string, number>;
  rejected: Record<string, number>;
  uptimeSeconds: number;
  rssBytes: number;
}

/** Every 4xx/5xx body. */
export interface ErrorResponse {
  /**
   * Machine-readable code: `bad_request`, `wrong_dimension`, `unknown_embedder`, `forbidden`
   * (wrong deletion token), `conflict` (id exists with another token hash), `too_large`,
   * `rate_limited`, `not_ready`, `not_found`, `unsupported_media_type`, `internal`.
   */
  error: string;
  /** Human-readable explanation naming the bad field. */
  message: string;
}

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

function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function fromBase64(b64: string): Uint8Array {
  const s = atob(b64);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** A float vector as wire text: quantized to int8, base64. */
export function encodeVector(v: ArrayLike<number>): string {
  const q = quantize(v);
  return toBase64(new Uint8Array(q.buffer, q.byteOffset, q.byteLength));
}

/** Wire text → int8 vector. Throws `TypeError` on bad base64. */
export function decodeInt8(b64: string): Int8Array {
  const bytes = fromBase64(b64);
  return new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Wire text → float vector (÷ 127). */
export function decodeVector(b64: string): Float32Array {
  return dequantize(decodeInt8(b64));
}

/** SHA-256 hex of a deletion token (Web Crypto: browsers, workers and Node 20). */
export async function hashToken(token: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(token));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
