/**
 * SASRec training in Node, faithful to the authors' TensorFlow code (kang205/SASRec):
 *
 * - sampler: each step draws `batchSize` users uniformly (with replacement) among those with
 *   at least 2 items; a user's last `maxLen + 1` items give inputs seq[t] and targets
 *   seq[t + 1]; one negative per position, uniform over the items the user never had;
 *   an epoch is ⌊users / batchSize⌋ steps (`num_batch` of main.py);
 * - loss: binary cross-entropy of the positive and the negative logit at every real
 *   (non-padded) position, averaged over those positions; plus `l2`·½‖·‖² on the item and
 *   position embeddings (`l2_emb`, 0 in the original);
 * - Adam (β₁ 0.9, β₂ 0.98, ε 1e-8, TensorFlow's bias correction), dense updates of every
 *   parameter (the original's learning rate is 0.001; the default here, 0.002, was chosen
 *   on validation, see {@link SASREC_DEFAULTS});
 * - initialisation: Glorot-uniform for every matrix and embedding table (TensorFlow's default
 *   initializer), zero biases, layer norms γ = 1, β = 0; padding row 0 kept at zero.
 *
 * Data parallel over `threads` (Node worker threads sharing the parameters through a
 * SharedArrayBuffer). Every batch is cut into `chunks` fixed parts whose gradients are
 * summed in chunk order, and the dropout masks of a chunk depend only on (seed, step,
 * chunk): the result is bit-identical for any thread count.
 */
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { Rng } from '../../core/rng.js';
import { flatten, makeLayout, weightsView, type Layout } from './layout.js';
import type { SasrecConfig, SasrecWeights } from './model.js';
import { GradCore, type ChunkData } from './train-core.js';

export interface SasrecTrainOptions {
  maxLen?: number;
  dim?: number;
  blocks?: number;
  heads?: number;
  /** Dropout rate at every dropout site. Default 0.2. */
  dropout?: number;
  /** Epochs of ⌊users / batchSize⌋ steps. Default 80 (chosen on validation with lr 0.002). */
  epochs?: number;
  /** Adam learning rate. Default 0.002 (the original: 0.001). */
  lr?: number;
  batchSize?: number;
  /** L2 (½·l2·‖θ‖²) on the item and position embeddings. Default 0 (as the original). */
  l2?: number;
  beta1?: number;
  beta2?: number;
  epsilon?: number;
  seed?: number;
  /** Threads computing gradients (1 = this thread only). Default min(2, available cores). */
  threads?: number;
  /** Fixed parts per batch (≥ threads for full use). Default 2. */
  chunks?: number;
  /**
   * `bce` (default, the original): one sampled negative per position, binary cross-entropy.
   * `ce`: full-softmax cross-entropy over every item (Klenitskiy & Vasilev, RecSys 2023).
   * `sampled-softmax`: softmax cross-entropy over the positive and `negatives` items drawn
   * uniformly per chunk, shared by its rows (the positive's own occurrence masked).
   */
  loss?: 'bce' | 'ce' | 'sampled-softmax';
  /** `sampled-softmax`: negatives per chunk. Default 256. */
  negatives?: number;
  /** Start from these weights instead of a fresh initialisation. */
  init?: SasrecWeights;
  /**
   * Item-embedding rows are zeroed, summed and updated only where a step touched them (its
   * inputs, positives, negatives and softmax items: lazy Adam, as TensorFlow's LazyAdam), so a
   * step costs O(rows touched · d) there instead of O(catalog · d). Default false (the
   * original's dense updates, bit-identical to earlier releases).
   */
  sparseEmbeddings?: boolean;
  /** Wall-clock budget in seconds: training stops after the step that reaches it. Default none. */
  budgetSeconds?: number;
  /**
   * Called after every step with its loss; `weights` is a live view (copy to keep). Returning
   * `false` stops training after this step.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a callback that returns nothing is the common case
  onStep?: (step: number, loss: number, weights: SasrecWeights, seconds: number) => void | boolean;
  /**
   * Called after each epoch with its mean loss; `weights` is a live view (copy to keep).
   * Returning `false` stops training after this epoch (early stopping).
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a callback that returns nothing is the common case
  onEpoch?: (epoch: number, loss: number, weights: SasrecWeights) => void | boolean | Promise<void | boolean>;
}

/**
 * Defaults: the architecture of EVAL.md's SASRec row (L 100, d 64, 2 blocks, 1 head, dropout
 * 0.2) and the original's optimiser, except the learning rate: on ML-100K validation cases
 * (`npm run tune:sasrec`, see README.md) lr 0.002 peaks at 80 epochs (NDCG@10 0.8235), as high
 * as the original lr 0.001 gets in 150 (0.8215), in half the training time.
 */
export const SASREC_DEFAULTS = {
  maxLen: 100,
  dim: 64,
  blocks: 2,
  heads: 1,
  dropout: 0.2,
  epochs: 80,
  lr: 0.002,
  batchSize: 128,
  l2: 0,
  beta1: 0.9,
  beta2: 0.98,
  epsilon: 1e-8,
  seed: 2026,
  chunks: 2,
} as const;

export interface TrainResult {
  weights: SasrecWeights;
  /** Mean loss of each epoch. */
  losses: number[];
  steps: number;
  seconds: number;
  threads: number;
  /** Why training ended: all `epochs` ran, the time budget, or a callback returned false. */
  stoppedBy: 'epochs' | 'budget' | 'callback';
}

/** TensorFlow-default initialisation (Glorot uniform for matrices and tables). */
export function initWeights(layout: Layout, seed: number): Float32Array {
  const rng = Rng.derive(seed, 'sasrec-init');
  const { dim: d, maxLen: L } = layout.config;
  const n = layout.numItems;
  const flat = new Float32Array(layout.size);
  const glorot = (o: number, rows: number, cols: number) => {
    const lim = Math.sqrt(6 / (rows + cols));
    for (let k = 0; k < rows * cols; k++) flat[o + k] = (rng.next() * 2 - 1) * lim;
  };
  glorot(layout.itemEmb, n + 1, d);
  flat.fill(0, layout.itemEmb, layout.itemEmb + d);
  glorot(layout.posEmb, L, d);
  for (const b of layout.blocks) {
    for (const w of [b.wq, b.wk, b.wv, b.w1, b.w2]) glorot(w, d, d);
    flat.fill(1, b.ln1g, b.ln1g + d);
    flat.fill(1, b.ln2g, b.ln2g + d);
  }
  flat.fill(1, layout.lnfG, layout.lnfG + d);
  return flat;
}

/** 4 × uint32 seed of the dropout masks of one (step, chunk). */
export function dropoutSeed(seed: number, step: number, chunk: number): Uint32Array {
  const r = Rng.derive(seed, 'sasrec-dropout', step, chunk);
  return Uint32Array.of(r.nextUint32(), r.nextUint32(), r.nextUint32(), r.nextUint32());
}

/**
 * Draws the batches of the original sampler. `sequences[u]` are item indices 1..numItems,
 * oldest first.
 */
export class Sampler {
  private readonly eligible: number[];
  private readonly rng: Rng;
  private readonly stamp: Int32Array;
  private stampValue = 0;

  constructor(
    private readonly sequences: ReadonlyArray<ArrayLike<number>>,
    private readonly numItems: number,
    private readonly maxLen: number,
    seed: number,
    /** Softmax items per chunk: 0 = none (BCE), `numItems` = all (full cross-entropy), else that many uniform draws. */
    private readonly softmax = 0,
  ) {
    this.eligible = [];
    sequences.forEach((s, u) => {
      if (s.length >= 2) this.eligible.push(u);
    });
    this.rng = Rng.derive(seed, 'sasrec-sampler');
    this.stamp = new Int32Array(numItems + 1);
    if (softmax >= numItems) {
      this.allItems = new Int32Array(numItems);
      for (let i = 0; i < numItems; i++) this.allItems[i] = i + 1;
    }
  }

  /** Full cross-entropy: items 1..numItems, shared by every chunk (read-only). */
  private readonly allItems?: Int32Array;

  get users(): number {
    return this.eligible.length;
  }

  /** One batch of `size` users cut into `chunks` contiguous parts. */
  batch(size: number, chunks: number): ChunkData[] {
    const users = Array.from({ length: size }, () => this.eligible[this.rng.int(this.eligible.length)]);
    const per = Math.ceil(size / chunks);
    const out: ChunkData[] = [];
    for (let c = 0; c < chunks; c++) {
      const part = users.slice(c * per, (c + 1) * per);
      const lens = new Int32Array(part.length);
      let rows = 0;
      part.forEach((u, s) => {
        lens[s] = Math.min(this.sequences[u].length - 1, this.maxLen);
        rows += lens[s];
      });
      const inputs = new Int32Array(rows);
      const targets = new Int32Array(rows);
      const negatives = new Int32Array(rows);
      let r = 0;
      for (let s = 0; s < part.length; s++) {
        const seq = this.sequences[part[s]];
        const n = seq.length;
        const T = lens[s];
        const mark = ++this.stampValue;
        for (let k = 0; k < n; k++) this.stamp[seq[k]] = mark;
        for (let j = 0; j < T; j++) {
          inputs[r] = seq[n - 1 - T + j];
          targets[r] = seq[n - T + j];
          let neg = 1 + this.rng.int(this.numItems);
          for (let tries = 0; this.stamp[neg] === mark && tries < 1000; tries++) neg = 1 + this.rng.int(this.numItems);
          negatives[r] = neg;
          r++;
        }
      }
      const chunk: ChunkData = { seqs: part.length, lens, rows, inputs, targets, negatives };
      if (this.allItems) chunk.softmax = this.allItems;
      else if (this.softmax > 0) {
        const mark = ++this.stampValue;
        const drawn = new Int32Array(this.softmax);
        for (let k = 0; k < drawn.length; ) {
          const it = 1 + this.rng.int(this.numItems);
          if (this.stamp[it] === mark) continue;
          this.stamp[it] = mark;
          drawn[k++] = it;
        }
        chunk.softmax = drawn;
      }
      out.push(chunk);
    }
    return out.filter((c) => c.seqs > 0);
  }
}

/** A gradient thread; from TypeScript sources (tsx, vitest) it registers tsx's loader first. */
function startWorker(workerData: unknown): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./train-worker.js', import.meta.url), { workerData });
  // why: Node 20 does not apply the parent's `--import tsx` loader to worker threads.
  const entry = new URL('./train-worker.ts', import.meta.url).href;
  const boot = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(entry)}); }).catch((e) => { console.error(e); process.exit(1); });`;
  return new Worker(boot, { eval: true, workerData });
}

interface WorkerHandle {
  worker: Worker;
  pending?: { resolve: (loss: number) => void; reject: (e: Error) => void };
}

/** Trains SASRec on `sequences` (item indices 1..numItems, oldest first). */
export async function trainSasrec(sequences: ReadonlyArray<ArrayLike<number>>, numItems: number, options: SasrecTrainOptions = {}): Promise<TrainResult> {
  const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as SasrecTrainOptions;
  const o = { ...SASREC_DEFAULTS, ...defined };
  const config: SasrecConfig = options.init?.config ?? { maxLen: o.maxLen, dim: o.dim, blocks: o.blocks, heads: o.heads };
  const layout = makeLayout(config, numItems);
  if (!(o.dropout >= 0 && o.dropout < 1)) throw new RangeError(`trainSasrec: dropout must be in [0, 1), got ${o.dropout}`);
  if (!Number.isInteger(o.batchSize) || o.batchSize < 1) throw new RangeError(`trainSasrec: batchSize must be a positive integer, got ${o.batchSize}`);
  if (!Number.isInteger(o.epochs) || o.epochs < 0) throw new RangeError(`trainSasrec: epochs must be a non-negative integer, got ${o.epochs}`);
  for (const s of sequences) {
    for (let k = 0; k < s.length; k++)
      if (!Number.isInteger(s[k]) || s[k] < 1 || s[k] > numItems) throw new RangeError(`trainSasrec: item index ${s[k]} outside 1..${numItems}`);
  }
  const chunks = Math.max(1, Math.min(o.chunks, o.batchSize));
  const threads = Math.max(1, Math.min(o.threads ?? Math.min(2, availableParallelism()), chunks));
  const seqsPerChunk = Math.ceil(o.batchSize / chunks);
  const maxRows = seqsPerChunk * config.maxLen;
  const P = layout.size;

  const paramsSab = new SharedArrayBuffer(P * 4);
  const params = new Float32Array(paramsSab);
  params.set(options.init ? flatten(layout, options.init) : initWeights(layout, o.seed));
  const gradsSab = new SharedArrayBuffer(P * 4 * chunks);
  const grads = Array.from({ length: chunks }, (_, c) => new Float32Array(gradsSab, c * P * 4, P));
  const g = new Float32Array(P);
  const m = new Float32Array(P);
  const v = new Float32Array(P);

  const lossKind = o.loss ?? 'bce';
  if (!['bce', 'ce', 'sampled-softmax'].includes(lossKind))
    throw new RangeError(`trainSasrec: loss must be bce, ce or sampled-softmax, got ${String(lossKind)}`);
  const negatives = o.negatives ?? 256;
  if (lossKind === 'sampled-softmax' && !(Number.isInteger(negatives) && negatives >= 1))
    throw new RangeError(`trainSasrec: negatives must be a positive integer, got ${negatives}`);
  const softmaxItems = lossKind === 'ce' ? numItems : lossKind === 'sampled-softmax' ? Math.min(negatives, numItems) : 0;
  const sampler = new Sampler(sequences, numItems, config.maxLen, o.seed, softmaxItems);
  const stepsPerEpoch = Math.max(1, Math.floor(sequences.length / o.batchSize));
  const core = new GradCore(layout, maxRows, seqsPerChunk, { softmaxItems });

  const workers: WorkerHandle[] = [];
  for (let t = 1; t < threads; t++) {
    const worker = startWorker({ layout, maxRows, maxSeqs: seqsPerChunk, paramsSab, gradsSab, dropout: o.dropout, softmaxItems });
    const h: WorkerHandle = { worker };
    worker.on('message', (msg: { loss?: number; error?: string }) => {
      const p = h.pending;
      h.pending = undefined;
      if (!p) return;
      if (msg.error) p.reject(new Error(`SASRec worker: ${msg.error}`));
      else p.resolve(msg.loss ?? 0);
    });
    worker.on('error', (e) => {
      h.pending?.reject(e);
      h.pending = undefined;
    });
    workers.push(h);
  }
  const onWorker = (h: WorkerHandle, msg: unknown, transfer: ArrayBuffer[]) =>
    new Promise<number>((resolve, reject) => {
      h.pending = { resolve, reject };
      h.worker.postMessage(msg, transfer);
    });

  const sparse = o.sparseEmbeddings ?? false;
  if (o.budgetSeconds !== undefined && !(o.budgetSeconds > 0)) throw new RangeError(`trainSasrec: budgetSeconds must be positive, got ${o.budgetSeconds}`);
  // Sparse mode: the item-embedding rows a step touches, and the parameter ranges it updates
  // (every parameter outside the item embedding, plus those rows).
  const d = config.dim;
  const E0 = layout.itemEmb;
  const E1 = E0 + (numItems + 1) * d;
  const rowMark = new Int32Array(numItems + 1);
  let rowStamp = 0;
  let touched: Int32Array = new Int32Array(0);
  const touchedRows = (parts: ChunkData[]): Int32Array => {
    rowStamp++;
    const rows: number[] = [];
    const add = (a: ArrayLike<number>) => {
      for (let k = 0; k < a.length; k++) {
        const r = a[k];
        if (rowMark[r] !== rowStamp) {
          rowMark[r] = rowStamp;
          rows.push(r);
        }
      }
    };
    for (const c of parts) {
      add(c.inputs);
      add(c.targets);
      add(c.negatives);
      if (c.softmax) add(c.softmax);
    }
    return Int32Array.from(rows).sort();
  };
  const sparseRanges = (rows: Int32Array): Array<[number, number]> => {
    const out: Array<[number, number]> = [];
    if (E0 > 0) out.push([0, E0]);
    for (const r of rows) out.push([E0 + r * d, E0 + (r + 1) * d]);
    if (E1 < P) out.push([E1, P]);
    return out;
  };
  let stoppedBy: TrainResult['stoppedBy'] = 'epochs';
  const started = performance.now();
  const losses: number[] = [];
  let step = 0;
  const live = weightsView(layout, params);
  try {
    if (sampler.users === 0) throw new RangeError('trainSasrec: no sequence has 2 or more items');
    for (let epoch = 1; epoch <= o.epochs; epoch++) {
      let epochLoss = 0;
      let stepsDone = 0;
      for (let s = 0; s < stepsPerEpoch; s++) {
        step++;
        const parts = sampler.batch(o.batchSize, chunks);
        // before the chunks' buffers move to the workers
        if (sparse) {
          touched = touchedRows(parts);
          for (const c of parts) c.touched = touched;
        }
        let total = 0;
        for (const c of parts) total += c.rows;
        const norm = 1 / total;
        const jobs: Array<Promise<number>> = [];
        const local: number[] = [];
        // chunk c runs on thread c % threads; thread 0 is this one
        parts.forEach((c, ci) => {
          const t = ci % threads;
          if (t > 0) {
            const msg = { chunk: ci, data: c, norm, seed: dropoutSeed(o.seed, step, ci) };
            jobs.push(onWorker(workers[t - 1], msg, [c.inputs.buffer, c.targets.buffer, c.negatives.buffer, c.lens.buffer] as ArrayBuffer[]));
          } else local.push(ci);
        });
        // why: a worker handles one message at a time; with more chunks than threads, its later
        // chunks wait for the earlier ones (postMessage queues them in order).
        let loss = 0;
        // every chunk writes (not adds) its whole gradient slot (sparse: the touched rows)
        for (const ci of local) loss += core.lossAndGrad(params, grads[ci], parts[ci], norm, o.dropout, dropoutSeed(o.seed, step, ci), true);
        for (const l of await Promise.all(jobs)) loss += l;
        if (!sparse && o.l2 === 0) adamSum(params, grads, parts.length, m, v, step, o.lr, o.beta1, o.beta2, o.epsilon);
        else if (!sparse) {
          g.set(grads[0]);
          for (let c = 1; c < parts.length; c++) {
            const gc = grads[c];
            for (let k = 0; k < P; k++) g[k] += gc[k];
          }
          loss += addL2(layout, params, g, o.l2);
          adam(params, g, m, v, step, o.lr, o.beta1, o.beta2, o.epsilon);
        } else {
          const ranges = sparseRanges(touched);
          for (const [a, b] of ranges) {
            g.set(grads[0].subarray(a, b), a);
            for (let c = 1; c < parts.length; c++) {
              const gc = grads[c];
              for (let k = a; k < b; k++) g[k] += gc[k];
            }
          }
          if (o.l2 > 0) loss += addL2(layout, params, g, o.l2, touched);
          for (const [a, b] of ranges) adam(params, g, m, v, step, o.lr, o.beta1, o.beta2, o.epsilon, a, b);
        }
        params.fill(0, layout.itemEmb, layout.itemEmb + config.dim);
        epochLoss += loss;
        stepsDone++;
        const seconds = (performance.now() - started) / 1000;
        if (options.onStep?.(step, loss, live, seconds) === false) {
          stoppedBy = 'callback';
          break;
        }
        if (o.budgetSeconds !== undefined && seconds >= o.budgetSeconds) {
          stoppedBy = 'budget';
          break;
        }
      }
      if (stepsDone > 0) losses.push(epochLoss / stepsDone);
      if (stoppedBy !== 'epochs') break;
      if ((await options.onEpoch?.(epoch, epochLoss / stepsPerEpoch, live)) === false) {
        stoppedBy = 'callback';
        break;
      }
    }
  } finally {
    await Promise.all(workers.map((h) => h.worker.terminate()));
  }
  const out = new Float32Array(P);
  out.set(params);
  return { weights: weightsView(layout, out), losses, steps: step, seconds: (performance.now() - started) / 1000, threads, stoppedBy };
}

/**
 * Adds l2·θ to the embedding gradients; returns ½·l2·‖θ‖² of the embeddings (with `rows`: of
 * those item rows and the position embedding only).
 */
function addL2(layout: Layout, p: Float32Array, g: Float32Array, l2: number, rows?: Int32Array): number {
  let s = 0;
  const d = layout.config.dim;
  const range = (a: number, b: number) => {
    for (let k = a; k < b; k++) {
      g[k] += l2 * p[k];
      s += p[k] * p[k];
    }
  };
  if (rows) for (const r of rows) range(layout.itemEmb + r * d, layout.itemEmb + (r + 1) * d);
  else range(layout.itemEmb, layout.posEmb);
  range(layout.posEmb, layout.posEmb + layout.config.maxLen * d);
  return 0.5 * l2 * s;
}

/**
 * {@link adam} on the sum of the first `parts` gradient slots, summed in slot order with float32
 * rounding after each addition: the same values as summing into a float32 array first, without
 * that extra pass over every parameter.
 */
export function adamSum(
  p: Float32Array,
  grads: Float32Array[],
  parts: number,
  m: Float32Array,
  v: Float32Array,
  t: number,
  lr: number,
  b1: number,
  b2: number,
  eps: number,
): void {
  const lrt = (lr * Math.sqrt(1 - b2 ** t)) / (1 - b1 ** t);
  const c1 = 1 - b1;
  const c2 = 1 - b2;
  const g0 = grads[0];
  const g1 = parts > 1 ? grads[1] : g0;
  const n = p.length;
  for (let k = 0; k < n; k++) {
    let gk = g0[k];
    if (parts > 1) {
      gk = Math.fround(gk + g1[k]);
      for (let c = 2; c < parts; c++) gk = Math.fround(gk + grads[c][k]);
    }
    const mk = (m[k] = b1 * m[k] + c1 * gk);
    const vk = (v[k] = b2 * v[k] + c2 * gk * gk);
    p[k] -= (lrt * mk) / (Math.sqrt(vk) + eps);
  }
}

/** One Adam step (on parameters `from`..`to`) with TensorFlow's bias correction folded into the rate. */
export function adam(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  t: number,
  lr: number,
  b1: number,
  b2: number,
  eps: number,
  from = 0,
  to = p.length,
): void {
  const lrt = (lr * Math.sqrt(1 - b2 ** t)) / (1 - b1 ** t);
  const c1 = 1 - b1;
  const c2 = 1 - b2;
  for (let k = from; k < to; k++) {
    const gk = g[k];
    const mk = (m[k] = b1 * m[k] + c1 * gk);
    const vk = (v[k] = b2 * v[k] + c2 * gk * gk);
    p[k] -= (lrt * mk) / (Math.sqrt(vk) + eps);
  }
}
