import { Injectable, PipeTransform } from '@nestjs/common';
import { validateBody } from '../common/dto-validation';
import { ConfigureCommand, ConfigureRequestDto, RETENTION_OPTIONS } from './dto/configure-request.dto';

@Injectable()
export class ConfigureRequestPipe implements PipeTransform<unknown, ConfigureCommand> {
  transform(body: unknown): ConfigureCommand {
    const { queue, options, namespace, task } = validateBody(ConfigureRequestDto, body);
    const sent = options ?? {};
    return {
      queue,
      settings: {
        leaseTime: sent.leaseTime,
        retryLimit: sent.retryLimit,
        deadLetterQueue: sent.deadLetterQueue,
        dlqAfterMaxRetries: sent.dlqAfterMaxRetries,
        retryDelay: sent.retryDelay,
        delayedProcessing: sent.delayedProcessing,
        windowBuffer: sent.windowBuffer,
        priority: sent.priority,
        encryptionEnabled: sent.encryptionEnabled,
        namespace: namespace ?? undefined,
        task: task ?? undefined,
        retention: Object.fromEntries(
          RETENTION_OPTIONS.filter((name) => sent[name] !== undefined).map((name) => [name, sent[name]]),
        ),
      },
      sent: Object.keys(sent),
    };
  }
}
