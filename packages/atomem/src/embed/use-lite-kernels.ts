/**
 * Two faster kernels for tfjs' WASM backend, installed when USE-lite starts its backend.
 *
 * **`SplitV`.**
 * USE-lite splits each attention layer's fused projection ([batch, tokens, 3·d]) into Q, K and V
 * with `SplitV`. tfjs-backend-wasm 4.22 implements `SplitV` as one `Slice` per part, and its
 * `Slice` first calls `backend.readSync(x)`, which copies the whole input out of the WASM heap
 * (`HEAPU8.slice`) into a fresh ArrayBuffer — once per part. At a batch of 256 texts × 95 tokens
 * that is three fresh 150 MB copies for one split, and `tf.profile` put `SplitV` at 21 % of
 * USE-lite's kernel time on 2 cores (`packages/bench/src/use-lite-speed.ts`).
 *
 * This kernel reads the input through a view of the heap (`typedArrayFromHeap`, no copy) and
 * copies each part's rows straight into its output: the same bytes as the default kernel's.
 *
 * **Batched `BatchMatMul`** (attention's Q·Kᵀ and A·V, [batch, heads, tokens, d]). The backend
 * sends a matmul to XNNPACK only when both operands have batch 1; every batched one runs in its
 * scalar fallback loop, measured at 2.3–2.4 GFLOP/s against 28–32 for the XNNPACK ones, which
 * made the attention products 19 % of USE-lite's kernel time. This kernel runs each batch
 * element through the backend's own batch-1 XNNPACK path (Kᵀ copied out first when the graph
 * asks for a transposed operand). XNNPACK sums in another order, so results differ from the
 * fallback's in the last bits (≤ 3·10⁻⁵ on products of magnitude ~10).
 *
 * Both are checked against plain reference loops in `packages/atomem/test/use-lite-kernels.test.ts`.
 * The kernel registry is global to the page or process, so an app that uses tfjs' WASM backend
 * itself gets these kernels too; they compute the same functions.
 */
import * as tf from '@tensorflow/tfjs-core';

/** The parts of the WASM backend these kernels use (tfjs-backend-wasm's `BackendWasm`). */
interface WasmHeapBackend {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
  typedArrayFromHeap(t: tf.TensorInfo): tf.TypedArray;
  disposeData(dataId: tf.DataId): boolean;
}

let installed = false;

/**
 * Replace the WASM backend's `SplitV` and `BatchMatMul` with {@link splitVFromHeap} and
 * {@link batchMatMulPerElement}; later calls do nothing. Must run after
 * `@tensorflow/tfjs-backend-wasm` is imported (its import registers its kernels).
 */
export function installWasmKernels(): void {
  if (installed) return;
  const split = replace(tf.SplitV);
  const matMul = replace(tf.BatchMatMul);
  tf.registerKernel({
    kernelName: tf.SplitV,
    backendName: 'wasm',
    kernelFunc: (args) => {
      const x = (args.inputs as tf.SplitVInputs).x as tf.TensorInfo;
      // why: strings live outside the heap; leave them to the backend's own kernel.
      if (x.dtype === 'string') return split.kernelFunc(args);
      return splitVFromHeap(x, args.attrs as unknown as tf.SplitVAttrs, args.backend as unknown as WasmHeapBackend);
    },
  });
  tf.registerKernel({
    kernelName: tf.BatchMatMul,
    backendName: 'wasm',
    setupFunc: matMul.setupFunc,
    kernelFunc: (args) => {
      const { a, b } = args.inputs as tf.BatchMatMulInputs;
      const attrs = args.attrs as unknown as tf.BatchMatMulAttrs;
      const plan = perElementPlan(a as tf.TensorInfo, b as tf.TensorInfo, attrs);
      if (plan === null) return matMul.kernelFunc(args);
      return batchMatMulPerElement(a as tf.TensorInfo, b as tf.TensorInfo, plan, args.backend as unknown as WasmHeapBackend, matMul.kernelFunc);
    },
  });
  installed = true;
}

/** Unregister the backend's kernel `name` and return its config (to call as the fallback). */
function replace(name: string): tf.KernelConfig {
  const current = tf.getKernel(name, 'wasm');
  if (current === undefined) {
    throw new Error(`installWasmKernels: the tfjs WASM backend has no ${name} kernel registered (import @tensorflow/tfjs-backend-wasm first)`);
  }
  tf.unregisterKernel(name, 'wasm');
  return current;
}

/**
 * `SplitV` over a tensor in the WASM heap: the input seen as [outer, size(axis) · inner] rows,
 * each part a contiguous run of `size(part) · inner` values in every row.
 */
export function splitVFromHeap(x: tf.TensorInfo, attrs: tf.SplitVAttrs, backend: WasmHeapBackend): tf.TensorInfo[] {
  const axis = tf.util.parseAxisParam(attrs.axis, x.shape)[0];
  const sizes = tf.backend_util.prepareSplitSize(x, attrs.numOrSizeSplits, axis);
  let outer = 1;
  for (let d = 0; d < axis; d++) outer *= x.shape[d];
  let inner = 1;
  for (let d = axis + 1; d < x.shape.length; d++) inner *= x.shape[d];
  const rowIn = x.shape[axis] * inner;
  let begin = 0;
  return sizes.map((size) => {
    const shape = x.shape.slice();
    shape[axis] = size;
    const out = backend.makeOutput(shape, x.dtype);
    // why: views taken after makeOutput — an allocation may grow the heap and detach older views.
    const from = backend.typedArrayFromHeap(x);
    const to = backend.typedArrayFromHeap(out);
    const rowOut = size * inner;
    const at = begin * inner;
    if (rowOut > 0) {
      for (let r = 0; r < outer; r++) {
        const src = r * rowIn + at;
        to.set(from.subarray(src, src + rowOut), r * rowOut);
      }
    }
    begin += size;
    return out;
  });
}

/** Sizes of a batched product that goes element by element; null: leave it to the backend. */
export interface PerElementPlan {
  batch: number;
  m: number;
  k: number;
  n: number;
  transposeB: boolean;
}

/**
 * Products with fewer multiply-adds per batch element stay on the backend's loop, where the
 * per-element overhead (three allocations, an XNNPACK operator) would weigh most. A chosen
 * bound, not a measured crossover: USE-lite's attention products are 10–50× above it.
 */
const MIN_ELEMENT_MACS = 16_384;

export function perElementPlan(a: tf.TensorInfo, b: tf.TensorInfo, attrs: tf.BatchMatMulAttrs): PerElementPlan | null {
  if (a.dtype !== 'float32' || b.dtype !== 'float32' || attrs.transposeA) return null;
  if (a.shape.length < 3 || a.shape.length !== b.shape.length) return null;
  // why: no broadcasting here — the batch dimensions must be equal.
  for (let d = 0; d < a.shape.length - 2; d++) if (a.shape[d] !== b.shape[d]) return null;
  const rank = a.shape.length;
  let batch = 1;
  for (let d = 0; d < rank - 2; d++) batch *= a.shape[d];
  const m = a.shape[rank - 2];
  const k = a.shape[rank - 1];
  const n = attrs.transposeB ? b.shape[rank - 2] : b.shape[rank - 1];
  if ((attrs.transposeB ? b.shape[rank - 1] : b.shape[rank - 2]) !== k) return null; // the backend reports it
  if (batch < 2 || m * k * n < MIN_ELEMENT_MACS) return null;
  return { batch, m, k, n, transposeB: attrs.transposeB };
}

/**
 * A batched `a · b` (or `a · bᵀ`) as one batch-1 product per element, each through the backend's
 * own kernel (`single`), which sends batch-1 products to XNNPACK.
 */
export function batchMatMulPerElement(
  a: tf.TensorInfo,
  b: tf.TensorInfo,
  plan: PerElementPlan,
  backend: WasmHeapBackend,
  single: tf.KernelFunc,
): tf.TensorInfo {
  const { batch, m, k, n, transposeB } = plan;
  const out = backend.makeOutput([...a.shape.slice(0, -2), m, n], 'float32');
  const aOne = backend.makeOutput([1, m, k], 'float32');
  try {
    for (let e = 0; e < batch; e++) {
      // why: a fresh tensor each time — the backend caches its XNNPACK operator (with the packed
      // right operand) by the right operand's id, and frees it when that tensor is disposed.
      const bOne = backend.makeOutput([1, k, n], 'float32');
      try {
        // why: views taken after each allocation — growing the heap detaches older views.
        const from = backend.typedArrayFromHeap(a);
        backend.typedArrayFromHeap(aOne).set(from.subarray(e * m * k, (e + 1) * m * k));
        const right = backend.typedArrayFromHeap(b);
        const to = backend.typedArrayFromHeap(bOne);
        if (transposeB) {
          const at = e * n * k;
          for (let j = 0; j < n; j++) {
            const row = at + j * k;
            for (let i = 0; i < k; i++) to[i * n + j] = right[row + i];
          }
        } else {
          to.set(right.subarray(e * k * n, (e + 1) * k * n));
        }
        const product = single({
          inputs: { a: aOne, b: bOne },
          attrs: { transposeA: false, transposeB: false },
          backend: backend as unknown as tf.KernelBackend,
        }) as tf.TensorInfo;
        try {
          backend.typedArrayFromHeap(out).set(backend.typedArrayFromHeap(product), e * m * n);
        } finally {
          backend.disposeData(product.dataId);
        }
      } finally {
        backend.disposeData(bOne.dataId);
      }
    }
  } catch (err) {
    backend.disposeData(out.dataId);
    throw err;
  } finally {
    backend.disposeData(aOne.dataId);
  }
  return out;
}
