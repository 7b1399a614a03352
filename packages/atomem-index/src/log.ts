/**
 * Logging of the index service and the relay: fastify's pino logger with nothing that names a
 * client (no address, port, host, pid or hostname).
 */

/** Where log lines go when a server is given logger options (pino destination). */
export interface LogStream {
  write(line: string): void;
}

/** A server's `logger` option: off (`false`, the default), on at `info` (`true`), or a level and a destination. */
export type LoggerOption = boolean | { level?: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent'; stream?: LogStream };

/** fastify's `logger` setting for a {@link LoggerOption}. */
export function loggerConfig(option: LoggerOption | undefined) {
  if (option === undefined || option === false) return false;
  const o = option === true ? {} : option;
  return {
    level: o.level ?? 'info',
    ...(o.stream ? { stream: o.stream } : {}),
    // why: pino's default bindings carry pid and hostname; neither server logs them
    base: null,
    serializers: {
      // why: fastify's default req serializer logs remoteAddress, remotePort and host
      req: (req: { method?: string; url?: string }) => ({ method: req.method, url: req.url }),
      res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
    },
  };
}
