import { BadRequestException, Inject, Injectable, PipeTransform } from '@nestjs/common';
import { toCommand } from '../ack/ack-request.pipe';
import { AckCommand } from '../ack/dto/ack-request.dto';
import { storableJsonProblem, tooLarge } from '../common/contract-validators';
import { validateBody } from '../common/dto-validation';
import { QUEUE_MODE_GROUP } from '../common/queue-mode';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { sentPayloads } from '../http/request-body';
import { PushItem } from '../push/dto/push-request.dto';
import { toPushItem } from '../push/push-request.pipe';
import { CycleRequestDto } from './dto/cycle.dto';

export interface StateOp {
  type: 'upsert' | 'delete';
  key: string;
  /** The value to store as JSON text; null for a delete. */
  valueJson: string | null;
}

export interface CycleCommand {
  queryId: string;
  partitionId: string;
  consumerGroup: string;
  stateOps: StateOp[];
  pushItems: PushItem[];
  ack: AckCommand | undefined;
  /** Messages the ack covers as the SDK counts them; echoed in ack_result. */
  ackCount: number;
}

/** A cycle is bounded as a transaction is: its state operations and push items count against the same cap. */
@Injectable()
export class CycleRequestPipe implements PipeTransform<unknown, CycleCommand> {
  private readonly messageMaxBytes: number;
  private readonly maxOperations: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.messageMaxBytes = config.limits.messageMaxBytes;
    this.maxOperations = config.limits.transactionMaxOperations;
  }

  transform(body: unknown): CycleCommand {
    const storedJson = sentPayloads(body, ['push_items']);
    const request = validateBody(CycleRequestDto, body, { messageMaxBytes: this.messageMaxBytes, storedJson });
    const stateOps = (request.state_ops ?? []).map((op, index): StateOp => {
      if (op.type === 'delete') return { type: 'delete', key: op.key, valueJson: null };
      const valueJson = op.value === undefined ? '{}' : JSON.stringify(op.value);
      const problem = storableJsonProblem(valueJson) ?? tooLarge(Buffer.byteLength(valueJson), this.messageMaxBytes);
      if (problem !== undefined) throw new BadRequestException({ error: `state_ops[${index}].value ${problem}` });
      return { type: 'upsert', key: op.key, valueJson };
    });
    const pushItems = (request.push_items ?? []).map((item) => toPushItem(item, storedJson));
    if (stateOps.length + pushItems.length > this.maxOperations) {
      throw new BadRequestException({
        error:
          `state_ops and push_items may hold at most ${this.maxOperations} entries together ` +
          '(TRANSACTION_MAX_OPERATIONS)',
      });
    }
    const partitionId = request.partition_id.toLowerCase();
    const consumerGroup = request.consumer_group ?? QUEUE_MODE_GROUP;
    const sent = request.ack;
    const ack = sent
      ? {
          ...toCommand(
            {
              transactionId: sent.transactionId,
              partitionId,
              consumerGroup,
              status: sent.status ?? undefined,
              leaseId: sent.leaseId ?? undefined,
              leaseEpoch: sent.leaseEpoch,
              error: sent.error,
            },
            consumerGroup,
          ),
          releaseLease: request.release_lease ?? true,
        }
      : undefined;
    return {
      queryId: request.query_id.toLowerCase(),
      partitionId,
      consumerGroup,
      stateOps,
      pushItems,
      ack,
      ackCount: sent?.count ?? 1,
    };
  }
}
