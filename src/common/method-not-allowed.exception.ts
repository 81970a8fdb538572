import { HttpException, HttpStatus } from '@nestjs/common';

/** 405 in the contract's shape; the filter adds the Allow header. */
export class MethodNotAllowedException extends HttpException {
  constructor(readonly allow: string) {
    super({ error: 'method not allowed' }, HttpStatus.METHOD_NOT_ALLOWED);
  }
}
