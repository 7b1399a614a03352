/**
 * A simulated population of shoppers for the demo: each one a Node {@link MemoryAgent} over the
 * demo catalog with the USE-lite embedder (NOT centred, so its vector space and embedder id,
 * `use-lite@0.2.0/uint8`, are the browser engine's), browsing with a multi-interest persona and
 * making its protocol v2 report exactly as a browser does (the same local-DP randomizer), so
 * the demo can publish a release of the epoch before the first visit.
 */
import { webcrypto } from 'node:crypto';
import { ItemVectors, MemoryAgent, type Action, type Embedder } from 'atomem/engine';
import type { LdpParams, WireReport } from 'atomem/protocol';
import { DEPARTMENTS, seededRandom, toItems, type Product } from './catalog.js';

/** A simulated shopper's taste: 2–3 departments, a favourite product kind in each, some noise. */
export interface Persona {
  departments: string[];
  /** Favourite nouns (product kinds) per department: most events land on these. */
  favourites: Record<string, string[]>;
  /** Share of events on random products outside the persona. */
  noise: number;
}

/** Options of {@link seedPopulation}. */
export interface SeedOptions {
  /** The epoch the reports are for, and the service's local-DP parameters. */
  epoch: number;
  ldp: LdpParams;
  catalog: readonly Product[];
  /** The embedder (USE-lite, not centred, in the demo). */
  embedder: Embedder;
  /** The catalog's vectors, if already embedded (with `embedder`). */
  items?: ItemVectors;
  /** Number of shoppers. Default 80. */
  shoppers?: number;
  /** Seed of the personas and their browsing. Default 7. */
  seed?: number;
  /** Progress callback (shoppers done, total). */
  onProgress?: (done: number, total: number) => void;
}

/** Draw a persona: 2–3 departments, 1–3 favourite product kinds in each, 10–25 % noise. */
export function drawPersona(rnd: () => number): Persona {
  const n = rnd() < 0.55 ? 2 : 3;
  const depts = [...DEPARTMENTS].sort(() => rnd() - 0.5).slice(0, n);
  const favourites: Record<string, string[]> = {};
  for (const d of depts) {
    const k = 1 + Math.floor(rnd() * 3);
    favourites[d.name] = [...d.nouns]
      .sort(() => rnd() - 0.5)
      .slice(0, k)
      .map(([noun]) => noun);
  }
  return { departments: depts.map((d) => d.name), favourites, noise: 0.1 + rnd() * 0.15 };
}

/** A persona's browsing: `count` events (item id, action), most on favourites, some noise. */
export function browse(persona: Persona, catalog: readonly Product[], rnd: () => number, count: number): { item: string; action: Action }[] {
  const out: { item: string; action: Action }[] = [];
  for (let i = 0; i < count; i++) {
    let pool: readonly Product[];
    if (rnd() < persona.noise) pool = catalog;
    else {
      const dept = persona.departments[Math.floor(rnd() * persona.departments.length)];
      const inDept = catalog.filter((p) => p.department === dept);
      const fav = persona.favourites[dept] ?? [];
      const favPool = inDept.filter((p) => fav.some((f) => p.title.endsWith(f)));
      pool = rnd() < 0.7 && favPool.length ? favPool : inDept;
    }
    const p = pool[Math.floor(rnd() * pool.length)];
    const r = rnd();
    out.push({ item: p.id, action: r < 0.7 ? 'click' : r < 0.9 ? 'cart' : 'purchase' });
  }
  return out;
}

/** One row of the demo shop's order log (the `jsonl` interactions format). */
export interface OrderRow {
  user: string;
  item: string;
  at: number;
  action: Action;
}

/**
 * The demo shop's own order log, made up: `shoppers` personas ({@link drawPersona}) browsing as
 * {@link browse} does, 15–30 events each over the two weeks before `end`. Deterministic for a
 * seed. This is what the shop learns its published model from (`catalog-vectors.bin`, v2).
 */
export function orderLog(catalog: readonly Product[], opts: { shoppers: number; seed: number; end: number }): OrderRow[] {
  const rnd = seededRandom(opts.seed);
  const rows: OrderRow[] = [];
  for (let s = 0; s < opts.shoppers; s++) {
    const persona = drawPersona(rnd);
    const count = 15 + Math.floor(rnd() * 16);
    let at = opts.end - 14 * 24 * 3600_000 + Math.floor(rnd() * 7 * 24 * 3600_000);
    for (const e of browse(persona, catalog, rnd, count)) {
      at += 30_000 + Math.floor(rnd() * 600_000);
      rows.push({ user: `shopper-${s}`, item: e.item, at, action: e.action });
    }
  }
  return rows;
}

/**
 * Simulate `shoppers` agents and make each one's v2 report for `epoch`. All agents share
 * one {@link ItemVectors} (the catalog is embedded once). Resolves with each shopper's report.
 */
export async function seedPopulation(options: SeedOptions): Promise<{ shoppers: number; events: number; reports: WireReport[] }> {
  const { catalog, embedder, shoppers = 80, seed = 7, onProgress } = options;
  const rnd = seededRandom(seed);
  const items = options.items ?? new ItemVectors(embedder, toItems(catalog));
  let events = 0;
  const reports: WireReport[] = [];
  // why: the reports' randomization must not be predictable from the persona seed
  const random = () => webcrypto.getRandomValues(new Uint32Array(1))[0] / 4294967296;
  const start = Date.now() - 14 * 24 * 3600_000;
  for (let s = 0; s < shoppers; s++) {
    const persona = drawPersona(rnd);
    const agent = new MemoryAgent({ items });
    const count = 15 + Math.floor(rnd() * 16);
    let at = start + Math.floor(rnd() * 7 * 24 * 3600_000);
    for (const e of browse(persona, catalog, rnd, count)) {
      at += 30_000 + Math.floor(rnd() * 600_000);
      await agent.observe({ item: e.item, action: e.action, at });
    }
    events += count;
    const report = agent.makeReport(options.epoch, options.ldp, random);
    if (report) reports.push(report);
    onProgress?.(s + 1, shoppers);
  }
  return { shoppers, events, reports };
}
