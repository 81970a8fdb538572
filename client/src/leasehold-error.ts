export class LeaseholdError extends Error {
  override readonly name = 'LeaseholdError';

  constructor(
    readonly status: number,
    readonly brokerError: string,
    readonly method: string,
    readonly path: string,
  ) {
    super(`${method} ${path} failed with ${status}: ${brokerError}`);
  }
}
