/**
 * A deterministic stand-in language model with no weights, for plumbing — the benchmark's
 * `--llm scripted` mode and offline demos — never for quality. It answers every request with
 * JSON that satisfies the request's schema, the way a careful model following the prompt's
 * rules would, from the prompt's `<data>` block:
 * - strings come from the items' titles in the data ("Likes <title>");
 * - `reflect` consolidates into the supporting memory with the highest similarity when that is
 *   at least `tau` and of the same polarity, and forms a new memory otherwise (so `--llm
 *   scripted` exercises consolidation, not only formation);
 * - every other field takes the smallest valid value (first enum value, empty arrays, empty
 *   optional strings).
 * It reports `constrained: false`: nothing constrains its decoding, it just answers validly.
 */
import type { GenerateRequest, GenerateResult, JsonSchema, LanguageModel } from './types.js';

/** The minimal value of a (subset of) JSON schema; strings come from `words`, in turn. */
export function minimalValue(schema: JsonSchema, words: () => string): unknown {
  const s = schema as {
    type?: string;
    enum?: unknown[];
    properties?: Record<string, JsonSchema>;
    required?: string[];
    minLength?: number;
    maxLength?: number;
    minItems?: number;
    items?: JsonSchema;
  };
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
      const text =
        words()
          .slice(0, s.maxLength ?? 80)
          .trim() || 'interest';
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
      // why: the data block is pretty-printed JSON (`"title": "…"`), with < and > escaped.
      const titles = [...prompt.matchAll(/"title":\s*"([^"]{1,80})"/g)].map((m) => m[1].replace(/\\u003c/g, '<').replace(/\\u003e/g, '>'));
      let i = 0;
      const words = (): string => (titles.length ? `Likes ${titles[i++ % titles.length]}` : 'Likes these items');
      const value = req.schema ? minimalValue(req.schema, words) : { text: words() };
      const reflection = reflectDecision(req.schema, prompt);
      if (reflection) Object.assign(value as Record<string, unknown>, reflection);
      const text = JSON.stringify(value);
      return { text, promptTokens: Math.ceil(prompt.length / 4), outputTokens: Math.ceil(text.length / 4), ms: 0, constrained: false };
    },
    async dispose() {},
  };
}

/** The `<data>` JSON of a prompt, or undefined. */
function dataOf(prompt: string): Record<string, unknown> | undefined {
  const m = /<data>\n([\s\S]*)\n<\/data>/.exec(prompt);
  if (!m) return undefined;
  try {
    return JSON.parse(m[1]) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/**
 * For a reflection request (its schema has a `decision` enum with `consolidate`): the decision a
 * rule-following model makes — consolidate into the most similar supporting memory with
 * similarity ≥ tau and the interaction's polarity, else form.
 */
function reflectDecision(schema: JsonSchema | undefined, prompt: string): { decision: string; target: string } | undefined {
  const props = (schema as { properties?: Record<string, { enum?: unknown[] }> } | undefined)?.properties;
  if (!props?.decision?.enum?.includes('consolidate')) return undefined;
  const data = dataOf(prompt);
  if (!data) return undefined;
  const tau = typeof data.tau === 'number' ? data.tau : 1;
  const polarity = data.action === 'disliked' ? -1 : 1;
  const supporting = Array.isArray(data.supporting) ? (data.supporting as { label?: string; similarity?: number; strength?: number }[]) : [];
  let best: { label: string; similarity: number } | undefined;
  for (const s of supporting) {
    if (typeof s.label !== 'string' || typeof s.similarity !== 'number' || s.similarity < tau) continue;
    if ((Math.sign(s.strength ?? 0) || polarity) !== polarity) continue;
    if (!best || s.similarity > best.similarity) best = { label: s.label, similarity: s.similarity };
  }
  return best ? { decision: 'consolidate', target: best.label } : { decision: 'form', target: '' };
}
