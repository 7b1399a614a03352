/**
 * The LLM reasoner: every {@link Reasoner} operation done by any {@link LanguageModel}, with
 * versioned prompts (`./prompts.ts`), JSON-schema validation, semantic checks, bounded repair
 * retries, a per-call timeout, a call budget and cost accounting. Every method returns valid
 * output or throws an {@link LlmReasonerError}; the agent then runs the rules reasoner for that
 * one operation, so a bad answer never reaches memory.
 *
 * ## Budget
 * At most `maxCalls` model calls (first attempts and repairs alike) in any window of `perEvents`
 * consecutive observed events. The reasoner keeps an event clock and stamps every model call
 * with it; a call is allowed only while fewer than `maxCalls` calls carry a stamp in
 * `(clock - perEvents, clock]`. When the budget is exhausted, an operation throws
 * `LlmReasonerError('budget')` at once, without calling the model.
 *
 * The event clock needs no change in the agent: `MemoryAgent` calls `reflect` exactly once per
 * processed event (observe, processPending and train alike), so by default (`events: 'reflect'`)
 * each `reflect` call advances the clock by one before it checks the budget. A caller that uses
 * the reasoner without `reflect` (or wants to count events itself) sets `events: 'manual'` and
 * calls {@link LlmReasoner.noteEvents}. Operations run outside event processing (community
 * summaries on sync) are stamped with the current clock and share the same window.
 */
import { Validator, type OutputUnit } from '@cfworker/json-schema';
import type { Item } from '../core/types.js';
import type { GenerateResult, JsonSchema, LanguageModel } from '../models/types.js';
import {
  LIMITS,
  OPERATIONS,
  describeMemoryPrompt,
  mergeMemoriesPrompt,
  planLifecyclePrompt,
  reflectPrompt,
  rerankPrompt,
  summarizePrototypePrompt,
  synthesizeProfilePrompt,
  type BuiltPrompt,
  type OperationName,
} from './prompts.js';
import type { ForwardStep, MemoryText, MemoryView, PlanDecision, PlanInput, Reasoner, Reflection, RerankInput, RerankResult } from './types.js';

export type { OperationName } from './prompts.js';

/** Why an operation gave up: output `invalid` after repairs, `timeout`, `budget` exhausted, or the `model` threw. */
export type LlmFailureKind = 'invalid' | 'timeout' | 'budget' | 'model';

/** All failure kinds (for zeroed counters). */
const KINDS: readonly LlmFailureKind[] = ['invalid', 'timeout', 'budget', 'model'];

/**
 * An LLM operation failed; the caller (the agent) falls back to rules for this operation.
 * `kind` says why, `operation` which one; `cause` carries the model's error when there was one.
 */
export class LlmReasonerError extends Error {
  override name = 'LlmReasonerError';
  constructor(
    message: string,
    /** Why the operation failed. */
    readonly kind: LlmFailureKind,
    /** Which operation failed. */
    readonly operation: OperationName,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Budget of model calls: at most `maxCalls` in any window of `perEvents` consecutive events. */
export interface LlmBudget {
  maxCalls: number;
  perEvents: number;
}

/** What one attempt (a model call, or a call refused by the budget) did; given to `onCall`. */
export interface LlmCallInfo {
  operation: OperationName;
  /** Versioned prompt id, e.g. `reflect@2`. */
  prompt: string;
  /** 0 for the first attempt, 1… for repairs. */
  attempt: number;
  /** False when the budget refused the call (nothing was sent to the model). */
  called: boolean;
  /** True when the output was valid and is used. */
  ok: boolean;
  /** Why the attempt failed (absent when ok). */
  reason?: LlmFailureKind;
  /** Validation or model error message (absent when ok). */
  error?: string;
  promptTokens: number;
  outputTokens: number;
  /** Wall time of the call (0 when not called). */
  ms: number;
  /** True when the runtime constrained decoding to the schema. */
  constrained: boolean;
}

/** An operation that gave up (the agent ran the rules reasoner for it instead); given to `onFallback`. */
export interface LlmFallbackInfo {
  operation: OperationName;
  /** Versioned prompt id, e.g. `reflect@2`. */
  prompt: string;
  reason: LlmFailureKind;
  /** What went wrong, e.g. the last validation error. */
  message: string;
}

/** Cost counters of one operation (or the total). */
export interface OperationCosts {
  /** Operations requested. */
  requests: number;
  /** Operations that returned model output. */
  succeeded: number;
  /** Model calls made (first attempts + repairs). */
  calls: number;
  /** Model calls that failed (invalid output, timeout, model error). */
  failures: number;
  /** Repair calls made (subset of `calls`). */
  repairs: number;
  /** Operations that threw (the agent fell back to rules), by reason. `requests = succeeded + Σ fallbacks`. */
  fallbacks: Record<LlmFailureKind, number>;
  promptTokens: number;
  outputTokens: number;
  /** Total wall time of model calls. */
  ms: number;
}

/** A snapshot of costs and budget state, from {@link LlmReasoner.costs}. */
export interface LlmCosts {
  model: string;
  byOperation: Record<OperationName, OperationCosts>;
  total: OperationCosts;
  budget: LlmBudget & {
    /** Events observed so far (the event clock). */
    events: number;
    /** Calls in the current window. */
    windowCalls: number;
    /** Calls still allowed before the next event. */
    remaining: number;
  };
}

/** Options of {@link LlmReasoner}. */
export interface LlmReasonerOptions {
  model: LanguageModel;
  /** Time limit of one model call (ms); the call is aborted and the operation throws `timeout`. Default 15 000. */
  timeoutMs?: number;
  /** Repair retries after invalid output (each is one more model call). Default 1. */
  maxRepairs?: number;
  /** Call budget. Default `{ maxCalls: 60, perEvents: 20 }` (three calls per event on average: reflect, describe, and a share of planning, profile and repairs). */
  budget?: LlmBudget;
  /** How the event clock advances: each `reflect` call (default), or only {@link LlmReasoner.noteEvents}. */
  events?: 'reflect' | 'manual';
  /** Sampling temperature. Default 0. */
  temperature?: number;
  /** Called after every attempt (the inspector's feed). Errors thrown by it are ignored. */
  onCall?: (info: LlmCallInfo) => void;
  /** Called when an operation gives up (the agent then runs rules for it), with the reason. Errors thrown by it are ignored. */
  onFallback?: (info: LlmFallbackInfo) => void;
  /** Clock for wall times (ms). Default `performance.now`. */
  now?: () => number;
}

/** Add the counters of `c` into `into` (per-operation → total, or many reasoners → one). */
export function addCosts(into: OperationCosts, c: OperationCosts): void {
  into.requests += c.requests;
  into.succeeded += c.succeeded;
  into.calls += c.calls;
  into.failures += c.failures;
  into.repairs += c.repairs;
  into.promptTokens += c.promptTokens;
  into.outputTokens += c.outputTokens;
  into.ms += c.ms;
  for (const k of KINDS) into.fallbacks[k] += c.fallbacks[k];
}

/** All-zero counters. */
export function zeroCosts(): OperationCosts {
  return {
    requests: 0,
    succeeded: 0,
    calls: 0,
    failures: 0,
    repairs: 0,
    fallbacks: { invalid: 0, timeout: 0, budget: 0, model: 0 },
    promptTokens: 0,
    outputTokens: 0,
    ms: 0,
  };
}

/** An output failed validation: the message goes back to the model in a repair request. */
class InvalidOutput extends Error {}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this strips
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

/** A generated string: trimmed, non-empty, no control characters, at most `max` characters. */
function checkText(value: unknown, field: string, max: number): string {
  if (typeof value !== 'string') throw new InvalidOutput(`${field} must be a string`);
  const t = value.trim();
  if (!t) throw new InvalidOutput(`${field} is empty`);
  if (CONTROL.test(t)) throw new InvalidOutput(`${field} contains control characters`);
  if (t.length > max) throw new InvalidOutput(`${field} is longer than ${max} characters`);
  return t;
}

/** Parse a model's answer as one JSON object (a surrounding markdown code fence is tolerated). */
function parseJson(text: string): unknown {
  let t = text.trim();
  const fence = /^```(?:json)?\s*([\s\S]*?)\s*```$/i.exec(t);
  if (fence) t = fence[1];
  try {
    return JSON.parse(t);
  } catch (e) {
    throw new InvalidOutput(`the answer is not valid JSON (${(e as Error).message})`);
  }
}

function describeErrors(errors: OutputUnit[]): string {
  // why: cfworker reports the failing keyword at every level; the deepest ones say the most.
  const deepest = errors.filter((e) => !errors.some((o) => o !== e && o.instanceLocation.startsWith(`${e.instanceLocation}/`)));
  return (deepest.length ? deepest : errors)
    .slice(0, 3)
    .map((e) => `${e.instanceLocation || '#'}: ${e.error}`)
    .join('; ')
    .slice(0, 400);
}

const isAbort = (e: unknown): boolean => e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError');

/**
 * A {@link Reasoner} backed by a {@link LanguageModel}. Each operation: build the versioned
 * prompt, call the model (schema passed for constrained decoding, per-call timeout), parse,
 * validate against the schema, check semantics, repair up to `maxRepairs` times with the error
 * appended, and either return valid output or throw {@link LlmReasonerError}. See the module
 * comment for the budget.
 */
export class LlmReasoner implements Reasoner {
  /** `llm:<model id>`. */
  readonly id: string;
  private readonly model: LanguageModel;
  private readonly timeoutMs: number;
  private readonly maxRepairs: number;
  private readonly budget: LlmBudget;
  private readonly eventMode: 'reflect' | 'manual';
  private readonly temperature: number;
  private readonly onCall?: (info: LlmCallInfo) => void;
  private readonly onFallback?: (info: LlmFallbackInfo) => void;
  private readonly now: () => number;
  private readonly validators = new Map<JsonSchema, Validator>();
  private readonly stats = new Map<OperationName, OperationCosts>(OPERATIONS.map((op) => [op, zeroCosts()]));
  /** The event clock. */
  private eventCount = 0;
  /** Event stamps of recent model calls (non-decreasing; pruned to the window). */
  private callStamps: number[] = [];

  constructor(options: LlmReasonerOptions) {
    const budget = options.budget ?? { maxCalls: 60, perEvents: 20 };
    if (!Number.isInteger(budget.maxCalls) || budget.maxCalls < 0) throw new RangeError('budget.maxCalls must be an integer ≥ 0');
    if (!Number.isInteger(budget.perEvents) || budget.perEvents < 1) throw new RangeError('budget.perEvents must be an integer ≥ 1');
    const timeoutMs = options.timeoutMs ?? 15_000;
    if (!(timeoutMs > 0)) throw new RangeError('timeoutMs must be > 0');
    const maxRepairs = options.maxRepairs ?? 1;
    if (!Number.isInteger(maxRepairs) || maxRepairs < 0) throw new RangeError('maxRepairs must be an integer ≥ 0');
    this.model = options.model;
    this.id = `llm:${options.model.id}`;
    this.timeoutMs = timeoutMs;
    this.maxRepairs = maxRepairs;
    this.budget = { ...budget };
    this.eventMode = options.events ?? 'reflect';
    this.temperature = options.temperature ?? 0;
    this.onCall = options.onCall;
    this.onFallback = options.onFallback;
    this.now = options.now ?? (() => performance.now());
  }

  /** Advance the event clock by `n` observed events (the only way in `events: 'manual'` mode). */
  noteEvents(n = 1): void {
    if (!Number.isInteger(n) || n < 0) throw new RangeError('noteEvents: n must be an integer ≥ 0');
    this.eventCount += n;
    this.prune();
  }

  /** A snapshot of the cost counters and the budget state (a copy: safe to keep). */
  costs(): LlmCosts {
    this.prune();
    const byOperation = Object.fromEntries(OPERATIONS.map((op) => [op, structuredClone(this.stats.get(op)!)])) as Record<OperationName, OperationCosts>;
    const total = zeroCosts();
    for (const c of Object.values(byOperation)) addCosts(total, c);
    const windowCalls = this.callStamps.length;
    return {
      model: this.model.id,
      byOperation,
      total,
      budget: { ...this.budget, events: this.eventCount, windowCalls, remaining: Math.max(0, this.budget.maxCalls - windowCalls) },
    };
  }

  async describeMemory(input: { items: Item[]; strength: number; previous?: MemoryText }): Promise<MemoryText> {
    return this.run(describeMemoryPrompt(input), (v) => this.memoryText(v));
  }

  async reflect(step: ForwardStep): Promise<Reflection> {
    if (this.eventMode === 'reflect') this.noteEvents(1);
    const prompt = reflectPrompt(step);
    return this.run(prompt, (value) => {
      const v = value as { decision: 'consolidate' | 'form'; target: string; misled: string[]; insight: string };
      const insight = checkText(v.insight, 'insight', LIMITS.insight);
      const misled: string[] = [];
      for (const label of v.misled) {
        const id = prompt.misleading.get(label.trim());
        if (!id)
          throw new InvalidOutput(`misled: "${label}" is not a label of a misleading memory (${[...prompt.misleading.keys()].join(', ') || 'there are none'})`);
        if (!misled.includes(id)) misled.push(id);
      }
      if (v.decision === 'consolidate') {
        const target = prompt.supporting.get(v.target.trim());
        if (!target)
          throw new InvalidOutput(
            `target: "${v.target}" is not a label of a supporting memory (${[...prompt.supporting.keys()].join(', ') || 'there are none: use "form"'})`,
          );
        // why: STEAM consolidates only into a memory at similarity ≥ tau; a model must not glue unrelated interests together.
        const sim = step.supporting.find((s) => s.memory.id === target)?.similarity ?? -1;
        if (sim < step.tau)
          throw new InvalidOutput(
            `target: "${v.target}" has similarity ${sim.toFixed(2)}, below tau ${step.tau.toFixed(2)}: consolidate only into a memory at least that similar, else "form"`,
          );
        return { decision: 'consolidate', target, misled, insight };
      }
      if (v.target.trim() !== '') throw new InvalidOutput('target must be "" when decision is "form"');
      return { decision: 'form', misled, insight };
    });
  }

  async mergeMemories(a: MemoryView, b: MemoryView): Promise<MemoryText> {
    return this.run(mergeMemoriesPrompt(a, b), (v) => this.memoryText(v));
  }

  async summarizePrototype(input: { items: Item[]; size: number }): Promise<string> {
    return this.run(summarizePrototypePrompt(input), (v) => checkText((v as { summary: unknown }).summary, 'summary', LIMITS.summary));
  }

  async synthesizeProfile(memories: MemoryView[]): Promise<string> {
    // why: nothing to synthesise; the fixed sentence the rules reasoner uses costs no call.
    if (memories.length === 0) {
      this.stat('synthesizeProfile').requests++;
      this.stat('synthesizeProfile').succeeded++;
      return 'No interests known yet.';
    }
    return this.run(synthesizeProfilePrompt(memories), (v) => checkText((v as { narrative: unknown }).narrative, 'narrative', LIMITS.narrative));
  }

  /**
   * The LLM planner's operation: choose which candidate merges and forgets to run and whether
   * to resynthesise. Returns indices into `input.merges` / `input.faded` (labels are checked;
   * an unknown or repeated label is invalid output and goes to repair).
   */
  async planLifecycle(input: PlanInput): Promise<PlanDecision> {
    const prompt = planLifecyclePrompt(input);
    return this.run(prompt, (value) => {
      const v = value as { merge: string[]; forget: string[]; resynthesize: boolean; reason: string };
      const pick = (labels: string[], known: Map<string, number>, field: string): number[] => {
        const out: number[] = [];
        for (const label of labels) {
          const i = known.get(label.trim());
          if (i === undefined) throw new InvalidOutput(`${field}: "${label}" is not a label in the data (${[...known.keys()].join(', ') || 'there are none'})`);
          if (out.includes(i)) throw new InvalidOutput(`${field}: "${label}" is listed twice`);
          out.push(i);
        }
        return out;
      };
      return {
        merge: pick(v.merge, prompt.merges, 'merge'),
        forget: pick(v.forget, prompt.faded, 'forget'),
        resynthesize: v.resynthesize,
        reason: checkText(v.reason, 'reason', LIMITS.planReason),
      };
    });
  }

  /**
   * Listwise reranking with one-line reasons. Candidates beyond the prompt's cap keep their
   * place after the reranked ones. The answer must list every label exactly once.
   */
  async rerank(input: RerankInput): Promise<RerankResult> {
    if (input.candidates.length < 2) return { order: input.candidates.map((c) => ({ id: c.id, why: '' })) };
    const prompt = rerankPrompt(input);
    const order = await this.run(prompt, (value) => {
      const v = value as { ranking: { item: string; why: string }[] };
      const out: { id: string; why: string }[] = [];
      const seen = new Set<string>();
      for (const r of v.ranking) {
        const id = prompt.labels.get(r.item.trim());
        if (!id) throw new InvalidOutput(`ranking: "${r.item}" is not a candidate label (C1 … C${prompt.labels.size})`);
        if (seen.has(id)) throw new InvalidOutput(`ranking: "${r.item}" is listed twice; list every candidate exactly once`);
        seen.add(id);
        out.push({ id, why: checkText(r.why, 'why', LIMITS.why) });
      }
      if (out.length !== prompt.labels.size) throw new InvalidOutput(`ranking must list all ${prompt.labels.size} candidates`);
      return out;
    });
    const rest = input.candidates.slice(prompt.labels.size).map((c) => ({ id: c.id, why: '' }));
    return { order: [...order, ...rest] };
  }

  // ——— internals ———

  private memoryText(value: unknown): MemoryText {
    const v = value as { content: unknown; category: unknown };
    return { content: checkText(v.content, 'content', LIMITS.content), category: checkText(v.category, 'category', LIMITS.category) };
  }

  private stat(op: OperationName): OperationCosts {
    return this.stats.get(op)!;
  }

  private validator(schema: JsonSchema): Validator {
    let v = this.validators.get(schema);
    if (!v) this.validators.set(schema, (v = new Validator(schema as never, '2020-12', false)));
    return v;
  }

  /** Drop call stamps that left the window `(clock - perEvents, clock]`. */
  private prune(): void {
    const floor = this.eventCount - this.budget.perEvents;
    let i = 0;
    while (i < this.callStamps.length && this.callStamps[i] <= floor) i++;
    if (i) this.callStamps = this.callStamps.slice(i);
  }

  /** Reserve one call in the budget; false when exhausted. */
  private reserve(): boolean {
    this.prune();
    if (this.callStamps.length >= this.budget.maxCalls) return false;
    this.callStamps.push(this.eventCount);
    return true;
  }

  private report(info: LlmCallInfo): void {
    try {
      this.onCall?.(info);
    } catch {
      // the inspector's hook must not break reasoning
    }
  }

  private fail(prompt: BuiltPrompt, kind: LlmFailureKind, message: string, cause?: unknown): never {
    this.stat(prompt.operation).fallbacks[kind]++;
    try {
      this.onFallback?.({ operation: prompt.operation, prompt: prompt.id, reason: kind, message });
    } catch {
      // the inspector's hook must not break reasoning
    }
    throw new LlmReasonerError(`${prompt.id}: ${message}`, kind, prompt.operation, cause === undefined ? undefined : { cause });
  }

  /** One model call under the timeout. Resolves with the result or rejects with `timeout` / `model`. */
  private async call(prompt: BuiltPrompt, messages: BuiltPrompt['messages']): Promise<GenerateResult> {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const err = new DOMException(`no answer within ${this.timeoutMs} ms`, 'TimeoutError');
        controller.abort(err);
        reject(err);
      }, this.timeoutMs);
    });
    try {
      // why: race as well as abort, so a runtime that ignores the signal cannot hold us past the timeout.
      return await Promise.race([
        this.model.generate({ messages, schema: prompt.schema, maxTokens: prompt.maxTokens, temperature: this.temperature, signal: controller.signal }),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
      timeout.catch(() => undefined);
    }
  }

  /** The shared loop: budget → call → parse → validate → check → repair, or throw. */
  private async run<T>(prompt: BuiltPrompt, check: (value: unknown) => T): Promise<T> {
    const op = prompt.operation;
    const st = this.stat(op);
    st.requests++;
    let messages = prompt.messages;
    let lastError = '';
    for (let attempt = 0; attempt <= this.maxRepairs; attempt++) {
      const base = { operation: op, prompt: prompt.id, attempt };
      if (!this.reserve()) {
        this.report({
          ...base,
          called: false,
          ok: false,
          reason: 'budget',
          error: 'budget exhausted',
          promptTokens: 0,
          outputTokens: 0,
          ms: 0,
          constrained: false,
        });
        if (attempt === 0) this.fail(prompt, 'budget', `call budget exhausted (${this.budget.maxCalls} calls per ${this.budget.perEvents} events)`);
        this.fail(prompt, 'invalid', `${lastError} (no budget left to repair)`);
      }
      st.calls++;
      if (attempt > 0) st.repairs++;
      const t0 = this.now();
      let result: GenerateResult;
      try {
        result = await this.call(prompt, messages);
      } catch (e) {
        const ms = this.now() - t0;
        st.failures++;
        st.ms += ms;
        const kind: LlmFailureKind = isAbort(e) ? 'timeout' : 'model';
        const error = e instanceof Error ? e.message : String(e);
        this.report({ ...base, called: true, ok: false, reason: kind, error, promptTokens: 0, outputTokens: 0, ms, constrained: false });
        // why: a timeout or a broken runtime is not fixed by asking again; fall back now.
        this.fail(prompt, kind, kind === 'timeout' ? `timed out after ${this.timeoutMs} ms` : `the model failed: ${error}`, e);
      }
      const ms = this.now() - t0;
      st.ms += ms;
      st.promptTokens += result.promptTokens;
      st.outputTokens += result.outputTokens;
      const usage = { promptTokens: result.promptTokens, outputTokens: result.outputTokens, ms, constrained: result.constrained };
      try {
        const value = parseJson(result.text);
        const v = this.validator(prompt.schema).validate(value);
        if (!v.valid) throw new InvalidOutput(`the answer does not match the schema: ${describeErrors(v.errors)}`);
        const out = check(value);
        st.succeeded++;
        this.report({ ...base, called: true, ok: true, ...usage });
        return out;
      } catch (e) {
        if (!(e instanceof InvalidOutput)) this.fail(prompt, 'invalid', `checking the answer failed: ${String(e)}`, e);
        st.failures++;
        lastError = e.message;
        this.report({ ...base, called: true, ok: false, reason: 'invalid', error: lastError, ...usage });
        messages = [
          ...prompt.messages,
          { role: 'assistant', content: result.text.slice(0, 1000) },
          { role: 'user', content: `Your answer was rejected: ${lastError}. Answer again with only one JSON object that matches the schema.` },
        ];
      }
    }
    return this.fail(prompt, 'invalid', lastError);
  }
}
