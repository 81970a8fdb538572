import { HttpStatus } from '@nestjs/common';
import { RetryLaterException } from '../common/retry-later.exception';

/** How long a client should wait before trying again, which should be on another broker. */
export const RETRY_AFTER_SECONDS = 1;

/**
 * The broker is draining: this request was not, or will not be, served here.
 * Answered 503 with Retry-After and Connection: close.
 */
export class ShuttingDownException extends RetryLaterException {
  constructor() {
    super(HttpStatus.SERVICE_UNAVAILABLE, 'shutting down', RETRY_AFTER_SECONDS);
  }
}
