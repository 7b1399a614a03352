/**
 * The LLM path defects: each test fails on the old behaviour.
 */
import { describe, expect, it } from 'vitest';
import { createScriptedModel } from '../src/models/scripted.js';
import { describeMemoryPrompt, reflectPrompt } from '../src/reason/prompts.js';
import type { ForwardStep, MemoryView } from '../src/reason/types.js';
import { events, j, llm, makeAgent, observeAll, opOf, routedModel, VALID } from '../../../test/fixtures/llm-agent.js';

const view = (id: string, content: string, strength = 0.5): MemoryView => ({
  id,
  content,
  category: 'Crime',
  strength,
  evidence: 2,
  items: [{ id: 'heat', title: 'Heat (1995)', categories: ['Crime'] }],
});
const step = (similarity: number, tau = 0.35): ForwardStep => ({
  weight: 1,
  actual: { id: 'fargo', title: 'Fargo (1996)', categories: ['Crime'] },
  correct: true,
  supporting: [{ memory: view('m-a', 'Loves crime films'), similarity }],
  misleading: [],
  tau,
});

describe('scripted model', () => {
  it('writes text from the titles of the pretty-printed data block, not "Likes these items"', async () => {
    const p = describeMemoryPrompt({ items: [{ id: 'x', title: 'Heat (1995)' }], strength: 0.5 });
    const out = JSON.parse((await createScriptedModel().generate({ messages: p.messages, schema: p.schema })).text) as { content: string };
    expect(out.content).toBe('Likes Heat (1995)');
  });

  it('reflect: consolidates into a supporting memory at similarity ≥ tau, forms below it', async () => {
    const model = createScriptedModel();
    const ask = async (s: ForwardStep) => {
      const p = reflectPrompt(s);
      return JSON.parse((await model.generate({ messages: p.messages, schema: p.schema })).text) as { decision: string; target: string };
    };
    expect(await ask(step(0.8))).toMatchObject({ decision: 'consolidate', target: 'M1' });
    expect(await ask(step(0.2))).toMatchObject({ decision: 'form', target: '' });
  });

  it('says it did not constrain decoding', async () => {
    const p = describeMemoryPrompt({ items: [{ id: 'x', title: 'Heat (1995)' }], strength: 0.5 });
    expect((await createScriptedModel().generate({ messages: p.messages, schema: p.schema })).constrained).toBe(false);
  });
});

describe('LlmReasoner.reflect checks similarity ≥ tau for consolidate', () => {
  it('a consolidate below tau is invalid (then repaired or replaced by rules), never applied', async () => {
    const { model } = routedModel({}, () => j({ decision: 'consolidate', target: 'M1', misled: [], insight: 'glue it on' }));
    const { reasoner } = llm(model, { maxRepairs: 0 });
    await expect(reasoner.reflect(step(0.1))).rejects.toThrow(/below tau/);
    await expect(reasoner.reflect(step(0.9))).resolves.toMatchObject({ decision: 'consolidate', target: 'm-a' });
  });
});

describe("describeMemory gets the memory's previous text when it is updated", () => {
  it('the second event of one interest sends previous { content, category }', async () => {
    const { model } = routedModel(
      {
        reflect: [VALID.reflect, j({ decision: 'consolidate', target: 'M1', misled: [], insight: 'fits' })],
        describeMemory: [
          j({ content: 'Loves heist films such as Heat (1995)', category: 'Heists' }),
          j({ content: 'Loves heist films: Heat, Fargo', category: 'Heists' }),
        ],
      },
      (op) => VALID[op],
    );
    const { reasoner } = llm(model);
    const agent = makeAgent({ reasoner });
    await observeAll(agent, events(['heat'], ['fargo']));
    const describes = model.requests.filter((r) => opOf(r) === 'describeMemory').map((r) => r.messages[1].content);
    expect(describes[0]).not.toContain('"previous"');
    expect(describes[1]).toContain('"previous"');
    expect(describes[1]).toContain('Loves heist films such as Heat (1995)');
  });
});
