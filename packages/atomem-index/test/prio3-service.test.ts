/**
 * Verifiable aggregation end to end: two `atomem-index` processes on loopback, one the Prio3
 * leader and one the helper; devices report with atomem's `sendPrio3Report` (real tokens from
 * the leader's issuer, shares sealed to each aggregator); forged reports whose leader share
 * encodes 20 for one item are refused by the proof check; the release is the true count per
 * item plus noise, within bounds; peer routes need the peer key; a token pays for one report.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Prio3SumVec } from '@divviup/prio3';
import { describe, expect, it } from 'vitest';
import {
  PRIO3_HPKE_INFO,
  PRIO3_PATHS,
  b64,
  prio3Hpke,
  prio3Measurement,
  prio3ShareAad,
  sendPrio3Report,
  type Prio3Config,
  type Prio3Upload,
} from 'atomem/engine';
import { encodeCatalogVectors } from 'atomem/protocol';
import { attesterTokens, rng, unit } from '../../../test/fixtures/index-wire.js';
import { indexServices } from '../../../test/fixtures/index-service.js';
import type { Prio3Release } from '../src/prio3-aggregator.js';

const ATTESTER = 'attester-key-for-the-prio3-test';
const PEER_KEY = 'peer-key-of-the-two-aggregators';
const EPOCH_MS = 20_000;
const N_ITEMS = 40;

const services = indexServices('atomem-prio3-');
const tempDir = (prefix: string) => services.tempDir(prefix);

function catalogFile(dir: string): string {
  const r = rng(11);
  const centres = Array.from({ length: 4 }, () => unit(Array.from({ length: 16 }, () => r() - 0.5)));
  const items = Array.from({ length: N_ITEMS }, (_, i) => ({ id: `sku-${String(i).padStart(2, '0')}`, title: `product ${i}` }));
  const file = join(dir, 'catalog.bin');
  writeFileSync(
    file,
    encodeCatalogVectors(
      { id: 'prio3-test@1', dim: 16 },
      items,
      items.map((_, i) => unit(Array.from(centres[i % 4], (x) => x + 0.2 * (r() - 0.5)))),
    ),
  );
  return file;
}

/** A real `atomem-index` process (test/fixtures/index-service.ts) on a fresh data dir with the peer key: its URL once ready. */
function start(args: string[]): Promise<string> {
  return services.spawn(['--port', '0', '--data', tempDir('atomem-prio3-'), '--rate-max', '0', '--log-level', 'warn', ...args], {
    attesterKey: ATTESTER,
    readyMs: 60_000,
    env: { ATOMEM_PRIO3_PEER_KEY: PEER_KEY },
  }).ready;
}

/** A Sybil's forged upload: a valid sharding of a 0/1 vector, then the leader's share moved by 19 at `item` (the shares add to 20 there). */
async function forged(leader: Prio3Config, helper: Prio3Config, epoch: number, token: string, item: number): Promise<Prio3Upload> {
  const vdaf = new Prio3SumVec({ shares: 2, length: leader.vdaf.length, bits: 1, chunkLength: leader.vdaf.chunkLength });
  const nonce = crypto.getRandomValues(new Uint8Array(16));
  const rand = crypto.getRandomValues(new Uint8Array(vdaf.randSize));
  type Bytes = Parameters<typeof vdaf.shard>[1];
  const m = new Array<number>(leader.vdaf.length).fill(0);
  m[item] = 1;
  const { publicShare, inputShares } = await vdaf.shard(m, nonce as Bytes, rand as Bytes);
  const field = (vdaf as unknown as { flp: { field: { modulus: bigint; encode(v: bigint[]): Uint8Array } } }).flp.field;
  const share = inputShares[0];
  share.measurementShare[item] = (share.measurementShare[item] + 19n) % field.modulus;
  share.wireMeasurementShare = Buffer.from(field.encode(share.measurementShare)) as typeof share.wireMeasurementShare;
  const pub = new Uint8Array(vdaf.encodePublicShare(publicShare));
  const suite = await prio3Hpke();
  const seal = async (role: 'leader' | 'helper', key: string, bytes: Uint8Array) => {
    const r = await suite.seal(
      { recipientPublicKey: await suite.kem.deserializePublicKey(b64.decode(key)), info: PRIO3_HPKE_INFO },
      bytes,
      prio3ShareAad(role, epoch, nonce, pub),
    );
    return { enc: b64.encode(new Uint8Array(r.enc)), ct: b64.encode(new Uint8Array(r.ct)) };
  };
  return {
    epoch,
    token,
    nonce: b64.encode(nonce),
    publicShare: b64.encode(pub),
    leaderShare: await seal('leader', leader.hpkePublicKey, new Uint8Array(vdaf.encodeInputShare(inputShares[0]))),
    helperShare: await seal('helper', helper.hpkePublicKey, new Uint8Array(vdaf.encodeInputShare(inputShares[1]))),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const postJson = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

describe('prio3: leader and helper processes', () => {
  it('refuses to start without the peer key or with a bad peer URL, and says why', { timeout: 60_000 }, async () => {
    const catalog = catalogFile(tempDir('atomem-prio3-cat-'));
    const run = (args: string[], env: Record<string, string>) =>
      services.run(['--port', '0', '--data', tempDir('atomem-prio3-'), '--catalog-vectors', catalog, ...args], { env: { ATOMEM_PRIO3_PEER_KEY: '', ...env } });
    const noKey = await run(['--prio3-role', 'leader', '--prio3-peer', 'http://127.0.0.1:9'], {});
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toMatch(/peer key must be at least 16 characters \(ATOMEM_PRIO3_PEER_KEY\)/);
    const badPeer = await run(['--prio3-role', 'leader', '--prio3-peer', 'not a url'], { ATOMEM_PRIO3_PEER_KEY: PEER_KEY });
    expect(badPeer.code).toBe(1);
    expect(badPeer.stderr).toMatch(/--prio3-peer must be a URL/);
    const badShare = await run(['--prio3-role', 'leader', '--prio3-peer', 'http://127.0.0.1:9', '--prio3-min-share', '1'], { ATOMEM_PRIO3_PEER_KEY: PEER_KEY });
    expect(badShare.code).toBe(1);
    expect(badShare.stderr).toMatch(/minShare must be in \[0, 1\)/);
  });

  it('aggregates real device reports, refuses forged ones, releases the true counts plus bounded noise', { timeout: 180_000 }, async () => {
    const catalog = catalogFile(tempDir('atomem-prio3-cat-'));
    const common = [
      '--catalog-vectors',
      catalog,
      '--epoch-ms',
      String(EPOCH_MS),
      '--prio3-epsilon',
      '10',
      '--prio3-threshold',
      '0',
      '--prio3-min-share',
      '0',
      '--prio3-min-reports',
      '5',
    ];
    const helperUrl = await start([...common, '--prio3-role', 'helper', '--prio3-peer', 'http://127.0.0.1:9']);
    const leaderUrl = await start([...common, '--prio3-role', 'leader', '--prio3-peer', helperUrl, '--prio3-tick-ms', '250']);
    const [leaderCfg, helperCfg] = (await Promise.all(
      [leaderUrl, helperUrl].map(async (u) => (await fetch(`${u}${PRIO3_PATHS.config}`)).json()),
    )) as Prio3Config[];
    expect(leaderCfg.role).toBe('leader');
    expect(helperCfg.role).toBe('helper');
    expect(leaderCfg.hpkePublicKey).not.toBe(helperCfg.hpkePublicKey);
    expect(leaderCfg.items).toEqual(helperCfg.items);
    expect(leaderCfg.items).toHaveLength(N_ITEMS);

    // peer routes need the peer key; the leader takes no peer requests, the helper no uploads
    expect((await postJson(`${helperUrl}${PRIO3_PATHS.aggregate}`, { epoch: 0, reports: [] })).status).toBe(401);
    expect((await postJson(`${helperUrl}${PRIO3_PATHS.collect}`, { epoch: 0, reports: 0 }, { authorization: 'Bearer wrong' })).status).toBe(401);
    expect((await postJson(`${helperUrl}${PRIO3_PATHS.upload}`, {})).status).toBe(404);

    // start at the beginning of an epoch: every upload lands in one epoch
    const wait = EPOCH_MS - (Date.now() % EPOCH_MS);
    if (wait < EPOCH_MS * 0.9) await sleep(wait + 50);
    const epoch = Math.floor(Date.now() / EPOCH_MS);
    const tokens = attesterTokens(leaderUrl, ATTESTER);
    const r = rng(5);
    const devices = Array.from({ length: 24 }, () => Array.from({ length: 1 + Math.floor(r() * 12) }, () => leaderCfg.items[Math.floor(r() ** 2 * N_ITEMS)]));
    for (const recent of devices) {
      const sent = await sendPrio3Report({ leaderUrl, helperUrl, recent, epoch, tokens });
      expect(sent.status).toBe(202);
    }
    // a token pays for one report
    const token = await tokens.token(epoch);
    const first = await forged(leaderCfg, helperCfg, epoch, token, 39);
    expect((await postJson(`${leaderUrl}${PRIO3_PATHS.upload}`, first)).status).toBe(202);
    expect((await postJson(`${leaderUrl}${PRIO3_PATHS.upload}`, await forged(leaderCfg, helperCfg, epoch, token, 39))).status).toBe(403);
    // a second forged report (new token), same target
    expect((await postJson(`${leaderUrl}${PRIO3_PATHS.upload}`, await forged(leaderCfg, helperCfg, epoch, await tokens.token(epoch), 39))).status).toBe(202);
    // tampered ciphertext: accepted at upload (sealed), not counted
    const bad = await forged(leaderCfg, helperCfg, epoch, await tokens.token(epoch), 1);
    bad.helperShare.ct = b64.encode(b64.decode(bad.helperShare.ct).map((x, i) => (i === 3 ? x ^ 1 : x)));
    expect((await postJson(`${leaderUrl}${PRIO3_PATHS.upload}`, bad)).status).toBe(202);

    // the leader aggregates with the helper once the epoch's window (end + 10 %) has passed
    await sleep((epoch + 1) * EPOCH_MS + EPOCH_MS / 10 - Date.now() + 200);
    let release: Prio3Release | undefined;
    for (let i = 0; i < 120 && !release; i++) {
      const res = await fetch(`${leaderUrl}/v2/prio3/releases/${epoch}`);
      if (res.ok) release = (await res.json()) as Prio3Release;
      else await sleep(250);
    }
    expect(release).toBeDefined();
    expect(release!.reports).toBe(devices.length);
    expect(release!.rejected).toBe(3);
    expect(release!.mechanism).toMatchObject({ vdaf: 'Prio3SumVec', epsilon: 10, delta: 0, noise: 'discrete-laplace', threshold: 0, minShare: 0, minCount: 0 });
    // true counts; each count's noise is the sum of two discrete Laplace(scale 1) draws: |noise| ≤ 15 with probability 1 − 4·10⁻⁶
    const truth = leaderCfg.items.map(
      (id) => devices.filter((d) => prio3Measurement(d, leaderCfg.items, leaderCfg.ell)[leaderCfg.items.indexOf(id)] === 1).length,
    );
    let moved = 0;
    leaderCfg.items.forEach((id, i) => {
      const got = release!.counts[id];
      if (got === undefined) expect(truth[i]).toBeLessThanOrEqual(15);
      else {
        expect(Math.abs(got - truth[i])).toBeLessThanOrEqual(15);
        if (got !== truth[i]) moved++;
      }
    });
    // the noise is there
    expect(moved).toBeGreaterThan(0);
    // the forged target (item 39) got nothing from the forged reports: its true count is that of the honest devices
    expect(truth[39]).toBeLessThanOrEqual(2);
    expect(release!.counts[leaderCfg.items[39]] ?? 0).toBeLessThanOrEqual(truth[39] + 15);

    // the helper draws one noisy answer per epoch (a second draw would average the noise away): asked again, the same answer; another count, none
    const collect = (reports: number) => postJson(`${helperUrl}${PRIO3_PATHS.collect}`, { epoch, reports }, { authorization: `Bearer ${PEER_KEY}` });
    const again = await collect(devices.length);
    expect(again.status).toBe(200);
    expect(await (await collect(devices.length)).text()).toBe(await again.text());
    expect((await collect(devices.length + 1)).status).toBe(409);
    // a closed epoch takes no more uploads
    expect(
      (await postJson(`${leaderUrl}${PRIO3_PATHS.upload}`, await forged(leaderCfg, helperCfg, epoch, await tokens.token(epoch + 1).catch(() => 'x'), 1)))
        .status,
    ).toBe(403);
  });
});
