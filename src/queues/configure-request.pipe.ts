import { Injectable, PipeTransform } from '@nestjs/common';
import { undeclaredEntries, validateBody } from '../common/dto-validation';
import { ConfigureCommand, ConfigureRequestDto, QueueOptionsDto, RETENTION_OPTIONS } from './dto/configure-request.dto';

@Injectable()
export class ConfigureRequestPipe implements PipeTransform<unknown, ConfigureCommand> {
  transform(body: unknown): ConfigureCommand {
    const { queue, options } = validateBody(ConfigureRequestDto, body);
    const sent = options ?? {};
    return {
      queue,
      settings: {
        leaseTime: sent.leaseTime,
        retryLimit: sent.retryLimit,
        deadLetterQueue: sent.deadLetterQueue,
        retention: Object.fromEntries(
          RETENTION_OPTIONS.filter((name) => sent[name] !== undefined).map((name) => [name, sent[name]]),
        ),
        extraOptions: undeclaredEntries(QueueOptionsDto, sent),
      },
      sent: Object.keys(sent),
    };
  }
}
