import { Injectable, PipeTransform } from '@nestjs/common';
import { isPlainObject } from '../common/contract-validators';
import { validateQuery } from '../common/dto-validation';
import { QueueDetailQueryDto, QueueListQueryDto } from './dto/queue-list-query.dto';

export interface QueueListQuery {
  after: string | undefined;
  limit: number;
}

@Injectable()
export class QueueListQueryPipe implements PipeTransform<unknown, QueueListQuery> {
  transform(query: unknown): QueueListQuery {
    const { after, limit } = validateQuery(QueueListQueryDto, query);
    return { after, limit };
  }
}

/** Other query parameters are ignored, as before the route took any: a cache-busting `_=` keeps working. */
@Injectable()
export class QueueDetailQueryPipe implements PipeTransform<unknown, QueueDetailQueryDto> {
  transform(query: unknown): QueueDetailQueryDto {
    const given = isPlainObject(query) ? query : {};
    const known = Object.fromEntries(Object.entries(given).filter(([key]) => key === 'after' || key === 'limit'));
    return validateQuery(QueueDetailQueryDto, known);
  }
}
