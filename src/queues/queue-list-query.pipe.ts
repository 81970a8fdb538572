import { Injectable, PipeTransform } from '@nestjs/common';
import { isPlainObject, queryInteger, queryName } from '../common/input';

export interface QueueListQuery {
  /** Only queues whose name sorts after this one. */
  after: string | undefined;
  limit: number;
}

export const QUEUE_LIST_LIMIT = { min: 1, max: 1_000, fallback: 1_000 } as const;

@Injectable()
export class QueueListQueryPipe implements PipeTransform<unknown, QueueListQuery> {
  transform(query: unknown): QueueListQuery {
    const raw = isPlainObject(query) ? query : {};
    const { min, max, fallback } = QUEUE_LIST_LIMIT;
    return {
      after: queryName(raw.after, 'after'),
      limit: queryInteger(raw.limit, 'limit', min, max) ?? fallback,
    };
  }
}
