/**
 * One Prio3 aggregator (leader or helper), without I/O: opening an input share sealed to it,
 * VDAF preparation (each aggregator's share of the proof check), summing output shares, central
 * DP noise on its aggregate share, and the release built from both aggregate shares.
 *
 * The VDAF is `@divviup/prio3`'s Prio3SumVec with 1-bit entries over the catalog (the device side
 * is atomem's sync/prio3-report.ts). The library encodes shares but does not decode them; the
 * decoders here follow its encodings (measurement share ‖ proof share ‖ blind for the leader;
 * three XOF seeds for the helper, expanded as the library's sharding does).
 *
 * Noise: each aggregator adds discrete Laplace noise of scale t = ℓ/ε to every entry of its
 * aggregate share before it leaves it (the leader before combining, the helper before answering
 * the collection). One honest device changes the sum by at most ℓ in L1 (≤ ℓ ones), so either
 * aggregator's noise alone makes the release ε-DP (δ = 0) per device per epoch — against the
 * public and against the other aggregator, which knows its own noise.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Prio3SumVec } from '@divviup/prio3';
import type { CipherSuite } from '@hpke/core';
import { Buffer } from 'node:buffer';
import { PRIO3_HPKE_INFO, b64, prio3Hpke, prio3ShareAad, prio3Vdaf, type SealedShare } from 'atomem/engine';
import type { Prio3Release } from 'atomem/protocol';

type Vdaf = Prio3SumVec;
type PublicShare = Parameters<Vdaf['prepareInit']>[4];
type InputShare = Parameters<Vdaf['prepareInit']>[5];
type PrepShare = Parameters<Vdaf['unshardPreparationShares']>[1][number];
type PrepState = Awaited<ReturnType<Vdaf['prepareInit']>>['preparationState'];
type Field = {
  encodedSize: number;
  modulus: bigint;
  decode(b: Uint8Array): bigint[];
  encode(v: bigint[]): Uint8Array;
  vecAdd(a: bigint[], b: bigint[]): bigint[];
};
/** What the codec needs of the VDAF beyond its public API (the library's FLP and seed expansion). */
interface VdafInternals {
  flp: { measurementLen: number; proofLen: number; verifierLen: number; field: Field };
  xof: { seedSize: number };
  pseudorandom(len: number, usage: number, seed: Buffer, binder: Buffer): Promise<bigint[]>;
}
const internals = (v: Vdaf) => v as unknown as VdafInternals;
// the library's XOF usages (draft-irtf-cfrg-vdaf-08 §7.2)
const USAGE_MEASUREMENT_SHARE = 1;
const USAGE_PROOF_SHARE = 2;

/** Discrete Laplace: P(k) ∝ exp(−|k|/t), as the difference of two geometric variables (t > 0). */
export function discreteLaplace(scale: number, uniform: () => number): number {
  if (!(scale > 0)) throw new RangeError(`discreteLaplace: scale must be > 0, got ${scale}`);
  const q = Math.exp(-1 / scale);
  // geometric on {0, 1, …} with P(k) = (1 − q) q^k, by inversion
  const geo = () => Math.floor(Math.log(1 - uniform()) / Math.log(q));
  return geo() - geo();
}

/** A [0, 1) uniform from the OS CSPRNG (53 bits). */
export function cryptoUniform(): number {
  const b = randomBytes(8);
  return (b.readUInt32BE(0) * 2 ** 21 + (b.readUInt32BE(4) >>> 11)) / 2 ** 53;
}

/** Standard deviation of the sum of the two aggregators' noises (each discrete Laplace of scale t). */
export function releaseNoiseStd(scale: number): number {
  const q = Math.exp(-1 / scale);
  return Math.sqrt((2 * 2 * q) / (1 - q) ** 2);
}

/**
 * P(Z ≥ t) for Z the sum of the two aggregators' noises (independent discrete Laplace of scale
 * `scale`): exact, by summing over the first noise (its tail beyond 60 scales is below 1e-26).
 */
export function releaseNoiseTail(scale: number, t: number): number {
  if (!(scale > 0)) throw new RangeError(`releaseNoiseTail: scale must be > 0, got ${scale}`);
  const q = Math.exp(-1 / scale);
  const c = (1 - q) / (1 + q);
  // P(Y ≥ m) of one discrete Laplace
  const tail = (m: number) => (m >= 1 ? (c * q ** m) / (1 - q) : 1 - (c * q ** (1 - m)) / (1 - q));
  const K = Math.ceil(60 * scale) + Math.abs(t);
  let p = 0;
  for (let x = -K; x <= K; x++) p += c * q ** Math.abs(x) * tail(t - x);
  return Math.min(1, p);
}

/**
 * The release threshold: the smallest count t ≥ ⌈3σ⌉ such that, over `items` catalog items, the
 * expected number of items that nobody reported but whose noise alone reaches t is at most
 * `falseItems` (default 0.05: a release shows a pure-noise item with probability ≤ 5 %). With
 * 3σ alone a catalog of 1,682 items at ℓ = 10, ε = 1 shows ≈ 3 pure-noise items per release.
 */
export function prio3Threshold(scale: number, items: number, falseItems = 0.05): number {
  let t = Math.max(1, Math.ceil(3 * releaseNoiseStd(scale)));
  while (items * releaseNoiseTail(scale, t) > falseItems) t++;
  return t;
}

/**
 * Default of the release's minimum share: an item is released only when its noisy count is at
 * least the noise threshold plus this share of the epoch's accepted reports. A report adds at
 * most 1 to an item's count, so fake reports lift an item nobody holds into the release only
 * when they are at least this share of the epoch's reports, unless the noise alone exceeds the
 * threshold (with the default threshold, probability ≤ 0.05 / catalog size per item).
 */
export const PRIO3_MIN_SHARE = 0.1;

/**
 * The smallest noisy count released: `threshold` (the noise margin) + ⌈`minShare` × `reports`⌉
 * (`reports`: the epoch's accepted reports). Post-processing of the noisy counts and the public
 * report count: it costs no privacy.
 */
export function prio3MinCount(threshold: number, reports: number, minShare: number = PRIO3_MIN_SHARE): number {
  if (!(threshold >= 0)) throw new RangeError(`prio3MinCount: threshold must be ≥ 0, got ${threshold}`);
  if (!(minShare >= 0 && minShare < 1)) throw new RangeError(`prio3MinCount: minShare must be in [0, 1), got ${minShare}`);
  if (!(Number.isInteger(reports) && reports >= 0)) throw new RangeError(`prio3MinCount: reports must be an integer ≥ 0, got ${reports}`);
  // why the epsilon: 0.1 × 950 is 95.00000000000001 in floating point
  return threshold + Math.ceil(minShare * reports - 1e-9);
}

/** The secret both aggregators derive their VDAF verification key from (never sent to devices). */
export function verifyKeyFrom(peerKey: string, size: number): Buffer {
  return Buffer.from(createHash('sha256').update('atomem prio3 verify key v1\0').update(peerKey).digest().subarray(0, size));
}

/** Field element → signed integer (noisy sums may be below 0). */
function signed(x: bigint, p: bigint): number {
  return Number(x > p / 2n ? x - p : x);
}

export interface Prio3AggregatorOptions {
  role: 'leader' | 'helper';
  /** Catalog size (the vector length). */
  length: number;
  /** Secret shared with the peer aggregator (derives the verification key; bearer of peer requests). */
  peerKey: string;
  /** 32-byte secret seed of this aggregator's HPKE key pair. */
  hpkeSeed: Uint8Array;
}

/** Preparation of one report by one aggregator. */
export interface Prepared {
  state: PrepState;
  share: PrepShare;
}

export class Prio3Aggregator {
  private constructor(
    readonly role: 'leader' | 'helper',
    readonly vdaf: Vdaf,
    private readonly suite: CipherSuite,
    private readonly keys: CryptoKeyPair,
    readonly publicKey: string,
    private readonly verifyKey: Buffer,
  ) {}

  static async create(o: Prio3AggregatorOptions): Promise<Prio3Aggregator> {
    const vdaf = await prio3Vdaf(o.length);
    const suite = await prio3Hpke();
    const keys = await suite.kem.deriveKeyPair(o.hpkeSeed);
    const pub = b64.encode(new Uint8Array(await suite.kem.serializePublicKey(keys.publicKey)));
    return new Prio3Aggregator(o.role, vdaf, suite, keys, pub, verifyKeyFrom(o.peerKey, vdaf.verifyKeySize));
  }

  get field(): Field {
    return internals(this.vdaf).flp.field;
  }

  get length(): number {
    return internals(this.vdaf).flp.measurementLen;
  }

  /** Open this aggregator's sealed input share of a report (throws on a wrong key, tampering or a bad encoding). */
  async open(epoch: number, nonce: Uint8Array, publicShare: Uint8Array, sealed: SealedShare): Promise<InputShare> {
    const pt = new Uint8Array(
      await this.suite.open(
        { recipientKey: this.keys, enc: b64.decode(sealed.enc), info: PRIO3_HPKE_INFO },
        b64.decode(sealed.ct),
        prio3ShareAad(this.role, epoch, nonce, publicShare),
      ),
    );
    return this.decodeInputShare(pt);
  }

  /** Decode an input share of this aggregator's role (the library's `encodeInputShare`, inverted). */
  async decodeInputShare(bytes: Uint8Array): Promise<InputShare> {
    const { flp, xof } = internals(this.vdaf);
    const size = flp.field.encodedSize;
    const seed = xof.seedSize;
    if (this.role === 'leader') {
      const m = flp.measurementLen * size;
      const p = flp.proofLen * size;
      if (bytes.length !== m + p + seed) throw new TypeError(`leader input share must be ${m + p + seed} bytes, got ${bytes.length}`);
      const wireMeasurementShare = Buffer.from(bytes.subarray(0, m));
      const wireProofShare = Buffer.from(bytes.subarray(m, m + p));
      const measurementShare = flp.field.decode(wireMeasurementShare);
      const proofsShare = flp.field.decode(wireProofShare);
      const p2 = flp.field.modulus;
      if (measurementShare.some((x) => x >= p2) || proofsShare.some((x) => x >= p2))
        throw new TypeError('leader input share has an element ≥ the field modulus');
      return { measurementShare, proofsShare, wireMeasurementShare, wireProofShare, blind: Buffer.from(bytes.subarray(m + p)) };
    }
    if (bytes.length !== 3 * seed) throw new TypeError(`helper input share must be ${3 * seed} bytes, got ${bytes.length}`);
    const wireMeasurementShare = Buffer.from(bytes.subarray(0, seed));
    const wireProofShare = Buffer.from(bytes.subarray(seed, 2 * seed));
    const v = internals(this.vdaf);
    // as the library's sharding expands the helper's seeds (share id 1, one proof)
    const measurementShare = await v.pseudorandom(flp.measurementLen, USAGE_MEASUREMENT_SHARE, wireMeasurementShare, Buffer.of(1));
    const proofsShare = await v.pseudorandom(flp.proofLen, USAGE_PROOF_SHARE, wireProofShare, Buffer.from([1, 1]));
    return { measurementShare, proofsShare, wireMeasurementShare, wireProofShare, blind: Buffer.from(bytes.subarray(2 * seed)) };
  }

  decodePublicShare(bytes: Uint8Array): PublicShare {
    const seed = internals(this.vdaf).xof.seedSize;
    if (bytes.length !== 2 * seed) throw new TypeError(`public share must be ${2 * seed} bytes, got ${bytes.length}`);
    return { jointRandParts: [Buffer.from(bytes.subarray(0, seed)), Buffer.from(bytes.subarray(seed))] };
  }

  encodePrepShare(s: PrepShare): Uint8Array {
    return new Uint8Array(this.vdaf.encodePreparationShare(s));
  }

  decodePrepShare(bytes: Uint8Array): PrepShare {
    const { flp, xof } = internals(this.vdaf);
    const v = flp.verifierLen * flp.field.encodedSize;
    if (bytes.length !== v + xof.seedSize) throw new TypeError(`preparation share must be ${v + xof.seedSize} bytes, got ${bytes.length}`);
    return { verifiersShare: flp.field.decode(bytes.subarray(0, v)), jointRandomnessPart: Buffer.from(bytes.subarray(v)) };
  }

  /** This aggregator's share of the proof check of one report. */
  async prepare(nonce: Uint8Array, publicShare: Uint8Array, input: InputShare): Promise<Prepared> {
    const r = await this.vdaf.prepareInit(this.verifyKey, this.role === 'leader' ? 0 : 1, null, Buffer.from(nonce), this.decodePublicShare(publicShare), input);
    return { state: r.preparationState, share: r.preparationShare };
  }

  /**
   * Both preparation shares → the preparation message (the joint randomness seed), or undefined
   * when the proof fails (the report is not well-formed: some entry is not 0 or 1).
   */
  async combine(shares: [PrepShare, PrepShare]): Promise<Uint8Array | undefined> {
    try {
      const m = await this.vdaf.unshardPreparationShares(null, shares);
      return new Uint8Array(m.jointRand);
    } catch {
      return undefined;
    }
  }

  /** This aggregator's output share of a report, once the preparation message is known (undefined: inconsistent joint randomness). */
  finish(state: PrepState, message: Uint8Array): bigint[] | undefined {
    try {
      const r = this.vdaf.prepareNext(state, { jointRand: Buffer.from(message) });
      return 'outputShare' in r ? r.outputShare : undefined;
    } catch {
      return undefined;
    }
  }

  /** Sum of output shares (an empty sum is the zero vector). */
  sum(acc: bigint[] | undefined, share: bigint[]): bigint[] {
    return acc === undefined ? [...share] : this.field.vecAdd(acc, share);
  }

  zero(): bigint[] {
    return new Array<bigint>(this.length).fill(0n);
  }

  /** The aggregate share with discrete Laplace noise of `scale` added to every entry (mod p). */
  noisy(aggregate: bigint[], scale: number, uniform: () => number = cryptoUniform): bigint[] {
    const p = this.field.modulus;
    return aggregate.map((x) => (((x + BigInt(discreteLaplace(scale, uniform))) % p) + p) % p);
  }

  encodeVector(v: bigint[]): string {
    return b64.encode(this.field.encode(v));
  }

  decodeVector(text: string): bigint[] {
    const bytes = b64.decode(text);
    if (bytes.length !== this.length * this.field.encodedSize) throw new TypeError(`aggregate share must be ${this.length * this.field.encodedSize} bytes`);
    return this.field.decode(bytes);
  }

  /** The released counts: the two (noisy) aggregate shares added, as signed integers. */
  unshard(leader: bigint[], helper: bigint[]): number[] {
    const p = this.field.modulus;
    return this.field.vecAdd(leader, helper).map((x) => signed(x, p));
  }
}

/** The release's wire type lives in atomem's protocol (the device reads the same type). */
export type { Prio3Release };

/**
 * Build the release from the unsharded noisy counts (post-processing: no privacy cost): a count
 * is released when it is at least `threshold` + ⌈`minShare` × `reports`⌉.
 */
export function buildPrio3Release(o: {
  epoch: number;
  epochMs: number;
  items: readonly string[];
  noisy: readonly number[];
  reports: number;
  rejected: number;
  ell: number;
  epsilon: number;
  threshold: number;
  /** Default {@link PRIO3_MIN_SHARE}. */
  minShare?: number;
  communities?: { id: string; items: string[] }[];
}): Prio3Release {
  const scale = o.ell / o.epsilon;
  const minShare = o.minShare ?? PRIO3_MIN_SHARE;
  const minCount = prio3MinCount(o.threshold, o.reports, minShare);
  const counts: Record<string, number> = {};
  o.items.forEach((id, i) => {
    if (o.noisy[i] >= minCount) counts[id] = o.noisy[i];
  });
  const communities = (o.communities ?? [])
    .map((c) => ({
      id: c.id,
      examples: c.items.filter((id) => counts[id] !== undefined).sort((a, b) => counts[b] - counts[a] || (a < b ? -1 : 1)),
    }))
    .filter((c) => c.examples.length > 0);
  return {
    v: 1,
    epoch: o.epoch,
    epochMs: o.epochMs,
    reports: o.reports,
    rejected: o.rejected,
    mechanism: {
      vdaf: 'Prio3SumVec',
      bits: 1,
      ell: o.ell,
      noise: 'discrete-laplace',
      scale,
      epsilon: o.epsilon,
      delta: 0,
      noiseStd: releaseNoiseStd(scale),
      threshold: o.threshold,
      minShare,
      minCount,
    },
    counts,
    communities,
  };
}
