/**
 * STEAM's relation extraction and incremental community exploration. Pure, no I/O.
 *
 * - Relation extraction: each new memory links to its top-`k1` existing memories by cosine with
 *   `sim ≥ tau`, never to a memory of its own batch (one batch = one device's upload). Edges are
 *   undirected and keep their similarity.
 * - Communities are the connected components of the edge graph. They are maintained
 *   incrementally: an insert can only merge components (BFS from the batch memories relabels the
 *   absorbed ones, each relabelled memory enqueueing its first-order neighbours, so merges
 *   cascade); a removal can only split the removed memories' components (BFS from their former
 *   neighbours, stopping as soon as all of them are reached again).
 * - Ids are stable and deterministic (`c1`, `c2`, … from a counter): on a merge the larger
 *   community keeps its id (ties: the older one), on a split the largest part keeps it.
 */

import { normalize } from '../core/vector.js';
import { InvalidUploadError } from './errors.js';
import { PrototypeTracker, type PrototypeMember } from './prototype.js';
import { FlatVectorStore, type VectorHit, type VectorSearch } from './vectors.js';

/** Graph configuration. Defaults are the STEAM paper's best settings. */
export interface CommunityGraphConfig {
  /** Neighbours per new memory (top-k1). Default 2. 0 disables linking. */
  k1?: number;
  /** Minimum cosine similarity of a link. Default 0.5. */
  tau?: number;
  /** Prefix of generated community ids. Default `"c"` (ids `c1`, `c2`, …). */
  idPrefix?: string;
  /** Vector index factory (called once, with the dimension of the first vector). Default: exact {@link FlatVectorStore}. */
  createVectorSearch?: (dim: number) => VectorSearch;
}

/** One memory to insert. */
export interface GraphMemory {
  /** Unique, non-empty id. Inserting an existing id replaces that memory. */
  id: string;
  /** Embedding; normalised on insert (a copy is stored). */
  vector: ArrayLike<number>;
  /** Catalog item ids of the memory's interactions (privacy level `items`); deduplicated. */
  items?: readonly string[];
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
  /** Absorbed community id → the id that absorbed it (and still exists). */
  mergedCommunities: Map<string, string>;
  /** Community ids created by the call that still exist (new singletons, split-off parts). */
  createdCommunities: string[];
  /** Community that split (keeping its id for the largest part) → ids of the parts split off. */
  splitCommunities: Map<string, string[]>;
  /** Community ids that vanished because all their members were deleted. */
  removedCommunities: string[];
}

/** A linked memory and the similarity of the link. */
export interface Neighbour {
  id: string;
  sim: number;
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

interface Mem {
  readonly id: string;
  community: Comm;
  readonly adj: Map<Mem, number>;
  readonly items: string[] | undefined;
  /** BFS visit stamp (compared against an epoch). */
  mark: number;
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

  note(m: Mem): void {
    if (!this.before.has(m.id)) this.before.set(m.id, m.community.id);
  }

  noteNew(id: string): void {
    if (!this.before.has(id)) this.before.set(id, undefined);
  }
}

/** Power-of-two size bucket label: 1, 2, 3-4, 5-8, … */
function bucket(size: number): string {
  if (size <= 2) return String(size);
  let hi = 4;
  while (hi < size) hi *= 2;
  return `${hi / 2 + 1}-${hi}`;
}

/**
 * The community graph: relation extraction plus incrementally maintained connected components.
 * All methods are synchronous and pure (no I/O); a batch that fails validation changes nothing.
 */
export class CommunityGraph {
  /** Neighbours per new memory. */
  readonly k1: number;
  /** Minimum link similarity. */
  readonly tau: number;
  private readonly idPrefix: string;
  private readonly createVectorSearch: (dim: number) => VectorSearch;
  private store: VectorSearch | undefined;
  private proto: PrototypeTracker | undefined;
  private readonly mems = new Map<string, Mem>();
  private readonly comms = new Map<string, Comm>();
  private nextSeq = 1;
  private clock = 0;
  private epoch = 0;
  private edgeCount = 0;

  constructor(config: CommunityGraphConfig = {}) {
    const { k1 = 2, tau = 0.5, idPrefix = 'c' } = config;
    if (!Number.isInteger(k1) || k1 < 0) throw new RangeError(`k1 must be a non-negative integer, got ${k1}`);
    if (!Number.isFinite(tau) || tau < -1 || tau > 1) throw new RangeError(`tau must be in [-1, 1], got ${tau}`);
    this.k1 = k1;
    this.tau = tau;
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
   * zero vectors, malformed items.
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
    });
  }

  /**
   * Insert one device's batch. Existing ids are replaced (remove + add). Each new memory links
   * to its top-`k1` neighbours with `sim ≥ tau` among the memories stored *before* this batch,
   * then affected communities are merged. Validation runs first: on error nothing changes.
   */
  addBatch(batch: readonly GraphMemory[]): CommunityChanges {
    this.validate(batch);
    const log = new OpLog();
    if (batch.length === 0) return this.finish(log);
    const dim = batch[0].vector.length;
    const vecs = batch.map((m) => normalize(m.vector)); // validated above: cannot throw
    if (this.store === undefined) {
      this.store = this.createVectorSearch(dim);
      this.proto = new PrototypeTracker(dim);
    }
    const store = this.store;
    const proto = this.proto!;

    const replaced = batch.filter((m) => this.mems.has(m.id)).map((m) => m.id);
    if (replaced.length > 0) this.removeInternal(replaced, log);

    // Relation extraction against the pre-batch store: same-batch memories are not stored yet,
    // so they can never be linked to each other.
    let hits: VectorHit[][];
    if (this.k1 === 0 || store.size === 0) hits = vecs.map(() => []);
    else if (store.searchMany) hits = store.searchMany(vecs, this.k1, this.tau);
    else hits = vecs.map((v) => store.search(v, this.k1, this.tau));

    const fresh: Mem[] = [];
    batch.forEach((m, i) => {
      store.add(m.id, vecs[i]);
      const mem: Mem = {
        id: m.id,
        community: undefined as unknown as Comm, // assigned below, before anyone reads it
        adj: new Map(),
        items: m.items === undefined ? undefined : [...new Set(m.items)],
        mark: 0,
      };
      this.mems.set(m.id, mem);
      log.noteNew(m.id);
      log.added.push(m.id);
      fresh.push(mem);
    });
    fresh.forEach((m, i) => {
      for (const h of hits[i]) {
        const nb = this.mems.get(h.id);
        if (nb === undefined || nb === m) continue;
        m.adj.set(nb, h.sim);
        nb.adj.set(m, h.sim);
        this.edgeCount++;
      }
    });

    // Which existing communities does the batch join together? (union-find over communities)
    const parent = new Map<Comm, Comm>();
    const find = (c: Comm): Comm => {
      let r = c;
      while (parent.get(r) !== r) r = parent.get(r)!;
      while (c !== r) {
        const p = parent.get(c)!;
        parent.set(c, r);
        c = p;
      }
      return r;
    };
    for (const m of fresh) {
      let first: Comm | undefined;
      for (const nb of m.adj.keys()) {
        const c = nb.community;
        if (!parent.has(c)) parent.set(c, c);
        if (first === undefined) first = c;
        else {
          const a = find(first);
          const b = find(c);
          if (a !== b) parent.set(b, a);
        }
      }
    }
    // The largest community of each group keeps its id (ties: the older one).
    const winner = new Map<Comm, Comm>();
    for (const c of parent.keys()) {
      const r = find(c);
      const w = winner.get(r);
      if (w === undefined || c.members.size > w.members.size || (c.members.size === w.members.size && c.seq < w.seq)) {
        winner.set(r, c);
      }
    }

    for (const m of fresh) {
      let target: Comm;
      const firstNb = m.adj.keys().next();
      if (firstNb.done) {
        target = this.newCommunity();
        log.created.add(target.id);
      } else {
        target = winner.get(find(firstNb.value.community))!;
      }
      m.community = target;
      target.members.add(m);
      target.version = ++this.clock;
      proto.add(target.id, this.member(m));
    }

    // BFS from the batch: a memory whose label differs from its neighbour's final label is
    // relabelled and enqueues its own neighbours, so one bridging memory merges whole components.
    const queue: Mem[] = fresh.filter((m) => m.adj.size > 0);
    for (let qi = 0; qi < queue.length; qi++) {
      const x = queue[qi];
      for (const nb of x.adj.keys()) {
        if (nb.community !== x.community) {
          this.move(nb, x.community, log);
          queue.push(nb);
        }
      }
    }
    for (const c of parent.keys()) {
      const w = winner.get(find(c))!;
      if (c === w) continue;
      // Components are connected, so BFS emptied every absorbed community; this is a guard.
      for (const m of [...c.members]) this.move(m, w, log);
      proto.absorb(w.id, c.id);
      this.comms.delete(c.id);
      log.merged.set(c.id, w.id);
    }
    return this.finish(log);
  }

  /**
   * Delete memories (unknown ids are ignored) and their edges. Each affected community is
   * re-explored from the deleted memories' former neighbours; if it fell apart, the largest
   * part keeps its id and the others get new ids.
   */
  remove(ids: Iterable<string>): CommunityChanges {
    // why: a bare string is Iterable<string> and would delete memories named by its characters
    if (typeof ids === 'string') throw new TypeError('remove() takes an iterable of ids, not a string');
    const log = new OpLog();
    this.removeInternal(ids, log);
    return this.finish(log);
  }

  private removeInternal(ids: Iterable<string>, log: OpLog): void {
    const dead = new Set<Mem>();
    for (const id of ids) {
      const m = this.mems.get(id);
      if (m !== undefined) dead.add(m);
    }
    if (dead.size === 0) return;
    const store = this.store!;
    const proto = this.proto!;
    const seedsBy = new Map<Comm, Mem[]>();
    for (const m of dead) {
      log.note(m);
      const c = m.community;
      proto.remove(c.id, this.member(m));
      c.members.delete(m);
      c.version = ++this.clock;
      let seeds = seedsBy.get(c);
      if (seeds === undefined) seedsBy.set(c, (seeds = []));
      for (const nb of m.adj.keys()) {
        nb.adj.delete(m);
        this.edgeCount--;
        if (!dead.has(nb)) seeds.push(nb);
      }
      m.adj.clear();
      store.remove(m.id);
      this.mems.delete(m.id);
      log.removed.push(m.id);
    }
    for (const [c, seeds] of seedsBy) {
      if (c.members.size === 0) {
        this.comms.delete(c.id);
        proto.drop(c.id);
        log.emptied.push(c.id);
      } else {
        this.splitIfNeeded(c, seeds, log);
      }
    }
  }

  /**
   * `c` lost members; `seeds` are their surviving former neighbours (every remaining part of
   * `c` contains one). BFS from the first seed stops as soon as all seeds are reached again (no
   * split, usually after a few hops); otherwise each unreached seed's part is explored fully.
   */
  private splitIfNeeded(c: Comm, seeds: Mem[], log: OpLog): void {
    const seedSet = new Set(seeds);
    if (seedSet.size <= 1) return;
    const base = ++this.epoch;
    const first = seeds[0];
    first.mark = base;
    const part0: Mem[] = [first];
    let found = 1;
    for (let qi = 0; qi < part0.length; qi++) {
      for (const nb of part0[qi].adj.keys()) {
        if (nb.mark >= base) continue;
        nb.mark = base;
        part0.push(nb);
        if (seedSet.has(nb) && ++found === seedSet.size) return; // all seeds still connected
      }
    }
    const parts: Mem[][] = [part0];
    for (const s of seedSet) {
      if (s.mark >= base) continue;
      const e = ++this.epoch;
      s.mark = e;
      const part: Mem[] = [s];
      for (let qi = 0; qi < part.length; qi++) {
        for (const nb of part[qi].adj.keys()) {
          if (nb.mark >= base) continue;
          nb.mark = e;
          part.push(nb);
        }
      }
      parts.push(part);
    }
    if (parts.length === 1) return;
    let keep = 0;
    for (let i = 1; i < parts.length; i++) if (parts[i].length > parts[keep].length) keep = i;
    const splitOff: string[] = [];
    parts.forEach((part, i) => {
      if (i === keep) return;
      const nc = this.newCommunity();
      log.created.add(nc.id);
      splitOff.push(nc.id);
      for (const m of part) this.move(m, nc, log);
      this.proto!.split(c.id, nc.id, part.map((m) => this.member(m)));
    });
    log.split.set(c.id, [...(log.split.get(c.id) ?? []), ...splitOff]);
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
   * The partition recomputed from scratch by BFS over every stored edge, ignoring the
   * incremental labels: member id lists, each sorted, ordered by their first id. Used by tests
   * and for crash recovery.
   */
  recomputeAll(): string[][] {
    const base = ++this.epoch;
    const parts: string[][] = [];
    for (const start of this.mems.values()) {
      if (start.mark >= base) continue;
      start.mark = base;
      const queue: Mem[] = [start];
      for (let qi = 0; qi < queue.length; qi++) {
        for (const nb of queue[qi].adj.keys()) {
          if (nb.mark >= base) continue;
          nb.mark = base;
          queue.push(nb);
        }
      }
      parts.push(queue.map((m) => m.id).sort());
    }
    return parts.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
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
