/**
 * The demo shop's catalog: a deterministic (seeded) generated assortment of a few hundred
 * products in six departments, each with a title, a description, a price and a procedural SVG
 * picture (department colour + shape + initials). Shared by the demo server (to simulate
 * shoppers in Node) and the page (bundled by Vite), so both see exactly the same items and
 * the same item ids.
 */
import type { Item } from 'atomem';

/** One department of the shop. */
export interface Department {
  /** Display name, also the item's category. */
  name: string;
  /** Background colour of the pictures (hex). */
  colour: string;
  /** Shape drawn on the pictures. */
  shape: 'circle' | 'triangle' | 'square' | 'diamond' | 'hexagon' | 'star';
  /** Product nouns, with the words that describe their use. */
  nouns: readonly (readonly [noun: string, use: string])[];
  /** Adjectives that fit the department. */
  adjectives: readonly string[];
  /** Phrases the descriptions are built from. */
  phrases: readonly string[];
  /** Price range in euros. */
  price: readonly [min: number, max: number];
}

/** A product: a catalog {@link Item} plus what the shop shows. */
export interface Product extends Item {
  /** Department name (= `categories[0]`). */
  department: string;
  /** Price in euros, two decimals. */
  price: number;
  /** Two-letter initials drawn on the picture. */
  initials: string;
}

/** The six departments. */
export const DEPARTMENTS: readonly Department[] = [
  {
    name: 'Outdoor',
    colour: '#1d6b3a',
    shape: 'triangle',
    nouns: [
      ['Tent', 'camping under the stars'],
      ['Backpack', 'multi-day hiking trips'],
      ['Sleeping Bag', 'cold mountain nights'],
      ['Trekking Poles', 'steep mountain trails'],
      ['Headlamp', 'night hikes and camping'],
      ['Camping Stove', 'cooking at the campsite'],
      ['Hiking Boots', 'rugged hiking trails'],
      ['Rain Jacket', 'wet weather on the trail'],
      ['Water Filter', 'backcountry hiking'],
      ['Climbing Rope', 'rock climbing and mountaineering'],
    ],
    adjectives: ['Alpine', 'Trail', 'Summit', 'Ridge', 'Basecamp', 'Ultralight', 'Expedition', 'Canyon'],
    phrases: [
      'Built for hiking and camping in the wilderness.',
      'Waterproof and rugged for mountain adventures.',
      'Lightweight gear for backpacking outdoors.',
      'Tested on alpine trails and forest campsites.',
    ],
    price: [19, 349],
  },
  {
    name: 'Kitchen',
    colour: '#a33a12',
    shape: 'circle',
    nouns: [
      ['Chef Knife', 'slicing vegetables and meat'],
      ['Frying Pan', 'searing and sautéing'],
      ['Blender', 'smoothies and soups'],
      ['Coffee Grinder', 'fresh coffee every morning'],
      ['Dutch Oven', 'slow-cooked stews and bread'],
      ['Cutting Board', 'everyday food preparation'],
      ['Stand Mixer', 'baking cakes and dough'],
      ['Spice Rack', 'organising herbs and spices'],
      ['Tea Kettle', 'boiling water for tea'],
      ['Baking Tray', 'roasting and baking in the oven'],
    ],
    adjectives: ['Gourmet', 'Copper', 'Bistro', 'Rustic', 'Artisan', 'Cast-Iron', 'Ceramic', 'Pro'],
    phrases: [
      'Made for home cooks who love to cook and bake.',
      'A kitchen essential for recipes and meal preparation.',
      'Dishwasher safe cookware for everyday cooking.',
      'Chef quality tools for your kitchen.',
    ],
    price: [9, 399],
  },
  {
    name: 'Books',
    colour: '#4b3b8f',
    shape: 'square',
    nouns: [
      ['Mystery Novel', 'a detective solving a murder'],
      ['Fantasy Saga', 'dragons, wizards and quests'],
      ['Science Fiction Novel', 'space travel and alien worlds'],
      ['History Book', 'empires and ancient civilisations'],
      ['Biography', 'the life of a famous inventor'],
      ['Poetry Collection', 'poems about love and loss'],
      ['Cookbook', 'recipes from around the world'],
      ['Thriller', 'spies and international conspiracies'],
      ['Philosophy Primer', 'big questions about the mind'],
      ['Graphic Novel', 'illustrated stories and comics'],
    ],
    adjectives: ['Midnight', 'Forgotten', 'Silent', 'Golden', 'Last', 'Hidden', 'Winter', 'Secret'],
    phrases: [
      'A paperback book for readers who love stories.',
      'A gripping read with memorable characters and chapters.',
      'An award-winning book by a bestselling author.',
      'Hardcover edition, perfect for your reading list.',
    ],
    price: [7, 45],
  },
  {
    name: 'Audio',
    colour: '#0b5f86',
    shape: 'diamond',
    nouns: [
      ['Headphones', 'listening to music in detail'],
      ['Bluetooth Speaker', 'wireless music at parties'],
      ['Turntable', 'playing vinyl records'],
      ['Earbuds', 'music and podcasts on the go'],
      ['Soundbar', 'cinematic sound for TV'],
      ['Microphone', 'recording podcasts and vocals'],
      ['Amplifier', 'powering hi-fi speakers'],
      ['Studio Monitors', 'mixing music in the studio'],
      ['DAC', 'high-resolution audio playback'],
      ['Radio', 'FM and internet radio stations'],
    ],
    adjectives: ['Studio', 'Bass', 'Hi-Fi', 'Wireless', 'Noise-Cancelling', 'Acoustic', 'Retro', 'Sonic'],
    phrases: [
      'Rich sound and deep bass for music lovers.',
      'Crystal clear audio with wireless Bluetooth.',
      'Hi-fi sound quality for your music collection.',
      'Studio-grade audio for listening and recording.',
    ],
    price: [15, 899],
  },
  {
    name: 'Garden',
    colour: '#5e6b12',
    shape: 'hexagon',
    nouns: [
      ['Pruning Shears', 'trimming roses and shrubs'],
      ['Watering Can', 'watering flowers and seedlings'],
      ['Raised Bed', 'growing vegetables at home'],
      ['Seed Kit', 'sowing herbs and tomatoes'],
      ['Garden Hose', 'watering the lawn'],
      ['Compost Bin', 'turning scraps into soil'],
      ['Lawn Mower', 'cutting the grass'],
      ['Bird Feeder', 'attracting garden birds'],
      ['Planter Pot', 'potted plants on the patio'],
      ['Garden Gloves', 'digging and weeding'],
    ],
    adjectives: ['Meadow', 'Greenhouse', 'Heirloom', 'Cottage', 'Blossom', 'Evergreen', 'Orchard', 'Terrace'],
    phrases: [
      'For gardeners who grow flowers, plants and vegetables.',
      'Durable garden tools for the lawn and flower beds.',
      'Helps your plants and seedlings thrive outdoors in the garden.',
      'Perfect for planting, weeding and harvesting.',
    ],
    price: [5, 499],
  },
  {
    name: 'Toys',
    colour: '#9c1f5a',
    shape: 'star',
    nouns: [
      ['Building Blocks', 'creative construction play'],
      ['Puzzle', 'jigsaw fun for the family'],
      ['Plush Bear', 'cuddles at bedtime'],
      ['Board Game', 'family game night'],
      ['Toy Train', 'railway adventures'],
      ['Doll House', 'imaginative pretend play'],
      ['Kite', 'windy days at the park'],
      ['Science Kit', 'experiments for curious kids'],
      ['Remote Control Car', 'racing around the house'],
      ['Art Set', 'drawing and painting for children'],
    ],
    adjectives: ['Rainbow', 'Happy', 'Magic', 'Tiny', 'Jumbo', 'Wonder', 'Galaxy', 'Funny'],
    phrases: [
      'A fun toy for kids and children of all ages.',
      'Playful and safe, a great gift for children.',
      'Encourages creativity and learning through play.',
      'Hours of playtime fun for boys and girls.',
    ],
    price: [6, 129],
  },
];

/**
 * The seeded PRNG of the catalog and the simulated shoppers: mulberry32 (32-bit state, not
 * cryptographic), the same stream as `@atomem/bench/rng`'s. Written out here because this file is
 * bundled into the page: importing the bench's module would pull `atomem/engine` (the whole
 * engine, with its Node-only USE-lite loader) into the page's bundle.
 */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(rnd: () => number, list: readonly T[]): T {
  return list[Math.floor(rnd() * list.length)];
}

/**
 * Generate the catalog: `perDepartment` products in each department (default 50, so 300 in
 * all), the same for the same `seed` on every machine. Ids look like `outdoor-007`.
 */
export function generateCatalog(seed = 20260501, perDepartment = 50): Product[] {
  const rnd = seededRandom(seed);
  const out: Product[] = [];
  for (const d of DEPARTMENTS) {
    const seen = new Set<string>();
    for (let i = 0; i < perDepartment; i++) {
      let title = '';
      let noun: readonly [string, string] = d.nouns[0];
      for (let tries = 0; tries < 20; tries++) {
        noun = pick(rnd, d.nouns);
        title = `${pick(rnd, d.adjectives)} ${noun[0]}`;
        if (!seen.has(title)) break;
      }
      if (seen.has(title)) title = `${title} ${i + 1}`;
      seen.add(title);
      const [lo, hi] = d.price;
      const price = Math.round((lo + (hi - lo) * rnd() ** 2) * 100) / 100 - 0.01;
      const words = title.split(/[\s-]+/);
      const initials = (words[0][0] + (words[words.length - 1][0] ?? '')).toUpperCase();
      out.push({
        id: `${d.name.toLowerCase()}-${String(i + 1).padStart(3, '0')}`,
        title,
        categories: [d.name],
        description: `${d.name}: ${noun[0].toLowerCase()} for ${noun[1]}. ${pick(rnd, d.phrases)}`,
        department: d.name,
        price: Math.max(0.99, Math.round(price * 100) / 100),
        initials,
      });
    }
  }
  return out;
}

/** The catalog as the engine needs it (id, title, categories, description): smaller to send to the worker. */
export function toItems(products: readonly Product[]): Item[] {
  return products.map(({ id, title, categories, description }) => ({ id, title, categories, description }));
}

/** The department of a name (undefined if unknown). */
export function department(name: string): Department | undefined {
  return DEPARTMENTS.find((d) => d.name === name);
}

function shapePath(shape: Department['shape'], cx: number, cy: number, r: number): string {
  const poly = (n: number, rot: number, radii: (i: number) => number = () => r) =>
    Array.from({ length: n }, (_, i) => {
      const a = rot + (i * 2 * Math.PI) / n;
      return `${(cx + radii(i) * Math.cos(a)).toFixed(1)},${(cy + radii(i) * Math.sin(a)).toFixed(1)}`;
    }).join(' ');
  switch (shape) {
    case 'circle':
      return `<circle cx="${cx}" cy="${cy}" r="${r}"/>`;
    case 'square':
      return `<rect x="${cx - r * 0.85}" y="${cy - r * 0.85}" width="${r * 1.7}" height="${r * 1.7}" rx="6"/>`;
    case 'triangle':
      return `<polygon points="${poly(3, -Math.PI / 2)}"/>`;
    case 'diamond':
      return `<polygon points="${poly(4, -Math.PI / 2)}"/>`;
    case 'hexagon':
      return `<polygon points="${poly(6, 0)}"/>`;
    case 'star':
      return `<polygon points="${poly(10, -Math.PI / 2, (i) => (i % 2 ? r * 0.45 : r))}"/>`;
  }
}

/**
 * A procedural SVG picture of a product: department colour, department shape (size and a
 * second tint vary per product), initials. Decorative: the page gives it `alt=""` next to the title.
 */
export function productSvg(p: Product): string {
  const d = department(p.department) ?? DEPARTMENTS[0];
  let h = 0;
  for (const c of p.id) h = (Math.imul(h, 31) + c.charCodeAt(0)) >>> 0;
  const r = 34 + (h % 14);
  const cx = 60 + ((h >> 4) % 21) - 10;
  const cy = 60 + ((h >> 9) % 13) - 6;
  const accent = `hsl(${(h >> 3) % 360} 70% 85%)`;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 120 120" width="120" height="120">` +
    `<rect width="120" height="120" fill="${d.colour}"/>` +
    `<g fill="${accent}" opacity="0.9">${shapePath(d.shape, cx, cy, r)}</g>` +
    `<text x="60" y="68" text-anchor="middle" font-family="system-ui,sans-serif" font-size="26" font-weight="700" fill="#111">${p.initials}</text>` +
    `</svg>`
  );
}

/** {@link productSvg} as a `data:` URL for an `<img src>`. */
export function productImageUrl(p: Product): string {
  return `data:image/svg+xml;charset=utf-8,${encodeURIComponent(productSvg(p))}`;
}
