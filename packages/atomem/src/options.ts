/**
 * Names of the public options, checked at run time: plain JavaScript has no types, so a typo
 * (`embeder`) would otherwise be ignored in silence. `createAtomem` checks its options before it
 * starts a worker, the engine's `init` and `recommend` check theirs again (custom workers call
 * the engine directly). An unknown name is a `TypeError` naming the nearest valid one.
 *
 * The lists must equal the TypeScript declarations (`CreateAtomemOptions`, `EngineOptions`,
 * `LlmOptions`, `IndexOptions`, `EmbedderSpec`, `RecommendOptions`):
 * packages/atomem/test/package-readme.test.ts compares them with the compiler API.
 *
 * No imports: the page's entry bundles this file.
 */

/** The community index's privacy levels (`index.privacy`, `setPrivacy`). */
export const PRIVACY_LEVELS = ['off', 'receive', 'contribute'] as const;

/** Option names per object: `engine` = `EngineOptions`, `client` = what `createAtomem` adds. */
export const OPTION_NAMES = {
  engine: ['profile', 'catalog', 'embedder', 'assetsBaseUrl', 'catalogVectors', 'llm', 'index', 'config'],
  client: ['shared', 'worker', 'persist', 'onProgress', 'onError', 'renderWhy'],
  llm: ['promptApi', 'webllm', 'openai', 'budget', 'wllama', 'idleMs'],
  'llm.webllm': ['model', 'appConfig'],
  'llm.openai': ['baseUrl', 'model', 'apiKey'],
  'llm.budget': ['maxCalls', 'perEvents'],
  'llm.wllama': ['model', 'wasmUrl', 'contextSize'],
  index: ['url', 'privacy', 'attesterUrl', 'relay', 'prio3Module', 'syncEvery', 'reportDelay', 'budget'],
  'embedder.use-lite': ['kind', 'baseUrl', 'wasmPaths'],
  'embedder.minilm': ['kind', 'model', 'modelBaseUrl', 'wasmPaths', 'device', 'dtype'],
  'embedder.hashing': ['kind', 'dim'],
  recommend: ['rerank', 'diversify', 'exclude', 'intent', 'limit'],
} as const satisfies Record<string, readonly string[]>;

/** Levenshtein distance (insertions, deletions, substitutions; case-insensitive). */
export function editDistance(a: string, b: string): number {
  a = a.toLowerCase();
  b = b.toLowerCase();
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = row;
  }
  return prev[b.length];
}

/** The name of `known` nearest to `name`, if one is near enough to be a typo of it (distance ≤ max(2, a third of its length)). */
export function nearestName(name: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best !== undefined && bestD <= Math.max(2, Math.floor(best.length / 3)) ? best : undefined;
}

/** Throw a `TypeError` for the first own key of `obj` not in `known`, naming the nearest valid one. */
export function checkNames(obj: object, known: readonly string[], where: string): void {
  for (const key of Object.keys(obj)) {
    if (known.includes(key)) continue;
    const near = nearestName(key, known);
    throw new TypeError(`${where}: unknown option "${key}"${near ? ` — did you mean "${near}"?` : ''} (valid: ${known.join(', ')})`);
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Check the names of `createAtomem`'s (`client: true`) or `init`'s options, nested objects
 * included (`llm`, `llm.*`, `index`, an `embedder` object). `config`'s knobs are checked by
 * `checkConfigNames` (core/config.ts). Values are checked where they are used.
 */
export function checkOptionNames(options: unknown, where: string, client = false): void {
  if (!isObject(options))
    throw new TypeError(`${where}: options must be an object, got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`);
  checkNames(options, client ? [...OPTION_NAMES.engine, ...OPTION_NAMES.client] : OPTION_NAMES.engine, where);
  const { llm, index, embedder } = options;
  if (isObject(llm)) {
    checkNames(llm, OPTION_NAMES.llm, `${where}: llm`);
    for (const k of ['webllm', 'openai', 'budget', 'wllama'] as const) if (isObject(llm[k])) checkNames(llm[k], OPTION_NAMES[`llm.${k}`], `${where}: llm.${k}`);
  }
  if (isObject(index)) checkNames(index, OPTION_NAMES.index, `${where}: index`);
  if (isObject(embedder)) {
    const kind = embedder.kind;
    if (kind === 'use-lite' || kind === 'minilm' || kind === 'hashing')
      checkNames(embedder, OPTION_NAMES[`embedder.${kind}`], `${where}: embedder (kind '${kind}')`);
  }
}

/** Throw a `TypeError` unless `level` is one of {@link PRIVACY_LEVELS}. */
export function checkPrivacyLevel(level: unknown, where: string): asserts level is (typeof PRIVACY_LEVELS)[number] {
  if (!(PRIVACY_LEVELS as readonly unknown[]).includes(level))
    throw new TypeError(`${where} must be 'off', 'receive' or 'contribute', got ${typeof level === 'string' ? `'${level}'` : String(level)}`);
}
