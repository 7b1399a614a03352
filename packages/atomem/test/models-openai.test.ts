import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOpenAICompatibleModel, OpenAICompatibleError } from '../src/models/openai.js';
import type { JsonSchema } from '../src/models/types.js';

// A real local HTTP server speaking the chat-completions shape: a test double of the SERVER only.
// The adapter's real code path (global fetch, headers, body, status handling, parsing) runs.

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
}

type Behaviour = (req: IncomingMessage, res: ServerResponse, body: Record<string, unknown>) => void;

let server: Server;
let baseUrl: string;
let seen: Seen[] = [];
let behaviour: Behaviour;
const open = new Set<ServerResponse>();

const ok = (content: string, usage: Record<string, number> | null = { prompt_tokens: 21, completion_tokens: 7, total_tokens: 28 }) =>
  ({
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: 'test-model',
    choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    ...(usage ? { usage } : {}),
  }) as const;

const json = (res: ServerResponse, status: number, value: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      open.add(res);
      res.on('close', () => open.delete(res));
      behaviour(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  for (const res of open) res.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  seen = [];
  behaviour = (_req, res) => json(res, 200, ok('{"content":"likes trail shoes","category":"shoes"}'));
});

const SCHEMA: JsonSchema = {
  type: 'object',
  properties: { content: { type: 'string' }, category: { type: 'string' } },
  required: ['content', 'category'],
  additionalProperties: false,
};
const messages = [
  { role: 'system' as const, content: 'Write one memory as JSON.' },
  { role: 'user' as const, content: 'Bought trail shoes.' },
];

describe('OpenAI-compatible adapter against a local chat-completions server', () => {
  it('POSTs model, messages, response_format (json_schema, strict), max_tokens and reads usage', async () => {
    const model = createOpenAICompatibleModel({ baseUrl: `${baseUrl}/`, model: 'test-model', apiKey: 'sk-test' });
    expect(model.id).toBe('openai:test-model');
    expect(model.backend).toBe('remote');

    const result = await model.generate({ messages, schema: SCHEMA, maxTokens: 64 });

    expect(seen).toHaveLength(1);
    const [req] = seen;
    expect(req.method).toBe('POST');
    expect(req.url).toBe('/v1/chat/completions');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers.authorization).toBe('Bearer sk-test');
    expect(req.body).toEqual({
      model: 'test-model',
      messages,
      max_tokens: 64,
      temperature: 0,
      stream: false,
      response_format: { type: 'json_schema', json_schema: { name: 'output', schema: SCHEMA, strict: true } },
    });
    expect(result.text).toBe('{"content":"likes trail shoes","category":"shoes"}');
    expect(result.promptTokens).toBe(21);
    expect(result.outputTokens).toBe(7);
    // the server may ignore response_format: a schema sent is not decoding constrained
    expect(result.constrained).toBe(false);
    expect(result.ms).toBeGreaterThan(0);
  });

  it('sends no response_format and no Authorization when neither is given; estimates tokens without usage', async () => {
    behaviour = (_req, res) => json(res, 200, ok('a free answer without usage', null));
    const model = createOpenAICompatibleModel({ baseUrl, model: 'm' });
    const result = await model.generate({ messages, temperature: 0.7 });
    expect(seen[0].body).not.toHaveProperty('response_format');
    expect(seen[0].body).toMatchObject({ max_tokens: 256, temperature: 0.7 });
    expect(seen[0].headers.authorization).toBeUndefined();
    expect(result.constrained).toBe(false);
    expect(result.outputTokens).toBe(Math.ceil('a free answer without usage'.length / 4));
    expect(result.promptTokens).toBe(Math.ceil((messages[0].content.length + messages[1].content.length) / 4));
  });

  it('HTTP 500 → OpenAICompatibleError with the status and an excerpt of the body', async () => {
    behaviour = (_req, res) => json(res, 500, { error: { message: 'backend exploded', type: 'server_error' } });
    const model = createOpenAICompatibleModel({ baseUrl, model: 'm' });
    const err = await model.generate({ messages }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAICompatibleError);
    expect(err).toMatchObject({ name: 'OpenAICompatibleError', kind: 'http', status: 500 });
    expect((err as OpenAICompatibleError).body).toContain('backend exploded');
    expect((err as Error).message).toMatch(/HTTP 500.*backend exploded/);
  });

  it('a long error body is cut to an excerpt', async () => {
    behaviour = (_req, res) => {
      res.writeHead(429, { 'content-type': 'text/plain' });
      res.end('x'.repeat(5_000));
    };
    const err = (await createOpenAICompatibleModel({ baseUrl, model: 'm' })
      .generate({ messages })
      .catch((e: unknown) => e)) as OpenAICompatibleError;
    expect(err.status).toBe(429);
    expect(err.body!.length).toBeLessThanOrEqual(501);
  });

  it('a 200 whose body is not JSON → malformed error naming the problem', async () => {
    behaviour = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"choices": [ this is not json');
    };
    const err = (await createOpenAICompatibleModel({ baseUrl, model: 'm' })
      .generate({ messages })
      .catch((e: unknown) => e)) as OpenAICompatibleError;
    expect(err).toBeInstanceOf(OpenAICompatibleError);
    expect(err.kind).toBe('malformed');
    expect(err.status).toBe(200);
    expect(err.message).toMatch(/not JSON/);
    expect(err.body).toContain('this is not json');
  });

  it('a JSON body without choices[0].message.content → malformed error', async () => {
    behaviour = (_req, res) => json(res, 200, { object: 'chat.completion', choices: [] });
    const err = (await createOpenAICompatibleModel({ baseUrl, model: 'm' })
      .generate({ messages })
      .catch((e: unknown) => e)) as OpenAICompatibleError;
    expect(err.kind).toBe('malformed');
    expect(err.message).toMatch(/choices\[0\]\.message\.content/);
  });

  it('times out: a server that never answers → timeout error within the limit', async () => {
    behaviour = () => {
      /* never answers */
    };
    const model = createOpenAICompatibleModel({ baseUrl, model: 'm', timeoutMs: 150 });
    const started = Date.now();
    const err = (await model.generate({ messages }).catch((e: unknown) => e)) as OpenAICompatibleError;
    expect(err).toBeInstanceOf(OpenAICompatibleError);
    expect(err.kind).toBe('timeout');
    expect(err.message).toMatch(/timed out after 150 ms/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("aborts: the caller's signal (before and during the request) rejects with AbortError", async () => {
    const model = createOpenAICompatibleModel({ baseUrl, model: 'm' });
    const before = new AbortController();
    before.abort();
    await expect(model.generate({ messages, signal: before.signal })).rejects.toMatchObject({ name: 'AbortError' });
    expect(seen).toHaveLength(0);

    behaviour = () => {
      /* never answers */
    };
    const during = new AbortController();
    const pending = model.generate({ messages, signal: during.signal });
    await expect.poll(() => seen.length).toBe(1);
    during.abort();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('dispose aborts calls in flight and refuses new ones', async () => {
    behaviour = () => {
      /* never answers */
    };
    const model = createOpenAICompatibleModel({ baseUrl, model: 'm' });
    const pending = model.generate({ messages });
    await expect.poll(() => seen.length).toBe(1);
    await model.dispose();
    await expect(pending).rejects.toMatchObject({ name: 'AbortError' });
    await model.dispose();
    await expect(model.generate({ messages })).rejects.toThrow(/disposed/);
  });

  it('a server that is not there → network error', async () => {
    const dead = createServer();
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
    const port = (dead.address() as AddressInfo).port;
    await new Promise<void>((resolve) => dead.close(() => resolve()));
    const err = (await createOpenAICompatibleModel({ baseUrl: `http://127.0.0.1:${port}/v1`, model: 'm' })
      .generate({ messages })
      .catch((e: unknown) => e)) as OpenAICompatibleError;
    expect(err).toBeInstanceOf(OpenAICompatibleError);
    expect(err.kind).toBe('network');
  });
});
