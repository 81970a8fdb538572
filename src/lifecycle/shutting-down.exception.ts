import { HttpStatus } from '@nestjs/common';
import { RetryLaterException } from '../common/retry-later.exception';

/** How long a client should wait before trying again, which should be on another broker. */
export const RETRY_AFTER_SECONDS = 1;

export class ShuttingDownException extends RetryLaterException {
  constructor() {
    super(HttpStatus.SERVICE_UNAVAILABLE, 'shutting down', RETRY_AFTER_SECONDS);
  }
}
