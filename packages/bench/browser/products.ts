/**
 * The browser benchmark's catalog: 256 deterministic products (8 departments × 4 kinds × 8
 * editions) with titles and one- or two-sentence descriptions. Shared by the bench page and by
 * the Node side (`src/browser.ts` makes the first-visit catalog vector file from it). Pure data.
 */
import type { Item } from 'atomem';

// A realistic catalog: 256 products, 8 departments, titles and one- or two-sentence descriptions.

interface Kind {
  noun: string;
  about: string;
}

const DEPARTMENTS: Record<string, { brands: string[]; kinds: Kind[]; extras: string[] }> = {
  Outdoor: {
    brands: ['Northpeak', 'Alder & Stone', 'Ridgeline', 'Kestrel'],
    kinds: [
      { noun: 'Hiking Boots', about: 'Waterproof full-grain leather upper, Vibram outsole and a cushioned EVA midsole for long days on rocky trails.' },
      { noun: 'Two-Person Tent', about: 'Freestanding dome tent with aluminium poles, a full-coverage rain fly and two vestibules; packs down to 2.1 kg.' },
      { noun: 'Down Sleeping Bag', about: '650-fill responsibly sourced down, rated to -5 °C, with a draft collar and a compression sack.' },
      { noun: 'Trekking Poles', about: 'Collapsible carbon poles with cork grips and quick flick-locks, 105 to 135 cm.' },
    ],
    extras: ['Backed by a lifetime warranty.', 'Tested in the Alps and the Scottish Highlands.', 'Made with recycled materials.'],
  },
  Kitchen: {
    brands: ['Maison Cuivre', 'Fieldhouse', 'Okada', 'Brightwell'],
    kinds: [
      { noun: 'Cast Iron Skillet, 26 cm', about: 'Pre-seasoned cast iron that goes from stovetop to oven; works on induction and open fire.' },
      { noun: 'Chef Knife, 20 cm', about: 'Forged from high-carbon stainless steel with a full tang and a balanced pakkawood handle.' },
      { noun: 'Espresso Machine', about: '15-bar pump, a steam wand for milk foam and a removable 1.5 L water tank; heats up in 40 seconds.' },
      { noun: 'Stand Mixer', about: 'A 5 L stainless bowl, ten speeds and a dough hook, whisk and flat beater included.' },
    ],
    extras: ['Dishwasher safe.', 'Designed by professional chefs.', 'Comes gift-boxed.'],
  },
  Books: {
    brands: ['Penrose Press', 'Harbour Books', 'Linden House', 'Quire'],
    kinds: [
      {
        noun: 'The Silent Harbour (Paperback)',
        about: 'A detective returns to her fishing town to solve a twenty-year-old disappearance. A gripping crime novel.',
      },
      { noun: 'Stars Beyond Orion (Hardcover)', about: 'A sweeping space opera of rival empires, a stolen starship and an AI that remembers everything.' },
      { noun: 'Weeknight Vegetarian Cookbook', about: '120 quick recipes for busy evenings, from one-pan curries to crispy tofu bowls.' },
      { noun: 'A Short History of Rome', about: 'From the founding myths to the fall of Constantinople, told through ten remarkable lives.' },
    ],
    extras: ['Winner of a national book award.', 'Now a major streaming series.', 'Includes a reading-group guide.'],
  },
  Electronics: {
    brands: ['Voltra', 'Sonique', 'Pixelcraft', 'Auralink'],
    kinds: [
      { noun: 'Wireless Noise-Cancelling Headphones', about: 'Adaptive noise cancelling, 30-hour battery and multipoint Bluetooth 5.3 with low-latency mode.' },
      { noun: '4K Action Camera', about: 'Waterproof to 10 m without a case, with image stabilisation and a front-facing screen for vlogging.' },
      { noun: 'Smart Fitness Watch', about: 'Heart-rate, sleep and SpO2 tracking, built-in GPS and up to 14 days of battery life.' },
      { noun: 'Portable Bluetooth Speaker', about: 'Rugged, dustproof speaker with deep bass, 20 hours of playtime and a built-in power bank.' },
    ],
    extras: ['Two-year manufacturer warranty.', 'USB-C fast charging.', 'Works with iOS and Android.'],
  },
  Beauty: {
    brands: ['Lumière', 'Verdant', 'Aqua Botanica', 'Rosehip & Co'],
    kinds: [
      { noun: 'Vitamin C Brightening Serum', about: '15% vitamin C with ferulic acid and hyaluronic acid to even skin tone and boost radiance.' },
      { noun: 'Hydrating Night Cream', about: 'Rich overnight moisturiser with ceramides and squalane for dry and sensitive skin.' },
      { noun: 'Mineral Sunscreen SPF 50', about: 'Reef-friendly zinc oxide sunscreen that leaves no white cast; water resistant for 80 minutes.' },
      { noun: 'Argan Oil Shampoo', about: 'Sulphate-free shampoo that repairs dry, colour-treated hair and tames frizz.' },
    ],
    extras: ['Vegan and cruelty free.', 'Dermatologist tested.', 'Fragrance free.'],
  },
  Home: {
    brands: ['Hearth & Oak', 'Nordhem', 'Casa Lino', 'Willowmere'],
    kinds: [
      { noun: 'Linen Duvet Cover Set', about: 'Stone-washed French linen that gets softer with every wash; includes two pillowcases.' },
      { noun: 'Ceramic Table Lamp', about: 'Hand-glazed ceramic base with a pleated fabric shade and a dimmable warm LED bulb.' },
      { noun: 'Wool Throw Blanket', about: 'Chunky knit merino wool throw, 130 × 170 cm, for cosy evenings on the sofa.' },
      { noun: 'Scented Soy Candle', about: 'Hand-poured soy wax with notes of cedar, amber and sea salt; burns for 45 hours.' },
    ],
    extras: ['Ethically made in Portugal.', 'Free returns within 60 days.', 'Available in five colours.'],
  },
  Toys: {
    brands: ['Little Maple', 'Brickworks', 'Puzzleberry', 'Kite & Kin'],
    kinds: [
      { noun: 'Wooden Train Set', about: '52-piece beech wood railway with bridges, a tunnel and magnetic carriages, for ages 3 and up.' },
      { noun: '1000-Piece Jigsaw Puzzle', about: 'A vintage map of the world printed on thick recycled board, with a poster for reference.' },
      { noun: 'STEM Robot Building Kit', about: 'Build and code five robots with a tablet app that teaches the basics of programming.' },
      { noun: 'Plush Teddy Bear', about: 'An extra-soft 40 cm teddy bear with embroidered eyes, safe from birth.' },
    ],
    extras: ['Meets EN71 toy safety standards.', 'Plastic-free packaging.', 'A favourite gift for birthdays.'],
  },
  Sports: {
    brands: ['Stride', 'Apex Athletics', 'Tidewater', 'Pulse'],
    kinds: [
      { noun: 'Road Running Shoes', about: 'Responsive foam midsole, breathable engineered mesh and a durable rubber outsole for daily training.' },
      { noun: 'Non-Slip Yoga Mat', about: '6 mm natural rubber mat with alignment lines and a carrying strap.' },
      { noun: 'Adjustable Dumbbells, Pair', about: 'Dial from 2 to 24 kg in seconds; replaces fifteen sets of weights.' },
      { noun: 'Insulated Water Bottle, 750 ml', about: 'Double-wall stainless steel keeps drinks cold for 24 hours or hot for 12.' },
    ],
    extras: ['Chosen by marathon coaches.', 'Lightweight and easy to pack.', 'Sweat and odour resistant.'],
  },
};

const EDITIONS = ['', ' Pro', ' Classic', ' Lite', ' Plus', ' Essential', ' Signature', ' Explorer'];

/** 256 deterministic products (8 departments × 4 kinds × 8 editions). */
export function productCatalog(n = 256): Item[] {
  const deps = Object.keys(DEPARTMENTS);
  const items: Item[] = [];
  for (let i = 0; i < n; i++) {
    const dept = deps[i % deps.length];
    const d = DEPARTMENTS[dept];
    const kind = d.kinds[Math.floor(i / deps.length) % d.kinds.length];
    const edition = EDITIONS[Math.floor(i / (deps.length * d.kinds.length)) % EDITIONS.length];
    const brand = d.brands[(i * 7 + 3) % d.brands.length];
    items.push({
      id: `sku-${String(i).padStart(4, '0')}`,
      title: `${brand} ${kind.noun}${edition}`,
      categories: [dept],
      description: `${kind.about} ${d.extras[i % d.extras.length]}`,
    });
  }
  return items;
}
