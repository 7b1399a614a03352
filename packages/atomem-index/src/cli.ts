#!/usr/bin/env node
/**
 * `atomem-index`: run the shared community index service.
 *
 *   atomem-index --data ./index-data --catalog-vectors ./catalog-vectors.bin [--port 8787] [--health-port 8788]
 *                [--epoch-ms 86400000] [--min-contributors 20] [--min-reports 50] …
 *   (attester key from the environment: ATOMEM_ATTESTER_KEY; metrics token: ATOMEM_METRICS_TOKEN)
 *
 * The service needs the shop's catalog vector file (`atomem-vectors`): its item space is what
 * communities are built from. Prints `atomem-index ready at http://HOST:PORT (…)` on stdout
 * once loaded (the port is already open before that: /v2/health answers 503 while
 * loading). Logs are JSON lines on stderr, without IP addresses. SIGTERM / SIGINT close
 * gracefully (in-flight requests finish, the SQLite file is closed); a second signal exits at once.
 */

import { readFileSync } from 'node:fs';
import { decodeCatalogVectors } from 'atomem/protocol';
import { Command, Option } from 'commander';
import { collect, int, num, parseTrustProxy } from './cli-args.js';
import { createIndexService, type IndexService } from './service.js';

/** Parsed command line of {@link main}. */
export interface CliOptions {
  port: number;
  healthPort?: number;
  host: string;
  data: string;
  store: string;
  rateMax: number;
  rateWindow: number;
  sync: 'group' | 'full' | 'normal';
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  catalogVectors: string;
  replaceItemSpace?: boolean;
  epochMs?: number;
  minContributors?: number;
  minReports?: number;
  tickMs?: number;
  trustProxy?: string;
  corsOrigin: string[];
  maxConnections?: number;
  maxConnectionsPerAddress?: number;
  headersTimeout?: number;
  requestTimeout?: number;
  idleTimeout?: number;
  maxDbBytes?: number;
  prio3Role?: 'leader' | 'helper';
  prio3Peer?: string;
  prio3Epsilon?: number;
  prio3Threshold?: number;
  prio3MinShare?: number;
  prio3MinReports?: number;
  prio3TickMs?: number;
}

/** The commander program. */
export function program(): Command {
  return new Command('atomem-index')
    .description('atomem shared community index service (protocol v2)')
    .requiredOption('--data <dir>', 'data directory (SQLite files; created if missing)')
    .option(
      '--store <where>',
      'state store: sqlite (reports.sqlite in --data, default) or a postgres://user@host:port/db URL shared by every instance (password from PGPASSWORD or the URL)',
      'sqlite',
    )
    .requiredOption('--catalog-vectors <file>', "the shop's catalog vector file (atomem-vectors); its item space defines the communities")
    .option('--epoch-ms <ms>', 'epoch length (default one day)', int('--epoch-ms', 1))
    .option('--min-contributors <n>', 'estimated contributors a community needs to be released (default 20)', num('--min-contributors', 0))
    .option('--tick-ms <ms>', 'how often due epochs are closed and released (default 60000)', int('--tick-ms', 1))
    .option('--min-reports <n>', 'reports an epoch needs to be released (default 50)', int('--min-reports', 1))
    .option('--replace-item-space', "accept a catalog of another embedder or dimension than the data dir's (default: refuse to start)")
    .option('--port <port>', 'TCP port (0 = any free port)', int('--port', 0), 8787)
    .option(
      '--health-port <port>',
      'also answer GET /v2/health on this port (own connection cap: probes are answered while the main port is full)',
      int('--health-port', 0),
    )
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .option('--rate-max <n>', 'requests per client address per window, every route but health (0 = no limit)', int('--rate-max', 0), 600)
    .option('--rate-window <ms>', 'rate-limit window in ms', int('--rate-window', 1), 60_000)
    .addOption(
      new Option(
        '--sync <level>',
        'when an acknowledged report is on disk (SQLite store): group = after an fsync shared by the reports waiting for it (survives process crashes and power cuts), full = an fsync in every commit (the same, slower), normal = no fsync before the answer (survives process crashes only)',
      )
        .choices(['group', 'full', 'normal'])
        .default('group'),
    )
    .option(
      '--trust-proxy <value>',
      'behind a reverse proxy: true, a hop count, or comma-separated proxy addresses / CIDRs whose X-Forwarded-For is believed (default: the socket peer is the client)',
    )
    .option(
      '--cors-origin <origin>',
      "origin (https://shop.example) whose pages may read answers from a browser; repeatable; '*' for any (default: same origin only)",
      collect,
      [] as string[],
    )
    .option('--max-connections <n>', 'open connections in all (default 4096, at most half the open-file limit)', int('--max-connections', 1))
    .option(
      '--max-connections-per-address <n>',
      'open connections per client address (default 64; unlimited with --trust-proxy)',
      int('--max-connections-per-address', 1),
    )
    .option('--headers-timeout <ms>', 'time a client has to send its request headers (default 10000)', int('--headers-timeout', 1))
    .option('--request-timeout <ms>', 'time a client has to send its whole request (default 15000)', int('--request-timeout', 1))
    .option('--idle-timeout <ms>', 'a connection without traffic is closed after this long (default 15000)', int('--idle-timeout', 1))
    .option('--max-db-bytes <n>', 'size limit per SQLite file; writes beyond it answer 507 as on a full disk (default none)', int('--max-db-bytes', 4096))
    .addOption(
      new Option(
        '--prio3-role <role>',
        'verifiable aggregation: run as the Prio3 leader (the shop) or helper (the other party); needs --prio3-peer and ATOMEM_PRIO3_PEER_KEY',
      ).choices(['leader', 'helper']),
    )
    .option('--prio3-peer <url>', "the other aggregator's root URL")
    .option('--prio3-epsilon <eps>', "ε per device per epoch of each aggregator's noise (default 1)", num('--prio3-epsilon', 0))
    .option(
      '--prio3-threshold <n>',
      'Prio3 counts below this are not released (default: 3 × the noise std, raised until an item nobody reported shows with probability ≤ 5 % per release)',
      num('--prio3-threshold', 0),
    )
    .option(
      '--prio3-min-share <share>',
      "share of the epoch's accepted Prio3 reports a count must reach on top of the threshold to be released, in [0, 1) (default 0.1: fake reports must be ≥ 10 % of the epoch's reports to lift an item into the release)",
      num('--prio3-min-share', 0, 1),
    )
    .option('--prio3-min-reports <n>', 'accepted Prio3 reports an epoch needs to be released (default 50)', int('--prio3-min-reports', 1))
    .option('--prio3-tick-ms <ms>', 'how often the leader aggregates due epochs with the helper (default 10000)', int('--prio3-tick-ms', 1))
    .addOption(new Option('--log-level <level>', 'log level (stderr)').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'));
}

/** Run the service from command-line arguments (`process.argv` form); resolves once it is ready. */
export async function main(argv: string[] = process.argv): Promise<IndexService> {
  const cmd = program();
  cmd.parse(argv);
  const o = cmd.opts<CliOptions>();
  const file = o.catalogVectors;
  const service = createIndexService({
    dataDir: o.data,
    store: o.store,
    v2: {
      space: async () => {
        const cv = decodeCatalogVectors(readFileSync(file));
        const ids = [...cv.vectors.keys()].sort();
        return { embedderId: cv.header.embedder, ids, vectors: ids.map((id) => cv.vectors.get(id)!.vector) };
      },
      epochMs: o.epochMs,
      minContributors: o.minContributors,
      minReports: o.minReports,
      tickMs: o.tickMs,
      attesterKey: process.env.ATOMEM_ATTESTER_KEY || undefined,
      replaceSpace: o.replaceItemSpace === true,
    },
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
    rateLimit: o.rateMax === 0 ? false : { max: o.rateMax, timeWindow: o.rateWindow },
    synchronous: o.sync,
    prio3: o.prio3Role
      ? {
          role: o.prio3Role,
          peerUrl: o.prio3Peer ?? '',
          peerKey: process.env.ATOMEM_PRIO3_PEER_KEY ?? '',
          epsilon: o.prio3Epsilon,
          threshold: o.prio3Threshold,
          minShare: o.prio3MinShare,
          minReports: o.prio3MinReports,
          tickMs: o.prio3TickMs,
        }
      : undefined,
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
  const url = await service.listen({ port: o.port, host: o.host, healthPort: o.healthPort });
  await service.serving;
  const clustering = service.v2.clustering() !== undefined;
  process.stdout.write(
    `atomem-index ready at ${url} (v2: epoch ${service.v2.epoch()}${service.healthUrl ? `; health also at ${service.healthUrl}/v2/health` : ''}${clustering ? '; the item space is being clustered, reports are accepted meanwhile' : ''})\n`,
  );
  if (clustering) {
    // why: a failure is logged by the service and answered 503 by every v2 route
    service.ready.then(
      () => process.stdout.write(`atomem-index item space clustered (${service.v2.communities().communities.length} communities)\n`),
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
