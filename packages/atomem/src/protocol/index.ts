/**
 * `atomem/protocol` — the wire protocols and file formats, one file each, imported by both
 * sides (the browser engine and the Node services): the shared index's HTTP protocol v2 (and the
 * deprecated v1), and the catalog vector file v1.
 */
export * from './index-v1.js';
export * from './index-v2.js';
export * from './catalog-vectors-v1.js';
