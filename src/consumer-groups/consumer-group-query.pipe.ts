import { Injectable, PipeTransform } from '@nestjs/common';
import { validateBody, validateQuery } from '../common/dto-validation';
import {
  ConsumerGroupDetailQueryDto,
  ConsumerGroupListQueryDto,
  LaggingQueryDto,
} from './dto/consumer-group-query.dto';
import { SeekRequestDto } from './dto/seek-request.dto';
import { SeekTarget } from './consumer-groups.service';
import { zonedTimestamp } from '../common/contract-validators';

@Injectable()
export class GroupListQueryPipe implements PipeTransform<unknown, ConsumerGroupListQueryDto> {
  transform(query: unknown): ConsumerGroupListQueryDto {
    return validateQuery(ConsumerGroupListQueryDto, query);
  }
}

@Injectable()
export class LaggingQueryPipe implements PipeTransform<unknown, LaggingQueryDto> {
  transform(query: unknown): LaggingQueryDto {
    return validateQuery(LaggingQueryDto, query);
  }
}

@Injectable()
export class GroupDetailQueryPipe implements PipeTransform<unknown, ConsumerGroupDetailQueryDto> {
  transform(query: unknown): ConsumerGroupDetailQueryDto {
    return validateQuery(ConsumerGroupDetailQueryDto, query);
  }
}

@Injectable()
export class SeekRequestPipe implements PipeTransform<unknown, SeekTarget> {
  transform(body: unknown): SeekTarget {
    const { timestamp } = validateBody(SeekRequestDto, body);
    return timestamp === undefined ? { toEnd: true } : { timestamp: zonedTimestamp(timestamp)! };
  }
}
