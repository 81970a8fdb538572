import { BadRequestException, Injectable, PipeTransform } from '@nestjs/common';
import { isPlainObject } from '../common/contract-validators';
import { contractException, validateBody } from '../common/dto-validation';
import { QUEUE_MODE_GROUP } from '../common/queue-mode';
import { TraceCommand, TraceRequestDto } from './dto/trace-request.dto';

const DEFAULT_EVENT_TYPE = 'info';

/** Queen's two refusals first, in its words; then the house's rules, each naming its field. */
@Injectable()
export class TraceRequestPipe implements PipeTransform<unknown, TraceCommand> {
  transform(body: unknown): TraceCommand {
    if (!isPlainObject(body)) throw contractException('request body must be a JSON object');
    if (body.transactionId == null || body.partitionId == null) {
      throw new BadRequestException({ error: 'transactionId and partitionId are required' });
    }
    if (body.data == null) throw new BadRequestException({ error: 'data is required' });
    const request = validateBody(TraceRequestDto, body);
    const names = request.traceNames ?? [];
    return {
      transactionId: request.transactionId,
      partitionId: request.partitionId.toLowerCase(),
      dataJson: JSON.stringify(request.data),
      consumerGroup: request.consumerGroup ?? QUEUE_MODE_GROUP,
      eventType: request.eventType ?? DEFAULT_EVENT_TYPE,
      traceNames: [...new Set(typeof names === 'string' ? [names] : names)],
    };
  }
}
