import { Injectable, PayloadTooLargeException, PipeTransform } from '@nestjs/common';
import {
  INT32_MAX,
  optionalBoolean,
  optionalInteger,
  requireName,
  requireObject,
  storableJsonText,
} from '../common/input';
import { ConfigureCommand } from './dto/configure-request.dto';

const KNOWN_OPTIONS = new Set(['leaseTime', 'retryLimit', 'deadLetterQueue']);
/** Options are echoed by configure and listed by resources: they stay small. */
export const QUEUE_OPTIONS_MAX_BYTES = 64 * 1024;

@Injectable()
export class ConfigureRequestPipe implements PipeTransform<unknown, ConfigureCommand> {
  transform(body: unknown): ConfigureCommand {
    const request = requireObject(body, 'request body');
    const queue = requireName(request.queue, 'queue');
    const options =
      request.options === undefined || request.options === null ? {} : requireObject(request.options, 'options');
    // fromEntries defines own properties, so even a key named __proto__ is kept as data.
    const extraOptions = Object.fromEntries(Object.entries(options).filter(([key]) => !KNOWN_OPTIONS.has(key)));
    const bytes = Buffer.byteLength(storableJsonText(extraOptions, 'options'));
    if (bytes > QUEUE_OPTIONS_MAX_BYTES) {
      throw new PayloadTooLargeException({ error: `options are larger than ${QUEUE_OPTIONS_MAX_BYTES} bytes (${bytes})` });
    }
    return {
      queue,
      settings: {
        leaseTime: optionalInteger(options.leaseTime, 'options.leaseTime', 1, INT32_MAX),
        retryLimit: optionalInteger(options.retryLimit, 'options.retryLimit', 0, INT32_MAX),
        deadLetterQueue: optionalBoolean(options.deadLetterQueue, 'options.deadLetterQueue'),
        extraOptions,
      },
      sent: Object.keys(options),
    };
  }
}
