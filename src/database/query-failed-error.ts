/**
 * A statement the database (or the connection) refused, with the text and parameters it was sent with. The driver's
 * fields (`code`, `detail`, `constraint`, ...) are copied on, so callers read them from either.
 */
export class QueryFailedError extends Error {
  [field: string]: unknown;

  constructor(
    readonly query: string,
    readonly parameters: unknown[] | undefined,
    readonly driverError: unknown,
  ) {
    super(String(driverError).replace(/^(error|Error): /, ''));
    if (driverError && typeof driverError === 'object') {
      const { name: _name, message: _message, stack: _stack, ...fields } = driverError as Record<string, unknown>;
      Object.assign(this, fields);
    }
    this.name = 'QueryFailedError';
  }
}
