/**
 * STEAM's relation extraction and incremental community exploration. Pure, no I/O.
 *
 * - Relation extraction is a function of the *current* memory set (not of insertion order):
 *   every memory `x` has a candidate list `L(x)`, its top-`k1` memories by cosine with
 *   `sim ≥ tau` among the memories of *other* batches (one batch = one device's upload; each
 *   memory keeps its batch tag), ranked by similarity, ties broken by the smaller id. Two
 *   memories are linked iff each is in the other's list (mutual kNN). A memory therefore has at
 *   most `k1` links, which bounds chaining to paths and small clusters.
 * - Communities are the connected components of the link graph, except that a component of
 *   more than `maxCommunitySize` memories is cut deterministically: its links are taken
 *   strongest first (ties: smaller ids first) and one joins two groups only if the joined group
 *   stays within the cap (size-capped single linkage). Each community is connected.
 * - Incremental maintenance equals a recomputation from scratch ({@link CommunityGraph.recomputeFromScratch})
 *   while the vector store scans exhaustively (`scanMany`, e.g. {@link FlatVectorStore}): an
 *   insert adds the new memories' lists and offers each new memory to every memory whose list
 *   it enters (pushing out that list's previous k1-th entry: a link can vanish and a community
 *   split); a removal drops the removed memories' links and refills the lists they were in
 *   (new entries: links can appear and communities merge). Then the components that contain a
 *   changed link or a new memory are re-explored and re-cut; the others cannot have changed.
 *   With an approximate store (no `scanMany`, or one that declines: the index service's HNSW
 *   from `exactBelow` memories on), lists come from searches of bounded size (a new memory is
 *   offered to the lists of its `reverseCandidates` nearest), so they are approximate top-k1
 *   and a memory outside that neighbourhood may miss a new entrant.
 * - Ids are stable and deterministic (`c1`, `c2`, … from a counter): after every change each
 *   new community inherits the id of the old community it shares the most members with (ties:
 *   the older community); so on a merge the larger community keeps its id (ties: the older
 *   one), on a split the largest part keeps it (ties: the part with the smallest member id);
 *   the rest get new ids.
 */

import { normalize } from '../core/vector.js';
import { InvalidUploadError } from './errors.js';
import { PrototypeTracker, type PrototypeMember } from './prototype.js';
import { FlatVectorStore, type VectorSearch } from './vectors.js';

/** Graph configuration. Defaults are the STEAM paper's best settings. */
export interface CommunityGraphConfig {
  /** Neighbours per memory (mutual top-k1): at most this many links per memory. Default 2. 0 disables linking. */
  k1?: number;
  /** Minimum cosine similarity of a link. Default 0.5. */
  tau?: number;
  /**
   * Largest community: a connected component with more memories is cut by size-capped single
   * linkage (strongest links first). Default {@link DEFAULT_MAX_COMMUNITY_SIZE}; `Infinity` =
   * plain connected components.
   */
  maxCommunitySize?: number;
  /**
   * Only for a vector store without `scanMany` (approximate): how many nearest memories of a
   * new memory are offered it for their lists. Default 32 (links within 0.2 % of the exact
   * graph's on 9k clustered 64-d memories; 16: 0.6 %, 8: 3 %). Exact stores offer it to every
   * memory whose list it enters.
   */
  reverseCandidates?: number;
  /** Prefix of generated community ids. Default `"c"` (ids `c1`, `c2`, …). */
  idPrefix?: string;
  /** Vector index factory (called once, with the dimension of the first vector). Default: exact {@link FlatVectorStore}. */
  createVectorSearch?: (dim: number) => VectorSearch;
}

/** Default {@link CommunityGraphConfig.maxCommunitySize}. */
export const DEFAULT_MAX_COMMUNITY_SIZE = 128;

/** One memory to insert. */
export interface GraphMemory {
  /** Unique, non-empty id. Inserting an existing id replaces that memory. */
  id: string;
  /** Embedding; normalised on insert (a copy is stored). */
  vector: ArrayLike<number>;
  /** Catalog item ids of the memory's interactions (privacy level `items`); deduplicated. */
  items?: readonly string[];
  /**
   * Upload group: memories with the same tag are never linked. Default: one group per
   * `addBatch` call (one call = one device's upload).
   */
  batch?: string;
}

/** A memory's community before and after one operation. */
export interface MembershipChange {
  /** Community before (absent for a memory that did not exist). */
  from?: string;
  /** Community after. */
  to: string;
}

/**
 * Net effect of one `addBatch` / `remove` call. Transient communities (created and absorbed
 * again within the call, e.g. by an upsert) do not appear.
 */
export interface CommunityChanges {
  /** Ids inserted by the call (including replaced ones). */
  added: string[];
  /** Ids deleted by the call and not re-inserted. */
  removed: string[];
  /** Every surviving memory whose community changed, plus every added memory. */
  changed: Map<string, MembershipChange>;
  /** Absorbed community id → the id that absorbed (most of) it, and still exists. */
  mergedCommunities: Map<string, string>;
  /** Community ids created by the call that still exist (new singletons, split-off parts). */
  createdCommunities: string[];
  /** Community that split (keeping its id for the largest part) → ids of the parts split off. */
  splitCommunities: Map<string, string[]>;
  /** Community ids that vanished because all their members were deleted. */
  removedCommunities: string[];
  /**
   * Surviving memories whose candidate list ({@link CommunityGraph.candidates}) changed,
   * added memories included: what a store persisting the lists must rewrite.
   */
  relinked: string[];
}

/** A linked memory and the similarity of the link. */
export interface Neighbour {
  id: string;
  sim: number;
}

/** One undirected link: `[smaller id, larger id, sim]`. */
export type GraphEdge = [string, string, number];

/** Relation extraction recomputed from scratch: links and partition in canonical order. */
export interface GraphSnapshot {
  /** Links sorted by their two ids. */
  edges: GraphEdge[];
  /** Communities as sorted member id lists, ordered by their first id. */
  partition: string[][];
}

/** A memory with its persisted candidate list, for {@link CommunityGraph.restore}. */
export interface RestoredMemory extends GraphMemory {
  /** Its candidate list as {@link CommunityGraph.candidates} returned it (ids not restored are dropped). */
  candidates: readonly Neighbour[];
}

/** Shape of the graph, to judge whether `tau`/`k1` produce one giant component. */
export interface GraphStats {
  /** Stored memories. */
  memories: number;
  /** Undirected edges. */
  edges: number;
  /** Mean number of links per memory. */
  meanDegree: number;
  /** Communities, singletons included. */
  communities: number;
  /** Communities of size 1. */
  singletons: number;
  /** Size of the largest community. */
  largestCommunity: number;
  /** Largest community size / memories (0 when empty). */
  largestShare: number;
  /** Community count per size bucket: `"1"`, `"2"`, `"3-4"`, `"5-8"`, `"9-16"`, … */
  sizeHistogram: Record<string, number>;
}

/** A candidate-list entry. */
interface Cand {
  readonly m: Mem;
  readonly sim: number;
}

interface Mem {
  readonly id: string;
  /** Upload group: an explicit tag (string) or one `addBatch` call's number. */
  readonly batch: string | number;
  /** Assigned by `recluster` before anyone reads it (undefined only while being inserted). */
  community: Comm;
  /** Candidate list `L(x)`: top-k1 of other batches with sim ≥ tau, best first. */
  list: Cand[];
  /** Memories whose candidate list contains this one. */
  readonly rev: Set<Mem>;
  /** Links (mutual candidates) and their similarity. */
  readonly adj: Map<Mem, number>;
  readonly items: string[] | undefined;
  /** BFS visit stamp (compared against an epoch). */
  mark: number;
  alive: boolean;
}

interface Comm {
  readonly id: string;
  /** Creation order, for deterministic tie-breaks (older wins). */
  readonly seq: number;
  readonly members: Set<Mem>;
  /** Bumped on every membership change (caches key on it). */
  version: number;
}

/** Accumulates one call's effects; `finish` turns them into the net change set. */
class OpLog {
  readonly before = new Map<string, string | undefined>();
  readonly added: string[] = [];
  readonly removed: string[] = [];
  readonly created = new Set<string>();
  readonly merged = new Map<string, string>();
  readonly split = new Map<string, string[]>();
  readonly emptied: string[] = [];
  readonly relinked = new Set<Mem>();

  note(m: Mem): void {
    if (!this.before.has(m.id)) this.before.set(m.id, m.community.id);
  }

  noteNew(id: string): void {
    if (!this.before.has(id)) this.before.set(id, undefined);
  }
}

/** The (sim, id) order of candidate lists: higher similarity first, then the smaller id. */
function ranksBefore(simA: number, idA: string, simB: number, idB: string): boolean {
  return simA > simB || (simA === simB && idA < idB);
}

function cmpId(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * Offer `(m, sim)` to the sorted list `list` of at most `k ≥ 1` entries. Returns undefined if
 * it did not enter, null if it entered without pushing anything out, else the entry pushed out.
 */
function offer(list: Cand[], k: number, m: Mem, sim: number): Cand | null | undefined {
  if (list.length >= k) {
    const w = list[list.length - 1];
    if (!ranksBefore(sim, m.id, w.sim, w.m.id)) return undefined;
  }
  let i = list.length;
  while (i > 0 && ranksBefore(sim, m.id, list[i - 1].sim, list[i - 1].m.id)) i--;
  list.splice(i, 0, { m, sim });
  return list.length > k ? list.pop()! : null;
}

/**
 * Size-capped single linkage: links strongest first (ties: smaller ids first) join two groups
 * only if the joined group has at most `cap` members. With `cap ≥` every component's size this
 * is the connected components. Returns one index list per group.
 */
function cappedGroups(n: number, edges: readonly (readonly [number, number, number])[], cap: number): number[][] {
  const parent = new Int32Array(n);
  const size = new Int32Array(n).fill(1);
  for (let i = 0; i < n; i++) parent[i] = i;
  const find = (x: number): number => {
    while (parent[x] !== x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  };
  for (const [a, b] of edges) {
    const ra = find(a);
    const rb = find(b);
    if (ra === rb || size[ra] + size[rb] > cap) continue;
    if (size[ra] < size[rb]) {
      parent[ra] = rb;
      size[rb] += size[ra];
    } else {
      parent[rb] = ra;
      size[ra] += size[rb];
    }
  }
  const groups = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    const r = find(i);
    let g = groups.get(r);
    if (g === undefined) groups.set(r, (g = []));
    g.push(i);
  }
  return [...groups.values()];
}

/** Sort `[a, b, sim]` index edges (a's id < b's id) strongest first, ties by the two ids. */
function sortEdges(edges: [number, number, number][], idOf: (i: number) => string): void {
  edges.sort((x, y) => y[2] - x[2] || cmpId(idOf(x[0]), idOf(y[0])) || cmpId(idOf(x[1]), idOf(y[1])));
}

/** Power-of-two size bucket label: 1, 2, 3-4, 5-8, … */
function bucket(size: number): string {
  if (size <= 2) return String(size);
  let hi = 4;
  while (hi < size) hi *= 2;
  return `${hi / 2 + 1}-${hi}`;
}

/**
 * The community graph: mutual top-k1 relation extraction plus incrementally maintained,
 * size-capped connected components. All methods are synchronous and pure (no I/O); a batch
 * that fails validation changes nothing.
 */
export class CommunityGraph {
  /** Neighbours per memory (mutual top-k1). */
  readonly k1: number;
  /** Minimum link similarity. */
  readonly tau: number;
  /** Largest community (components above it are cut). */
  readonly maxCommunitySize: number;
  /** Without `scanMany`: nearest memories of a new memory that are offered it. */
  readonly reverseCandidates: number;
  private readonly idPrefix: string;
  private readonly createVectorSearch: (dim: number) => VectorSearch;
  private store: VectorSearch | undefined;
  private proto: PrototypeTracker | undefined;
  private readonly mems = new Map<string, Mem>();
  private readonly comms = new Map<string, Comm>();
  private nextSeq = 1;
  private nextBatch = 1;
  private clock = 0;
  private epoch = 0;
  private edgeCount = 0;

  constructor(config: CommunityGraphConfig = {}) {
    const { k1 = 2, tau = 0.5, idPrefix = 'c', maxCommunitySize = DEFAULT_MAX_COMMUNITY_SIZE, reverseCandidates = 32 } = config;
    if (!Number.isInteger(k1) || k1 < 0) throw new RangeError(`k1 must be a non-negative integer, got ${k1}`);
    if (!Number.isFinite(tau) || tau < -1 || tau > 1) throw new RangeError(`tau must be in [-1, 1], got ${tau}`);
    if (!(maxCommunitySize >= 1) || (Number.isFinite(maxCommunitySize) && !Number.isInteger(maxCommunitySize))) {
      throw new RangeError(`maxCommunitySize must be an integer ≥ 1 or Infinity, got ${maxCommunitySize}`);
    }
    if (!Number.isInteger(reverseCandidates) || reverseCandidates < 1) throw new RangeError(`reverseCandidates must be an integer ≥ 1, got ${reverseCandidates}`);
    this.k1 = k1;
    this.tau = tau;
    this.maxCommunitySize = maxCommunitySize;
    this.reverseCandidates = reverseCandidates;
    this.idPrefix = idPrefix;
    this.createVectorSearch = config.createVectorSearch ?? ((dim) => new FlatVectorStore(dim));
  }

  /** Vector dimension, fixed by the first inserted vector (undefined before). */
  get dim(): number | undefined {
    return this.store?.dim;
  }

  /** Number of stored memories. */
  get size(): number {
    return this.mems.size;
  }

  /** Number of communities (singletons included). */
  get communityCount(): number {
    return this.comms.size;
  }

  /** Number of undirected edges. */
  get edgeTotal(): number {
    return this.edgeCount;
  }

  /** Whether memory `id` is stored. */
  has(id: string): boolean {
    return this.mems.has(id);
  }

  /**
   * Throws {@link InvalidUploadError} if `batch` could not be inserted: empty or duplicate ids,
   * wrong dimension (vs. the first vector ever inserted, or the batch's first), non-finite or
   * zero vectors, malformed items or batch tags.
   */
  validate(batch: readonly GraphMemory[]): void {
    const dim = this.dim ?? batch[0]?.vector?.length;
    const seen = new Set<string>();
    batch.forEach((m, i) => {
      if (m === null || typeof m !== 'object') throw new InvalidUploadError(`upload #${i} is not an object`, i);
      if (typeof m.id !== 'string' || m.id.length === 0) throw new InvalidUploadError(`upload #${i} has an empty id`, i);
      if (seen.has(m.id)) throw new InvalidUploadError(`upload #${i}: id "${m.id}" appears twice in one batch`, i);
      seen.add(m.id);
      const v = m.vector;
      if (v === null || typeof v !== 'object' || typeof v.length !== 'number') {
        throw new InvalidUploadError(`upload #${i} ("${m.id}"): vector is missing`, i);
      }
      if (v.length !== dim) {
        throw new InvalidUploadError(`upload #${i} ("${m.id}"): vector has ${v.length} dimensions, expected ${dim}`, i);
      }
      if (v.length === 0) throw new InvalidUploadError(`upload #${i} ("${m.id}"): vector is empty`, i);
      let n = 0;
      for (let j = 0; j < v.length; j++) {
        const x = v[j];
        if (typeof x !== 'number' || !Number.isFinite(x)) {
          throw new InvalidUploadError(`upload #${i} ("${m.id}"): vector[${j}] is ${x}, not a finite number`, i);
        }
        n += x * x;
      }
      if (!(n > 0) || !Number.isFinite(n)) throw new InvalidUploadError(`upload #${i} ("${m.id}"): vector has zero (or overflowing) norm`, i);
      if (m.items !== undefined) {
        if (!Array.isArray(m.items) || m.items.some((it) => typeof it !== 'string' || it.length === 0)) {
          throw new InvalidUploadError(`upload #${i} ("${m.id}"): items must be an array of non-empty strings`, i);
        }
      }
      if (m.batch !== undefined && typeof m.batch !== 'string') throw new InvalidUploadError(`upload #${i} ("${m.id}"): batch must be a string`, i);
    });
  }

  /**
   * Insert one device's batch. Existing ids are replaced (remove + add). Each new memory gets
   * its candidate list among every stored memory of another batch, is offered to the lists it
   * enters (which may push their k1-th entry out), links are re-derived for every changed list,
   * and the affected communities are re-explored. Validation runs first: on error nothing
   * changes.
   */
  addBatch(batch: readonly GraphMemory[]): CommunityChanges {
    this.validate(batch);
    const log = new OpLog();
    if (batch.length === 0) return this.finish(log);
    const vecs = batch.map((m) => normalize(m.vector)); // validated above: cannot throw
    this.ensureStore(vecs[0].length);
    const pairs: [Mem, Mem][] = [];
    const seeds: Mem[] = [];
    const touched = new Set<Comm>();
    const dead = new Set<Mem>();
    for (const m of batch) {
      const old = this.mems.get(m.id);
      if (old !== undefined) dead.add(old);
    }
    if (dead.size > 0) this.drop(dead, log, pairs, seeds, touched);
    const tag = this.nextBatch++;
    const fresh = this.insert(batch, vecs, (m) => m.batch ?? tag, log);
    if (this.k1 > 0) this.extract(fresh, vecs, log, pairs);
    this.relink(pairs, seeds);
    this.recluster(seeds, fresh, touched, log);
    return this.finish(log);
  }

  /**
   * Delete memories (unknown ids are ignored) and their links. The lists they were in are
   * refilled (new links may merge communities) and the affected communities re-explored (a
   * community that fell apart keeps its id for the largest part).
   */
  remove(ids: Iterable<string>): CommunityChanges {
    // why: a bare string is Iterable<string> and would delete memories named by its characters
    if (typeof ids === 'string') throw new TypeError('remove() takes an iterable of ids, not a string');
    const log = new OpLog();
    const dead = new Set<Mem>();
    for (const id of ids) {
      const m = this.mems.get(id);
      if (m !== undefined) dead.add(m);
    }
    if (dead.size === 0) return this.finish(log);
    const pairs: [Mem, Mem][] = [];
    const seeds: Mem[] = [];
    const touched = new Set<Comm>();
    this.drop(dead, log, pairs, seeds, touched);
    this.relink(pairs, seeds);
    this.recluster(seeds, [], touched, log);
    return this.finish(log);
  }

  /**
   * Load memories with their persisted candidate lists into an empty graph, without searching
   * (a restart restores exactly the state that was saved, also with an approximate store).
   * Memories without a `batch` tag each form their own group from then on (so later list
   * refills may link memories that were uploaded together before the restart). Entries below
   * `tau`, beyond `k1`, of an unknown id or of the same group are dropped; a list saved under a
   * smaller `k1` is not extended until it changes.
   */
  restore(memories: readonly RestoredMemory[]): void {
    if (this.mems.size > 0) throw new Error('restore() needs an empty graph');
    this.validate(memories);
    if (memories.length === 0) return;
    const log = new OpLog();
    const vecs = memories.map((m) => normalize(m.vector));
    this.ensureStore(vecs[0].length);
    const fresh = this.insert(memories, vecs, (m) => m.batch ?? this.nextBatch++, log);
    const pairs: [Mem, Mem][] = [];
    if (this.k1 > 0) {
      fresh.forEach((x, i) => {
        const list: Cand[] = [];
        for (const c of memories[i].candidates ?? []) {
          const y = this.mems.get(c.id);
          // why: a list saved under another k1 / tau is cut to this graph's (dropping is safe; nothing is added)
          if (y === undefined || y === x || y.batch === x.batch || !(c.sim >= this.tau) || list.some((e) => e.m === y)) continue;
          offer(list, this.k1, y, c.sim);
        }
        x.list = list;
        for (const e of list) {
          e.m.rev.add(x);
          pairs.push([x, e.m]);
        }
      });
    }
    const seeds: Mem[] = [];
    this.relink(pairs, seeds);
    this.recluster(seeds, fresh, new Set(), log);
  }

  private ensureStore(dim: number): void {
    if (this.store === undefined) {
      this.store = this.createVectorSearch(dim);
      this.proto = new PrototypeTracker(dim);
    }
  }

  /** Store the batch's memories (no lists, no community yet). */
  private insert(batch: readonly GraphMemory[], vecs: Float32Array[], tagOf: (m: GraphMemory) => string | number, log: OpLog): Mem[] {
    const store = this.store!;
    return batch.map((m, i) => {
      store.add(m.id, vecs[i]);
      const mem: Mem = {
        id: m.id,
        batch: tagOf(m),
        community: undefined as unknown as Comm, // assigned by recluster, before anyone reads it
        list: [],
        rev: new Set(),
        adj: new Map(),
        items: m.items === undefined ? undefined : [...new Set(m.items)],
        mark: 0,
        alive: true,
      };
      this.mems.set(m.id, mem);
      log.noteNew(m.id);
      log.added.push(m.id);
      log.relinked.add(mem);
      return mem;
    });
  }

  /**
   * Visit, per query memory, the candidates among the stored memories (another batch, not
   * itself, sim ≥ tau): all of them with `scanMany`, else the `k` nearest by search.
   */
  private visitCandidates(queries: readonly Mem[], vecs: readonly ArrayLike<number>[], k: number, visit: (qi: number, y: Mem, sim: number) => void): void {
    const store = this.store!;
    const scanned = store.scanMany?.(vecs, this.tau, (qi, id, sim) => {
      const y = this.mems.get(id);
      const x = queries[qi];
      if (y === undefined || y === x || y.batch === x.batch) return;
      visit(qi, y, sim);
    });
    if (store.scanMany !== undefined && scanned !== false) return;
    queries.forEach((x, qi) => {
      const ok = (id: string): boolean => {
        const y = this.mems.get(id);
        return y !== undefined && y !== x && y.batch !== x.batch;
      };
      for (const h of store.search(vecs[qi], k, this.tau, ok)) visit(qi, this.mems.get(h.id)!, h.sim);
    });
  }

  /** Candidate lists of the new memories; each is offered to the lists it enters. */
  private extract(fresh: Mem[], vecs: Float32Array[], log: OpLog, pairs: [Mem, Mem][]): void {
    const k1 = this.k1;
    const isFresh = new Set(fresh);
    const lists: Cand[][] = fresh.map(() => []);
    const proposals: [Mem, Mem, number][] = [];
    this.visitCandidates(fresh, vecs, Math.max(k1, this.reverseCandidates), (qi, y, sim) => {
      offer(lists[qi], k1, y, sim);
      // why: a new memory's own list already sees every other new memory
      if (isFresh.has(y)) return;
      const m = fresh[qi];
      const l = y.list;
      if (l.length < k1 || ranksBefore(sim, m.id, l[l.length - 1].sim, l[l.length - 1].m.id)) proposals.push([y, m, sim]);
    });
    for (const [y, m, sim] of proposals) {
      const out = offer(y.list, k1, m, sim);
      if (out === undefined) continue;
      m.rev.add(y);
      pairs.push([y, m]);
      log.relinked.add(y);
      if (out !== null) {
        out.m.rev.delete(y);
        pairs.push([y, out.m]);
      }
    }
    fresh.forEach((m, i) => {
      m.list = lists[i];
      for (const e of m.list) {
        e.m.rev.add(m);
        pairs.push([m, e.m]);
      }
    });
  }

  /** Delete `dead`: their links go, the lists they were in are refilled. */
  private drop(dead: Set<Mem>, log: OpLog, pairs: [Mem, Mem][], seeds: Mem[], touched: Set<Comm>): void {
    const store = this.store!;
    const proto = this.proto!;
    const refill = new Set<Mem>();
    for (const d of dead) {
      log.note(d);
      const c = d.community;
      proto.remove(c.id, this.member(d));
      c.members.delete(d);
      c.version = ++this.clock;
      touched.add(c);
      for (const e of d.list) e.m.rev.delete(d);
      for (const x of d.rev) {
        if (dead.has(x)) continue;
        x.list = x.list.filter((e) => e.m !== d);
        refill.add(x);
      }
      for (const nb of d.adj.keys()) {
        nb.adj.delete(d);
        this.edgeCount--;
        if (!dead.has(nb)) seeds.push(nb);
      }
      d.adj.clear();
      d.alive = false;
      store.remove(d.id);
      this.mems.delete(d.id);
      log.removed.push(d.id);
    }
    if (refill.size === 0 || this.k1 === 0) return;
    const xs = [...refill];
    const lists: Cand[][] = xs.map(() => []);
    this.visitCandidates(xs, xs.map((x) => store.vector(x.id)!), this.k1, (qi, y, sim) => {
      offer(lists[qi], this.k1, y, sim);
    });
    xs.forEach((x, i) => {
      const now = lists[i];
      const was = new Set(x.list.map((e) => e.m));
      const is = new Set(now.map((e) => e.m));
      for (const e of x.list) {
        if (is.has(e.m)) continue;
        e.m.rev.delete(x);
        pairs.push([x, e.m]);
      }
      for (const e of now) {
        if (was.has(e.m)) continue;
        e.m.rev.add(x);
        pairs.push([x, e.m]);
      }
      x.list = now;
      log.relinked.add(x);
    });
  }

  /** Re-derive the link of every pair whose list membership changed; endpoints of changed links become seeds. */
  private relink(pairs: readonly [Mem, Mem][], seeds: Mem[]): void {
    for (const [a, b] of pairs) {
      if (!a.alive || !b.alive || a === b) continue;
      const want = b.rev.has(a) && a.rev.has(b);
      if (want === a.adj.has(b)) continue;
      if (want) {
        const sim = a.list.find((e) => e.m === b)!.sim;
        a.adj.set(b, sim);
        b.adj.set(a, sim);
        this.edgeCount++;
      } else {
        a.adj.delete(b);
        b.adj.delete(a);
        this.edgeCount--;
      }
      seeds.push(a, b);
    }
  }

  /**
   * Re-explore the components holding a seed or a new memory, cut them (size cap), and give
   * each part the id of the old community it shares most members with.
   */
  private recluster(seeds: readonly Mem[], fresh: readonly Mem[], touched: Set<Comm>, log: OpLog): void {
    const proto = this.proto!;
    const isFresh = new Set(fresh);
    const base = ++this.epoch;
    const pieces: Mem[][] = [];
    for (const s of [...seeds, ...fresh]) {
      if (!s.alive || s.mark >= base) continue;
      s.mark = base;
      const comp: Mem[] = [s];
      for (let qi = 0; qi < comp.length; qi++) {
        for (const nb of comp[qi].adj.keys()) {
          if (nb.mark >= base) continue;
          nb.mark = base;
          comp.push(nb);
        }
      }
      if (comp.length <= this.maxCommunitySize) {
        pieces.push(comp);
        continue;
      }
      const idx = new Map<Mem, number>(comp.map((m, i) => [m, i]));
      const edges: [number, number, number][] = [];
      comp.forEach((a, i) => {
        for (const [b, sim] of a.adj) if (a.id < b.id) edges.push([i, idx.get(b)!, sim]);
      });
      sortEdges(edges, (i) => comp[i].id);
      for (const g of cappedGroups(comp.length, edges, this.maxCommunitySize)) pieces.push(g.map((i) => comp[i]));
    }
    // Where each piece member was before this call (a replaced memory: its old instance's community).
    const prevOf = (m: Mem): Comm | undefined => {
      if (!isFresh.has(m)) return m.community;
      const id = log.before.get(m.id);
      return id === undefined ? undefined : this.comms.get(id);
    };
    const triples: { p: number; c: Comm; n: number; first: string }[] = [];
    pieces.forEach((piece, p) => {
      const counts = new Map<Comm, number>();
      let first = piece[0].id;
      for (const m of piece) {
        if (m.id < first) first = m.id;
        const c = prevOf(m);
        if (c === undefined) continue;
        touched.add(c);
        counts.set(c, (counts.get(c) ?? 0) + 1);
      }
      for (const [c, n] of counts) triples.push({ p, c, n, first });
    });
    triples.sort((a, b) => b.n - a.n || a.c.seq - b.c.seq || cmpId(a.first, b.first));
    const target: (Comm | undefined)[] = pieces.map(() => undefined);
    const kept = new Set<Comm>();
    for (const t of triples) {
      if (target[t.p] !== undefined || kept.has(t.c)) continue;
      target[t.p] = t.c;
      kept.add(t.c);
    }
    // Where the members of each touched community went: community → (target → count).
    const went = new Map<Comm, Map<Comm, number>>();
    pieces.forEach((piece, p) => {
      let to = target[p];
      if (to === undefined) {
        to = target[p] = this.newCommunity();
        log.created.add(to.id);
      }
      for (const m of piece) {
        const from = prevOf(m);
        if (from !== undefined) {
          let w = went.get(from);
          if (w === undefined) went.set(from, (w = new Map()));
          w.set(to, (w.get(to) ?? 0) + 1);
        }
        if (isFresh.has(m)) {
          m.community = to;
          to.members.add(m);
          to.version = ++this.clock;
          proto.add(to.id, this.member(m));
        } else if (m.community !== to) {
          proto.remove(m.community.id, this.member(m));
          this.move(m, to, log);
          proto.add(to.id, this.member(m));
        }
      }
    });
    for (const c of touched) {
      const w = went.get(c);
      if (kept.has(c)) {
        const parts = w === undefined ? [] : [...w.keys()].filter((t) => t !== c && log.created.has(t.id)).map((t) => t.id);
        if (parts.length > 0) log.split.set(c.id, parts);
        continue;
      }
      // why: every surviving member of a touched community lies in a re-explored component
      if (c.members.size > 0) throw new Error(`internal: community ${c.id} kept members outside the re-explored components`);
      this.comms.delete(c.id);
      proto.drop(c.id);
      if (w === undefined || w.size === 0) {
        log.emptied.push(c.id);
        continue;
      }
      let best: Comm | undefined;
      for (const [t, n] of w) if (best === undefined || n > w.get(best)! || (n === w.get(best)! && t.seq < best.seq)) best = t;
      log.merged.set(c.id, best!.id);
    }
  }

  private newCommunity(): Comm {
    const seq = this.nextSeq++;
    const c: Comm = { id: `${this.idPrefix}${seq}`, seq, members: new Set(), version: ++this.clock };
    this.comms.set(c.id, c);
    return c;
  }

  /** Relabel one memory (prototype sums are the caller's business). */
  private move(m: Mem, to: Comm, log: OpLog): void {
    log.note(m);
    const from = m.community;
    from.members.delete(m);
    from.version = ++this.clock;
    to.members.add(m);
    to.version = ++this.clock;
    m.community = to;
  }

  private member(m: Mem): PrototypeMember {
    return { vector: this.store!.vector(m.id)!, items: m.items };
  }

  private finish(log: OpLog): CommunityChanges {
    const addedSet = new Set(log.added);
    const changed = new Map<string, MembershipChange>();
    for (const [id, from] of log.before) {
      const m = this.mems.get(id);
      if (m === undefined) continue;
      const to = m.community.id;
      if (from !== to || addedSet.has(id)) changed.set(id, from === undefined ? { to } : { from, to });
    }
    const mergedCommunities = new Map<string, string>();
    for (const [a, b] of log.merged) {
      if (log.created.has(a)) continue;
      let t = b;
      while (log.merged.has(t)) t = log.merged.get(t)!;
      mergedCommunities.set(a, t);
    }
    const splitCommunities = new Map<string, string[]>();
    for (const [orig, parts] of log.split) {
      const alive = parts.filter((p) => this.comms.has(p));
      if (alive.length > 0 && !log.created.has(orig)) splitCommunities.set(orig, alive);
    }
    return {
      added: log.added,
      removed: log.removed.filter((id) => !this.mems.has(id)),
      changed,
      mergedCommunities,
      createdCommunities: [...log.created].filter((id) => this.comms.has(id)),
      splitCommunities,
      removedCommunities: log.emptied.filter((id) => !log.created.has(id)),
      relinked: [...log.relinked].filter((m) => m.alive).map((m) => m.id),
    };
  }

  /** Community id of memory `id`, or undefined for an unknown memory. */
  communityOf(id: string): string | undefined {
    return this.mems.get(id)?.community.id;
  }

  /** Member ids of a community (empty for an unknown id). */
  members(communityId: string): string[] {
    const c = this.comms.get(communityId);
    return c === undefined ? [] : [...c.members].map((m) => m.id);
  }

  /** Member count of a community (0 for an unknown id). */
  communitySize(communityId: string): number {
    return this.comms.get(communityId)?.members.size ?? 0;
  }

  /**
   * A number that changes whenever the community's membership changes (undefined for an
   * unknown id) — a cache key for anything derived from the members.
   */
  communityVersion(communityId: string): number | undefined {
    return this.comms.get(communityId)?.version;
  }

  /** Member count of every community (order unspecified). */
  communitySizes(): number[] {
    return [...this.comms.values()].map((c) => c.members.size);
  }

  /** Every community: id → member ids. */
  communities(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const c of this.comms.values()) out.set(c.id, [...c.members].map((m) => m.id));
    return out;
  }

  /** Linked memories of `id` with link similarities, most similar first (empty if unknown). */
  neighbours(id: string): Neighbour[] {
    const m = this.mems.get(id);
    if (m === undefined) return [];
    return [...m.adj].map(([nb, sim]) => ({ id: nb.id, sim })).sort((a, b) => b.sim - a.sim || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /**
   * The candidate list of `id` (its top-k1 memories of other batches with sim ≥ tau, best
   * first; ties: smaller id first). A link exists where two lists name each other. Empty if unknown.
   */
  candidates(id: string): Neighbour[] {
    return this.mems.get(id)?.list.map((e) => ({ id: e.m.id, sim: e.sim })) ?? [];
  }

  /** Every link as `[smaller id, larger id, sim]`, sorted by the two ids. */
  edges(): GraphEdge[] {
    const out: GraphEdge[] = [];
    for (const a of this.mems.values()) for (const [b, sim] of a.adj) if (a.id < b.id) out.push([a.id, b.id, sim]);
    return out.sort((x, y) => cmpId(x[0], y[0]) || cmpId(x[1], y[1]));
  }

  /** A copy of the stored (normalised) vector of `id`. */
  vector(id: string): Float32Array | undefined {
    return this.mems.has(id) ? this.store!.vector(id)!.slice() : undefined;
  }

  /** The deduplicated items memory `id` was uploaded with (undefined if none or unknown). */
  itemsOf(id: string): readonly string[] | undefined {
    return this.mems.get(id)?.items;
  }

  /**
   * Copies of a community's member vectors in one contiguous buffer (`vectors[i]` belongs to
   * `ids[i]`). Empty for an unknown id.
   */
  memberVectors(communityId: string): { ids: string[]; vectors: Float32Array[] } {
    const c = this.comms.get(communityId);
    if (c === undefined || this.store === undefined) return { ids: [], vectors: [] };
    const d = this.store.dim;
    const buf = new Float32Array(c.members.size * d);
    const ids: string[] = [];
    const vectors: Float32Array[] = [];
    let i = 0;
    for (const m of c.members) {
      buf.set(this.store.vector(m.id)!, i * d);
      ids.push(m.id);
      vectors.push(buf.subarray(i * d, i * d + d));
      i++;
    }
    return { ids, vectors };
  }

  /** Prototype vector `e_k` of a community: normalised mean of its members (undefined if unknown). */
  prototype(communityId: string): Float32Array | undefined {
    return this.comms.has(communityId) ? this.proto!.prototype(communityId) : undefined;
  }

  /**
   * item id → number of members listing it, or undefined when no member uploaded items (or
   * the community is unknown). Exact counts: noise is the releasing index's job.
   */
  itemCounts(communityId: string): Map<string, number> | undefined {
    if (!this.comms.has(communityId)) return undefined;
    const items = this.proto!.items(communityId);
    return items === undefined ? undefined : new Map(items);
  }

  /** Recompute a community's prototype sums from its members (drops accumulated rounding). */
  refreshPrototype(communityId: string): void {
    const c = this.comms.get(communityId);
    if (c !== undefined) this.proto!.recompute(c.id, [...c.members].map((m) => this.member(m)));
  }

  /**
   * The partition recomputed from the stored links alone, ignoring the incremental labels:
   * connected components, each cut by the size cap exactly as the live graph does; member id
   * lists, each sorted, ordered by their first id. Used by tests and tools.
   */
  recomputeAll(): string[][] {
    return this.partitionOf([...this.mems.keys()], this.edges());
  }

  /**
   * Relation extraction recomputed from scratch on the current memories: every candidate list
   * searched anew (one exhaustive scan per memory with an exact store; an approximate store's
   * search otherwise), the mutual links, and the capped components of those links. Reads the
   * state, changes nothing. With an exact store the result equals {@link edges} and the live
   * partition after any sequence of operations (the property test checks it). O(n² · d).
   */
  recomputeFromScratch(): GraphSnapshot {
    const all = [...this.mems.values()];
    const lists = new Map<Mem, Map<Mem, number>>();
    if (this.k1 > 0 && this.store !== undefined) {
      const store = this.store;
      for (let i = 0; i < all.length; i += 256) {
        const xs = all.slice(i, i + 256);
        const found: Cand[][] = xs.map(() => []);
        // why: copies, since views into the store are only valid until its next mutation
        this.visitCandidates(xs, xs.map((x) => store.vector(x.id)!.slice()), this.k1, (qi, y, sim) => {
          offer(found[qi], this.k1, y, sim);
        });
        xs.forEach((x, j) => lists.set(x, new Map(found[j].map((e) => [e.m, e.sim]))));
      }
    }
    const edges: GraphEdge[] = [];
    for (const [x, l] of lists) {
      for (const [y, sim] of l) if (x.id < y.id && lists.get(y)!.has(x)) edges.push([x.id, y.id, sim]);
    }
    edges.sort((x, y) => cmpId(x[0], y[0]) || cmpId(x[1], y[1]));
    return { edges, partition: this.partitionOf(all.map((m) => m.id), edges) };
  }

  /** Capped components of `edges` over `ids`, canonical order. */
  private partitionOf(ids: string[], edges: readonly GraphEdge[]): string[][] {
    const at = new Map(ids.map((id, i) => [id, i]));
    const ix: [number, number, number][] = edges.map(([a, b, sim]) => [at.get(a)!, at.get(b)!, sim]);
    sortEdges(ix, (i) => ids[i]);
    return cappedGroups(ids.length, ix, this.maxCommunitySize)
      .map((g) => g.map((i) => ids[i]).sort())
      .sort((a, b) => cmpId(a[0], b[0]));
  }

  /** Size, edge count, community size histogram. O(communities). */
  stats(): GraphStats {
    const sizeHistogram: Record<string, number> = {};
    let largest = 0;
    let singletons = 0;
    // Insert bucket keys in increasing order so the histogram reads naturally.
    const sizes = this.communitySizes().sort((a, b) => a - b);
    for (const s of sizes) {
      const b = bucket(s);
      sizeHistogram[b] = (sizeHistogram[b] ?? 0) + 1;
      if (s > largest) largest = s;
      if (s === 1) singletons++;
    }
    const n = this.mems.size;
    return {
      memories: n,
      edges: this.edgeCount,
      meanDegree: n === 0 ? 0 : (2 * this.edgeCount) / n,
      communities: this.comms.size,
      singletons,
      largestCommunity: largest,
      largestShare: n === 0 ? 0 : largest / n,
      sizeHistogram,
    };
  }
}
