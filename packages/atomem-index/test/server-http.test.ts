// The index service over real HTTP (fastify on port 0, global fetch): health, the data dir lock,
// error bodies, rate limits per client address, trustProxy, and logs without addresses.
import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { createIndexService, type IndexServiceOptions } from '../src/service.js';
import { DataDirInUseError } from '../src/storage.js';
import { INDEX_V2_PATHS } from 'atomem/protocol';
import { axisSpace, indexServices } from '../../../test/fixtures/index-service.js';

const EPOCH_MS = 1_000_000;

const services = indexServices('atomem-server-');
const tempDir = () => services.tempDir();

function options(dataDir: string, extra: Partial<IndexServiceOptions> = {}): IndexServiceOptions {
  return {
    dataDir,
    rateLimit: false,
    v2: { space: axisSpace('http-space@1', { items: 40 }), epochMs: EPOCH_MS, now: () => 5 * EPOCH_MS + 1000, tickMs: 0, minReports: 1, minContributors: 0 },
    ...extra,
  };
}

function start(extra: Partial<IndexServiceOptions> = {}, dataDir = tempDir()) {
  return services.start(options(dataDir, extra));
}

// biome-ignore lint/suspicious/noExplicitAny: the tests read arbitrary fields of the JSON answers
async function request(url: string, method: 'GET' | 'POST', body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // keep text
  }
  return { status: res.status, body: parsed };
}

describe('index service: basics', () => {
  it('needs protocol v2 options; a second service on the same data dir is refused while the first runs', async () => {
    expect(() => createIndexService({ dataDir: tempDir() } as IndexServiceOptions)).toThrow(/options\.v2 is required/);
    const { dataDir } = await start();
    expect(() => createIndexService(options(dataDir))).toThrow(DataDirInUseError);
  });

  it('answers 4xx {error, message} for an unknown route and a body that is not JSON', async () => {
    const { url } = await start();
    expect(await request(`${url}/v1/health`, 'GET')).toEqual({ status: 404, body: { error: 'not_found', message: 'no route GET /v1/health' } });
    const bad = await request(url + INDEX_V2_PATHS.report, 'POST', '{bad json');
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'bad_request', message: 'body is not valid JSON' });
  });
});

describe('index service: rate limits and logs', () => {
  it('limits per client address: rotating a client header or forwarding headers gets no new bucket', async () => {
    const { url } = await start({ rateLimit: { max: 3, timeWindow: 60_000 } });
    const q = (h: Record<string, string>) => request(url + INDEX_V2_PATHS.tokenKey, 'GET', undefined, h);
    for (let i = 0; i < 3; i++) expect((await q({ 'x-atomem-client': `client-token-${i}aaaa` })).status).toBe(200);
    const limited = await q({ 'x-atomem-client': 'client-token-zzzz' });
    expect(limited.status).toBe(429);
    expect(limited.body).toEqual({ error: 'rate_limited', message: expect.stringMatching(/rate limit exceeded .*per client address/) });
    expect((await q({})).status).toBe(429);
    // Spoofed forwarding headers do not create new buckets (trustProxy is off).
    expect((await q({ 'x-forwarded-for': '10.9.8.7' })).status).toBe(429);
    // Health is never rate limited.
    expect((await request(url + INDEX_V2_PATHS.health, 'GET')).status).toBe(200);
  });

  it('with trustProxy, the address the proxy reports keys the limit (and only then)', async () => {
    const { url } = await start({ rateLimit: { max: 2, timeWindow: 60_000 }, trustProxy: '127.0.0.1' });
    const q = (ip: string) => request(url + INDEX_V2_PATHS.tokenKey, 'GET', undefined, { 'x-forwarded-for': ip });
    expect((await q('203.0.113.1')).status).toBe(200);
    expect((await q('203.0.113.1')).status).toBe(200);
    expect((await q('203.0.113.1')).status).toBe(429);
    expect((await q('203.0.113.2')).status).toBe(200);
  });

  it('never logs IP addresses, ports or host names', async () => {
    const lines: string[] = [];
    const { url } = await start({ logger: { level: 'trace', stream: { write: (l) => void lines.push(l) } }, rateLimit: { max: 2, timeWindow: 60_000 } });
    const hdr = { 'x-forwarded-for': '10.1.2.3', 'x-real-ip': '10.4.5.6', forwarded: 'for=10.7.8.9' };
    await request(url + INDEX_V2_PATHS.health, 'GET', undefined, hdr);
    await request(url + INDEX_V2_PATHS.report, 'POST', { v: 2, epoch: 5, token: 'x', report: { cohort: 0, bucket: 0 } }, hdr);
    await request(url + INDEX_V2_PATHS.report, 'POST', '{bad json', hdr);
    await request(url + INDEX_V2_PATHS.tokenKey, 'GET', undefined, hdr); // 429
    await request(`${url}/missing`, 'GET', undefined, hdr);
    const log = lines.join('');
    if (process.env.SHOW_LOG) console.log(log);
    expect(lines.length).toBeGreaterThan(8);
    expect(log).toContain('incoming request');
    for (const needle of [
      '127.0.0.1',
      '::1',
      '::ffff',
      '10.1.2.3',
      '10.4.5.6',
      '10.7.8.9',
      'remoteAddress',
      'remotePort',
      '"hostname"',
      '"host"',
      hostname(),
    ]) {
      expect(log, needle).not.toContain(needle);
    }
  });
});
