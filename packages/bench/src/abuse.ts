/**
 * Abuse benchmark of the index service (`npm run bench:abuse`): the real `atomem-index`
 * process on loopback, honest clients beside hostile ones, bounded in time (it ends by itself).
 *
 * The service runs protocol v2 on a synthetic catalog vector file, with its defaults (rate
 * limit 600 / min per client address, timeouts, connection caps, body limits). Every simulated
 * client has its own loopback address (127.0.x.y: Linux routes 127/8 to loopback), as clients on
 * the internet do.
 *
 * Phases: quiet (`--quiet-seconds`, honest clients only: the quiet latency), abuse
 * (`--seconds`, honest and hostile at once). Concurrency `--clients` (default 50), of which
 * `--hostile` (default 10 %) are hostile, cycling through:
 * - slow bodies: report POSTs that announce 64 KB and send a byte every 500 ms, as many sockets
 *   as the client may open;
 * - oversized bodies: report POSTs of 64 KB, over the body limit, as fast as possible;
 * - header rotation: requests as fast as possible with a fresh client header and
 *   `x-forwarded-for` each time (to dodge the rate limit);
 * - connection floods: idle sockets up to the per-address cap.
 * Honest clients do one request every `--think-ms` (default 400 ms: well under the rate
 * limit), alternating the token key and the latest release. A health probe (own address, own
 * thread) asks every 100 ms.
 *
 * Reports: honest error rate, honest p50 / p99 quiet and under abuse, health p99, the
 * hostile requests' outcomes, the server's edge counters (metrics token). Figures are noisy on
 * a shared machine: the load average is printed with them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { Command, InvalidArgumentError } from 'commander';
import { INDEX_V2_PATHS, encodeCatalogVectors } from 'atomem/protocol';
import { mulberry32 } from './rng.js';

const EMB = 'abuse-bench@1';
const DIM = 64;
const METRICS_TOKEN = randomBytes(18).toString('base64url');

interface Opts {
  seconds: number;
  quietSeconds: number;
  clients: number;
  hostile: number;
  thinkMs: number;
  json?: string;
}

function int(name: string, min: number) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

/** One HTTP request from `localAddress`; resolves with status and body size (never rejects). */
function call(
  agent: Agent,
  port: number,
  method: 'GET' | 'POST',
  path: string,
  body?: string,
  headers: Record<string, string> = {},
  timeoutMs = 20_000,
): Promise<{ status: number; bytes: number; ms: number }> {
  const t0 = performance.now();
  return new Promise((done) => {
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers: { ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {}), ...headers },
        timeout: timeoutMs,
      },
      (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => done({ status: res.statusCode ?? 0, bytes, ms: performance.now() - t0 }));
        res.on('error', () => done({ status: 0, bytes, ms: performance.now() - t0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => done({ status: 0, bytes: 0, ms: performance.now() - t0 }));
    req.end(body);
  });
}

/** The health probe's thread: GET `path` every `everyMs` from `localAddress`, post `{ ms, status }` each time, stop on a message. */
const PROBE_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const { port, path, localAddress, everyMs } = workerData;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1, localAddress });
let stop = false;
parentPort.on('message', () => { stop = true; });
function once() {
  const t0 = performance.now();
  return new Promise((done) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => done({ ms: performance.now() - t0, status: res.statusCode || 0 }));
      res.on('error', () => done({ ms: performance.now() - t0, status: 0 }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => done({ ms: performance.now() - t0, status: 0 }));
    req.end();
  });
}
(async () => {
  while (!stop) {
    parentPort.postMessage(await once());
    await new Promise((r) => setTimeout(r, everyMs));
  }
  agent.destroy();
  process.exit(0);
})();
`;

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function unit(v: Float32Array): Float32Array {
  const n = Math.hypot(...v) || 1;
  return v.map((x) => x / n);
}

/** Start the real service (own process group) and wait for its ready line. */
async function startService(dataDir: string, catalog: string): Promise<{ child: ChildProcess; port: number }> {
  const repo = resolve(import.meta.dirname, '../../..');
  const child = spawn(
    process.execPath,
    [
      '-C',
      'atomem-source',
      '--import',
      'tsx',
      'packages/atomem-index/src/cli.ts',
      '--port',
      '0',
      '--data',
      dataDir,
      '--catalog-vectors',
      catalog,
      '--log-level',
      'error',
    ],
    { cwd: repo, env: { ...process.env, ATOMEM_METRICS_TOKEN: METRICS_TOKEN }, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  child.stderr!.on('data', (d: Buffer) => process.stderr.write(`[service] ${d}`));
  const port = await new Promise<number>((ok, fail) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /ready at http:\/\/127\.0\.0\.1:(\d+)/.exec(out);
      if (m) ok(Number(m[1]));
    });
    child.on('exit', (code) => fail(new Error(`the service exited (${code}) before it was ready`)));
  });
  return { child, port };
}

async function main(): Promise<void> {
  const o = new Command('bench:abuse')
    .description('abuse benchmark of atomem-index on loopback (ends by itself)')
    .option('--seconds <n>', 'abuse phase length', int('--seconds', 1), 60)
    .option('--quiet-seconds <n>', 'quiet phase length (honest clients only)', int('--quiet-seconds', 1), 15)
    .option('--clients <n>', 'concurrent clients in all', int('--clients', 2), 50)
    .option('--hostile <n>', 'of which hostile (default 10 %)', int('--hostile', 0))
    .option('--think-ms <ms>', "pause between an honest client's requests", int('--think-ms', 0), 400)
    .option('--json <file>', 'also write the figures as JSON')
    .parse()
    .opts<Opts>();
  const hostile = o.hostile ?? Math.round(o.clients / 10);
  const honest = o.clients - hostile;
  const dir = mkdtempSync(join(tmpdir(), 'atomem-abuse-'));
  const catalog = join(dir, 'catalog.bin');
  const uniform = mulberry32(7);
  const rng = {
    next: uniform,
    normal: () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform()),
  };
  const centres = Array.from({ length: 40 }, () => unit(Float32Array.from({ length: DIM }, () => rng.normal())));
  const near = (c: number, noise = 0.35) => unit(centres[c].map((x) => x + (noise * rng.normal()) / Math.sqrt(DIM)));
  const items = Array.from({ length: 2000 }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
  writeFileSync(
    catalog,
    encodeCatalogVectors(
      { id: EMB, dim: DIM },
      items,
      items.map((_, i) => near(i % 40)),
    ),
  );
  const { child, port } = await startService(join(dir, 'data'), catalog);
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      // already gone
    }
  };
  process.on('exit', stop);
  const agents: Agent[] = [];
  const agentAt = (addr: string, keepAlive = true) => {
    const a = new Agent({ keepAlive, maxSockets: 4, localAddress: addr } as ConstructorParameters<typeof Agent>[0] & { localAddress: string });
    agents.push(a);
    return a;
  };
  try {
    type Sample = { phase: 'quiet' | 'abuse'; status: number; ms: number; route: string };
    const samples: Sample[] = [];
    const healthMs: { phase: 'quiet' | 'abuse'; ms: number; status: number }[] = [];
    const hostileOut = new Map<string, Map<number, number>>();
    let phase = 'quiet' as 'quiet' | 'abuse' | 'done';
    // why: read through a function, so TypeScript does not narrow it across awaits
    const current = () => phase;
    const note = (kind: string, status: number) => {
      const m = hostileOut.get(kind) ?? new Map<number, number>();
      m.set(status, (m.get(status) ?? 0) + 1);
      hostileOut.set(kind, m);
    };

    const honestClient = async (n: number) => {
      const agent = agentAt(`127.0.1.${n + 1}`);
      let step = n;
      while (phase !== 'done') {
        const p = phase;
        const kind = step++ % 2;
        let r: { status: number; ms: number };
        let route: string;
        if (kind === 0) {
          route = 'v2.tokenKey';
          r = await call(agent, port, 'GET', INDEX_V2_PATHS.tokenKey);
        } else {
          route = 'v2.latest';
          r = await call(agent, port, 'GET', INDEX_V2_PATHS.latest);
        }
        // 404 on latest = no release yet: a correct answer, not an error
        const ok = (r.status >= 200 && r.status < 300) || (route === 'v2.latest' && r.status === 404);
        if (current() !== 'done') samples.push({ phase: p, status: ok ? 200 : r.status, ms: r.ms, route });
        await sleep(o.thinkMs * (0.5 + rng.next()));
      }
    };

    const slowBody = async (addr: string, until: () => boolean) => {
      const open = new Set<Socket>();
      let ending = false;
      while (!until()) {
        while (open.size < 64 && !until()) {
          const s = connect({ port, host: '127.0.0.1', localAddress: addr });
          open.add(s);
          s.on('error', () => {});
          s.on('close', () => {
            open.delete(s);
            // 0 = closed by the server (timeout or cap), not by us at the end
            if (!ending) note('slow body', 0);
          });
          s.on('connect', () =>
            s.write(`POST ${INDEX_V2_PATHS.report} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 65536\r\n\r\n{`),
          );
          const t = setInterval(() => (s.destroyed ? clearInterval(t) : s.write(' ')), 500);
          s.on('close', () => clearInterval(t));
          await sleep(5);
        }
        await sleep(200);
      }
      ending = true;
      for (const s of open) s.destroy();
    };
    const oversized = async (addr: string, until: () => boolean) => {
      const agent = agentAt(addr);
      while (!until()) {
        const r = await call(agent, port, 'POST', INDEX_V2_PATHS.report, JSON.stringify({ pad: 'x'.repeat(65_536) }));
        note('oversized body', r.status);
      }
    };
    const rotation = async (addr: string, until: () => boolean) => {
      const agent = agentAt(addr);
      let i = 0;
      while (!until()) {
        const r = await call(agent, port, 'GET', INDEX_V2_PATHS.tokenKey, undefined, {
          'x-atomem-client': `rot-${i}-${randomBytes(6).toString('hex')}`,
          'x-forwarded-for': `198.51.100.${i++ % 250}`,
        });
        note('header rotation', r.status);
      }
    };
    const flood = async (addr: string, until: () => boolean) => {
      const open = new Set<Socket>();
      let ending = false;
      while (!until()) {
        if (open.size < 200) {
          const s = connect({ port, host: '127.0.0.1', localAddress: addr });
          open.add(s);
          s.on('error', () => {});
          s.on('close', () => {
            open.delete(s);
            if (!ending) note('connection flood', 0);
          });
          await sleep(2);
        } else await sleep(100);
      }
      ending = true;
      for (const s of open) s.destroy();
    };
    const kinds = [slowBody, oversized, rotation, flood];

    // why: the probe runs on its own thread (its own event loop), as a load balancer's probe runs
    // outside the clients: otherwise 50 clients' callbacks in this process delay the probe's own
    // timer and response handling, and health p99 measures this process, not the service.
    const probe = new Worker(PROBE_SOURCE, { eval: true, workerData: { port, path: INDEX_V2_PATHS.health, localAddress: '127.0.8.1', everyMs: 100 } });
    probe.on('message', (r: { ms: number; status: number }) => {
      const p = current();
      if (p !== 'done') healthMs.push({ phase: p, ms: r.ms, status: r.status });
    });
    const prober = new Promise<void>((done) => probe.once('exit', () => done()));

    process.stderr.write(`quiet phase: ${honest} honest clients, ${o.quietSeconds} s…\n`);
    const honestRuns = Array.from({ length: honest }, (_, n) => honestClient(n));
    await sleep(o.quietSeconds * 1000);
    phase = 'abuse';
    process.stderr.write(`abuse phase: + ${hostile} hostile clients, ${o.seconds} s…\n`);
    const abuseEnd = Date.now() + o.seconds * 1000;
    const until = () => Date.now() >= abuseEnd;
    const hostileRuns = Array.from({ length: hostile }, (_, n) => kinds[n % kinds.length](`127.0.2.${n + 1}`, until));
    const ticker = setInterval(
      () => process.stderr.write(`  ${Math.max(0, Math.round((abuseEnd - Date.now()) / 1000))} s left, ${samples.length} honest requests\n`),
      10_000,
    );
    await sleep(o.seconds * 1000);
    clearInterval(ticker);
    phase = 'done';
    probe.postMessage('stop');
    await Promise.all([...honestRuns, ...hostileRuns, prober]);
    const metrics = await call(agentAt('127.0.8.2'), port, 'GET', '/v2/metrics', undefined, { authorization: `Bearer ${METRICS_TOKEN}` }).then(async () => {
      const res = await fetch(`http://127.0.0.1:${port}/v2/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      return (await res.json()) as { edge?: unknown; loopDelayMs?: unknown; rssBytes?: number };
    });

    const of = (p: 'quiet' | 'abuse') => samples.filter((s) => s.phase === p);
    const q = of('quiet');
    const a = of('abuse');
    const errors = (xs: Sample[]) => xs.filter((s) => s.status !== 200);
    const hq = healthMs.filter((h) => h.phase === 'quiet').map((h) => h.ms);
    const ha = healthMs.filter((h) => h.phase === 'abuse');
    const quietP99 = pct(
      q.map((s) => s.ms),
      0.99,
    );
    const abuseP99 = pct(
      a.map((s) => s.ms),
      0.99,
    );
    const result = {
      config: { ...o, hostile, honest, cpus: 2, loadavg: loadavg().map((x) => Math.round(x * 100) / 100) },
      honest: {
        quiet: {
          requests: q.length,
          errors: errors(q).length,
          p50: pct(
            q.map((s) => s.ms),
            0.5,
          ),
          p99: quietP99,
        },
        abuse: {
          requests: a.length,
          errors: errors(a).length,
          errorStatuses: [...new Set(errors(a).map((s) => s.status))],
          p50: pct(
            a.map((s) => s.ms),
            0.5,
          ),
          p99: abuseP99,
        },
        p99Ratio: abuseP99 / quietP99,
      },
      health: {
        quietP99: pct(hq, 0.99),
        abuseP50: pct(
          ha.map((h) => h.ms),
          0.5,
        ),
        abuseP99: pct(
          ha.map((h) => h.ms),
          0.99,
        ),
        abuseFailures: ha.filter((h) => h.status !== 200).length,
      },
      hostile: Object.fromEntries([...hostileOut].map(([k, m]) => [k, Object.fromEntries(m)])),
      server: metrics,
    };
    const f = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
    console.log(
      `\n## bench:abuse — ${o.clients} clients (${hostile} hostile), quiet ${o.quietSeconds} s + abuse ${o.seconds} s, load average ${result.config.loadavg.join(' / ')} on 2 cores\n`,
    );
    console.log('| | requests | errors | p50 ms | p99 ms |');
    console.log('|---|---:|---:|---:|---:|');
    console.log(`| honest, quiet | ${q.length} | ${errors(q).length} | ${f(result.honest.quiet.p50)} | ${f(quietP99)} |`);
    console.log(`| honest, under abuse | ${a.length} | ${errors(a).length} | ${f(result.honest.abuse.p50)} | ${f(abuseP99)} |`);
    console.log(`| health, under abuse | ${ha.length} | ${result.health.abuseFailures} | ${f(result.health.abuseP50)} | ${f(result.health.abuseP99)} |`);
    console.log(
      `\nhonest p99 under abuse / quiet: ${f(result.honest.p99Ratio)}× (target ≤ 5×); health p99 ${f(result.health.abuseP99)} ms (target ≤ 50 ms); honest errors ${errors(a).length} (target 0)`,
    );
    console.log(`hostile outcomes (status → count; 0 = connection closed by the server): ${JSON.stringify(result.hostile)}`);
    console.log(`server edge counters: ${JSON.stringify(metrics.edge)}; loop delay ${JSON.stringify(metrics.loopDelayMs)}`);
    if (o.json) writeFileSync(o.json, JSON.stringify(result, null, 2));
  } finally {
    for (const ag of agents) ag.destroy();
    stop();
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:abuse: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
