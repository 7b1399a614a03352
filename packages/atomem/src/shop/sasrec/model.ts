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
import type { SasrecConfig, SasrecWeights } from '../../protocol/sasrec-v1.js';

// why: the weights' shapes and their file format are the wire format the catalog file carries (protocol/ sits below shop/)
export {
  BLOCK_TENSORS,
  checkConfig,
  isMatrix,
  namedTensors,
  type BlockTensorName,
  type SasrecConfig,
  type SasrecWeights,
  deserializeSasrec,
  fromHalf,
  serializeSasrec,
  toHalf,
  type ItemEmbeddingEncoding,
  type SerializeOptions,
} from '../../protocol/sasrec-v1.js';

/** Layer-norm ε of the original (`normalize(..., epsilon=1e-8)`). */
export const LN_EPS = 1e-8;

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
