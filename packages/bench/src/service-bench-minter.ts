/**
 * Worker thread of `npm run bench:service` (./service-bench.ts): mints Privacy Pass tokens
 * before the timed phase through the real issuance path — the device's blinding
 * (`blindTokenRequest`, pure JS, ~30–60 ms each), the attester route `POST /v2/tokens` of the
 * service, the device's finalize — and posts them back.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { blindTokenRequest } from 'atomem/engine';
import { INDEX_V2_PATHS, type IssueResponse, type TokenKeyResponse } from 'atomem/protocol';

const { url, epoch, count, attesterKey } = workerData as { url: string; epoch: number; count: number; attesterKey: string };
const key = (await (await fetch(`${url}${INDEX_V2_PATHS.tokenKey}`)).json()) as TokenKeyResponse;
const tokens: string[] = [];
for (let i = 0; i < count; i++) {
  const blind = await blindTokenRequest(key, epoch);
  const res = await fetch(`${url}${INDEX_V2_PATHS.issue}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${attesterKey}` },
    body: JSON.stringify({ v: 2, epoch, request: blind.request }),
  });
  if (!res.ok) throw new Error(`token issuance: HTTP ${res.status} ${await res.text()}`);
  tokens.push(await blind.finalize(((await res.json()) as IssueResponse).response));
  if (tokens.length % 100 === 0) parentPort!.postMessage({ progress: tokens.length });
}
parentPort!.postMessage({ tokens });
