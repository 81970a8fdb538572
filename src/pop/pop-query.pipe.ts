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

/** Distinct query strings kept validated: a consumer polls with the same one again and again. */
const REMEMBERED_QUERIES = 256;
/** A longer query is validated each time rather than kept. */
const MAX_REMEMBERED_LENGTH = 1024;

/**
 * Every pop paid for validating its query (class-transformer, then class-validator), whose answer depends on the
 * query alone: a query seen before is answered from what it gave then, copied, so that nothing a request does to its
 * options reaches the next. Only valid queries are kept, in a bounded map.
 */
@Injectable()
export class PopQueryPipe implements PipeTransform<unknown, PopOptions> {
  private readonly remembered = new Map<string, PopOptions>();

  transform(query: unknown): PopOptions {
    const key = JSON.stringify(query ?? {});
    const known = this.remembered.get(key);
    if (known) return { ...known };
    const options = optionsOf(validateQuery(PopQueryDto, query));
    if (key.length <= MAX_REMEMBERED_LENGTH) {
      if (this.remembered.size >= REMEMBERED_QUERIES) this.remembered.delete(this.remembered.keys().next().value!);
      this.remembered.set(key, options);
    }
    return { ...options };
  }

  /** How many queries are kept: bounded by REMEMBERED_QUERIES. */
  get rememberedQueries(): number {
    return this.remembered.size;
  }
}

function optionsOf(dto: PopQueryDto): PopOptions {
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
