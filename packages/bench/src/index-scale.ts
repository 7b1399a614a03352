/**
 * `npm run bench:index`: scale benchmark of the index service, i.e. the item-space clustering of
 * protocol v2 (./item-space-scale.ts; `--service` for the service CLI end to end,
 * ./item-space-service.ts). `--item-space` is accepted and means the same (the only mode).
 * Results and conclusions: docs/SCALING.md.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { itemSpaceMain } from './item-space-scale.js';

/** Runs the CLI on `argv` (without node and script); returns the exit code. */
export function main(argv: string[]): Promise<number> {
  return itemSpaceMain(argv.filter((a) => a !== '--item-space'));
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e: unknown) => {
      process.stderr.write(`error: ${e instanceof Error ? (process.env.DEBUG ? e.stack : e.message) : String(e)}\n`);
      process.exitCode = 1;
    },
  );
}
