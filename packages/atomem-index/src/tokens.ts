/**
 * The index's side of Privacy Pass (RFC 9578 token type 2, publicly verifiable blind RSA,
 * `@cloudflare/privacypass-ts`): it issues blind signatures to the attester (the shop's
 * server) and verifies tokens in reports. Spending (one report per token) is the report
 * store's job: it keeps the nonce of every redeemed token of the open epochs as a tombstone.
 */
import { constants, createPrivateKey, createPublicKey, privateDecrypt, publicEncrypt, webcrypto, type KeyObject } from 'node:crypto';
import { TOKEN_TYPES, Token, TokenChallenge, publicVerif } from '@cloudflare/privacypass-ts';
import { fromBase64Url, toBase64Url, tokenChallengeContext, type TokenKeyResponse } from 'atomem/protocol';

const { Issuer, BlindRSAMode, TokenRequest, TokenResponse, getPublicKeyBytes } = publicVerif;

/** What the service needs from a token scheme (kept small so simulated devices use the same path). */
export interface TokenIssuer {
  /** Public key and issuer name (published at `/v2/token-key`). */
  key(): TokenKeyResponse;
  /** Blind-sign a serialized token request; throws `TypeError` on a malformed one. */
  issue(request: string): Promise<string>;
  /**
   * Check a serialized token for `epoch`: its signature, key id and epoch challenge. Returns
   * its nonce (hex: the spent-token tombstone) or undefined when invalid.
   */
  verify(token: string, epoch: number): Promise<string | undefined>;
}

/** A blind RSA key pair as stored in the data dir (PKCS#8 / SPKI, base64url). */
export interface StoredIssuerKey {
  privateKey: string;
  publicKey: string;
}

const RSA_PARAMS = { name: 'RSA-PSS', hash: 'SHA-384' } as const;

/** Make a fresh 2048-bit issuer key (RFC 9578 type 2 uses RSASSA-PSS with SHA-384, 2048 bits). */
export async function generateIssuerKey(): Promise<StoredIssuerKey> {
  const pair = (await Issuer.generateKey(BlindRSAMode.PSS, { modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]) })) as CryptoKeyPair;
  const priv = new Uint8Array(await webcrypto.subtle.exportKey('pkcs8', pair.privateKey as webcrypto.CryptoKey));
  const pub = new Uint8Array(await webcrypto.subtle.exportKey('spki', pair.publicKey as webcrypto.CryptoKey));
  return { privateKey: toBase64Url(priv), publicKey: toBase64Url(pub) };
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

function equal(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** {@link TokenIssuer} over Privacy Pass blind RSA. */
export class PrivacyPassIssuer implements TokenIssuer {
  private constructor(
    private readonly issuer: InstanceType<typeof Issuer>,
    private readonly published: TokenKeyResponse,
    private readonly keyId: Uint8Array,
    private readonly rawKeys: { priv: KeyObject; pub: KeyObject },
  ) {}

  /** Load a stored key (see {@link generateIssuerKey}) under `issuerName`. */
  static async load(stored: StoredIssuerKey, issuerName: string): Promise<PrivacyPassIssuer> {
    const priv = await webcrypto.subtle.importKey('pkcs8', fromBase64Url(stored.privateKey), RSA_PARAMS, true, ['sign']);
    const pub = await webcrypto.subtle.importKey('spki', fromBase64Url(stored.publicKey), RSA_PARAMS, true, ['verify']);
    const issuer = new Issuer(BlindRSAMode.PSS, issuerName, priv as unknown as CryptoKey, pub as unknown as CryptoKey);
    const publicKey = toBase64Url(await getPublicKeyBytes(pub as unknown as CryptoKey));
    const rawKeys = {
      priv: createPrivateKey({ key: Buffer.from(fromBase64Url(stored.privateKey)), format: 'der', type: 'pkcs8' }),
      pub: createPublicKey({ key: Buffer.from(fromBase64Url(stored.publicKey)), format: 'der', type: 'spki' }),
    };
    return new PrivacyPassIssuer(issuer, { issuerName, publicKey }, await issuer.tokenKeyID(), rawKeys);
  }

  key(): TokenKeyResponse {
    return { ...this.published };
  }

  async issue(request: string): Promise<string> {
    let req;
    try {
      req = TokenRequest.deserialize(TOKEN_TYPES.BLIND_RSA, fromBase64Url(request));
    } catch (e) {
      throw new TypeError(`malformed token request: ${(e as Error).message}`);
    }
    if (req.truncatedTokenKeyId !== this.keyId[this.keyId.length - 1]) throw new TypeError('token request is for another issuer key');
    // RFC 9474 BlindSign = RSASP1 (raw RSA with the private key) + the RSAVP1 check against
    // faults. why: the library's pure-JS bigint signing takes ~0.6 s per token; OpenSSL's raw
    // RSA (no padding) computes the same value in ~1 ms.
    let sig: Buffer;
    try {
      sig = privateDecrypt({ key: this.rawKeys.priv, padding: constants.RSA_NO_PADDING }, Buffer.from(req.blindedMsg));
    } catch (e) {
      throw new TypeError(`malformed token request: ${(e as Error).message}`);
    }
    const back = publicEncrypt({ key: this.rawKeys.pub, padding: constants.RSA_NO_PADDING }, sig);
    if (!back.equals(Buffer.from(req.blindedMsg))) throw new Error('blind signature failed its verification');
    return toBase64Url(new TokenResponse(new Uint8Array(sig)).serialize());
  }

  async verify(token: string, epoch: number): Promise<string | undefined> {
    let tok: Token;
    try {
      tok = Token.deserialize(TOKEN_TYPES.BLIND_RSA, fromBase64Url(token));
    } catch {
      return undefined;
    }
    const challenge = new TokenChallenge(TOKEN_TYPES.BLIND_RSA.value, this.published.issuerName, await tokenChallengeContext(epoch));
    const digest = new Uint8Array(await webcrypto.subtle.digest('SHA-256', challenge.serialize()));
    if (!equal(tok.authInput.challengeDigest, digest) || !equal(tok.authInput.tokenKeyId, this.keyId)) return undefined;
    try {
      if (!(await this.issuer.verify(tok))) return undefined;
    } catch {
      return undefined;
    }
    return hex(tok.authInput.nonce);
  }
}
