/**
 * SASRec settings that scale with the shop: the loss by the catalog's size, the regularisation
 * by how long the histories are. Both the shop CLI (`atomem-shop --sasrec`) and the benchmark's
 * full-ranking SASRec start from these when no option says otherwise.
 *
 * - Loss. Full-softmax cross-entropy costs three catalog-wide products and a catalog of
 *   exponentials per position; on a 12,101-item catalog a step costs 6× one with sampled softmax
 *   over 1,024 items (BENCHMARKS.md, "Training cost"), and its advantage shrinks as the sample
 *   covers less of the catalog only slowly. So: `ce` while the catalog has at most
 *   {@link FULL_SOFTMAX_MAX_ITEMS} items (ML-100K's 1,349: validation NDCG@10 over all items
 *   0.1155 against 0.1122 with 1,024 sampled negatives at 60 epochs, sasrec/README.md),
 *   else `sampled-softmax` with {@link SAMPLED_NEGATIVES} negatives (Amazon Beauty's 12,101:
 *   validation NDCG@10 0.0775 with 1,024 negatives against 0.0668 with 256).
 * - Regularisation. Short histories (a mean below {@link SHORT_HISTORY} items, as on the Amazon
 *   sets) take the original SASRec's sparse-data settings: dropout 0.5, L 50, lr 0.001 (Kang &
 *   McAuley 2018 use 0.5 on the Amazon sets and 0.2 on MovieLens); longer ones keep
 *   `SASREC_DEFAULTS` (dropout 0.2, L 100, lr 0.002, chosen on ML-100K validation).
 */
import type { SasrecTrainOptions } from './train.js';

/** Largest catalog trained with full-softmax cross-entropy by default. */
export const FULL_SOFTMAX_MAX_ITEMS = 4096;
/** Negatives per chunk of the sampled softmax on larger catalogs. */
export const SAMPLED_NEGATIVES = 1024;
/** Mean history length below which the sparse-data regularisation applies. */
export const SHORT_HISTORY = 20;

export type SasrecProfile = Required<Pick<SasrecTrainOptions, 'loss'>> & Pick<SasrecTrainOptions, 'negatives' | 'dropout' | 'maxLen' | 'lr'>;

/**
 * The default loss and regularisation for `numItems` items and these training sequences (only
 * their lengths are read). Options a caller sets explicitly should override the result.
 */
export function sasrecProfile(numItems: number, sequences: ReadonlyArray<ArrayLike<number>>): SasrecProfile {
  if (!(Number.isInteger(numItems) && numItems >= 1)) throw new RangeError(`sasrecProfile: numItems must be a positive integer, got ${numItems}`);
  let events = 0;
  let users = 0;
  for (const s of sequences) {
    if (s.length === 0) continue;
    events += s.length;
    users++;
  }
  const mean = users ? events / users : 0;
  const out: SasrecProfile =
    numItems <= FULL_SOFTMAX_MAX_ITEMS ? { loss: 'ce' } : { loss: 'sampled-softmax', negatives: Math.min(SAMPLED_NEGATIVES, numItems - 1) };
  if (users > 0 && mean < SHORT_HISTORY) Object.assign(out, { dropout: 0.5, maxLen: 50, lr: 0.001 });
  return out;
}
