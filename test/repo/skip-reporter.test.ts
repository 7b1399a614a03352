import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { TestModule } from 'vitest/node';
import { skipLine } from '../skip-reporter.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A finished test module as the reporter sees it: its file and its tests' states. */
function mod(file: string, states: string[]): TestModule {
  return { moduleId: `${ROOT}${file}`, children: { allTests: () => states.map((state) => ({ result: () => ({ state }) })) } } as unknown as TestModule;
}

describe('the skip line of test/skip-reporter.ts', () => {
  it('is silent when nothing was skipped', () => {
    expect(skipLine([mod('packages/atomem/test/shelf-trust.test.ts', ['passed', 'passed'])])).toBeUndefined();
  });

  it('names each missing requirement with its count, and other skips apart', () => {
    const before = process.env.COMMUNITY_BENCH;
    delete process.env.COMMUNITY_BENCH;
    try {
      const line = skipLine([
        mod('test/node/community-bench.test.ts', ['skipped', 'skipped', 'skipped']),
        mod('packages/atomem/test/shelf-trust.test.ts', ['passed', 'skipped']),
      ]);
      expect(line).toBe(
        'skipped 4 tests: COMMUNITY_BENCH not set (the opt-in community index benchmark: 3 tests), 1 test skipped by a name filter or it.skip — README "Set-up" says how to run the full set',
      );
    } finally {
      if (before !== undefined) process.env.COMMUNITY_BENCH = before;
    }
  });

  it('a requirement that is present does not explain a skip', () => {
    const before = process.env.COMMUNITY_BENCH;
    process.env.COMMUNITY_BENCH = '1';
    try {
      expect(skipLine([mod('test/node/community-bench.test.ts', ['skipped'])])).toBe('skipped 1 test: 1 test skipped by a name filter or it.skip');
    } finally {
      if (before === undefined) delete process.env.COMMUNITY_BENCH;
      else process.env.COMMUNITY_BENCH = before;
    }
  });
});
