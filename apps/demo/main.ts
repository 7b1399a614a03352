/**
 * The demo shop page: a product grid by department, a "For you" shelf re-ranked live after each
 * action with atomem's explanations, fake browsing as a persona, and an inspector of everything
 * atomem keeps on this device (memories, lifecycle events, profile, communities, the exact
 * payload last shared, model status, and — when the server configured a language model — every
 * model call, its cost and every fallback to rules). With a model active, the shopper may let it
 * rerank the shelf (`recommend(ids, { rerank: SHELF_SIZE })`, off by default: one model call per
 * refresh); its one-line reasons are marked "model". "What are you shopping for?" re-ranks the shelf
 * live with memory + the typed intent (`recommend(ids, { intent })`); the inspector shows the
 * memories the intent selected (`intentMemories`). Plain TypeScript, no framework.
 *
 * Model output is untrusted: it only ever reaches the DOM as text (`h()` / `textContent`).
 *
 * `window.atomemDemo.idle()` resolves once the page has nothing pending (see `idle` below): the
 * e2e tests wait on it instead of sleeping.
 *
 * The page imports the public `atomem` package as a shop does (its built dist/, with the
 * `atomem/vite` plugin in vite.config.ts serving and emitting the worker and model files).
 */
import {
  createAtomem,
  type Atomem,
  type AtomicMemory,
  type EngineStatus,
  type ExcludeRule,
  type LifecycleEvent,
  type LlmEvent,
  type LlmOptions,
  type PrivacyLevel,
  type ProgressEvent,
  type RecommendationResult,
} from 'atomem';
import { DEPARTMENTS, generateCatalog, productImageUrl, seededRandom, toItems, type Product } from './catalog.js';

type LlmCosts = NonNullable<EngineStatus['llm']['costs']>;
type OperationCosts = LlmCosts['total'];

/** What apps/demo/server.ts answers at `/demo-config.json` (from its environment variables). */
interface DemoConfig {
  llm: LlmOptions | null;
  /** The catalog's vectors, embedded by the server at start (a same-origin path). */
  catalogVectors?: string;
}

/** Items on the "For you" shelf. */
const SHELF_SIZE = 8;
/** localStorage key of the shopper's choice to let the model rerank the shelf (`on` / `off`). */
const RERANK_KEY = 'atomem-demo-rerank';

const catalog: Product[] = generateCatalog();
const byId = new Map(catalog.map((p) => [p.id, p]));

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing`);
  return el as T;
};

/** Create an element with attributes and children. */
function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') el.className = v;
    else el.setAttribute(k, v);
  }
  el.append(...children);
  return el;
}

function notice(text: string): void {
  $('notice').textContent = text;
}

function titleOf(id: string): string {
  return byId.get(id)?.title ?? id;
}

let atomem: Atomem | undefined;
/** The page configuration from the server (which language model, if any). */
let demoConfig: DemoConfig = { llm: null };
const events: LifecycleEvent[] = [];
/** The language model's calls and fallbacks to rules, newest first. */
const llmEvents: { at: number; e: LlmEvent }[] = [];
/** Entries kept in the model feed. */
const LLM_FEED_SIZE = 50;
let actions = 0;
/** A language model is active (from the engine's status; the rerank needs one). */
let llmActive = false;
/**
 * What the shopper typed in "What are you shopping for?" (undefined: nothing). Kept in this
 * variable only: never in localStorage, never sent; the worker uses it for one ranking at a time.
 */
let intent: string | undefined;
/** Ids of the memories the current intent selected (highlighted in the inspector). */
let intentSelected = new Set<string>();

/** Page work in flight (actions, shelf and inspector redraws, status redraws, catching up with a sync): `idle()` waits for it. */
const inFlight = new Set<Promise<unknown>>();
/** An event listener whose work counts as page work (`pending`). */
function busy(fn: () => Promise<void>): () => void {
  return () => void pending(fn());
}

/** Count `p` as page work until it settles; returns it. */
function pending<T>(p: Promise<T>): Promise<T> {
  inFlight.add(p);
  p.then(
    () => inFlight.delete(p),
    () => inFlight.delete(p),
  );
  return p;
}

// ——— shop grid ———

let currentDept = 'All';

function renderDepartments(): void {
  const nav = $('departments');
  nav.replaceChildren();
  for (const name of ['All', ...DEPARTMENTS.map((d) => d.name)]) {
    const b = h('button', { type: 'button', 'aria-pressed': String(name === currentDept), 'data-dept': name }, name);
    b.addEventListener('click', () => {
      currentDept = name;
      renderDepartments();
      renderGrid();
    });
    nav.append(b);
  }
}

function productCard(p: Product, extra?: Node): HTMLElement {
  const card = h(
    'article',
    { class: 'card', 'data-id': p.id, 'data-dept': p.department },
    h('img', { src: productImageUrl(p), alt: '', width: '120', height: '120', loading: 'lazy' }),
    h('h4', {}, h('button', { type: 'button', class: 'product-link', 'data-action': 'click', 'aria-label': `View ${p.title}` }, p.title)),
    h('p', { class: 'meta' }, h('span', { class: 'dept' }, p.department), ` · €${p.price.toFixed(2)}`),
    h('p', { class: 'desc' }, p.description ?? ''),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'button', 'data-action': 'cart', 'aria-label': `Add ${p.title} to cart` }, 'Add to cart'),
      h('button', { type: 'button', 'data-action': 'purchase', class: 'buy', 'aria-label': `Buy ${p.title}` }, 'Buy'),
    ),
  );
  if (extra) card.append(extra);
  return card;
}

function renderGrid(): void {
  const grid = $('grid');
  const list = currentDept === 'All' ? catalog : catalog.filter((p) => p.department === currentDept);
  grid.replaceChildren(...list.map((p) => productCard(p)));
}

// one delegated listener for the grid and the shelf
document.addEventListener('click', (ev) => {
  const btn = (ev.target as HTMLElement).closest<HTMLButtonElement>('button[data-action]');
  const card = btn?.closest<HTMLElement>('[data-id]');
  if (!btn || !card) return;
  const action = btn.dataset.action as 'click' | 'cart' | 'purchase';
  void act(card.dataset.id!, action);
});

// ——— actions ———

let queue: Promise<unknown> = Promise.resolve();

/** Track one action, then refresh the shelf and the inspector. Serialised. */
function act(item: string, action: 'click' | 'cart' | 'purchase'): Promise<void> {
  const run = queue.then(async () => {
    if (!atomem) return;
    await atomem.track({ item, action });
    actions++;
    const verb = action === 'click' ? 'Viewed' : action === 'cart' ? 'Added to cart:' : 'Bought';
    notice(`${verb} ${titleOf(item)}`);
    await refresh();
  });
  queue = pending(run.catch((e: unknown) => notice(`Error: ${e instanceof Error ? e.message : String(e)}`)));
  return queue as Promise<void>;
}

// ——— "For you" shelf ———

async function renderShelf(): Promise<void> {
  if (!atomem) return;
  const candidates = catalog.map((p) => p.id);
  const rerank = llmActive && $<HTMLInputElement>('rerank-toggle').checked;
  // With the rerank on, the engine's own order is asked for too (no model call; both requests
  // queue back to back in the worker). A reranked item whose first reason is of kind `model` got
  // that sentence from the model; on any failure the engine's order and reasons stand, and
  // nothing is marked.
  const asked = intent;
  // what the shopper bought or has just seen is not recommended again (the engine leaves it out)
  const exclude: ExcludeRule[] = ['bought', 'seen'];
  const opts = asked !== undefined ? { intent: asked, exclude } : { exclude };
  let plain: Promise<RecommendationResult[]> = atomem.recommend(candidates, opts);
  if (asked !== undefined) {
    // a refused intent (too long, only control characters…) says why; the shelf keeps memory's order
    plain = plain.then(
      (r) => {
        $('intent-error').textContent = '';
        return r;
      },
      (e: unknown) => {
        if (!(e instanceof Error) || e.name !== 'InvalidIntentError') throw e;
        $('intent-error').textContent = e.message;
        intent = undefined;
        return atomem!.recommend(candidates, { exclude });
      },
    );
  }
  const [base, ranked]: RecommendationResult[][] = await Promise.all([
    plain,
    rerank ? plain.then(() => atomem!.recommend(candidates, { rerank: SHELF_SIZE, exclude, ...(intent !== undefined ? { intent } : {}) })) : plain,
  ]);
  const engine = new Map(base.map((r, i) => [r.id, { rank: i + 1 }]));
  // the reasons arrive as data (`why`); `explanations` are the same reasons worded on this page
  const byModel = (r: RecommendationResult): boolean => rerank && r.why[0]?.kind === 'model';
  let modelWritten = 0;
  const shelf = $('shelf');
  shelf.replaceChildren(
    ...ranked.slice(0, SHELF_SIZE).map((r, i) => {
      const p = byId.get(r.id)!;
      const model = byModel(r);
      if (model) modelWritten++;
      // model text stays text: h() appends it as a text node
      const lines = r.explanations
        .slice(0, 2)
        .map((e, j) =>
          j === 0 && model
            ? h('li', { class: 'model-why', 'data-source': 'model' }, h('span', { class: 'tag', title: 'Written by the language model' }, 'model'), ' ', e)
            : h('li', {}, e),
        );
      const why = h('ul', { class: 'why', 'aria-label': 'Why' }, ...lines);
      const li = h('li', { class: 'shelf-item', 'data-rank': String(i + 1), 'data-engine-rank': String(engine.get(r.id)?.rank ?? '') });
      li.append(productCard(p, why));
      return li;
    }),
  );
  shelf.dataset.rerank = !rerank ? 'off' : modelWritten > 0 ? 'model' : 'engine';
  // the engine says so on the first card when the intent matched no product
  const first = ranked[0]?.why[0];
  const unmatched = intent !== undefined && first?.kind === 'intent' && !first.matched;
  shelf.dataset.intent = intent === undefined ? 'off' : unmatched ? 'unmatched' : 'on';
  // a first visit's order is a prior (popularity, or a first pick across the catalog)
  const firstVisit = ranked.some((r) => r.why[0]?.kind === 'prior');
  const hint =
    intent !== undefined
      ? unmatched
        ? `Nothing here matches “${intent}”: the shelf shows what atomem remembers about you instead.`
        : `Re-ranked on this device for “${intent}”, with what atomem remembers about you.`
      : firstVisit
        ? 'Welcome: popular picks for now. Click, add to cart or buy something and this shelf re-ranks on this device.'
        : actions === 0
          ? 'Ranked on this device with what atomem remembers about you.'
          : 'Re-ranked on this device after your last action.';
  $('for-you-hint').textContent = !rerank
    ? hint
    : modelWritten > 0
      ? `${hint} The language model reordered the top ${Math.min(SHELF_SIZE, ranked.length)}; its reasons are marked “model”.`
      : `${hint} The language model's rerank did not succeed this time (see the inspector's feed): the engine's order stands.`;
}

/** The intent box's debounce: set while typed words wait to re-rank the shelf. */
let intentTimer: ReturnType<typeof setTimeout> | undefined;

/** "What are you shopping for?": re-ranks the shelf live (debounced) as the shopper types; Clear drops the intent. */
function setupIntent(): void {
  const input = $<HTMLInputElement>('intent-input');
  const apply = () => {
    clearTimeout(intentTimer);
    intentTimer = undefined;
    const text = input.value.trim();
    const next = text === '' ? undefined : input.value;
    if (next === intent) return;
    intent = next;
    $('intent-error').textContent = '';
    void refresh();
  };
  input.addEventListener('input', () => {
    clearTimeout(intentTimer);
    intentTimer = setTimeout(apply, 250);
  });
  $('intent-form').addEventListener('submit', (e) => {
    e.preventDefault();
    apply();
  });
  $('intent-clear').addEventListener('click', () => {
    input.value = '';
    apply();
    input.focus();
  });
}

/** The inspector's "What your intent selected": the memories retrieval with the intent as query picked. */
async function renderIntentMemories(): Promise<void> {
  const ul = $('intent-memories');
  const summary = $('intent-summary');
  const asked = intent;
  if (!atomem || asked === undefined) {
    intentSelected = new Set();
    summary.textContent = 'Type what you are shopping for above: the memories it bears on show here.';
    ul.replaceChildren();
    return;
  }
  const sel = await atomem.intentMemories(asked).catch(() => null);
  if (!sel || asked !== intent) return;
  intentSelected = new Set(sel.memories.map((m) => m.memoryId));
  summary.textContent = sel.memories.length
    ? `“${sel.intent}” selected ${sel.memories.length} ${sel.memories.length === 1 ? 'memory' : 'memories'} (retrieval with your words as the query, on this device):`
    : $('shelf').dataset.intent === 'unmatched'
      ? `“${sel.intent}” bears on none of your memories, and nothing in the shop matches it: the shelf follows your memory alone.`
      : `“${sel.intent}” bears on none of your memories yet: the shelf follows your words alone.`;
  ul.replaceChildren(
    ...sel.memories.map((m) =>
      h(
        'li',
        { class: 'memory intent-memory', 'data-memory-id': m.memoryId },
        h('p', { class: 'statement' }, m.content),
        h('p', { class: 'meta' }, h('span', { class: 'cat' }, m.category), ` · similarity to your words ${m.similarity.toFixed(2)}`),
      ),
    ),
  );
}

/** The shopper's choice to let the model rerank the shelf: remembered, off by default; a change refreshes the shelf. */
function setupRerank(): void {
  const toggle = $<HTMLInputElement>('rerank-toggle');
  toggle.checked = localStorage.getItem(RERANK_KEY) === 'on';
  toggle.addEventListener('change', () => {
    localStorage.setItem(RERANK_KEY, toggle.checked ? 'on' : 'off');
    notice(
      toggle.checked
        ? 'The language model now reranks the shelf: one model call per refresh.'
        : "The shelf is back to the engine's order: no model call for it.",
    );
    void refresh();
  });
}

// ——— inspector ———

const OP_LABEL: Record<string, string> = {
  extract: 'formed',
  reinforce: 'reinforced',
  weaken: 'weakened',
  merge: 'merged',
  forget: 'forgotten',
  resynthesize: 'profile rewritten',
};

/**
 * Memory id → its statement, from every memory list this page has seen (a forgotten or merged
 * memory keeps its name in the feed). Page memory only; cleared by "Forget me".
 */
const memoryNames = new Map<string, string>();
function memoryName(id: string): string {
  const name = memoryNames.get(id);
  return name === undefined ? 'a memory' : name.length > 60 ? `${name.slice(0, 59)}…` : name;
}

/**
 * Community id → a human label from the public release: its top departments and items, the
 * way the engine's rules summarise a prototype ("Outdoor & Audio shoppers: Trail Tent, …"). The
 * release is public (the engine fetched it already; this GET is answered from the HTTP cache or
 * with a 304), and it is fetched only while sharing is on.
 */
const communityNames = new Map<string, { short: string; long: string }>();
let releaseEpoch: number | undefined;
async function loadCommunityNames(): Promise<void> {
  if ($<HTMLSelectElement>('privacy').value === 'off') return;
  try {
    const r = await fetch('/v2/releases/latest', { credentials: 'omit' });
    if (!r.ok) return;
    const release = (await r.json()) as { epoch: number; communities: { id: string; items: string[]; contributors: number; counts: Record<string, number> }[] };
    if (release.epoch === releaseEpoch && communityNames.size) return;
    releaseEpoch = release.epoch;
    communityNames.clear();
    for (const c of release.communities) {
      const top = Object.entries(c.counts)
        .sort((a, b) => b[1] - a[1])
        .map(([id]) => byId.get(id))
        .filter((p): p is Product => !!p);
      const pool = top.length ? top : c.items.map((id) => byId.get(id)).filter((p): p is Product => !!p);
      const depts = new Map<string, number>();
      for (const p of pool) depts.set(p.department, (depts.get(p.department) ?? 0) + (c.counts[p.id] ?? 1));
      const names = [...depts]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 2)
        .map(([d]) => d);
      const short = names.length ? `${names.join(' & ')} shoppers` : 'Shoppers';
      const examples = pool.slice(0, 3).map((p) => p.title);
      communityNames.set(c.id, {
        short,
        long: `${short} (about ${Math.max(1, Math.round(c.contributors))})${examples.length ? `: ${examples.join(', ')}` : ''}`,
      });
    }
  } catch {
    // the labels are a nicety: without them the community shows as "a community of shoppers"
  }
}
function communityName(id: string): { short: string; long: string } {
  return communityNames.get(id) ?? { short: 'Shoppers', long: 'a community of shoppers' };
}

function renderMemories(memories: AtomicMemory[]): void {
  $('memory-count').textContent = `(${memories.length})`;
  const ul = $('memories');
  if (memories.length === 0) {
    ul.replaceChildren(h('li', { class: 'empty' }, 'No memories yet.'));
    return;
  }
  ul.replaceChildren(
    ...memories.map((m) => {
      const strength = h('meter', {
        min: '-1',
        max: '1',
        low: '0',
        optimum: '1',
        value: m.strength.toFixed(2),
        'aria-label': `strength ${m.strength.toFixed(2)}`,
      });
      const forget = h('button', { type: 'button', class: 'small-btn', 'aria-label': `Forget memory: ${m.content}` }, 'Forget');
      forget.addEventListener(
        'click',
        busy(async () => {
          await atomem?.forget(m.id);
          notice('Memory forgotten.');
          await refresh();
        }),
      );
      return h(
        'li',
        { class: 'memory', 'data-memory-id': m.id, ...(intentSelected.has(m.id) ? { 'data-intent-selected': 'true' } : {}) },
        h('p', { class: 'statement' }, m.content),
        h(
          'p',
          { class: 'meta' },
          h('span', { class: 'cat' }, m.category),
          ` · strength ${m.strength.toFixed(2)} `,
          strength,
          ` · evidence ${m.evidence.toFixed(1)}`,
          m.links.length
            ? h(
                'span',
                { class: 'community', title: m.links.map((l) => communityName(l).long).join('\n') },
                ` · community: ${m.links.map((l) => communityName(l).short).join(', ')}`,
              )
            : '',
        ),
        h('p', { class: 'items' }, 'Items: ', m.items.map(titleOf).join(', ')),
        forget,
      );
    }),
  );
}

function renderCommunities(memories: AtomicMemory[]): void {
  const box = $('communities');
  const protos = [...new Set(memories.flatMap((m) => m.links))];
  if (memories.length === 0) {
    box.replaceChildren(h('p', { class: 'empty' }, 'No memories, no communities.'));
    return;
  }
  const rowH = 34;
  const height = Math.max(memories.length, protos.length, 1) * rowH + 20;
  const width = 480;
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const my = (i: number) => 20 + i * rowH;
  const py = (j: number) => 20 + j * ((height - 40) / Math.max(protos.length - 1, 1));
  let svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" role="img" aria-label="Your memories (left) linked to community prototypes (right)">`;
  memories.forEach((m, i) => {
    for (const l of m.links) {
      const j = protos.indexOf(l);
      svg += `<line x1="24" y1="${my(i)}" x2="${width - 14}" y2="${protos.length === 1 ? height / 2 : py(j)}" stroke="#5b6b8c" stroke-width="1.5"/>`;
    }
  });
  memories.forEach((m, i) => {
    const r = 5 + Math.max(0, m.strength) * 8;
    const label = m.content.length > 34 ? `${m.content.slice(0, 33)}…` : m.content;
    svg += `<circle cx="24" cy="${my(i)}" r="${r.toFixed(1)}" fill="${m.strength >= 0 ? '#1f6feb' : '#b42318'}"><title>${esc(m.content)}</title></circle>`;
    svg += `<text x="40" y="${my(i) + 4}" font-size="11" fill="#1b1f24" stroke="#fff" stroke-width="4" paint-order="stroke">${esc(label)}</text>`;
  });
  protos.forEach((p, j) => {
    const y = protos.length === 1 ? height / 2 : py(j);
    const name = communityName(p);
    const label = name.short; // two department names at most: fits the picture's right column
    svg += `<g class="prototype"><title>${esc(name.long)}</title><rect x="${width - 14}" y="${y - 9}" width="12" height="18" rx="6" fill="#7c3aed"/><text x="${width - 18}" y="${y + 4}" font-size="11" text-anchor="end" fill="#4c1d95" stroke="#fff" stroke-width="4" paint-order="stroke">${esc(label)}</text></g>`;
  });
  svg += '</svg>';
  box.innerHTML = svg;
  box.append(
    h(
      'p',
      { class: 'small' },
      protos.length
        ? `${protos.length} ${protos.length === 1 ? 'community' : 'communities'} of the public release your memories match (matched on this device).`
        : 'Not linked to a community yet (memories are matched to the public release on this device, if sharing is on).',
    ),
  );
}

function renderEvents(): void {
  $('events').replaceChildren(
    ...events
      .slice(-30)
      .reverse()
      .map((e) =>
        h(
          'li',
          { 'data-memory-id': e.memoryId },
          h('time', {}, new Date(e.at).toLocaleTimeString()),
          ` ${OP_LABEL[e.op] ?? e.op} `,
          h('q', { class: 'memory-name' }, memoryName(e.memoryId)),
          e.op === 'merge' && e.otherId ? ` (with ${memoryName(e.otherId)})` : '',
          e.detail ? ` — ${byId.get(e.detail)?.title ?? e.detail}` : '',
        ),
      ),
  );
}

let lastProgress: ProgressEvent | undefined;

function renderProgress(p: ProgressEvent): void {
  lastProgress = p;
  const pct = p.phase === 'ready' ? 100 : p.total > 0 ? Math.round((100 * p.loaded) / p.total) : 0;
  const bar = $('progress');
  bar.setAttribute('aria-valuenow', String(pct));
  bar.setAttribute('aria-valuetext', `${p.stage} ${p.phase} ${pct}%`);
  (bar.firstElementChild as HTMLElement).style.width = `${pct}%`;
}

function renderStatus(s: EngineStatus | undefined): void {
  const dl = $('status');
  const row = (k: string, v: string) => [h('dt', {}, k), h('dd', {}, v)];
  const p = lastProgress;
  const progress = p ? `${p.stage} ${p.phase}${p.total ? ` ${p.loaded}/${p.total} ${p.unit}` : ''}` : '—';
  if (!s) {
    dl.replaceChildren(...row('loading', progress));
    return;
  }
  const gpu = s.capabilities.webgpu.available ? `available${s.capabilities.webgpu.isFallbackAdapter ? ' (software)' : ''}` : 'not available';
  const llmMode = s.llm.mode === 'rules' ? 'rules (no language model)' : `${s.llm.mode}: ${s.llm.model ?? ''}`;
  const tried = s.llm.attempts.map((a) => `${a.runtime} ${a.ok ? '✓' : `✗ ${a.reason ?? ''}`}`).join('; ');
  dl.replaceChildren(
    ...row(
      'embedder',
      `${s.embedder.kind} on ${s.embedder.device.toUpperCase()} (${s.embedder.dim}-d, ${s.embedder.id}), ${s.embedder.state}${s.embedder.error ? ` — last load failed: ${s.embedder.error}` : ''}`,
    ),
    ...row('reasoner', llmMode + (s.llm.loading ? ' — loading…' : '')),
    ...(tried ? row('models tried', tried) : []),
    ...row('WebGPU', gpu),
    ...row('last progress', progress),
    ...row(
      'ranking',
      s.catalog?.shop
        ? `the shop's model (catalog vector file v${s.catalog.version}, ${s.catalog.shop.items} products${s.catalog.shop.sequence ? ` + ${s.catalog.shop.sequence}` : ''}${s.catalog.shop.epsilon !== null ? `, ε ${s.catalog.shop.epsilon}` : ''}; ${s.catalog.source}), over this shopper's own events, on this device`
        : 'content vectors only (no shop model in the catalog vector file)',
    ),
    ...row('storage', `${s.storage.degraded ? 'in memory (quota)' : 'IndexedDB'}${s.storage.persisted ? ', persistent' : ''}`),
    ...row(
      'sharing',
      s.sync ? `${s.sync.privacy} → ${s.sync.url} (${s.sync.pending} queued${s.sync.lastError ? `, error: ${s.sync.lastError}` : ''})` : 'no index',
    ),
  );
}

// ——— language model: costs and the feed of calls and fallbacks ———

/** Readable names of the reasoner's operations (unknown ones show as they are). */
const OPERATION_LABEL: Record<string, string> = {
  describeMemory: 'describe',
  reflect: 'reflect',
  mergeMemories: 'merge',
  summarizePrototype: 'community',
  synthesizeProfile: 'profile',
  planLifecycle: 'plan',
  rerank: 'rerank',
};
const opLabel = (op: string): string => OPERATION_LABEL[op] ?? op;

/** Why an operation gave up, in words. */
const REASON_LABEL: Record<string, string> = { invalid: 'invalid answer', timeout: 'timeout', budget: 'budget exhausted', model: 'model error' };
const reasonLabel = (r: string | undefined): string => (r ? (REASON_LABEL[r] ?? r) : 'unknown');

/** Untrusted text (model output may be quoted in error messages), capped for display. */
const clip = (text: string, max = 240): string => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
const fmtInt = (n: number): string => Math.round(n).toLocaleString('en');

/** Fallbacks to rules: the total, then the reasons (`invalid 2, budget 1`) on their own line. */
function fallbackCell(c: OperationCosts): HTMLTableCellElement {
  const total = Object.values(c.fallbacks).reduce((a, b) => a + b, 0);
  const parts = Object.entries(c.fallbacks)
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k} ${n}`);
  return h('td', { class: total > 0 ? 'num warn' : 'num' }, String(total), ...(parts.length ? [h('span', { class: 'kinds' }, parts.join(', '))] : []));
}

function costRow(label: string, c: OperationCosts, op?: string): HTMLTableRowElement {
  const td = (v: string, cls = 'num') => h('td', { class: cls }, v);
  return h(
    'tr',
    op ? { 'data-operation': op } : {},
    h('th', { scope: 'row', ...(op ? { title: op } : {}) }, label),
    td(fmtInt(c.requests)),
    td(fmtInt(c.succeeded)),
    td(fmtInt(c.calls)),
    td(fmtInt(c.repairs)),
    fallbackCell(c),
    td(`${fmtInt(c.promptTokens)}/${fmtInt(c.outputTokens)}`),
    td(fmtInt(c.ms)),
  );
}

function renderLlmCosts(costs: LlmCosts | null, deferred: number): void {
  const table = $<HTMLTableElement>('llm-costs');
  if (!costs) {
    table.tBodies[0].replaceChildren(h('tr', {}, h('td', { colspan: '8', class: 'empty' }, 'No operation yet.')));
    table.tFoot!.replaceChildren();
    $('llm-budget').textContent =
      deferred > 0 ? `${deferred} tracked ${deferred === 1 ? 'action waits' : 'actions wait'} for a pause to be turned into memory.` : '';
    return;
  }
  table.tBodies[0].replaceChildren(...Object.entries(costs.byOperation).map(([op, c]) => costRow(opLabel(op), c, op)));
  table.tFoot!.replaceChildren(costRow('Total', costs.total));
  const b = costs.budget;
  $('llm-budget').textContent =
    `Budget: ${b.windowCalls} of ${b.maxCalls} model calls used in the current window of ${b.perEvents} events, ${b.remaining} left ` +
    `(${b.events} ${b.events === 1 ? 'event' : 'events'} so far). Beyond it, operations use rules.` +
    (deferred > 0 ? ` ${deferred} tracked ${deferred === 1 ? 'action waits' : 'actions wait'} for a pause to be turned into memory.` : '');
}

/** One entry of the feed: a model call (ok, failed, or refused by the budget) or a fallback to rules. */
function llmFeedItem(at: number, e: LlmEvent): HTMLLIElement {
  const time = h('time', { datetime: new Date(at).toISOString() }, new Date(at).toLocaleTimeString());
  const op = h('strong', {}, opLabel(e.operation));
  const prompt = h('code', {}, e.prompt);
  if (e.kind === 'fallback') {
    return h(
      'li',
      { class: 'llm-event fallback', 'data-kind': 'fallback', 'data-operation': e.operation, 'data-reason': e.reason },
      h('span', { class: 'badge' }, '↩ rules'),
      ' ',
      time,
      ' ',
      op,
      ' ',
      prompt,
      h('span', { class: 'reason' }, ` fell back to rules: ${reasonLabel(e.reason)}`),
      e.message ? h('span', { class: 'message' }, ` — ${clip(e.message)}`) : '',
    );
  }
  const state = e.ok ? 'ok' : e.called ? 'failed' : 'skipped';
  const badge = e.ok ? '✓ LLM' : e.called ? '✗ LLM' : '⊘ not sent';
  const attempt = e.attempt === 0 ? 'first attempt' : `repair ${e.attempt}`;
  const usage = e.called ? ` · ${fmtInt(e.promptTokens)} → ${fmtInt(e.outputTokens)} tokens · ${fmtInt(e.ms)} ms${e.constrained ? ' · constrained' : ''}` : '';
  return h(
    'li',
    {
      class: `llm-event call ${state}`,
      'data-kind': 'call',
      'data-ok': String(e.ok),
      'data-operation': e.operation,
      ...(e.reason ? { 'data-reason': e.reason } : {}),
    },
    h('span', { class: 'badge' }, badge),
    ' ',
    time,
    ' ',
    op,
    ' ',
    prompt,
    ` · ${attempt}${usage}`,
    e.ok ? '' : h('span', { class: 'reason' }, ` · ${reasonLabel(e.reason)}${e.error ? `: ${clip(e.error)}` : ''}`),
  );
}

function renderLlmFeed(): void {
  const feed = $('llm-feed');
  if (llmEvents.length === 0) {
    feed.replaceChildren(h('li', { class: 'empty' }, 'No model call yet: browse a little (memory work may wait for a pause).'));
    return;
  }
  feed.replaceChildren(...llmEvents.map((x) => llmFeedItem(x.at, x.e)));
}

/** The environment variables that configure a model, as a sentence with code spans. */
function howToConfigure(): (Node | string)[] {
  const code = (t: string) => h('code', {}, t);
  return [
    'To try one, restart the demo server with ',
    code('ATOMEM_GGUF=/path/to/model.gguf'),
    ' (runs in this browser with wllama), ',
    code('ATOMEM_OPENAI_URL'),
    ' + ',
    code('ATOMEM_OPENAI_MODEL'),
    ' (a local llama.cpp, vLLM or Ollama server) or ',
    code('ATOMEM_WEBLLM_MODEL'),
    ' (WebGPU); optionally ',
    code('ATOMEM_LLM_BUDGET=40/20'),
    '. See apps/demo/README.md.',
  ];
}

/** True once the configured models were tried (one loaded, or none could). */
let llmSettled = false;

function renderLlm(s: EngineStatus | undefined): void {
  llmSettled = !!s && !s.llm.loading;
  const section = $('llm');
  const summary = $('llm-summary');
  const details = $('llm-details');
  const active = !!s && s.llm.mode !== 'rules';
  section.dataset.active = String(active);
  // the rerank choice is offered only while a model runs; a model that became active redraws a shelf that wants it
  const toggle = $<HTMLInputElement>('rerank-toggle');
  $('rerank-control').hidden = !active;
  toggle.disabled = !active;
  if (active !== llmActive) {
    llmActive = active;
    if (toggle.checked) void refresh();
  }
  section.dataset.mode = s?.llm.mode ?? '';
  if (!demoConfig.llm) {
    summary.replaceChildren('No language model is configured: the rules reasoner is in use (deterministic, no model calls). ', ...howToConfigure());
    details.hidden = true;
    return;
  }
  if (!s || (s.llm.loading && !active)) {
    summary.replaceChildren('Loading the configured language model in the background; the rules reasoner answers meanwhile.');
    details.hidden = true;
    return;
  }
  if (!active) {
    const why = s.llm.attempts
      .filter((a) => !a.ok)
      .map((a) => `${a.runtime}: ${a.reason ?? 'unknown'}`)
      .join('; ');
    summary.replaceChildren(`No configured model could be loaded${why ? ` (${clip(why, 400)})` : ''}: the rules reasoner is in use. `, ...howToConfigure());
    details.hidden = true;
    return;
  }
  summary.replaceChildren(
    'Memory operations go through ',
    h('strong', {}, s.llm.model ?? s.llm.mode),
    ` (${s.llm.mode === 'remote' ? 'a server the shop configured' : `in this browser, ${s.llm.mode.toUpperCase()}`}). Every answer is checked against a schema; an operation whose answer fails, times out or exceeds the budget falls back to the rules reasoner.`,
  );
  details.hidden = false;
  renderLlmCosts(s.llm.costs, s.llm.deferred ?? 0);
  renderLlmFeed();
}

let llmTimer: ReturnType<typeof setTimeout> | undefined;

/** A model call or fallback arrived: add it to the feed now, refresh the cost table shortly after (coalesced). */
function onLlmEvent(e: LlmEvent): void {
  llmEvents.unshift({ at: Date.now(), e });
  llmEvents.length = Math.min(llmEvents.length, LLM_FEED_SIZE);
  if (!$('llm-details').hidden) renderLlmFeed();
  if (llmTimer === undefined) llmTimer = setTimeout(() => void pending(refreshStatus()), 400);
}

/** Redraw the status and the language model section only (cheap: one `status()` call). */
async function refreshStatus(): Promise<void> {
  llmTimer = undefined;
  if (!atomem) return;
  const status = await atomem.status().catch(() => undefined);
  if (!status) return;
  renderStatus(status);
  renderLlm(status);
}

async function renderInspector(): Promise<void> {
  if (!atomem) return;
  const [memories, profile, payload, status] = await Promise.all([atomem.memories(), atomem.profile(), atomem.lastPayload(), atomem.status()]);
  await renderIntentMemories();
  for (const m of memories) memoryNames.set(m.id, m.content);
  // a community this page has no name for yet: the release changed (a new epoch)
  if (memories.some((m) => m.links.some((l) => !communityNames.has(l)))) await loadCommunityNames();
  renderMemories(memories);
  renderCommunities(memories);
  $('profile').textContent = profile?.narrative || 'No profile yet: it is written after a few actions.';
  $('payload').textContent = payload
    ? `${new Date(payload.at).toLocaleTimeString()} POST ${payload.path}\n${JSON.stringify(payload.body, null, 2)}`
    : 'No report sent yet.';
  renderStatus(status);
  renderLlm(status);
  renderEvents();
}

let refreshing: Promise<void> | undefined;
let again = false;

/** Re-rank the shelf and redraw the inspector (coalesces calls that arrive while one runs). */
function refresh(): Promise<void> {
  if (refreshing) {
    again = true;
    return refreshing;
  }
  refreshing = (async () => {
    do {
      again = false;
      await renderShelf();
      await renderInspector();
    } while (again);
  })().finally(() => (refreshing = undefined));
  return pending(refreshing);
}

// ——— persona browsing ———

const PERSONAS: [string, string][] = [
  ['Outdoor', 'Audio'],
  ['Kitchen', 'Garden'],
  ['Books', 'Toys'],
  ['Audio', 'Books'],
  ['Garden', 'Outdoor'],
  ['Toys', 'Kitchen'],
];
let personaTimer: ReturnType<typeof setTimeout> | undefined;
/** Actions of one persona session (it stops by itself after them). */
const PERSONA_ACTIONS = 45;

function setupPersona(): void {
  const select = $<HTMLSelectElement>('persona-select');
  select.replaceChildren(...PERSONAS.map((p, i) => h('option', { value: String(i) }, `${p[0]} + ${p[1]} fan`)));
  const speed = $<HTMLInputElement>('persona-speed');
  const out = $<HTMLOutputElement>('persona-speed-out');
  speed.addEventListener('input', () => (out.textContent = `${Number(speed.value).toFixed(1)} actions/s`));
  const toggle = $<HTMLButtonElement>('persona-toggle');
  // a seeded session per persona: the same persona browses the same way every time (reproducible demos and tests)
  let random = seededRandom(1);
  let done = 0;
  const stop = () => {
    clearTimeout(personaTimer);
    personaTimer = undefined;
    toggle.textContent = `Start browsing (${PERSONA_ACTIONS} actions)`;
    toggle.setAttribute('aria-pressed', 'false');
    document.body.dataset.persona = done >= PERSONA_ACTIONS ? 'done' : 'stopped';
  };
  toggle.textContent = `Start browsing (${PERSONA_ACTIONS} actions)`;
  const step = async () => {
    const depts = PERSONAS[Number(select.value)] ?? PERSONAS[0];
    const pool = catalog.filter((p) => depts.includes(p.department));
    const p = pool[Math.floor(random() * pool.length)];
    const r = random();
    await act(p.id, r < 0.75 ? 'click' : r < 0.93 ? 'cart' : 'purchase');
    done++;
    if (done >= PERSONA_ACTIONS) return stop();
    if (personaTimer !== undefined) personaTimer = setTimeout(step, 1000 / Number(speed.value));
  };
  toggle.addEventListener('click', () => {
    if (personaTimer !== undefined) return stop();
    random = seededRandom(1000 + Number(select.value));
    done = 0;
    document.body.dataset.persona = 'browsing';
    toggle.textContent = 'Stop browsing';
    toggle.setAttribute('aria-pressed', 'true');
    personaTimer = setTimeout(step, 0);
  });
}

// ——— privacy and data controls ———

function setupControls(): void {
  const privacy = $<HTMLSelectElement>('privacy');
  privacy.addEventListener(
    'change',
    busy(async () => {
      if (!atomem) return;
      const level = privacy.value as PrivacyLevel;
      privacy.disabled = true;
      try {
        const r = await atomem.setPrivacy(level);
        notice(
          level === 'off'
            ? 'Sharing is off: nothing is sent or fetched.'
            : level === 'receive'
              ? `Receiving the community release only (epoch ${r.release ?? '—'}, ${r.communities} memories linked); nothing is sent.`
              : `Contributing: one private report this epoch${r.pending ? ' (scheduled)' : ''}; release epoch ${r.release ?? '—'}, ${r.communities} memories linked.`,
        );
      } catch (e) {
        notice(`Could not change sharing: ${e instanceof Error ? e.message : String(e)}`);
      } finally {
        privacy.disabled = false;
        localStorage.setItem('atomem-demo-privacy', level);
        await refresh();
      }
    }),
  );
  $('export').addEventListener(
    'click',
    busy(async () => {
      if (!atomem) return;
      const file = await atomem.export();
      const url = URL.createObjectURL(new Blob([JSON.stringify(file, null, 2)], { type: 'application/json' }));
      const a = h('a', { href: url, download: `atomem-memory-${new Date().toISOString().slice(0, 10)}.json` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
      notice('Exported your memory as a JSON file.');
    }),
  );
  const input = $<HTMLInputElement>('import');
  input.addEventListener(
    'change',
    busy(async () => {
      const f = input.files?.[0];
      if (!f || !atomem) return;
      try {
        await atomem.import(JSON.parse(await f.text()));
        notice(`Imported ${f.name}.`);
      } catch (e) {
        notice(`Import failed: ${e instanceof Error ? e.message : String(e)}`);
      }
      input.value = '';
      await refresh();
    }),
  );
  // "Forget me" asks first: erasing cannot be undone
  const ask = $('forget-me-confirm');
  $('forget-me').addEventListener('click', () => {
    ask.hidden = false;
    $('forget-me-yes').focus();
  });
  $('forget-me-no').addEventListener('click', () => {
    ask.hidden = true;
    $('forget-me').focus();
  });
  $('forget-me-yes').addEventListener(
    'click',
    busy(async () => {
      ask.hidden = true;
      if (!atomem) return;
      await atomem.erase();
      memoryNames.clear();
      events.length = 0;
      llmEvents.length = 0; // error messages may quote the erased memories
      actions = 0;
      notice('Forgotten: your memory is erased on this device. Reports carry no handle, so nothing on the index is tied to you.');
      await refresh();
    }),
  );
}

// ——— background work and the idle signal ———

/** When the last payload the inspector showed was sent (ms; 0: none yet). */
let lastPayloadAt = 0;

/**
 * Background syncs (every 3 actions, after privacy changes, at each epoch) end without an event:
 * when the last payload changed, communities may have been pulled, so redraw. The configured
 * model loads in the background (no event when it is ready): poll its status meanwhile.
 */
async function catchUp(): Promise<void> {
  if (!atomem) return;
  if (demoConfig.llm && !llmSettled) await refreshStatus();
  const at = (await atomem.lastPayload().catch(() => null))?.at ?? 0;
  if (at !== lastPayloadAt) {
    lastPayloadAt = at;
    await refresh();
  }
}

/** The engine has nothing pending: no model loading, no event deferred to idle time, no embedder loading, no report scheduled. */
function engineQuiet(s: EngineStatus): boolean {
  return !s.llm.loading && s.llm.deferred === 0 && s.embedder.state !== 'loading' && (s.sync?.pending ?? 0) === 0;
}

/** The page has no work in flight and no timer about to start some (intent debounce, status redraw, persona browsing). */
function pageQuiet(): boolean {
  return inFlight.size === 0 && intentTimer === undefined && llmTimer === undefined && personaTimer === undefined;
}

/** How often `idle()` looks again while something is scheduled (a timer or the engine's background work). */
const IDLE_POLL_MS = 50;

/**
 * Resolves once nothing is pending: no action, shelf or inspector redraw in flight or scheduled
 * on the page, and the engine (`status()`) loads no model, holds no event for idle-time work and
 * has no report scheduled; the inspector then shows the engine's last payload. What the page
 * awaits it awaits; what runs on timers (the page's or the worker's) it looks at again every
 * IDLE_POLL_MS until it is done. For tests and tools (`window.atomemDemo.idle()`): the e2e tests
 * wait on it instead of sleeping.
 */
async function idle(): Promise<void> {
  for (;;) {
    if (inFlight.size > 0) {
      await Promise.allSettled([...inFlight]);
      continue;
    }
    if (atomem && pageQuiet()) {
      const status = await atomem.status();
      await pending(catchUp());
      if (pageQuiet() && engineQuiet(status)) return;
    }
    await new Promise((r) => setTimeout(r, IDLE_POLL_MS));
  }
}

declare global {
  interface Window {
    /** For tests and tools: `idle()` resolves once the page and its engine have nothing pending. */
    atomemDemo?: { idle(): Promise<void> };
  }
}

// ——— start ———

/**
 * The server's page configuration (which language model to load). A relative model URL (the
 * GGUF the server streams) is made absolute: the engine's worker would resolve it against its
 * own script. Any failure means no model: the page still works on rules.
 */
async function loadDemoConfig(): Promise<DemoConfig> {
  try {
    const r = await fetch('/demo-config.json', { cache: 'no-store' });
    if (!r.ok) return { llm: null };
    const c = (await r.json()) as Partial<DemoConfig>;
    const llm = c.llm && typeof c.llm === 'object' ? { ...c.llm } : null;
    if (llm?.wllama) llm.wllama = { ...llm.wllama, model: new URL(llm.wllama.model, location.href).href };
    return { llm, ...(typeof c.catalogVectors === 'string' ? { catalogVectors: c.catalogVectors } : {}) };
  } catch {
    return { llm: null };
  }
}

async function start(): Promise<void> {
  renderDepartments();
  renderGrid();
  setupPersona();
  setupControls();
  setupRerank();
  setupIntent();
  renderStatus(undefined);
  demoConfig = await loadDemoConfig();
  renderLlm(undefined);
  const saved = localStorage.getItem('atomem-demo-privacy') as PrivacyLevel | null;
  // sharing is off until the shopper turns it on (the library's default too, docs/PRIVACY.md): nothing leaves before consent
  const privacy: PrivacyLevel = saved === 'off' || saved === 'receive' || saved === 'contribute' ? saved : 'off';
  $<HTMLSelectElement>('privacy').value = privacy;
  atomem = await createAtomem({
    profile: 'demo',
    catalog: toItems(catalog),
    // reportDelay 3 s: the next epoch's token, and from a visitor's second epoch on its report, leave 3 s after a sync
    // (so the inspector shows them); a shop keeps the default random moments
    index: { url: location.origin, privacy, syncEvery: 3, attesterUrl: new URL('/shop/atomem-token', location.href).href, reportDelay: 3000 },
    ...(demoConfig.llm ? { llm: demoConfig.llm } : {}),
    // the catalog embedded by the server at start: this browser embeds nothing on a first visit
    ...(demoConfig.catalogVectors ? { catalogVectors: demoConfig.catalogVectors } : {}),
    onProgress: (p) => {
      renderProgress(p);
      renderStatus(undefined);
    },
  });
  atomem.on('progress', renderProgress);
  atomem.on('memory', (e) => {
    events.push(e);
    renderEvents();
    void refresh(); // a background sync may have linked communities
  });
  atomem.on('error', (e) => notice(`atomem: ${e.message}`));
  atomem.on('llm', onLlmEvent);
  // a page that starts with history shows it; it also pulls the communities of a stored memory
  void pending(
    atomem
      .sync()
      .catch(() => undefined)
      .then(() => refresh()),
  );
  await refresh();
  lastPayloadAt = (await atomem.lastPayload())?.at ?? 0;
  setInterval(() => {
    if (!document.hidden) void pending(catchUp());
  }, 2000);
  window.atomemDemo = { idle };
  document.body.dataset.ready = 'true';
}

start().catch((e: unknown) => {
  notice(`Could not start atomem: ${e instanceof Error ? e.message : String(e)}`);
  $('for-you-hint').textContent = 'atomem failed to start (see the notice above).';
});
