import { HttpException } from '@nestjs/common';

/** A refusal the caller should retry after a while; the filter sends Retry-After. */
export class RetryLaterException extends HttpException {
  constructor(
    status: number,
    error: string,
    readonly retryAfterSeconds: number,
  ) {
    super({ error }, status);
  }
}
