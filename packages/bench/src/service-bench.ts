/**
 * `npm run bench:service`: the index service as its operators would measure it, on loopback.
 * Every server is its own process (the real `atomem-index` CLI, a bare fastify baseline, a
 * round-robin proxy, a slow-client crowd); this process only drives load and measures.
 *
 * 1. Baseline in the same run: a bare fastify hello (./hello-server.ts): GET p50/p99 and
 *    requests/s at the same concurrency, and POSTs answered with `connection: close` (as the
 *    index answers reports).
 * 2. SQLite (the default store): health GET p50/p99; reports accepted per second at concurrency
 *    `--concurrency` (tokens are minted BEFORE the timed phase, through the real issuance route:
 *    the device's blinding is pure JS, ~30–60 ms a token); release GET p50/p99 on an instance
 *    with short epochs whose release was produced by real reports. Then `--sync normal` against
 *    `--sync full` (an fsync per commit): two instances, `--rounds` alternating rounds of reports.
 * 3. Crowd: `--crowd` slow clients (./slow-crowd.ts, own process) from `--crowd-addresses`
 *    loopback addresses against the default caps, while probes on fresh connections measure
 *    health (main port and `--health-port`) and release reads; with `--ipv6-aliases` (root:
 *    adds fd00:a7e::/64 addresses to `lo` and removes them after) the same from one IPv6 /64.
 * 4. PostgreSQL (Debian's, a throwaway cluster as the tests start it; skipped with the reason
 *    when unavailable): two instances behind a round-robin proxy (./round-robin-proxy.ts):
 *    reports/s through the proxy with one and with two instances (warmed up, then `--rounds`
 *    alternating rounds), each token sent to both instances at once (spends counted, acknowledged
 *    vs stored in PostgreSQL), the release bytes of both instances compared.
 * 5. Stall: in this process, a 20k-item space and 3,000 reports' cells, the epoch closed with
 *    the release built in its worker thread: event-loop delay (monitorEventLoopDelay) max/p99.
 *
 * 6. `--faults` (instead of the above): the fault matrix of ./service-faults.ts.
 *
 * Figures on a shared machine are noisy: the load average and CPU seconds per process are printed.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { cpus, loadavg, tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import { Command, InvalidArgumentError } from 'commander';
import { INDEX_V2_PATHS, encodeCatalogVectors } from 'atomem/protocol';
import { createIndexService } from 'atomem-index';
import { mulberry32 } from './rng.js';
import { runFaults } from './service-faults.js';
import { startPostgres, type PostgresCluster } from '../../../test/fixtures/postgres.js';

const REPO = resolve(import.meta.dirname, '../../..');
const ATTESTER = randomBytes(18).toString('base64url');
const METRICS = randomBytes(18).toString('base64url');
const SHORT_EPOCH_MS = 6000;

interface Opts {
  reports: number;
  concurrency: number;
  seconds: number;
  crowd: number;
  crowdAddresses: number;
  crowdSeconds: number;
  ipv6Aliases?: boolean;
  postgres: boolean;
  throughput: boolean;
  crowdPhase: boolean;
  stall: boolean;
  syncCompare: boolean;
  stallItems: number;
  stallReports: number;
  rounds: number;
  json?: string;
  faults?: boolean;
  faultRows?: string;
  seed: number;
}

function int(name: string, min: number) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');
const log = (s: string) => process.stderr.write(`${s}\n`);

type Result = { status: number; ms: number; bytes: number };

/** One request; never rejects (status 0 = connection reset, refused or timed out). */
function call(
  url: string,
  o: { method?: 'GET' | 'POST'; body?: string; agent?: Agent | false; localAddress?: string; headers?: Record<string, string>; timeoutMs?: number } = {},
): Promise<Result> {
  const t0 = performance.now();
  return new Promise((done) => {
    const body = o.body;
    const req = httpRequest(
      url,
      {
        method: o.method ?? 'GET',
        agent: o.agent ?? false,
        localAddress: o.agent ? undefined : o.localAddress,
        headers: {
          ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}),
          ...(o.agent ? {} : { connection: 'close' }),
          ...o.headers,
        },
      },
      (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => done({ status: res.statusCode ?? 0, ms: performance.now() - t0, bytes }));
        res.on('error', () => done({ status: 0, ms: performance.now() - t0, bytes }));
      },
    );
    req.setTimeout(o.timeoutMs ?? 20_000, () => req.destroy(new Error('timeout')));
    req.on('error', () => done({ status: 0, ms: performance.now() - t0, bytes: 0 }));
    req.end(body);
  });
}

/** CPU seconds (user + system) of a process so far, from /proc (Linux). */
function cpuSeconds(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return Number.NaN;
  }
}
/** CPU seconds of a process and all its direct children (PostgreSQL: the postmaster and its backends), from /proc. */
function treeCpuSeconds(pid: number): number {
  let sum = cpuSeconds(pid);
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ');
      if (Number(f[1]) === pid) sum += (Number(f[11]) + Number(f[12])) / 100;
    } catch {
      // gone meanwhile
    }
  }
  return sum;
}

/** Busy and total CPU jiffies of the whole machine (/proc/stat). */
function machineJiffies(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3] - (f[4] ?? 0), total };
}

function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

const children: ChildProcess[] = [];
function stopChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  const gone = new Promise<void>((r) => c.once('exit', () => r()));
  try {
    process.kill(-c.pid!, 'SIGTERM');
  } catch {
    // already gone
  }
  const kill = setTimeout(() => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }, 10_000);
  return gone.finally(() => clearTimeout(kill));
}

/** Spawn a TypeScript entry (own process group) and wait for `ready at URL` on its stdout. */
async function startProcess(
  name: string,
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string; healthUrl?: string; out: () => string }> {
  const child = spawn(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', script, ...args], {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr!.on('data', (d: Buffer) => {
    err += d;
    if (err.length > 20_000) err = err.slice(-10_000);
  });
  const ready = await new Promise<{ url: string; healthUrl?: string }>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`${name}: not ready after 180 s\n${out}\n${err}`)), 180_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /ready at (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        const h = /health also at (http:\/\/\S+)\/v2\/health/.exec(out);
        ok({ url: m[1], healthUrl: h?.[1] });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      fail(new Error(`${name} exited (${code}) before it was ready\n${err}`));
    });
  });
  // why: a service on '::' reports http://[::]:PORT; clients connect to loopback
  const loop = (u: string) => u.replace('[::]', '127.0.0.1').replace('0.0.0.0', '127.0.0.1');
  return { child, url: loop(ready.url), healthUrl: ready.healthUrl && loop(ready.healthUrl), out: () => out };
}

function startService(dataDir: string, catalog: string, extra: string[]) {
  return startProcess(
    'atomem-index',
    'packages/atomem-index/src/cli.ts',
    ['--port', '0', '--data', dataDir, '--catalog-vectors', catalog, '--rate-max', '0', '--log-level', 'error', ...extra],
    { ATOMEM_ATTESTER_KEY: ATTESTER, ATOMEM_METRICS_TOKEN: METRICS },
  );
}

interface Health {
  epoch: number;
  epochMs: number;
  graceMs: number;
  ldp: { cohorts: number; g: number };
  latestRelease: number | null;
}
async function health(url: string): Promise<Health> {
  return (await (await fetch(`${url}${INDEX_V2_PATHS.health}`)).json()) as Health;
}

// why: Node 20 does not pass the main thread's loader hooks (tsx) on to a worker; the worker registers tsx itself
const MINTER = new URL(
  `data:text/javascript,${encodeURIComponent(
    `import { register } from ${JSON.stringify(pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href.replace(/index\.cjs$/, 'index.mjs'))}; register(); await import(${JSON.stringify(new URL('./service-bench-minter.ts', import.meta.url).href)});`,
  )}`,
);

/** Mint `count` tokens for `epoch` on 2 worker threads (the timed phase comes after). */
async function mint(url: string, epoch: number, count: number): Promise<{ tokens: string[]; seconds: number }> {
  const t0 = performance.now();
  const threads = Math.min(2, count);
  const parts = Array.from({ length: threads }, (_, i) => Math.floor(count / threads) + (i < count % threads ? 1 : 0));
  let done = 0;
  const results = await Promise.all(
    parts.map(
      (n) =>
        new Promise<string[]>((ok, fail) => {
          const w = new Worker(MINTER, { workerData: { url, epoch, count: n, attesterKey: ATTESTER } });
          w.on('message', (m: { progress?: number; tokens?: string[] }) => {
            if (m.tokens) ok(m.tokens);
            else if (m.progress && ++done % 4 === 0) log(`  minted ~${done * 100} of ${count} tokens`);
          });
          w.on('error', fail);
          w.on('exit', (code) => code !== 0 && fail(new Error(`minter exited ${code}`)));
        }),
    ),
  );
  return { tokens: results.flat(), seconds: (performance.now() - t0) / 1000 };
}

/** GETs at concurrency `c` for `seconds`, each client on its own kept-alive connection and loopback address. */
async function getLoad(url: string, c: number, seconds: number, addrBase: number) {
  const agents = Array.from({ length: c }, (_, i) => new Agent({ keepAlive: true, maxSockets: 1, localAddress: `127.0.${addrBase}.${i + 1}` } as object));
  const ms: number[] = [];
  let failures = 0;
  let bytes = 0;
  const end = performance.now() + seconds * 1000;
  const t0 = performance.now();
  await Promise.all(
    agents.map(async (agent) => {
      while (performance.now() < end) {
        const r = await call(url, { agent });
        if (r.status !== 200) failures++;
        ms.push(r.ms);
        bytes = r.bytes;
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  for (const a of agents) a.destroy();
  return { requests: ms.length, perSecond: ms.length / elapsed, p50: pct(ms, 0.5), p99: pct(ms, 0.99), failures, bytes };
}

/** POST `bodies` at concurrency `c`, one connection per request (as devices send reports). */
async function postLoad(url: string, bodies: string[], c: number, addrBase: number, pids: number[] = [], postmaster?: number) {
  const statuses = new Map<number, number>();
  const ms: number[] = [];
  let next = 0;
  const cpu0 = pids.map(cpuSeconds);
  const pg0 = postmaster !== undefined ? treeCpuSeconds(postmaster) : Number.NaN;
  const m0 = machineJiffies();
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: c }, async (_, i) => {
      const localAddress = `127.0.${addrBase}.${i + 1}`;
      while (next < bodies.length) {
        const r = await call(url, { method: 'POST', body: bodies[next++], localAddress });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        ms.push(r.ms);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  const self = process.cpuUsage(self0);
  const accepted = (statuses.get(202) ?? 0) + (statuses.get(200) ?? 0);
  return {
    sent: bodies.length,
    accepted,
    statuses: Object.fromEntries(statuses),
    seconds: elapsed,
    perSecond: accepted / elapsed,
    p50: pct(ms, 0.5),
    p99: pct(ms, 0.99),
    ms,
    cpuSeconds: {
      driver: (self.user + self.system) / 1e6,
      servers: pids.map((p, i) => cpuSeconds(p) - cpu0[i]),
      postgres: postmaster !== undefined ? treeCpuSeconds(postmaster) - pg0 : Number.NaN,
    },
    /** Share of the machine's CPU time that was busy (every process, not only this bench's). */
    machineBusy: ((m1) => (m1.busy - m0.busy) / Math.max(1, m1.total - m0.total))(machineJiffies()),
  };
}

type PostRun = Awaited<ReturnType<typeof postLoad>>;

/** Rounds of one configuration as one run: sums, and percentiles over every request. */
function combine(runs: PostRun[]): PostRun {
  const ms = runs.flatMap((r) => r.ms);
  const sum = (f: (r: PostRun) => number) => runs.reduce((x, r) => x + f(r), 0);
  const seconds = sum((r) => r.seconds);
  const accepted = sum((r) => r.accepted);
  const statuses: Record<string, number> = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.statuses)) statuses[k] = (statuses[k] ?? 0) + v;
  return {
    sent: sum((r) => r.sent),
    accepted,
    statuses,
    seconds,
    perSecond: accepted / seconds,
    p50: pct(ms, 0.5),
    p99: pct(ms, 0.99),
    ms,
    cpuSeconds: {
      driver: sum((r) => r.cpuSeconds.driver),
      servers: runs[0].cpuSeconds.servers.map((_, i) => sum((r) => r.cpuSeconds.servers[i])),
      postgres: sum((r) => r.cpuSeconds.postgres),
    },
    machineBusy: sum((r) => r.machineBusy * r.seconds) / seconds,
  };
}

function reportBodies(tokens: string[], epoch: number, ldp: { cohorts: number; g: number }, rnd: () => number): string[] {
  return tokens.map((token) => JSON.stringify({ v: 2, epoch, token, report: { cohort: Math.floor(rnd() * ldp.cohorts), bucket: Math.floor(rnd() * ldp.g) } }));
}

/** A synthetic catalog vector file: `n` items around 40 centres. */
function writeCatalog(file: string, n: number, dim: number, seed: number): void {
  const uniform = mulberry32(seed);
  const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  const unit = (v: Float32Array) => {
    const s = Math.hypot(...v) || 1;
    return v.map((x) => x / s);
  };
  const centres = Array.from({ length: 40 }, () => unit(Float32Array.from({ length: dim }, normal)));
  const items = Array.from({ length: n }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
  writeFileSync(
    file,
    encodeCatalogVectors(
      { id: 'service-bench@1', dim },
      items,
      items.map((_, i) => unit(centres[i % 40].map((x) => x + (0.35 * normal()) / Math.sqrt(dim)))),
    ),
  );
}

/**
 * Produce a release on short-epoch instances: tokens for the next epoch, reports in it (spread
 * over `urls`), then wait for its close. Returns the released epoch.
 */
async function seedRelease(urls: string[], rnd: () => number): Promise<number> {
  const h = await health(urls[0]);
  const target = h.epoch + 1;
  const { tokens } = await mint(urls[0], target, 8);
  while ((await health(urls[0])).epoch < target) await sleep(100);
  const bodies = reportBodies(tokens, target, h.ldp, rnd);
  for (let i = 0; i < bodies.length; i++) {
    const r = await call(`${urls[i % urls.length]}${INDEX_V2_PATHS.report}`, { method: 'POST', body: bodies[i] });
    if (r.status !== 202) throw new Error(`seeding a release: report answered ${r.status}`);
  }
  const deadline = Date.now() + 4 * SHORT_EPOCH_MS;
  while (Date.now() < deadline) {
    const all = await Promise.all(urls.map((u) => health(u)));
    if (all.every((x) => x.latestRelease === target)) return target;
    await sleep(200);
  }
  throw new Error(`epoch ${target} was not released within ${(4 * SHORT_EPOCH_MS) / 1000} s`);
}

async function metrics(url: string): Promise<{ edge?: Record<string, number>; rssBytes?: number; loopDelayMs?: unknown }> {
  return (await (await fetch(`${url}/v2/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })).json()) as never;
}

/** Probes on fresh connections every `everyMs` while the crowd runs. */
async function probeDuring(targets: { name: string; url: string; localAddress: string }[], seconds: number, everyMs: number) {
  const out = new Map<string, Result[]>(targets.map((t) => [t.name, []]));
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    targets.map(async (t) => {
      while (performance.now() < end) {
        const tick = performance.now();
        out.get(t.name)!.push(await call(t.url, { localAddress: t.localAddress, timeoutMs: 5000 }));
        await sleep(Math.max(0, everyMs - (performance.now() - tick)));
      }
    }),
  );
  return Object.fromEntries(
    [...out].map(([k, rs]) => [
      k,
      {
        probes: rs.length,
        failures: rs.filter((r) => r.status !== 200).length,
        p50: pct(
          rs.map((r) => r.ms),
          0.5,
        ),
        p99: pct(
          rs.map((r) => r.ms),
          0.99,
        ),
        max: Math.max(...rs.map((r) => r.ms)),
      },
    ]),
  );
}

async function crowdRun(
  label: string,
  svc: { child: ChildProcess; url: string; healthUrl?: string },
  releaseEpoch: number,
  addresses: string[],
  perAddress: number,
  seconds: number,
  probeFrom: { v4: boolean },
) {
  const port = new URL(svc.url).port;
  const crowd = spawn(
    process.execPath,
    [
      '-C',
      'atomem-source',
      '--import',
      'tsx',
      'packages/bench/src/slow-crowd.ts',
      '--port',
      port,
      '--host',
      addresses[0].includes(':') ? '::1' : '127.0.0.1',
      '--addresses',
      addresses.join(','),
      '--per-address',
      String(perAddress),
    ],
    { cwd: REPO, stdio: ['pipe', 'pipe', 'inherit'], detached: true },
  );
  children.push(crowd);
  let last: Record<string, number> = {};
  crowd.stdout!.on('data', (d: Buffer) => {
    const lines = d.toString().trim().split('\n');
    try {
      last = JSON.parse(lines[lines.length - 1]);
    } catch {
      // partial line
    }
  });
  const target = addresses.length * perAddress;
  const rampEnd = Date.now() + 20_000;
  while (Date.now() < rampEnd && (last.connects ?? 0) < Math.min(target, 4096)) await sleep(250);
  await sleep(2000);
  const rss0 = rssMb(svc.child.pid!);
  log(`  ${label}: crowd ramped (${JSON.stringify(last)}), probing ${seconds} s…`);
  const health = probeFrom.v4 ? '127.0.9.1' : '::1';
  const probes = await probeDuring(
    [
      {
        name: 'health (main port)',
        url: `${svc.url.replace('127.0.0.1', probeFrom.v4 ? '127.0.0.1' : '[::1]')}${INDEX_V2_PATHS.health}`,
        localAddress: health,
      },
      { name: 'release GET (main port)', url: `${svc.url}${INDEX_V2_PATHS.release(releaseEpoch)}`, localAddress: '127.0.9.2' },
      ...(svc.healthUrl ? [{ name: 'health (--health-port)', url: `${svc.healthUrl}${INDEX_V2_PATHS.health}`, localAddress: '127.0.9.3' }] : []),
    ],
    seconds,
    50,
  );
  const rssDuring = rssMb(svc.child.pid!);
  const m = await metrics(svc.url);
  const crowdAtEnd = { ...last };
  crowd.stdin!.end();
  await new Promise((r) => crowd.once('exit', r));
  return { label, addresses: addresses.length, perAddress, crowd: crowdAtEnd, probes, serviceRssMb: { ramped: rss0, end: rssDuring }, edge: m.edge };
}

function printProbes(r: Awaited<ReturnType<typeof crowdRun>>): void {
  console.log(`\n### ${r.label}: ${r.addresses * r.perAddress} slow clients from ${r.addresses} addresses (${r.perAddress} each), other process\n`);
  console.log('| probe (fresh connection every 50 ms) | probes | failures (reset / not 200) | p50 ms | p99 ms | max ms |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const [k, v] of Object.entries(r.probes)) console.log(`| ${k} | ${v.probes} | ${v.failures} | ${f1(v.p50)} | ${f1(v.p99)} | ${f1(v.max)} |`);
  console.log(
    `\ncrowd counters at the end: ${JSON.stringify(r.crowd)}; service edge: ${JSON.stringify(r.edge)}; service RSS ${r.serviceRssMb.ramped} MB ramped → ${r.serviceRssMb.end} MB at the end`,
  );
}

async function stallRun(items: number, reports: number) {
  const dir = mkdtempSync(join(tmpdir(), 'atomem-stall-'));
  try {
    const uniform = mulberry32(5);
    const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
    const dim = 32;
    const centres = Array.from({ length: 200 }, () => Float32Array.from({ length: dim }, normal));
    const ids = Array.from({ length: items }, (_, i) => `sku-${String(i).padStart(6, '0')}`);
    const vectors = ids.map((_, i) => {
      const v = centres[i % 200].map((x) => x + 0.5 * normal());
      const n = Math.hypot(...v);
      return v.map((x) => x / n);
    });
    const clock = { now: 1000 * 86_400_000 + 3_600_000 };
    const svc = createIndexService({
      dataDir: join(dir, 'data'),
      rateLimit: false,
      v2: { space: { embedderId: 'stall@1', ids, vectors }, now: () => clock.now, tickMs: 0, minReports: 1, minContributors: 0 },
    });
    const t0 = performance.now();
    await svc.ready;
    const loadSeconds = (performance.now() - t0) / 1000;
    const e = svc.v2.epoch();
    const { cohorts, g } = svc.v2.ldp;
    for (let i = 0; i < reports; i++)
      await svc.v2.backend.spend(randomBytes(32).toString('hex'), e, Math.floor(uniform() * cohorts), Math.floor(uniform() * g));
    clock.now += svc.v2.epochMs * 2;
    const h = monitorEventLoopDelay({ resolution: 1 });
    h.enable();
    const a0 = performance.now();
    const release = await svc.v2.aggregate(e);
    const aggregateSeconds = (performance.now() - a0) / 1000;
    h.disable();
    await svc.close();
    return {
      items,
      reports,
      cohorts,
      loadSeconds,
      aggregateSeconds,
      released: release !== undefined,
      loopDelayMs: { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * SQLite `--sync normal`, `group` (the default) and `full` in the same run: three instances (own
 * data dirs), tokens minted for each before the timed phase, then `rounds` alternating rounds of
 * reports (normal, group, full, normal, …) so a change of the machine's load hits all alike.
 */
async function syncCompare(dir: string, catalog: string, o: Opts, rnd: () => number) {
  log('SQLite: --sync normal vs group vs full…');
  const levels = ['normal', 'group', 'full'] as const;
  const inst = await Promise.all(levels.map((l) => startService(join(dir, `sqlite-sync-${l}`), catalog, ['--sync', l])));
  const hs = await Promise.all(inst.map((i) => health(i.url)));
  const bodies: string[][] = [];
  for (let k = 0; k < inst.length; k++) {
    log(`  minting ${o.reports} tokens for the --sync ${levels[k]} instance (before the timed phase)…`);
    bodies.push(reportBodies((await mint(inst[k].url, hs[k].epoch, o.reports)).tokens, hs[k].epoch, hs[k].ldp, rnd));
  }
  const runs: PostRun[][] = levels.map(() => []);
  const per = Math.ceil(o.reports / o.rounds);
  for (let r = 0; r < o.rounds; r++) {
    for (let k = 0; k < inst.length; k++) {
      runs[k].push(await postLoad(`${inst[k].url}${INDEX_V2_PATHS.report}`, bodies[k].slice(r * per, (r + 1) * per), o.concurrency, 3, [inst[k].child.pid!]));
    }
  }
  await Promise.all(inst.map((i) => stopChild(i.child)));
  const [normal, group, full] = runs.map(combine);
  console.log(`\n### SQLite --sync normal vs group vs full (${o.rounds} alternating rounds, ${o.reports} reports each, concurrency ${o.concurrency})\n`);
  console.log('| --sync | accepted | per second | p50 ms | p99 ms | failures | service CPU ms per report | machine CPU busy |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const [name, r] of [
    ['normal', normal],
    ['group (default)', group],
    ['full', full],
  ] as const)
    console.log(
      `| ${name} | ${r.accepted} | ${f1(r.perSecond)} | ${f1(r.p50)} | ${f1(r.p99)} | ${r.sent - r.accepted} | ${((1000 * r.cpuSeconds.servers[0]) / Math.max(1, r.accepted)).toFixed(2)} | ${Math.round(100 * r.machineBusy)} % |`,
    );
  for (const [name, r] of [
    ['group', group],
    ['full', full],
  ] as const)
    console.log(
      `${name} / normal: ${(r.perSecond / normal.perSecond).toFixed(2)}× the accepted reports per second, p99 ${f1(r.p99)} vs ${f1(normal.p99)} ms (${(r.p99 / normal.p99).toFixed(2)}×).`,
    );
  return { normal: { ...normal, ms: undefined }, group: { ...group, ms: undefined }, full: { ...full, ms: undefined } };
}

async function main(): Promise<void> {
  const o = new Command('bench:service')
    .description(
      'index service on loopback: throughput and latency against a bare fastify in the same run, crowds, two instances on PostgreSQL, the aggregation stall',
    )
    .option('--reports <n>', 'reports (pre-minted tokens) per throughput run', int('--reports', 10), 1000)
    .option('--rounds <n>', 'alternating rounds of one and two instances (the reports split between them)', int('--rounds', 1), 2)
    .option('--concurrency <n>', 'concurrent clients', int('--concurrency', 1), 50)
    .option('--seconds <n>', 'length of each GET latency run', int('--seconds', 1), 5)
    .option('--crowd <n>', 'slow clients in the crowd', int('--crowd', 0), 5000)
    .option('--crowd-addresses <n>', 'loopback addresses of the crowd (127.0.10.x / 127.0.11.x)', int('--crowd-addresses', 1), 100)
    .option('--crowd-seconds <n>', 'probing time under the crowd', int('--crowd-seconds', 1), 30)
    .option('--ipv6-aliases', 'also a crowd from one IPv6 /64: adds fd00:a7e::1–80/128 to lo (root) and removes them after')
    .option('--no-postgres', 'skip the PostgreSQL runs')
    .option('--no-throughput', 'skip the baseline and the SQLite throughput runs')
    .option('--no-crowd-phase', 'skip the crowd runs')
    .option('--no-stall', 'skip the aggregation stall run')
    .option('--no-sync-compare', 'skip the SQLite --sync normal vs --sync full report run (part of the throughput phase)')
    .option('--stall-items <n>', 'items of the stall run', int('--stall-items', 100), 20_000)
    .option('--stall-reports <n>', 'reports of the stall run', int('--stall-reports', 1), 3000)
    .option('--json <file>', 'also write the figures as JSON')
    .option('--faults', 'run the fault matrix only (./service-faults.ts; root: mounts a tmpfs and a loop device)')
    .option(
      '--fault-rows <list>',
      'with --faults: these rows only (disk-full, disk-full-close, read-only, io-error, power-cut, power-cut-full, clock, sigkill-close, postgres)',
    )
    .option('--seed <n>', 'with --faults: seed of the reports', int('--seed', 0), 1)
    .parse()
    .opts<Opts>();
  if (o.faults) {
    await runFaults({ seed: o.seed, only: o.faultRows?.split(',').map((s) => s.trim()), json: o.json });
    return;
  }
  const c = o.concurrency;
  if (c > 250) throw new InvalidArgumentError('--concurrency at most 250 (one loopback address per client)');
  const dir = mkdtempSync(join(tmpdir(), 'atomem-service-bench-'));
  const catalog = join(dir, 'catalog.bin');
  writeCatalog(catalog, 2000, 64, 7);
  const rnd = mulberry32(11);
  const result: Record<string, unknown> = { config: { ...o, cpus: cpus().length, loadavgStart: loadavg().map((x) => Math.round(x * 100) / 100) } };
  let cluster: PostgresCluster | undefined;
  const aliases: string[] = [];
  const cleanup = async () => {
    await Promise.all(children.map(stopChild));
    for (const a of aliases) spawnSync('ip', ['-6', 'addr', 'del', `${a}/128`, 'dev', 'lo']);
    aliases.length = 0;
    await cluster?.stop();
    cluster = undefined;
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('SIGINT', () => {
    void cleanup().finally(() => process.exit(130));
  });
  try {
    console.log(
      `## bench:service — concurrency ${c}, ${o.reports} reports per throughput run, ${cpus().length} cores, load average ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' / ')} at start\n`,
    );
    // SQLite: release instance (short epochs, dual-stack for the IPv6 crowd)
    log('SQLite: release instance (short epochs)…');
    const rel = await startService(join(dir, 'sqlite-rel'), catalog, [
      '--host',
      '::',
      '--health-port',
      '0',
      '--epoch-ms',
      String(SHORT_EPOCH_MS),
      '--tick-ms',
      '200',
      '--min-reports',
      '5',
      '--min-contributors',
      '0',
    ]);
    const relEpoch = await seedRelease([rel.url], rnd);
    const sqRelease = await getLoad(`${rel.url}${INDEX_V2_PATHS.release(relEpoch)}`, c, o.seconds, 4);
    result.sqliteRelease = sqRelease;

    if (o.throughput) {
      // 1. baseline
      log('baseline: bare fastify hello…');
      const hello = await startProcess('hello', 'packages/bench/src/hello-server.ts', []);
      const helloGet = await getLoad(`${hello.url}/hello`, c, o.seconds, 4);
      const helloPost = await postLoad(
        `${hello.url}/hello`,
        Array.from({ length: o.reports }, () => '{"v":2}'),
        c,
        3,
        [hello.child.pid!],
      );
      await stopChild(hello.child);
      result.baseline = { get: helloGet, post: { ...helloPost, ms: undefined } };

      // 2. SQLite: throughput instance (one-day epochs)
      log('SQLite: throughput instance…');
      const sq = await startService(join(dir, 'sqlite-tp'), catalog, ['--health-port', '0']);
      const sqHealth = await getLoad(`${sq.url}${INDEX_V2_PATHS.health}`, c, o.seconds, 4);
      const sqHealthPort = await getLoad(`${sq.healthUrl}${INDEX_V2_PATHS.health}`, c, o.seconds, 5);
      const h = await health(sq.url);
      log(`  minting ${o.reports} tokens for epoch ${h.epoch} (before the timed phase)…`);
      const sqMint = await mint(sq.url, h.epoch, o.reports);
      const sqReports = await postLoad(`${sq.url}${INDEX_V2_PATHS.report}`, reportBodies(sqMint.tokens, h.epoch, h.ldp, rnd), c, 3, [sq.child.pid!]);
      await stopChild(sq.child);
      result.sqlite = {
        health: sqHealth,
        healthPort: sqHealthPort,
        mint: { tokens: sqMint.tokens.length, seconds: sqMint.seconds },
        reports: { ...sqReports, ms: undefined },
      };

      const s = { ...(result.sqlite as { health: typeof sqHealth; healthPort: typeof sqHealth; reports: typeof sqReports }), release: sqRelease };
      console.log('### Throughput and latency, one instance, SQLite (service and driver in separate processes)\n');
      console.log('| what | requests | per second | p50 ms | p99 ms | failures | bare fastify, same run | ratio (per second) |');
      console.log('|---|---:|---:|---:|---:|---:|---|---:|');
      const base = `GET /hello: ${f1(helloGet.perSecond)}/s, p50 ${f1(helloGet.p50)}, p99 ${f1(helloGet.p99)}`;
      console.log(
        `| GET /v2/health (main port, kept alive) | ${s.health.requests} | ${f1(s.health.perSecond)} | ${f1(s.health.p50)} | ${f1(s.health.p99)} | ${s.health.failures} | ${base} | ${(s.health.perSecond / helloGet.perSecond).toFixed(2)} |`,
      );
      console.log(
        `| GET /v2/health (--health-port) | ${s.healthPort.requests} | ${f1(s.healthPort.perSecond)} | ${f1(s.healthPort.p50)} | ${f1(s.healthPort.p99)} | ${s.healthPort.failures} | ${base} | ${(s.healthPort.perSecond / helloGet.perSecond).toFixed(2)} |`,
      );
      console.log(
        `| GET /v2/releases/:epoch (${sqRelease.bytes} bytes) | ${s.release.requests} | ${f1(s.release.perSecond)} | ${f1(s.release.p50)} | ${f1(s.release.p99)} | ${s.release.failures} | ${base} | ${(s.release.perSecond / helloGet.perSecond).toFixed(2)} |`,
      );
      console.log(
        `| POST /v2/reports (accepted 202; one connection each) | ${s.reports.sent} | ${f1(s.reports.perSecond)} | ${f1(s.reports.p50)} | ${f1(s.reports.p99)} | ${s.reports.sent - s.reports.accepted} | POST /hello (connection: close): ${f1(helloPost.perSecond)}/s, p50 ${f1(helloPost.p50)}, p99 ${f1(helloPost.p99)} | ${(s.reports.perSecond / helloPost.perSecond).toFixed(2)} |`,
      );
      console.log(
        `\nTokens were minted before the timed phase (${sqMint.tokens.length} in ${f1(sqMint.seconds)} s on 2 threads: the device's blind-RSA blinding is pure JS). CPU seconds during the report run: service ${f1(sqReports.cpuSeconds.servers[0])} (${((1000 * sqReports.cpuSeconds.servers[0]) / Math.max(1, sqReports.accepted)).toFixed(2)} ms of CPU per accepted report), driver ${f1(sqReports.cpuSeconds.driver)}, of ${f1(sqReports.seconds * cpus().length)} s of CPU on ${cpus().length} cores (the machine was ${Math.round(100 * sqReports.machineBusy)} % busy, every process counted).`,
      );
      if (o.syncCompare) result.sync = await syncCompare(dir, catalog, o, rnd);
    } else
      console.log(
        `release GET (${sqRelease.bytes} bytes, SQLite, kept alive, concurrency ${c}): ${f1(sqRelease.perSecond)}/s, p50 ${f1(sqRelease.p50)} ms, p99 ${f1(sqRelease.p99)} ms, ${sqRelease.failures} failures`,
      );
    // 3. crowds
    if (o.crowdPhase && o.crowd > 0) {
      log('crowd (IPv4)…');
      const n = o.crowdAddresses;
      const addrs = Array.from({ length: n }, (_, i) => `127.0.${10 + Math.floor(i / 250)}.${(i % 250) + 1}`);
      const v4 = await crowdRun('IPv4 crowd', rel, relEpoch, addrs, Math.ceil(o.crowd / n), o.crowdSeconds, { v4: true });
      printProbes(v4);
      result.crowd = { v4 };
      if (o.ipv6Aliases) {
        if (process.getuid?.() !== 0) {
          console.log('\nIPv6 /64 crowd: not run (adding loopback aliases needs root).');
        } else {
          for (let i = 1; i <= 80; i++) {
            const a = `fd00:a7e::${i.toString(16)}`;
            const r = spawnSync('ip', ['-6', 'addr', 'add', `${a}/128`, 'dev', 'lo', 'nodad']);
            if (r.status === 0) aliases.push(a);
          }
          if (aliases.length === 0) console.log('\nIPv6 /64 crowd: not run (ip -6 addr add on lo failed).');
          else {
            await sleep(500);
            const v6 = await crowdRun('IPv6 crowd (one /64)', rel, relEpoch, aliases, Math.ceil(o.crowd / aliases.length), o.crowdSeconds, { v4: false });
            printProbes(v6);
            (result.crowd as Record<string, unknown>).v6 = v6;
          }
          for (const a of aliases) spawnSync('ip', ['-6', 'addr', 'del', `${a}/128`, 'dev', 'lo']);
          aliases.length = 0;
        }
      } else console.log('\nIPv6 /64 crowd: not run (needs --ipv6-aliases, root: loopback has ::1 only).');
    }
    await stopChild(rel.child);

    // 4. PostgreSQL: two instances
    if (o.postgres) {
      log('PostgreSQL: starting a throwaway cluster…');
      const pgc = await startPostgres();
      if ('skip' in pgc) {
        console.log(`\n### Two instances on PostgreSQL: not run — ${pgc.skip}`);
        result.postgres = { skipped: pgc.skip };
      } else {
        cluster = pgc;
        const relDb = await pgc.createDatabase('bench_release');
        const common = ['--tick-ms', '200', '--min-reports', '5', '--min-contributors', '0', '--epoch-ms', String(SHORT_EPOCH_MS)];
        const ra = await startService(join(dir, 'pg-rel-a'), catalog, ['--store', relDb, ...common]);
        const rb = await startService(join(dir, 'pg-rel-b'), catalog, ['--store', relDb, ...common]);
        const pgRelEpoch = await seedRelease([ra.url, rb.url], rnd);
        const bodyOf = async (u: string) => Buffer.from(await (await fetch(`${u}${INDEX_V2_PATHS.release(pgRelEpoch)}`)).arrayBuffer());
        const [ba, bb] = await Promise.all([bodyOf(ra.url), bodyOf(rb.url)]);
        const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
        const pgRelease = await getLoad(`${ra.url}${INDEX_V2_PATHS.release(pgRelEpoch)}`, c, o.seconds, 4);
        await Promise.all([stopChild(ra.child), stopChild(rb.child)]);

        const tpDb = await pgc.createDatabase('bench_throughput');
        const tp = ['--store', tpDb, '--trust-proxy', '127.0.0.1'];
        const a = await startService(join(dir, 'pg-a'), catalog, tp);
        const b = await startService(join(dir, 'pg-b'), catalog, tp);
        const one = await startProcess('proxy', 'packages/bench/src/round-robin-proxy.ts', ['--upstream', a.url]);
        const two = await startProcess('proxy', 'packages/bench/src/round-robin-proxy.ts', ['--upstream', a.url, '--upstream', b.url]);
        const ph = await health(a.url);
        const spendCheck = Math.min(200, o.reports);
        const warm = 40;
        log(`  minting ${2 * o.reports + spendCheck + 2 * warm} tokens for epoch ${ph.epoch} (before the timed phases)…`);
        const pm = await mint(a.url, ph.epoch, 2 * o.reports + spendCheck + 2 * warm);
        // why: both instances and both proxies warmed up (JIT, pools) on the report path before the timed rounds
        const warmTokens = pm.tokens.slice(2 * o.reports + spendCheck);
        const warmUp = [
          await postLoad(`${one.url}${INDEX_V2_PATHS.report}`, reportBodies(warmTokens.slice(0, warm), ph.epoch, ph.ldp, rnd), 10, 3),
          await postLoad(`${two.url}${INDEX_V2_PATHS.report}`, reportBodies(warmTokens.slice(warm), ph.epoch, ph.ldp, rnd), 10, 3),
        ];
        const pgHealth = await getLoad(`${a.url}${INDEX_V2_PATHS.health}`, c, o.seconds, 4);
        // why: alternate one / two instances in rounds, so a change of the machine's load during the run hits both alike
        const oneRounds: PostRun[] = [];
        const twoRounds: PostRun[] = [];
        const per = Math.ceil(o.reports / o.rounds);
        for (let k = 0; k < o.rounds; k++) {
          const slice = (from: number) => pm.tokens.slice(from + k * per, Math.min(from + o.reports, from + (k + 1) * per));
          log(`  round ${k + 1} of ${o.rounds}: one instance, then two…`);
          oneRounds.push(
            await postLoad(
              `${one.url}${INDEX_V2_PATHS.report}`,
              reportBodies(slice(0), ph.epoch, ph.ldp, rnd),
              c,
              3,
              [a.child.pid!, b.child.pid!, one.child.pid!],
              pgc.pid,
            ),
          );
          twoRounds.push(
            await postLoad(
              `${two.url}${INDEX_V2_PATHS.report}`,
              reportBodies(slice(o.reports), ph.epoch, ph.ldp, rnd),
              c,
              3,
              [a.child.pid!, b.child.pid!, two.child.pid!],
              pgc.pid,
            ),
          );
        }
        const oneRun = combine(oneRounds);
        const twoRun = combine(twoRounds);
        // each token to both instances at once
        const check = pm.tokens.slice(2 * o.reports, 2 * o.reports + spendCheck);
        const pairBodies = reportBodies(check, ph.epoch, ph.ldp, rnd);
        const pairs = await Promise.all(
          pairBodies.map((body, i) =>
            Promise.all([
              call(`${a.url}${INDEX_V2_PATHS.report}`, { method: 'POST', body, localAddress: `127.0.6.${(i % 200) + 1}` }),
              call(`${b.url}${INDEX_V2_PATHS.report}`, { method: 'POST', body, localAddress: `127.0.7.${(i % 200) + 1}` }),
            ]),
          ),
        );
        const acceptedTwice = pairs.filter(([x, y]) => x.status === 202 && y.status === 202).length;
        const acceptedOnce = pairs.filter(([x, y]) => (x.status === 202) !== (y.status === 202)).length;
        const { default: pg } = await import('pg');
        const db = new pg.Client({ connectionString: tpDb });
        await db.connect();
        const stored = Number((await db.query<{ n: string }>('SELECT COALESCE(SUM(n), 0) AS n FROM atomem_cells WHERE epoch = $1', [ph.epoch])).rows[0].n);
        await db.end();
        const acknowledged = oneRun.accepted + twoRun.accepted + warmUp[0].accepted + warmUp[1].accepted + acceptedOnce + 2 * acceptedTwice;
        await Promise.all([a, b, one, two].map((p) => stopChild(p.child)));
        result.postgres = {
          release: { epoch: pgRelEpoch, bytes: ba.length, sameBytes: ba.equals(bb), digestA: digest(ba), digestB: digest(bb), get: pgRelease },
          health: pgHealth,
          oneInstance: { ...oneRun, ms: undefined },
          twoInstances: { ...twoRun, ms: undefined },
          ratio: twoRun.perSecond / oneRun.perSecond,
          spendOnce: { tokens: check.length, acceptedOnce, acceptedTwice, refusedBoth: check.length - acceptedOnce - acceptedTwice },
          acknowledged,
          stored,
          mint: { tokens: pm.tokens.length, seconds: pm.seconds },
        };
        console.log('\n### Two instances on one PostgreSQL (Debian, throwaway cluster on loopback) behind a round-robin proxy (its own process)\n');
        console.log(
          `| what (${o.rounds} alternating rounds) | reports | accepted per second | p50 ms | p99 ms | failures | CPU s: instance A / B / proxy / PostgreSQL / driver | seconds | machine CPU busy |`,
        );
        console.log('|---|---:|---:|---:|---:|---:|---|---:|---:|');
        const cpu = (r: typeof oneRun) =>
          `${r.cpuSeconds.servers.map(f1).join(' / ')} / ${f1(r.cpuSeconds.postgres)} / ${f1(r.cpuSeconds.driver)} | ${f1(r.seconds)} | ${Math.round(100 * r.machineBusy)} % |`;
        console.log(
          `| one instance via the proxy | ${oneRun.sent} | ${f1(oneRun.perSecond)} | ${f1(oneRun.p50)} | ${f1(oneRun.p99)} | ${oneRun.sent - oneRun.accepted} | ${cpu(oneRun)}`,
        );
        console.log(
          `| two instances via the proxy | ${twoRun.sent} | ${f1(twoRun.perSecond)} | ${f1(twoRun.p50)} | ${f1(twoRun.p99)} | ${twoRun.sent - twoRun.accepted} | ${cpu(twoRun)}`,
        );
        const perReport = (r: typeof oneRun) => ((1000 * r.cpuSeconds.servers.slice(0, 2).reduce((x, y) => x + y, 0)) / Math.max(1, r.accepted)).toFixed(2);
        console.log(`\nCPU of the two instances per accepted report: ${perReport(oneRun)} ms (one instance) / ${perReport(twoRun)} ms (two).`);
        console.log(
          `two / one instance: ${(twoRun.perSecond / oneRun.perSecond).toFixed(2)}× (target ≥ 1.6×; ${cpus().length} cores shared by both instances, PostgreSQL, the proxy and the driver).`,
        );
        console.log(
          `each of ${check.length} tokens sent to both instances at once: accepted by exactly one ${acceptedOnce}, by both (double spend) ${acceptedTwice}, by neither ${check.length - acceptedOnce - acceptedTwice}. Reports acknowledged (202) in all: ${acknowledged}; counted in PostgreSQL: ${stored}.`,
        );
        console.log(
          `release of epoch ${pgRelEpoch} (produced by real reports to both instances): ${ba.length} bytes from A, ${bb.length} from B, identical: ${ba.equals(bb)} (sha256 ${digest(ba).slice(0, 16)}… / ${digest(bb).slice(0, 16)}…); health GET on A p50 ${f1(pgHealth.p50)} / p99 ${f1(pgHealth.p99)} ms; release GET on A (read from PostgreSQL) p50 ${f1(pgRelease.p50)} / p99 ${f1(pgRelease.p99)} ms, ${f1(pgRelease.perSecond)}/s.`,
        );
        await pgc.stop();
        cluster = undefined;
      }
    }

    // 5. stall
    if (o.stall) {
      log(`stall: ${o.stallItems} items, ${o.stallReports} reports (in this process)…`);
      const st = await stallRun(o.stallItems, o.stallReports);
      result.stall = st;
      console.log(
        `\n### Aggregation stall: ${st.items} items × ${st.reports} reports (${st.cohorts} cohorts), release built in a worker thread\n\nloading (clustering) ${f1(st.loadSeconds)} s; closing the epoch ${st.aggregateSeconds.toFixed(2)} s (released: ${st.released}); event-loop delay meanwhile p50 ${st.loopDelayMs.p50.toFixed(1)} ms, p99 ${st.loopDelayMs.p99.toFixed(1)} ms, max ${st.loopDelayMs.max.toFixed(1)} ms.`,
      );
    }
    (result.config as Record<string, unknown>).loadavgEnd = loadavg().map((x) => Math.round(x * 100) / 100);
    console.log(
      `\nload average at the end: ${loadavg()
        .map((x) => x.toFixed(2))
        .join(' / ')}`,
    );
    if (o.json) writeFileSync(o.json, JSON.stringify(result, null, 2));
  } finally {
    await cleanup();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:service: ${err instanceof Error ? err.stack : String(err)}\n`);
  for (const c of children) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // gone
    }
  }
  process.exit(1);
});
