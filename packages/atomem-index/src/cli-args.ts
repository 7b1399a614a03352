/** Argument parsers shared by the two command lines of this package (`atomem-index`, `atomem-relay`). */
import { InvalidArgumentError } from 'commander';

/** An integer option ≥ `min`. */
export function int(name: string, min: number): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return n;
  };
}

/** A number option in [`min`, `max`]. */
export function num(name: string, min: number, max = Infinity): (v: string) => number {
  return (v) => {
    const n = Number(v);
    if (!Number.isFinite(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be a number in [${min}, ${max}]`);
    return n;
  };
}

/** A repeatable option's values, in order. */
export function collect(v: string, prev: string[]): string[] {
  return [...prev, v];
}

/** `--trust-proxy`: `true`, a hop count, or a comma-separated list of proxy addresses / CIDRs. */
export function parseTrustProxy(v: string): boolean | number | string[] {
  if (v === 'true') return true;
  if (/^\d+$/.test(v)) return Number(v);
  const list = v
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (list.length === 0) throw new InvalidArgumentError('--trust-proxy needs true, a hop count, or proxy addresses / CIDRs');
  return list;
}
