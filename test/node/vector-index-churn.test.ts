// Regression: usearch 2.25.3's `remove` can spin forever after a few hundred removals
// (unum-cloud/USearch#753); the service's HnswVectorSearch and the benchmark's
// UsearchVectorSearch no longer call it. The churn runs in a child process so that a hang is a
// failure (killed after 60 s) instead of a test run that never ends, as CI saw at stop 18.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

describe('HNSW indexes under replace/remove churn', () => {
  it('2,000 replace/remove cycles on a 50-vector index end, and searches stay exact-equal', () => {
    const r = spawnSync(process.execPath, ['-C', 'atomem-source', '--import', 'tsx', 'test/fixtures/vector-churn.ts', '2000'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' });
    expect(r.signal, `killed: the churn did not end in 60 s\n${r.stderr}`).toBeNull();
    expect(r.status, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    for (const name of ['service', 'bench']) {
      expect(res[name].cycles).toBe(2000);
      expect(res[name].size).toBe(50);
      // no removed or replaced vector is ever returned
      expect(res[name].extra).toBe(0);
      // 50 live vectors among up to a few hundred stale nodes: still (near) exact
      expect(res[name].recall).toBeGreaterThanOrEqual(0.95);
    }
  }, 90_000);
});
