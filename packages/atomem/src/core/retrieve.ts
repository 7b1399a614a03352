/**
 * STEAM's local-to-global retrieval: top-k2 own memories with sim ≥ tau to a query, then the
 * communities those memories are linked to (the release's item-space communities each memory
 * matched on the device, see `MemoryAgent.useRelease`).
 */
import type { AtomemConfig } from './config.js';
import type { AtomicMemory } from './types.js';
import { dot } from './vector.js';

/** One retrieved own memory. */
export interface Retrieved {
  memory: AtomicMemory;
  similarity: number;
}

/** One community of a release (protocol v2) as ranking reads it. */
interface CommunityView {
  /** Community id of the release. */
  id: string;
  /** Estimated contributors (rounded). */
  size: number;
  /** Prototype: normalised mean of the community's item vectors. */
  prototype: Float32Array;
  /** Item → the release's estimated count of reports in this community. */
  items?: Record<string, number>;
}

/** A community as the device knows it: the release's view plus a summary written on device. */
export interface KnownCommunity {
  view: CommunityView;
  /** Written by the reasoner from the community's items (or nearest catalog items). */
  summary: string;
  /** Sum of `view.items` counts (cached). */
  itemTotal: number;
}

/** Global context for retrieval: own memory id → its communities. */
export interface CommunityContext {
  byMemory: Map<string, KnownCommunity[]>;
  /** Item → share of the release's popularity estimates (LDP estimates over all reports of the epoch): the ranker's `popularity` signal. */
  itemShares?: ReadonlyMap<string, number>;
}

/** Top-`k` memories by cosine to `query` with similarity ≥ `tau`, best first. `sims`: each memory's `dot(vector, query)`, when already summed. */
export function retrieveOwn(memories: readonly AtomicMemory[], query: Float32Array, k: number, tau: number, sims?: ArrayLike<number>): Retrieved[] {
  const out: Retrieved[] = [];
  for (let i = 0; i < memories.length; i++) {
    const m = memories[i];
    const s = sims ? sims[i] : dot(m.embedding.vector, query);
    if (s < tau) continue;
    if (out.length < k) {
      out.push({ memory: m, similarity: s });
      out.sort((a, b) => b.similarity - a.similarity);
    } else if (s > out[out.length - 1].similarity) {
      out[out.length - 1] = { memory: m, similarity: s };
      out.sort((a, b) => b.similarity - a.similarity);
    }
  }
  return out;
}

/** The full local-to-global chain for one query. */
export interface RetrievalResult {
  own: Retrieved[];
  /** Communities of the retrieved memories (deduplicated), with the memory that led there. */
  communities: { community: KnownCommunity; via: Retrieved }[];
}

/** Local to global: own memories, then their prototypes and communities. */
export function retrieve(
  memories: readonly AtomicMemory[],
  query: Float32Array,
  cfg: Pick<AtomemConfig, 'k2' | 'tau'>,
  ctx?: CommunityContext,
  sims?: ArrayLike<number>,
): RetrievalResult {
  const own = retrieveOwn(memories, query, cfg.k2, cfg.tau, sims);
  const communities: RetrievalResult['communities'] = [];
  if (ctx) {
    const seen = new Set<string>();
    for (const r of own) {
      for (const c of ctx.byMemory.get(r.memory.id) ?? []) {
        if (seen.has(c.view.id)) continue;
        seen.add(c.view.id);
        communities.push({ community: c, via: r });
      }
    }
  }
  return { own, communities };
}
