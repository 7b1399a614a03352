/**
 * The v2 release (pure, no I/O): communities over the shop's public item space, the epoch's
 * aggregate built from a {@link ReportHistogram}, and the device-side local matching of
 * memories to the released prototypes.
 *
 * Nothing here reads a shopper's record: a community is a cluster of catalog items (public),
 * its prototype the normalised mean of their vectors (public), and its statistics the LDP
 * estimates of the epoch's reports (ε-DP per shopper per epoch, by post-processing).
 */
import { dot } from '../core/vector.js';
import { encodeVector, decodeVector } from '../protocol/index-v2.js';
import type { LdpParams, Release, ReleaseCommunity } from '../protocol/index-v2.js';
import { estimateCounts, type ReportHistogram } from './ldp.js';
import { prototypeOf } from './prototype.js';

/** A public item space: catalog item ids with their vectors, in one embedder's space. */
export interface ItemSpace {
  embedderId: string;
  /** Catalog item ids (unique). */
  ids: readonly string[];
  /** Unit vectors, one per id, same dimension. */
  vectors: readonly Float32Array[];
}

/** Communities of the item space: disjoint lists of item ids (every id in exactly one). */
export interface ItemCommunities {
  /** Community id → its items. Ids are `k<index>`, stable for one clustering input. */
  communities: { id: string; items: string[] }[];
}

/** Options of {@link buildRelease}. */
export interface BuildReleaseOptions {
  epoch: number;
  epochMs: number;
  space: ItemSpace;
  communities: ItemCommunities;
  hist: ReportHistogram;
  ldp: LdpParams;
  /** A community's statistics are released only with at least this many estimated contributors. */
  minContributors: number;
}

/** Round to 2 decimals (the estimates have a standard deviation of many units; more digits only add bytes). */
const r2 = (x: number) => Math.round(x * 100) / 100;

/**
 * The release of an epoch: per community its prototype, items, estimated contributors and
 * item estimates (only communities with ≥ `minContributors`), and item popularity estimates
 * over all reports. Estimates ≤ 0 are dropped (post-processing: no privacy cost).
 */
export function buildRelease(o: BuildReleaseOptions): Release {
  const { space } = o;
  if (space.ids.length === 0) throw new RangeError('buildRelease: the item space is empty');
  const dim = space.vectors[0].length;
  const vectorOf = new Map(space.ids.map((id, i) => [id, space.vectors[i]]));
  const est = estimateCounts(o.hist, space.ids, o.ldp);
  const popularity: Record<string, number> = {};
  for (const id of [...space.ids].sort()) {
    const x = est.get(id)!;
    if (x > 0) popularity[id] = r2(x);
  }
  const communities: ReleaseCommunity[] = [];
  for (const c of o.communities.communities) {
    // a lower bound on the distinct devices holding an item of the community (each holds ≤ ℓ items)
    let contributors = 0;
    for (const id of c.items) contributors += est.get(id) ?? 0;
    contributors /= o.ldp.ell;
    if (contributors < o.minContributors) continue;
    const counts: Record<string, number> = {};
    for (const id of [...c.items].sort()) {
      const x = est.get(id) ?? 0;
      if (x > 0) counts[id] = r2(x);
    }
    const vecs = c.items.map((id) => vectorOf.get(id)).filter((v): v is Float32Array => v !== undefined);
    communities.push({ id: c.id, prototype: encodeVector(prototypeOf(vecs)), items: [...c.items], contributors: r2(contributors), counts });
  }
  return {
    v: 2,
    epoch: o.epoch,
    epochMs: o.epochMs,
    embedderId: space.embedderId,
    dim,
    reports: o.hist.total,
    minContributors: o.minContributors,
    ldp: { ...o.ldp },
    communities,
    popularity,
  };
}

/** A released community as the device uses it (prototype decoded). */
export interface MatchedCommunity {
  community: ReleaseCommunity;
  prototype: Float32Array;
  /** Cosine of the memory to the prototype. */
  similarity: number;
}

/** Decode a release's prototypes once (reuse across memories). */
export function decodePrototypes(release: Release): { community: ReleaseCommunity; prototype: Float32Array }[] {
  return release.communities.map((c) => {
    const v = decodeVector(c.prototype);
    let n = 0;
    for (let i = 0; i < v.length; i++) n += v[i] * v[i];
    n = Math.sqrt(n) || 1;
    for (let i = 0; i < v.length; i++) v[i] /= n;
    return { community: c, prototype: v };
  });
}

/**
 * STEAM's relation extraction against the shared space, on the device: a memory's top-`k1`
 * prototypes with cosine ≥ `tau`, best first. Nothing about it leaves the device.
 */
export function matchMemory(
  vector: Float32Array,
  prototypes: readonly { community: ReleaseCommunity; prototype: Float32Array }[],
  k1: number,
  tau: number,
): MatchedCommunity[] {
  const hits: MatchedCommunity[] = [];
  for (const p of prototypes) {
    if (p.prototype.length !== vector.length) continue;
    const s = dot(p.prototype, vector);
    if (s >= tau) hits.push({ community: p.community, prototype: p.prototype, similarity: s });
  }
  hits.sort((a, b) => b.similarity - a.similarity || (a.community.id < b.community.id ? -1 : 1));
  return hits.slice(0, k1);
}
