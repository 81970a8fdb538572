import { Injectable, PipeTransform } from '@nestjs/common';
import { validateBody } from '../common/dto-validation';
import { QUEUE_MODE_GROUP } from '../common/queue-mode';
import {
  AckBatchRequestDto,
  AckCommand,
  AckOutcome,
  AckRequestDto,
  ERROR_TEXT_MAX_LENGTH,
} from './dto/ack-request.dto';

const COMPLETED = new Set(['completed', 'success', 'acked', 'ok']);

@Injectable()
export class AckRequestPipe implements PipeTransform<unknown, AckCommand[]> {
  transform(body: unknown): AckCommand[] {
    return [toCommand(validateBody(AckRequestDto, body), undefined)];
  }
}

@Injectable()
export class AckBatchRequestPipe implements PipeTransform<unknown, AckCommand[]> {
  transform(body: unknown): AckCommand[] {
    const request = validateBody(AckBatchRequestDto, body);
    return request.acknowledgments.map((ack) => toCommand(ack, request.consumerGroup));
  }
}

export function toCommand(ack: AckRequestDto, defaultGroup: string | null | undefined): AckCommand {
  return {
    transactionId: ack.transactionId,
    partitionId: ack.partitionId.toLowerCase(),
    outcome: outcomeOf(ack.status),
    consumerGroup: ack.consumerGroup ?? defaultGroup ?? QUEUE_MODE_GROUP,
    leaseId: ack.leaseId?.toLowerCase() ?? undefined,
    leaseEpoch: ack.leaseEpoch ?? undefined,
    error: errorText(ack.error),
  };
}

function outcomeOf(status: string | null | undefined): AckOutcome {
  if (status === undefined || status === null) return 'completed';
  const normalized = status.toLowerCase();
  if (COMPLETED.has(normalized)) return 'completed';
  if (normalized === 'retry' || normalized === 'dlq') return normalized;
  return 'failed';
}

function errorText(value: string | null | undefined): string | null {
  if (value === undefined || value === null) return null;
  // eslint-disable-next-line no-control-regex -- NUL is the character PostgreSQL refuses
  return value.replace(/\u0000/g, '').slice(0, ERROR_TEXT_MAX_LENGTH);
}
