/**
 * DEPRECATED: protocol v1 is insecure (docs/PRIVACY.md); the engine uses protocol v2
 * (`report-client.ts`). Kept for the privacy benchmark's "before" figures and old services.
 *
 * Durable sync with the shared index: what the agent decides to share or delete is first
 * written to the profile's IndexedDB outbox ({@link OutboxIndex}), then {@link SyncClient}
 * drains the outbox to the service in batches, with retry, exponential backoff and jitter.
 * An offline period, a closed tab or a crashed worker loses nothing: the outbox is there on
 * the next start and drains when the service answers again.
 */
import type { CommunityView, SharedIndex, SharedMemoryUpload } from '../community/types.js';
import { INDEX_LIMITS } from '../protocol/index-v1.js';
import type { MemoryStore, QueuedEntry } from '../store/store.js';
import { IndexHttpError, type HttpIndex } from './http-index.js';

/** The agent's side of sync: uploads and deletions are queued durably; `communities` asks the service. */
export class OutboxIndex implements SharedIndex {
  readonly embedderId: string;
  constructor(
    private readonly store: MemoryStore,
    private readonly http: HttpIndex,
  ) {
    this.embedderId = http.embedderId;
  }

  async upsert(batch: readonly SharedMemoryUpload[]): Promise<void> {
    const now = Date.now();
    for (const u of batch) {
      await this.store.enqueue({ kind: 'upload', sharedId: u.id, embedderId: u.embedderId, vector: new Float32Array(u.vector), ...(u.items ? { items: [...u.items] } : {}), queuedAt: now });
    }
  }

  async delete(ids: readonly string[]): Promise<void> {
    const now = Date.now();
    for (const id of ids) await this.store.enqueue({ kind: 'delete', sharedId: id, token: await this.http.tokenFor(id), queuedAt: now });
  }

  communities(ownIds: readonly string[]): Promise<CommunityView[]> {
    return this.http.communities(ownIds);
  }
}

/** Options of {@link SyncClient}. */
export interface SyncClientOptions {
  store: MemoryStore;
  http: HttpIndex;
  /** First retry delay. Default 1 000 ms. */
  baseDelayMs?: number;
  /** Longest retry delay. Default 300 000 ms (5 minutes). */
  maxDelayMs?: number;
  /** Random source in [0, 1) for jitter (tests pass a seeded one). Default `Math.random`. */
  random?: () => number;
  /** A queued entry the service refused for good (4xx other than 429): it is dropped and reported here. */
  onDropped?: (entry: QueuedEntry, error: IndexHttpError) => void;
}

/** What one drain did. */
export interface DrainReport {
  /** Entries the service acknowledged. */
  sent: number;
  /** Entries refused for good and dropped. */
  dropped: number;
  /** Entries still queued (the service is unreachable or busy). */
  pending: number;
  /** The retryable error that stopped the drain, if any. */
  error?: IndexHttpError;
  /** When the next attempt is due after a failure (ms from now), else 0. */
  retryInMs: number;
}

/** Drains the outbox to the service; one drain at a time. */
export class SyncClient {
  private attempt = 0;
  private running: Promise<DrainReport> | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private readonly baseDelay: number;
  private readonly maxDelay: number;
  private readonly random: () => number;

  constructor(private readonly opts: SyncClientOptions) {
    this.baseDelay = opts.baseDelayMs ?? 1_000;
    this.maxDelay = opts.maxDelayMs ?? 300_000;
    this.random = opts.random ?? Math.random;
  }

  /** Backoff before retry number `attempt` (1-based): exponential, capped, with "equal jitter" (½ fixed, ½ random). */
  delayFor(attempt: number): number {
    const exp = Math.min(this.maxDelay, this.baseDelay * 2 ** Math.max(0, attempt - 1));
    return Math.round(exp / 2 + (exp / 2) * this.random());
  }

  /** Send everything queued now (or join the drain in progress). After a retryable failure a retry is scheduled. */
  drain(): Promise<DrainReport> {
    if (this.running) return this.running;
    this.running = this.drainOnce().finally(() => (this.running = undefined));
    return this.running;
  }

  /** Stop scheduled retries (the outbox stays queued for the next start). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async drainOnce(): Promise<DrainReport> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const { store, http } = this.opts;
    let sent = 0;
    let dropped = 0;
    const queue = await store.outbox();
    let i = 0;
    try {
      while (i < queue.length) {
        // a run of the same kind, oldest first, at most one wire batch
        const kind = queue[i].entry.kind;
        const run: QueuedEntry[] = [];
        while (i < queue.length && queue[i].entry.kind === kind && run.length < INDEX_LIMITS.maxBatch) run.push(queue[i++]);
        try {
          if (kind === 'upload') {
            await http.upsert(
              run.map((q) => {
                const e = q.entry as Extract<QueuedEntry['entry'], { kind: 'upload' }>;
                return { id: e.sharedId, embedderId: e.embedderId, vector: e.vector, ...(e.items ? { items: e.items } : {}) };
              }),
            );
          } else {
            const deletions = await Promise.all(
              run.map(async (q) => {
                const e = q.entry as Extract<QueuedEntry['entry'], { kind: 'delete' }>;
                return { id: e.sharedId, token: e.token ?? (await http.tokenFor(e.sharedId)) };
              }),
            );
            await http.deleteWithTokens(deletions);
          }
          for (const q of run) await store.acknowledge(q.key);
          sent += run.length;
        } catch (e) {
          if (!(e instanceof IndexHttpError) || e.retryable) throw e;
          // refused for good (bad entry, embedder the service does not take, ...): one by one, so a single bad entry cannot block the rest
          for (const q of run) {
            try {
              if (q.entry.kind === 'upload') {
                const u = q.entry;
                await http.upsert([{ id: u.sharedId, embedderId: u.embedderId, vector: u.vector, ...(u.items ? { items: u.items } : {}) }]);
                sent++;
              } else {
                await http.deleteWithTokens([{ id: q.entry.sharedId, token: q.entry.token ?? (await http.tokenFor(q.entry.sharedId)) }]);
                sent++;
              }
            } catch (one) {
              if (!(one instanceof IndexHttpError) || one.retryable) throw one;
              dropped++;
              this.opts.onDropped?.(q, one);
            }
            await store.acknowledge(q.key);
          }
        }
      }
      this.attempt = 0;
      return { sent, dropped, pending: 0, retryInMs: 0 };
    } catch (e) {
      const error = e instanceof IndexHttpError ? e : new IndexHttpError(e instanceof Error ? e.message : String(e), 0, 'network', true);
      this.attempt++;
      const retryInMs = this.delayFor(this.attempt);
      if (!this.stopped) this.timer = setTimeout(() => void this.drain().catch(() => undefined), retryInMs);
      return { sent, dropped, pending: (await store.outbox()).length, error, retryInMs };
    }
  }
}
