/**
 * The Prio3 release as the leader serves it (`GET /v2/prio3/releases/latest` and
 * `/v2/prio3/releases/:epoch`): the wire type both sides use — atomem-index builds it
 * (prio3-aggregator.ts `buildPrio3Release`), the device ranks with it (community/crowd.ts).
 */

/** The release of an epoch: the noisy counts that clear the release rule, and the communities' examples. */
export interface Prio3Release {
  v: 1;
  epoch: number;
  epochMs: number;
  /** Reports whose proof both aggregators accepted (summed). */
  reports: number;
  /** Reports refused by the proof check or whose shares could not be opened. */
  rejected: number;
  mechanism: {
    vdaf: 'Prio3SumVec';
    bits: 1;
    ell: number;
    noise: 'discrete-laplace';
    /** Scale t of each aggregator's noise (ℓ/ε). */
    scale: number;
    /** Per device per epoch, by either aggregator's noise alone. */
    epsilon: number;
    delta: 0;
    /** Standard deviation of a released count's noise (both aggregators' noises). */
    noiseStd: number;
    /** The noise margin of the release rule. */
    threshold: number;
    /** Share of the epoch's accepted reports a count must reach on top of the threshold. */
    minShare: number;
    /** Counts below this are not released: threshold + ⌈minShare × reports⌉. */
    minCount: number;
  };
  /** Item → noisy count of devices that reported it (only counts ≥ minCount). */
  counts: Record<string, number>;
  /** Per community: its released items, best first (its examples). */
  communities: { id: string; examples: string[] }[];
}
