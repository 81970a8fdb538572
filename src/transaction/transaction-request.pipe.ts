import { BadRequestException, Inject, Injectable, PipeTransform } from '@nestjs/common';
import { toCommand } from '../ack/ack-request.pipe';
import { AckCommand } from '../ack/dto/ack-request.dto';
import {
  isPlainObject,
  isTooLargeMessage,
  ValidationLimits,
  withValidationLimits,
} from '../common/contract-validators';
import { compileDtoCheck, contractException, unknownKeysProblem } from '../common/dto-validation';
import { isUuid } from '../common/uuid';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { sentPayloads } from '../http/request-body';
import { MAX_PUSH_ITEMS, PushItem } from '../push/dto/push-request.dto';
import { toPushItem } from '../push/push-request.pipe';
import {
  MAX_REQUIRED_LEASES,
  TransactionAckOperationDto,
  TransactionPushOperationDto,
  TransactionRequestDto,
} from './dto/transaction-request.dto';
import { TransactionFailureReason } from './dto/transaction-result.dto';

export type TransactionOperation = { type: 'push'; items: PushItem[] } | { type: 'ack'; command: AckCommand };

export interface TransactionRefusal {
  reason: TransactionFailureReason;
  error: string;
}

export interface TransactionRequest {
  operations: TransactionOperation[];
  /** As sent, in order (an error names one by its index), lower-cased; a text that is no UUID is kept, as a lease that does not exist. */
  requiredLeases: string[];
  /** The first operation that cannot apply, found before anything is written. */
  invalid?: TransactionRefusal;
}

/**
 * The request's shape and bounds are 400s, like a push's. An operation that cannot apply (malformed, unknown type,
 * payload too large) is the transaction's refusal, answered 200 with its reason, found before the database is asked.
 */
@Injectable()
export class TransactionRequestPipe implements PipeTransform<unknown, TransactionRequest> {
  private readonly limits: ValidationLimits;
  private readonly maxOperations: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limits = { messageMaxBytes: config.limits.messageMaxBytes };
    this.maxOperations = config.limits.transactionMaxOperations;
  }

  transform(body: unknown): TransactionRequest {
    if (!isPlainObject(body)) throw contractException('request body must be a JSON object');
    const unknown = unknownKeysProblem(TransactionRequestDto, body);
    if (unknown !== undefined) throw contractException(unknown);
    const { operations } = body;
    if (!Array.isArray(operations)) throw invalid('operations must be an array');
    if (operations.length === 0) throw invalid('operations must not be empty');
    if (operations.length > this.maxOperations || sizeOf(operations) > this.maxOperations) {
      throw invalid(
        `operations may hold at most ${this.maxOperations} operations (TRANSACTION_MAX_OPERATIONS), ` +
          'each ack and each push item counting one',
      );
    }
    const pushItems = operations.reduce<number>(
      (sum, op) => sum + (isPlainObject(op) && Array.isArray(op.items) ? op.items.length : 0),
      0,
    );
    if (pushItems > MAX_PUSH_ITEMS) throw invalid(`operations may hold at most ${MAX_PUSH_ITEMS} push items in all`);
    const requiredLeases = requiredLeasesOf(body.requiredLeases);

    // The payloads of all its items as the caller wrote them (sentPayloads), in one map.
    const storedJson = new Map<object, string>();
    return withValidationLimits({ ...this.limits, storedJson }, () => {
      const parsed: TransactionOperation[] = [];
      for (let index = 0; index < operations.length; index += 1) {
        sentPayloads(body, ['operations', index, 'items'], storedJson);
        const operation = operationOf(operations[index], `operations[${index}]`, storedJson);
        if ('reason' in operation) return { operations: [], requiredLeases, invalid: operation };
        parsed.push(operation);
      }
      return { operations: parsed, requiredLeases };
    });
  }
}

/** Compiled checks on the plain operation: validateSync per operation cost a 10,000-operation transaction 4 pushes' time. */
function operationOf(
  operation: unknown,
  at: string,
  storedJson: Map<object, string>,
): TransactionOperation | TransactionRefusal {
  if (!isPlainObject(operation)) return { reason: 'bad_request', error: `${at} must be a JSON object` };
  if (operation.type === 'push') {
    const unknown = unknownKeysProblem(TransactionPushOperationDto, operation);
    if (unknown !== undefined) return { reason: 'bad_request', error: `${at}: ${unknown}` };
    const message = compileDtoCheck(TransactionPushOperationDto)(operation);
    if (message !== undefined) {
      return { reason: isTooLargeMessage(message) ? 'payload_too_large' : 'bad_request', error: `${at}.${message}` };
    }
    const { items } = operation as unknown as TransactionPushOperationDto;
    return { type: 'push', items: items.map((item) => toPushItem(item, storedJson)) };
  }
  if (operation.type === 'ack') {
    const unknown = unknownKeysProblem(TransactionAckOperationDto, operation);
    if (unknown !== undefined) return { reason: 'bad_request', error: `${at}: ${unknown}` };
    const message = compileDtoCheck(TransactionAckOperationDto)(operation);
    if (message !== undefined) return { reason: 'bad_request', error: `${at}.${message}` };
    return { type: 'ack', command: toCommand(operation as unknown as TransactionAckOperationDto, undefined) };
  }
  return { reason: 'bad_request', error: `${at}.type must be push or ack` };
}

/** What the cap counts: each push item (a push without items counts one), each ack, each operation of no kind. */
function sizeOf(operations: unknown[]): number {
  let size = 0;
  for (const operation of operations) {
    const items = isPlainObject(operation) && operation.type === 'push' ? operation.items : undefined;
    size += Array.isArray(items) ? Math.max(1, items.length) : 1;
  }
  return size;
}

function requiredLeasesOf(value: unknown): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalid('requiredLeases must be an array');
  if (value.length > MAX_REQUIRED_LEASES)
    throw invalid(`requiredLeases may hold at most ${MAX_REQUIRED_LEASES} leases`);
  return value.map((lease: unknown, index) => {
    if (typeof lease !== 'string') throw invalid(`requiredLeases[${index}] must be a string`);
    return isUuid(lease) ? lease.toLowerCase() : lease;
  });
}

function invalid(error: string): BadRequestException {
  return new BadRequestException({ error });
}
