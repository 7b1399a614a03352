// Oblivious HTTP (RFC 9458) as the device and the index gateway speak it (src/protocol/ohttp.ts):
// checked byte for byte against the RFC's Appendix A example (a public specification vector,
// not a live key), then round trips, tampering and key configurations.
import { describe, expect, it } from 'vitest';
import { CipherSuite, DhkemX25519HkdfSha256, HkdfSha256, Aes128Gcm } from '@hpke/core';
import {
  GatewayKey,
  OhttpError,
  decodeBinaryRequest,
  decodeKeyConfig,
  decodeKeys,
  encapsulateRequest,
  encodeBinaryRequest,
  encodeKeyConfig,
  encodeKeys,
} from '../src/protocol/ohttp.js';

const hex = (s: string) => Uint8Array.from(s.match(/../g) ?? [], (b) => Number.parseInt(b, 16));
const toHex = (b: Uint8Array) => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');

/** RFC 9458, Appendix A. */
const A = {
  skR: '3c168975674b2fa8e465970b79c8dcf09f1c741626480bd4c6162fc5b6a98e1a',
  pkR: '31e1f05a740102115220e9af918f738674aec95f54db6e04eb705aae8e798155',
  keyConfig: '01002031e1f05a740102115220e9af918f738674aec95f54db6e04eb705aae8e79815500080001000100010003',
  request: '00034745540568747470730b6578616d706c652e636f6d012f',
  skE: 'bc51d5e930bda26589890ac7032f70ad12e4ecb37abb1b65b1256c9c48999c73',
  pkE: '4b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b472',
  encapsulatedRequest:
    '010020000100014b28f881333e7c164ffc499ad9796f877f4e1051ee6d31bad19dec96c208b4726374e469135906992e1268c594d2a10c695d858c40a026e7965e7d86b83dd440b2c0185204b4d63525',
  response: '0140c8',
  responseNonce: 'c789e7151fcba46158ca84b04464910d',
  encapsulatedResponse: 'c789e7151fcba46158ca84b04464910d86f9013e404feea014e7be4a441f234f857fbd',
};

async function ephemeral(): Promise<CryptoKeyPair> {
  const kem = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() }).kem;
  return {
    privateKey: await kem.importKey('raw', hex(A.skE).buffer as ArrayBuffer, false),
    publicKey: await kem.importKey('raw', hex(A.pkE).buffer as ArrayBuffer, true),
  };
}

describe('RFC 9458 Appendix A', () => {
  it('the key configuration: decoded into its parts, derived from the private key, encoded back to the same bytes', async () => {
    const c = decodeKeyConfig(hex(A.keyConfig));
    expect(c.keyId).toBe(1);
    expect(c.kemId).toBe(0x20);
    expect(toHex(c.publicKey)).toBe(A.pkR);
    expect(c.symmetric).toEqual([
      { kdfId: 1, aeadId: 1 },
      { kdfId: 1, aeadId: 3 },
    ]);
    expect(toHex(encodeKeyConfig(c))).toBe(A.keyConfig);
    const key = await GatewayKey.fromPrivateKey(1, hex(A.skR));
    expect(toHex(key.config.publicKey)).toBe(A.pkR);
  });

  it('the client encapsulates the request to the published bytes (fixed ephemeral key) and opens the published response', async () => {
    const ex = await encapsulateRequest(decodeKeyConfig(hex(A.keyConfig)), hex(A.request), await ephemeral());
    expect(toHex(ex.request)).toBe(A.encapsulatedRequest);
    expect(toHex(await ex.openResponse(hex(A.encapsulatedResponse)))).toBe(A.response);
  });

  it('the gateway decapsulates the published request and seals the published response (fixed nonce)', async () => {
    const key = await GatewayKey.fromPrivateKey(1, hex(A.skR));
    const ex = await key.decapsulate(hex(A.encapsulatedRequest));
    expect(toHex(ex.message)).toBe(A.request);
    const req = decodeBinaryRequest(ex.message);
    expect(req.method).toBe('GET');
    expect(req.url).toBe('https://example.com/');
    expect(toHex(await ex.sealResponse(hex(A.response), hex(A.responseNonce)))).toBe(A.encapsulatedResponse);
  });
});

describe('round trips and refusals', () => {
  it('a binary HTTP POST goes through a fresh key and back; each encapsulation differs', async () => {
    const key = await GatewayKey.fromPrivateKey(7, GatewayKey.randomPrivateKey());
    const [config] = decodeKeys(key.keys());
    expect(config.keyId).toBe(7);
    const body = JSON.stringify({ v: 2, epoch: 3, token: 'abc', report: { cohort: 1, bucket: 2 } });
    const inner = await encodeBinaryRequest(
      new Request('https://index.example/v2/reports', { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
    );
    const a = await encapsulateRequest(config, inner);
    const b = await encapsulateRequest(config, inner);
    expect(toHex(a.request)).not.toBe(toHex(b.request));
    expect(new TextDecoder().decode(a.request)).not.toContain('cohort');
    const ex = await key.decapsulate(a.request);
    const req = decodeBinaryRequest(ex.message);
    expect(new URL(req.url).pathname).toBe('/v2/reports');
    expect(await req.text()).toBe(body);
    const sealed = await ex.sealResponse(new Uint8Array([1, 2, 3]));
    expect([...(await a.openResponse(sealed))]).toEqual([1, 2, 3]);
    // the other exchange's context cannot open it
    await expect(b.openResponse(sealed)).rejects.toThrow(OhttpError);
  });

  it('refuses a tampered request, another key id, a truncated message, a foreign KEM', async () => {
    const key = await GatewayKey.fromPrivateKey(1, GatewayKey.randomPrivateKey());
    const ex = await encapsulateRequest(key.config, new Uint8Array([0, 1, 2, 3]));
    const bad = ex.request.slice();
    bad[bad.length - 1] ^= 1;
    await expect(key.decapsulate(bad)).rejects.toThrow(/does not authenticate/);
    const other = ex.request.slice();
    other[0] = 2;
    await expect(key.decapsulate(other)).rejects.toThrow(/names key 2/);
    await expect(key.decapsulate(ex.request.subarray(0, 20))).rejects.toThrow(/truncated/);
    const p256 = encodeKeys([{ keyId: 3, kemId: 0x10, publicKey: new Uint8Array(65), symmetric: [{ kdfId: 1, aeadId: 1 }] }]);
    expect(decodeKeys(p256)).toEqual([]);
    expect(() => decodeKeyConfig(encodeKeyConfig({ keyId: 3, kemId: 0x10, publicKey: new Uint8Array(65), symmetric: [{ kdfId: 1, aeadId: 1 }] }))).toThrow(
      /X25519/,
    );
  });
});
