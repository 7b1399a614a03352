/**
 * `atomem-index` — the shared community index service (Node). Start it from the command line
 * (`npx atomem-index --help`) or embed it in a server of your own with {@link createIndexService}.
 */
export { createIndexService, type IndexService, type IndexServiceOptions, type LogStream } from './service.js';
export { registerV2, type V2Controller, type V2Options } from './v2.js';
export { ReportStore, type ReportStoreOptions } from './report-store.js';
export { clusterItems, type ClusterOptions } from './clusters.js';
export { PrivacyPassIssuer, generateIssuerKey, type TokenIssuer, type StoredIssuerKey } from './tokens.js';
export { AUTO_HNSW_EF, clusterItemSpace, itemKnn, knnExpansion, readPersistedKnn, type ClusterRun, type KnnGraph, type KnnMethod } from './clusters.js';
export {
  StorageError,
  DataDir,
  DataDirInUseError,
  DEFAULT_SYNC,
  MARKER_FILE,
  WalSync,
  type StorageProblem,
  type StorageStatus,
  type SyncLevel,
} from './storage.js';
export { resolveNetworkLimits, type NetworkLimits, type CorsOrigins } from './edge.js';
export {
  Attester,
  AttesterError,
  MemoryBudgetStore,
  issueInProcess,
  issueViaIndex,
  registerAttester,
  type AttesterOptions,
  type AttesterBudgetStore,
} from './attester.js';
export {
  PRIO3_MIN_SHARE,
  Prio3Aggregator,
  buildPrio3Release,
  discreteLaplace,
  prio3MinCount,
  prio3Threshold,
  releaseNoiseStd,
  releaseNoiseTail,
  type Prio3Release,
} from './prio3-aggregator.js';
export { registerPrio3, type Prio3Controller, type Prio3ServiceOptions } from './prio3-service.js';
export { PostgresPrio3Store, SqlitePrio3Store, type Prio3Store } from './prio3-store.js';
export { createRelay, prio3RelayBytes, shuffle, type Relay, type RelayOptions, type FlushResult } from './relay.js';
export { registerOhttpGateway, type OhttpGateway, type OhttpGatewayOptions } from './ohttp-gateway.js';
