#!/usr/bin/env node
/**
 * `atomem-relay`: run an Oblivious HTTP relay for atomem reports (./relay.ts), operated by a
 * party other than the shop.
 *
 *   atomem-relay --gateway https://index.shop.example [--port 8788] [--flush-every 86400000]
 *
 * Prints `atomem-relay ready at http://HOST:PORT (…)` on stdout once listening. Logs are JSON
 * lines on stderr, without addresses, headers or bodies. SIGTERM / SIGINT forward what is held,
 * then exit; a second signal exits at once.
 */
import { Command, Option } from 'commander';
import { collect, int, parseTrustProxy } from './cli-args.js';
import { createRelay, prio3RelayBytes, type Relay } from './relay.js';

/** The commander program. */
export function program(): Command {
  return new Command('atomem-relay')
    .description('Oblivious HTTP relay (RFC 9458) for atomem reports: forwards encapsulated reports to the index gateway, batched and shuffled')
    .requiredOption('--gateway <url>', 'the atomem-index service root (its gateway is POST /v2/ohttp)')
    .option(
      '--flush-every <ms>',
      "hold reports and forward them every this many ms, at multiples of it on the clock (use the index's epoch length); 0 = forward at once",
      int('--flush-every', 0),
      86_400_000,
    )
    .option('--max-held <n>', 'reports held at most until the next flush', int('--max-held', 1), 200_000)
    .option(
      '--prio3-items <n>',
      "in front of a Prio3 leader: the catalog's item count, so that uploads of that size fit (default: local-DP reports only, 8 KiB)",
      int('--prio3-items', 1),
    )
    .option('--port <port>', 'TCP port (0 = any free port)', int('--port', 0), 8788)
    .option('--host <host>', 'interface to bind', '127.0.0.1')
    .option('--rate-max <n>', 'requests per client address per window (0 = no limit)', int('--rate-max', 0), 30)
    .option('--rate-window <ms>', 'rate-limit window in ms', int('--rate-window', 1), 60_000)
    .option('--trust-proxy <value>', 'behind a reverse proxy: true, a hop count, or comma-separated proxy addresses / CIDRs')
    .option('--cors-origin <origin>', 'origin (https://shop.example) whose pages may call the relay; repeatable (default: any)', collect, [] as string[])
    .addOption(new Option('--log-level <level>', 'log level (stderr)').choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'));
}

/** Run the relay from command-line arguments (`process.argv` form). */
export async function main(argv: string[] = process.argv): Promise<Relay> {
  const cmd = program();
  cmd.parse(argv);
  const o = cmd.opts<{
    gateway: string;
    flushEvery: number;
    maxHeld: number;
    prio3Items?: number;
    port: number;
    host: string;
    rateMax: number;
    rateWindow: number;
    trustProxy?: string;
    corsOrigin: string[];
    logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  }>();
  const relay = createRelay({
    gateway: o.gateway,
    flushEveryMs: o.flushEvery,
    maxHeld: o.maxHeld,
    maxBodyBytes: o.prio3Items === undefined ? undefined : prio3RelayBytes(o.prio3Items),
    rateLimit: o.rateMax === 0 ? false : { max: o.rateMax, timeWindow: o.rateWindow },
    trustProxy: o.trustProxy === undefined ? undefined : parseTrustProxy(o.trustProxy),
    corsOrigins: o.corsOrigin.length === 0 || o.corsOrigin.includes('*') ? '*' : o.corsOrigin,
    logger: { level: o.logLevel, stream: process.stderr },
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) process.exit(1);
    stopping = true;
    relay.app.log.info({ signal }, 'closing: forwarding what is held');
    relay.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const url = await relay.listen({ port: o.port, host: o.host });
  process.stdout.write(
    `atomem-relay ready at ${url} (${o.flushEvery > 0 ? `forwarding to ${o.gateway} every ${o.flushEvery} ms, shuffled` : `forwarding to ${o.gateway} at once`})\n`,
  );
  return relay;
}

main().catch((err: unknown) => {
  process.stderr.write(`atomem-relay: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
