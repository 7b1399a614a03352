// The reference attester (packages/atomem-index/src/attester.ts) with a REAL Privacy Pass issuer:
// per-account per-epoch budget (also under parallel requests), no tokens for anonymous visitors
// unless the shop opens a pool, epochs, refunds of failed issuance, the fastify route's headers,
// and the HTTP path through a real index service (issuance for the next epoch accepted).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { Attester, AttesterError, issueInProcess, issueViaIndex, registerAttester } from '../src/attester.js';
import { PrivacyPassIssuer, generateIssuerKey } from '../src/tokens.js';
import { createIndexService } from '../src/service.js';
import { blindTokenRequest } from 'atomem/engine';
import type { TokenKeyResponse } from 'atomem/protocol';

const issuerP = (async () => PrivacyPassIssuer.load(await generateIssuerKey(), 'attester-test'))();
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

async function request(key: TokenKeyResponse, epoch: number) {
  const b = await blindTokenRequest(key, epoch);
  return { body: { v: 2 as const, epoch, request: b.request }, finalize: b.finalize };
}

describe('reference attester', () => {
  it('gives one account at most its budget per epoch, even to 20 parallel requests; a token verifies for its epoch', async () => {
    const issuer = await issuerP;
    let cur = 100;
    const a = new Attester({ issue: issueInProcess(issuer), epoch: () => cur });
    const reqs = await Promise.all(Array.from({ length: 20 }, () => request(issuer.key(), 101)));
    const out = await Promise.allSettled(reqs.map((r) => a.attest('alice', r.body)));
    const ok = out.filter((o) => o.status === 'fulfilled');
    expect(ok).toHaveLength(1);
    for (const o of out) if (o.status === 'rejected') expect(o.reason).toMatchObject({ status: 429, code: 'token_limit' });
    const i = out.findIndex((o) => o.status === 'fulfilled');
    const token = await reqs[i].finalize((ok[0] as PromiseFulfilledResult<{ response: string }>).value.response);
    expect(await issuer.verify(token, 101)).toBeTypeOf('string');
    expect(await issuer.verify(token, 100)).toBeUndefined();
    // another account, and the same account for the current epoch, each get theirs
    await expect(a.attest('bob', (await request(issuer.key(), 101)).body)).resolves.toHaveProperty('response');
    await expect(a.attest('alice', (await request(issuer.key(), 100)).body)).resolves.toHaveProperty('response');
    // the next epoch opens a new budget
    cur = 101;
    await expect(a.attest('alice', (await request(issuer.key(), 102)).body)).resolves.toHaveProperty('response');
    await expect(a.attest('alice', (await request(issuer.key(), 101)).body)).rejects.toMatchObject({ status: 429 });
  });

  it('perAccount = 3 gives exactly 3; anonymous visitors get none by default, a bounded pool when the shop opens one', async () => {
    const issuer = await issuerP;
    const three = new Attester({ issue: issueInProcess(issuer), epoch: () => 5, perAccount: 3 });
    const got = await Promise.allSettled(Array.from({ length: 6 }, async () => three.attest('carol', (await request(issuer.key(), 5)).body)));
    expect(got.filter((g) => g.status === 'fulfilled')).toHaveLength(3);
    await expect(three.attest(undefined, (await request(issuer.key(), 5)).body)).rejects.toMatchObject({ status: 403, code: 'no_account' });
    const pool = new Attester({ issue: issueInProcess(issuer), epoch: () => 5, anonymousPerEpoch: 2 });
    const anon = await Promise.allSettled(Array.from({ length: 5 }, async () => pool.attest(undefined, (await request(issuer.key(), 5)).body)));
    expect(anon.filter((g) => g.status === 'fulfilled')).toHaveLength(2);
  });

  it('refuses other epochs and malformed bodies; a request the issuer rejects does not use up the budget', async () => {
    const issuer = await issuerP;
    const a = new Attester({ issue: issueInProcess(issuer), epoch: () => 10 });
    for (const e of [8, 9, 12])
      await expect(a.attest('dan', (await request(issuer.key(), e)).body)).rejects.toMatchObject({ status: 400, code: 'wrong_epoch' });
    for (const bad of [null, {}, { v: 1, epoch: 10, request: 'x' }, { v: 2, epoch: 10.5, request: 'x' }, { v: 2, epoch: 10, request: '' }]) {
      await expect(a.attest('dan', bad)).rejects.toMatchObject({ status: 400, code: 'bad_request' });
    }
    // a request for another issuer key: the issuer throws TypeError → 400, and dan keeps his token
    await expect(a.attest('dan', { v: 2, epoch: 10, request: 'AAIAAA' })).rejects.toBeInstanceOf(AttesterError);
    await expect(a.attest('dan', (await request(issuer.key(), 10)).body)).resolves.toHaveProperty('response');
    expect(() => new Attester({ issue: issueInProcess(issuer), epoch: () => 1, perAccount: -1 })).toThrow(/perAccount/);
  });

  it('over HTTP: the route closes its connection and is never cached; the index issues for the next epoch through its attester key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'atomem-attester-'));
    dirs.push(dir);
    const ids = Array.from({ length: 40 }, (_, i) => `i${i}`);
    const vectors = ids.map((_, i) => Float32Array.from({ length: 8 }, (_, d) => (d === i % 4 ? 1 : 0.01 * d)));
    const index = createIndexService({
      dataDir: dir,
      logger: false,
      v2: { space: { embedderId: 'test', ids, vectors }, attesterKey: 'attester-key-for-the-test-0001', epochMs: 60_000 },
    });
    const indexUrl = await index.listen({ port: 0, host: '127.0.0.1' });
    await index.ready;
    const shop = Fastify();
    const attester = new Attester({ issue: issueViaIndex(indexUrl, 'attester-key-for-the-test-0001'), epoch: () => index.v2!.epoch() });
    registerAttester(shop, { path: '/token', attester, accountOf: (req) => req.headers['x-test-account'] as string | undefined });
    const shopUrl = await shop.listen({ port: 0, host: '127.0.0.1' });
    try {
      const key = (await (await fetch(`${indexUrl}/v2/token-key`)).json()) as TokenKeyResponse;
      const next = index.v2!.epoch() + 1;
      const r = await request(key, next);
      const post = (account?: string) =>
        fetch(`${shopUrl}/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(account ? { 'x-test-account': account } : {}) },
          body: JSON.stringify(r.body),
        });
      const res = await post('erin');
      expect(res.status).toBe(200);
      expect(res.headers.get('connection')).toBe('close');
      expect(res.headers.get('cache-control')).toBe('no-store');
      const token = await r.finalize(((await res.json()) as { response: string }).response);
      expect(token.length).toBeGreaterThan(100);
      expect((await post('erin')).status).toBe(429);
      expect((await post()).status).toBe(403);
    } finally {
      await shop.close();
      await index.close();
    }
  });
});
