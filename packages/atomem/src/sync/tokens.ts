/**
 * The device's side of Privacy Pass (RFC 9578, token type 2: publicly verifiable blind RSA,
 * `@cloudflare/privacypass-ts`): one token per report, bound to the report's epoch by the
 * challenge's redemption context. The token request is blinded, so the issuer (the index)
 * cannot link the token it later sees in a report to the issuance, and the attester (the shop,
 * which knows who asks) never sees the token.
 */
import { TOKEN_TYPES, TokenChallenge, publicVerif } from '@cloudflare/privacypass-ts';
import { ReportHttpError } from './report-client.js';
import {
  INDEX_V2_PATHS,
  fromBase64Url,
  toBase64Url,
  tokenChallengeContext,
  type IssueRequest,
  type IssueResponse,
  type TokenKeyResponse,
} from '../protocol/index-v2.js';

/** Where a device gets its token for an epoch. */
export interface TokenProvider {
  /** A serialized token (base64url) for `epoch`. Throws when the attester refuses (e.g. already one this epoch). */
  token(epoch: number): Promise<string>;
}

/** The epoch's token challenge of an issuer. */
async function epochChallenge(issuerName: string, epoch: number): Promise<TokenChallenge> {
  return new TokenChallenge(TOKEN_TYPES.BLIND_RSA.value, issuerName, await tokenChallengeContext(epoch));
}

/**
 * Blind a token request for `epoch`; `finalize` unblinds the issuer's response into the
 * serialized token. The blinding secret stays in this closure.
 */
export async function blindTokenRequest(key: TokenKeyResponse, epoch: number): Promise<{ request: string; finalize(response: string): Promise<string> }> {
  const client = new publicVerif.Client(publicVerif.BlindRSAMode.PSS);
  const req = await client.createTokenRequest(await epochChallenge(key.issuerName, epoch), fromBase64Url(key.publicKey));
  return {
    request: toBase64Url(req.serialize()),
    async finalize(response: string) {
      const token = await client.finalize(client.deserializeTokenResponse(fromBase64Url(response)));
      return toBase64Url(token.serialize());
    },
  };
}

/** Options of {@link AttesterTokenProvider}. */
export interface AttesterTokenProviderOptions {
  /** The index service root (its public token key is read from `/v2/token-key`). */
  indexUrl: string;
  /**
   * The shop's attester endpoint: it authenticates the shopper (the shop's own session, so
   * cookies go here and only here), enforces one token per shopper per epoch and forwards the
   * blinded request to the index's issuance endpoint with its attester key. Body and answer are
   * {@link IssueRequest} / {@link IssueResponse}.
   */
  attesterUrl: string;
  /** `fetch` to use. Default: global `fetch`. */
  fetch?: typeof fetch;
}

/** Tokens through the shop's attester (the RFC 9576 architecture: attester ≠ issuer). */
export class AttesterTokenProvider implements TokenProvider {
  private key: Promise<TokenKeyResponse> | undefined;
  private readonly doFetch: typeof fetch;
  constructor(private readonly opts: AttesterTokenProviderOptions) {
    this.doFetch = opts.fetch ?? ((...a) => globalThis.fetch(...a));
  }

  private tokenKey(): Promise<TokenKeyResponse> {
    this.key ??= (async () => {
      const res = await this.doFetch(`${this.opts.indexUrl.replace(/\/+$/, '')}${INDEX_V2_PATHS.tokenKey}`, {
        credentials: 'omit',
        cache: 'no-store',
        referrerPolicy: 'no-referrer',
      });
      if (!res.ok) throw new Error(`token key: HTTP ${res.status}`);
      return (await res.json()) as TokenKeyResponse;
    })();
    this.key.catch(() => (this.key = undefined));
    return this.key;
  }

  async token(epoch: number): Promise<string> {
    const blind = await blindTokenRequest(await this.tokenKey(), epoch);
    const body: IssueRequest = { v: 2, epoch, request: blind.request };
    // why: the attester IS the shop's server (same origin) and authenticates the shopper by the shop's own
    // session cookie; 'same-origin' never sends it anywhere else
    const res = await this.doFetch(this.opts.attesterUrl, {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok)
      throw new ReportHttpError(
        `attester refused a token for epoch ${epoch}: HTTP ${res.status} ${text.slice(0, 200)}`,
        res.status,
        res.status === 429 ? 'token_limit' : `attester_${res.status}`,
        res.status >= 500,
      );
    return blind.finalize((JSON.parse(text) as IssueResponse).response);
  }
}
