import { Injectable, PipeTransform } from '@nestjs/common';
import { assertStorableJson, invalid, optionalName, requireName, requireObject } from '../common/input';
import { PushItem } from './dto/push-request.dto';

export const DEFAULT_PARTITION = 'Default';
export const MAX_PUSH_ITEMS = 10_000;

/** Validates a whole push before anything is written: one bad item refuses the request. */
@Injectable()
export class PushRequestPipe implements PipeTransform<unknown, PushItem[]> {
  transform(body: unknown): PushItem[] {
    const { items } = requireObject(body, 'request body');
    if (!Array.isArray(items)) {
      throw invalid('items must be an array');
    }
    if (items.length > MAX_PUSH_ITEMS) {
      throw invalid(`items may hold at most ${MAX_PUSH_ITEMS} messages`);
    }
    return items.map((raw, index) => {
      const field = `items[${index}]`;
      const item = requireObject(raw, field);
      if (!('payload' in item)) {
        throw invalid(`${field}.payload is required (null is allowed)`);
      }
      assertStorableJson(item.payload, `${field}.payload`);
      return {
        queue: requireName(item.queue, `${field}.queue`),
        partition: optionalName(item.partition, `${field}.partition`) ?? DEFAULT_PARTITION,
        payload: item.payload,
        transactionId: optionalName(item.transactionId, `${field}.transactionId`),
        traceId: optionalName(item.traceId, `${field}.traceId`),
      };
    });
  }
}
