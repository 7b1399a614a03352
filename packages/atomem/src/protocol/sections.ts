/**
 * The typed sections of atomem's binary files (the shop model file v1, the catalog vector file
 * v3's head and shards): a JSON header lists named sections `{ name, type, offset, count }` of
 * little-endian elements stored after it in a data area, each at a 4-byte aligned offset. One
 * reader checks a section table against the bytes and hands out typed copies of its sections,
 * so both formats refuse a bad file with the same words.
 */

/** The element types a section may hold. */
export type ElementType = 'u8' | 'i8' | 'u16' | 'u32' | 'f32';

/** Bytes per element of each type. */
export const ELEMENT_BYTES: Record<ElementType, number> = { u8: 1, i8: 1, u16: 2, u32: 4, f32: 4 };

/** A typed copy of a section. */
export type Typed = Uint8Array | Int8Array | Uint16Array | Uint32Array | Float32Array;

/** `n` rounded up to a multiple of 4. */
export const align4 = (n: number): number => (n + 3) & ~3;

/** One entry of a section table. */
export interface SectionEntry {
  name: string;
  type: ElementType;
  /** Byte offset from the start of the data area (a multiple of 4). */
  offset: number;
  /** Element count. */
  count: number;
  /** CRC-32 of the section's bytes, in formats that carry one. */
  crc32?: number;
}

/** The sections of one file, checked: `get` a typed copy by name, `has` a name. */
export interface SectionReader {
  /**
   * A copy of section `name`, which must be of one of `types` (and hold `count` elements when
   * given); f32 sections must hold finite numbers only.
   */
  get(name: string, types: ElementType[], count?: number): Typed;
  has(name: string): boolean;
}

/**
 * Check the section table `sections` against the data area of `u8` that starts at byte `start`
 * and return a reader of its sections. Every section must be well formed, aligned, after the one
 * before it without overlap, named once and inside the file; with `crc`, its checksum must match;
 * the file must end with its last section (4-byte padding allowed). Any fault calls `fail` with
 * the reason, which must throw.
 */
export function readSections(
  u8: Uint8Array,
  start: number,
  sections: readonly SectionEntry[],
  fail: (why: string) => never,
  crc?: (bytes: Uint8Array) => number,
): SectionReader {
  const byName = new Map<string, SectionEntry>();
  let end = 0;
  for (const s of sections) {
    if (
      !s ||
      typeof s.name !== 'string' ||
      !(s.type in ELEMENT_BYTES) ||
      !Number.isInteger(s.offset) ||
      !Number.isInteger(s.count) ||
      s.offset < 0 ||
      s.count < 0
    )
      fail(`section ${JSON.stringify(s?.name)} is malformed`);
    if (s.offset % 4 !== 0) fail(`section ${s.name} is not aligned`);
    if (s.offset < end) fail(`section ${s.name} overlaps the one before it`);
    // why: padding is outside every section's checksum, so it must be the zeros a writer puts there
    for (let b = start + end; b < start + Math.min(s.offset, align4(end)) && b < u8.length; b++)
      if (u8[b] !== 0) fail(`the padding before section ${s.name} is not zero`);
    if (byName.has(s.name)) fail(`section ${s.name} appears twice`);
    const from = start + s.offset;
    const to = from + s.count * ELEMENT_BYTES[s.type];
    if (to > u8.length) fail(`it is truncated: section ${s.name} runs past the end of the file (it needs bytes ${from}..${to}, the file has ${u8.length})`);
    if (crc && crc(u8.subarray(from, to)) !== s.crc32) fail(`the checksum of section ${s.name} does not match (the file is corrupt)`);
    end = to - start;
    byName.set(s.name, s);
  }
  if (u8.length !== start + end && u8.length !== start + align4(end))
    fail(`${u8.length - start - end} bytes after the last section (the file has ${u8.length} bytes, its sections end at ${start + end})`);
  for (let b = start + end; b < u8.length; b++) if (u8[b] !== 0) fail('the padding after the last section is not zero');
  const view = new DataView(u8.buffer, u8.byteOffset, u8.byteLength);
  const get = (name: string, types: ElementType[], count?: number): Typed => {
    const s = byName.get(name) ?? fail(`section ${name} is missing`);
    if (!types.includes(s.type)) fail(`section ${name} has type ${s.type}, expected ${types.join(' or ')}`);
    if (count !== undefined && s.count !== count) fail(`section ${name} has ${s.count} elements, expected ${count}`);
    const base = start + s.offset;
    switch (s.type) {
      case 'u8':
        return u8.slice(base, base + s.count);
      case 'i8':
        return new Int8Array(u8.slice(base, base + s.count).buffer);
      case 'u16':
        return Uint16Array.from({ length: s.count }, (_, k) => view.getUint16(base + 2 * k, true));
      case 'u32':
        return Uint32Array.from({ length: s.count }, (_, k) => view.getUint32(base + 4 * k, true));
      default: {
        const out = new Float32Array(s.count);
        for (let k = 0; k < s.count; k++) {
          const v = view.getFloat32(base + 4 * k, true);
          if (!Number.isFinite(v)) fail(`section ${name} holds ${v}`);
          out[k] = v;
        }
        return out;
      }
    }
  };
  return { get, has: (name) => byName.has(name) };
}
