/**
 * A tiny HTTP round-robin proxy for `npm run bench:service` (./service-bench.ts), run as its own
 * process: each request goes to the next `--upstream` in turn, with `x-forwarded-for` set to the
 * client's address (the instances run with `--trust-proxy 127.0.0.1`). Prints
 * `proxy ready at http://127.0.0.1:PORT` once listening; SIGTERM stops it.
 */
import { Agent, type IncomingHttpHeaders, createServer, request } from 'node:http';
import { Command } from 'commander';

const o = new Command('round-robin-proxy')
  .option('--port <port>', 'port (0 = any free port)', '0')
  .requiredOption('--upstream <url>', 'an instance base URL (repeatable)', (v: string, prev: string[]) => [...prev, v], [] as string[])
  .parse()
  .opts<{ port: string; upstream: string[] }>();

const upstreams = o.upstream.map((u) => new URL(u));
const agent = new Agent({ keepAlive: true, maxSockets: 256 });
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);
const strip = (h: IncomingHttpHeaders) => Object.fromEntries(Object.entries(h).filter(([k]) => !HOP.has(k)));
let next = 0;

const server = createServer((req, res) => {
  const up = upstreams[next++ % upstreams.length];
  const headers = { ...strip(req.headers), 'x-forwarded-for': req.socket.remoteAddress ?? '' };
  const out = request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers, agent }, (r) => {
    res.writeHead(r.statusCode ?? 502, strip(r.headers));
    r.pipe(res);
  });
  out.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('bad gateway');
  });
  req.pipe(out);
});
server.keepAliveTimeout = 5000;
server.listen(Number(o.port), '127.0.0.1', () => {
  const a = server.address() as { port: number };
  process.stdout.write(`proxy ready at http://127.0.0.1:${a.port}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
