/**
 * Flat parameter layout of a SASRec model for training: every tensor of {@link SasrecWeights}
 * is a view into one array, in {@link namedTensors} order, so gradients and Adam moments are
 * plain arrays of the same length and a whole model travels between threads as one buffer.
 */
import { BLOCK_TENSORS, checkConfig, isMatrix, type BlockTensorName, type SasrecConfig, type SasrecWeights } from './model.js';

export interface BlockOffsets {
  ln1g: number;
  ln1b: number;
  wq: number;
  bq: number;
  wk: number;
  bk: number;
  wv: number;
  bv: number;
  ln2g: number;
  ln2b: number;
  w1: number;
  b1: number;
  w2: number;
  b2: number;
}

export interface Layout {
  config: SasrecConfig;
  numItems: number;
  itemEmb: number;
  posEmb: number;
  blocks: BlockOffsets[];
  lnfG: number;
  lnfB: number;
  /** Total number of parameters (including the padding row of the item embedding). */
  size: number;
}

export function makeLayout(config: SasrecConfig, numItems: number): Layout {
  checkConfig(config);
  const d = config.dim;
  let o = 0;
  const itemEmb = o;
  o += (numItems + 1) * d;
  const posEmb = o;
  o += config.maxLen * d;
  const blocks: BlockOffsets[] = [];
  for (let b = 0; b < config.blocks; b++) {
    const blk = {} as Record<BlockTensorName, number>;
    for (const name of BLOCK_TENSORS) {
      blk[name] = o;
      o += isMatrix(name) ? d * d : d;
    }
    blocks.push(blk as BlockOffsets);
  }
  const lnfG = o;
  o += d;
  const lnfB = o;
  o += d;
  return { config: { ...config }, numItems, itemEmb, posEmb, blocks, lnfG, lnfB, size: o };
}

/** {@link SasrecWeights} whose tensors are views into `flat` (no copy). */
export function weightsView(layout: Layout, flat: Float32Array): SasrecWeights {
  if (flat.length !== layout.size) throw new RangeError(`weightsView: ${flat.length} values for a layout of ${layout.size}`);
  const d = layout.config.dim;
  const v = (o: number, n: number) => flat.subarray(o, o + n);
  return {
    config: { ...layout.config },
    numItems: layout.numItems,
    itemEmb: v(layout.itemEmb, (layout.numItems + 1) * d),
    posEmb: v(layout.posEmb, layout.config.maxLen * d),
    blocks: layout.blocks.map((blk) => {
      const out = {} as Record<BlockTensorName, Float32Array>;
      for (const name of BLOCK_TENSORS) out[name] = v(blk[name], isMatrix(name) ? d * d : d);
      return out as SasrecWeights['blocks'][number];
    }),
    lnfG: v(layout.lnfG, d),
    lnfB: v(layout.lnfB, d),
  };
}

/** A copy of `w` as one flat array in `layout` order. */
export function flatten(layout: Layout, w: SasrecWeights): Float32Array {
  const flat = new Float32Array(layout.size);
  const view = weightsView(layout, flat);
  view.itemEmb.set(w.itemEmb);
  view.posEmb.set(w.posEmb);
  w.blocks.forEach((blk, b) => {
    for (const name of BLOCK_TENSORS) view.blocks[b][name].set(blk[name]);
  });
  view.lnfG.set(w.lnfG);
  view.lnfB.set(w.lnfB);
  return flat;
}
