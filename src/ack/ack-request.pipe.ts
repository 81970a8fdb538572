import { Injectable, PipeTransform } from '@nestjs/common';
import {
  invalid,
  optionalInteger,
  optionalName,
  optionalUuid,
  requireName,
  requireObject,
  requireUuid,
} from '../common/input';
import { QUEUE_MODE_GROUP } from '../common/queue-mode';
import { AckCommand, AckOutcome } from './dto/ack-request.dto';

export const MAX_ACKS = 10_000;
export const ERROR_TEXT_MAX_LENGTH = 10_000;

const COMPLETED = new Set(['completed', 'success', 'acked', 'ok']);

/** POST /api/v1/ack: one acknowledgment. */
@Injectable()
export class AckRequestPipe implements PipeTransform<unknown, AckCommand[]> {
  transform(body: unknown): AckCommand[] {
    return [readAck(requireObject(body, 'request body'), '', undefined)];
  }
}

/** POST /api/v1/ack/batch: validated whole before anything is applied. */
@Injectable()
export class AckBatchRequestPipe implements PipeTransform<unknown, AckCommand[]> {
  transform(body: unknown): AckCommand[] {
    const request = requireObject(body, 'request body');
    const consumerGroup = optionalName(request.consumerGroup, 'consumerGroup');
    const { acknowledgments } = request;
    if (!Array.isArray(acknowledgments)) {
      throw invalid('acknowledgments must be an array');
    }
    if (acknowledgments.length > MAX_ACKS) {
      throw invalid(`acknowledgments may hold at most ${MAX_ACKS} items`);
    }
    return acknowledgments.map((raw, index) => {
      const field = `acknowledgments[${index}]`;
      return readAck(requireObject(raw, field), `${field}.`, consumerGroup);
    });
  }
}

function readAck(ack: Record<string, unknown>, prefix: string, defaultGroup: string | undefined): AckCommand {
  return {
    transactionId: requireName(ack.transactionId, `${prefix}transactionId`),
    partitionId: requireUuid(ack.partitionId, `${prefix}partitionId`),
    outcome: outcomeOf(ack.status, `${prefix}status`),
    consumerGroup: optionalName(ack.consumerGroup, `${prefix}consumerGroup`) ?? defaultGroup ?? QUEUE_MODE_GROUP,
    leaseId: optionalUuid(ack.leaseId, `${prefix}leaseId`),
    leaseEpoch: optionalInteger(ack.leaseEpoch ?? undefined, `${prefix}leaseEpoch`, 1, Number.MAX_SAFE_INTEGER),
    error: errorText(ack.error, `${prefix}error`),
  };
}

function outcomeOf(status: unknown, field: string): AckOutcome {
  if (status === undefined || status === null) return 'completed';
  if (typeof status !== 'string') {
    throw invalid(`${field} must be a string`);
  }
  const normalized = status.toLowerCase();
  if (COMPLETED.has(normalized)) return 'completed';
  if (normalized === 'retry' || normalized === 'dlq') return normalized;
  return 'failed';
}

/** Free text from a failing handler: kept, shortened to a sane size, minus the one character PostgreSQL refuses. */
function errorText(value: unknown, field: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'string') {
    throw invalid(`${field} must be a string`);
  }
  return value.replace(/\u0000/g, '').slice(0, ERROR_TEXT_MAX_LENGTH);
}
