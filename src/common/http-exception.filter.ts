import { STATUS_CODES } from 'node:http';
import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { answeredDatabaseFailure } from '../logging/request-log';
import { DatabaseFailureException, databaseFailureOf, databaseFailureText } from './database-errors';
import { AnswerException } from './answer-exception';
import { MethodNotAllowedException } from './method-not-allowed.exception';
import { requestIdOf } from './request-id.middleware';
import { RetryLaterException } from './retry-later.exception';
import { errorMessage } from './error-message';

/** Anything but the broker's own exceptions answers the status's name, so no error echoes what the caller sent. */
@Catch()
export class HttpExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger(HttpExceptionFilter.name);

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const response = http.getResponse<Response>();
    const request = http.getRequest<Request>();
    const [status, message] = this.describe(exception, request, response);
    if (response.headersSent) {
      return;
    }
    // A body still arriving was refused unread: close the connection rather than read and discard the rest.
    if (!request.complete && bodyAnnounced(request)) {
      response.setHeader('Connection', 'close');
    }
    if (exception instanceof MethodNotAllowedException) {
      response.setHeader('Allow', exception.allow);
    }
    if (exception instanceof RetryLaterException) {
      response.setHeader('Retry-After', String(exception.retryAfterSeconds));
    }
    response.status(status).json(exception instanceof AnswerException ? exception.body : { error: message });
  }

  private describe(exception: unknown, request: Request, response: Response): [number, string] {
    if (exception instanceof HttpException) {
      // Its service logged the cause as a warning.
      if (exception instanceof DatabaseFailureException) answeredDatabaseFailure(response);
      return [exception.getStatus(), errorText(exception)];
    }
    // Expected under faults: a warning with the cause, no stack trace; the request's own line is a warning too.
    const failure = databaseFailureOf(exception);
    if (failure) {
      this.logger.warn(
        `[${requestIdOf(request)}] ${request.method} ${request.path}: database ${failure}: ${causeOf(exception)}`,
      );
      answeredDatabaseFailure(response);
      return [HttpStatus.INTERNAL_SERVER_ERROR, databaseFailureText(failure)];
    }
    this.logger.error(
      `[${requestIdOf(request)}] ${request.method} ${request.originalUrl}: ${errorMessage(exception)}`,
      exception instanceof Error ? exception.stack : undefined,
    );
    return [HttpStatus.INTERNAL_SERVER_ERROR, 'internal error'];
  }
}

function errorText(exception: HttpException): string {
  const body = exception.getResponse();
  const { error, message } = (typeof body === 'object' && body !== null ? body : {}) as {
    error?: unknown;
    message?: unknown;
  };
  if (typeof error === 'string' && message === undefined) return error;
  return (STATUS_CODES[exception.getStatus()] ?? 'error').toLowerCase();
}

function causeOf(exception: unknown): string {
  const cause = exception instanceof Error ? exception.cause : undefined;
  return cause === undefined ? errorMessage(exception) : `${errorMessage(exception)} (${errorMessage(cause)})`;
}

/** A bodiless request is complete only once its parser finishes the message, which may be after it was refused. */
function bodyAnnounced(request: Request): boolean {
  const length = request.headers['content-length'];
  return request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}
