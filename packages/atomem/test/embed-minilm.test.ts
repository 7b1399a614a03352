import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { env } from '@huggingface/transformers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMiniLMEmbedder, EmbedderLoadError, miniLMEmbedderId, type MiniLMEmbedder } from '../src/embed/minilm.js';
import type { LoadProgress } from '../src/models/types.js';
import { TINY_BERT_HIDDEN, tinyBertFiles } from '../../../test/fixtures/tiny-bert.js';
import { expectReferenceTokens, expectReferenceVectors } from '../../../test/fixtures/tiny-bert-checks.js';

// The same tiny BERT as the browser test, on onnxruntime-node (its linux-x64 binary ships in the npm
// package; only its install script, which fetches optional CUDA files, is denied). Files come from a
// temporary folder: `modelBaseUrl` as a folder on disk, `allowRemote: false`, so nothing is downloaded.

function writeModel(root: string, model: string, files: Record<string, Uint8Array | string>): void {
  for (const [rel, content] of Object.entries(files)) {
    const path = join(root, model, rel);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, content);
  }
}

describe('MiniLM embedder in Node (tiny BERT fixture, onnxruntime-node)', () => {
  let root: string;
  let embedder: MiniLMEmbedder;
  const progress: LoadProgress[] = [];
  const requests: string[] = [];
  const realFetch = env.fetch;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'atomem-minilm-'));
    writeModel(root, 'atomem-test/tiny-bert', tinyBertFiles({ alsoAs: ['model_quantized'] }));
    const { 'onnx/model.onnx': _graph, ...noGraph } = tinyBertFiles();
    writeModel(root, 'atomem-test/no-graph', noGraph);
    writeModel(root, 'atomem-test/broken-graph', { ...noGraph, 'onnx/model.onnx': new TextEncoder().encode('not an onnx graph') });
    writeModel(root, 'atomem-test/broken-config', { ...tinyBertFiles(), 'config.json': '{"model_type": "bert",' });
    const { 'tokenizer_config.json': _tc, ...noTokenizer } = tinyBertFiles();
    writeModel(root, 'atomem-test/no-tokenizer', noTokenizer);
    env.fetch = (input, init) => {
      requests.push(String(input));
      return realFetch(input, init);
    };
    embedder = await createMiniLMEmbedder({
      model: 'atomem-test/tiny-bert',
      modelBaseUrl: root,
      dtype: 'fp32',
      allowRemote: false,
      batchSize: 2,
      onProgress: (p) => progress.push(p),
    });
  }, 120_000);

  afterAll(async () => {
    await embedder?.dispose();
    env.fetch = realFetch;
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('loads from a folder on disk on the native CPU, id = model + dtype, dim from the output', () => {
    expect(embedder.device).toBe('cpu');
    expect(embedder.dtype).toBe('fp32');
    expect(embedder.model).toBe('atomem-test/tiny-bert');
    expect(embedder.id).toBe('atomem-test/tiny-bert/fp32');
    expect(embedder.id).toBe(miniLMEmbedderId('atomem-test/tiny-bert', 'fp32'));
    expect(embedder.dim).toBe(TINY_BERT_HIDDEN);
  });

  it('made no HTTP request and restored transformers.js env after the load', () => {
    expect(requests).toEqual([]);
    expect(env.allowRemoteModels).toBe(true);
    expect(env.localModelPath).not.toBe(root);
  });

  it('reports progress as stage embedder, unit bytes, ending with ready', () => {
    expect(progress.length).toBeGreaterThan(0);
    for (const p of progress) {
      expect(p.stage).toBe('embedder');
      expect(p.unit).toBe('bytes');
      expect(p.model).toBe('atomem-test/tiny-bert');
    }
    const last = progress[progress.length - 1];
    expect(last.phase).toBe('ready');
    expect(last.loaded).toBe(last.total);
    expect(progress.filter((p) => p.phase === 'ready')).toHaveLength(1);
  });

  it('tokenizes with the WordPiece tokenizer.json exactly like the reference', () => {
    expectReferenceTokens(embedder);
  });

  it('returns the mean-pooled, L2-normalised vectors within 1e-4, in input order across batches', async () => {
    // one at a time (no padding) gives the same vectors as the padded batches
    await expectReferenceVectors(embedder, [0, 1, 2, 3, 4]);
  });

  it('rejects blank texts like every embedder', async () => {
    await expect(embedder.embed(['ok', '  '])).rejects.toThrow('texts[1] is blank');
  });

  it('defaults to q8 on the CPU, and says so in the id', async () => {
    const q8 = await createMiniLMEmbedder({ model: 'atomem-test/tiny-bert', modelBaseUrl: pathToFileURL(root).href, allowRemote: false });
    try {
      expect(q8.dtype).toBe('q8');
      expect(q8.id).toBe('atomem-test/tiny-bert/q8');
      expect(q8.id).not.toBe(embedder.id);
    } finally {
      await q8.dispose();
    }
  });

  it('names a missing ONNX file', async () => {
    const err = await createMiniLMEmbedder({ model: 'atomem-test/no-graph', modelBaseUrl: root, dtype: 'fp32', allowRemote: false }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbedderLoadError);
    expect((err as EmbedderLoadError).name).toBe('EmbedderLoadError');
    expect((err as EmbedderLoadError).reason).toBe('missing-file');
    expect((err as EmbedderLoadError).model).toBe('atomem-test/no-graph');
    expect((err as Error).message).toMatch(/atomem-test\/no-graph.*missing/);
    expect((err as Error).message).toContain('model.onnx');
  });

  it('names a missing tokenizer', async () => {
    const err = await createMiniLMEmbedder({ model: 'atomem-test/no-tokenizer', modelBaseUrl: root, dtype: 'fp32', allowRemote: false }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(EmbedderLoadError);
    expect((err as EmbedderLoadError).reason).toBe('missing-file');
    expect((err as Error).message).toContain('tokenizer_config.json');
  });

  it('names a broken ONNX file and a broken config.json as invalid-model', async () => {
    const graph = await createMiniLMEmbedder({ model: 'atomem-test/broken-graph', modelBaseUrl: root, dtype: 'fp32', allowRemote: false }).catch(
      (e: unknown) => e,
    );
    expect(graph).toBeInstanceOf(EmbedderLoadError);
    expect((graph as EmbedderLoadError).reason).toBe('invalid-model');
    const config = await createMiniLMEmbedder({ model: 'atomem-test/broken-config', modelBaseUrl: root, dtype: 'fp32', allowRemote: false }).catch(
      (e: unknown) => e,
    );
    expect(config).toBeInstanceOf(EmbedderLoadError);
    expect((config as EmbedderLoadError).reason).toBe('invalid-model');
  });

  it('with allowRemote false and an HTTP modelBaseUrl, answers a miss without any request', async () => {
    const before = requests.length;
    const err = await createMiniLMEmbedder({
      model: 'atomem-test/tiny-bert',
      modelBaseUrl: 'https://shop.example/models/',
      dtype: 'fp32',
      allowRemote: false,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EmbedderLoadError);
    expect((err as EmbedderLoadError).reason).toBe('missing-file');
    expect((err as Error).message).toContain('https://shop.example/models/atomem-test/tiny-bert/');
    expect(requests.slice(before)).toEqual([]);
  });

  it('with allowRemote false, never contacts the hub (default model) or a {model} URL template', async () => {
    const before = requests.length;
    const empty = { match: async () => undefined, put: async () => undefined };
    const hub = await createMiniLMEmbedder({ allowRemote: false, cache: empty }).catch((e: unknown) => e);
    expect(hub).toMatchObject({ name: 'EmbedderLoadError', reason: 'missing-file', model: 'Xenova/all-MiniLM-L6-v2' });
    expect((hub as Error).message).toContain('https://huggingface.co/Xenova/all-MiniLM-L6-v2/resolve/main/');
    const mirror = await createMiniLMEmbedder({
      model: 'atomem-test/tiny-bert',
      modelBaseUrl: 'https://mirror.example/{model}/resolve/{revision}/',
      allowRemote: false,
      cache: empty,
    }).catch((e: unknown) => e);
    expect(mirror).toMatchObject({ reason: 'missing-file' });
    expect((mirror as Error).message).toContain('https://mirror.example/atomem-test/tiny-bert/resolve/main/');
    expect(requests.slice(before)).toEqual([]);
    expect(env.remoteHost).toBe('https://huggingface.co/');
  });

  it('refuses bad options with reason config', async () => {
    await expect(createMiniLMEmbedder({ batchSize: 0 })).rejects.toMatchObject({ name: 'EmbedderLoadError', reason: 'config' });
    await expect(createMiniLMEmbedder({ dtype: 'fp64' as never })).rejects.toMatchObject({ reason: 'config' });
    await expect(createMiniLMEmbedder({ device: 'gpu' as never })).rejects.toMatchObject({ reason: 'config' });
  });
});
