import { Inject, Injectable, PipeTransform } from '@nestjs/common';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { bodyLimitsOf } from '../http/request-body.interceptor';
import { BodyLimits, parseJsonBody } from '../http/request-body';
import { INT32_MAX } from './input';

export const DEFAULT_EXTEND_SECONDS = 60;
const INT32_MIN = -INT32_MAX - 1;

/** Never fails: the reference page promises no 400 on this route. */
@Injectable()
export class LenientSecondsPipe implements PipeTransform<unknown, number> {
  private readonly limits: BodyLimits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limits = bodyLimitsOf(config);
  }

  transform(body: unknown): number {
    const seconds = readSeconds(this.parsed(body));
    if (seconds === undefined) return DEFAULT_EXTEND_SECONDS;
    return Math.max(1, seconds);
  }

  private parsed(body: unknown): unknown {
    if (typeof body === 'string') body = Buffer.from(body, 'utf8');
    if (!Buffer.isBuffer(body)) return body;
    try {
      return parseJsonBody(body, this.limits);
    } catch {
      return undefined;
    }
  }
}

function readSeconds(parsed: unknown): number | undefined {
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const seconds = (parsed as Record<string, unknown>).seconds;
  if (typeof seconds !== 'number' || !Number.isInteger(seconds)) return undefined;
  if (seconds > INT32_MAX || seconds < INT32_MIN) return undefined;
  return seconds;
}
