import { MaintenanceService } from '../maintenance/maintenance.service';
import { Injectable, Logger } from '@nestjs/common';
import { QueryFailedError } from 'typeorm';
import { ALREADY_ACKNOWLEDGED, AckService, INVALID_LEASE, TransactionAcks } from '../ack/ack.service';
import { AckCommand } from '../ack/dto/ack-request.dto';
import { databaseFailureOf } from '../common/database-errors';
import { uuidv7 } from '../common/uuid';
import { MetricsService } from '../metrics/metrics.service';
import { PushItem } from '../push/dto/push-request.dto';
import { PushResultDto } from '../push/dto/push-result.dto';
import { PushService, QUEUE_FULL } from '../push/push.service';
import { UnitOfWork, Writes } from '../wakeup/unit-of-work';
import { TransactionOperationResult, TransactionResultDto } from './dto/transaction-result.dto';
import { TransactionOperation, TransactionRefusal, TransactionRequest } from './transaction-request.pipe';
import { TransactionRepository } from './transaction.repository';

/** Thrown inside the unit of work to roll it back with the answer's reason. */
class TransactionRefused extends Error {
  constructor(readonly refusal: TransactionRefusal) {
    super(refusal.error);
  }
}

interface Miss extends TransactionRefusal {
  index: number;
  alreadyDone: boolean;
}

@Injectable()
export class TransactionService {
  private readonly logger = new Logger('Transactions');

  constructor(
    private readonly maintenance: MaintenanceService,
    private readonly writes: Writes,
    private readonly pushes: PushService,
    private readonly acks: AckService,
    private readonly transactions: TransactionRepository,
    private readonly metrics: MetricsService,
  ) {}

  /** Commits only if every operation applied and every required lease is held at the end; else nothing is visible. */
  async commit(
    tenantId: string,
    producerSub: string | undefined,
    request: TransactionRequest,
  ): Promise<TransactionResultDto> {
    if (request.operations.some((operation) => operation.type === 'push')) {
      this.maintenance.assertPushesAllowed(tenantId);
    }
    const transactionId = uuidv7();
    if (request.invalid) return this.refused(transactionId, request.invalid);
    try {
      const results = await this.writes.run(tenantId, (unit) => this.apply(unit, producerSub ?? null, request));
      return { transactionId, success: true, results };
    } catch (error) {
      if (error instanceof TransactionRefused) return this.refused(transactionId, error.refusal);
      if (error instanceof QueryFailedError && databaseFailureOf(error) === undefined) {
        const { code } = error.driverError as { code?: string };
        this.logger.warn(`Transaction ${transactionId} rolled back by the database: ${code ?? ''} ${error.message}`);
        return this.refused(transactionId, {
          reason: 'db_error',
          error: `the database rolled the transaction back (${code ?? 'error'}: ${error.message}); nothing applied`,
        });
      }
      throw error;
    }
  }

  private refused(transactionId: string, refusal: TransactionRefusal): TransactionResultDto {
    this.metrics.transactions.inc({ outcome: refusal.reason });
    return { transactionId, success: false, reason: refusal.reason, error: refusal.error, results: [] };
  }

  private async apply(
    unit: UnitOfWork,
    producerSub: string | null,
    request: TransactionRequest,
  ): Promise<TransactionOperationResult[]> {
    const { tenantId, manager } = unit;
    const { operations, requiredLeases } = request;
    const acked = operations.flatMap((operation) => (operation.type === 'ack' ? [operation.command] : []));
    const liveAtStart = await this.transactions.lock(tenantId, requiredLeases, acked, manager);
    const ackRules = new TransactionAcks(new Set(requiredLeases));

    const results: TransactionOperationResult[] = [];
    const misses: Miss[] = [];
    for (const run of runsOf(operations)) {
      if (run.type === 'push') {
        const answers = await this.pushes.store(
          unit,
          producerSub,
          run.operations.flatMap(({ items }) => items),
        );
        let next = 0;
        for (const { index, items } of run.operations) {
          const mine = answers.slice(next, next + items.length).map((answer, item) => ({ ...answer, index: item }));
          next += items.length;
          results.push({ index, type: 'push', success: true, items: mine });
          const full = mine.find((answer) => answer.status === 'failed');
          if (full) {
            misses.push({
              index,
              reason: 'bad_request',
              error: `operations[${index}].items[${full.index}]: ${QUEUE_FULL}`,
              alreadyDone: false,
            });
          }
        }
      } else {
        const answers = await this.acks.apply(
          unit,
          run.operations.map(({ command }) => command),
          ackRules,
        );
        answers.forEach((answer, at) => {
          const { index } = run.operations[at];
          results.push({ ...answer, index, type: 'ack' });
          if (!answer.success) misses.push(ackMiss(index, answer.error!));
        });
      }
    }

    const lost = await this.transactions.lost(tenantId, requiredLeases, liveAtStart, manager);
    const refusal = verdict(results, misses, lost);
    if (refusal) throw new TransactionRefused(refusal);
    unit.afterCommit(() => this.metrics.transactions.inc({ outcome: 'committed' }));
    return results;
  }
}

type Run =
  | { type: 'push'; operations: Array<{ index: number; items: PushItem[] }> }
  | { type: 'ack'; operations: Array<{ index: number; command: AckCommand }> };

/** Consecutive operations of one type, each run one push or one ack statement set, in request order. */
function runsOf(operations: TransactionOperation[]): Run[] {
  const runs: Run[] = [];
  operations.forEach((operation, index) => {
    const last = runs[runs.length - 1];
    if (operation.type === 'push') {
      if (last?.type === 'push') last.operations.push({ index, items: operation.items });
      else runs.push({ type: 'push', operations: [{ index, items: operation.items }] });
    } else if (last?.type === 'ack') {
      last.operations.push({ index, command: operation.command });
    } else {
      runs.push({ type: 'ack', operations: [{ index, command: operation.command }] });
    }
  });
  return runs;
}

function ackMiss(index: number, error: string): Miss {
  return {
    index,
    reason: error === INVALID_LEASE ? 'lease_lost' : 'ack_rejected',
    error: `operations[${index}]: ${error}`,
    alreadyDone: error === ALREADY_ACKNOWLEDGED,
  };
}

/**
 * A replay of a committed transaction (every push item a duplicate, every ack already acknowledged) is `duplicate`;
 * otherwise a lost lease is reported before any ack it made fail; otherwise the first operation that did not apply.
 */
function verdict(
  results: TransactionOperationResult[],
  misses: Miss[],
  lost: string[],
): TransactionRefusal | undefined {
  if (misses.length === 0 && lost.length === 0) return undefined;
  const pushed: PushResultDto[] = results.flatMap((result) => ('items' in result ? result.items : []));
  if (
    misses.length > 0 &&
    misses.every((miss) => miss.alreadyDone) &&
    pushed.length > 0 &&
    pushed.every((item) => item.status === 'duplicate')
  ) {
    return {
      reason: 'duplicate',
      error: `operations[${misses[0].index}]: already applied: every push item is a duplicate and every ack already acknowledged`,
    };
  }
  const { reason, error } = misses.find((miss) => miss.reason === 'lease_lost') ?? {};
  if (reason && error) return { reason, error };
  if (lost.length > 0) return { reason: 'lease_lost', error: `requiredLeases: ${lost[0]}: ${INVALID_LEASE}` };
  return { reason: misses[0].reason, error: misses[0].error };
}
