/**
 * The service's edge: what every route gets before a handler runs.
 *
 * - **Timeouts** (Node's HTTP server, checked every second): the request headers must arrive
 *   within `headersTimeoutMs`, the whole request within `requestTimeoutMs`, a socket with no
 *   traffic is closed after `idleTimeoutMs`, a kept-alive one after `keepAliveTimeoutMs`. A
 *   client sending one byte every few seconds holds a connection for `headersTimeoutMs` at most.
 * - **Connection caps**: at most `maxConnections` open sockets (below the process's open-file
 *   limit, so the service never runs out of file descriptors), and at most
 *   `maxConnectionsPerAddress` per client address (IPv6: per /64); a connection over the
 *   per-address cap is closed at once; at the global cap a connection from an address holding
 *   half its fair share is closed at once and one from another address makes room by closing the
 *   oldest connection still sending its request (or idle), so a crowd of slow clients cannot
 *   lock out health probes and release reads (see {@link installConnectionCaps}).
 * - **The client address** (the socket's peer, or with `trustProxy` the address the trusted
 *   proxy reports) keys rate limits and the per-address cap. It is used in memory only, as a
 *   keyed hash (HMAC with a random per-process key) for rate limits, never logged or stored;
 *   IPv6 addresses are cut to their /64 (one subscriber's prefix). A client-chosen header never
 *   keys anything.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { isIPv6 } from 'node:net';
import type { Socket } from 'node:net';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Network limits of the service (`IndexServiceOptions.network`). Every field has a default. */
export interface NetworkLimits {
  /** Time for a client to send the request headers. Default 10 000 ms. */
  headersTimeoutMs?: number;
  /** Time for a client to send the whole request (headers and body). Default 15 000 ms. */
  requestTimeoutMs?: number;
  /** A socket without any traffic for this long is closed (also one whose client stopped reading). Default 15 000 ms. */
  idleTimeoutMs?: number;
  /** An idle kept-alive connection is closed after this long. Default 5 000 ms. */
  keepAliveTimeoutMs?: number;
  /** Open connections in all (new ones beyond are closed at once). Default 4 096, and at most half the open-file limit when Node knows it. */
  maxConnections?: number;
  /**
   * Open connections per client address. Default 64 (with `trustProxy`: unlimited, since every
   * connection then comes from the proxy, which must cap its clients itself).
   */
  maxConnectionsPerAddress?: number;
  /** Requests served on one kept-alive connection before it is closed. Default 1 000. */
  maxRequestsPerSocket?: number;
}

/** {@link NetworkLimits} with every default applied. */
export type ResolvedNetworkLimits = Required<NetworkLimits>;

/** Apply the defaults (see {@link NetworkLimits}); throws RangeError on a nonsensical value. */
export function resolveNetworkLimits(o: NetworkLimits = {}, trustProxy: unknown = false): ResolvedNetworkLimits {
  const r: ResolvedNetworkLimits = {
    headersTimeoutMs: o.headersTimeoutMs ?? 10_000,
    requestTimeoutMs: o.requestTimeoutMs ?? 15_000,
    idleTimeoutMs: o.idleTimeoutMs ?? 15_000,
    keepAliveTimeoutMs: o.keepAliveTimeoutMs ?? 5_000,
    maxConnections: o.maxConnections ?? 4096,
    maxConnectionsPerAddress: o.maxConnectionsPerAddress ?? (trustProxy ? Infinity : 64),
    maxRequestsPerSocket: o.maxRequestsPerSocket ?? 1000,
  };
  for (const [k, v] of Object.entries(r)) {
    if (!(typeof v === 'number' && v >= 1)) throw new RangeError(`network.${k} must be a number ≥ 1, got ${String(v)}`);
  }
  if (r.headersTimeoutMs > r.requestTimeoutMs)
    throw new RangeError(`network.headersTimeoutMs (${r.headersTimeoutMs}) must not exceed network.requestTimeoutMs (${r.requestTimeoutMs})`);
  return r;
}

/** Counters of the edge (metrics). */
export interface EdgeCounters {
  /** Open connections now. */
  connections: number;
  /** Connections closed at once because a cap was reached. */
  refusedConnections: number;
  /** Requests answered 429. */
  rateLimited: number;
  /** Waiting connections (slow headers or body, idle kept-alive) closed to make room under the global cap. */
  evictedConnections: number;
}

/**
 * The group a connection counts against for the per-address cap: the address, IPv4-mapped
 * IPv6 as IPv4, other IPv6 cut to its /64 (one subscriber's prefix, as for rate limits).
 */
export function connectionGroup(address: string): string {
  const a = address.startsWith('::ffff:') ? address.slice(7) : address;
  return isIPv6(a) ? `${ipv6Prefix64(a)}::/64` : a;
}

/**
 * Enforce the connection caps on `server` (call before it listens). Returns the live counters.
 *
 * The per-address cap refuses a new connection at once. At the global cap a new connection from
 * an address (IPv6: /64) that holds half its fair share of the cap or more (the cap divided by
 * the addresses holding connections) is refused at once too; one from any other address does not
 * wait for a free slot: the oldest connection that is still sending its headers or its body, or
 * idle between kept-alive requests, is closed to make room (those are what a crowd of slow
 * clients holds; a fast request — a health probe, a release read — gets its answer in
 * milliseconds, long before it is the oldest). Only when every open connection has a request
 * being answered is the new one closed. So a crowd that re-takes every slot it loses costs a
 * refusal per attempt, not an eviction and an HTTP connection set up. Without a per-address cap
 * (behind a proxy, whose connections all come from its address) only the eviction applies.
 */
export function installConnectionCaps(server: Server, limits: ResolvedNetworkLimits): EdgeCounters {
  const counters: EdgeCounters = { connections: 0, refusedConnections: 0, rateLimited: 0, evictedConnections: 0 };
  const perGroup = new Map<string, number>();
  const cap = limits.maxConnectionsPerAddress;
  const max = limits.maxConnections;
  // why: behind a proxy (no per-address cap) every connection comes from the proxy: it must be let evict its own idle ones
  const fairShare = Number.isFinite(cap);
  /** Sockets without a request being answered (header phase, or idle kept-alive), oldest first. */
  const waiting = new Map<Socket, true>();
  /** Sockets whose request body is still arriving, oldest first. */
  const inBody = new Map<Socket, IncomingMessage>();
  const evictOne = (): boolean => {
    for (const s of waiting.keys()) {
      waiting.delete(s);
      if (s.destroyed) continue;
      s.destroy();
      return true;
    }
    for (const [s, req] of inBody) {
      inBody.delete(s);
      if (s.destroyed || req.complete) continue;
      s.destroy();
      return true;
    }
    return false;
  };
  // why: Node would drop connections beyond maxConnections before any of this runs; the cap is enforced below
  server.maxConnections = Math.max(max, 1) + 64;
  server.on('drop', () => {
    counters.refusedConnections++;
  });
  // why: the HTTP server sets up a parser and timers for a connection in its own 'connection' listener; it runs only for
  // connections admitted here, so a refused one (a crowd re-taking its slots at the per-address cap) costs less
  const serve = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const g = connectionGroup(socket.remoteAddress ?? '');
    const n = (perGroup.get(g) ?? 0) + 1;
    if (n > cap) {
      counters.refusedConnections++;
      socket.destroy();
      return;
    }
    if (counters.connections >= max) {
      // why: an address holding half its fair share of the cap or more is refused at once (as at the per-address cap), not
      // let evict another's connection: a crowd re-taking the slots it lost then costs a refusal each, and fresh clients get in
      if ((fairShare && n - 1 >= max / (2 * (perGroup.size + (n === 1 ? 1 : 0)))) || !evictOne()) {
        counters.refusedConnections++;
        socket.destroy();
        return;
      }
      counters.evictedConnections++;
    }
    perGroup.set(g, n);
    counters.connections++;
    waiting.set(socket, true);
    socket.once('close', () => {
      waiting.delete(socket);
      inBody.delete(socket);
      counters.connections--;
      const m = (perGroup.get(g) ?? 1) - 1;
      if (m <= 0) perGroup.delete(g);
      else perGroup.set(g, m);
    });
    for (const l of serve) l.call(server, socket);
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    waiting.delete(socket);
    const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
    if (hasBody && !req.complete) inBody.set(socket, req);
    res.once('close', () => {
      inBody.delete(socket);
      // kept alive: waiting for its next request (evictable again, as the newest)
      if (!socket.destroyed) waiting.set(socket, true);
    });
  });
  return counters;
}

/** The open-file limit of this process when Node can tell (Linux), else undefined. */
export function openFileLimit(): number | undefined {
  try {
    // why: Node has no getrlimit; /proc/self/limits is the Linux source
    const text = readFileSync('/proc/self/limits', 'utf8');
    const m = /Max open files\s+(\d+)/.exec(text);
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Rate-limit key of a client address: HMAC-SHA256 under a random per-process key of the address
 * (IPv6 cut to its /64), so the limiter never holds an address in clear.
 */
export function addressKeyer(): (ip: string) => string {
  const secret = randomBytes(32);
  return (ip: string) => {
    const a = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
    return createHmac('sha256', secret)
      .update(isIPv6(a) ? ipv6Prefix64(a) : a)
      .digest('base64url')
      .slice(0, 22);
  };
}

/** The first 64 bits of an IPv6 address, as 4 hex groups. */
export function ipv6Prefix64(a: string): string {
  const [head, tail = ''] = a.split('%')[0].split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = a.includes('::') ? [...h, ...Array(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t] : h;
  return groups
    .slice(0, 4)
    .map((g) => (g || '0').toLowerCase().replace(/^0+(?=.)/, ''))
    .join(':');
}

/**
 * CORS origins as configured: `'*'` (any origin; the API takes no credentials) or a list of
 * exact origins (`https://shop.example`) and regular expressions. Default: none, i.e. same
 * origin only (no CORS headers: browsers on other origins cannot read answers). `null` (the
 * origin of sandboxed frames and `file:` pages) is never allowed.
 */
export type CorsOrigins = '*' | readonly (string | RegExp)[];

/** Validate configured origins; returns what @fastify/cors takes. */
export function corsOriginOption(
  origins: CorsOrigins | true | undefined,
): boolean | string | (string | RegExp)[] | ((origin: string | undefined, cb: (err: Error | null, allow: boolean) => void) => void) {
  if (origins === undefined) return false;
  if (origins === '*' || origins === true) {
    // why: reflect any real origin but never the opaque `null` one
    return (origin, cb) => cb(null, origin !== undefined && origin !== 'null');
  }
  const list = [...origins];
  for (const o of list) {
    if (typeof o === 'string') {
      if (o === 'null')
        throw new RangeError("corsOrigins: 'null' is not allowed (it is the origin of sandboxed frames and local files, which anyone can create)");
      if (!/^https?:\/\/[^/?#\s]+$/.test(o)) throw new RangeError(`corsOrigins: ${JSON.stringify(o)} is not an origin (scheme://host[:port], no path)`);
    } else if (!(o instanceof RegExp)) {
      throw new RangeError('corsOrigins: entries must be origin strings or regular expressions');
    }
  }
  return (origin, cb) => {
    if (origin === undefined || origin === 'null') return cb(null, false);
    cb(
      null,
      list.some((o) => (typeof o === 'string' ? o === origin : o.test(origin))),
    );
  };
}

/** Event-loop delay (p50 / p99 / max, ms) since the last reset: how long a request waited for the loop. */
export class LoopDelay {
  private readonly h: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  constructor() {
    this.h.enable();
  }
  read(): { p50: number; p99: number; max: number } {
    const ms = (ns: number) => Math.round(ns / 1e4) / 100;
    return { p50: ms(this.h.percentile(50)), p99: ms(this.h.percentile(99)), max: ms(this.h.max) };
  }
  reset(): void {
    this.h.reset();
  }
  dispose(): void {
    this.h.disable();
  }
}
