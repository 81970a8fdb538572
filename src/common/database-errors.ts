/** Thrown when no pooled connection could be had within the acquire timeout. */
export class PoolUnavailableError extends Error {
  constructor(cause: unknown) {
    super('pool', { cause });
    this.name = 'PoolUnavailableError';
  }
}

const POOL_FAILURE_PATTERNS = [
  /timeout exceeded when trying to connect/i,
  /connection terminated due to connection timeout/i,
  /ECONNREFUSED/,
  /Connection terminated unexpectedly/i,
  /the database system is (starting up|shutting down)/i,
];

/** Whether an error means the database could not be reached, as opposed to a failed statement. */
export function isConnectionFailure(error: unknown): boolean {
  if (error instanceof PoolUnavailableError) return true;
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'ECONNREFUSED' || POOL_FAILURE_PATTERNS.some((pattern) => pattern.test(message));
}
