/**
 * packages/bench/src/tune-sasrec.ts with `--format sequences`: tunes under loo-full (the
 * validation item ranked among every item the user has not had), starting from sasrecProfile.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'atomem-tune-sasrec-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', 'packages/bench/src/tune-sasrec.ts', ...args], { cwd: ROOT });

describe('tune-sasrec --format sequences', () => {
  it('scores each grid point over all items on validation items only, from the catalog-scaled starting point', async () => {
    // 60 users walking a ring of 40 items: each next item is the successor of the last
    const lines = Array.from({ length: 60 }, (_, u) => `u${u} ${Array.from({ length: 8 }, (_, t) => `i${((u * 3 + t) % 40) + 1}`).join(' ')}`);
    writeFileSync(join(dir, 'user_sequence.txt'), `${lines.join('\n')}\n`);
    const json = join(dir, 'tune.json');
    const common = ['--format', 'sequences', '--data', dir, '--users', 'all', '--epochs', '2', '--every', '1'];
    const params = ['--param', 'sasrec.dim=8', '--param', 'sasrec.threads=1', '--param', 'sasrec.batchSize=16'];
    const r = await run(...common, ...params, '--grid', 'lr=0.01', '--grid', 'lr=0.01,loss=sampled-softmax,negatives=8', '--json', json);
    expect(r.stdout).toMatch(/best on validation: /);
    expect(r.stderr).toMatch(/protocol loo-full, validation cases: 60; starting point \{"loss":"ce","dropout":0.5,"maxLen":50,"lr":0.001\}/);
    const out = JSON.parse(readFileSync(json, 'utf8'));
    expect(out.protocol).toBe('loo-full');
    expect(out.profile).toEqual({ loss: 'ce', dropout: 0.5, maxLen: 50, lr: 0.001 });
    expect(out.rows).toHaveLength(4);
    for (const row of out.rows) expect(row.ndcg10).toBeGreaterThanOrEqual(0);
    expect(out.rows.map((x: { grid: string }) => x.grid)).toEqual([
      'lr=0.01',
      'lr=0.01',
      'lr=0.01,loss=sampled-softmax,negatives=8',
      'lr=0.01,loss=sampled-softmax,negatives=8',
    ]);
    await expect(run(...common, '--protocol', 'temporal')).rejects.toThrow(/--protocol must be loo or loo-full/);
  }, 120_000);
});
