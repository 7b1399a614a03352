// `npm run bench:paired`: two --json runs compared per user, and refused when they are not comparable.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'atomem-paired-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const run = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', 'packages/bench/src/paired-runs.ts', ...args], {
    cwd: process.cwd(),
    timeout: 60_000,
  });
const config = { data: 'd', seed: 7, users: 'all', target: 'validation', setting: 'full', cases: 40 };
function file(name: string, cfg: object, perUser: Record<string, number[]> | undefined): string {
  const p = join(dir, name);
  writeFileSync(p, JSON.stringify({ config: cfg, results: [], ...(perUser ? { perUser } : {}) }));
  return p;
}

describe('bench:paired', () => {
  const base = Array.from({ length: 40 }, (_, i) => (i % 5) / 5);
  it('prints A − B with a paired interval that excludes 0 for a consistent gain, and includes 0 for none', async () => {
    const a = file('a.json', config, { 'atomem/off': base.map((x) => x + 0.05), shop: base });
    const b = file('b.json', config, { 'atomem/off': base, shop: base });
    const { stdout } = await run(a, b);
    expect(stdout).toMatch(/\| atomem\/off \| atomem\/off \| 40 \| \+0\.0500 \| \[0\.0500, 0\.0500\] \| 40 \/ 0 \|/);
    expect(stdout).toMatch(/\| shop \| shop \| 40 \| \+0\.0000 \| \[0\.0000, 0\.0000\] \| 0 \/ 0 \|/);
    const { stdout: one } = await run(a, b, '--row', 'atomem/off', '--row-b', 'shop');
    expect(one).toMatch(/\+0\.0500/);
  }, 90_000);

  it('refuses runs of different seeds or without per-user data', async () => {
    const a = file('c.json', config, { x: base });
    const b = file('d.json', { ...config, seed: 8 }, { x: base });
    await expect(run(a, b)).rejects.toThrow(/differ in config\.seed/);
    const old = file('e.json', config, undefined);
    await expect(run(a, old)).rejects.toThrow(/no perUser field/);
  }, 90_000);
});
