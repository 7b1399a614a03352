/**
 * The one error class of the community module: bad input a caller (the device's sync layer,
 * the HTTP service) must branch on — e.g. the service answers 400 for it and 500 for anything else.
 */
export class InvalidUploadError extends Error {
  override readonly name = 'InvalidUploadError';
  /** Position of the offending upload in its batch, when the error is about one upload. */
  readonly index: number | undefined;

  constructor(message: string, index?: number) {
    super(message);
    this.index = index;
  }
}
