/**
 * A WebAssembly SIMD version of {@link mmNT} (C (+)= A·Bᵀ), assembled here byte by byte:
 * no compiler, no download, no binary in the repository. The module imports its memory;
 * every operand must live in that memory (the trainer allocates all its buffers there).
 *
 * The wasm function does the bulk: rows in pairs, columns in fours, k in fours (eight f32x4
 * accumulators, horizontal sums at the end); the ragged edges (an odd last row, the last
 * N mod 4 columns, the last K mod 4 terms) are added by the scalar JS kernel on the same
 * memory, so any shape works.
 */
import { mmNT as mmNTjs, transpose as transposeJs, type F } from './kernels.js';

// --- a tiny assembler -------------------------------------------------------------------

function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n >>>= 7;
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

const str = (s: string) => [...uleb(s.length), ...[...s].map((c) => c.charCodeAt(0))];
const vec = (items: number[][]) => [...uleb(items.length), ...items.flat()];
const section = (id: number, body: number[]) => [id, ...uleb(body.length), ...body];

const I32 = 0x7f;
const V128 = 0x7b;

const op = {
  get: (i: number) => [0x20, ...uleb(i)],
  set: (i: number) => [0x21, ...uleb(i)],
  tee: (i: number) => [0x22, ...uleb(i)],
  i32: (v: number) => [0x41, ...sleb(v)],
  add: [0x6a],
  mul: [0x6c],
  shl: [0x74],
  geS: [0x4e],
  block: [0x02, 0x40],
  loop: [0x03, 0x40],
  if: [0x04, 0x40],
  else: [0x05],
  end: [0x0b],
  br: (d: number) => [0x0c, ...uleb(d)],
  brIf: (d: number) => [0x0d, ...uleb(d)],
  f32load: (offset = 0) => [0x2a, 2, ...uleb(offset)],
  f32store: (offset = 0) => [0x38, 2, ...uleb(offset)],
  f32add: [0x92],
  v128load: (offset = 0) => [0xfd, 0x00, 2, ...uleb(offset)],
  v128store: (offset = 0) => [0xfd, 0x0b, 2, ...uleb(offset)],
  /** i8x16.shuffle picking float lanes (0–3 first operand, 4–7 second). */
  shuffle: (lanes: number[]) => [0xfd, 0x0d, ...lanes.flatMap((l) => [4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3])],
  v128zero: [0xfd, 0x0c, ...new Array(16).fill(0)],
  f32x4add: [0xfd, ...uleb(228)],
  f32x4mul: [0xfd, ...uleb(230)],
  lane: (l: number) => [0xfd, 0x1f, l],
};

/** Body of `tr(M, N, A, lda, B, ldb)`: B[j][i] = A[i][j] for i < M, j < N (both multiples of 4), 4 × 4 tiles by shuffles. */
function transposeBody(): number[] {
  const [M, N, A, LDA, B, LDB] = [0, 1, 2, 3, 4, 5];
  const [I, J, A0, B0] = [6, 7, 8, 9];
  const [R0, R1, R2, R3, T0, T1, T2, T3] = [10, 11, 12, 13, 14, 15, 16, 17];
  const code: number[] = [];
  const e = (...parts: number[][]) => {
    for (const p of parts) code.push(...p);
  };
  e(op.i32(0), op.set(I));
  e(op.block, op.loop);
  e(op.get(I), op.get(M), op.geS, op.brIf(1));
  e(op.i32(0), op.set(J));
  e(op.block, op.loop);
  e(op.get(J), op.get(N), op.geS, op.brIf(1));
  e(op.get(A), op.get(I), op.get(LDA), op.mul, op.add, op.get(J), op.i32(2), op.shl, op.add, op.set(A0));
  const rows = [R0, R1, R2, R3];
  for (let r = 0; r < 4; r++) {
    e(op.get(A0));
    for (let k = 0; k < r; k++) e(op.get(LDA), op.add);
    e(op.v128load(), op.set(rows[r]));
  }
  e(op.get(R0), op.get(R1), op.shuffle([0, 4, 1, 5]), op.set(T0));
  e(op.get(R0), op.get(R1), op.shuffle([2, 6, 3, 7]), op.set(T1));
  e(op.get(R2), op.get(R3), op.shuffle([0, 4, 1, 5]), op.set(T2));
  e(op.get(R2), op.get(R3), op.shuffle([2, 6, 3, 7]), op.set(T3));
  e(op.get(B), op.get(J), op.get(LDB), op.mul, op.add, op.get(I), op.i32(2), op.shl, op.add, op.set(B0));
  const outs: Array<[number, number, number[]]> = [
    [T0, T2, [0, 1, 4, 5]],
    [T0, T2, [2, 3, 6, 7]],
    [T1, T3, [0, 1, 4, 5]],
    [T1, T3, [2, 3, 6, 7]],
  ];
  outs.forEach(([x, y, lanes], r) => {
    e(op.get(B0));
    for (let k = 0; k < r; k++) e(op.get(LDB), op.add);
    e(op.get(x), op.get(y), op.shuffle(lanes), op.v128store());
  });
  e(op.get(J), op.i32(4), op.add, op.set(J));
  e(op.br(0), op.end, op.end);
  e(op.get(I), op.i32(4), op.add, op.set(I));
  e(op.br(0), op.end, op.end);
  e(op.end);
  return [
    ...vec([
      [...uleb(4), I32],
      [...uleb(8), V128],
    ]),
    ...code,
  ];
}

/**
 * Bytes of the module: exports `mm(M, N, K, A, lda, B, ldb, C, ldc, acc)` and
 * `tr(M, N, A, lda, B, ldb)`, pointers and strides in bytes.
 */
export function simdModuleBytes(): Uint8Array {
  // params 0..9: M N K A lda B ldb C ldc acc (M even, N % 4 = 0, K % 4 = 0; K in floats)
  const [M, N, K, A, LDA, B, LDB, C, LDC, ACC] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  // i32 locals 10..21, v128 locals 22..33
  const [I, J, A0, A1, B0, B1, B2, B3, KEND, KK, C0, C1] = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21];
  const ACCV = [22, 23, 24, 25, 26, 27, 28, 29];
  const VA0 = 30;
  const VA1 = 31;
  const VB = 32;
  const bs = [B0, B1, B2, B3];
  const code: number[] = [];
  const e = (...parts: number[][]) => {
    for (const p of parts) code.push(...p);
  };
  e(op.get(K), op.i32(2), op.shl, op.set(KEND));
  e(op.i32(0), op.set(I));
  e(op.block, op.loop);
  e(op.get(I), op.get(M), op.geS, op.brIf(1));
  e(op.get(A), op.get(I), op.get(LDA), op.mul, op.add, op.tee(A0), op.get(LDA), op.add, op.set(A1));
  e(op.get(C), op.get(I), op.get(LDC), op.mul, op.add, op.tee(C0), op.get(LDC), op.add, op.set(C1));
  e(op.i32(0), op.set(J));
  e(op.block, op.loop);
  e(op.get(J), op.get(N), op.geS, op.brIf(1));
  e(op.get(B), op.get(J), op.get(LDB), op.mul, op.add, op.tee(B0));
  e(op.get(LDB), op.add, op.tee(B1), op.get(LDB), op.add, op.tee(B2), op.get(LDB), op.add, op.set(B3));
  for (const a of ACCV) e(op.v128zero, op.set(a));
  e(op.i32(0), op.set(KK));
  e(op.block, op.loop);
  e(op.get(KK), op.get(KEND), op.geS, op.brIf(1));
  e(op.get(A0), op.get(KK), op.add, op.v128load(), op.set(VA0));
  e(op.get(A1), op.get(KK), op.add, op.v128load(), op.set(VA1));
  for (let c = 0; c < 4; c++) {
    e(op.get(bs[c]), op.get(KK), op.add, op.v128load(), op.set(VB));
    e(op.get(ACCV[c]), op.get(VA0), op.get(VB), op.f32x4mul, op.f32x4add, op.set(ACCV[c]));
    e(op.get(ACCV[4 + c]), op.get(VA1), op.get(VB), op.f32x4mul, op.f32x4add, op.set(ACCV[4 + c]));
  }
  e(op.get(KK), op.i32(16), op.add, op.set(KK));
  e(op.br(0), op.end, op.end);
  // store: C[r][j + c] (+)= hsum(acc)
  const hsum = (v: number) => [
    ...op.get(v),
    ...op.lane(0),
    ...op.get(v),
    ...op.lane(1),
    ...op.f32add,
    ...op.get(v),
    ...op.lane(2),
    ...op.get(v),
    ...op.lane(3),
    ...op.f32add,
    ...op.f32add,
  ];
  const stores = (accumulate: boolean) => {
    for (let r = 0; r < 2; r++) {
      for (let c = 0; c < 4; c++) {
        // address = C_r + j*4 (j counts columns); memarg offset c*4
        e(op.get(r === 0 ? C0 : C1), op.get(J), op.i32(2), op.shl, op.add);
        e(hsum(ACCV[r * 4 + c]));
        if (accumulate) e(op.get(r === 0 ? C0 : C1), op.get(J), op.i32(2), op.shl, op.add, op.f32load(c * 4), op.f32add);
        e(op.f32store(c * 4));
      }
    }
  };
  e(op.get(ACC), op.if);
  stores(true);
  e(op.else);
  stores(false);
  e(op.end);
  e(op.get(J), op.i32(4), op.add, op.set(J));
  e(op.br(0), op.end, op.end);
  e(op.get(I), op.i32(2), op.add, op.set(I));
  e(op.br(0), op.end, op.end);
  e(op.end);

  const body = [
    ...vec([
      [...uleb(12), I32],
      [...uleb(12), V128],
    ]),
    ...code,
  ];
  const tbody = transposeBody();
  const type = [0x60, ...vec(new Array(10).fill([I32])), ...vec([])];
  const ttype = [0x60, ...vec(new Array(6).fill([I32])), ...vec([])];
  const bytes = [
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vec([type, ttype])),
    ...section(2, vec([[...str('env'), ...str('mem'), 0x02, 0x00, ...uleb(1)]])),
    ...section(3, vec([uleb(0), uleb(1)])),
    ...section(
      7,
      vec([
        [...str('mm'), 0x00, ...uleb(0)],
        [...str('tr'), 0x00, ...uleb(1)],
      ]),
    ),
    ...section(
      10,
      vec([
        [...uleb(body.length), ...body],
        [...uleb(tbody.length), ...tbody],
      ]),
    ),
  ];
  return Uint8Array.from(bytes);
}

export type MmNT = typeof mmNTjs;

/** True when this engine runs WebAssembly SIMD (Node ≥ 16.4, current browsers). */
export function simdSupported(): boolean {
  try {
    return WebAssembly.validate(simdModuleBytes() as BufferSource);
  } catch {
    return false;
  }
}

export type Transpose = typeof transposeJs;

/** Both kernels on one memory (see {@link simdMmNT}); the transpose copies bits exactly. */
export function simdKernels(memory: WebAssembly.Memory): { mm: MmNT; transpose: Transpose } {
  const inst = new WebAssembly.Instance(new WebAssembly.Module(simdModuleBytes() as BufferSource), { env: { mem: memory } });
  const tr = inst.exports.tr as (M: number, N: number, A: number, lda: number, B: number, ldb: number) => void;
  const transpose: Transpose = (M, N, A: F, ao, lda, B: F, bo, ldb) => {
    const buf = memory.buffer;
    if (A.buffer !== buf || B.buffer !== buf || !(A instanceof Float32Array) || !(B instanceof Float32Array)) {
      transposeJs(M, N, A, ao, lda, B, bo, ldb);
      return;
    }
    const M4 = M & ~3;
    const N4 = N & ~3;
    if (M4 > 0 && N4 > 0) tr(M4, N4, A.byteOffset + ao * 4, lda * 4, B.byteOffset + bo * 4, ldb * 4);
    if (N4 < N && M4 > 0) transposeJs(M4, N - N4, A, ao + N4, lda, B, bo + N4 * ldb, ldb);
    if (M4 < M) transposeJs(M - M4, N, A, ao + M4 * lda, lda, B, bo + M4, ldb);
  };
  return { mm: wrapMm(memory, inst), transpose };
}

/**
 * {@link mmNT} on `memory`: same arguments (views into `memory.buffer`, element offsets and
 * strides). Falls back to the JS kernel for arrays outside the memory and for float64.
 */
export function simdMmNT(memory: WebAssembly.Memory): MmNT {
  return simdKernels(memory).mm;
}

function wrapMm(memory: WebAssembly.Memory, inst: WebAssembly.Instance): MmNT {
  const mm = inst.exports.mm as (M: number, N: number, K: number, A: number, lda: number, B: number, ldb: number, C: number, ldc: number, acc: number) => void;
  return (M, N, K, A: F, ao, lda, B: F, bo, ldb, C: F, co, ldc, acc) => {
    const buf = memory.buffer;
    if (
      A.buffer !== buf ||
      B.buffer !== buf ||
      C.buffer !== buf ||
      !(A instanceof Float32Array) ||
      !(B instanceof Float32Array) ||
      !(C instanceof Float32Array)
    ) {
      mmNTjs(M, N, K, A, ao, lda, B, bo, ldb, C, co, ldc, acc);
      return;
    }
    const M2 = M & ~1;
    const N4 = N & ~3;
    const K4 = K & ~3;
    if (M2 > 0 && N4 > 0) {
      if (K4 > 0) mm(M2, N4, K4, A.byteOffset + ao * 4, lda * 4, B.byteOffset + bo * 4, ldb * 4, C.byteOffset + co * 4, ldc * 4, acc ? 1 : 0);
      else if (!acc) for (let i = 0; i < M2; i++) C.fill(0, co + i * ldc, co + i * ldc + N4);
      // the last K mod 4 terms of the bulk
      if (K4 < K) mmNTjs(M2, N4, K - K4, A, ao + K4, lda, B, bo + K4, ldb, C, co, ldc, true);
    }
    // the last N mod 4 columns of the even rows, then an odd last row
    if (N4 < N && M2 > 0) mmNTjs(M2, N - N4, K, A, ao, lda, B, bo + N4 * ldb, ldb, C, co + N4, ldc, acc);
    if (M2 < M) mmNTjs(1, N, K, A, ao + M2 * lda, lda, B, bo, ldb, C, co + M2 * ldc, ldc, acc);
  };
}
