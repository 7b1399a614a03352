// The end-to-end item-space benchmark (`npm run bench:index -- --item-space --service`) at a
// small size: it writes a catalog vector file, starts the real service CLI on it, waits for its
// ready line and a 200 health, stops it, restarts it, and reports both times.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'atomem-bench-item-space-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('item-space service benchmark', () => {
  it('first start and restart of the real service on a 3,000-item catalog file', () => {
    const json = join(dir, 'service.json');
    const r = spawnSync(
      process.execPath,
      [
        '-C',
        'atomem-source',
        '--expose-gc',
        '--import',
        'tsx',
        'packages/bench/src/index-scale.ts',
        '--item-space',
        '--service',
        '--sizes',
        '3k',
        '--json',
        json,
      ],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\| 3,000 \| 128 \|/);
    const { rows } = JSON.parse(readFileSync(json, 'utf8'));
    expect(rows).toHaveLength(1);
    const row = rows[0];
    expect(row.items).toBe(3000);
    expect(row.fileMB).toBeGreaterThan(0.5);
    for (const k of ['firstServingS', 'firstClusteredS', 'restartServingS', 'restartClusteredS', 'firstPeakMB', 'restartPeakMB']) {
      expect(Number.isFinite(row[k]), k).toBe(true);
      expect(row[k], k).toBeGreaterThan(0);
    }
    // the communities follow the ready line (or come with it)
    expect(row.firstClusteredS).toBeGreaterThanOrEqual(row.firstServingS);
    expect(row.restartClusteredS).toBeGreaterThanOrEqual(row.restartServingS);
    // no service left behind: the benchmark stops its process group
    expect(r.stderr).not.toMatch(/not ready|exited/);
  }, 150_000);
});
