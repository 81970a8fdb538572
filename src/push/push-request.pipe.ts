import { Inject, Injectable, PayloadTooLargeException, PipeTransform } from '@nestjs/common';
import { invalid, optionalName, requireName, requireObject, storableJsonText } from '../common/input';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { PushItem } from './dto/push-request.dto';

export const DEFAULT_PARTITION = 'Default';
export const MAX_PUSH_ITEMS = 10_000;

/** Validates a whole push before anything is written: one bad item refuses the request. */
@Injectable()
export class PushRequestPipe implements PipeTransform<unknown, PushItem[]> {
  private readonly messageMaxBytes: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.messageMaxBytes = config.limits.messageMaxBytes;
  }

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
      return {
        queue: requireName(item.queue, `${field}.queue`),
        partition: optionalName(item.partition, `${field}.partition`) ?? DEFAULT_PARTITION,
        payloadJson: this.storablePayload(item.payload, `${field}.payload`),
        transactionId: optionalName(item.transactionId, `${field}.transactionId`),
        traceId: optionalName(item.traceId, `${field}.traceId`),
      };
    });
  }

  /** The payload as the JSON text that will be stored, within MESSAGE_MAX_BYTES. */
  private storablePayload(payload: unknown, field: string): string {
    const json = storableJsonText(payload, field);
    const bytes = Buffer.byteLength(json);
    if (bytes > this.messageMaxBytes) {
      throw new PayloadTooLargeException({ error: `${field} is larger than ${this.messageMaxBytes} bytes (${bytes})` });
    }
    return json;
  }
}
