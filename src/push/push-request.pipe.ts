import { Inject, Injectable, PipeTransform } from '@nestjs/common';
import { storedJsonOf, ValidationLimits } from '../common/contract-validators';
import { validateBody } from '../common/dto-validation';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { sentPayloads } from '../http/request-body';
import { DEFAULT_PARTITION, PushItem, PushItemDto, PushRequestDto } from './dto/push-request.dto';

@Injectable()
export class PushRequestPipe implements PipeTransform<unknown, PushItem[]> {
  private readonly limits: ValidationLimits;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limits = { messageMaxBytes: config.limits.messageMaxBytes };
  }

  transform(body: unknown): PushItem[] {
    const storedJson = sentPayloads(body, ['items']);
    const request = validateBody(PushRequestDto, body, { ...this.limits, storedJson });
    return request.items.map((item) => toPushItem(item, storedJson));
  }
}

export function toPushItem(item: PushItemDto, storedJson: Map<object, string>): PushItem {
  return {
    queue: item.queue,
    partition: item.partition ?? DEFAULT_PARTITION,
    payloadJson: storedJsonOf(item, 'payload', storedJson),
    transactionId: item.transactionId ?? undefined,
    traceId: item.traceId ?? undefined,
  };
}
