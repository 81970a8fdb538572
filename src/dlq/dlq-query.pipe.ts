import { Injectable, PipeTransform } from '@nestjs/common';
import { validateQuery } from '../common/dto-validation';
import { DlqQueryDto } from './dto/dlq-query.dto';

export interface DlqQuery {
  queue: string | undefined;
  consumerGroup: string | undefined;
  limit: number;
  offset: number;
}

@Injectable()
export class DlqQueryPipe implements PipeTransform<unknown, DlqQuery> {
  transform(query: unknown): DlqQuery {
    const { queue, consumerGroup, limit, offset } = validateQuery(DlqQueryDto, query);
    return { queue, consumerGroup, limit, offset };
  }
}
