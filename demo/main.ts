/**
 * The demo shop page: a product grid by department, a "For you" shelf re-ranked live after each
 * action with atomem's explanations, fake browsing as a persona, and an inspector of everything
 * atomem keeps on this device (memories, lifecycle events, profile, communities, the exact
 * payload last shared, model status). Plain TypeScript, no framework.
 *
 * The library is loaded at run time from the BUILT package, `/dist/index.js`, which the demo
 * server serves from the same origin (so are its worker chunk and model assets under
 * `/dist/assets/`); only its types come from the sources.
 */
import type { Atomem, AtomicMemory, EngineStatus, LifecycleEvent, PrivacyLevel, ProgressEvent, RecommendationResult } from '../src/client/index.js';
import { DEPARTMENTS, generateCatalog, productImageUrl, toItems, type Product } from './catalog.js';

type ClientModule = typeof import('../src/client/index.js');

/** URL of the built library entry (served by demo/server.ts). A variable so Vite leaves it alone. */
const LIBRARY_URL = '/dist/index.js';
/** Items on the "For you" shelf. */
const SHELF_SIZE = 8;

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
const events: LifecycleEvent[] = [];
/** Purchased items are not recommended again. */
const bought = new Set<string>();
let actions = 0;

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
    if (action === 'purchase') bought.add(item);
    await atomem.track({ item, action });
    actions++;
    const verb = action === 'click' ? 'Viewed' : action === 'cart' ? 'Added to cart:' : 'Bought';
    notice(`${verb} ${titleOf(item)}`);
    await refresh();
  });
  queue = run.catch((e: unknown) => notice(`Error: ${e instanceof Error ? e.message : String(e)}`));
  return queue as Promise<void>;
}

// ——— "For you" shelf ———

async function renderShelf(): Promise<void> {
  if (!atomem) return;
  const candidates = catalog.map((p) => p.id).filter((id) => !bought.has(id));
  const ranked: RecommendationResult[] = await atomem.recommend(candidates);
  const shelf = $('shelf');
  shelf.replaceChildren(
    ...ranked.slice(0, SHELF_SIZE).map((r, i) => {
      const p = byId.get(r.id)!;
      const why = h('ul', { class: 'why', 'aria-label': 'Why' }, ...r.explanations.slice(0, 2).map((e) => h('li', {}, e)));
      const li = h('li', { class: 'shelf-item', 'data-rank': String(i + 1) });
      li.append(productCard(p, why));
      return li;
    }),
  );
  $('for-you-hint').textContent = actions === 0 && ranked.every((r) => r.explanations.length === 0)
    ? 'Click, add to cart or buy something: this shelf re-ranks after every action.'
    : 'Re-ranked on this device after your last action.';
}

// ——— inspector ———

const OP_LABEL: Record<string, string> = { extract: 'formed', reinforce: 'reinforced', weaken: 'weakened', merge: 'merged', forget: 'forgotten', resynthesize: 'profile rewritten' };

function renderMemories(memories: AtomicMemory[]): void {
  $('memory-count').textContent = `(${memories.length})`;
  const ul = $('memories');
  if (memories.length === 0) {
    ul.replaceChildren(h('li', { class: 'empty' }, 'No memories yet.'));
    return;
  }
  ul.replaceChildren(
    ...memories.map((m) => {
      const strength = h('meter', { min: '-1', max: '1', low: '0', optimum: '1', value: m.strength.toFixed(2), 'aria-label': `strength ${m.strength.toFixed(2)}` });
      const forget = h('button', { type: 'button', class: 'small-btn', 'aria-label': `Forget memory: ${m.content}` }, 'Forget');
      forget.addEventListener('click', async () => {
        await atomem?.forget(m.id);
        notice('Memory forgotten.');
        await refresh();
      });
      return h(
        'li',
        { class: 'memory', 'data-memory-id': m.id },
        h('p', { class: 'statement' }, m.content),
        h(
          'p',
          { class: 'meta' },
          h('span', { class: 'cat' }, m.category),
          ` · strength ${m.strength.toFixed(2)} `,
          strength,
          ` · evidence ${m.evidence.toFixed(1)}`,
          m.links.length ? h('span', { class: 'community' }, ` · community ${m.links.join(', ')}`) : '',
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
  const width = 320;
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
  const my = (i: number) => 20 + i * rowH;
  const py = (j: number) => 20 + j * ((height - 40) / Math.max(protos.length - 1, 1));
  let svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${width} ${height}" role="img" aria-label="Your memories (left) linked to community prototypes (right)">`;
  memories.forEach((m, i) => {
    for (const l of m.links) {
      const j = protos.indexOf(l);
      svg += `<line x1="24" y1="${my(i)}" x2="${width - 40}" y2="${protos.length === 1 ? height / 2 : py(j)}" stroke="#5b6b8c" stroke-width="1.5"/>`;
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
    svg += `<rect x="${width - 40}" y="${y - 11}" width="34" height="22" rx="11" fill="#7c3aed"/><text x="${width - 23}" y="${y + 4}" font-size="11" text-anchor="middle" fill="#fff">${esc(p)}</text>`;
  });
  svg += '</svg>';
  box.innerHTML = svg;
  box.append(
    h(
      'p',
      { class: 'small' },
      protos.length
        ? `${protos.length} ${protos.length === 1 ? 'community' : 'communities'} of shoppers with similar memories (only anonymous vectors were compared).`
        : 'Not linked to a community yet (memories are shared once they have enough evidence, if sharing is on).',
    ),
  );
}

function renderEvents(): void {
  $('events').replaceChildren(
    ...events
      .slice(-30)
      .reverse()
      .map((e) => h('li', {}, h('time', {}, new Date(e.at).toLocaleTimeString()), ` ${OP_LABEL[e.op] ?? e.op} `, h('code', {}, e.memoryId.slice(0, 8)), e.detail ? ` — ${e.detail}` : '')),
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
    ...row('embedder', `${s.embedder.kind} on ${s.embedder.device.toUpperCase()} (${s.embedder.dim}-d, ${s.embedder.id})`),
    ...row('reasoner', llmMode + (s.llm.loading ? ' — loading…' : '')),
    ...(tried ? row('models tried', tried) : []),
    ...row('WebGPU', gpu),
    ...row('last progress', progress),
    ...row('storage', `${s.storage.degraded ? 'in memory (quota)' : 'IndexedDB'}${s.storage.persisted ? ', persistent' : ''}`),
    ...row('sharing', s.sync ? `${s.sync.privacy} → ${s.sync.url} (${s.sync.pending} queued${s.sync.lastError ? `, error: ${s.sync.lastError}` : ''})` : 'no index'),
  );
}

async function renderInspector(): Promise<void> {
  if (!atomem) return;
  const [memories, profile, payload, status] = await Promise.all([atomem.memories(), atomem.profile(), atomem.lastPayload(), atomem.status()]);
  renderMemories(memories);
  renderCommunities(memories);
  $('profile').textContent = profile?.narrative || 'No profile yet: it is written after a few actions.';
  $('payload').textContent = payload ? `${new Date(payload.at).toLocaleTimeString()} POST ${payload.path}\n${JSON.stringify(payload.body, null, 2)}` : 'Nothing shared yet.';
  renderStatus(status);
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
  return refreshing;
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

function setupPersona(): void {
  const select = $<HTMLSelectElement>('persona-select');
  select.replaceChildren(...PERSONAS.map((p, i) => h('option', { value: String(i) }, `${p[0]} + ${p[1]} fan`)));
  const speed = $<HTMLInputElement>('persona-speed');
  const out = $<HTMLOutputElement>('persona-speed-out');
  speed.addEventListener('input', () => (out.textContent = `${Number(speed.value).toFixed(1)} actions/s`));
  const toggle = $<HTMLButtonElement>('persona-toggle');
  const stop = () => {
    clearTimeout(personaTimer);
    personaTimer = undefined;
    toggle.textContent = 'Start browsing';
    toggle.setAttribute('aria-pressed', 'false');
  };
  const step = async () => {
    const depts = PERSONAS[Number(select.value)] ?? PERSONAS[0];
    const pool = catalog.filter((p) => depts.includes(p.department));
    const p = pool[Math.floor(Math.random() * pool.length)];
    const r = Math.random();
    await act(p.id, r < 0.75 ? 'click' : r < 0.93 ? 'cart' : 'purchase');
    if (personaTimer !== undefined) personaTimer = setTimeout(step, 1000 / Number(speed.value));
  };
  toggle.addEventListener('click', () => {
    if (personaTimer !== undefined) return stop();
    toggle.textContent = 'Stop browsing';
    toggle.setAttribute('aria-pressed', 'true');
    personaTimer = setTimeout(step, 0);
  });
}

// ——— privacy and data controls ———

function setupControls(): void {
  const privacy = $<HTMLSelectElement>('privacy');
  privacy.addEventListener('change', async () => {
    if (!atomem) return;
    const level = privacy.value as PrivacyLevel;
    privacy.disabled = true;
    try {
      const r = await atomem.setPrivacy(level);
      notice(level === 'off' ? 'Sharing is off: your shared copies were deleted and nothing more is uploaded.' : `Sharing: ${level} (${r.sent} sent, ${r.communities} communities).`);
    } catch (e) {
      notice(`Could not change sharing: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      privacy.disabled = false;
      localStorage.setItem('atomem-demo-privacy', level);
      await refresh();
    }
  });
  $('export').addEventListener('click', async () => {
    if (!atomem) return;
    const file = await atomem.export();
    const url = URL.createObjectURL(new Blob([JSON.stringify(file, null, 2)], { type: 'application/json' }));
    const a = h('a', { href: url, download: `atomem-memory-${new Date().toISOString().slice(0, 10)}.json` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
    notice('Exported your memory as a JSON file.');
  });
  const input = $<HTMLInputElement>('import');
  input.addEventListener('change', async () => {
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
  });
  $('forget-me').addEventListener('click', async () => {
    if (!atomem) return;
    await atomem.erase();
    bought.clear();
    events.length = 0;
    actions = 0;
    notice('Forgotten: your memory is erased on this device and deletion of its shared copies was sent.');
    await refresh();
  });
}

// ——— start ———

async function start(): Promise<void> {
  renderDepartments();
  renderGrid();
  setupPersona();
  setupControls();
  renderStatus(undefined);
  const saved = localStorage.getItem('atomem-demo-privacy') as PrivacyLevel | null;
  const privacy: PrivacyLevel = saved === 'off' || saved === 'items' || saved === 'embeddings' ? saved : 'embeddings';
  $<HTMLSelectElement>('privacy').value = privacy;
  const { createAtomem } = (await import(/* @vite-ignore */ LIBRARY_URL)) as ClientModule;
  atomem = await createAtomem({
    profile: 'demo',
    catalog: toItems(catalog),
    index: { url: location.origin, privacy, syncEvery: 3 },
    assetsBaseUrl: new URL('/dist/assets/', location.href).href,
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
  // a page that starts with history shows it; it also pulls the communities of a stored memory
  void atomem.sync().catch(() => undefined).then(() => refresh());
  await refresh();
  // background syncs (every 3 actions, after privacy changes) end without an event: when the
  // last payload changed, communities may have been pulled, so redraw
  let lastAt = (await atomem.lastPayload())?.at ?? 0;
  setInterval(async () => {
    if (document.hidden || !atomem) return;
    const at = (await atomem.lastPayload().catch(() => null))?.at ?? 0;
    if (at !== lastAt) {
      lastAt = at;
      await refresh();
    }
  }, 2000);
  document.body.dataset.ready = 'true';
}

start().catch((e: unknown) => {
  notice(`Could not start atomem: ${e instanceof Error ? e.message : String(e)}`);
  $('for-you-hint').textContent = 'atomem failed to start (see the notice above).';
});
