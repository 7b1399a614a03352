/**
 * A crowd of slow clients, run as its own process by `npm run bench:service`
 * (./service-bench.ts): `--per-address` connections from each of `--addresses` (comma-separated
 * local addresses: loopback 127.x.y.z or IPv6 aliases), each sending its request headers one
 * line every `--line-ms` and never finishing them (slowloris). A connection the server cuts is
 * opened again after `--retake-ms` (the slot is re-taken). Runs until stdin closes or SIGTERM;
 * prints one JSON line of counters every second on stdout.
 */
import { connect, type Socket } from 'node:net';
import { Command, InvalidArgumentError } from 'commander';

function int(name: string, min: number) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

const o = new Command('slow-crowd')
  .requiredOption('--port <port>', 'target port', int('--port', 1))
  .option('--host <host>', 'target host', '127.0.0.1')
  .requiredOption('--addresses <list>', 'comma-separated local addresses to connect from')
  .option('--per-address <n>', 'connections per address', int('--per-address', 1), 50)
  .option('--line-ms <ms>', 'one header line every this long', int('--line-ms', 1), 2000)
  .option('--retake-ms <ms>', 'reconnect this long after a cut', int('--retake-ms', 0), 50)
  .parse()
  .opts<{ port: number; host: string; addresses: string; perAddress: number; lineMs: number; retakeMs: number }>();

const addresses = o.addresses.split(',').filter(Boolean);
const counters = { open: 0, connects: 0, cutByServer: 0, connectErrors: 0, target: addresses.length * o.perAddress };
let stopping = false;
const sockets = new Set<Socket>();

function open(localAddress: string): void {
  if (stopping) return;
  const s = connect({ port: o.port, host: o.host, localAddress });
  sockets.add(s);
  let connected = false;
  let timer: NodeJS.Timeout | undefined;
  s.on('connect', () => {
    connected = true;
    counters.connects++;
    counters.open++;
    s.write('GET /v2/health HTTP/1.1\r\nhost: x\r\n');
    let n = 0;
    timer = setInterval(() => s.write(`x-slow-${n++}: 1\r\n`), o.lineMs);
  });
  s.on('error', () => {
    if (!connected) counters.connectErrors++;
  });
  s.on('close', () => {
    sockets.delete(s);
    if (timer) clearInterval(timer);
    if (connected) {
      counters.open--;
      if (!stopping) counters.cutByServer++;
    }
    if (!stopping) setTimeout(() => open(localAddress), o.retakeMs);
  });
}

// why: ramp up over ~2 s instead of 5,000 SYNs at once
let k = 0;
for (let i = 0; i < o.perAddress; i++) for (const a of addresses) setTimeout(() => open(a), Math.floor(k++ / 5) * 2);
const tick = setInterval(() => process.stdout.write(`${JSON.stringify(counters)}\n`), 1000);

const stop = () => {
  if (stopping) return;
  stopping = true;
  clearInterval(tick);
  process.stdout.write(`${JSON.stringify(counters)}\n`);
  for (const s of sockets) s.destroy();
  setTimeout(() => process.exit(0), 200);
};
process.on('SIGTERM', stop);
process.stdin.on('end', stop);
process.stdin.resume();
