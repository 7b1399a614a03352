/**
 * The forward and backward pass of SASRec for one chunk of training sequences, with manual
 * backpropagation. Pure computation (no Node APIs): the trainer runs one core per thread.
 *
 * A chunk is packed: only real (non-padded) positions are rows. That is exact for the
 * original network: padded positions have zero input, their keys are masked out of every
 * softmax and their rows are multiplied by the mask after each block, so they never reach
 * a real position, and the loss skips them (`istarget`).
 *
 * Forward, per row r of a sequence with T rows (position p = maxLen − T + j, as left padding):
 *   x⁰ = drop(E[item]·√d + P[p])
 *   block: n₁ = LN₁(x); Q = n₁Wqᵀ + bq; K = xWkᵀ + bk; V = xWvᵀ + bv
 *          A = softmax(QKᵀ/√dₕ, causal) per head; O = drop(A)·V
 *          n₂ = LN₂(O + n₁); H = drop(ReLU(n₂W₁ᵀ + b₁)); x' = drop(HW₂ᵀ + b₂) + n₂
 *   z = LN_f(x); loss = Σ_r softplus(−z·E[pos_r]) + softplus(z·E[neg_r]), times `norm`.
 * Dropout (inverted, rate `dropout`) at the four places of the original: embeddings,
 * attention weights, after the ReLU, after the second FFN layer.
 */
import { LN_EPS } from './model.js';
import type { Layout } from './layout.js';
import { mmNT as mmNTjs, transpose, type F } from './kernels.js';
import { simdKernels, simdSupported, type MmNT, type Transpose } from './simd.js';

/** Row block of the causal attention products (only blocks on or below the diagonal are computed). */
const BS = 16;

export interface GradCoreOptions {
  /** Float32Array (training) or Float64Array (gradient checks). Default Float32Array. */
  Arr?: ArrayCtor;
  /** `wasm` (SIMD, float32 only) or `js`. Default `wasm` where supported. */
  kernel?: 'wasm' | 'js';
  /** Most items a chunk's softmax may hold ({@link ChunkData.softmax}); 0 (default) = BCE only. */
  softmaxItems?: number;
}

/** Rows of logits computed at once by the softmax loss. */
const SOFTMAX_BLOCK = 64;

/** One chunk of training sequences, packed (rows = real positions only). */
export interface ChunkData {
  /** Number of sequences. */
  seqs: number;
  /** Rows of each sequence (its real input positions, ≤ maxLen). */
  lens: Int32Array;
  /** Total rows = Σ lens. */
  rows: number;
  /** Per row: input item (1..n), next item (the positive) and a sampled negative. */
  inputs: Int32Array;
  targets: Int32Array;
  negatives: Int32Array;
  /**
   * Softmax cross-entropy instead of BCE: the items competing with every row's positive (all
   * items for full cross-entropy, or sampled negatives shared by the chunk); an occurrence of
   * the row's own positive among them is masked out. Absent: BCE with `negatives`.
   */
  softmax?: Int32Array;
  /**
   * Lazy embedding updates: every item row this chunk reads or writes (its inputs, targets,
   * negatives and softmax items; more is allowed). Then only those rows of the item embedding
   * are copied in, zeroed and added to (with `assign`: written into) `grads` — the rest of
   * `grads`' item rows are left as they are — so a chunk costs O(rows · d) there instead of
   * O(catalog · d).
   */
  touched?: Int32Array;
}

type ArrayCtor = Float32ArrayConstructor | Float64ArrayConstructor;

interface BlockState {
  xin: F;
  xh1: F;
  rs1: F;
  n1: F;
  q: F;
  k: F;
  v: F;
  a: F;
  ma: F;
  xh2: F;
  rs2: F;
  n2: F;
  hd: F;
  mf: F;
}

/** sfc32 (as `Rng` in core/rng.ts), inlined state for the dropout masks. */
class Sfc32 {
  a = 0;
  b = 0;
  c = 0;
  d = 1;
  seed(s: ArrayLike<number>): void {
    this.a = s[0] | 0;
    this.b = s[1] | 0;
    this.c = s[2] | 0;
    this.d = s[3] | 1;
    for (let i = 0; i < 12; i++) this.nextShifted();
  }
  /** The next uint32 u, returned as the int32 u − 2³¹ (a small integer for V8, never a heap number). */
  nextShifted(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t ^ -2147483648;
  }
}

export class GradCore {
  readonly layout: Layout;
  readonly maxRows: number;
  readonly maxSeqs: number;
  private readonly st: BlockState[];
  private readonly xout: F;
  private readonly xhf: F;
  private readonly rsf: F;
  private readonly z: F;
  private readonly m0: F;
  // backward scratch
  private readonly dx: F;
  private readonly dn: F;
  private readonly dq: F;
  private readonly dk: F;
  private readonly dv: F;
  private readonly dh: F;
  private readonly t1: F;
  private readonly t2: F;
  private readonly wt: F;
  private readonly ad: F;
  private readonly dap: F;
  private readonly tt: F;
  private readonly vt: F;
  private readonly kt: F;
  private readonly qt: F;
  private readonly dot: F;
  /** Softmax loss scratch (empty without `softmaxItems`). */
  private readonly smS: F;
  private readonly smST: F;
  private readonly smE: F;
  private readonly smET: F;
  private readonly smG: F;
  private readonly smZT: F;
  private readonly softmaxItems: number;
  /** Softmax loss: 1 + the position of an item among the chunk's softmax items, else 0. */
  private readonly smAt: Int32Array;
  /** Parameters and gradient inside the arena. */
  private readonly P: F;
  private readonly G: F;
  private readonly mm: MmNT;
  private readonly tr: Transpose;
  /** Which kernel runs the products. */
  readonly kernel: 'wasm' | 'js';
  private readonly off: Int32Array;
  private readonly aoff: Int32Array;
  private readonly rng = new Sfc32();
  private dropout = 0;

  constructor(layout: Layout, maxRows: number, maxSeqs: number, opts: GradCoreOptions = {}) {
    this.layout = layout;
    this.maxRows = maxRows;
    this.maxSeqs = maxSeqs;
    const Arr = opts.Arr ?? Float32Array;
    const { dim: d, maxLen: L, heads, blocks } = layout.config;
    const R = maxRows * d;
    const attn = heads * Math.min(maxSeqs * L * L, maxRows * L);
    // why one arena: the wasm kernel reads and writes only its own memory, so every operand
    // (parameters, gradients, activations, scratch) lives in it.
    const sizes: number[] = [];
    const plan = (n: number) => {
      sizes.push(n);
      return sizes.length - 1;
    };
    const blockPlan = Array.from({ length: blocks }, () => ({
      xin: plan(R),
      xh1: plan(R),
      rs1: plan(maxRows),
      n1: plan(R),
      q: plan(R),
      k: plan(R),
      v: plan(R),
      a: plan(attn),
      ma: plan(attn),
      xh2: plan(R),
      rs2: plan(maxRows),
      n2: plan(R),
      hd: plan(R),
      mf: plan(R),
    }));
    const named = {
      P: plan(layout.size),
      G: plan(layout.size),
      xout: plan(R),
      xhf: plan(R),
      rsf: plan(maxRows),
      z: plan(R),
      m0: plan(R),
      dx: plan(R),
      dn: plan(R),
      dq: plan(R),
      dk: plan(R),
      dv: plan(R),
      dh: plan(R),
      t1: plan(R),
      t2: plan(R),
      wt: plan(d * d),
      ad: plan(L * L),
      dap: plan(L * L),
      tt: plan(L * L),
      vt: plan(d * L),
      kt: plan(d * L),
      qt: plan(d * L),
      dot: plan(d * L),
    };
    const nc = (this.softmaxItems = Math.max(0, Math.floor(opts.softmaxItems ?? 0)));
    const sb = nc > 0 ? SOFTMAX_BLOCK : 0;
    const sm = { S: plan(sb * nc), ST: plan(sb * nc), E: plan(nc * d), ET: plan(nc * d), G: plan(nc * d), ZT: plan(sb * d) };
    const el = Arr.BYTES_PER_ELEMENT;
    const offsets: number[] = [];
    let total = 0;
    for (const n of sizes) {
      offsets.push(total);
      total += Math.ceil(n / 4) * 4 + 4; // 16-byte aligned starts
    }
    const useWasm = (opts.kernel ?? 'wasm') === 'wasm' && Arr === Float32Array && simdSupported();
    let buffer: ArrayBuffer;
    if (useWasm) {
      const memory = new WebAssembly.Memory({ initial: Math.ceil((total * el) / 65536) + 1 });
      buffer = memory.buffer;
      const k = simdKernels(memory);
      this.mm = k.mm;
      this.tr = k.transpose;
    } else {
      buffer = new ArrayBuffer(total * el);
      this.mm = mmNTjs;
      this.tr = transpose;
    }
    this.kernel = useWasm ? 'wasm' : 'js';
    const view = (i: number) => new Arr(buffer, offsets[i] * el, sizes[i]);
    this.st = blockPlan.map((b) => {
      const out = {} as Record<keyof BlockState, F>;
      for (const [k, i] of Object.entries(b)) out[k as keyof BlockState] = view(i);
      return out as BlockState;
    });
    this.P = view(named.P);
    this.G = view(named.G);
    this.xout = view(named.xout);
    this.xhf = view(named.xhf);
    this.rsf = view(named.rsf);
    this.z = view(named.z);
    this.m0 = view(named.m0);
    this.dx = view(named.dx);
    this.dn = view(named.dn);
    this.dq = view(named.dq);
    this.dk = view(named.dk);
    this.dv = view(named.dv);
    this.dh = view(named.dh);
    this.t1 = view(named.t1);
    this.t2 = view(named.t2);
    this.wt = view(named.wt);
    this.ad = view(named.ad);
    this.dap = view(named.dap);
    this.tt = view(named.tt);
    this.vt = view(named.vt);
    this.kt = view(named.kt);
    this.qt = view(named.qt);
    this.dot = view(named.dot);
    this.smS = view(sm.S);
    this.smST = view(sm.ST);
    this.smE = view(sm.E);
    this.smET = view(sm.ET);
    this.smG = view(sm.G);
    this.smZT = view(sm.ZT);
    this.smAt = new Int32Array(nc > 0 ? layout.numItems + 1 : 0);
    this.off = new Int32Array(maxSeqs + 1);
    this.aoff = new Int32Array(maxSeqs + 1);
  }

  /** Block input of block b (x⁰ for b = 0), or the last block's output for b = blocks. */
  private blockInput(b: number): F {
    return b < this.st.length ? this.st[b].xin : this.xout;
  }

  private prepare(data: ChunkData): void {
    if (data.seqs > this.maxSeqs) throw new RangeError(`GradCore: ${data.seqs} sequences exceed ${this.maxSeqs}`);
    if (data.rows > this.maxRows) throw new RangeError(`GradCore: ${data.rows} rows exceed ${this.maxRows}`);
    const L = this.layout.config.maxLen;
    const H = this.layout.config.heads;
    let o = 0;
    let a = 0;
    for (let s = 0; s < data.seqs; s++) {
      const T = data.lens[s];
      if (T < 1 || T > L) throw new RangeError(`GradCore: sequence ${s} has ${T} rows (1..${L})`);
      this.off[s] = o;
      this.aoff[s] = a;
      o += T;
      a += H * T * T;
    }
    if (o !== data.rows) throw new RangeError(`GradCore: lens sum to ${o}, rows is ${data.rows}`);
    this.off[data.seqs] = o;
    this.aoff[data.seqs] = a;
    if (a > this.st[0]?.a.length) throw new RangeError('GradCore: attention buffer too small');
  }

  /** Mask value for one dropout site: 0 with probability `dropout`, else 1/(1 − dropout). */
  private mask(thr: number, keep: number): number {
    // why shifted: u < thr ⟺ u − 2³¹ < thr − 2³¹, compared without a uint32 heap number
    return this.rng.nextShifted() < thr - 2147483648 ? 0 : keep;
  }

  /**
   * Forward pass; with `train`, dropout masks from `seed` (4 × uint32). Returns the final
   * hidden rows (rows × d, a view of an internal buffer).
   */
  forward(params: ArrayLike<number>, data: ChunkData, train: boolean, dropout = 0, seed: ArrayLike<number> = [1, 2, 3, 4]): F {
    this.prepare(data);
    const p = this.P;
    if (params !== p) {
      if (data.touched && ArrayBuffer.isView(params)) this.eachRange(data.touched, (a, b) => p.set((params as Float32Array).subarray(a, b), a));
      else p.set(params);
    }
    const { dim: d, maxLen: L, heads: H } = this.layout.config;
    const lay = this.layout;
    const mm = this.mm;
    const rate = train ? dropout : 0;
    this.dropout = rate;
    if (rate > 0) this.rng.seed(seed);
    const thr = rate * 4294967296;
    const keep = 1 / (1 - rate);
    const R = data.rows;
    const scale = Math.sqrt(d);
    // embedding
    {
      const X = this.blockInput(0);
      const M0 = this.m0;
      for (let s = 0; s < data.seqs; s++) {
        const T = data.lens[s];
        const o = this.off[s];
        for (let j = 0; j < T; j++) {
          const r = o + j;
          const e = lay.itemEmb + data.inputs[r] * d;
          const pp = lay.posEmb + (L - T + j) * d;
          const x = r * d;
          for (let c = 0; c < d; c++) {
            let v = p[e + c] * scale + p[pp + c];
            if (rate > 0) {
              const m = this.mask(thr, keep);
              M0[x + c] = m;
              v *= m;
            }
            X[x + c] = v;
          }
        }
      }
    }
    const dh = d / H;
    const inv = 1 / Math.sqrt(dh);
    for (let b = 0; b < this.st.length; b++) {
      const S = this.st[b];
      const w = lay.blocks[b];
      const X = S.xin;
      layerNormFwd(R, d, X, p, w.ln1g, w.ln1b, S.xh1, S.rs1, S.n1);
      this.linearFwd(R, d, S.n1, w.wq, w.bq, S.q);
      this.linearFwd(R, d, X, w.wk, w.bk, S.k);
      this.linearFwd(R, d, X, w.wv, w.bv, S.v);
      // attention; O into dn (scratch), then x₁ = O + n₁ into dx (scratch)
      const O = this.dn;
      const A = S.a;
      const MA = S.ma;
      const AD = this.ad;
      for (let s = 0; s < data.seqs; s++) {
        const T = data.lens[s];
        const o = this.off[s];
        for (let h = 0; h < H; h++) {
          const qo = o * d + h * dh;
          const ab = this.aoff[s] + h * T * T;
          // scores S = Q·Kᵀ, causal row blocks
          for (let i0 = 0; i0 < T; i0 += BS) {
            const i1 = Math.min(T, i0 + BS);
            mm(i1 - i0, i1, dh, S.q, qo + i0 * d, d, S.k, qo, d, A, ab + i0 * T, T, false);
          }
          for (let i = 0; i < T; i++) {
            const ar = ab + i * T;
            let max = -Infinity;
            for (let j = 0; j <= i; j++) {
              const sc = A[ar + j] * inv;
              A[ar + j] = sc;
              if (sc > max) max = sc;
            }
            let sum = 0;
            for (let j = 0; j <= i; j++) {
              const e = Math.exp(A[ar + j] - max);
              A[ar + j] = e;
              sum += e;
            }
            const rs = 1 / sum;
            const dr = i * T;
            for (let j = 0; j <= i; j++) {
              const aij = A[ar + j] * rs;
              A[ar + j] = aij;
              if (rate > 0) {
                const m = this.mask(thr, keep);
                MA[ar + j] = m;
                AD[dr + j] = aij * m;
              } else AD[dr + j] = aij;
            }
            // why only up to the end of the diagonal block: the causal products never read further
            const je = blockEnd(i, T);
            for (let j = i + 1; j < je; j++) {
              A[ar + j] = 0;
              AD[dr + j] = 0;
            }
          }
          // O = drop(A)·V = AD · (Vᵀ)ᵀ
          this.tr(T, dh, S.v, qo, d, this.vt, 0, T);
          for (let i0 = 0; i0 < T; i0 += BS) {
            const i1 = Math.min(T, i0 + BS);
            mm(i1 - i0, dh, i1, AD, i0 * T, T, this.vt, 0, T, O, qo + i0 * d, d, false);
          }
        }
      }
      const X1 = this.dx;
      const n1 = S.n1;
      for (let t = 0; t < R * d; t++) X1[t] = O[t] + n1[t];
      layerNormFwd(R, d, X1, p, w.ln2g, w.ln2b, S.xh2, S.rs2, S.n2);
      const Hd = S.hd;
      this.linearFwd(R, d, S.n2, w.w1, w.b1, Hd);
      for (let t = 0; t < R * d; t++) {
        let v = Hd[t];
        if (v < 0) v = 0;
        if (rate > 0) v *= this.mask(thr, keep);
        Hd[t] = v;
      }
      const Xn = this.blockInput(b + 1);
      this.linearFwd(R, d, Hd, w.w2, w.b2, Xn);
      const MF = S.mf;
      const n2 = S.n2;
      for (let t = 0; t < R * d; t++) {
        let v = Xn[t];
        if (rate > 0) {
          const m = this.mask(thr, keep);
          MF[t] = m;
          v *= m;
        }
        Xn[t] = v + n2[t];
      }
    }
    layerNormFwd(R, d, this.blockInput(this.st.length), p, lay.lnfG, lay.lnfB, this.xhf, this.rsf, this.z);
    return this.z;
  }

  /**
   * Softmax cross-entropy of every row: −log softmax over {positive} ∪ `data.softmax` (the
   * positive's own occurrence there masked). Writes ∂/∂z (times `norm`) into `dx` and adds the
   * item-embedding gradients into `G`; returns Σ loss (not yet times `norm`).
   */
  private softmaxLoss(Z: F, data: ChunkData, norm: number): number {
    const items = data.softmax!;
    const nc = items.length;
    if (nc > this.softmaxItems) throw new RangeError(`GradCore: softmax of ${nc} items exceeds softmaxItems ${this.softmaxItems}`);
    const { dim: d } = this.layout.config;
    const emb = this.layout.itemEmb;
    const p = this.P;
    const g = this.G;
    const dZ = this.dx;
    const { smS: S, smST: ST, smE: E, smET: ET, smG: GE, smZT: ZT, mm, tr } = this;
    // why a position table: masking the row's positive is one store, not a compare per item
    const at = this.smAt;
    for (let j = 0; j < nc; j++) {
      const o = emb + items[j] * d;
      for (let c = 0; c < d; c++) E[j * d + c] = p[o + c];
      at[items[j]] = j + 1;
    }
    tr(nc, d, E, 0, d, ET, 0, nc);
    GE.fill(0, 0, nc * d);
    let loss = 0;
    for (let r0 = 0; r0 < data.rows; r0 += SOFTMAX_BLOCK) {
      const rb = Math.min(SOFTMAX_BLOCK, data.rows - r0);
      mm(rb, nc, d, Z, r0 * d, d, E, 0, d, S, 0, nc, false);
      for (let i = 0; i < rb; i++) {
        const r = r0 + i;
        const t = data.targets[r];
        const pe = emb + t * d;
        let lp = 0;
        for (let c = 0; c < d; c++) lp += Z[r * d + c] * p[pe + c];
        const row = i * nc;
        if (at[t] > 0) S[row + at[t] - 1] = -Infinity;
        let mx = lp;
        for (let j = 0; j < nc; j++) if (S[row + j] > mx) mx = S[row + j];
        const ep = Math.exp(lp - mx);
        let sum = ep;
        for (let j = 0; j < nc; j++) {
          const e = Math.exp(S[row + j] - mx);
          S[row + j] = e;
          sum += e;
        }
        loss += Math.log(sum) + mx - lp;
        const f = norm / sum;
        for (let j = 0; j < nc; j++) S[row + j] *= f;
        const gp = (ep / sum - 1) * norm;
        for (let c = 0; c < d; c++) {
          dZ[r * d + c] = gp * p[pe + c];
          g[pe + c] += gp * Z[r * d + c];
        }
      }
      // ∂/∂z += S·E ; ∂/∂E += Sᵀ·Z
      mm(rb, d, nc, S, 0, nc, ET, 0, nc, dZ, r0 * d, d, true);
      tr(rb, nc, S, 0, nc, ST, 0, rb);
      tr(rb, d, Z, r0 * d, d, ZT, 0, rb);
      mm(nc, d, rb, ST, 0, rb, ZT, 0, rb, GE, 0, d, true);
    }
    for (let j = 0; j < nc; j++) {
      const o = emb + items[j] * d;
      for (let c = 0; c < d; c++) g[o + c] += GE[j * d + c];
      at[items[j]] = 0;
    }
    return loss;
  }

  /**
   * Forward + backward: adds ∂(norm · Σ loss)/∂θ to `grads` (same layout as `params`) and
   * returns norm · Σ loss over the chunk's rows. With `assign`, writes the gradient instead of
   * adding it (no need to zero `grads` first; with `data.touched`, only the parameters
   * outside the item embedding and the touched rows are written).
   */
  lossAndGrad(params: ArrayLike<number>, grads: F, data: ChunkData, norm: number, dropout: number, seed: ArrayLike<number>, assign = false): number {
    const Z = this.forward(params, data, dropout > 0, dropout, seed);
    const p = this.P;
    const g = this.G;
    if (data.touched) this.eachRange(data.touched, (a, b) => g.fill(0, a, b));
    else g.fill(0);
    const { dim: d, maxLen: L, heads: H } = this.layout.config;
    const lay = this.layout;
    const mm = this.mm;
    const R = data.rows;
    const rate = this.dropout;
    const keep = 1 / (1 - rate);
    // loss and ∂/∂z
    const dZ = this.dx;
    let loss = 0;
    if (data.softmax) loss = this.softmaxLoss(Z, data, norm);
    for (let r = 0; !data.softmax && r < R; r++) {
      const z = r * d;
      const pe = lay.itemEmb + data.targets[r] * d;
      const ne = lay.itemEmb + data.negatives[r] * d;
      let lp = 0;
      let ln = 0;
      for (let c = 0; c < d; c++) {
        lp += Z[z + c] * p[pe + c];
        ln += Z[z + c] * p[ne + c];
      }
      loss += softplus(-lp) + softplus(ln);
      const gp = (sigmoid(lp) - 1) * norm;
      const gn = sigmoid(ln) * norm;
      for (let c = 0; c < d; c++) {
        const zc = Z[z + c];
        dZ[z + c] = gp * p[pe + c] + gn * p[ne + c];
        g[pe + c] += gp * zc;
        g[ne + c] += gn * zc;
      }
    }
    // final layer norm, in place → gradient wrt the last block's output
    layerNormBwd(R, d, this.dx, this.xhf, this.rsf, p, lay.lnfG, g, lay.lnfG, lay.lnfB, this.dx);
    const dh = d / H;
    const inv = 1 / Math.sqrt(dh);
    for (let b = this.st.length - 1; b >= 0; b--) {
      const S = this.st[b];
      const w = lay.blocks[b];
      const dX = this.dx; // ∂/∂ block output
      // x' = drop(F) + n₂
      const dF = this.dq;
      const MF = S.mf;
      if (rate > 0) for (let t = 0; t < R * d; t++) dF[t] = dX[t] * MF[t];
      else dF.set(dX.subarray(0, R * d));
      const dN2 = this.dn;
      dN2.set(dX.subarray(0, R * d));
      // F = Hd·W₂ᵀ + b₂
      const dHd = this.dh;
      this.linearBwd(R, d, S.hd, dF, w.w2, w.b2, dHd, false);
      // Hd = drop(ReLU(pre)): ∂pre = ∂Hd · m where Hd > 0
      const Hd = S.hd;
      for (let t = 0; t < R * d; t++) dHd[t] = Hd[t] > 0 ? dHd[t] * keep : 0;
      this.linearBwd(R, d, S.n2, dHd, w.w1, w.b1, dN2, true);
      // n₂ = LN₂(x₁): ∂x₁ into dq
      const dX1 = this.dq;
      layerNormBwd(R, d, dN2, S.xh2, S.rs2, p, w.ln2g, g, w.ln2g, w.ln2b, dX1);
      // x₁ = O + n₁: ∂O = ∂x₁, ∂n₁ starts as ∂x₁
      const dN1 = this.dn;
      dN1.set(dX1.subarray(0, R * d));
      const dQ = this.dh;
      const dK = this.dk;
      const dV = this.dv;
      const A = S.a;
      const MA = S.ma;
      const AD = this.ad;
      const DA = this.dap;
      const TT = this.tt;
      const dO = dX1;
      for (let s = 0; s < data.seqs; s++) {
        const T = data.lens[s];
        const o = this.off[s];
        for (let h = 0; h < H; h++) {
          const qo = o * d + h * dh;
          const ab = this.aoff[s] + h * T * T;
          // AD = drop(A) (T × T, zero above the diagonal)
          let Ad: F = AD;
          let adOff = 0;
          if (rate > 0) {
            for (let i = 0; i < T; i++) {
              const ar = ab + i * T;
              const dr = i * T;
              for (let j = 0; j <= i; j++) AD[dr + j] = A[ar + j] * MA[ar + j];
              const je = blockEnd(i, T);
              for (let j = i + 1; j < je; j++) AD[dr + j] = 0;
            }
          } else {
            Ad = A;
            adOff = ab;
          }
          // ∂AD = ∂O·Vᵀ (causal row blocks)
          for (let i0 = 0; i0 < T; i0 += BS) {
            const i1 = Math.min(T, i0 + BS);
            mm(i1 - i0, i1, dh, dO, qo + i0 * d, d, S.v, qo, d, DA, i0 * T, T, false);
          }
          // ∂V = ADᵀ·∂O: row j needs columns i ≥ j of ADᵀ
          this.lowerTranspose(T, Ad, adOff, TT);
          this.tr(T, dh, dO, qo, d, this.dot, 0, T);
          for (let j0 = 0; j0 < T; j0 += BS) {
            const j1 = Math.min(T, j0 + BS);
            mm(j1 - j0, dh, T - j0, TT, j0 * T + j0, T, this.dot, j0, T, dV, qo + j0 * d, d, false);
          }
          // ∂S = A ⊙ (∂A − rowsum(∂A ⊙ A)) / √dₕ with ∂A = ∂AD ⊙ mask; in place in DA
          for (let i = 0; i < T; i++) {
            const ar = ab + i * T;
            const dr = i * T;
            let dot = 0;
            for (let j = 0; j <= i; j++) {
              const ga = rate > 0 ? DA[dr + j] * MA[ar + j] : DA[dr + j];
              DA[dr + j] = ga;
              dot += A[ar + j] * ga;
            }
            for (let j = 0; j <= i; j++) DA[dr + j] = A[ar + j] * (DA[dr + j] - dot) * inv;
            const je = blockEnd(i, T);
            for (let j = i + 1; j < je; j++) DA[dr + j] = 0;
          }
          // ∂Q = ∂S·K
          this.tr(T, dh, S.k, qo, d, this.kt, 0, T);
          for (let i0 = 0; i0 < T; i0 += BS) {
            const i1 = Math.min(T, i0 + BS);
            mm(i1 - i0, dh, i1, DA, i0 * T, T, this.kt, 0, T, dQ, qo + i0 * d, d, false);
          }
          // ∂K = ∂Sᵀ·Q
          this.lowerTranspose(T, DA, 0, TT);
          this.tr(T, dh, S.q, qo, d, this.qt, 0, T);
          for (let j0 = 0; j0 < T; j0 += BS) {
            const j1 = Math.min(T, j0 + BS);
            mm(j1 - j0, dh, T - j0, TT, j0 * T + j0, T, this.qt, j0, T, dK, qo + j0 * d, d, false);
          }
        }
      }
      // Q = n₁Wqᵀ + bq → ∂n₁ += ∂Q·Wq
      this.linearBwd(R, d, S.n1, dQ, w.wq, w.bq, dN1, true);
      // K, V from x: ∂x = ∂K·Wk + ∂V·Wv (into dx, which is free now)
      const dXin = this.dx;
      this.linearBwd(R, d, S.xin, dK, w.wk, w.bk, dXin, false);
      this.linearBwd(R, d, S.xin, dV, w.wv, w.bv, dXin, true, true);
      // n₁ = LN₁(x): ∂x += LN backward of ∂n₁ (via dq as temp)
      layerNormBwd(R, d, dN1, S.xh1, S.rs1, p, w.ln1g, g, w.ln1g, w.ln1b, this.dq);
      for (let t = 0; t < R * d; t++) dXin[t] += this.dq[t];
    }
    // embedding: x⁰ = drop(E[item]·√d + P[pos])
    {
      const dX0 = this.dx;
      const M0 = this.m0;
      const scale = Math.sqrt(d);
      for (let s = 0; s < data.seqs; s++) {
        const T = data.lens[s];
        const o = this.off[s];
        for (let j = 0; j < T; j++) {
          const r = o + j;
          const e = lay.itemEmb + data.inputs[r] * d;
          const pp = lay.posEmb + (L - T + j) * d;
          const x = r * d;
          for (let c = 0; c < d; c++) {
            const v = rate > 0 ? dX0[x + c] * M0[x + c] : dX0[x + c];
            g[e + c] += v * scale;
            g[pp + c] += v;
          }
        }
      }
    }
    // padding row stays zero
    g.fill(0, lay.itemEmb, lay.itemEmb + d);
    if (assign) {
      if (data.touched) this.eachRange(data.touched, (a, b) => grads.set(g.subarray(a, b), a));
      else grads.set(g);
    } else if (data.touched)
      this.eachRange(data.touched, (a, b) => {
        for (let k = a; k < b; k++) grads[k] += g[k];
      });
    else for (let k = 0; k < g.length; k++) grads[k] += g[k];
    return loss * norm;
  }

  /** Calls `f(from, to)` for the parameters outside the item embedding and for each item row in `rows`. */
  private eachRange(rows: Int32Array, f: (from: number, to: number) => void): void {
    const d = this.layout.config.dim;
    const e0 = this.layout.itemEmb;
    const e1 = e0 + (this.layout.numItems + 1) * d;
    if (e0 > 0) f(0, e0);
    for (let k = 0; k < rows.length; k++) f(e0 + rows[k] * d, e0 + (rows[k] + 1) * d);
    if (e1 < this.layout.size) f(e1, this.layout.size);
  }

  /**
   * D[j·T + i] = S[so + i·T + j] for the entries the causal ∂V and ∂K products read: column
   * block [j0, j1) needs rows i ≥ j0 only.
   */
  private lowerTranspose(T: number, S: F, so: number, D: F): void {
    for (let j0 = 0; j0 < T; j0 += BS) {
      const j1 = Math.min(T, j0 + BS);
      this.tr(T - j0, j1 - j0, S, so + j0 * T + j0, T, D, j0 * T + j0, T);
    }
  }

  /** Y = X·Wᵀ + b for R rows of width d, W at P[wo], b at P[bo]. */
  private linearFwd(R: number, d: number, X: F, wo: number, bo: number, Y: F): void {
    const p = this.P;
    this.mm(R, d, d, X, 0, d, p, wo, d, Y, 0, d, false);
    for (let r = 0; r < R; r++) {
      const y = r * d;
      for (let c = 0; c < d; c++) Y[y + c] += p[bo + c];
    }
  }

  /**
   * Backward of Y = X·Wᵀ + b (X rows × d, W d × d at `wo`): G[W] += ∂Yᵀ·X, G[b] += Σ ∂Y,
   * dX (+)= ∂Y·W.
   */
  private linearBwd(R: number, d: number, X: F, dY: F, wo: number, bo: number, dX: F, acc: boolean, xTransposed = false): void {
    const t1 = this.t1;
    const t2 = this.t2;
    const g = this.G;
    // ∂W[j, k] = Σ_r ∂Y[r, j]·X[r, k]: both transposed to d × R, then A·Bᵀ with inner R.
    this.tr(R, d, dY, 0, d, t1, 0, R);
    // why optional: K and V share their input, whose transpose is still in t2 from K's call
    if (!xTransposed) this.tr(R, d, X, 0, d, t2, 0, R);
    this.mm(d, d, R, t1, 0, R, t2, 0, R, g, wo, d, true);
    for (let j = 0; j < d; j++) {
      let s = 0;
      const r0 = j * R;
      for (let r = 0; r < R; r++) s += t1[r0 + r];
      g[bo + j] += s;
    }
    // ∂X[r, k] = Σ_j ∂Y[r, j]·W[j, k] = ∂Y · (Wᵀ)ᵀ
    const wt = this.wt;
    this.tr(d, d, this.P, wo, d, wt, 0, d);
    this.mm(R, d, d, dY, 0, d, wt, 0, d, dX, 0, d, acc);
  }
}

/** End (exclusive) of the causal row block holding row i: columns beyond it are never read. */
function blockEnd(i: number, T: number): number {
  return Math.min(T, (Math.floor(i / BS) + 1) * BS);
}

function softplus(x: number): number {
  return x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x));
}

function sigmoid(x: number): number {
  if (x >= 0) return 1 / (1 + Math.exp(-x));
  const e = Math.exp(x);
  return e / (1 + e);
}

function layerNormFwd(R: number, d: number, X: F, p: F, go: number, bo: number, xh: F, rs: F, Y: F): void {
  for (let r = 0; r < R; r++) {
    const x = r * d;
    let mean = 0;
    for (let c = 0; c < d; c++) mean += X[x + c];
    mean /= d;
    let v = 0;
    for (let c = 0; c < d; c++) {
      const z = X[x + c] - mean;
      v += z * z;
    }
    const rstd = 1 / Math.sqrt(v / d + LN_EPS);
    rs[r] = rstd;
    for (let c = 0; c < d; c++) {
      const h = (X[x + c] - mean) * rstd;
      xh[x + c] = h;
      Y[x + c] = h * p[go + c] + p[bo + c];
    }
  }
}

/**
 * Layer-norm backward: given ∂Y, adds to g[gamma], g[beta] and writes ∂X (may alias ∂Y).
 * ∂x = rstd · (∂x̂ − mean(∂x̂) − x̂ · mean(∂x̂ ⊙ x̂)), ∂x̂ = ∂y ⊙ γ.
 */
function layerNormBwd(R: number, d: number, dY: F, xh: F, rs: F, p: F, go: number, g: F, gg: number, gb: number, dX: F): void {
  for (let r = 0; r < R; r++) {
    const x = r * d;
    let m1 = 0;
    let m2 = 0;
    for (let c = 0; c < d; c++) {
      const dy = dY[x + c];
      const h = xh[x + c];
      g[gg + c] += dy * h;
      g[gb + c] += dy;
      const dxh = dy * p[go + c];
      m1 += dxh;
      m2 += dxh * h;
    }
    m1 /= d;
    m2 /= d;
    const rstd = rs[r];
    for (let c = 0; c < d; c++) dX[x + c] = rstd * (dY[x + c] * p[go + c] - m1 - xh[x + c] * m2);
  }
}
