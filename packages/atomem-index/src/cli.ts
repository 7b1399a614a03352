#!/usr/bin/env node
/**
 * `atomem-index`: run the shared community index service.
 *
 *   atomem-index --data ./index-data --catalog-vectors ./catalog-vectors.bin [--port 8787]
 *                [--epoch-ms 86400000] [--min-contributors 20] [--min-reports 50] …
 *   (attester key from the environment: ATOMEM_ATTESTER_KEY; metrics token: ATOMEM_METRICS_TOKEN)
 *   atomem-index … --legacy-v1 --embedder my-embedder@1=384   (DEPRECATED, insecure v1)
 *
 * Protocol v2 needs the shop's catalog vector file (`atomem-vectors`): its item space is what
 * communities are built from. Prints `atomem-index ready at http://HOST:PORT (…)` on stdout
 * once loaded (the port is already open before that: /v1/health answers 503 while
 * loading). Logs are JSON lines on stderr, without IP addresses. SIGTERM / SIGINT close
 * gracefully (in-flight requests finish, the SQLite file is closed); a second signal exits at once.
 */

import { readFileSync } from 'node:fs';
import { decodeCatalogVectors } from 'atomem/protocol';
import { DEFAULT_EMBEDDER, KNOWN_EMBEDDER_DIMS } from './defaults.js';
import { Command, InvalidArgumentError, Option } from 'commander';
import { createIndexService, type IndexService } from './service.js';

function int(name: string, min: number): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

function num(name: string, min: number, max = Infinity): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be a number in [${min}, ${max}]`);
    return n;
  };
}

function collect(v: string, prev: string[]): string[] {
  return [...prev, v];
}

/** Parsed command line of {@link main}. */
export interface CliOptions {
  port: number;
  host: string;
  data: string;
  embedder: string[];
  k: number;
  itemNoise: number;
  k1?: number;
  tau?: number;
  maxMembers: number;
  hops?: number;
  rateMax: number;
  rateWindow: number;
  sync: 'normal' | 'full';
  exactBelow?: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  catalogVectors?: string;
  legacyV1?: boolean;
  replaceItemSpace?: boolean;
  epochMs?: number;
  minContributors?: number;
  minReports?: number;
  trustProxy?: string;
  corsOrigin: string[];
  maxConnections?: number;
  maxConnectionsPerAddress?: number;
  headersTimeout?: number;
  requestTimeout?: number;
  idleTimeout?: number;
  maxDbBytes?: number;
}

/** `--embedder id[=dim]` → [id, dim]; the dimension may be left out for the engine's own embedders. */
export function parseEmbedder(v: string): [string, number] {
  const m = /^(.+?)(?:=(\d+))?$/.exec(v);
  const id = m?.[1] ?? v;
  const dim = m?.[2] !== undefined ? Number(m[2]) : KNOWN_EMBEDDER_DIMS[id];
  if (dim === undefined) throw new InvalidArgumentError(`--embedder ${v}: give its vector dimension as ${id}=<dim> (the first upload no longer sets it)`);
  return [id, dim];
}

/** `--trust-proxy`: `true`, a hop count, or a comma-separated list of proxy addresses / CIDRs. */
export function parseTrustProxy(v: string): boolean | number | string[] {
  if (v === 'true') return true;
  if (/^\d+$/.test(v)) return Number(v);
  const list = v.split(',').map((x) => x.trim()).filter(Boolean);
  if (list.length === 0) throw new InvalidArgumentError('--trust-proxy needs true, a hop count, or proxy addresses / CIDRs');
  return list;
}

/** The commander program. */
export function program(): Command {
  return new Command('atomem-index')
    .description('atomem shared community index service (protocol v2; v1 deprecated behind --legacy-v1)')
    .requiredOption('--data <dir>', 'data directory (SQLite files; created if missing)')
    .option('--catalog-vectors <file>', "protocol v2: the shop's catalog vector file (atomem-vectors); its item space defines the communities")
    .option('--epoch-ms <ms>', 'protocol v2: epoch length (default one day)', int('--epoch-ms', 1))
    .option('--min-contributors <n>', 'protocol v2: estimated contributors a community needs to be released (default 20)', num('--min-contributors', 0))
    .option('--min-reports <n>', 'protocol v2: reports an epoch needs to be released (default 50)', int('--min-reports', 1))
    .option('--replace-item-space', "protocol v2: accept a catalog of another embedder or dimension than the data dir's (default: refuse to start)")
    .option('--legacy-v1', 'also serve the DEPRECATED, INSECURE protocol v1 (/v1/…; see docs/PRIVACY.md)')
    .option('--embedder <id[=dim]>', `v1: embedder id to serve and its vector dimension (repeatable; default ${DEFAULT_EMBEDDER}, the browser engine's default; =dim may be left out for ${Object.keys(KNOWN_EMBEDDER_DIMS).join(', ')})`, collect, [] as string[])
    .option('--port <port>', 'TCP port (0 = any free port)', int('--port', 0), 8787)
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .option('--k <k>', 'k-anonymity: minimum community size released', int('--k', 1), 3)
    .option('--item-noise <b>', 'Laplace scale b of released item counts', num('--item-noise', 0), 1)
    .option('--k1 <n>', 'neighbours linked per new memory (default 2)', int('--k1', 0))
    .option('--tau <sim>', 'minimum link similarity (default 0.5)', num('--tau', -1, 1))
    .option('--max-members <n>', 'member vectors released per community', int('--max-members', 0), 64)
    .option('--hops <n>', 'release each own memory\'s ≤ n-hop neighbourhood instead of whole communities', int('--hops', 1))
    .option('--rate-max <n>', 'requests per client address per window, every route but health (0 = no limit)', int('--rate-max', 0), 600)
    .option('--rate-window <ms>', 'rate-limit window in ms', int('--rate-window', 1), 60_000)
    .addOption(new Option('--sync <level>', 'SQLite synchronous: normal survives process crashes, full also OS crashes').choices(['normal', 'full']).default('normal'))
    .option('--exact-below <n>', 'exact neighbour search below this many vectors, HNSW above (default 512)', int('--exact-below', 0))
    .option('--trust-proxy <value>', 'behind a reverse proxy: true, a hop count, or comma-separated proxy addresses / CIDRs whose X-Forwarded-For is believed (default: the socket peer is the client)')
    .option('--cors-origin <origin>', "origin (https://shop.example) whose pages may read answers from a browser; repeatable; '*' for any (default: same origin only)", collect, [] as string[])
    .option('--max-connections <n>', 'open connections in all (default 4096, at most half the open-file limit)', int('--max-connections', 1))
    .option('--max-connections-per-address <n>', 'open connections per client address (default 64; unlimited with --trust-proxy)', int('--max-connections-per-address', 1))
    .option('--headers-timeout <ms>', 'time a client has to send its request headers (default 10000)', int('--headers-timeout', 1))
    .option('--request-timeout <ms>', 'time a client has to send its whole request (default 15000)', int('--request-timeout', 1))
    .option('--idle-timeout <ms>', 'a connection without traffic is closed after this long (default 15000)', int('--idle-timeout', 1))
    .option('--max-db-bytes <n>', 'size limit per SQLite file; writes beyond it answer 507 as on a full disk (default none)', int('--max-db-bytes', 4096))
    .addOption(new Option('--log-level <level>', 'log level (stderr)').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'));
}

/** Run the service from command-line arguments (`process.argv` form); resolves once it is ready. */
export async function main(argv: string[] = process.argv): Promise<IndexService> {
  const cmd = program();
  cmd.parse(argv);
  const o = cmd.opts<CliOptions>();
  const legacyV1 = o.legacyV1 === true;
  if (o.catalogVectors === undefined && !legacyV1) throw new Error('--catalog-vectors <file> is required (protocol v2 builds its communities from the shop\'s item space), or --legacy-v1');
  if (legacyV1) process.stderr.write('atomem-index: WARNING: serving the deprecated, insecure protocol v1 (/v1/…)\n');
  const file = o.catalogVectors;
  const embedders = (o.embedder.length ? o.embedder : [DEFAULT_EMBEDDER]).map(parseEmbedder);
  const service = createIndexService({
    dataDir: o.data,
    legacyV1,
    ...(file
      ? {
          v2: {
            space: async () => {
              const cv = decodeCatalogVectors(readFileSync(file));
              const ids = [...cv.vectors.keys()].sort();
              return { embedderId: cv.header.embedder, ids, vectors: ids.map((id) => cv.vectors.get(id)!.vector) };
            },
            epochMs: o.epochMs,
            minContributors: o.minContributors,
            minReports: o.minReports,
            attesterKey: process.env.ATOMEM_ATTESTER_KEY || undefined,
            replaceSpace: o.replaceItemSpace === true,
          },
        }
      : {}),
    embedderIds: embedders.map(([e]) => e),
    embedderDims: Object.fromEntries(embedders),
    trustProxy: o.trustProxy === undefined ? undefined : parseTrustProxy(o.trustProxy),
    corsOrigins: o.corsOrigin.includes('*') ? '*' : o.corsOrigin.length ? o.corsOrigin : undefined,
    metricsToken: process.env.ATOMEM_METRICS_TOKEN || undefined,
    network: {
      maxConnections: o.maxConnections,
      maxConnectionsPerAddress: o.maxConnectionsPerAddress,
      headersTimeoutMs: o.headersTimeout,
      requestTimeoutMs: o.requestTimeout,
      idleTimeoutMs: o.idleTimeout,
    },
    storage: { maxBytes: o.maxDbBytes },
    minCommunitySize: o.k,
    itemNoise: o.itemNoise,
    k1: o.k1,
    tau: o.tau,
    maxMembers: o.maxMembers,
    hops: o.hops,
    rateLimit: o.rateMax === 0 ? false : { max: o.rateMax, timeWindow: o.rateWindow },
    synchronous: o.sync,
    vectorIndex: o.exactBelow === undefined ? undefined : { exactBelow: o.exactBelow },
    logger: { level: o.logLevel, stream: process.stderr },
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    service.app.log.info({ signal }, 'closing');
    service.close().then(
      () => process.exit(0),
      (err: unknown) => {
        service.app.log.error({ err }, 'close failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const url = await service.listen({ port: o.port, host: o.host });
  await service.serving;
  // why: count over the embedders actually served (the default one included)
  const memories = legacyV1 ? embedders.reduce((n, [e]) => n + (service.index(e)?.graph.size ?? 0), 0) : 0;
  const clustering = file !== undefined && service.v2!.clustering() !== undefined;
  process.stdout.write(`atomem-index ready at ${url} (${file ? `v2: epoch ${service.v2!.epoch()}` : 'v2 off'}${legacyV1 ? `, v1: ${memories} memories` : ''}${clustering ? '; the item space is being clustered, reports are accepted meanwhile' : ''})\n`);
  if (clustering) {
    // why: a failure is logged by the service and answered 503 by every v2 route
    service.ready.then(
      () => process.stdout.write(`atomem-index item space clustered (${service.v2!.communities().communities.length} communities)\n`),
      () => {},
    );
  }
  return service;
}

// why: this file is the bin entry; importing it starts the service
main().catch((err: unknown) => {
  process.stderr.write(`atomem-index: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
