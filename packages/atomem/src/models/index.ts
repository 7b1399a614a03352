/**
 * Language-model adapters behind one seam ({@link LanguageModel}): pick a runtime, get a model
 * with `generate` and `dispose`. The on-device ones throw {@link ModelUnavailableError} where
 * they cannot run, so a caller tries them in order of preference and falls back.
 *
 * - {@link createWebLLMModel}: WebGPU (MLC WebLLM), fastest where a GPU is available.
 * - {@link createPromptApiModel}: Chrome's built-in model (Gemini Nano), no download by the shop.
 * - {@link createWllamaModel}: llama.cpp in WebAssembly, CPU only, runs anywhere.
 * - {@link createOpenAICompatibleModel}: a remote server (leaves the device; opt-in).
 */
export * from './types.js';
export { createWllamaModel, type WllamaModel, type WllamaModelOptions } from './wllama.js';
export {
  createOpenAICompatibleModel,
  OpenAICompatibleError,
  type OpenAICompatibleErrorKind,
  type OpenAICompatibleOptions,
} from './openai.js';
export {
  createPromptApiModel,
  type PromptApiAvailability,
  type PromptApiCreateOptions,
  type PromptApiGlobal,
  type PromptApiMessage,
  type PromptApiModelOptions,
  type PromptApiSession,
} from './prompt-api.js';
export { createWebLLMModel, type WebLLMModelOptions } from './webllm.js';
