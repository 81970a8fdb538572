import { Injectable, PipeTransform } from '@nestjs/common';
import { validateQuery } from '../common/dto-validation';
import { QueueListQueryDto } from './dto/queue-list-query.dto';

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
