/**
 * `atomem/protocol` — the wire protocol and file formats, one file each, imported by both sides
 * (the browser engine and the Node services): the shared index's HTTP protocol v2, the catalog
 * vector file v1 and v2 (v2 adds the shop model and SASRec; `decodeCatalogFile` reads both),
 * Oblivious HTTP (RFC 9458) for reports sent through a relay, and the Prio3 release.
 */
export * from './index-v2.js';
export * from './catalog-vectors-v1.js';
export * from './catalog-vectors-v2.js';
export * from './catalog-vectors-v3.js';
export * from './ohttp.js';
export * from './prio3-release.js';
