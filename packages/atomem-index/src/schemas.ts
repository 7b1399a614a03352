/**
 * JSON schemas (fastify / Ajv) of the request bodies of wire protocol v1. Shapes, patterns and
 * limits come from src/protocol/index-v1.ts; `additionalProperties: false` everywhere (the
 * service configures Ajv to reject, not strip, unknown fields, and never to coerce types).
 * Checks the schema cannot express (base64 decoding, dimensions, zero vectors, duplicate ids,
 * tokens) are the route handlers' job.
 */

import { ID_PATTERN, INDEX_LIMITS, ITEM_ID_PATTERN, TOKEN_HASH_PATTERN, TOKEN_PATTERN } from 'atomem/protocol';

/** Longest base64 text of an int8 vector of `maxDim` values. */
export const MAX_VECTOR_CHARS = Math.ceil(INDEX_LIMITS.maxDim / 3) * 4;

const version = { const: 1 } as const;
const id = { type: 'string', pattern: ID_PATTERN } as const;
const name = { type: 'string', minLength: 1, maxLength: INDEX_LIMITS.maxIdLength } as const;
// why: item ids are sent back to other shoppers; the grammar excludes controls, bidi overrides, lone surrogates and markup
const itemId = { type: 'string', pattern: ITEM_ID_PATTERN } as const;

/** One {@link import('atomem/protocol').WireMemory}. */
export const wireMemorySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'tokenHash', 'embedderId', 'dim', 'vector'],
  properties: {
    id,
    tokenHash: { type: 'string', pattern: TOKEN_HASH_PATTERN },
    embedderId: name,
    dim: { type: 'integer', minimum: 1, maximum: INDEX_LIMITS.maxDim },
    // why: decoded and checked in the handler, which names the exact problem (not base64, length ≠ dim)
    vector: { type: 'string', maxLength: MAX_VECTOR_CHARS },
    items: { type: 'array', maxItems: INDEX_LIMITS.maxItems, items: itemId },
  },
} as const;

/** Body of POST {@link import('atomem/protocol').INDEX_PATHS}.upsert. */
export const upsertBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['v', 'memories'],
  properties: {
    v: version,
    memories: { type: 'array', maxItems: INDEX_LIMITS.maxBatch, items: wireMemorySchema },
  },
} as const;

/** Body of POST {@link import('atomem/protocol').INDEX_PATHS}.delete. */
export const deleteBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['v', 'deletions'],
  properties: {
    v: version,
    deletions: {
      type: 'array',
      maxItems: INDEX_LIMITS.maxBatch,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id', 'token'],
        properties: { id, token: { type: 'string', pattern: TOKEN_PATTERN } },
      },
    },
  },
} as const;

/** Body of POST {@link import('atomem/protocol').INDEX_PATHS}.communities. */
export const communitiesBodySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['v', 'embedderId', 'ids'],
  properties: {
    v: version,
    embedderId: name,
    ids: { type: 'array', maxItems: INDEX_LIMITS.maxIds, items: id },
  },
} as const;
