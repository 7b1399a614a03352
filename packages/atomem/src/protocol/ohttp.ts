/**
 * Oblivious HTTP (RFC 9458) as atomem uses it: the device encapsulates its report request to the
 * index's gateway key and sends it through a relay run by another party. The relay sees who sends
 * (the device's address) but not what; the gateway (the index) sees what but not who.
 *
 * One suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (HPKE, RFC 9180, through
 * `@hpke/core`, WebCrypto in browsers and Node); the inner request is binary HTTP (RFC 9292,
 * through `bhttp-js`). This file holds the wire format on both sides: key configurations
 * (`application/ohttp-keys`), request and response encapsulation (RFC 9458 sections 3, 4.3, 4.4),
 * checked against the RFC's Appendix A vector (packages/atomem/test/ohttp.test.ts).
 */
import { Aes128Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from '@hpke/core';
import { BHttpDecoder, BHttpEncoder } from 'bhttp-js';

/** Media types of RFC 9458. */
export const OHTTP_MEDIA = Object.freeze({ request: 'message/ohttp-req', response: 'message/ohttp-res', keys: 'application/ohttp-keys' });

/** The gateway's routes on the index service. */
export const OHTTP_GATEWAY_PATHS = Object.freeze({ gateway: '/v2/ohttp', keys: '/v2/ohttp-keys' });

/** The relay's routes (`atomem-relay`): encapsulated requests in, the gateway's key configuration (as the relay fetched it) out. */
export const OHTTP_RELAY_PATHS = Object.freeze({ relay: '/relay', keys: '/ohttp-keys', health: '/health' });

/** Largest encapsulated request a relay or gateway takes (a report is ~300 bytes of JSON). */
export const OHTTP_MAX_REQUEST_BYTES = 8192;

/** HPKE identifiers of the one suite (RFC 9180 section 7). */
export const OHTTP_SUITE = Object.freeze({ kem: 0x0020, kdf: 0x0001, aead: 0x0001 });

const REQUEST_LABEL = 'message/bhttp request';
const RESPONSE_LABEL = 'message/bhttp response';
const NPK = 32; // X25519 public key
const NK = 16; // AES-128-GCM key
const NN = 12; // AES-128-GCM nonce
const HDR = 7;

/** A key configuration (RFC 9458 section 3.1). */
export interface KeyConfig {
  keyId: number;
  kemId: number;
  publicKey: Uint8Array;
  /** (KDF, AEAD) pairs the gateway accepts. */
  symmetric: { kdfId: number; aeadId: number }[];
}

/** A malformed or undecryptable OHTTP message, a key configuration atomem cannot use. */
export class OhttpError extends Error {
  override name = 'OhttpError';
}

let suite: CipherSuite | undefined;
function hpke(): CipherSuite {
  suite ??= new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });
  return suite;
}

const u16 = (b: Uint8Array, at: number) => (b[at] << 8) | b[at + 1];
const put16 = (b: Uint8Array, at: number, v: number) => {
  b[at] = v >> 8;
  b[at + 1] = v & 0xff;
};
function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
const bytes = (b: ArrayBuffer | Uint8Array) => (b instanceof Uint8Array ? b : new Uint8Array(b));
function fromB64Url(s: string): Uint8Array {
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/') + '='.repeat((4 - (s.length % 4)) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
/** A copy in a fresh ArrayBuffer (WebCrypto's types want a plain ArrayBuffer). */
const buf = (b: Uint8Array): ArrayBuffer => b.slice().buffer as ArrayBuffer;

/** Encode one key configuration. */
export function encodeKeyConfig(c: KeyConfig): Uint8Array {
  if (!Number.isInteger(c.keyId) || c.keyId < 0 || c.keyId > 255) throw new OhttpError('key id must be an integer in [0, 255]');
  const out = new Uint8Array(1 + 2 + c.publicKey.length + 2 + 4 * c.symmetric.length);
  out[0] = c.keyId;
  put16(out, 1, c.kemId);
  out.set(c.publicKey, 3);
  let at = 3 + c.publicKey.length;
  put16(out, at, 4 * c.symmetric.length);
  at += 2;
  for (const s of c.symmetric) {
    put16(out, at, s.kdfId);
    put16(out, at + 2, s.aeadId);
    at += 4;
  }
  return out;
}

/** Decode one key configuration of the X25519 KEM (the only KEM atomem speaks). */
export function decodeKeyConfig(b: Uint8Array): KeyConfig {
  if (b.length < 3) throw new OhttpError('key configuration is truncated');
  const kemId = u16(b, 1);
  if (kemId !== OHTTP_SUITE.kem) throw new OhttpError(`key configuration has KEM 0x${kemId.toString(16)}; atomem speaks DHKEM(X25519, HKDF-SHA256) only`);
  if (b.length < 3 + NPK + 2) throw new OhttpError('key configuration is truncated');
  const n = u16(b, 3 + NPK);
  if (n === 0 || n % 4 !== 0 || b.length !== 3 + NPK + 2 + n) throw new OhttpError('key configuration has a malformed algorithm list');
  const symmetric: KeyConfig['symmetric'] = [];
  for (let at = 3 + NPK + 2; at < b.length; at += 4) symmetric.push({ kdfId: u16(b, at), aeadId: u16(b, at + 2) });
  return { keyId: b[0], kemId, publicKey: b.slice(3, 3 + NPK), symmetric };
}

/** `application/ohttp-keys`: each configuration prefixed by its 2-byte length (RFC 9458 section 3.2). */
export function encodeKeys(configs: KeyConfig[]): Uint8Array {
  return concat(
    ...configs.map((c) => {
      const e = encodeKeyConfig(c);
      const len = new Uint8Array(2);
      put16(len, 0, e.length);
      return concat(len, e);
    }),
  );
}

/** The configurations of an `application/ohttp-keys` body that atomem can use (X25519 with HKDF-SHA256 + AES-128-GCM). */
export function decodeKeys(b: Uint8Array): KeyConfig[] {
  const out: KeyConfig[] = [];
  for (let at = 0; at < b.length; ) {
    if (at + 2 > b.length) throw new OhttpError('ohttp-keys: truncated length');
    const n = u16(b, at);
    if (at + 2 + n > b.length) throw new OhttpError('ohttp-keys: truncated key configuration');
    const raw = b.subarray(at + 2, at + 2 + n);
    at += 2 + n;
    if (raw.length >= 3 && u16(raw, 1) !== OHTTP_SUITE.kem) continue;
    const c = decodeKeyConfig(raw);
    if (c.symmetric.some((s) => s.kdfId === OHTTP_SUITE.kdf && s.aeadId === OHTTP_SUITE.aead)) out.push(c);
  }
  return out;
}

function header(keyId: number): Uint8Array {
  const h = new Uint8Array(HDR);
  h[0] = keyId;
  put16(h, 1, OHTTP_SUITE.kem);
  put16(h, 3, OHTTP_SUITE.kdf);
  put16(h, 5, OHTTP_SUITE.aead);
  return h;
}
const info = (label: string, hdr: Uint8Array) => concat(new TextEncoder().encode(label), new Uint8Array([0]), hdr);

/** HKDF-SHA256 Extract then Expand (RFC 5869) with WebCrypto. */
async function hkdf(salt: Uint8Array, ikm: Uint8Array, label: string, length: number): Promise<Uint8Array> {
  const key = await crypto.subtle.importKey('raw', buf(ikm), 'HKDF', false, ['deriveBits']);
  return bytes(await crypto.subtle.deriveBits({ name: 'HKDF', hash: 'SHA-256', salt: buf(salt), info: buf(new TextEncoder().encode(label)) }, key, length * 8));
}

async function aesGcm(op: 'encrypt' | 'decrypt', key: Uint8Array, nonce: Uint8Array, data: Uint8Array): Promise<Uint8Array> {
  const k = await crypto.subtle.importKey('raw', buf(key), 'AES-GCM', false, [op]);
  return bytes(await crypto.subtle[op]({ name: 'AES-GCM', iv: buf(nonce) }, k, buf(data)));
}

/** aead_key and aead_nonce of a response (RFC 9458 section 4.4). */
async function responseKeys(secret: Uint8Array, enc: Uint8Array, nonce: Uint8Array) {
  const salt = concat(enc, nonce);
  return { key: await hkdf(salt, secret, 'key', NK), nonce: await hkdf(salt, secret, 'nonce', NN) };
}

/** The client's side: one encapsulated request, and the means to open its response. */
export interface ClientExchange {
  /** `hdr || enc || ct`, the body of a `message/ohttp-req`. */
  request: Uint8Array;
  /** Open the gateway's `message/ohttp-res` body (throws {@link OhttpError} if it does not authenticate). */
  openResponse(body: Uint8Array): Promise<Uint8Array>;
}

/**
 * Encapsulate `message` (binary HTTP) to the gateway's key configuration. `ephemeral` fixes the
 * HPKE ephemeral key pair (test vectors only).
 */
export async function encapsulateRequest(config: KeyConfig, message: Uint8Array, ephemeral?: CryptoKeyPair): Promise<ClientExchange> {
  if (config.kemId !== OHTTP_SUITE.kem || !config.symmetric.some((s) => s.kdfId === OHTTP_SUITE.kdf && s.aeadId === OHTTP_SUITE.aead))
    throw new OhttpError('the gateway key configuration offers no suite atomem speaks (X25519, HKDF-SHA256, AES-128-GCM)');
  const hdr = header(config.keyId);
  const s = hpke();
  const ctx = await s.createSenderContext({
    recipientPublicKey: await s.kem.deserializePublicKey(buf(config.publicKey)),
    info: buf(info(REQUEST_LABEL, hdr)),
    ...(ephemeral ? { ekm: ephemeral } : {}),
  });
  const enc = bytes(ctx.enc);
  const ct = bytes(await ctx.seal(buf(message)));
  const secret = bytes(await ctx.export(buf(new TextEncoder().encode(RESPONSE_LABEL)), Math.max(NN, NK)));
  return {
    request: concat(hdr, enc, ct),
    async openResponse(body) {
      const n = Math.max(NN, NK);
      if (body.length < n + 16) throw new OhttpError('encapsulated response is truncated');
      const k = await responseKeys(secret, enc, body.subarray(0, n));
      try {
        return await aesGcm('decrypt', k.key, k.nonce, body.subarray(n));
      } catch {
        throw new OhttpError('encapsulated response does not authenticate');
      }
    },
  };
}

/** The gateway's side of one request: the inner message, and the means to seal its response. */
export interface GatewayExchange {
  message: Uint8Array;
  /** `response_nonce || ct`, the body of a `message/ohttp-res`. `nonce` fixes the response nonce (test vectors only). */
  sealResponse(response: Uint8Array, nonce?: Uint8Array): Promise<Uint8Array>;
}

/** A gateway key: the private key and its configuration. */
export class GatewayKey {
  private constructor(
    readonly config: KeyConfig,
    private readonly pair: CryptoKeyPair,
  ) {}

  /** A key from its 32-byte X25519 private key. */
  static async fromPrivateKey(keyId: number, privateKey: Uint8Array): Promise<GatewayKey> {
    if (privateKey.length !== 32) throw new OhttpError('an OHTTP gateway private key is 32 bytes (X25519)');
    const kem = hpke().kem;
    const sk = await kem.deserializePrivateKey(buf(privateKey));
    // why: an X25519 private key's JWK carries its public key (`x`)
    const jwk = await crypto.subtle.exportKey('jwk', sk);
    if (typeof jwk.x !== 'string') throw new OhttpError('the X25519 private key did not export its public key');
    const publicKey = fromB64Url(jwk.x);
    const pk = await kem.deserializePublicKey(buf(publicKey));
    return new GatewayKey(
      { keyId, kemId: OHTTP_SUITE.kem, publicKey, symmetric: [{ kdfId: OHTTP_SUITE.kdf, aeadId: OHTTP_SUITE.aead }] },
      { privateKey: sk, publicKey: pk },
    );
  }

  /** A fresh random private key (32 bytes from the CSPRNG). */
  static randomPrivateKey(): Uint8Array {
    return crypto.getRandomValues(new Uint8Array(32));
  }

  /** This key's `application/ohttp-keys` body. */
  keys(): Uint8Array {
    return encodeKeys([this.config]);
  }

  /** Decapsulate a `message/ohttp-req` body (throws {@link OhttpError}: wrong key id or suite, truncated, does not authenticate). */
  async decapsulate(body: Uint8Array): Promise<GatewayExchange> {
    if (body.length < HDR + NPK + 16) throw new OhttpError('encapsulated request is truncated');
    const hdr = body.subarray(0, HDR);
    if (hdr[0] !== this.config.keyId) throw new OhttpError(`encapsulated request names key ${hdr[0]}; this gateway has key ${this.config.keyId}`);
    if (u16(hdr, 1) !== OHTTP_SUITE.kem || u16(hdr, 3) !== OHTTP_SUITE.kdf || u16(hdr, 5) !== OHTTP_SUITE.aead)
      throw new OhttpError('encapsulated request uses a suite this gateway does not accept');
    const enc = body.slice(HDR, HDR + NPK);
    const s = hpke();
    let message: Uint8Array;
    let secret: Uint8Array;
    try {
      const ctx = await s.createRecipientContext({ recipientKey: this.pair, enc: buf(enc), info: buf(info(REQUEST_LABEL, hdr)) });
      message = bytes(await ctx.open(buf(body.subarray(HDR + NPK))));
      secret = bytes(await ctx.export(buf(new TextEncoder().encode(RESPONSE_LABEL)), Math.max(NN, NK)));
    } catch {
      throw new OhttpError('encapsulated request does not authenticate');
    }
    return {
      message,
      async sealResponse(response, nonce) {
        const n = nonce ?? crypto.getRandomValues(new Uint8Array(Math.max(NN, NK)));
        const k = await responseKeys(secret, enc, n);
        return concat(n, await aesGcm('encrypt', k.key, k.nonce, response));
      },
    };
  }
}

/** Binary HTTP (RFC 9292, known-length) of a fetch `Request`. */
export function encodeBinaryRequest(req: Request): Promise<Uint8Array> {
  return new BHttpEncoder().encodeRequest(req);
}
/** A fetch `Request` from binary HTTP (throws on a malformed message). */
export function decodeBinaryRequest(b: Uint8Array): Request {
  return new BHttpDecoder().decodeRequest(b);
}
/** Binary HTTP of a fetch `Response`. */
export function encodeBinaryResponse(res: Response): Promise<Uint8Array> {
  return new BHttpEncoder().encodeResponse(res);
}
/** A fetch `Response` from binary HTTP. */
export function decodeBinaryResponse(b: Uint8Array): Response {
  return new BHttpDecoder().decodeResponse(b);
}
