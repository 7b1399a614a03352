// The separate health listener (`healthPort`, CLI `--health-port`, its own thread): it answers
// GET /v2/health with the main route's answer, nothing else, keeps answering while the main
// listener refuses the prober (its address is at the per-address connection cap), and says 503
// once the main event loop has been blocked for over 5 s.
import { spawn, spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createIndexService, type IndexService } from '../src/service.js';
import { encodeCatalogVectors, INDEX_V2_PATHS } from 'atomem/protocol';
import type { ItemSpace } from 'atomem/engine';
import { rng, unit } from '../../../test/fixtures/index-wire.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

const dirs: string[] = [];
const services: IndexService[] = [];
afterAll(async () => {
  while (services.length) await services.pop()!.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function space(): ItemSpace {
  const ids: string[] = [];
  const vectors: Float32Array[] = [];
  for (let i = 0; i < 40; i++) {
    const v = new Float32Array(8);
    v[i % 8] = 1;
    v[(i * 3) % 8] += 0.4;
    const n = Math.hypot(...v);
    ids.push(`item-${i}`);
    vectors.push(v.map((x) => x / n));
  }
  return { embedderId: 'health-port@1', ids, vectors };
}

/** One request on a fresh connection: status and body, or status 0 when the connection was cut. */
function get(url: string, method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = request(url, { method, agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.setTimeout(5000, () => req.destroy());
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end();
  });
}

describe('separate health listener', () => {
  it('answers GET /v2/health like the main listener, 404 for anything else, while the main listener refuses the prober and while the main event loop is blocked (503 after 5 s)', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'atomem-health-port-'));
    dirs.push(dataDir);
    const svc = createIndexService({
      dataDir,
      rateLimit: false,
      network: { maxConnectionsPerAddress: 4 },
      v2: { space: space(), tickMs: 0, minReports: 1 },
    });
    services.push(svc);
    await svc.ready;
    expect(svc.healthUrl).toBeUndefined();
    await expect(svc.listen({ port: 0, healthPort: 70_000 })).rejects.toThrow(/healthPort/);
    const url = await svc.listen({ port: 0, healthPort: 0 });
    const healthUrl = svc.healthUrl!;
    expect(healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(healthUrl).not.toBe(url);

    const main = await get(`${url}${INDEX_V2_PATHS.health}`);
    const side = await get(`${healthUrl}${INDEX_V2_PATHS.health}`);
    expect(main.status).toBe(200);
    expect(side.status).toBe(200);
    const strip = (b: string) => ({ ...JSON.parse(b), epoch: 0 });
    expect(strip(side.body)).toEqual(strip(main.body));
    expect((await get(`${healthUrl}${INDEX_V2_PATHS.health}`, 'HEAD')).status).toBe(200);
    const other = await get(`${healthUrl}${INDEX_V2_PATHS.latest}`);
    expect(other.status).toBe(404);
    expect(JSON.parse(other.body).error).toBe('not_found');
    expect((await get(`${healthUrl}${INDEX_V2_PATHS.report}`, 'POST')).status).toBe(404);

    // The prober's address holds its 4 connections on the main port (headers never finished).
    const port = Number(new URL(url).port);
    const held: Socket[] = [];
    for (let i = 0; i < 4; i++) {
      const s = connect({ port, host: '127.0.0.1' });
      s.on('error', () => {});
      await new Promise((r) => s.once('connect', r));
      s.write('GET /v2/health HTTP/1.1\r\nhost: x\r\n');
      held.push(s);
    }
    await new Promise((r) => setTimeout(r, 100));
    try {
      expect((await get(`${url}${INDEX_V2_PATHS.health}`)).status).toBe(0);
      for (let i = 0; i < 10; i++) expect((await get(`${healthUrl}${INDEX_V2_PATHS.health}`)).status).toBe(200);
      expect(svc.edge.refusedConnections).toBeGreaterThan(0);
    } finally {
      for (const s of held) s.destroy();
    }

    // The main event loop blocked (spawnSync) while another process probes the health port:
    // answered at once by the listener's thread, 503 once its copy is over 5 s old.
    const probeScript = `const get = () => fetch(${JSON.stringify(`${healthUrl}${INDEX_V2_PATHS.health}`)}).then(async (r) => [r.status, (await r.json()).error ?? null]);
      (async () => { const first = await get(); await new Promise((r) => setTimeout(r, 6000)); console.log(JSON.stringify([first, await get()])); })();`;
    const blocked = spawnSync(process.execPath, ['-e', probeScript], { encoding: 'utf8', timeout: 30_000 });
    expect(JSON.parse(blocked.stdout)).toEqual([
      [200, null],
      [503, 'not_ready'],
    ]);
    await new Promise((r) => setTimeout(r, 600));
    expect((await get(`${healthUrl}${INDEX_V2_PATHS.health}`)).status).toBe(200);

    await svc.close();
    expect((await get(`${healthUrl}${INDEX_V2_PATHS.health}`)).status).toBe(0);
  }, 60_000);

  it('the CLI: --health-port opens the listener and the ready line names it; a bad port is refused with the flag named', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'atomem-health-cli-'));
    dirs.push(dir);
    const catalog = join(dir, 'catalog.bin');
    const r = rng(3);
    const items = Array.from({ length: 30 }, (_, i) => ({ id: `sku-${i}`, title: `product ${i}` }));
    writeFileSync(
      catalog,
      encodeCatalogVectors(
        { id: 'health-cli@1', dim: 8 },
        items,
        items.map(() => unit(Array.from({ length: 8 }, () => r() - 0.5))),
      ),
    );
    const cli = [
      '-C',
      'atomem-source',
      '--import',
      'tsx',
      'packages/atomem-index/src/cli.ts',
      '--data',
      join(dir, 'data'),
      '--catalog-vectors',
      catalog,
      '--port',
      '0',
    ];
    const bad = spawnSync(process.execPath, [...cli, '--health-port', '-1'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/--health-port must be an integer/);

    const child = spawn(process.execPath, [...cli, '--health-port', '0', '--log-level', 'error'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = '';
        const timer = setTimeout(() => reject(new Error(`not ready after 90 s: ${out}`)), 90_000);
        child.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('\n')) {
            clearTimeout(timer);
            resolve(out);
          }
        });
        child.on('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
      });
      const m = /ready at (http:\S+) .*health also at (http:\S+)\/v2\/health/.exec(line);
      expect(m, line).not.toBeNull();
      expect(m![2]).not.toBe(m![1]);
      // the listener serves a copy of the main route's answer refreshed every 250 ms: poll as a probe would
      let h = await get(`${m![2]}${INDEX_V2_PATHS.health}`);
      for (let i = 0; i < 100 && h.status !== 200; i++) {
        await new Promise((r) => setTimeout(r, 100));
        h = await get(`${m![2]}${INDEX_V2_PATHS.health}`);
      }
      expect(h.status).toBe(200);
      expect(JSON.parse(h.body).status).toBe('ok');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
    }
  }, 180_000);
});
