/**
 * `atomem-vectors`' disk cache of item vectors (Node only), so a nightly run over a large catalog
 * embeds only the items that are new or whose text changed.
 *
 * Key: the first 16 bytes of SHA-256 over `embedder id`, a NUL, and the item's canonical text
 * (`itemText`, what is embedded): a product whose title, categories or description change gets a
 * new key; one whose price changes keeps its vector. Value: the embedder's float32 output, bit
 * for bit (a cached vector is the one a fresh run would write).
 *
 * Layout (little-endian): magic `ATEC`, u32 version (1), u32 dim, u32 byte length E of the
 * embedder id, E bytes UTF-8 embedder id, zero padding to 4; then records of 16 key bytes and
 * dim × f32, appended after every embedder batch (a killed run keeps what it embedded; a partial
 * last record is cut off on the next open). The file is rewritten (to a temporary name, then
 * renamed) with only the catalog's current items when stale records outnumber them.
 *
 * Why a flat append-only file and not SQLite: the access pattern is one sequential read at the
 * start and appends, which a file of fixed-size records does at disk speed with no dependency
 * (`node:sqlite` is experimental in Node 22, `better-sqlite3` is a native build); a cache of
 * another embedder or dimension is simply replaced.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

const MAGIC = [0x41, 0x54, 0x45, 0x43]; // "ATEC"
const VERSION = 1;
const KEY_BYTES = 16;

/** The cache key of one text under one embedder (hex). */
export function vectorCacheKey(embedderId: string, text: string): string {
  return createHash('sha256').update(`${embedderId}\u0000${text}`).digest().subarray(0, KEY_BYTES).toString('hex');
}

function headerBytes(embedderId: string, dim: number): Uint8Array {
  const id = new TextEncoder().encode(embedderId);
  const out = new Uint8Array((16 + id.length + 3) & ~3);
  out.set(MAGIC, 0);
  const v = new DataView(out.buffer);
  v.setUint32(4, VERSION, true);
  v.setUint32(8, dim, true);
  v.setUint32(12, id.length, true);
  out.set(id, 16);
  return out;
}

/** What {@link VectorDiskCache.open} found. */
export interface CacheOpenInfo {
  /** Records read. */
  records: number;
  /** Why the file was not used (another embedder, unreadable, …), if it was not. */
  replaced?: string;
  /** Bytes of a partial last record cut off. */
  truncatedBytes: number;
}

/** An open cache file of one embedder (see the module comment). */
export class VectorDiskCache {
  private readonly map = new Map<string, Float32Array>();
  private pending: Uint8Array[] = [];
  private headerWritten = false;
  private constructor(
    readonly path: string,
    readonly embedderId: string,
    readonly dim: number,
  ) {}

  /** Read the cache at `path` (missing: empty; another embedder's or malformed: replaced on the first write). */
  static async open(path: string, embedderId: string, dim: number): Promise<{ cache: VectorDiskCache; info: CacheOpenInfo }> {
    const cache = new VectorDiskCache(path, embedderId, dim);
    const info: CacheOpenInfo = { records: 0, truncatedBytes: 0 };
    let buf: Buffer;
    try {
      buf = await readFile(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') info.replaced = `unreadable (${(e as Error).message})`;
      return { cache, info };
    }
    const want = headerBytes(embedderId, dim);
    if (buf.length < want.length || !want.every((b, i) => buf[i] === b)) {
      const other =
        buf.length >= 16 && MAGIC.every((b, i) => buf[i] === b)
          ? `made for ${buf.subarray(16, 16 + buf.readUInt32LE(12)).toString('utf8')} (${buf.readUInt32LE(8)}-d)`
          : 'not a vector cache file';
      info.replaced = other;
      return { cache, info };
    }
    const rec = KEY_BYTES + 4 * dim;
    const body = buf.length - want.length;
    const whole = Math.floor(body / rec);
    info.truncatedBytes = body - whole * rec;
    for (let r = 0; r < whole; r++) {
      const at = want.length + r * rec;
      const key = buf.subarray(at, at + KEY_BYTES).toString('hex');
      const v = new Float32Array(dim);
      for (let d = 0; d < dim; d++) v[d] = buf.readFloatLE(at + KEY_BYTES + 4 * d);
      cache.map.set(key, v);
    }
    info.records = whole;
    cache.headerWritten = true;
    if (info.truncatedBytes) {
      const fh = await open(path, 'r+');
      try {
        await fh.truncate(want.length + whole * rec);
      } finally {
        await fh.close();
      }
    }
    return { cache, info };
  }

  /** Distinct keys held. */
  get size(): number {
    return this.map.size;
  }

  get(key: string): Float32Array | undefined {
    return this.map.get(key);
  }

  /** Remember a vector (written by the next {@link flush}). */
  set(key: string, vector: Float32Array): void {
    if (vector.length !== this.dim) throw new RangeError(`VectorDiskCache: a ${vector.length}-d vector for a ${this.dim}-d cache`);
    this.map.set(key, vector);
    const out = new Uint8Array(KEY_BYTES + 4 * this.dim);
    out.set(Buffer.from(key, 'hex'), 0);
    const v = new DataView(out.buffer);
    for (let d = 0; d < this.dim; d++) v.setFloat32(KEY_BYTES + 4 * d, vector[d], true);
    this.pending.push(out);
  }

  /** Append what was set since the last flush (creates the file and its folder, or replaces a foreign file). */
  async flush(): Promise<void> {
    if (!this.pending.length) return;
    const parts = this.pending;
    this.pending = [];
    if (!this.headerWritten) {
      await mkdir(dirname(this.path), { recursive: true });
      await writeFile(this.path, Buffer.concat([headerBytes(this.embedderId, this.dim), ...parts]));
      this.headerWritten = true;
      return;
    }
    await writeFile(this.path, Buffer.concat(parts), { flag: 'a' });
  }

  /**
   * Rewrite the file with the `live` keys only when the file holds more than twice as many
   * records (stale texts of edited or removed products). Returns the records dropped.
   */
  async compact(live: ReadonlySet<string>): Promise<number> {
    await this.flush();
    const stale = [...this.map.keys()].filter((k) => !live.has(k));
    if (this.map.size <= 2 * Math.max(live.size, 1)) return 0;
    for (const k of stale) this.map.delete(k);
    const rec = KEY_BYTES + 4 * this.dim;
    const out = new Uint8Array(this.map.size * rec);
    const v = new DataView(out.buffer);
    let at = 0;
    for (const [key, vec] of this.map) {
      out.set(Buffer.from(key, 'hex'), at);
      for (let d = 0; d < this.dim; d++) v.setFloat32(at + KEY_BYTES + 4 * d, vec[d], true);
      at += rec;
    }
    const tmp = join(dirname(this.path), `.${basename(this.path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      await writeFile(tmp, Buffer.concat([headerBytes(this.embedderId, this.dim), out]));
      await rename(tmp, this.path);
    } catch (e) {
      await rm(tmp, { force: true }).catch(() => undefined);
      throw e;
    }
    return stale.length;
  }
}
