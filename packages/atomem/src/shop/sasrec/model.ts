/**
 * SASRec inference (Kang & McAuley 2018, "Self-Attentive Sequential Recommendation"), pure
 * TypeScript: no Node APIs, no dependencies, safe in a Web Worker.
 *
 * The network is the one of the authors' TensorFlow code (github kang205/SASRec):
 * - input: item embedding · √d + learned positional embedding, the sequence left-padded to
 *   `maxLen` (so the newest item always sits at position `maxLen − 1`); padding is item 0,
 *   whose embedding row is zero;
 * - per block: Q = LN₁(x)·Wq + bq, K = x·Wk + bk, V = x·Wv + bv (keys and values from the
 *   un-normalised input), causal softmax(QKᵀ/√(d/h))·V per head, no output projection,
 *   residual to the normalised queries: x₁ = attn + LN₁(x); then x₂ = FFN(LN₂(x₁)) + LN₂(x₁)
 *   with FFN(y) = W₂·ReLU(W₁·y + b₁) + b₂;
 * - a final layer norm; score(item) = hidden · itemEmbedding(item) (shared, unscaled).
 * Layer norms use ε = 1e-8 and the population variance, as the original.
 *
 * Padded positions never influence real ones (their keys are masked and their rows are zeroed
 * after every block), so only the real positions are computed. In the last block only the
 * last position is needed, and there the keys and values are folded into the query:
 * q·(Wk·x_j + bk) = (Wkᵀq)·x_j + const (the constant cancels in the softmax) and
 * Σ_j a_j (Wv·x_j + bv) = Wv·(Σ_j a_j x_j) + bv, so that block costs O(L·d) instead of O(L·d²).
 *
 * Matrices are stored `[out][in]` row-major (y_j = Σ_k W[j·in + k]·x_k + b_j).
 */

import { simdMmNT } from './simd.js';

export interface SasrecConfig {
  /** Longest history the model reads (the original's `maxlen`); older items are dropped. */
  maxLen: number;
  /** Hidden size d (`hidden_units`). */
  dim: number;
  /** Self-attention blocks. */
  blocks: number;
  /** Attention heads (d must be a multiple). */
  heads: number;
}

/** One self-attention block's parameters; matrices d×d `[out][in]`, vectors d. */
export interface SasrecBlock {
  ln1g: Float32Array;
  ln1b: Float32Array;
  wq: Float32Array;
  bq: Float32Array;
  wk: Float32Array;
  bk: Float32Array;
  wv: Float32Array;
  bv: Float32Array;
  ln2g: Float32Array;
  ln2b: Float32Array;
  w1: Float32Array;
  b1: Float32Array;
  w2: Float32Array;
  b2: Float32Array;
}

export const BLOCK_TENSORS = ['ln1g', 'ln1b', 'wq', 'bq', 'wk', 'bk', 'wv', 'bv', 'ln2g', 'ln2b', 'w1', 'b1', 'w2', 'b2'] as const;
export type BlockTensorName = (typeof BLOCK_TENSORS)[number];

/** True for the block tensors that are d×d matrices (the rest are d-vectors). */
export function isMatrix(name: BlockTensorName): boolean {
  return name[0] === 'w';
}

export interface SasrecWeights {
  config: SasrecConfig;
  /** Items are indexed 1..numItems; index 0 is padding. */
  numItems: number;
  /** (numItems + 1) × d, row 0 (padding) all zeros. Shared by the input and the output layer. */
  itemEmb: Float32Array;
  /** maxLen × d. */
  posEmb: Float32Array;
  blocks: SasrecBlock[];
  /** Final layer norm. */
  lnfG: Float32Array;
  lnfB: Float32Array;
}

/** Layer-norm ε of the original (`normalize(..., epsilon=1e-8)`). */
export const LN_EPS = 1e-8;

/** Throws a RangeError unless `config` is usable. */
export function checkConfig(config: SasrecConfig): void {
  const { maxLen, dim, blocks, heads } = config;
  for (const [k, v] of Object.entries({ maxLen, dim, blocks, heads })) {
    if (!Number.isInteger(v) || v < (k === 'blocks' ? 0 : 1) || v > 1 << 16) throw new RangeError(`SASRec config: ${k} must be a positive integer, got ${v}`);
  }
  if (dim % heads !== 0) throw new RangeError(`SASRec config: dim ${dim} is not a multiple of heads ${heads}`);
}

/** Zero-initialised weights of the right shapes. */
export function emptyWeights(config: SasrecConfig, numItems: number): SasrecWeights {
  checkConfig(config);
  if (!Number.isInteger(numItems) || numItems < 1) throw new RangeError(`SASRec: numItems must be a positive integer, got ${numItems}`);
  const d = config.dim;
  const blocks: SasrecBlock[] = [];
  for (let b = 0; b < config.blocks; b++) {
    const blk = {} as Record<BlockTensorName, Float32Array>;
    for (const name of BLOCK_TENSORS) blk[name] = new Float32Array(isMatrix(name) ? d * d : d);
    blk.ln1g.fill(1);
    blk.ln2g.fill(1);
    blocks.push(blk as SasrecBlock);
  }
  return {
    config: { ...config },
    numItems,
    itemEmb: new Float32Array((numItems + 1) * d),
    posEmb: new Float32Array(config.maxLen * d),
    blocks,
    lnfG: new Float32Array(d).fill(1),
    lnfB: new Float32Array(d),
  };
}

/** Every tensor of `w` with a stable name, in serialization order. */
export function namedTensors(w: SasrecWeights): Array<[string, Float32Array]> {
  const out: Array<[string, Float32Array]> = [
    ['itemEmb', w.itemEmb],
    ['posEmb', w.posEmb],
  ];
  w.blocks.forEach((blk, b) => {
    for (const name of BLOCK_TENSORS) out.push([`blocks.${b}.${name}`, blk[name]]);
  });
  out.push(['lnfG', w.lnfG], ['lnfB', w.lnfB]);
  return out;
}

// ---------------------------------------------------------------------------------------
// Kernels (plain loops over Float32Array; V8 computes in doubles).

/** C = A·Bᵀ over strided operands (see {@link gemmNT}). */
type Gemm = (
  M: number,
  N: number,
  K: number,
  A: Float32Array,
  ao: number,
  lda: number,
  B: Float32Array,
  bo: number,
  ldb: number,
  C: Float32Array,
  co: number,
  ldc: number,
) => void;

/** Y[i, :] = W · X[i, :] + b for rows i < m (X stride k, W n×k, Y stride n). */
function linear(mm: Gemm, X: Float32Array, m: number, k: number, W: Float32Array, b: Float32Array, n: number, Y: Float32Array): void {
  mm(m, n, k, X, 0, k, W, 0, k, Y, 0, n);
  for (let i = 0; i < m; i++) {
    const y = i * n;
    for (let j = 0; j < n; j++) Y[y + j] += b[j];
  }
}

/** y = W·x + b for one row x = X[xo .. xo+k), written to Y[yo .. yo+n). */
function linearRow(X: Float32Array, xo: number, k: number, W: Float32Array, b: Float32Array | null, n: number, Y: Float32Array, yo: number): void {
  for (let j = 0; j < n; j++) {
    const w0 = j * k;
    let a = 0;
    for (let t = 0; t < k; t++) a += X[xo + t] * W[w0 + t];
    Y[yo + j] = b ? a + b[j] : a;
  }
}

/**
 * C[co + i·ldc + j] = Σ_{t<K} A[ao + i·lda + t] · B[bo + j·ldb + t] (i < M, j < N); the
 * attention products, two rows × four columns per inner loop.
 */
function gemmNT(
  M: number,
  N: number,
  K: number,
  A: Float32Array,
  ao: number,
  lda: number,
  B: Float32Array,
  bo: number,
  ldb: number,
  C: Float32Array,
  co: number,
  ldc: number,
): void {
  let i = 0;
  for (; i + 1 < M; i += 2) {
    const a0 = ao + i * lda;
    const a1 = a0 + lda;
    const c0 = co + i * ldc;
    const c1 = c0 + ldc;
    let j = 0;
    for (; j + 3 < N; j += 4) {
      const b0 = bo + j * ldb;
      const b1 = b0 + ldb;
      const b2 = b1 + ldb;
      const b3 = b2 + ldb;
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0,
        t0 = 0,
        t1 = 0,
        t2 = 0,
        t3 = 0;
      for (let t = 0; t < K; t++) {
        const u = A[a0 + t];
        const v = A[a1 + t];
        const x0 = B[b0 + t],
          x1 = B[b1 + t],
          x2 = B[b2 + t],
          x3 = B[b3 + t];
        s0 += u * x0;
        s1 += u * x1;
        s2 += u * x2;
        s3 += u * x3;
        t0 += v * x0;
        t1 += v * x1;
        t2 += v * x2;
        t3 += v * x3;
      }
      C[c0 + j] = s0;
      C[c0 + j + 1] = s1;
      C[c0 + j + 2] = s2;
      C[c0 + j + 3] = s3;
      C[c1 + j] = t0;
      C[c1 + j + 1] = t1;
      C[c1 + j + 2] = t2;
      C[c1 + j + 3] = t3;
    }
    for (; j < N; j++) {
      const b0 = bo + j * ldb;
      let s0 = 0,
        t0 = 0;
      for (let t = 0; t < K; t++) {
        s0 += A[a0 + t] * B[b0 + t];
        t0 += A[a1 + t] * B[b0 + t];
      }
      C[c0 + j] = s0;
      C[c1 + j] = t0;
    }
  }
  if (i < M) {
    const a0 = ao + i * lda;
    const c0 = co + i * ldc;
    for (let j = 0; j < N; j++) {
      const b0 = bo + j * ldb;
      let s0 = 0;
      for (let t = 0; t < K; t++) s0 += A[a0 + t] * B[b0 + t];
      C[c0 + j] = s0;
    }
  }
}

/** Rows per causal block of the attention products (blocks above the diagonal are skipped). */
const CAUSAL_BLOCK = 8;

/** Layer norm of row X[xo .. xo+d) into Y[yo ..) (may alias). */
function layerNormRow(X: Float32Array, xo: number, d: number, g: Float32Array, b: Float32Array, Y: Float32Array, yo: number): void {
  let mean = 0;
  for (let c = 0; c < d; c++) mean += X[xo + c];
  mean /= d;
  let v = 0;
  for (let c = 0; c < d; c++) {
    const z = X[xo + c] - mean;
    v += z * z;
  }
  const rstd = 1 / Math.sqrt(v / d + LN_EPS);
  for (let c = 0; c < d; c++) Y[yo + c] = (X[xo + c] - mean) * rstd * g[c] + b[c];
}

/**
 * Scratch buffers and the product kernel, reused across calls (one thread: a Web Worker or
 * Node's main thread). With WebAssembly SIMD (and no CSP forbidding it) the products of every
 * block but the last run in wasm on copies of that block's matrices in the wasm memory (copied
 * on every call, so weights may change between calls); otherwise plain JS loops.
 */
interface Runtime {
  key: string;
  mm: Gemm;
  wasm: boolean;
  /** X, Xn, Q, K, V, O, P, A, Vt */
  buf: Float32Array[];
  /** Per non-last block: wq, wk, wv, w1, w2 slots in the wasm memory (empty for JS). */
  mats: Float32Array[];
}

let kernelChoice: 'auto' | 'js' = 'auto';
/** One runtime per (kernel, maxLen, dim, blocks): models of different shapes may alternate. */
const runtimes = new Map<string, Runtime>();

/** `js` forces the plain-JS products (for tests and comparisons); `auto` (default) uses WebAssembly SIMD where available. */
export function setSasrecKernel(kernel: 'auto' | 'js'): void {
  kernelChoice = kernel;
}

/** Which kernel {@link encodeHistory} uses for a config: `wasm` or `js`. */
export function sasrecKernel(config: SasrecConfig): 'wasm' | 'js' {
  return getRuntime(config).wasm ? 'wasm' : 'js';
}

function getRuntime(config: SasrecConfig): Runtime {
  const { maxLen: L, dim: d, blocks } = config;
  const key = `${kernelChoice}:${L}:${d}:${blocks}`;
  const cached = runtimes.get(key);
  if (cached) return cached;
  const rt = makeRuntime(key, config);
  if (runtimes.size >= 8) runtimes.clear(); // why: a bound; a few hundred KB each
  runtimes.set(key, rt);
  return rt;
}

function makeRuntime(key: string, config: SasrecConfig): Runtime {
  const { maxLen: L, dim: d, blocks } = config;
  const n = Math.max(L * d, 4 * d, L * L);
  const mats = Math.max(0, blocks - 1) * 5;
  if (kernelChoice === 'auto' && typeof WebAssembly === 'object') {
    try {
      const floats = 9 * (n + 4) + mats * (d * d + 4);
      const memory = new WebAssembly.Memory({ initial: Math.ceil((floats * 4) / 65536) + 1 });
      const mmAcc = simdMmNT(memory);
      let at = 0;
      const take = (len: number) => {
        const v = new Float32Array(memory.buffer, at * 4, len);
        at += Math.ceil(len / 4) * 4 + 4;
        return v;
      };
      const buf = Array.from({ length: 9 }, () => take(n));
      const slots = Array.from({ length: mats }, () => take(d * d));
      const mm: Gemm = (M, N, K, A, ao, lda, B, bo, ldb, C, co, ldc) => mmAcc(M, N, K, A, ao, lda, B, bo, ldb, C, co, ldc, false);
      return { key, mm, wasm: true, buf, mats: slots };
    } catch {
      // why: no SIMD, or a Content-Security-Policy without 'wasm-unsafe-eval': plain JS.
    }
  }
  return { key, mm: gemmNT, wasm: false, buf: Array.from({ length: 9 }, () => new Float32Array(n)), mats: [] };
}

function checkItems(weights: SasrecWeights, items: ArrayLike<number>, from: number): void {
  for (let j = from; j < items.length; j++) {
    const it = items[j];
    if (!Number.isInteger(it) || it < 1 || it > weights.numItems) throw new RangeError(`SASRec: item index ${it} at ${j} is outside 1..${weights.numItems}`);
  }
}

/**
 * The user representation: the final hidden state at the newest position of `itemIndices`
 * (item indices 1..numItems, oldest first; only the last `maxLen` are read), without dropout.
 * An empty history gives the zero vector (every item then scores 0).
 */
export function encodeHistory(weights: SasrecWeights, itemIndices: ArrayLike<number>): Float32Array {
  const { maxLen: L, dim: d, heads } = weights.config;
  const nb = weights.blocks.length;
  const out = new Float32Array(d);
  const T = Math.min(itemIndices.length, L);
  if (T === 0) return out;
  const from = itemIndices.length - T;
  checkItems(weights, itemIndices, from);
  const rt = getRuntime(weights.config);
  const mm = rt.mm;
  const [X, Xn, Q, K, V, O, P, A, Vt] = rt.buf;
  const E = weights.itemEmb;
  const scale = Math.sqrt(d);
  const pos0 = L - T;
  for (let j = 0; j < T; j++) {
    const e = itemIndices[from + j] * d;
    const p = (pos0 + j) * d;
    const x = j * d;
    for (let c = 0; c < d; c++) X[x + c] = E[e + c] * scale + weights.posEmb[p + c];
  }
  const dh = d / heads;
  const inv = 1 / Math.sqrt(dh);
  // Every block but the last: all T positions.
  for (let b = 0; b < nb - 1; b++) {
    const w = weights.blocks[b];
    let [wq, wk, wv, w1, w2] = [w.wq, w.wk, w.wv, w.w1, w.w2];
    if (rt.wasm) {
      const m = rt.mats;
      [wq, wk, wv, w1, w2] = [wq, wk, wv, w1, w2].map((src, k) => {
        m[b * 5 + k].set(src);
        return m[b * 5 + k];
      });
    }
    for (let j = 0; j < T; j++) layerNormRow(X, j * d, d, w.ln1g, w.ln1b, Xn, j * d);
    linear(mm, Xn, T, d, wq, w.bq, d, Q);
    linear(mm, X, T, d, wk, w.bk, d, K);
    linear(mm, X, T, d, wv, w.bv, d, V);
    for (let h = 0; h < heads; h++) {
      const ho = h * dh;
      // scores A[i, j] = q_i·k_j/√dₕ for j ≤ i (causal row blocks), softmax per row
      for (let i0 = 0; i0 < T; i0 += CAUSAL_BLOCK) {
        const i1 = Math.min(T, i0 + CAUSAL_BLOCK);
        mm(i1 - i0, i1, dh, Q, i0 * d + ho, d, K, ho, d, A, i0 * T, T);
      }
      for (let i = 0; i < T; i++) {
        const r = i * T;
        let max = -Infinity;
        for (let j = 0; j <= i; j++) if (A[r + j] > max) max = A[r + j];
        let sum = 0;
        for (let j = 0; j <= i; j++) {
          const e = Math.exp((A[r + j] - max) * inv);
          A[r + j] = e;
          sum += e;
        }
        const rs = 1 / sum;
        for (let j = 0; j <= i; j++) A[r + j] *= rs;
        for (let j = i + 1; j < T; j++) A[r + j] = 0;
      }
      // O = A·V, with V's head columns transposed (dₕ × T)
      for (let j = 0; j < T; j++) {
        const v = j * d + ho;
        for (let c = 0; c < dh; c++) Vt[c * T + j] = V[v + c];
      }
      for (let i0 = 0; i0 < T; i0 += CAUSAL_BLOCK) {
        const i1 = Math.min(T, i0 + CAUSAL_BLOCK);
        mm(i1 - i0, dh, i1, A, i0 * T, T, Vt, 0, T, O, i0 * d + ho, d);
      }
    }
    // x₁ = attention + LN₁(x); y = LN₂(x₁) (into Xn); x = FFN(y) + y.
    for (let t = 0; t < T * d; t++) O[t] += Xn[t];
    for (let j = 0; j < T; j++) layerNormRow(O, j * d, d, w.ln2g, w.ln2b, Xn, j * d);
    linear(mm, Xn, T, d, w1, w.b1, d, Q);
    for (let t = 0; t < T * d; t++) if (Q[t] < 0) Q[t] = 0;
    linear(mm, Q, T, d, w2, w.b2, d, X);
    for (let t = 0; t < T * d; t++) X[t] += Xn[t];
  }
  const last = (T - 1) * d;
  if (nb === 0) {
    layerNormRow(X, last, d, weights.lnfG, weights.lnfB, out, 0);
    return out;
  }
  // The last block at the newest position only; K and V folded into the query (see top).
  const w = weights.blocks[nb - 1];
  // P[0..d): LN₁(x_last); P[d..2d): q; P[2d..3d): Wkᵀq per head, then Σ a_j x_j; O[0..T): scores.
  const xn = P.subarray(0, d);
  const q = P.subarray(d, 2 * d);
  const qk = P.subarray(2 * d, 3 * d);
  const att = P.subarray(3 * d, 4 * d);
  layerNormRow(X, last, d, w.ln1g, w.ln1b, xn, 0);
  linearRow(xn, 0, d, w.wq, w.bq, d, q, 0);
  for (let h = 0; h < heads; h++) {
    const ho = h * dh;
    // qk = Σ_{c in head} q_c · Wk[c, :]
    qk.fill(0);
    for (let c = ho; c < ho + dh; c++) {
      const a = q[c] * inv;
      const r = c * d;
      for (let t = 0; t < d; t++) qk[t] += a * w.wk[r + t];
    }
    let max = -Infinity;
    for (let j = 0; j < T; j++) {
      const xj = j * d;
      let s = 0;
      for (let t = 0; t < d; t++) s += qk[t] * X[xj + t];
      O[j] = s;
      if (s > max) max = s;
    }
    let sum = 0;
    for (let j = 0; j < T; j++) {
      const e = Math.exp(O[j] - max);
      O[j] = e;
      sum += e;
    }
    const r = 1 / sum;
    qk.fill(0); // now Σ_j a_j x_j
    for (let j = 0; j < T; j++) {
      const a = O[j] * r;
      const xj = j * d;
      for (let t = 0; t < d; t++) qk[t] += a * X[xj + t];
    }
    for (let c = ho; c < ho + dh; c++) {
      const r0 = c * d;
      let s = w.bv[c];
      for (let t = 0; t < d; t++) s += w.wv[r0 + t] * qk[t];
      att[c] = s + xn[c];
    }
  }
  // FFN on the one row: y = LN₂(x₁) in xn, hidden in q, output in qk.
  layerNormRow(att, 0, d, w.ln2g, w.ln2b, xn, 0);
  linearRow(xn, 0, d, w.w1, w.b1, d, q, 0);
  for (let c = 0; c < d; c++) if (q[c] < 0) q[c] = 0;
  linearRow(q, 0, d, w.w2, w.b2, d, qk, 0);
  for (let c = 0; c < d; c++) qk[c] += xn[c];
  layerNormRow(qk, 0, d, weights.lnfG, weights.lnfB, out, 0);
  return out;
}

/** score(item) = userVec · itemEmb[item] for each index (1..numItems). */
export function scoreItems(weights: SasrecWeights, userVec: ArrayLike<number>, itemIndices: ArrayLike<number>): Float32Array {
  const d = weights.config.dim;
  if (userVec.length !== d) throw new RangeError(`SASRec: user vector has length ${userVec.length}, expected ${d}`);
  checkItems(weights, itemIndices, 0);
  const out = new Float32Array(itemIndices.length);
  const E = weights.itemEmb;
  for (let n = 0; n < itemIndices.length; n++) {
    const e = itemIndices[n] * d;
    let s = 0;
    for (let c = 0; c < d; c++) s += userVec[c] * E[e + c];
    out[n] = s;
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Binary format
//
//   bytes 0..3   magic "SASR"
//   bytes 4..5   format version (uint16 LE) = 1
//   bytes 6..7   reserved, 0
//   bytes 8..11  header length H in bytes (uint32 LE)
//   12 .. 12+H   UTF-8 JSON header: { config, numItems, itemEmbedding: 'f32'|'f16'|'int8',
//                tensors: [{ name, shape, dtype, offset, bytes }] }, offsets relative to the
//                data section
//   data section starts at the next multiple of 4; tensors little-endian, each 4-byte aligned.
// `int8`: per-row scale (float32 × rows, stored first), then rows × d int8, value = q·scale.
// Row 0 of the item embedding (padding) is stored like the others (zeros).

const MAGIC = [0x53, 0x41, 0x53, 0x52]; // "SASR"
export const SASREC_FORMAT_VERSION = 1;

export type ItemEmbeddingEncoding = 'f32' | 'f16' | 'int8';

export interface SerializeOptions {
  /** How to store the item embedding table (the bulk of the file). Default `f32`. */
  itemEmbedding?: ItemEmbeddingEncoding;
}

interface TensorEntry {
  name: string;
  shape: number[];
  dtype: 'f32' | 'f16' | 'int8';
  offset: number;
  bytes: number;
}

interface Header {
  config: SasrecConfig;
  numItems: number;
  itemEmbedding: ItemEmbeddingEncoding;
  tensors: TensorEntry[];
}

/** IEEE half from a float (round to nearest even; overflow → ±Inf). */
export function toHalf(value: number): number {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  f[0] = value;
  const x = u[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let h = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    if (rem > half || (rem === half && h & 1)) h++;
    return sign | h;
  }
  let h = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++;
  return sign | h;
}

/** Float from an IEEE half. */
export function fromHalf(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

function align4(n: number): number {
  return (n + 3) & ~3;
}

/** The compact little-endian binary of `weights` (see the format above). */
export function serializeSasrec(weights: SasrecWeights, opts: SerializeOptions = {}): Uint8Array {
  const enc = opts.itemEmbedding ?? 'f32';
  if (enc !== 'f32' && enc !== 'f16' && enc !== 'int8') throw new RangeError(`serializeSasrec: unknown itemEmbedding ${String(enc)}`);
  const d = weights.config.dim;
  const tensors: TensorEntry[] = [];
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const [name, t] of namedTensors(weights)) {
    const rows =
      name === 'itemEmb'
        ? weights.numItems + 1
        : name === 'posEmb'
          ? weights.config.maxLen
          : name.startsWith('blocks.') && name.split('.')[2][0] === 'w'
            ? d
            : 1;
    const shape = rows === 1 ? [d] : [rows, d];
    if (t.length !== rows * d) throw new RangeError(`serializeSasrec: ${name} has ${t.length} values, expected ${rows * d}`);
    let bytes: Uint8Array;
    let dtype: TensorEntry['dtype'] = 'f32';
    if (name === 'itemEmb' && enc === 'f16') {
      dtype = 'f16';
      const h = new Uint16Array(t.length);
      for (let i = 0; i < t.length; i++) h[i] = toHalf(t[i]);
      bytes = new Uint8Array(h.buffer);
    } else if (name === 'itemEmb' && enc === 'int8') {
      dtype = 'int8';
      const scales = new Float32Array(rows);
      const q = new Int8Array(rows * d);
      for (let r = 0; r < rows; r++) {
        let max = 0;
        for (let c = 0; c < d; c++) max = Math.max(max, Math.abs(t[r * d + c]));
        const s = max / 127;
        scales[r] = s;
        for (let c = 0; c < d; c++) q[r * d + c] = s > 0 ? Math.round(t[r * d + c] / s) : 0;
      }
      bytes = new Uint8Array(rows * 4 + rows * d);
      bytes.set(new Uint8Array(scales.buffer), 0);
      bytes.set(new Uint8Array(q.buffer), rows * 4);
    } else {
      bytes = new Uint8Array(t.buffer.slice(t.byteOffset, t.byteOffset + t.byteLength));
    }
    tensors.push({ name, shape, dtype, offset, bytes: bytes.length });
    chunks.push(bytes);
    offset = align4(offset + bytes.length);
  }
  const header: Header = { config: { ...weights.config }, numItems: weights.numItems, itemEmbedding: enc, tensors };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const dataStart = align4(12 + json.length);
  const out = new Uint8Array(dataStart + offset);
  out.set(MAGIC, 0);
  const view = new DataView(out.buffer);
  view.setUint16(4, SASREC_FORMAT_VERSION, true);
  view.setUint32(8, json.length, true);
  out.set(json, 12);
  tensors.forEach((t, i) => out.set(chunks[i], dataStart + t.offset));
  // why: a big-endian host would write the typed arrays' bytes in its own order.
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new RangeError('serializeSasrec: big-endian hosts are not supported');
  return out;
}

/** Weights from {@link serializeSasrec}'s bytes; quantized item embeddings are expanded to float32. Throws a RangeError on a malformed buffer. */
export function deserializeSasrec(bytes: Uint8Array): SasrecWeights {
  const bad = (why: string): never => {
    throw new RangeError(`deserializeSasrec: ${why}`);
  };
  if (!(bytes instanceof Uint8Array)) bad('expected a Uint8Array');
  if (bytes.length < 12) bad(`buffer of ${bytes.length} bytes is shorter than the 12-byte preamble`);
  for (let i = 0; i < 4; i++) if (bytes[i] !== MAGIC[i]) bad('bad magic (not a SASRec model file)');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint16(4, true);
  if (version !== SASREC_FORMAT_VERSION) bad(`unsupported format version ${version} (this reader knows ${SASREC_FORMAT_VERSION})`);
  const hlen = view.getUint32(8, true);
  if (12 + hlen > bytes.length) bad(`header of ${hlen} bytes runs past the end of the ${bytes.length}-byte buffer`);
  let header: Header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(12, 12 + hlen))) as Header;
  } catch (e) {
    return bad(`header is not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (!header || typeof header !== 'object' || !header.config || !Array.isArray(header.tensors)) bad('header lacks config or tensors');
  let w: SasrecWeights;
  try {
    w = emptyWeights(header.config, header.numItems);
  } catch (e) {
    return bad((e as Error).message);
  }
  const dataStart = align4(12 + hlen);
  const expected = namedTensors(w);
  if (header.tensors.length !== expected.length) bad(`header lists ${header.tensors.length} tensors, expected ${expected.length}`);
  const d = w.config.dim;
  expected.forEach(([name, target], i) => {
    const t = header.tensors[i];
    if (!t || t.name !== name) bad(`tensor ${i} is ${JSON.stringify(t?.name)}, expected ${name}`);
    const rows = target.length / d;
    const shapeOk =
      Array.isArray(t.shape) && (rows === 1 ? t.shape.length === 1 && t.shape[0] === d : t.shape.length === 2 && t.shape[0] === rows && t.shape[1] === d);
    if (!shapeOk) bad(`tensor ${name} has shape ${JSON.stringify(t.shape)}, expected ${rows === 1 ? `[${d}]` : `[${rows},${d}]`}`);
    const allowed = name === 'itemEmb' ? ['f32', 'f16', 'int8'] : ['f32'];
    if (!allowed.includes(t.dtype)) bad(`tensor ${name} has dtype ${JSON.stringify(t.dtype)}`);
    const need = t.dtype === 'f32' ? target.length * 4 : t.dtype === 'f16' ? target.length * 2 : rows * 4 + target.length;
    if (t.bytes !== need) bad(`tensor ${name} declares ${t.bytes} bytes, expected ${need}`);
    if (!Number.isInteger(t.offset) || t.offset < 0 || t.offset % 4 !== 0) bad(`tensor ${name} has a bad offset ${t.offset}`);
    const start = dataStart + t.offset;
    if (start + need > bytes.length) bad(`tensor ${name} (${need} bytes at ${start}) runs past the end of the ${bytes.length}-byte buffer`);
    const src = bytes.subarray(start, start + need);
    const dv = new DataView(src.buffer, src.byteOffset, src.byteLength);
    if (t.dtype === 'f32') for (let k = 0; k < target.length; k++) target[k] = dv.getFloat32(k * 4, true);
    else if (t.dtype === 'f16') for (let k = 0; k < target.length; k++) target[k] = fromHalf(dv.getUint16(k * 2, true));
    else {
      for (let r = 0; r < rows; r++) {
        const s = dv.getFloat32(r * 4, true);
        for (let c = 0; c < d; c++) target[r * d + c] = dv.getInt8(rows * 4 + r * d + c) * s;
      }
    }
    for (let k = 0; k < target.length; k++) if (!Number.isFinite(target[k])) bad(`tensor ${name} holds a non-finite value at ${k}`);
  });
  return w;
}
