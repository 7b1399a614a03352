/**
 * Capability probe: what this device can run, read once in the worker before any model is
 * chosen. Never throws; every field says "absent" rather than failing. Works in a window or
 * a (shared) worker, and in Node (where almost everything is absent).
 */

/** What a WebGPU adapter offers (the parts model runtimes care about). */
interface WebGpuInfo {
  /** An adapter was granted. */
  available: boolean;
  /** Software / fallback adapter (e.g. SwiftShader): works, but slow for LLMs. */
  isFallbackAdapter?: boolean;
  vendor?: string;
  architecture?: string;
  /** Adapter features, e.g. `shader-f16`, `timestamp-query`. */
  features: string[];
  /** `shader-f16` present: f16 model weights (q4f16) can run. */
  shaderF16: boolean;
  /** Selected limits (bytes): large models need big buffers. */
  limits?: { maxBufferSize: number; maxStorageBufferBindingSize: number; maxComputeWorkgroupStorageSize: number };
  /** Why there is no adapter (no `navigator.gpu`, request failed, null adapter). */
  reason?: string;
}

/** Device capabilities relevant to on-device models. */
export interface Capabilities {
  webgpu: WebGpuInfo;
  /** `crossOriginIsolated`: SharedArrayBuffer and multi-threaded WASM are allowed. */
  crossOriginIsolated: boolean;
  sharedArrayBuffer: boolean;
  wasm: boolean;
  /** WASM SIMD (128-bit) validates. */
  wasmSimd: boolean;
  /** Logical cores (`navigator.hardwareConcurrency`), 1 when unknown. */
  cores: number;
  /** `navigator.deviceMemory` in GB where the browser tells (Chromium), else null. */
  deviceMemoryGB: number | null;
  /**
   * Chrome's built-in Prompt API: `absent` (no `LanguageModel`), or its `availability()` answer.
   * In the engine's worker: the answer of the page that lends it (Chrome exposes it on Window only).
   */
  promptApi: 'absent' | 'unavailable' | 'downloadable' | 'downloading' | 'available';
  /** Web Locks (cross-tab write coordination). */
  webLocks: boolean;
  /** This context can start (nested) workers: false in a Chromium SharedWorker, so wllama cannot run there. */
  workers: boolean;
}

// (module (func (result v128) i32.const 0 i8x16.splat i8x16.popcnt)) — wasm-feature-detect's SIMD probe.
const SIMD_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11]);

interface GpuAdapterLike {
  features: Iterable<string>;
  limits: Record<string, number>;
  isFallbackAdapter?: boolean;
  info?: { vendor?: string; architecture?: string; isFallbackAdapter?: boolean };
}

interface NavigatorLike {
  gpu?: { requestAdapter(opts?: unknown): Promise<GpuAdapterLike | null> };
  hardwareConcurrency?: number;
  deviceMemory?: number;
  locks?: unknown;
}

async function probeWebGpu(nav: NavigatorLike | undefined): Promise<WebGpuInfo> {
  const none = (reason: string): WebGpuInfo => ({ available: false, features: [], shaderF16: false, reason });
  if (!nav?.gpu || typeof nav.gpu.requestAdapter !== 'function') return none('navigator.gpu is absent (no WebGPU in this browser or context)');
  try {
    const adapter = await nav.gpu.requestAdapter({ powerPreference: 'high-performance' });
    if (!adapter) return none('requestAdapter() returned null (WebGPU disabled or no usable GPU)');
    const features = [...adapter.features].sort();
    const l = adapter.limits;
    return {
      available: true,
      isFallbackAdapter: adapter.info?.isFallbackAdapter ?? adapter.isFallbackAdapter ?? false,
      vendor: adapter.info?.vendor,
      architecture: adapter.info?.architecture,
      features,
      shaderF16: features.includes('shader-f16'),
      limits: {
        maxBufferSize: l.maxBufferSize,
        maxStorageBufferBindingSize: l.maxStorageBufferBindingSize,
        maxComputeWorkgroupStorageSize: l.maxComputeWorkgroupStorageSize,
      },
    };
  } catch (e) {
    return none(`requestAdapter() failed: ${e instanceof Error ? e.message : String(e)}`);
  }
}

async function probePromptApi(): Promise<Capabilities['promptApi']> {
  const lm = (globalThis as { LanguageModel?: { availability?: () => Promise<string> } }).LanguageModel;
  if (!lm || typeof lm.availability !== 'function') return 'absent';
  try {
    const a = await lm.availability();
    return a === 'available' || a === 'downloadable' || a === 'downloading' ? a : 'unavailable';
  } catch {
    return 'unavailable';
  }
}

/** Probe the current context. Takes a few milliseconds (one adapter request). */
export async function probeCapabilities(): Promise<Capabilities> {
  const g = globalThis as { navigator?: NavigatorLike; crossOriginIsolated?: boolean };
  const nav = g.navigator;
  const wasm = typeof WebAssembly === 'object' && typeof WebAssembly.validate === 'function';
  let wasmSimd = false;
  try {
    wasmSimd = wasm && WebAssembly.validate(SIMD_PROBE);
  } catch {
    wasmSimd = false;
  }
  const [webgpu, promptApi] = await Promise.all([probeWebGpu(nav), probePromptApi()]);
  return {
    webgpu,
    crossOriginIsolated: g.crossOriginIsolated === true,
    sharedArrayBuffer: typeof SharedArrayBuffer === 'function',
    wasm,
    wasmSimd,
    cores: Math.max(1, nav?.hardwareConcurrency ?? 1),
    deviceMemoryGB: typeof nav?.deviceMemory === 'number' ? nav.deviceMemory : null,
    promptApi,
    webLocks: !!nav?.locks,
    workers: typeof (globalThis as { Worker?: unknown }).Worker === 'function',
  };
}
