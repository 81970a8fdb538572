import { Injectable, PipeTransform } from '@nestjs/common';
import { INT32_MAX, isPlainObject, queryInteger, queryName } from '../common/input';

export interface DlqQuery {
  queue: string | undefined;
  consumerGroup: string | undefined;
  limit: number;
  offset: number;
}

export const DLQ_LIMITS = {
  limit: { min: 1, max: 1_000, fallback: 100 },
  offset: { min: 0, max: INT32_MAX, fallback: 0 },
} as const;

@Injectable()
export class DlqQueryPipe implements PipeTransform<unknown, DlqQuery> {
  transform(query: unknown): DlqQuery {
    const raw = isPlainObject(query) ? query : {};
    const { limit, offset } = DLQ_LIMITS;
    return {
      queue: queryName(raw.queue, 'queue'),
      consumerGroup: queryName(raw.consumerGroup, 'consumerGroup'),
      limit: queryInteger(raw.limit, 'limit', limit.min, limit.max) ?? limit.fallback,
      offset: queryInteger(raw.offset, 'offset', offset.min, offset.max) ?? offset.fallback,
    };
  }
}
