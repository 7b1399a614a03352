// `npm run bench:abuse` end to end, shortened: the real service process on loopback, honest
// and hostile clients, the figures printed and written as JSON, the service stopped at the end.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'atomem-abuse-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench:abuse', () => {
  it('runs, ends by itself, and reports honest errors, latencies, health and the hostile outcomes', async () => {
    const json = join(dir, 'abuse.json');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        '-C',
        'atomem-source',
        '--import',
        'tsx',
        'packages/bench/src/abuse.ts',
        '--seconds',
        '4',
        '--quiet-seconds',
        '2',
        '--clients',
        '12',
        '--hostile',
        '4',
        '--json',
        json,
      ],
      { cwd: process.cwd(), timeout: 120_000 },
    );
    expect(stdout).toMatch(/\| honest, under abuse \| \d+ \| \d+ \|/);
    const r = JSON.parse(readFileSync(json, 'utf8')) as {
      honest: { quiet: { requests: number; errors: number }; abuse: { requests: number; errors: number } };
      health: { abuseFailures: number; abuseP99: number | null };
      hostile: Record<string, Record<string, number>>;
      server: { edge: { refusedConnections: number } };
    };
    expect(r.honest.quiet.requests).toBeGreaterThan(0);
    expect(r.honest.abuse.requests).toBeGreaterThan(0);
    expect(r.honest.abuse.errors).toBe(0);
    expect(r.health.abuseFailures).toBe(0);
    // the probe (its own thread) measured the abuse phase
    expect(r.health.abuseP99).toBeGreaterThan(0);
    expect(Object.keys(r.hostile)).toEqual(expect.arrayContaining(['connection flood', 'header rotation', 'oversized body']));
    // the connection flood went past the per-address cap and was refused by the server
    expect(r.server.edge.refusedConnections).toBeGreaterThan(0);
  }, 150_000);
});
