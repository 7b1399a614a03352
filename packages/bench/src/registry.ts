/**
 * The registry of benchmark methods. Other folders add methods without editing the bench:
 *
 * ```ts
 * // packages/bench/src/atomem-method.ts
 * import { registerMethod } from './registry.js';
 * registerMethod('atomem', (opts) => new AtomemMethod(opts), { privacyLevels: ['off', 'contribute'] });
 * ```
 * and one line `import './atomem-method.js';` in `methods.ts`.
 *
 * why a separate file: `methods.ts` imports the method modules, which import this one; a
 * registry living in `methods.ts` itself would be read before its Map is initialised.
 */
import type { Method, Privacy, Setting } from './types.js';

export const PRIVACY_LEVELS: readonly Privacy[] = ['off', 'contribute'];

/** What a factory gets for one method instance. */
export interface MethodOptions {
  /** Registered name, e.g. `atomem-no-communities`. */
  name: string;
  /** Privacy level of this instance; `'off'` for methods that declare no levels. */
  privacy: Privacy;
  /** The run's seed (also in `MethodContext.seed`). */
  seed: number;
  /** Free-form parameters from the caller (`runBenchmark({ params })`, CLI `--param k=v`). */
  params: Readonly<Record<string, string>>;
}

/** Makes one method instance; may be async (e.g. to load a model). */
export type MethodFactory = ((opts: MethodOptions) => Method | Promise<Method>) & {
  /** Privacy levels the method distinguishes; absent → it runs once, reported with privacy `null`. */
  privacyLevels?: readonly Privacy[];
  /** One line for `--list`. */
  description?: string;
  /** An ablation: not in the default method list (run them with `--methods atomem,ablations`). */
  ablation?: boolean;
  /** A control of one setting (e.g. `atomem-no-intent` for `instruct`): in the default list only there. */
  defaultIn?: readonly Setting[];
};

export interface RegisterOptions {
  privacyLevels?: readonly Privacy[];
  description?: string;
  /** An ablation (not run by default; see {@link MethodFactory.ablation}). */
  ablation?: boolean;
  /** In the default method list only in these settings (see {@link MethodFactory.defaultIn}). */
  defaultIn?: readonly Setting[];
  /** Replace an existing registration of that name instead of throwing. */
  replace?: boolean;
}

/** name → factory, in registration order. */
export const methodFactories = new Map<string, MethodFactory>();

/** Registers `factory` under `name` (a duplicate name throws unless `replace`). */
export function registerMethod(name: string, factory: (opts: MethodOptions) => Method | Promise<Method>, info: RegisterOptions = {}): void {
  if (!/^[a-z0-9][a-z0-9._-]*$/i.test(name)) throw new Error(`registerMethod: invalid name ${JSON.stringify(name)}`);
  if (methodFactories.has(name) && !info.replace) throw new Error(`registerMethod: ${name} is already registered`);
  const declared = info.privacyLevels ?? (factory as MethodFactory).privacyLevels;
  if (declared) {
    for (const p of declared) if (!PRIVACY_LEVELS.includes(p)) throw new Error(`registerMethod ${name}: unknown privacy level ${p}`);
  }
  const f: MethodFactory = (opts) => factory(opts);
  f.privacyLevels = declared?.length ? [...declared] : undefined;
  f.description = info.description ?? (factory as MethodFactory).description;
  if (info.ablation) f.ablation = true;
  if (info.defaultIn) f.defaultIn = [...info.defaultIn];
  methodFactories.set(name, f);
}

/** A numeric `--param`, or undefined when absent; throws a clear error when not a number. */
export function paramNumber(params: Readonly<Record<string, string>>, key: string): number | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`parameter ${key} must be a number, got ${JSON.stringify(v)}`);
  return n;
}
