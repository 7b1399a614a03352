import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import '../src/methods.js';
import { runBenchmark } from '../src/run.js';
import { minimalValue } from '../../atomem/src/models/scripted.js';
import { twoGroupDataset } from '../../../test/fixtures/synthetic.js';

// The benchmark's LLM path: `--reasoner llm --llm openai-compatible --llm-url … --llm-model …`
// against a local OpenAI-compatible server (a scripted test server: it answers each request with
// JSON satisfying the request's response_format schema), and the `--llm scripted` mode.
describe('benchmark with the LLM reasoner', () => {
  const dataset = twoGroupDataset({ usersPerGroup: 6, itemsPerGroup: 12, len: 10 });
  const params = { 'atomem.embedder': 'hashing', 'atomem.centre': '0', 'atomem.tau': '0.3', 'atomem.fidelityUsers': '0', 'atomem.minCommunitySize': '2' };
  let server: Server;
  let url = '';
  const bodies: { model: string; response_format?: { json_schema?: { schema: Record<string, unknown> } } }[] = [];

  beforeAll(async () => {
    process.env.ATOMEM_BENCH_CACHE = mkdtempSync(join(tmpdir(), 'atomem-bench-'));
    server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        const body = JSON.parse(raw);
        bodies.push(body);
        const schema = body.response_format?.json_schema?.schema ?? {};
        const content = JSON.stringify(minimalValue(schema, () => 'Enjoys items of this kind'));
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ choices: [{ message: { role: 'assistant', content } }], usage: { prompt_tokens: 100, completion_tokens: 12 } }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });

  afterAll(() => new Promise((r) => server.close(r)));

  it('runs the protocol through an OpenAI-compatible server and reports the model cost', async () => {
    const result = await runBenchmark({
      dataset,
      methods: ['atomem'],
      privacy: ['off'],
      params: { ...params, 'atomem.reasoner': 'llm', 'atomem.llm': 'openai-compatible', 'atomem.llmUrl': url, 'atomem.llmModel': 'local-test' },
      seed: 2,
    });
    const row = result.results[0];
    const llm = row.llm as { model: string; calls: number; succeeded: number; promptTokens: number; outputTokens: number; fallbacks: Record<string, number> };
    expect(llm.model).toBe('openai:local-test');
    expect(llm.calls).toBeGreaterThan(0);
    expect(llm.calls).toBe(bodies.length);
    expect(llm.succeeded).toBeGreaterThan(0);
    expect(llm.promptTokens).toBe(100 * bodies.length);
    expect(bodies.every((b) => b.model === 'local-test' && b.response_format?.json_schema)).toBe(true);
    expect(row.ndcg10).toBeGreaterThan(0.3);
    expect(row.memoriesPerUser).toBeGreaterThan(0);
    // per operation: reflection and statements for every training event, and the LLM planner's sweeps
    const ops = (row.llm as { byOperation: Record<string, { requests: number; calls: number }> }).byOperation;
    expect(ops.reflect.requests).toBeGreaterThan(0);
    expect(ops.describeMemory.calls).toBeGreaterThan(0);
    expect(ops.planLifecycle.calls).toBeGreaterThan(0);
    expect(Object.values(ops).reduce((n, c) => n + c.calls, 0)).toBe(llm.calls);
  });

  it('--planner rules keeps the LLM out of planning', async () => {
    const result = await runBenchmark({
      dataset,
      methods: ['atomem'],
      privacy: ['off'],
      params: { ...params, 'atomem.reasoner': 'llm', 'atomem.planner': 'rules', 'atomem.llm': 'scripted' },
      seed: 2,
    });
    const ops = (result.results[0].llm as { byOperation: Record<string, { requests: number }> }).byOperation;
    expect(ops.planLifecycle.requests).toBe(0);
    expect(ops.reflect.requests).toBeGreaterThan(0);
  });

  it('--llm scripted: no model at all, the same path, deterministic', async () => {
    const run = () =>
      runBenchmark({ dataset, methods: ['atomem'], privacy: ['off'], params: { ...params, 'atomem.reasoner': 'llm', 'atomem.llm': 'scripted' }, seed: 2 });
    const [a, b] = [await run(), await run()];
    const llm = a.results[0].llm as { model: string; calls: number; succeeded: number };
    expect(llm.model).toBe('scripted:schema');
    expect(llm.succeeded).toBeGreaterThan(0);
    expect(b.results[0].ndcg10).toBe(a.results[0].ndcg10);
  });
});
