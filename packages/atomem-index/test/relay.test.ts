// Reports through Oblivious HTTP: the device's ReportClient (index.relay) → `atomem-relay` (a
// real child process, started from its CLI) → the index's gateway (a real service on loopback)
// → the report route. The device sends from 127.0.0.2, the relay from 127.0.0.1: the index
// must see only the relay's address; the relay must never see a report field; a batching relay
// must forward nothing before its flush, then everything at once, in an order unrelated to the
// order of arrival; the reports must count.
import { spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createIndexService, type IndexService } from '../src/service.js';
import { createRelay } from '../src/relay.js';
import { INDEX_V2_PATHS, OHTTP_GATEWAY_PATHS, OHTTP_MEDIA, OHTTP_RELAY_PATHS, decodeKeys, type ReportRequest } from 'atomem/protocol';
import { ReportClient, ReportHttpError, type ItemSpace } from 'atomem/engine';
import { attesterTokens, clustered } from '../../../test/fixtures/index-wire.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const ATTESTER = 'attester-secret-for-the-relay-test';
const EPOCH_MS = 1_000_000;
const EPOCH = 5;
const DEVICE_ADDRESS = '127.0.0.2';

const dirs: string[] = [];
const services: IndexService[] = [];
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const s of services) await s.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function space(): ItemSpace {
  const v = clustered(3, 12, 4, 0.3);
  const ids = Array.from({ length: 60 }, (_, i) => `item-${i}`);
  return { embedderId: 'relay-test@1', ids, vectors: ids.map((_, i) => v(i % 4)) };
}

/** What the index saw: the peer address of every request, and the reports (in order) the gateway dispatched. */
interface IndexView {
  peers: { url: string; address: string; headers: Record<string, unknown> }[];
  dispatched: ReportRequest[];
}

async function startIndex(): Promise<{ svc: IndexService; url: string; view: IndexView }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'atomem-relay-'));
  dirs.push(dataDir);
  const svc = createIndexService({
    dataDir,
    v2: { space: space(), epochMs: EPOCH_MS, now: () => EPOCH * EPOCH_MS + 1000, tickMs: 0, minReports: 1, minContributors: 0, attesterKey: ATTESTER },
  });
  services.push(svc);
  const view: IndexView = { peers: [], dispatched: [] };
  // test instrumentation only: the service itself neither logs nor keeps addresses
  svc.app.addHook('onRequest', async (req) => {
    if (req.raw.socket?.remoteAddress && !svc.ohttp?.isInner(req))
      view.peers.push({ url: req.url, address: req.raw.socket.remoteAddress, headers: { ...req.headers } });
  });
  svc.app.addHook('preHandler', async (req) => {
    if (svc.ohttp?.isInner(req)) view.dispatched.push(req.body as ReportRequest);
  });
  await svc.ready;
  const url = await svc.listen({ port: 0, host: '127.0.0.1' });
  return { svc, url, view };
}

/** Start `atomem-relay` (through tsx); resolves once it prints that it is ready. Its stderr (the log) is collected. */
function startRelay(gateway: string, flushEveryMs: number): Promise<{ url: string; log: () => string; child: ChildProcess }> {
  const child = spawn(
    process.execPath,
    [
      '-C',
      'atomem-source',
      '--import',
      'tsx',
      'packages/atomem-index/src/relay-cli.ts',
      '--gateway',
      gateway,
      '--port',
      '0',
      '--flush-every',
      String(flushEveryMs),
      '--rate-max',
      '0',
      '--log-level',
      'trace',
    ],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`relay not ready after 60 s\n${out}\n${err}`)), 60_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /ready at (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], log: () => out + err, child });
      }
    });
    child.on('exit', (code) => reject(new Error(`relay exited (${code}) before it was ready\n${out}\n${err}`)));
  });
}

/** A `fetch` that connects from `localAddress` (node:http) and records every request body it sends. */
function deviceFetch(localAddress: string, sent: { url: string; body: Buffer }[]): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(String(input));
    const body = init?.body ? Buffer.from(init.body as ArrayBuffer) : undefined;
    sent.push({ url: url.href, body: body ?? Buffer.alloc(0) });
    return new Promise<Response>((resolve, reject) => {
      const req = request(
        url,
        { method: init?.method ?? 'GET', headers: (init?.headers ?? {}) as Record<string, string>, localAddress, agent: false },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const headers = new Headers();
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
            const status = res.statusCode ?? 0;
            resolve(new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers }));
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }) as typeof fetch;
}

describe('reports through atomem-relay to the index gateway', () => {
  it('the gateway serves its key configuration and refuses what it cannot decapsulate', async () => {
    const { url } = await startIndex();
    const keys = await fetch(`${url}${OHTTP_GATEWAY_PATHS.keys}`);
    expect(keys.headers.get('content-type')).toBe(OHTTP_MEDIA.keys);
    expect(decodeKeys(new Uint8Array(await keys.arrayBuffer()))).toHaveLength(1);
    const junk = await fetch(`${url}${OHTTP_GATEWAY_PATHS.gateway}`, {
      method: 'POST',
      headers: { 'content-type': OHTTP_MEDIA.request },
      body: new Uint8Array(80),
    });
    expect(junk.status).toBe(400);
    const json = await fetch(`${url}${OHTTP_GATEWAY_PATHS.gateway}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(json.status).toBe(415);
  });

  it('a batching relay: 202 at once, nothing reaches the index before the flush, then every report, shuffled, from the relay address; the relay sees no report field', async () => {
    const { svc, url, view } = await startIndex();
    const FLUSH = 8000;
    const relay = await startRelay(url, FLUSH);
    const sent: { url: string; body: Buffer }[] = [];
    const tokens = attesterTokens(url, ATTESTER);
    const client = new ReportClient({ url, tokens, relay: relay.url, fetch: deviceFetch(DEVICE_ADDRESS, sent) });
    const N = 20;
    const tokenList = await Promise.all(Array.from({ length: N }, () => tokens.token(EPOCH)));
    // why: start right after a flush moment, so the whole burst falls in one period
    const phase = Date.now() % FLUSH;
    if (phase > FLUSH / 4) await new Promise((r) => setTimeout(r, FLUSH - phase + 100));
    for (let i = 0; i < N; i++) {
      await client.send(EPOCH, { cohort: i % 4, bucket: i }, tokenList[i]);
      expect(client.lastReport()?.relayed).toBe('held');
    }
    expect(svc.v2.store.reportCount(EPOCH)).toBe(0);
    expect(view.dispatched).toHaveLength(0);
    const start = Date.now();
    // why both: the view records a report when its request arrives, before the route has stored it
    while ((view.dispatched.length < N || svc.v2.store.reportCount(EPOCH) < N) && Date.now() - start < FLUSH + 10_000) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(view.dispatched).toHaveLength(N);
    expect(svc.v2.store.reportCount(EPOCH)).toBe(N);

    // the order at the index is a permutation of the order of arrival at the relay, not that order
    const order = view.dispatched.map((r) => tokenList.indexOf(r.token));
    expect([...order].sort((a, b) => a - b)).toEqual(Array.from({ length: N }, (_, i) => i));
    // why ≥ 4: forwarding 4 at a time reorders by less than 4 places; a uniform shuffle of 20 moves some report further (all but ~1e-9 of the time)
    expect(Math.max(...order.map((from, at) => Math.abs(from - at)))).toBeGreaterThanOrEqual(4);

    // the index saw the relay's address on the gateway route, never the device's
    const gatewayPeers = view.peers.filter((p) => p.url === OHTTP_GATEWAY_PATHS.gateway);
    expect(gatewayPeers).toHaveLength(N);
    expect(new Set(gatewayPeers.map((p) => p.address))).toEqual(new Set(['127.0.0.1']));
    expect(view.peers.filter((p) => p.url === INDEX_V2_PATHS.report)).toHaveLength(0);

    // what the relay received and logged: encapsulated bytes, no report field, no token
    const toRelay = sent.filter((s) => s.url.startsWith(relay.url) && s.url.endsWith(OHTTP_RELAY_PATHS.relay));
    expect(toRelay).toHaveLength(N);
    expect(new Set(toRelay.map((s) => s.body.length)).size).toBe(1); // padded: one size for every report
    const relayView = [relay.log(), ...toRelay.map((s) => s.body.toString('latin1'))].join('\n');
    for (const needle of ['cohort', 'bucket', '"token"', '"epoch"', ...tokenList.map((t) => t.slice(0, 24))]) expect(relayView).not.toContain(needle);
    // why wait: the relay logs a flush's summary once its last forward is answered, after the index has the report
    for (const start = Date.now(); !relay.log().includes('"forwarded":20') && Date.now() - start < 5000; ) await new Promise((r) => setTimeout(r, 50));
    expect(relay.log()).toContain('"forwarded":20');
  }, 60_000);

  it("in-process: bad options refused; wrong media type 415; a full relay answers 503; the device's headers never reach the index", async () => {
    expect(() => createRelay({ gateway: 'ftp://x' })).toThrow(/gateway/);
    expect(() => createRelay({ gateway: 'http://x', flushEveryMs: -1 })).toThrow(/flushEveryMs/);
    const { url, view } = await startIndex();
    const relay = createRelay({ gateway: url, flushEveryMs: 3_600_000, maxHeld: 2, rateLimit: false });
    const base = await relay.listen({ port: 0 });
    try {
      const keys = await (await fetch(`${base}${OHTTP_RELAY_PATHS.keys}`)).arrayBuffer();
      expect(Buffer.from(keys)).toEqual(Buffer.from(await (await fetch(`${url}${OHTTP_GATEWAY_PATHS.keys}`)).arrayBuffer()));
      const post = (body: BodyInit, type: string = OHTTP_MEDIA.request) =>
        fetch(`${base}${OHTTP_RELAY_PATHS.relay}`, {
          method: 'POST',
          headers: { 'content-type': type, 'x-device-id': 'shopper-42', cookie: 'sid=abc', 'user-agent': 'DeviceBrowser/1.0' },
          body,
        });
      expect((await post('{}', 'application/json')).status).toBe(415);
      expect((await post(new Uint8Array(60))).status).toBe(202);
      expect((await post(new Uint8Array(61))).status).toBe(202);
      expect((await post(new Uint8Array(62))).status).toBe(503);
      expect(relay.held()).toBe(2);
      const r = await relay.flush();
      expect(r).toMatchObject({ forwarded: 2, failed: 0, statuses: { 400: 2 } }); // junk bytes: the gateway cannot decapsulate them
      const forwarded = view.peers.filter((p) => p.url === OHTTP_GATEWAY_PATHS.gateway);
      expect(forwarded).toHaveLength(2);
      for (const p of forwarded) {
        expect(p.headers['x-device-id']).toBeUndefined();
        expect(p.headers.cookie).toBeUndefined();
        expect(p.headers['user-agent']).not.toBe('DeviceBrowser/1.0');
        expect(p.headers['x-forwarded-for']).toBeUndefined();
      }
    } finally {
      await relay.close();
    }
  });

  it('a relay that forwards at once returns the index answer, encapsulated: accepted, then refused for a spent token', async () => {
    const { svc, url } = await startIndex();
    const relay = await startRelay(url, 0);
    const tokens = attesterTokens(url, ATTESTER);
    const sent: { url: string; body: Buffer }[] = [];
    const client = new ReportClient({ url, tokens, relay: relay.url, fetch: deviceFetch(DEVICE_ADDRESS, sent) });
    const token = await tokens.token(EPOCH);
    await client.send(EPOCH, { cohort: 1, bucket: 3 }, token);
    expect(client.lastReport()?.relayed).toBe('forwarded');
    expect(svc.v2.store.reportCount(EPOCH)).toBe(1);
    // the same encapsulated bytes again (a relay replaying them): decapsulated, refused by the spent token
    const captured = sent.find((s) => s.url.endsWith(OHTTP_RELAY_PATHS.relay))!;
    const replay = await fetch(`${url}${OHTTP_GATEWAY_PATHS.gateway}`, {
      method: 'POST',
      headers: { 'content-type': OHTTP_MEDIA.request },
      body: new Uint8Array(captured.body),
    });
    expect(replay.status).toBe(200);
    expect(svc.v2.store.reportCount(EPOCH)).toBe(1);
    const again = await client.send(EPOCH, { cohort: 1, bucket: 3 }, token).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ReportHttpError);
    expect((again as ReportHttpError).status).toBe(403);
    expect((again as ReportHttpError).code).toBe('token_refused');
    expect(svc.v2.store.reportCount(EPOCH)).toBe(1);
  }, 60_000);
});
