import { Injectable, PipeTransform } from '@nestjs/common';
import { zonedTimestamp } from '../common/contract-validators';
import { validateBody } from '../common/dto-validation';
import { SeekTarget } from './consumer-groups.service';
import { SeekRequestDto } from './dto/seek-request.dto';

@Injectable()
export class SeekRequestPipe implements PipeTransform<unknown, SeekTarget> {
  transform(body: unknown): SeekTarget {
    const { timestamp } = validateBody(SeekRequestDto, body);
    return timestamp === undefined ? { toEnd: true } : { timestamp: zonedTimestamp(timestamp)! };
  }
}
