/**
 * The engine: one profile's memory agent, its catalog vectors and its IndexedDB store,
 * behind the {@link EngineApi} RPC contract. Runs inside the worker (`worker.ts` exposes it);
 * nothing here touches the DOM.
 *
 * Durability: `track` makes the event durable (`store.appendEvent`) BEFORE the agent
 * processes it, then saves the whole state in one transaction. A crash in between leaves a
 * pending event in the store; `init` replays it on the saved state, and the saved state marks
 * it processed, so every event is applied exactly once to the persisted memory.
 */
import { MemoryAgent } from '../agent/agent.js';
import { ItemVectors } from '../agent/items.js';
import { markProcessed, pendingCount, validateInteraction } from '../core/memory.js';
import type { AtomicMemory, MemoryState, Profile } from '../core/types.js';
import { probeCapabilities, type Capabilities } from '../models/probe.js';
import { loadLanguageModel } from '../models/select.js';
import { PromptApiLenders } from '../models/prompt-api-bridge.js';
import { LlmReasoner } from '../reason/llm.js';
import { llmPlanner } from '../reason/planner.js';
import type { LanguageModel, LoadProgress } from '../models/types.js';
import { MemoryStore, StorageQuotaError } from '../store/index.js';
import { validateCatalog, warmCatalog, type WarmCatalogResult } from './catalog.js';
import { checkConfigNames } from '../core/config.js';
import { checkNames, checkOptionNames, checkPrivacyLevel, OPTION_NAMES } from '../options.js';
import { ShopKnowledge } from '../shop/device.js';
import { CatalogVectorsError } from '../protocol/catalog-vectors-v1.js';
import { buildEmbedder, type BuiltEmbedder } from './embedders.js';
import { ReportClient, ReportHttpError } from '../sync/report-client.js';
import { AttesterTokenProvider } from '../sync/tokens.js';
import { planEpoch } from '../sync/schedule.js';
import { DAY_MS, privacyBudget, prune, refusal, spentEpsilon, subsampledEpsilon, type PrivacyBudget } from '../sync/budget.js';
import { makeReport as ldpReport } from '../community/ldp.js';
import { encodePrio3Upload, prio3Measurement, type Prio3Endpoints } from '../sync/prio3-report.js';
import { itemsSince } from '../sync/device-report.js';
import { isCrowdRelease, type CrowdRelease } from '../community/crowd.js';
import type { HealthV2Response, Release } from '../protocol/index-v2.js';

import type { ExportFile } from '../store/file.js';
import { serializeError } from './errors.js';
import type {
  EngineApi,
  EngineEvent,
  EngineEventMap,
  EngineEventName,
  EngineListener,
  EngineOptions,
  EngineStatus,
  PagePromptApi,
  PrivacyLevel,
  PromptApiLoanInfo,
  RankedResult,
  IntentMemoriesResult,
  RecommendOptions,
  SyncReport,
  TrackInput,
  PrivacyBudgetStatus,
} from './protocol.js';

interface Session {
  options: EngineOptions;
  /** JSON of the options, to tell a joining page's `init` from a different one. */
  key: string;
  store: MemoryStore;
  items: ItemVectors;
  agent: MemoryAgent;
  embedder: BuiltEmbedder;
  /** The catalog vector file and the shop model in use (for `status()`). */
  catalog: EngineStatus['catalog'];
  llm: {
    model: LanguageModel | null;
    attempts: EngineStatus['llm']['attempts'];
    loading: Promise<void> | null;
    reasoner: LlmReasoner | null;
    /** The idle timer: pending events and sweeps run this long after the last interaction. */
    idleTimer: ReturnType<typeof setTimeout> | null;
  };
  sync: SyncSession | null;
}

interface SyncSession {
  url: string;
  client: ReportClient;
  privacy: PrivacyLevel;
  attesterUrl: string | undefined;
  delay: 'random' | number;
  every: number;
  since: number;
  lastError: string | null;
  pending: Promise<unknown> | null;
  /** The release in use. */
  release: Release | undefined;
  /** The scheduled report of an epoch. */
  report: { epoch: number; timer: ReturnType<typeof setTimeout> } | null;
  /** The scheduled fetch of the next epoch's token (see sync/schedule.ts). */
  tokenFetch: { epoch: number; timer: ReturnType<typeof setTimeout> } | null;
  /** The sync at the start of the next epoch (while the page stays open). */
  rollover: ReturnType<typeof setTimeout> | null;
  /** The service's health, fetched once per epoch with the release. */
  health: HealthV2Response | undefined;
  /** The epoch in which the release and health were last fetched (at most once per epoch). */
  fetchedEpoch: number | undefined;
  /** While the last epoch's release is missing: the earliest time of the next fetch (ms). */
  retryAt: number;
  /** Communities matched from the release in use. */
  communities: number;
  /** The index's Prio3 aggregators, when it runs a leader (read once per epoch with the health): reports are then Prio3 reports. */
  prio3: Prio3Endpoints | undefined;
  /** The Prio3 release in use (ranking's `crowd` signal). */
  crowd: CrowdRelease | undefined;
  /** The last read of the index's Prio3 configuration failed (e.g. leader and helper disagree): no report of either kind until one succeeds. */
  prio3Refused: boolean;
  /** `index.prio3Module`: an ES module build of @divviup/prio3 (see IndexOptions). */
  prio3Module: string | undefined;
  /** The lifetime privacy budget (sync/budget.ts). */
  budget: PrivacyBudget;
  stopped: boolean;
}

/** A [0, 1) number from the platform CSPRNG (reports must not use Math.random). */
function cryptoRandom(): number {
  const u = globalThis.crypto.getRandomValues(new Uint32Array(2));
  return (u[0] * 2 ** 21 + (u[1] >>> 11)) / 2 ** 53;
}

/** Options of {@link Engine}. */
export interface EngineInit {
  /** True when the engine serves several pages (SharedWorker). */
  shared?: boolean;
  /**
   * Run `fn` while holding the profile's cross-tab write lock. Default: the Web Locks API
   * (`navigator.locks`) where it exists, else no lock (one engine per process, e.g. Node).
   */
  lock?: <T>(name: string, fn: () => Promise<T>) => Promise<T>;
}

type LocksLike = { request<T>(name: string, cb: () => Promise<T>): Promise<T> };

function defaultLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const locks = (globalThis as { navigator?: { locks?: LocksLike } }).navigator?.locks;
  return locks ? locks.request(name, fn) : fn();
}

/** {@link EngineApi} implementation. One instance per worker. */
export class Engine implements EngineApi {
  private readonly listeners = new Map<number, EngineListener>();
  /** Pages lending Chrome's Prompt API (exposed on Window only). */
  private readonly promptApi = new PromptApiLenders();
  private nextToken = 1;
  private session: Session | undefined;
  private capabilities: Capabilities | undefined;
  private readonly shared: boolean;
  private readonly lock: NonNullable<EngineInit['lock']>;
  /** Every operation runs after the previous one: no interleaved read-modify-write of the state. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(init: EngineInit = {}) {
    this.shared = init.shared ?? false;
    this.lock = init.lock ?? defaultLock;
  }

  subscribe(listener: EngineListener): number {
    if (typeof listener !== 'function') throw new TypeError('subscribe: listener must be a function (a Comlink.proxy)');
    const token = this.nextToken++;
    this.listeners.set(token, listener);
    return token;
  }

  unsubscribe(token: number): void {
    this.listeners.delete(token);
    this.promptApi.gone(token, 'left');
  }

  lendPromptApi(token: number, bridge: PagePromptApi | null, info?: PromptApiLoanInfo): void {
    if (!this.listeners.has(token)) throw new TypeError(`lendPromptApi: no subscription ${token} (subscribe first)`);
    if (bridge !== null && typeof bridge !== 'object' && typeof bridge !== 'function')
      throw new TypeError("lendPromptApi: bridge must be a Comlink proxy of the page's Prompt API, or null");
    this.promptApi.lend(token, bridge, info);
  }

  init(options: EngineOptions): Promise<void> {
    return this.serial(async () => {
      checkOptionNames(options, 'init');
      validateCatalog(options.catalog);
      if (options.config !== undefined) checkConfigNames(options.config);
      if (options.index) checkPrivacyLevel(options.index.privacy ?? 'off', 'index.privacy');
      const idleMs = options.llm?.idleMs;
      if (idleMs !== undefined && !(Number.isFinite(idleMs) && idleMs >= 0))
        throw new TypeError(`init: llm.idleMs must be a number ≥ 0, got ${String(idleMs)}`);
      const budget = options.llm?.budget;
      if (budget !== undefined && !(Number.isInteger(budget.maxCalls) && budget.maxCalls >= 0 && Number.isInteger(budget.perEvents) && budget.perEvents >= 1)) {
        throw new TypeError('init: llm.budget must be { maxCalls: integer ≥ 0, perEvents: integer ≥ 1 }');
      }
      const key = JSON.stringify(options);
      if (this.session && this.session.key === key) {
        // another page of a shared engine (or a retry): join the running session.
        await this.refresh(this.session);
        return;
      }
      this.capabilities ??= await probeCapabilities();
      // a worker has no LanguageModel of its own: report what the lending page's says
      if (this.capabilities.promptApi === 'absent' && this.promptApi.size)
        this.capabilities = { ...this.capabilities, promptApi: await this.promptApi.availability() };
      const progress = (p: LoadProgress): void => this.emit('progress', p);
      const embedder = await buildEmbedder(options.embedder, options.assetsBaseUrl, progress);
      const items = new ItemVectors(embedder.embedder, options.catalog);
      const store = await MemoryStore.open({ profile: options.profile });
      try {
        const warm = await warmCatalog({
          store,
          items,
          progress,
          fileUrl: options.catalogVectors,
          write: (fn) => this.write(fn),
          onError: (e) => this.emit('error', serializeError(e)),
        });
        // the shop's published model (a v2 file with one): the item space moves to it before the agent exists (tau is set from it)
        const catalog = this.useShop(items, warm, options.catalogVectors);
        const state = await store.load();
        await this.closeSession();
        const session: Session = {
          options,
          key,
          store,
          items,
          agent: this.agentFor(items, options, state),
          embedder,
          catalog,
          llm: { model: null, attempts: [], loading: null, reasoner: null, idleTimer: null },
          sync: null,
        };
        if (options.index) session.sync = await this.syncSession(options.index);
        this.session = session;
        if (options.llm) session.llm.loading = this.loadModel(session, progress);
        await this.exclusive(async () => {
          await this.refresh(this.ready());
          // memories made with another embedder (the shop switched models) move into this space
          const { moved, dropped } = await session.agent.adoptEmbedder();
          if (moved || dropped) await this.write(() => store.saveState(session.agent.snapshot));
          await this.replay();
        });
      } catch (e) {
        store.close();
        throw e;
      }
    });
  }

  status(): Promise<EngineStatus> {
    // why: not queued behind writes, so the inspector sees costs and deferred events while an
    // idle batch of model calls runs; everything here is a snapshot of in-memory counters.
    return (async () => {
      const s = this.ready();
      const e = s.embedder;
      return {
        capabilities: this.capabilities ?? (await probeCapabilities()),
        embedder: { id: e.embedder.id, kind: e.kind, device: e.device, dim: e.embedder.dim, state: e.state(), error: e.error() },
        llm: {
          mode: s.llm.model ? s.llm.model.backend : 'rules',
          model: s.llm.model?.id ?? null,
          attempts: s.llm.attempts.map((a) => ({ ...a })),
          loading: s.llm.loading !== null,
          costs: s.llm.reasoner ? s.llm.reasoner.costs() : null,
          deferred: pendingCount(s.agent.snapshot),
        },
        storage: { degraded: s.store.degraded, persisted: null },
        catalog: s.catalog ? { ...s.catalog, shop: s.catalog.shop ? { ...s.catalog.shop } : null } : null,
        shared: this.shared,
        sync: s.sync
          ? {
              url: s.sync.url,
              privacy: s.sync.privacy,
              pending: s.sync.report ? 1 : 0,
              lastError: s.sync.lastError,
              release: s.sync.release?.epoch ?? null,
              reportedEpoch: s.agent.reportedEpoch() ?? null,
              reports: s.sync.health ? (s.sync.prio3 ? 'prio3' : 'ldp') : null,
              crowdRelease: s.sync.crowd?.epoch ?? null,
            }
          : null,
      };
    })();
  }

  track(interaction: TrackInput): Promise<void> {
    return this.mutation(async () => {
      const { store, agent } = this.ready();
      if (!interaction || typeof interaction !== 'object') throw new TypeError('interaction must be an object');
      // validated once, here; an unknown item → UnknownItemError before anything changes. The
      // agent appends it and returns the event as stored (its sequence number), which is made
      // durable before it is processed.
      const ev = agent.append(validateInteraction({ item: interaction.item, action: interaction.action, at: interaction.at ?? Date.now() }));
      try {
        await this.write(() => store.appendEvent(ev));
      } catch (e) {
        agent.discard(ev);
        throw e;
      }
      await agent.step();
      await this.write(() => store.saveState(agent.snapshot));
      this.idleSoon();
      const sync = this.session?.sync;
      if (sync && ++sync.since >= sync.every) this.syncSoon();
    });
  }

  recommend(candidates?: string[] | RecommendOptions, opts: RecommendOptions = {}): Promise<RankedResult[]> {
    // `recommend({ limit })`: options in first place, no candidates = the whole catalog
    if (candidates !== undefined && candidates !== null && typeof candidates === 'object' && !Array.isArray(candidates))
      [candidates, opts] = [undefined, candidates];
    return this.reading(async () => {
      if (!opts || typeof opts !== 'object') throw new TypeError('recommend: opts must be an object');
      if (candidates !== undefined && !Array.isArray(candidates))
        throw new TypeError('recommend: candidates must be an array of item ids, or omitted for the whole catalog');
      checkNames(opts, OPTION_NAMES.recommend, 'recommend');
      // why: only the fields we know cross into the agent (the intent is used for this call and dropped)
      const ranked = await this.ready().agent.recommend(candidates as string[] | undefined, {
        rerank: opts.rerank,
        ...(opts.limit !== undefined ? { limit: opts.limit } : {}),
        ...(opts.diversify !== undefined ? { diversify: opts.diversify } : {}),
        ...(opts.exclude !== undefined ? { exclude: opts.exclude } : {}),
        ...(opts.intent !== undefined ? { intent: opts.intent } : {}),
      });
      // reasons leave the worker as data; the page words them (client/index.ts)
      return ranked.map((r) => ({ id: r.id, score: r.score, why: r.why }));
    });
  }

  intentMemories(intent: string): Promise<IntentMemoriesResult> {
    return this.reading(async () => this.ready().agent.intentMemories(intent));
  }

  memories(): Promise<AtomicMemory[]> {
    return this.reading(async () => this.ready().agent.memories());
  }

  profile(): Promise<Profile | null> {
    return this.reading(async () => this.ready().agent.profile());
  }

  forget(memoryId: string): Promise<boolean> {
    return this.mutation(async () => {
      const { store, agent } = this.ready();
      if (typeof memoryId !== 'string' || !memoryId) throw new TypeError('forget: memoryId must be a non-empty string');
      const done = agent.forget(memoryId);
      if (done) {
        await this.write(() => store.saveState(agent.snapshot));
        this.syncSoon(); // its shared copy is deleted
      }
      return done;
    });
  }

  export(): Promise<ExportFile> {
    return this.reading(async () => this.ready().store.export());
  }

  import(file: unknown): Promise<void> {
    return this.mutation(async () => {
      const s = this.ready();
      await this.write(() => s.store.import(file));
      await this.reload(s);
      if (s.sync) this.syncSoon();
    });
  }

  erase(): Promise<void> {
    return this.mutation(async () => {
      const s = this.ready();
      // why: v2 reports carry no handle, so there is nothing on the index to delete; a report
      // already sent is part of its epoch's aggregate (ε-LDP), an unsent one is cancelled
      if (s.sync?.report) {
        clearTimeout(s.sync.report.timer);
        s.sync.report = null;
      }
      // the ledger's spent budget survives (store.erase keeps it); its tokens are dropped
      if (s.sync?.tokenFetch) {
        clearTimeout(s.sync.tokenFetch.timer);
        s.sync.tokenFetch = null;
      }
      await this.write(() => s.store.erase());
      await this.reload(s);
    });
  }

  sync(): Promise<SyncReport> {
    const s = this.ready();
    const sync = s.sync;
    if (!sync) return Promise.reject(new Error('sync: no index configured (createAtomem({ index: { url } }))'));
    const run = (async (): Promise<SyncReport> => {
      sync.since = 0;
      const base = { privacy: sync.privacy, sent: 0, dropped: 0 };
      if (sync.privacy === 'off') {
        sync.release = undefined;
        sync.fetchedEpoch = undefined;
        sync.communities = 0;
        sync.crowd = undefined;
        this.stopTimers(sync);
        await this.mutation(async () => {
          const { agent } = this.ready();
          agent.useCrowd(undefined);
          await agent.useRelease(undefined);
        });
        sync.lastError = null;
        return { ...base, pending: 0, communities: 0, release: null };
      }
      let error: string | undefined;
      try {
        // why once per epoch: the release changes once per epoch, and a fetch every few actions
        // would tell the index when the shopper is active
        const local = sync.health ? Math.floor(Date.now() / sync.health.epochMs) : undefined;
        if (local === undefined || (sync.fetchedEpoch !== local && Date.now() >= sync.retryAt)) {
          const health = await sync.client.health();
          const release = await sync.client.latestRelease();
          // why read with the health: whether the index runs Prio3 decides what a report is and
          // what it costs; an index whose aggregators disagree gets no report of either kind
          sync.prio3 = undefined;
          sync.prio3Refused = true;
          const prio3 = await sync.client.prio3();
          sync.prio3Refused = false;
          const crowd = prio3 ? await sync.client.latestPrio3Release() : undefined;
          sync.prio3 = prio3;
          sync.crowd = isCrowdRelease(crowd) ? crowd : undefined;
          sync.health = health;
          // why not marked done while the last epoch's release is missing: a sync in the first
          // moments of an epoch (before the service published it) would otherwise keep the release
          // before last for a whole epoch. Until it appears, a sync fetches again at most once per
          // 1/24 epoch, so the fetches still say little about when the shopper is active. (A
          // service without `epochs`, or that has closed none yet, has nothing to wait for.)
          // (The Prio3 release is likewise awaited, but only in the epoch's first fifth: the leader
          // aggregates right after the grace period, so a later miss means none was released.)
          const prio3Settled =
            !prio3 || (sync.crowd?.epoch ?? -Infinity) >= health.epoch - 1 || Date.now() - health.epoch * health.epochMs > health.epochMs / 5;
          const settled = prio3Settled && (health.epochs?.closedThrough == null || (health.latestRelease ?? -Infinity) >= health.epoch - 1);
          sync.fetchedEpoch = settled ? health.epoch : undefined;
          sync.retryAt = settled ? 0 : Date.now() + health.epochMs / 24;
          sync.release = release;
          sync.communities = await this.mutation(async () => {
            const { agent } = this.ready();
            agent.useCrowd(sync.crowd);
            return agent.useRelease(release);
          });
        }
        if (sync.privacy === 'contribute') await this.planContribution(sync);
        this.scheduleRollover(sync);
      } catch (e) {
        error = e instanceof Error ? e.message : String(e);
      }
      sync.lastError = error ?? null;
      return { ...base, pending: sync.report ? 1 : 0, communities: sync.communities, release: sync.release?.epoch ?? null, ...(error ? { error } : {}) };
    })();
    sync.pending = run.catch(() => undefined).finally(() => (sync.pending = null));
    return run;
  }

  setPrivacy(level: PrivacyLevel): Promise<SyncReport> {
    try {
      checkPrivacyLevel(level, 'setPrivacy: privacy');
    } catch (e) {
      return Promise.reject(e);
    }
    const s = this.ready();
    if (!s.sync) return Promise.reject(new Error('setPrivacy: no index configured (createAtomem({ index: { url } }))'));
    if (level === 'contribute' && !s.sync.attesterUrl)
      return Promise.reject(new TypeError("setPrivacy: 'contribute' needs index.attesterUrl (the shop's Privacy Pass attester)"));
    s.sync.privacy = level;
    if (level !== 'contribute') {
      // why: leaving `contribute` cancels what it scheduled (as erase() does): an unsent report and
      // a token fetch; left in place, the report's timer would find the level changed, send
      // nothing, and stay counted in status().sync.pending
      if (s.sync.report) clearTimeout(s.sync.report.timer);
      if (s.sync.tokenFetch) clearTimeout(s.sync.tokenFetch.timer);
      s.sync.report = null;
      s.sync.tokenFetch = null;
    }
    return this.sync();
  }

  async lastPayload(): Promise<{ path: string; body: unknown; at: number } | null> {
    return this.ready().sync?.client.lastReport() ?? null;
  }

  privacyBudget(): Promise<PrivacyBudgetStatus> {
    return this.reading(async () => {
      const s = this.ready();
      const budget = s.sync?.budget ?? privacyBudget();
      const ledger = await s.store.loadLedger();
      const now = Date.now();
      const perReport = s.sync?.health ? this.reportEpsilon(s.sync, s.sync.health) : null;
      return {
        cap: budget.cap,
        windowDays: budget.windowMs / DAY_MS,
        q: budget.q,
        spent: spentEpsilon(ledger.entries, now, budget.windowMs),
        perEpoch: perReport === null ? null : subsampledEpsilon(perReport, budget.q),
        reports: prune(ledger.entries, now, budget.windowMs).filter((e) => e.sent).length,
        tokens: ledger.tokens.map((t) => t.epoch),
      };
    });
  }

  resetPrivacyBudget(): Promise<void> {
    return this.mutation(async () => {
      const s = this.ready();
      if (s.sync?.tokenFetch) {
        clearTimeout(s.sync.tokenFetch.timer);
        s.sync.tokenFetch = null;
      }
      await s.store.resetLedger();
    });
  }

  // ——— sync internals ———

  /** ε one report costs: the Prio3 release's central ε when the index runs Prio3, else the local-DP report's. */
  private reportEpsilon(sync: SyncSession, health: HealthV2Response): number {
    return sync.prio3 ? sync.prio3.leader.epsilon : health.ldp.epsilon;
  }

  private async syncSession(index: NonNullable<EngineOptions['index']>): Promise<SyncSession> {
    if (!index || typeof index.url !== 'string') throw new TypeError('index.url must be the URL of an atomem-index service');
    const level = index.privacy ?? 'off';
    checkPrivacyLevel(level, 'index.privacy');
    if (level === 'contribute' && typeof index.attesterUrl !== 'string')
      throw new TypeError("index.privacy 'contribute' needs index.attesterUrl (the shop's Privacy Pass attester)");
    const delay = index.reportDelay ?? 'random';
    if (delay !== 'random' && !(typeof delay === 'number' && delay >= 0))
      throw new TypeError(`index.reportDelay must be 'random' or a number ≥ 0, got ${String(delay)}`);
    const b = index.budget ?? {};
    if (typeof b !== 'object' || b === null) throw new TypeError('index.budget must be an object { cap?, windowDays?, q? }');
    const budget = privacyBudget({ cap: b.cap, windowMs: b.windowDays === undefined ? undefined : b.windowDays * DAY_MS, q: b.q } as Partial<PrivacyBudget>);
    const tokens = new AttesterTokenProvider({ indexUrl: index.url, attesterUrl: index.attesterUrl ?? '' });
    if (index.relay !== undefined && (typeof index.relay !== 'string' || !/^https?:\/\//.test(index.relay)))
      throw new TypeError(`index.relay must be the http(s) URL of an Oblivious HTTP relay (atomem-relay), got ${String(index.relay)}`);
    if (index.prio3Module !== undefined && (typeof index.prio3Module !== 'string' || index.prio3Module.length === 0))
      throw new TypeError(`index.prio3Module must be the URL of an ES module build of @divviup/prio3, got ${String(index.prio3Module)}`);
    const client = new ReportClient({ url: index.url, tokens, relay: index.relay });
    return {
      url: index.url,
      client,
      privacy: level,
      attesterUrl: index.attesterUrl,
      delay,
      every: index.syncEvery ?? 5,
      since: 0,
      lastError: null,
      pending: null,
      release: undefined,
      report: null,
      tokenFetch: null,
      rollover: null,
      health: undefined,
      fetchedEpoch: undefined,
      retryAt: 0,
      communities: 0,
      prio3: undefined,
      crowd: undefined,
      prio3Refused: false,
      prio3Module: index.prio3Module,
      budget,
      stopped: false,
    };
  }

  private stopTimers(sync: SyncSession): void {
    if (sync.report) clearTimeout(sync.report.timer);
    if (sync.tokenFetch) clearTimeout(sync.tokenFetch.timer);
    if (sync.rollover) clearTimeout(sync.rollover);
    sync.report = sync.tokenFetch = sync.rollover = null;
  }

  /** While the page stays open: sync again shortly after the next epoch's release is due (a random moment in its first tenth). */
  private scheduleRollover(sync: SyncSession): void {
    const h = sync.health;
    if (!h || sync.rollover || sync.stopped) return;
    const next = (Math.floor(Date.now() / h.epochMs) + 1) * h.epochMs + h.graceMs;
    const wait = next - Date.now() + Math.floor(cryptoRandom() * 0.1 * h.epochMs);
    sync.rollover = setTimeout(
      () => {
        sync.rollover = null;
        if (sync.stopped || this.session?.sync !== sync || sync.privacy === 'off') return;
        this.syncSoon();
      },
      Math.max(0, wait),
    );
  }

  /**
   * At `contribute`: this epoch's plan (sync/schedule.ts) — fetch the next epoch's token at one
   * random moment, send this epoch's report (with the token fetched last epoch) at another —
   * within the lifetime budget (sync/budget.ts): once the ledger is full, no token, no report.
   */
  private async planContribution(sync: SyncSession): Promise<void> {
    const health = sync.health!;
    const { store } = this.ready();
    const now = Date.now();
    const epoch = Math.floor(now / health.epochMs);
    const ledger = await store.loadLedger();
    const live = ledger.tokens.filter((t) => t.epoch >= epoch);
    if (live.length !== ledger.tokens.length) await store.saveLedger({ ...ledger, tokens: live });
    const charge = subsampledEpsilon(this.reportEpsilon(sync, health), sync.budget.q);
    const plan = planEpoch({
      now,
      epochMs: health.epochMs,
      held: live.map((t) => t.epoch),
      random: cryptoRandom,
      fixedDelay: sync.delay === 'random' ? undefined : sync.delay,
    });
    if (plan.fetchToken && !sync.tokenFetch && refusal(ledger.entries, plan.fetchToken.epoch, charge, now, sync.budget) === undefined) {
      const { epoch: next, delay } = plan.fetchToken;
      sync.tokenFetch = {
        epoch: next,
        timer: setTimeout(() => {
          void this.fetchToken(sync, next, charge)
            .catch((e) => {
              sync.lastError = e instanceof Error ? e.message : String(e);
              this.emit('error', { name: 'TokenError', message: sync.lastError });
            })
            .finally(() => {
              if (sync.tokenFetch?.epoch === next) sync.tokenFetch = null;
            });
        }, delay),
      };
    }
    if (
      plan.report &&
      !(sync.report && sync.report.epoch === plan.report.epoch) &&
      refusal(ledger.entries, plan.report.epoch, charge, now, sync.budget) === undefined
    ) {
      if (sync.report) clearTimeout(sync.report.timer);
      const { epoch: at, delay } = plan.report;
      sync.report = {
        epoch: at,
        timer: setTimeout(() => {
          void this.sendReport(sync, at, health).catch((e) => {
            sync.lastError = e instanceof Error ? e.message : String(e);
            this.emit('error', { name: 'ReportError', message: sync.lastError });
          });
        }, delay),
      };
    }
  }

  /**
   * Fetch (blinded) the token of `epoch` from the shop's attester and keep it in the ledger.
   * The budget is checked again when the timer fires and when the token arrives: the plan that
   * scheduled this fetch saw the ledger before this epoch's report was charged, and a report sent
   * in between can fill it (then no request goes out, or the token that was in flight is dropped).
   */
  private async fetchToken(sync: SyncSession, epoch: number, charge: number): Promise<void> {
    if (sync.stopped || this.session?.sync !== sync || sync.privacy !== 'contribute') return;
    if (refusal((await this.ready().store.loadLedger()).entries, epoch, charge, Date.now(), sync.budget) !== undefined) return;
    let token: string;
    try {
      token = await sync.client.token(epoch);
    } catch (e) {
      // the attester's per-account budget is spent (429: another device of this account has it)
      if (e instanceof ReportHttpError && e.code === 'token_limit') return;
      throw e;
    }
    await this.mutation(async () => {
      const { store } = this.ready();
      const ledger = await store.loadLedger();
      if (sync.stopped || this.session?.sync !== sync || sync.privacy !== 'contribute') return;
      if (refusal(ledger.entries, epoch, charge, Date.now(), sync.budget) !== undefined) return;
      if (!ledger.tokens.some((t) => t.epoch === epoch)) ledger.tokens.push({ epoch, token });
      await store.saveLedger(ledger);
    });
  }

  /**
   * The epoch's lottery and report: with probability q the device's report, else a dummy (the
   * mechanism on an empty item set: an LDP report of nothing, or a Prio3 vector of zeros) so the
   * index cannot see the lottery. When the index runs Prio3 the report is a Prio3 upload (shares
   * sealed to the leader and the helper, sync/prio3-report.ts), charged the release's central ε.
   * The ledger is charged and the token removed BEFORE anything is sent: if that write fails,
   * nothing is sent.
   */
  private async sendReport(sync: SyncSession, epoch: number, health: HealthV2Response): Promise<void> {
    if (sync.stopped || this.session?.sync !== sync || sync.privacy !== 'contribute' || sync.prio3Refused) {
      if (sync.report?.epoch === epoch) sync.report = null;
      return;
    }
    const prio3 = sync.prio3;
    const charge = subsampledEpsilon(this.reportEpsilon(sync, health), sync.budget.q);
    const sent = sync.budget.q === 1 || cryptoRandom() < sync.budget.q;
    // a Prio3 upload is built first (sharding and sealing take a while, and need the library): a failure there charges nothing
    let upload: Awaited<ReturnType<typeof encodePrio3Upload>> | undefined;
    if (prio3) {
      const ready = await this.mutation(async () => {
        const { agent, store, items } = this.ready();
        const ledger = await store.loadLedger();
        const held = ledger.tokens.find((t) => t.epoch === epoch);
        if (!held || refusal(ledger.entries, epoch, charge, Date.now(), sync.budget) !== undefined || agent.reportedEpoch() === epoch) return undefined;
        // what the shopper turned to since the previous epoch began (sync/device-report.ts)
        return { token: held.token, items: sent ? itemsSince(agent.snapshot, (epoch - 1) * health.epochMs, (id) => items.has(id)) : [] };
      });
      if (!ready) {
        sync.report = null;
        return;
      }
      // why cleared on failure: a report that cannot be built (e.g. the library is missing) must not stay pending
      upload = await encodePrio3Upload({
        measurement: prio3Measurement(ready.items, prio3.leader.items, prio3.leader.ell),
        epoch,
        token: ready.token,
        leader: prio3.leader,
        helper: prio3.helper,
        moduleUrl: sync.prio3Module,
      }).catch((e: unknown) => {
        if (sync.report?.epoch === epoch) sync.report = null;
        throw e;
      });
    }
    const out = await this.mutation(async () => {
      const { agent, store } = this.ready();
      const ledger = await store.loadLedger();
      const held = ledger.tokens.find((t) => t.epoch === epoch);
      const now = Date.now();
      if (!held || refusal(ledger.entries, epoch, charge, now, sync.budget) !== undefined) return undefined;
      if (upload && upload.token !== held.token) return undefined;
      const report = upload ? undefined : sent ? agent.makeReport(epoch, health.ldp, cryptoRandom) : ldpReport([], health.ldp, {}, cryptoRandom);
      if (!upload && !report) return undefined;
      await store.saveLedger({
        entries: [...prune(ledger.entries, now, sync.budget.windowMs), { at: now, epoch, epsilon: charge, q: sync.budget.q, sent }],
        tokens: ledger.tokens.filter((t) => t !== held),
      });
      // the memoized randomization is saved before anything is sent
      if (sent && report) await this.write(() => store.saveState(agent.snapshot));
      return { report, token: held.token };
    });
    sync.report = null;
    if (!out) return;
    try {
      if (upload) await sync.client.sendPrio3(upload);
      else await sync.client.send(epoch, out.report!, out.token);
    } catch (e) {
      // final for this epoch: a refused token (spent, or the epoch closed: 403); anything else
      // is an error (the charge stays: the report may have arrived)
      if (!(e instanceof ReportHttpError && e.status === 403)) throw e;
    }
    await this.mutation(async () => {
      const { agent, store } = this.ready();
      agent.markReported(epoch);
      await this.write(() => store.saveState(agent.snapshot));
    });
  }

  /** Sync in the background (after the current operation); failures become `error` events. */
  private syncSoon(): void {
    const sync = this.session?.sync;
    if (!sync || sync.pending) return;
    setTimeout(() => {
      if (this.session?.sync !== sync || sync.pending) return;
      this.sync().then(
        (r) => {
          if (r.error) this.emit('error', { name: 'SyncError', message: r.error });
        },
        (e) => this.emit('error', serializeError(e)),
      );
    }, 0);
  }

  /** Close the store and free the models (the worker is about to go, or re-init). */
  async closeSession(): Promise<void> {
    const s = this.session;
    this.session = undefined;
    if (!s) return;
    if (s.llm.idleTimer) clearTimeout(s.llm.idleTimer);
    if (s.sync) {
      s.sync.stopped = true;
      this.stopTimers(s.sync);
    }
    await s.sync?.pending;
    s.store.close();
    await s.llm.loading;
    await Promise.allSettled([s.embedder.embedder.dispose?.(), s.llm.model?.dispose()]);
  }

  /** Try the configured language models in the background (WebGPU → WASM → rules), visibly. */
  private async loadModel(s: Session, progress: (p: LoadProgress) => void): Promise<void> {
    try {
      // why: the worker's own LanguageModel when a future browser exposes it there, else the pages' loans
      const own = typeof (globalThis as { LanguageModel?: unknown }).LanguageModel !== 'undefined';
      const choice = await loadLanguageModel(s.options.llm, s.options.assetsBaseUrl, progress, { promptApi: own ? undefined : this.promptApi.api() });
      s.llm.attempts = choice.attempts;
      if (this.session !== s) {
        await choice.model?.dispose();
        return;
      }
      s.llm.model = choice.model;
      if (choice.model) {
        // memory operations now go through the model (validated, budgeted, rules on any failure)
        s.llm.reasoner = new LlmReasoner({
          model: choice.model,
          budget: s.options.llm?.budget,
          onCall: (info) => this.emit('llm', { kind: 'call', ...info }),
          onFallback: (info) => this.emit('llm', { kind: 'fallback', ...info }),
        });
        this.usePlanning(s.agent, s.llm.reasoner);
        // events left pending by a previous page (or while the model loaded) get their batch
        this.idleSoon();
      }
      for (const a of choice.attempts) {
        if (!a.ok) this.emit('error', { name: 'ModelFallback', message: `${a.runtime} not used: ${a.reason ?? 'unknown'}` });
      }
    } finally {
      s.llm.loading = null;
    }
  }

  // ——— internals ———

  /**
   * Move `items` to the shop model of the catalog file, if it has one (`ItemVectors.useShop`);
   * a model that cannot serve (no item vectors) is an `error` event and the content space stays.
   */
  private useShop(items: ItemVectors, warm: WarmCatalogResult, url: string | undefined): EngineStatus['catalog'] {
    if (!url || !warm.file) return url ? { url, version: null, source: null, bytes: 0, shop: null } : null;
    const base = { url, version: warm.file.version, source: warm.file.source, bytes: warm.file.bytes };
    const part = warm.shop;
    if (!part) return { ...base, shop: null };
    try {
      const knowledge = new ShopKnowledge(part.id, part.model, part.sasrec ? { weights: part.sasrec.weights, items: part.sasrec.items } : undefined);
      items.useShop(knowledge);
    } catch (e) {
      this.emit('error', serializeError(new CatalogVectorsError(`${url}: its shop model is not used: ${e instanceof Error ? e.message : String(e)}`)));
      return { ...base, shop: null };
    }
    return {
      ...base,
      shop: { id: part.id, items: part.model.items.length, sequence: part.sasrec ? 'sasrec' : null, epsilon: part.model.privacy?.epsilon ?? null },
    };
  }

  /** Memory operations through the LLM reasoner, and the LLM planner (idle-time batches, model-chosen sweeps). */
  private usePlanning(agent: MemoryAgent, reasoner: LlmReasoner): void {
    agent.useReasoner(
      reasoner,
      llmPlanner(reasoner, (m) => agent.memoryView(m)),
    );
  }

  /**
   * (Re)start the idle timer while a model runs the memory: `llm.idleMs` after the last
   * interaction, the agent processes its pending events in one batch and the planner decides
   * the sweeps, under the same lock as any write; then the state is saved.
   */
  private idleSoon(): void {
    const s = this.session;
    if (!s?.llm.reasoner) return;
    if (s.llm.idleTimer) clearTimeout(s.llm.idleTimer);
    s.llm.idleTimer = setTimeout(() => {
      s.llm.idleTimer = null;
      if (this.session !== s) return;
      this.mutation(async () => {
        const { agent, store } = this.ready();
        const out = await agent.idle();
        // saved even without lifecycle events: the planner's counters may have moved
        await this.write(() => store.saveState(agent.snapshot));
        const sync = this.session?.sync;
        if (sync && out.length) this.syncSoon();
      }).catch((e: unknown) => this.emit('error', serializeError(e)));
    }, s.options.llm?.idleMs ?? 2000);
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * A change of the memory tiers: serial within this engine, and under the profile's cross-tab
   * lock, on a state refreshed from the store if another tab's engine wrote since — so two tabs
   * writing at once never overwrite each other's events.
   */
  private mutation<T>(fn: () => Promise<T>): Promise<T> {
    return this.serial(() =>
      this.exclusive(async () => {
        await this.refresh(this.ready());
        return fn();
      }),
    );
  }

  /** A read, on a state refreshed from the store if another tab wrote since. */
  private reading<T>(fn: () => Promise<T>): Promise<T> {
    return this.serial(async () => {
      await this.refresh(this.ready());
      return fn();
    });
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const s = this.ready();
    return this.lock(`atomem:${s.store.profile}`, fn);
  }

  /** Reload the agent when another connection changed the stored state. */
  private async refresh(s: Session): Promise<void> {
    if (await s.store.changedElsewhere()) {
      s.agent = this.agentFor(s.items, s.options, await s.store.load());
    }
  }

  private ready(): Session {
    if (!this.session) throw new Error('the engine is not initialised: call init(options) first');
    return this.session;
  }

  private agentFor(items: ItemVectors, options: EngineOptions, state: MemoryState): MemoryAgent {
    const agent = new MemoryAgent({ items, state, config: options.config, onLifecycle: (e) => this.emit('memory', e) });
    const reasoner = this.session?.llm.reasoner;
    if (reasoner) this.usePlanning(agent, reasoner);
    return agent;
  }

  /** Rebuild the agent from what the store now holds (after import / erase). */
  private async reload(s: Session): Promise<void> {
    s.agent = this.agentFor(s.items, s.options, await s.store.load());
    await this.replay();
  }

  /**
   * Process events that were durable but not yet processed (a crash between `appendEvent`
   * and `saveState`), then save. Pending events of items no longer in the catalog are
   * dropped from processing (marked done) with an `error` event, so one stale id cannot
   * block startup forever.
   */
  private async replay(): Promise<void> {
    const { store, agent, items } = this.ready();
    const pending = agent.snapshot.events.filter((e) => e.pending);
    if (pending.length === 0) return;
    for (const ev of pending) {
      if (items.has(ev.item)) continue;
      markProcessed(agent.snapshot, ev.seq);
      this.emit('error', { name: 'UnknownItemError', message: `pending event ${ev.seq} of unknown item "${ev.item}" was skipped` });
    }
    await agent.processPending();
    await this.write(() => store.saveState(agent.snapshot));
  }

  /** A store write; a full disk is reported (`error` event) and the engine continues in memory. */
  private async write(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (e) {
      if (!(e instanceof StorageQuotaError)) throw e;
      this.emit('error', serializeError(e));
    }
  }

  private emit<K extends EngineEventName>(type: K, payload: EngineEventMap[K]): void {
    for (const l of this.listeners.values()) {
      try {
        // a Comlink proxy returns a promise; a vanished listener must never break the engine.
        const r = l({ type, payload } as EngineEvent) as unknown;
        if (r instanceof Promise) r.catch(() => undefined);
      } catch {
        // ignore
      }
    }
  }
}
