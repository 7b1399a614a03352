/**
 * What this device puts in its protocol-v2 report, from its own memory state (pure; the engine
 * sends it through `sync/report-client.ts`): the items a report samples from, the local-DP report
 * of an epoch (community/ldp.ts) with its memoized permanent randomization, and which epoch was
 * last reported. The randomization lives in the state, so saving the state keeps it.
 */
import { actionWeight } from '../core/memory.js';
import type { MemoryState } from '../core/types.js';
import { makeReport } from '../community/ldp.js';
import type { LdpParams, WireReport } from '../protocol/index-v2.js';

/**
 * The items a v2 report samples from: the distinct items of the last `shareRecentEvents`
 * processed events with a positive action, oldest first (`known`: catalog items only).
 */
export function reportItems(state: MemoryState, shareRecentEvents: number, known: (id: string) => boolean): string[] {
  const n = shareRecentEvents || state.events.length;
  const liked = state.events.filter((e) => !e.pending && actionWeight(e.action) > 0 && known(e.item)).slice(-n);
  const out: string[] = [];
  for (const e of liked) {
    const i = out.indexOf(e.item);
    if (i >= 0) out.splice(i, 1);
    out.push(e.item);
  }
  return out;
}

/**
 * The items a Prio3 report counts: the distinct items of processed events with a positive action
 * at or after `since` (ms; the engine passes the start of the previous epoch), oldest first — what
 * the shopper turned to lately, so a release counts this epoch's interest, not a standing
 * history (a device with nothing new sends zeros).
 */
export function itemsSince(state: MemoryState, since: number, known: (id: string) => boolean): string[] {
  const out: string[] = [];
  for (const e of state.events) {
    if (e.pending || e.at < since || actionWeight(e.action) <= 0 || !known(e.item)) continue;
    const i = out.indexOf(e.item);
    if (i >= 0) out.splice(i, 1);
    out.push(e.item);
  }
  return out;
}

/** Last epoch this device reported for (undefined: never). */
export function reportedEpoch(state: MemoryState): number | undefined {
  return state.reporting?.lastEpoch;
}

/**
 * This device's local-DP report of `epoch` over `items` (see {@link reportItems}), or undefined
 * when it has already reported for `epoch` or a later one. The memoized permanent randomization
 * is kept in the state; call {@link markReported} once the service accepted the report.
 * `random`: a CSPRNG-backed [0, 1) source on a real device.
 */
export function deviceReport(state: MemoryState, items: readonly string[], epoch: number, params: LdpParams, random: () => number): WireReport | undefined {
  const r = (state.reporting ??= { memo: {} });
  if (r.lastEpoch !== undefined && r.lastEpoch >= epoch) return undefined;
  return makeReport(items, params, r.memo, random);
}

/** Record that the report of `epoch` was accepted (no second report this epoch). */
export function markReported(state: MemoryState, epoch: number): void {
  const r = (state.reporting ??= { memo: {} });
  r.lastEpoch = Math.max(r.lastEpoch ?? -Infinity, epoch);
}
