// Epochs only move forward: the index service over real HTTP and a real SQLite data dir, with its
// wall clock stepped back into an epoch already released and forward again (the clock is the one
// test seam: `v2.now`). A closed epoch is never reopened: no token is issued or spent for it, its
// release keeps its bytes and digest, health says the clock is behind; the floor survives a restart.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ReportStore } from '../src/report-store.js';
import { INDEX_V2_PATHS } from 'atomem/protocol';
import { axisSpace, clockedV2, indexServices, issueToken, sendReport } from '../../../test/fixtures/index-service.js';

const EPOCH_MS = 1_000_000;
const GRACE = EPOCH_MS / 10;

const services = indexServices('atomem-epochs-');
const space = () => axisSpace('epoch-space@1');

function start(dataDir: string, clock: { now: number }) {
  return services.start({
    dataDir,
    rateLimit: false,
    v2: clockedV2(space(), clock, { epochMs: EPOCH_MS }),
  });
}
const issue = (url: string, epoch: number) => issueToken(url, epoch);
const report = sendReport;

async function health(url: string) {
  const res = await fetch(`${url}${INDEX_V2_PATHS.health}`);
  return {
    status: res.status,
    body: (await res.json()) as {
      status: string;
      epoch: number;
      latestRelease: number | null;
      epochs: { closedThrough: number | null; clock: string; message?: string };
    },
  };
}

async function releaseBytes(url: string, epoch: number): Promise<{ status: number; sha: string; text: string }> {
  const res = await fetch(`${url}${INDEX_V2_PATHS.release(epoch)}`);
  const text = await res.text();
  return { status: res.status, text, sha: createHash('sha256').update(text).digest('hex') };
}

describe('epochs only move forward', () => {
  it('a clock stepped back into a released epoch: no token issued or spent for it, the release keeps its bytes, health says so; forward again: the next epoch works', async () => {
    const dataDir = services.tempDir();
    const clock = { now: 5 * EPOCH_MS + 1000 };
    let { svc, url } = await start(dataDir, clock);

    // Epoch 5: five reports; one more token issued but not spent yet.
    const tokens: string[] = [];
    for (let i = 0; i < 6; i++) tokens.push((await issue(url, 5)).token!);
    for (let i = 0; i < 5; i++) expect(await report(url, 5, tokens[i], i)).toBe(202);
    expect((await health(url)).body.epochs).toEqual({ closedThrough: null, clock: 'ok' });

    // Forward past its end and grace: epoch 5 is released.
    clock.now = 6 * EPOCH_MS + GRACE + 1;
    await svc.v2.tick();
    const published = await releaseBytes(url, 5);
    expect(published.status).toBe(200);
    const h1 = await health(url);
    expect(h1.status).toBe(200);
    expect(h1.body.epochs).toEqual({ closedThrough: 5, clock: 'ok' });

    // Back into epoch 5 (as a stepped NTP correction or a wrong RTC would do).
    clock.now = 5 * EPOCH_MS + 2000;
    const behind = await health(url);
    expect(behind.status).toBe(503);
    expect(behind.body.status).toBe('degraded');
    expect(behind.body.epochs.clock).toBe('behind');
    expect(behind.body.epochs.closedThrough).toBe(5);
    expect(behind.body.epochs.message).toMatch(/behind the last closed epoch 5.*never reopened.*Fix: correct the host's clock/);
    // spent tokens, an issued-but-unspent token, and fresh issuance: all refused
    for (let i = 0; i < 5; i++) expect(await report(url, 5, tokens[i], i)).toBe(403);
    expect(await report(url, 5, tokens[5], 5)).toBe(403);
    const refusedIssue = await issue(url, 5);
    expect(refusedIssue.status).toBe(400);
    expect(refusedIssue.body.error).toBe('wrong_epoch');
    expect(refusedIssue.body.message).toMatch(/behind the last closed epoch 5/);
    // the epoch job and an explicit aggregation leave the release as it was
    await svc.v2.tick();
    expect(JSON.stringify(await svc.v2.aggregate(5))).toBe(published.text);
    const during = await releaseBytes(url, 5);
    expect(during.sha).toBe(published.sha);
    expect(svc.v2.store.openEpochs()).toEqual([]);
    expect(svc.v2.store.reportCount(5)).toBe(0);

    // A restart with the clock still behind: the floor is persisted, not recomputed from the clock.
    await svc.close();
    ({ svc, url } = await start(dataDir, clock));
    const afterRestart = await health(url);
    expect(afterRestart.body.epochs).toMatchObject({ closedThrough: 5, clock: 'behind' });
    expect(await report(url, 5, tokens[5], 5)).toBe(403);
    expect((await releaseBytes(url, 5)).sha).toBe(published.sha);

    // Forward into epoch 6, inside the grace period of epoch 5: epoch 5 stays closed, epoch 6 opens.
    clock.now = 6 * EPOCH_MS + 1000;
    const h2 = await health(url);
    expect(h2.status).toBe(200);
    expect(h2.body.epochs).toEqual({ closedThrough: 5, clock: 'ok' });
    expect(await report(url, 5, tokens[5], 5)).toBe(403);
    expect((await issue(url, 5)).status).toBe(400);
    const six: string[] = [];
    for (let i = 0; i < 4; i++) six.push((await issue(url, 6)).token!);
    for (let i = 0; i < 4; i++) expect(await report(url, 6, six[i], i)).toBe(202);
    expect(await report(url, 6, six[0], 0)).toBe(403);

    // Epoch 6 closes; a jump far forward and back again changes neither release.
    clock.now = 7 * EPOCH_MS + GRACE + 1;
    await svc.v2.tick();
    const six1 = await releaseBytes(url, 6);
    expect(six1.status).toBe(200);
    clock.now = 40 * EPOCH_MS;
    await svc.v2.tick();
    clock.now = 6 * EPOCH_MS + 10;
    await svc.v2.tick();
    expect((await health(url)).body.epochs.clock).toBe('behind');
    expect((await releaseBytes(url, 5)).sha).toBe(published.sha);
    expect((await releaseBytes(url, 6)).sha).toBe(six1.sha);
    expect((await health(url)).body.latestRelease).toBe(6);
  }, 60_000);

  it('a release stored for an epoch is never replaced (a second publish keeps the first bytes)', async () => {
    const dataDir = services.tempDir();
    const clock = { now: 5 * EPOCH_MS + 1000 };
    const { svc, url } = await start(dataDir, clock);
    const first = svc.v2.store.publish(3, JSON.stringify({ v: 2, epoch: 3, n: 'first' }));
    expect(first.closedNow).toBe(true);
    const second = svc.v2.store.publish(3, JSON.stringify({ v: 2, epoch: 3, n: 'second' }));
    expect(second).toEqual({ closedNow: false, release: first.release, closedThrough: 3 });
    expect((await releaseBytes(url, 3)).text).toBe(first.release);
  });

  it('a stop between the two steps of a close (floor raised, release not built yet): the epoch stays closed with its cells, and the next close builds its release', () => {
    const dataDir = services.tempDir();
    const nonce = (i: number) => createHash('sha256').update(`n${i}`).digest('hex');
    let store = ReportStore.open(dataDir);
    for (let i = 0; i < 3; i++) expect(store.spend(nonce(i), 5, i, 0)).toBe('counted');
    expect(store.beginClose(5)).toMatchObject({ closedNow: true, closedThrough: 5 });
    store.close();
    store = ReportStore.open(dataDir);
    try {
      expect(store.closedThrough()).toBe(5);
      expect(store.spend(nonce(9), 5, 0, 0)).toBe('closed');
      expect(store.openEpochs()).toEqual([5]);
      const r = store.closeEpoch(5, (cells) => JSON.stringify({ n: cells.reduce((a, c) => a + c.n, 0) }));
      expect(r).toEqual({ closedNow: false, release: '{"n":3}', closedThrough: 5 });
      expect(store.openEpochs()).toEqual([]);
    } finally {
      store.close();
    }
  });
});
