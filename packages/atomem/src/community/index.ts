/**
 * Community module: relation extraction, incremental communities, prototypes, and an
 * in-process {@link SharedIndex}. Pure (no I/O, no network): the networked service reuses it.
 */

import { dot } from '../core/vector.js';
import { InvalidUploadError } from './errors.js';
import {
  CommunityGraph,
  type CommunityChanges,
  type CommunityGraphConfig,
  type GraphEdge,
  type GraphMemory,
  type GraphSnapshot,
  type GraphStats,
  type MembershipChange,
  type Neighbour,
  type RestoredMemory,
  DEFAULT_MAX_COMMUNITY_SIZE,
} from './graph.js';
import { laplace, noisyCounts } from './noise.js';
import { PrototypeTracker, aggregateItems, prototypeOf, type PrototypeMember } from './prototype.js';
import type { CommunityView, SharedIndex, SharedMemoryUpload } from './types.js';
import { FlatVectorStore, type VectorHit, type VectorSearch } from './vectors.js';

/** Shared-index contracts: what a device uploads and what the index releases. */
export type { CommunityView, SharedIndex, SharedMemoryUpload };
/** Graph types: configuration, inserted memories, change sets, links, shape statistics. */
export type { CommunityChanges, CommunityGraphConfig, GraphEdge, GraphMemory, GraphSnapshot, GraphStats, MembershipChange, Neighbour, RestoredMemory };
/** Vector search types: one hit, and the interface an approximate index (HNSW) implements. */
export type { VectorHit, VectorSearch, PrototypeMember };
/** Mutual top-k1 relation extraction + incrementally maintained, size-capped components with stable ids. */
export { CommunityGraph, DEFAULT_MAX_COMMUNITY_SIZE };
/** Exact flat top-k cosine store (contiguous Float32Array, doubling growth, swap-remove). */
export { FlatVectorStore };
/** Running per-community vector sums and item counts behind prototypes. */
export { PrototypeTracker };
/** From scratch: normalised mean of vectors. */
export { prototypeOf };
/** From scratch: item id → number of lists containing it (undefined if no list). */
export { aggregateItems };
/** Deterministic (seed, key) Laplace sample. */
export { laplace };
/** Noisy, clipped, ≤0-dropped release of item counts. */
export { noisyCounts };
/** Bad input to the index or graph (the service maps it to HTTP 400). */
export { InvalidUploadError };

/** Options of {@link createInProcessIndex}. */
export interface InProcessIndexOptions {
  /** The only embedder id accepted, e.g. `use-lite@1.3.3/float32`. */
  embedderId: string;
  /** Links per memory: mutual top-k1 (STEAM `k1`). Default 2. */
  k1?: number;
  /** Minimum link similarity (STEAM `tau`). Default 0.5. */
  tau?: number;
  /** Largest community (bigger components are cut, strongest links kept). Default {@link DEFAULT_MAX_COMMUNITY_SIZE}. */
  maxCommunitySize?: number;
  /** Approximate vector stores only: nearest memories of a new memory offered it (see {@link CommunityGraphConfig.reverseCandidates}). Default 32. */
  reverseCandidates?: number;
  /** k-anonymity: communities smaller than this are never released. Default 3. */
  minCommunitySize?: number;
  /** Laplace scale `b` of the noise added to released item counts. Default 0 (exact counts). */
  itemNoise?: number;
  /** Seed of the item-count noise. Default 0. */
  seed?: number;
  /**
   * Cap on member vectors released per community (the most similar to the asker's own
   * memories in it are kept). Default: no cap. Useful when a giant component forms.
   */
  maxMembers?: number;
  /**
   * Which members to release when a community has more than `maxMembers`: `similar` (the
   * ones closest to the asker's own memories) or `sample` (an even, deterministic sample of
   * the whole community: an unbiased picture of its interests). Default `similar`.
   */
  memberSelection?: 'similar' | 'sample';
  /**
   * STEAM's community exploration walks at most this many hops from a memory. When set, each
   * own memory gets its own view: the members within `hops` links of it (its local
   * community), released only with ≥ `minCommunitySize` members other than the asker's.
   * Default: undefined = the whole connected component.
   */
  hops?: number;
  /** Vector index factory for the graph. Default: exact {@link FlatVectorStore}. */
  createVectorSearch?: (dim: number) => VectorSearch;
}

/** {@link GraphStats} plus what the index would release. */
export interface IndexStats extends GraphStats {
  /** Vector dimension (undefined before the first upload). */
  dim: number | undefined;
  /** Communities with ≥ `minCommunitySize` members. */
  releasableCommunities: number;
  /** Memories in releasable communities. */
  releasableMemories: number;
}

/**
 * An in-process shared index. The async {@link SharedIndex} methods wrap the synchronous ones;
 * the benchmark calls the synchronous ones directly.
 */
export interface InProcessIndex extends SharedIndex {
  /** The underlying graph (read it, do not mutate it behind the index's back). */
  readonly graph: CommunityGraph;
  /** Vector dimension, fixed by the first accepted vector (undefined before). */
  readonly dim: number | undefined;
  /** Validate the whole batch, then insert it; throws {@link InvalidUploadError} with state unchanged. */
  upsertSync(batch: readonly SharedMemoryUpload[]): CommunityChanges;
  /** Remove memories (unknown ids ignored). */
  deleteSync(ids: readonly string[]): CommunityChanges;
  /**
   * Load memories with their persisted candidate lists into an empty index without searching
   * (see {@link CommunityGraph.restore}); validates like `upsertSync`.
   */
  restoreSync(batch: readonly (SharedMemoryUpload & { candidates: readonly Neighbour[] })[]): void;
  /**
   * Communities with ≥ `minCommunitySize` members that contain any of `ownIds`, in order of
   * first appearance in `ownIds`. Member vectors and prototypes may be shared between calls
   * (cached per community version): treat them as read-only.
   */
  communitiesSync(ownIds: readonly string[]): CommunityView[];
  /** Graph shape and releasable share. */
  stats(): IndexStats;
}

interface CachedCommunity {
  version: number;
  ids: string[];
  vectors: Float32Array[];
  prototype: Float32Array;
  items: Record<string, number> | undefined;
}

/**
 * Create an in-process {@link SharedIndex} over a {@link CommunityGraph}: validates uploads
 * (embedder id, dimension, finite values, ids), normalises vectors, and releases only
 * communities with at least `minCommunitySize` members, with the asker's own vectors left out
 * and item counts noised.
 */
export function createInProcessIndex(options: InProcessIndexOptions): InProcessIndex {
  const { embedderId, minCommunitySize = 3, itemNoise = 0, seed = 0, maxMembers = Infinity } = options;
  if (typeof embedderId !== 'string' || embedderId.length === 0) throw new TypeError('embedderId must be a non-empty string');
  if (!Number.isInteger(minCommunitySize) || minCommunitySize < 1) throw new RangeError(`minCommunitySize must be an integer ≥ 1, got ${minCommunitySize}`);
  if (!Number.isFinite(itemNoise) || itemNoise < 0) throw new RangeError(`itemNoise must be a finite number ≥ 0, got ${itemNoise}`);
  if (!(maxMembers >= 0)) throw new RangeError(`maxMembers must be ≥ 0, got ${maxMembers}`);
  const graph = new CommunityGraph({
    k1: options.k1,
    tau: options.tau,
    maxCommunitySize: options.maxCommunitySize,
    reverseCandidates: options.reverseCandidates,
    createVectorSearch: options.createVectorSearch,
  });
  const cache = new Map<string, CachedCommunity>();

  const validate = (batch: readonly SharedMemoryUpload[]): void => {
    if (!Array.isArray(batch)) throw new InvalidUploadError('batch must be an array of uploads');
    batch.forEach((u, i) => {
      if (u === null || typeof u !== 'object') throw new InvalidUploadError(`upload #${i} is not an object`, i);
      if (u.embedderId !== embedderId) {
        throw new InvalidUploadError(
          `upload #${i} ("${String(u.id)}") was embedded with "${String(u.embedderId)}", but this index accepts only "${embedderId}"`,
          i,
        );
      }
      if (!(u.vector instanceof Float32Array)) throw new InvalidUploadError(`upload #${i} ("${String(u.id)}"): vector must be a Float32Array`, i);
    });
    graph.validate(batch);
  };

  const view = (communityId: string): CachedCommunity => {
    const version = graph.communityVersion(communityId)!;
    const hit = cache.get(communityId);
    if (hit !== undefined && hit.version === version) return hit;
    const { ids, vectors } = graph.memberVectors(communityId);
    const counts = graph.itemCounts(communityId);
    const entry: CachedCommunity = {
      version,
      ids,
      vectors,
      prototype: graph.prototype(communityId)!,
      // why: keyed by version, so repeated questions about one state get the same noise
      items: counts === undefined ? undefined : noisyCounts(counts, itemNoise, seed, `${communityId}@${version}`),
    };
    cache.set(communityId, entry);
    return entry;
  };

  const pruneCache = (): void => {
    if (cache.size <= 2 * graph.communityCount + 64) return;
    for (const id of cache.keys()) if (graph.communityVersion(id) === undefined) cache.delete(id);
  };

  /** One view per own memory: its ≤ `hops` neighbourhood, own memories excluded. */
  const local = (ownIds: readonly string[], hops: number): CommunityView[] => {
    const own = new Set(ownIds);
    const out: CommunityView[] = [];
    for (const id of own) {
      const cid = graph.communityOf(id);
      if (cid === undefined) continue;
      const seen = new Set<string>([id]);
      let frontier = [id];
      for (let h = 0; h < hops && frontier.length; h++) {
        const next: string[] = [];
        for (const x of frontier) {
          for (const n of graph.neighbours(x)) {
            if (seen.has(n.id)) continue;
            seen.add(n.id);
            next.push(n.id);
          }
        }
        frontier = next;
      }
      const others = [...seen].filter((m) => !own.has(m)).sort();
      if (others.length < minCommunitySize) continue;
      const q = graph.vector(id)!;
      let vectors = others.map((m) => graph.vector(m)!);
      if (vectors.length > maxMembers) {
        vectors = vectors
          .map((v, i) => ({ v, i, s: dot(v, q) }))
          .sort((a, b) => b.s - a.s || a.i - b.i)
          .slice(0, maxMembers)
          .map((e) => e.v);
      }
      const counts = aggregateItems(others.map((m) => graph.itemsOf(m)));
      const cv: CommunityView = {
        id: `${cid}/${id}`,
        size: others.length + 1,
        prototype: prototypeOf(others.map((m) => graph.vector(m)!)),
        members: vectors,
        ownIds: [id],
      };
      if (counts !== undefined) cv.items = itemNoise > 0 ? noisyCounts(counts, itemNoise, seed, `${id}\u0000${others.join(',')}`) : Object.fromEntries(counts);
      out.push(cv);
    }
    return out;
  };

  // Inverted index item → memories that shared it (level `items`), for `related`.
  const byItem = new Map<string, Set<string>>();
  const indexItems = (id: string, items: readonly string[] | undefined) => {
    for (const it of new Set(items ?? [])) {
      let set = byItem.get(it);
      if (!set) byItem.set(it, (set = new Set()));
      set.add(id);
    }
  };
  const unindexItems = (id: string) => {
    for (const it of graph.itemsOf(id) ?? []) {
      const set = byItem.get(it);
      set?.delete(id);
      if (set && set.size === 0) byItem.delete(it);
    }
  };
  /** Items of the community's members that share items with the asker's own memories. */
  const related = (cid: string, own: readonly string[], exclude: ReadonlySet<string>): Record<string, number> | undefined => {
    const overlap = new Map<string, number>();
    for (const it of new Set(own.flatMap((id) => graph.itemsOf(id) ?? []))) {
      for (const m of byItem.get(it) ?? []) {
        if (exclude.has(m) || graph.communityOf(m) !== cid) continue;
        overlap.set(m, (overlap.get(m) ?? 0) + 1);
      }
    }
    if (overlap.size < minCommunitySize) return undefined;
    const counts = new Map<string, number>();
    for (const [m, w] of overlap) {
      const items = graph.itemsOf(m) ?? [];
      // why: capped at 1 per member and item, the sensitivity the Laplace noise assumes.
      const weight = Math.min(1, w / Math.sqrt(items.length));
      for (const it of new Set(items)) counts.set(it, (counts.get(it) ?? 0) + weight);
    }
    return itemNoise > 0 ? noisyCounts(counts, itemNoise, seed, `related\u0000${cid}\u0000${[...overlap.keys()].sort().join(',')}`) : Object.fromEntries(counts);
  };

  const index: InProcessIndex = {
    embedderId,
    graph,
    get dim() {
      return graph.dim;
    },
    upsertSync(batch) {
      validate(batch);
      for (const u of batch) if (graph.has(u.id)) unindexItems(u.id);
      const changes = graph.addBatch(batch);
      for (const u of batch) indexItems(u.id, u.items);
      pruneCache();
      return changes;
    },
    deleteSync(ids) {
      if (!Array.isArray(ids)) throw new InvalidUploadError('ids must be an array of strings');
      const valid = ids.filter((id) => typeof id === 'string');
      for (const id of valid) if (graph.has(id)) unindexItems(id);
      const changes = graph.remove(valid);
      pruneCache();
      return changes;
    },
    restoreSync(batch) {
      validate(batch);
      graph.restore(batch);
      for (const u of batch) indexItems(u.id, u.items);
      cache.clear();
    },
    communitiesSync(ownIds) {
      if (options.hops !== undefined) return local(ownIds, options.hops);
      const byCommunity = new Map<string, string[]>();
      const seen = new Set<string>();
      for (const id of ownIds) {
        if (seen.has(id)) continue;
        seen.add(id);
        const c = graph.communityOf(id);
        if (c === undefined || graph.communitySize(c) < minCommunitySize) continue;
        const list = byCommunity.get(c);
        if (list === undefined) byCommunity.set(c, [id]);
        else list.push(id);
      }
      const out: CommunityView[] = [];
      for (const [cid, own] of byCommunity) {
        const v = view(cid);
        const ownSet = new Set(own);
        let members: Float32Array[] = [];
        const otherIdx: number[] = [];
        for (let i = 0; i < v.ids.length; i++) if (!ownSet.has(v.ids[i])) otherIdx.push(i);
        if (otherIdx.length > maxMembers && options.memberSelection === 'sample') {
          const step = otherIdx.length / maxMembers;
          members = Array.from({ length: maxMembers }, (_, j) => v.vectors[otherIdx[Math.floor(j * step)]]);
        } else if (otherIdx.length > maxMembers) {
          // Keep the members most similar to the centroid of the asker's own memories in the
          // community (one dot product per member: cheap even for a giant community).
          const pos = new Map(v.ids.map((id, i) => [id, i]));
          const centroid = new Float32Array(v.prototype.length);
          for (const id of own) {
            const vec = v.vectors[pos.get(id)!];
            for (let d = 0; d < centroid.length; d++) centroid[d] += vec[d];
          }
          const scored = otherIdx.map((i) => ({ i, s: dot(v.vectors[i], centroid) }));
          scored.sort((a, b) => b.s - a.s || a.i - b.i);
          members = scored.slice(0, maxMembers).map((e) => v.vectors[e.i]);
        } else {
          members = otherIdx.map((i) => v.vectors[i]);
        }
        const cv: CommunityView = { id: cid, size: v.ids.length, prototype: v.prototype, members, ownIds: own };
        if (v.items !== undefined) {
          cv.items = { ...v.items };
          const rel = related(cid, own, ownSet);
          if (rel) cv.related = rel;
        }
        out.push(cv);
      }
      return out;
    },
    stats() {
      const s = graph.stats();
      let releasableCommunities = 0;
      let releasableMemories = 0;
      for (const size of graph.communitySizes()) {
        if (size >= minCommunitySize) {
          releasableCommunities++;
          releasableMemories += size;
        }
      }
      return { ...s, dim: graph.dim, releasableCommunities, releasableMemories };
    },
    async upsert(batch) {
      index.upsertSync(batch);
    },
    async delete(ids) {
      index.deleteSync(ids);
    },
    async communities(ownIds) {
      return index.communitiesSync(ownIds);
    },
  };
  return index;
}
