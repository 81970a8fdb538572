import { Injectable, PipeTransform } from '@nestjs/common';
import { validateBody } from '../common/dto-validation';
import { ConfigureCommand, ConfigureRequestDto } from './dto/configure-request.dto';
import { retentionSettingsOf, sentOptionsOf } from './queue-options';

@Injectable()
export class ConfigureRequestPipe implements PipeTransform<unknown, ConfigureCommand> {
  transform(body: unknown): ConfigureCommand {
    const { queue, options, namespace, task } = validateBody(ConfigureRequestDto, body);
    const sent = sentOptionsOf(options ?? {});
    return {
      queue,
      settings: {
        options: sent,
        retention: retentionSettingsOf(sent),
        namespace: namespace ?? undefined,
        task: task ?? undefined,
      },
      sent: Object.keys(options ?? {}),
    };
  }
}
