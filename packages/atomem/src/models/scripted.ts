/**
 * A deterministic stand-in language model with no weights: it answers every request with the
 * smallest JSON that satisfies the request's schema (first enum value, empty arrays, empty
 * optional strings, required text taken from the prompt's data). For plumbing — the benchmark's `--llm scripted` mode
 * and offline demos — never for quality: it exercises prompts, validation, budget and cost
 * accounting end to end, exactly as a real model's answers would.
 */
import type { GenerateRequest, GenerateResult, JsonSchema, LanguageModel } from './types.js';

/** The minimal value of a (subset of) JSON schema; strings come from `words`, in turn. */
export function minimalValue(schema: JsonSchema, words: () => string): unknown {
  const s = schema as { type?: string; enum?: unknown[]; properties?: Record<string, JsonSchema>; required?: string[]; minLength?: number; maxLength?: number; minItems?: number; items?: JsonSchema };
  if (Array.isArray(s.enum) && s.enum.length) return s.enum[0];
  switch (s.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const key of s.required ?? Object.keys(s.properties ?? {})) out[key] = minimalValue(s.properties?.[key] ?? {}, words);
      return out;
    }
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => minimalValue(s.items ?? {}, words));
    case 'number':
    case 'integer':
      return 0;
    case 'boolean':
      return false;
    default: {
      // why: an optional string (a label, a target) is empty in the smallest answer.
      if ((s.minLength ?? 0) === 0) return '';
      const text = words().slice(0, s.maxLength ?? 80).trim() || 'interest';
      return text.length >= (s.minLength ?? 0) ? text : text.padEnd(s.minLength ?? 0, '.');
    }
  }
}

/** Create the scripted model (`id` `scripted:schema`, backend `remote` so it is never mistaken for an on-device model). */
export function createScriptedModel(): LanguageModel {
  return {
    id: 'scripted:schema',
    backend: 'remote',
    async generate(req: GenerateRequest): Promise<GenerateResult> {
      if (req.signal?.aborted) throw new DOMException('The operation was aborted', 'AbortError');
      const prompt = req.messages.map((m) => m.content).join('\n');
      const titles = [...prompt.matchAll(/"title":"([^"]{1,80})"/g)].map((m) => m[1]);
      let i = 0;
      const words = (): string => (titles.length ? `Likes ${titles[i++ % titles.length]}` : 'Likes these items');
      const text = JSON.stringify(req.schema ? minimalValue(req.schema, words) : { text: words() });
      return { text, promptTokens: Math.ceil(prompt.length / 4), outputTokens: Math.ceil(text.length / 4), ms: 0, constrained: true };
    },
    async dispose() {},
  };
}
