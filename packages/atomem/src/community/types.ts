/**
 * Shared community index contracts (pure types). The in-process index (benchmark) and the
 * networked service (src/server, later) implement {@link SharedIndex}; the device-side agent
 * only talks to this interface.
 */

/** One anonymised memory as a device shares it. No user id, no text, no timestamps. */
export interface SharedMemoryUpload {
  /** Fresh random id per memory version, unlinkable to the user. */
  id: string;
  /** Embedder id; the index refuses vectors of another embedder. */
  embedderId: string;
  /** L2-normalised vector (may be noised / quantised by the sync layer). */
  vector: Float32Array;
  /** Only at privacy level `items`: catalog ids of the memory's interactions. */
  items?: string[];
}

/** What the index releases about one community (only when it has ≥ k members). */
export interface CommunityView {
  /** Community (= prototype) id; stable while the community exists. */
  id: string;
  /** Member count (all members, including the asker's own). */
  size: number;
  /** Prototype vector e_k: normalised mean of member vectors. */
  prototype: Float32Array;
  /** Vectors of the other members (the asker's own ids are excluded). */
  members: Float32Array[];
  /** At level `items`: item id → noisy count of members' interactions with it. */
  items?: Record<string, number>;
  /**
   * At level `items`: items of the members that share items with the asker's memories,
   * each such member weighted by min(1, overlap / sqrt(its item count)) — "shoppers who picked
   * what you picked also picked …". Released only with ≥ k such members; noised like `items`.
   */
  related?: Record<string, number>;
  /** Which of the asked own ids belong to this community. */
  ownIds: string[];
}

/** The shared index as a device sees it. */
export interface SharedIndex {
  /** The embedder id this index accepts. */
  readonly embedderId: string;
  /**
   * Insert memories. One call = one device's batch: memories in the same batch are never
   * linked to each other (relation extraction considers other users' memories only).
   * Re-inserting an existing id replaces it.
   */
  upsert(batch: readonly SharedMemoryUpload[]): Promise<void>;
  /** Remove memories by id (unknown ids are ignored). */
  delete(ids: readonly string[]): Promise<void>;
  /** Communities (≥ k members) that contain any of `ownIds`. */
  communities(ownIds: readonly string[]): Promise<CommunityView[]>;
}
