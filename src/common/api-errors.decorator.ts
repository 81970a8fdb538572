import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';
import { INSUFFICIENT_PERMISSIONS, TOKEN_WITHOUT_TENANT } from '../auth/access.guard';
import { TENANT_MISMATCH } from '../auth/tenant-resolution';
import { AUTHENTICATION_REQUIRED } from '../auth/token-problem';
import { PAYLOAD_TOO_LARGE } from '../http/request-body';
import { ErrorResponseDto } from './error-response.dto';

/** So that Swagger UI shows each status its own texts, not one shared example; the first is shown by default. */
export const ApiErrorResponse = (status: number, description: string, ...errors: [string, ...string[]]) =>
  ApiResponse({
    status,
    description,
    type: ErrorResponseDto,
    ...(errors.length === 1
      ? { example: { error: errors[0] } }
      : { examples: Object.fromEntries(errors.map((error) => [error, { summary: error, value: { error } }])) }),
  });

/** `refusals`: the route's own 403s past the token's, such as a quota. */
export const ApiAuthErrors = (forbidden: string, ...refusals: BodyRefusal[]) =>
  applyDecorators(
    ApiErrorResponse(
      401,
      'Auth is on and the token is missing or invalid; the body says why, and WWW-Authenticate carries a Bearer challenge',
      AUTHENTICATION_REQUIRED,
      'Token expired',
      'Invalid token: invalid signature',
    ),
    ApiErrorResponse(
      403,
      `Auth is on and ${forbidden} (\`${INSUFFICIENT_PERMISSIONS}\`); or the token has no tenant claim while ` +
        'JWT_REQUIRE_TENANT is on, or the tenant header names another tenant than the token' +
        refusals.map((refusal) => `; or ${refusal.when}`).join(''),
      INSUFFICIENT_PERMISSIONS,
      TOKEN_WITHOUT_TENANT,
      TENANT_MISMATCH,
      ...refusals.map((refusal) => refusal.error),
    ),
  );

export interface BodyRefusal {
  when: string;
  error: string;
}

export const JSON_BODY_ELEMENTS: BodyRefusal = {
  when: 'a JSON body has more than BODY_MAX_JSON_VALUES elements',
  error: 'JSON body has more than 500000 elements',
};

/** Goes with AcceptsBody. */
export const ApiBodyTooLarge = (limit: string, ...more: BodyRefusal[]) =>
  ApiErrorResponse(
    413,
    [
      `The body is above ${limit} (after decompression)`,
      'a compressed body inflates more than BODY_MAX_INFLATE_RATIO times',
      ...more.map((refusal) => refusal.when),
    ].join('; or ') + ' (the numbers shown are the defaults)',
    PAYLOAD_TOO_LARGE,
    'compressed body inflates more than 100 times',
    ...more.map((refusal) => refusal.error),
  );
