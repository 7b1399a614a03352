/**
 * The Prio3 leader SIGKILLed mid-aggregation resumes the epoch after a restart: two real
 * `atomem-index` processes (leader on SQLite, helper), a loopback proxy between them that
 * lets the helper answer, then SIGKILLs the leader before the answer reaches it — the first
 * aggregation batch's answer, or the collection's. The restarted leader sends the epoch's
 * batches again from the first; the helper answers each batch it added with the answer it
 * stored (it adds nothing twice), and a collection asked again with the stored answer (the
 * same noise draw), so the leader's count equals the helper's and the epoch is released with
 * every report.
 */
import { writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PRIO3_PATHS, sendPrio3Report, type Prio3Config } from 'atomem/engine';
import { encodeCatalogVectors } from 'atomem/protocol';
import { attesterTokens, rng, unit } from '../../../test/fixtures/index-wire.js';
import { indexServices } from '../../../test/fixtures/index-service.js';
import type { Prio3Release } from '../src/prio3-aggregator.js';

const ATTESTER = 'attester-key-for-the-prio3-resume-test';
const PEER_KEY = 'peer-key-of-the-two-aggregators!';
const EPOCH_MS = 60_000;
const N_ITEMS = 24;
/** More than one batch of the leader (50 reports a batch). */
const DEVICES = 56;

const services = indexServices('atomem-prio3-resume-');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function catalogFile(dir: string): string {
  const r = rng(3);
  const items = Array.from({ length: N_ITEMS }, (_, i) => ({ id: `sku-${String(i).padStart(2, '0')}`, title: `product ${i}` }));
  const file = join(dir, 'catalog.bin');
  writeFileSync(
    file,
    encodeCatalogVectors(
      { id: 'prio3-resume@1', dim: 8 },
      items,
      items.map(() => unit(Array.from({ length: 8 }, () => r() - 0.5))),
    ),
  );
  return file;
}

/** A proxy to `target` that calls `onCut` once the helper answered the first request to `cutAt`, and drops that answer. */
function proxy(target: string, cutAt: string, onCut: () => void): Promise<{ url: string; server: Server; aggregates: () => number }> {
  let aggregates = 0;
  let cut = false;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.url === PRIO3_PATHS.aggregate) aggregates++;
      const drop = req.url === cutAt && !cut;
      cut ||= drop;
      const up = request(new URL(req.url!, target), { method: req.method, headers: req.headers }, (r) => {
        const body: Buffer[] = [];
        r.on('data', (c: Buffer) => body.push(c));
        r.on('end', () => {
          if (drop) {
            onCut();
            res.destroy();
            return;
          }
          res.writeHead(r.statusCode!, r.headers);
          res.end(Buffer.concat(body));
        });
      });
      up.on('error', () => res.destroy());
      up.end(Buffer.concat(chunks));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server, aggregates: () => aggregates }),
    ),
  );
}

describe('prio3: the leader killed mid-aggregation', () => {
  it.each([
    // the first batch goes to the helper twice (before the kill and after the restart), the second once
    { at: 'the first aggregation batch', cutAt: PRIO3_PATHS.aggregate, aggregates: 3 },
    // every batch twice, the collection twice (answered the same)
    { at: 'the collection', cutAt: PRIO3_PATHS.collect, aggregates: 4 },
  ])(
    'killed after the helper answered $at: the restart resumes the epoch, released with every report (no batch_mismatch), nothing counted twice',
    {
      timeout: 300_000,
    },
    async ({ cutAt, aggregates }) => {
      const catalog = catalogFile(services.tempDir('atomem-prio3-cat-'));
      const common = ['--port', '0', '--rate-max', '0', '--log-level', 'warn', '--catalog-vectors', catalog, '--epoch-ms', String(EPOCH_MS)];
      const prio3 = ['--prio3-epsilon', '10', '--prio3-threshold', '0', '--prio3-min-reports', '5'];
      const opts = { attesterKey: ATTESTER, readyMs: 90_000, env: { ATOMEM_PRIO3_PEER_KEY: PEER_KEY } };
      const helperUrl = await services.spawn(
        [...common, ...prio3, '--data', services.tempDir(), '--prio3-role', 'helper', '--prio3-peer', 'http://127.0.0.1:9'],
        opts,
      ).ready;
      const leaderData = services.tempDir();
      const leaderArgs = (peer: string) => [
        ...common,
        ...prio3,
        '--data',
        leaderData,
        '--prio3-role',
        'leader',
        '--prio3-peer',
        peer,
        '--prio3-tick-ms',
        '250',
      ];
      let killed!: () => void;
      const killedNow = new Promise<void>((r) => (killed = r));
      let leader: ReturnType<typeof services.spawn> | undefined;
      // the leader talks to the helper through the proxy
      const p = await proxy(helperUrl, cutAt, () => {
        leader!.child.kill('SIGKILL');
        killed();
      });
      try {
        leader = services.spawn(leaderArgs(p.url), opts);
        const leaderUrl = await leader.ready;
        const cfg = (await (await fetch(`${leaderUrl}${PRIO3_PATHS.config}`)).json()) as Prio3Config;

        // every upload in one epoch
        const wait = EPOCH_MS - (Date.now() % EPOCH_MS);
        if (wait < EPOCH_MS * 0.75) await sleep(wait + 50);
        const epoch = Math.floor(Date.now() / EPOCH_MS);
        const tokens = attesterTokens(leaderUrl, ATTESTER);
        const r = rng(9);
        for (let d = 0; d < DEVICES; d++) {
          const recent = Array.from({ length: 1 + Math.floor(r() * 5) }, () => cfg.items[Math.floor(r() * N_ITEMS)]);
          expect((await sendPrio3Report({ leaderUrl, helperUrl, recent, epoch, tokens })).status).toBe(202);
        }
        expect(Math.floor(Date.now() / EPOCH_MS), 'the uploads took longer than the epoch').toBe(epoch);

        // after the window (end + 10 %) the leader aggregates; the proxy kills it once the helper answered
        await killedNow;
        expect((await leader.exited).signal).toBe('SIGKILL');
        leader = services.spawn(leaderArgs(p.url), opts);
        const again = await leader.ready;
        let release: Prio3Release | undefined;
        for (let i = 0; i < 240 && !release; i++) {
          const res = await fetch(`${again}/v2/prio3/releases/${epoch}`);
          if (res.ok) release = (await res.json()) as Prio3Release;
          else await sleep(250);
        }
        expect(release, 'the epoch was released after the restart').toBeDefined();
        expect(release!.reports).toBe(DEVICES);
        expect(release!.rejected).toBe(0);
        expect(p.aggregates()).toBe(aggregates);
      } finally {
        p.server.closeAllConnections();
        p.server.close();
      }
    },
  );
});
