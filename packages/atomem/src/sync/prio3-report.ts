/**
 * Verifiable aggregation of the device's report with Prio3 (the VDAF of the IETF DAP drafts,
 * `@divviup/prio3`): the device's recent items as a 0/1 vector over the catalog, split into two
 * additive secret shares — one for the leader (the shop's index service), one for the helper (a
 * second service run by another party) — with a proof that every entry is 0 or 1. Each share is
 * encrypted to its aggregator with HPKE (RFC 9180, `@hpke/core`), and both go to the leader in
 * one upload (the leader cannot open the helper's share). The aggregators check the proof
 * together (VDAF preparation) without seeing the vector, sum the accepted shares, and add
 * central DP noise to their aggregate shares (atomem-index's prio3-aggregator.ts).
 *
 * So a report adds at most 1 to any item's count, however it was crafted (under local DP a fake
 * report adds ≈ ℓ/(p* − q) ≈ 20 holders to its target's estimate). What the proof does not bound:
 * the number of ones (the multi-hot weight check of later VDAF drafts is not in `@divviup/prio3`
 * 0.8): a forged report may set every item to 1 — still at most 1 per item.
 *
 * Also the codec the aggregators share (the library encodes shares but has no decoders).
 */
import type { Prio3SumVec } from '@divviup/prio3';
import type { CipherSuite } from '@hpke/core';
import type { TokenProvider } from './tokens.js';

/** Routes of the Prio3 aggregators (both services serve `config`; uploads go to the leader). */
export const PRIO3_PATHS = Object.freeze({
  config: '/v2/prio3/config',
  upload: '/v2/prio3/upload',
  aggregate: '/v2/prio3/aggregate',
  collect: '/v2/prio3/collect',
  latest: '/v2/prio3/releases/latest',
  release: '/v2/prio3/releases/:epoch',
});

/** The HPKE suite of input shares: DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (WebCrypto everywhere). */
export const PRIO3_HPKE_SUITE = 'DHKEM(P-256, HKDF-SHA256), HKDF-SHA256, AES-128-GCM';

/** GET `/v2/prio3/config` of an aggregator. */
export interface Prio3Config {
  role: 'leader' | 'helper';
  /** HPKE public key of this aggregator (base64, uncompressed P-256 point). */
  hpkePublicKey: string;
  hpkeSuite: string;
  /** The VDAF: Prio3SumVec with 1-bit entries over `items` (in this order). */
  vdaf: { name: 'Prio3SumVec'; length: number; bits: 1; chunkLength: number };
  /** Catalog item ids, index = vector position. */
  items: string[];
  /** A device sets at most this many entries (its last ℓ distinct items). */
  ell: number;
  /** Central DP per release (see the release's `mechanism`): what one report costs the device's ledger. */
  epsilon: number;
  /** Leader only: the helper's public root, where devices read its configuration (its key). */
  helperUrl?: string;
  /** Epoch length, ms (one report per device per epoch). */
  epochMs?: number;
}

/** The two aggregators as a device sees them: both configurations, checked to agree ({@link checkPrio3Pair}). */
export interface Prio3Endpoints {
  leader: Prio3Config;
  helper: Prio3Config;
  helperUrl: string;
}

/**
 * Check that two configurations are a leader and a helper over the same VDAF and item list, with
 * two different HPKE keys (a leader that named itself as the helper would hold both shares).
 */
export function checkPrio3Pair(leader: Prio3Config, helper: Prio3Config): void {
  if (leader.role !== 'leader' || helper.role !== 'helper') throw new Error(`prio3: expected a leader and a helper, got ${leader.role} and ${helper.role}`);
  if (
    !Array.isArray(leader.items) ||
    !Array.isArray(helper.items) ||
    leader.items.length !== helper.items.length ||
    leader.items.some((id, i) => helper.items[i] !== id)
  )
    throw new Error('prio3: the leader and the helper disagree on the item list');
  if (leader.vdaf?.length !== leader.items.length || helper.vdaf?.length !== helper.items.length)
    throw new Error('prio3: the VDAF length is not the item count');
  if (leader.hpkeSuite !== PRIO3_HPKE_SUITE || helper.hpkeSuite !== PRIO3_HPKE_SUITE)
    throw new Error(`prio3: unsupported HPKE suite (expected ${PRIO3_HPKE_SUITE})`);
  if (leader.hpkePublicKey === helper.hpkePublicKey) throw new Error('prio3: the leader and the helper have the same HPKE key');
  if (!(Number.isInteger(leader.ell) && leader.ell >= 1)) throw new Error(`prio3: the leader's ell must be an integer ≥ 1, got ${String(leader.ell)}`);
  if (!(typeof leader.epsilon === 'number' && leader.epsilon > 0)) throw new Error(`prio3: the leader's epsilon must be > 0, got ${String(leader.epsilon)}`);
}

/** An HPKE ciphertext: `enc` (encapsulated key) and `ct`, both base64. */
export interface SealedShare {
  enc: string;
  ct: string;
}

/** POST `/v2/prio3/upload` (to the leader). */
export interface Prio3Upload {
  epoch: number;
  /** Privacy Pass token of the epoch (the same tokens as the local-DP report). */
  token: string;
  /** Report nonce (16 bytes, base64): binds the shares and the proof check. */
  nonce: string;
  /** Prio3 public share (joint randomness parts, base64). */
  publicShare: string;
  leaderShare: SealedShare;
  helperShare: SealedShare;
}

export const b64 = {
  encode(bytes: Uint8Array): string {
    let s = '';
    for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(s);
  },
  decode(text: string): Uint8Array {
    if (typeof text !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw new TypeError('not base64');
    const s = atob(text);
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  },
};

/** Chunk length of the SumVec circuit: ≈ √length (the proof's size is O(length / chunk + chunk)). */
export function prio3ChunkLength(length: number): number {
  return Math.max(1, Math.round(Math.sqrt(length)));
}

/**
 * The VDAF over `length` items (the library is loaded on first use: pages that never report do
 * not fetch it). `moduleUrl`: where an ES module build of `@divviup/prio3` is served (the
 * engine's `index.prio3Module`), for the package's prebuilt worker, which cannot resolve the
 * bare name; without it the bare name is imported (Node, or an app whose bundler builds atomem).
 */
export async function prio3Vdaf(length: number, moduleUrl?: string): Promise<Prio3SumVec> {
  if (!Number.isInteger(length) || length < 1) throw new RangeError(`prio3: length must be a positive integer, got ${length}`);
  let lib: typeof import('@divviup/prio3');
  try {
    lib = moduleUrl === undefined ? await import('@divviup/prio3') : ((await import(/* @vite-ignore */ moduleUrl)) as typeof import('@divviup/prio3'));
    if (typeof lib.Prio3SumVec !== 'function') throw new TypeError('the module exports no Prio3SumVec');
  } catch (e) {
    throw new Error(
      `prio3: @divviup/prio3 could not be loaded (${e instanceof Error ? e.message : String(e)}); Prio3 reports need it installed and resolvable where the engine runs, or an ES module build of it at index.prio3Module — the package's prebuilt worker does not bundle it (MPL-2.0)`,
    );
  }
  const { Prio3SumVec } = lib;
  return new Prio3SumVec({ shares: 2, length, bits: 1, chunkLength: prio3ChunkLength(length) });
}

/** The HPKE cipher suite ({@link PRIO3_HPKE_SUITE}). */
export async function prio3Hpke(): Promise<CipherSuite> {
  const { CipherSuite, DhkemP256HkdfSha256, HkdfSha256, Aes128Gcm } = await import('@hpke/core');
  return new CipherSuite({ kem: new DhkemP256HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });
}

const enc = new TextEncoder();
/** HPKE `info` of an input share. */
export const PRIO3_HPKE_INFO = enc.encode('atomem prio3 input share v1');

/** Associated data of an input share: binds it to its epoch, nonce, public share and recipient. */
export function prio3ShareAad(role: 'leader' | 'helper', epoch: number, nonce: Uint8Array, publicShare: Uint8Array): Uint8Array {
  const head = enc.encode(`${role}|${epoch}|`);
  const out = new Uint8Array(head.length + nonce.length + publicShare.length);
  out.set(head, 0);
  out.set(nonce, head.length);
  out.set(publicShare, head.length + nonce.length);
  return out;
}

/**
 * The measurement: 1 for each of the device's last `ell` distinct items that are in the catalog
 * (`items` in the config's order), 0 elsewhere.
 */
export function prio3Measurement(recent: readonly string[], items: readonly string[], ell: number): number[] {
  const index = new Map(items.map((id, i) => [id, i]));
  const out = new Array<number>(items.length).fill(0);
  const distinct = [...new Set(recent.filter((id) => index.has(id)))].slice(-ell);
  for (const id of distinct) out[index.get(id)!] = 1;
  return out;
}

/** Random bytes from WebCrypto (or `random` for a reproducible benchmark). */
function bytes(n: number, random?: (n: number) => Uint8Array): Uint8Array {
  if (random) return random(n);
  const out = new Uint8Array(n);
  crypto.getRandomValues(out);
  return out;
}

/**
 * Shard `measurement` and seal its shares to the two aggregators. `random` (n → n bytes) replaces
 * WebCrypto's randomness for the shares and the nonce (benchmarks; HPKE keeps its own).
 */
export async function encodePrio3Upload(o: {
  measurement: readonly number[];
  epoch: number;
  token: string;
  leader: Pick<Prio3Config, 'hpkePublicKey'>;
  helper: Pick<Prio3Config, 'hpkePublicKey'>;
  random?: (n: number) => Uint8Array;
  /** See {@link prio3Vdaf}. */
  moduleUrl?: string;
}): Promise<Prio3Upload> {
  const vdaf = await prio3Vdaf(o.measurement.length, o.moduleUrl);
  const nonce = bytes(vdaf.nonceSize, o.random);
  // why: the library types its byte arguments as `buffer`'s Buffer; it only reads them as bytes (subarray, concat)
  type Bytes = Parameters<typeof vdaf.shard>[1];
  const { publicShare, inputShares } = await vdaf.shard([...o.measurement], nonce as Bytes, bytes(vdaf.randSize, o.random) as Bytes);
  const pub = new Uint8Array(vdaf.encodePublicShare(publicShare));
  const suite = await prio3Hpke();
  const seal = async (role: 'leader' | 'helper', key: string, share: Uint8Array): Promise<SealedShare> => {
    const recipientPublicKey = await suite.kem.deserializePublicKey(b64.decode(key));
    const r = await suite.seal({ recipientPublicKey, info: PRIO3_HPKE_INFO }, share, prio3ShareAad(role, o.epoch, nonce, pub));
    return { enc: b64.encode(new Uint8Array(r.enc)), ct: b64.encode(new Uint8Array(r.ct)) };
  };
  return {
    epoch: o.epoch,
    token: o.token,
    nonce: b64.encode(nonce),
    publicShare: b64.encode(pub),
    leaderShare: await seal('leader', o.leader.hpkePublicKey, new Uint8Array(vdaf.encodeInputShare(inputShares[0]))),
    helperShare: await seal('helper', o.helper.hpkePublicKey, new Uint8Array(vdaf.encodeInputShare(inputShares[1]))),
  };
}

/** Options of {@link sendPrio3Report}. */
export interface SendPrio3ReportOptions {
  /** The leader (the shop's index service). */
  leaderUrl: string;
  /** The helper (the second aggregator, run by another party). */
  helperUrl: string;
  /** The device's recent liked items, most recent last. */
  recent: readonly string[];
  epoch: number;
  tokens: TokenProvider;
  fetch?: typeof fetch;
  timeoutMs?: number;
}

/** Request options of every Prio3 request: no cookies, nothing cached or revalidated, no referrer. */
const WIRE = { credentials: 'omit', cache: 'no-store', referrerPolicy: 'no-referrer' } as const;

async function getConfig(f: typeof fetch, url: string, timeoutMs: number): Promise<Prio3Config> {
  const res = await f(new URL(PRIO3_PATHS.config, url), { ...WIRE, signal: AbortSignal.timeout(timeoutMs) });
  if (!res.ok) throw new Error(`prio3: ${url} answered ${res.status} to its config`);
  return (await res.json()) as Prio3Config;
}

/**
 * One Prio3 report of the device for `epoch`: reads both aggregators' configs, checks that they
 * agree on the item list, gets the epoch's token, and uploads the sealed shares to the leader.
 * Resolves with the leader's status (202 = accepted); throws on a configuration mismatch.
 */
export async function sendPrio3Report(o: SendPrio3ReportOptions): Promise<{ status: number; items: number }> {
  const f = o.fetch ?? fetch;
  const timeoutMs = o.timeoutMs ?? 15_000;
  const [leader, helper] = await Promise.all([getConfig(f, o.leaderUrl, timeoutMs), getConfig(f, o.helperUrl, timeoutMs)]);
  checkPrio3Pair(leader, helper);
  const measurement = prio3Measurement(o.recent, leader.items, leader.ell);
  const token = await o.tokens.token(o.epoch);
  const body = await encodePrio3Upload({ measurement, epoch: o.epoch, token, leader, helper });
  const res = await f(new URL(PRIO3_PATHS.upload, o.leaderUrl), {
    ...WIRE,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  return { status: res.status, items: measurement.reduce((a, b) => a + b, 0) };
}
