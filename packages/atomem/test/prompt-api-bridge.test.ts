import { describe, expect, it } from 'vitest';
import { PageGoneError, PromptApiLenders } from '../src/models/prompt-api-bridge.js';
import { createPromptApiModel } from '../src/models/prompt-api.js';
import { ModelUnavailableError } from '../src/models/types.js';
import type { PagePromptApi } from '../src/worker/protocol.js';

// The worker side of the Prompt API bridge (src/models/prompt-api-bridge.ts) against an
// in-process page side: the real client bridge (src/client/prompt-bridge.ts) over a scripted
// LanguageModel. The real path (Comlink, a worker, an iframe that goes away) is in
// packages/atomem/test/browser/prompt-api-bridge.test.ts.
import { promptBridge } from '../src/client/prompt-bridge.js';
import { installScriptedLanguageModel } from '../../../test/fixtures/scripted-language-model.js';

function page(answer: (input: unknown) => string) {
  const win: Record<string, unknown> = {};
  const lm = installScriptedLanguageModel(win, { answer });
  const b = promptBridge(win.LanguageModel as never);
  const aborted: number[] = [];
  const bridge: PagePromptApi = { ...b.bridge, abort: async (call) => (aborted.push(call), b.bridge.abort(call)) };
  return { lm, bridge, aborted, abortAll: b.abortAll };
}

describe('PromptApiLenders (worker side of the bridge)', () => {
  it("no page lends: ModelUnavailableError with the page's reason", async () => {
    const lenders = new PromptApiLenders();
    await expect(createPromptApiModel({ api: lenders.api() })).rejects.toThrow(ModelUnavailableError);
    lenders.lend(1, null, { reason: "Chrome Prompt API is blocked on this page by its permissions policy (feature 'language-model')" });
    await expect(createPromptApiModel({ api: lenders.api() })).rejects.toThrow(/permissions policy/);
    expect(await lenders.availability()).toBe('absent');
  });

  it('generate goes through the page with responseConstraint; an abort in the worker aborts the page-side call', async () => {
    const p = page((input) => (JSON.stringify(input).includes('hang') ? 'hang' : '{"ok":true}'));
    const lenders = new PromptApiLenders();
    lenders.lend(1, p.bridge);
    expect(await lenders.availability()).toBe('available');
    const model = await createPromptApiModel({ api: lenders.api() });
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
    const r = await model.generate({
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
      schema,
    });
    expect(r.text).toBe('{"ok":true}');
    expect(r.constrained).toBe(true);
    expect(p.lm.prompts[0].responseConstraint).toEqual(schema);
    const ac = new AbortController();
    const hanging = model.generate({ messages: [{ role: 'user', content: 'hang' }], signal: ac.signal });
    await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    await expect(hanging).rejects.toMatchObject({ name: 'AbortError' });
    expect(p.aborted.length).toBe(1);
    await expect.poll(() => p.lm.prompts.at(-1)?.aborted).toBe(true);
    await model.dispose();
  });

  it('the page goes away mid-call: PageGoneError at once; later calls use another page, or fail as unavailable', async () => {
    const a = page(() => 'hang');
    const b = page(() => '{"ok":true}');
    const lenders = new PromptApiLenders();
    lenders.lend(1, b.bridge);
    lenders.lend(2, a.bridge); // the newest loan is used
    const model = await createPromptApiModel({ api: lenders.api() });
    const call = model.generate({ messages: [{ role: 'user', content: 'x' }] });
    await new Promise((r) => setTimeout(r, 20));
    lenders.gone(2);
    await expect(call).rejects.toBeInstanceOf(PageGoneError);
    await expect(call).rejects.toThrow(/went away during the call/);
    expect((await model.generate({ messages: [{ role: 'user', content: 'x' }] })).text).toBe('{"ok":true}');
    lenders.gone(1, 'left');
    await expect(model.generate({ messages: [{ role: 'user', content: 'x' }] })).rejects.toThrow(/no page lends/);
  });
});
