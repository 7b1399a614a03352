/**
 * The device's Prio3 report (src/sync/prio3-report.ts): what it measures, the shares' sizes,
 * and the requests it makes (no cookies, nothing cached, only the leader gets the upload;
 * aggregators that disagree on the item list get nothing). The aggregation itself is tested
 * against the real aggregators in atomem-index (test/prio3-*.test.ts).
 */
import { describe, expect, it } from 'vitest';
import {
  PRIO3_HPKE_SUITE,
  PRIO3_PATHS,
  b64,
  encodePrio3Upload,
  prio3Vdaf,
  prio3Hpke,
  prio3Measurement,
  sendPrio3Report,
  type Prio3Config,
} from '../src/node.js';

const ITEMS = ['a', 'b', 'c', 'd', 'e'];

async function config(role: 'leader' | 'helper', items = ITEMS): Promise<Prio3Config> {
  const suite = await prio3Hpke();
  const keys = await suite.kem.generateKeyPair();
  return {
    role,
    hpkePublicKey: b64.encode(new Uint8Array(await suite.kem.serializePublicKey(keys.publicKey))),
    hpkeSuite: PRIO3_HPKE_SUITE,
    vdaf: { name: 'Prio3SumVec', length: items.length, bits: 1, chunkLength: 2 },
    items,
    ell: 2,
    epsilon: 1,
  };
}

describe('prio3 report (device side)', () => {
  it('measures the last ℓ distinct catalog items as 0/1', () => {
    expect(prio3Measurement(['a', 'x', 'c', 'a', 'd'], ITEMS, 2)).toEqual([0, 0, 1, 1, 0]);
    expect(prio3Measurement(['a', 'x', 'c', 'a', 'd'], ITEMS, 10)).toEqual([1, 0, 1, 1, 0]);
    expect(prio3Measurement([], ITEMS, 3)).toEqual([0, 0, 0, 0, 0]);
  });

  it('seals two shares; the leader needs the vector, the helper three seeds', async () => {
    const [leader, helper] = await Promise.all([config('leader'), config('helper')]);
    const up = await encodePrio3Upload({ measurement: [1, 0, 0, 1, 0], epoch: 3, token: 'tok', leader, helper });
    expect(b64.decode(up.nonce)).toHaveLength(16);
    // AES-GCM adds 16 bytes; the helper's share is three 16-byte seeds
    expect(b64.decode(up.helperShare.ct)).toHaveLength(48 + 16);
    expect(b64.decode(up.leaderShare.ct).length).toBeGreaterThan(5 * 16);
    await expect(encodePrio3Upload({ measurement: [2, 0, 0, 0, 0], epoch: 3, token: 'tok', leader, helper })).rejects.toThrow(/must a number in \[0, 2\)/);
  });

  it('reads both configs and uploads to the leader only, without cookies or caching; refuses aggregators that disagree', async () => {
    const [leader, helper, other] = await Promise.all([config('leader'), config('helper'), config('helper', ['a', 'b', 'c', 'd', 'z'])]);
    const calls: { url: string; init?: RequestInit }[] = [];
    const fetcher = (helperCfg: Prio3Config) =>
      (async (input: RequestInfo | URL, init?: RequestInit) => {
        const url = String(input);
        calls.push({ url, init });
        if (url === `https://leader.example${PRIO3_PATHS.config}`) return Response.json(leader);
        if (url === `https://helper.example${PRIO3_PATHS.config}`) return Response.json(helperCfg);
        if (url === `https://leader.example${PRIO3_PATHS.upload}`) return new Response('{"accepted":true}', { status: 202 });
        return new Response('', { status: 404 });
      }) as typeof fetch;
    const tokens = { token: async (e: number) => `token-${e}` };
    const sent = await sendPrio3Report({
      leaderUrl: 'https://leader.example',
      helperUrl: 'https://helper.example',
      recent: ['b', 'e', 'q'],
      epoch: 9,
      tokens,
      fetch: fetcher(helper),
    });
    expect(sent).toEqual({ status: 202, items: 2 });
    expect(calls.map((c) => c.url).filter((u) => u.includes('upload'))).toEqual([`https://leader.example${PRIO3_PATHS.upload}`]);
    for (const c of calls) expect(c.init).toMatchObject({ credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer' });
    const body = JSON.parse(String(calls.at(-1)!.init!.body));
    expect(body).toMatchObject({ epoch: 9, token: 'token-9' });
    await expect(
      sendPrio3Report({ leaderUrl: 'https://leader.example', helperUrl: 'https://helper.example', recent: ['b'], epoch: 9, tokens, fetch: fetcher(other) }),
    ).rejects.toThrow(/disagree on the item list/);
  });
});

describe('prio3Module (an ES module build of @divviup/prio3 at a URL)', () => {
  it('loads the library from the URL, and says what to set when it cannot', async () => {
    const { createRequire } = await import('node:module');
    const { pathToFileURL } = await import('node:url');
    const url = pathToFileURL(createRequire(import.meta.url).resolve('@divviup/prio3')).href;
    const vdaf = await prio3Vdaf(5, url);
    expect(vdaf.constructor.name).toBe('Prio3SumVec');
    await expect(prio3Vdaf(5, pathToFileURL(createRequire(import.meta.url).resolve('vitest')).href)).rejects.toThrow(/index\.prio3Module/);
    await expect(prio3Vdaf(5, 'file:///nowhere/prio3.js')).rejects.toThrow(/could not be loaded/);
  });
});
