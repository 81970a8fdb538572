import { Injectable, PipeTransform } from '@nestjs/common';
import { validateQuery } from '../common/dto-validation';
import { isNow, PopQueryDto, SubscriptionMode } from './dto/pop-query.dto';

export type { SubscriptionMode } from './dto/pop-query.dto';

export interface PopOptions {
  batch: number;
  partitions: number;
  wait: boolean;
  timeoutMs: number;
  /** Undefined means the queue's leaseTime. */
  leaseSeconds: number | undefined;
  consumerGroup: string;
  subscriptionMode: SubscriptionMode;
  /** An explicit starting point; wins over subscriptionMode. */
  subscriptionFrom: string | undefined;
  autoAck: boolean;
}

@Injectable()
export class PopQueryPipe implements PipeTransform<unknown, PopOptions> {
  transform(query: unknown): PopOptions {
    const dto = validateQuery(PopQueryDto, query);
    const now = isNow(dto.subscriptionFrom);
    return {
      batch: dto.batch,
      partitions: dto.partitions,
      wait: dto.wait,
      timeoutMs: dto.timeout,
      leaseSeconds: dto.leaseSeconds,
      consumerGroup: dto.consumerGroup,
      subscriptionMode: now ? 'new' : dto.subscriptionMode,
      subscriptionFrom: now ? undefined : dto.subscriptionFrom,
      autoAck: dto.autoAck,
    };
  }
}
