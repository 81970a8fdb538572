import { MaintenanceService } from '../maintenance/maintenance.service';
import { Injectable, Logger } from '@nestjs/common';
import { QueryFailedError } from '../database/query-failed-error';
import { ALREADY_ACKNOWLEDGED, AckService, INVALID_LEASE, TransactionAcks } from '../ack/ack.service';
import { AckCommand, MAX_ACKS } from '../ack/dto/ack-request.dto';
import { compositeKey } from '../common/composite-key';
import { refusedStatementOf } from '../common/database-errors';
import { uuidv7 } from '../common/uuid';
import { TenantRates } from '../limits/tenant-rates';
import { MetricsService } from '../metrics/metrics.service';
import { PushItem } from '../push/dto/push-request.dto';
import { PushResultDto } from '../push/dto/push-result.dto';
import { PreparedPush, PushService, QUEUE_FULL } from '../push/push.service';
import { UnitOfWork } from '../database/unit-of-work';
import { Writes } from '../wakeup/writes';
import { TransactionOperationResult, TransactionResultDto } from './dto/transaction-result.dto';
import { TransactionOperation, TransactionRefusal, TransactionRequest } from './transaction-request.pipe';
import { LEASE_LOST, TransactionRepository } from './transaction.repository';

export const DB_ERROR_TEXT = 'the database rolled the transaction back; nothing applied';

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
    private readonly rates: TenantRates,
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
    // The request counted once against RATE_LIMIT_PRODUCE as it arrived, as a push of its items would; its acks count
    // as the ack batches that would carry them.
    const acks = request.operations.reduce((count, operation) => count + (operation.type === 'ack' ? 1 : 0), 0);
    this.rates.charge(tenantId, 'consume', Math.ceil(acks / MAX_ACKS));
    try {
      const results = await this.writes.run(tenantId, (unit) => this.apply(unit, producerSub ?? null, request));
      return { transactionId, success: true, results };
    } catch (error) {
      if (error instanceof TransactionRefused) return this.refused(transactionId, error.refusal);
      const lost = leaseLostAtCommit(error);
      if (lost !== undefined) {
        const named = `requiredLeases[${request.requiredLeases.indexOf(lost)}]: ${INVALID_LEASE}`;
        return this.refused(transactionId, { reason: 'lease_lost', error: named });
      }
      const refusedStatement = refusedStatementOf(error);
      if (refusedStatement !== undefined) {
        this.logger.warn(`Transaction ${transactionId} rolled back by the database: ${refusedStatement}`);
        return this.refused(transactionId, { reason: 'db_error', error: DB_ERROR_TEXT });
      }
      throw error;
    }
  }

  private refused(transactionId: string, refusal: TransactionRefusal): TransactionResultDto {
    this.metrics.transactions.inc({ outcome: refusal.reason });
    return { transactionId, success: false, reason: refusal.reason, error: refusal.error, results: [] };
  }

  /**
   * A fixed number of statements however many operations: every push item in one push, every ack in one ack batch,
   * each in request order. The acks apply (their cursor update sent with the next round trip), the pushes' partitions
   * locked and their duplicates found behind the acks' reads in their round trip (before the acks, in one of their own,
   * when an ack follows a push), then the pushes take their room and are written with the COMMIT, and the required
   * leases are checked in its round trip. What request order shows is kept: an ack sees the messages an earlier push
   * stores, and each result and the first failure name their operation. A queue's maxSize is held against the queue as
   * the transaction leaves it, its acks having freed room wherever they stand.
   */
  private async apply(
    unit: UnitOfWork,
    producerSub: string | null,
    request: TransactionRequest,
  ): Promise<TransactionOperationResult[]> {
    const { tenantId } = unit;
    const { operations, requiredLeases } = request;
    const { items, acks } = split(operations);
    const commands = acks.map(({ command }) => command);
    // The locks ride with the acks' reads or the push's lock, whichever goes first: their answer is needed at the end.
    const lock = this.transactions.lock(tenantId, requiredLeases, commands);
    const locked =
      lock === undefined
        ? Promise.resolve(new Set<string>())
        : commands.length > 0 || items.length > 0
          ? unit.withNextRead(lock)
          : unit.run(lock);

    // The pushes' partitions are the stage's hot rows, which other stages' pushes wait for: locked after the acks'
    // cursors, in their round trip, unless an ack may name a message an earlier push of this transaction stores.
    const pushesFirst = items.length > 0 && pushPrecedesAck(operations);
    let prepared = pushesFirst ? await this.pushes.prepare(unit, items) : undefined;
    const pushLocks =
      items.length > 0 && !pushesFirst && commands.length > 0 ? this.pushes.lockAfterNext(unit, items) : undefined;
    // The acks' cursor update goes with the next round trip: the COMMIT's, or the push's lock when it comes first.
    const ackRules = new TransactionAcks(
      new Set(requiredLeases),
      prepared ? pushedBefore(prepared, operations, acks) : undefined,
      true,
    );
    const acked = commands.length > 0 ? await this.acks.apply(unit, commands, ackRules) : [];
    if (items.length > 0 && !pushesFirst) prepared = await this.pushes.prepare(unit, items, await pushLocks);
    const pushed = prepared ? await this.pushes.write(unit, producerSub, prepared, 'with-commit') : [];
    const liveAtStart = await locked;

    const results: TransactionOperationResult[] = [];
    const misses: Miss[] = [];
    let nextItem = 0;
    let nextAck = 0;
    operations.forEach((operation, index) => {
      if (operation.type === 'push') {
        const answers = pushed
          .slice(nextItem, nextItem + operation.items.length)
          .map((answer, item) => ({ ...answer, index: item }));
        nextItem += operation.items.length;
        results.push({ index, type: 'push', success: true, items: answers });
        const full = answers.find((answer) => answer.status === 'failed');
        if (full) {
          misses.push({
            index,
            reason: 'bad_request',
            error: `operations[${index}].items[${full.index}]: ${QUEUE_FULL}`,
            alreadyDone: false,
          });
        }
      } else {
        const answer = acked[nextAck];
        nextAck += 1;
        results.push({ ...answer, index, type: 'ack' });
        if (!answer.success) misses.push(ackMiss(index, answer.error!));
      }
    });

    // A transaction that commits checks its leases with the COMMIT, in its round trip (LEASE_LOST); one refused
    // anyway, or with a lease already gone at the lock, looks now to say why, after the acks' deferred cursor update
    // (in the same round trip) as the check at COMMIT is: a lease an ack of this transaction released counts as held.
    if (misses.length > 0 || requiredLeases.some((lease) => !liveAtStart.has(lease))) {
      const lost = await this.transactions.lost(unit, tenantId, requiredLeases, liveAtStart);
      const refusal = verdict(results, misses, lost, requiredLeases);
      if (refusal) throw new TransactionRefused(refusal);
    } else if (requiredLeases.length > 0) {
      unit.checkAtCommit(this.transactions.heldAtCommit(tenantId, requiredLeases));
    }
    unit.afterCommit(() => this.metrics.transactions.inc({ outcome: 'committed' }));
    return results;
  }
}

/** The lease the check at COMMIT found lost, from its error; undefined for any other failure. */
function leaseLostAtCommit(error: unknown): string | undefined {
  if (!(error instanceof QueryFailedError)) return undefined;
  const { code, detail } = error.driverError as { code?: string; detail?: string };
  return code === LEASE_LOST ? detail : undefined;
}

interface IndexedAck {
  index: number;
  command: AckCommand;
}

/** Every push item, in request order, and every ack with the index of its operation. */
function split(operations: TransactionOperation[]): { items: PushItem[]; acks: IndexedAck[] } {
  const items: PushItem[] = [];
  const acks: IndexedAck[] = [];
  operations.forEach((operation, index) => {
    if (operation.type === 'push') {
      for (const item of operation.items) items.push(item);
    } else {
      acks.push({ index, command: operation.command });
    }
  });
  return { items, acks };
}

/** Whether some ack comes after some push in request order. */
function pushPrecedesAck(operations: TransactionOperation[]): boolean {
  const firstPush = operations.findIndex((operation) => operation.type === 'push');
  return firstPush >= 0 && operations.slice(firstPush + 1).some((operation) => operation.type === 'ack');
}

/**
 * Positions (among the acks) of the acks naming a message that a push earlier in the request stores: one not stored
 * yet, the first of the request to carry its transactionId in its partition.
 */
function pushedBefore(prepared: PreparedPush, operations: TransactionOperation[], acks: IndexedAck[]): Set<number> {
  const firstStoredBy = new Map<string, number>();
  let item = 0;
  operations.forEach((operation, index) => {
    if (operation.type !== 'push') return;
    for (const { transactionId } of operation.items) {
      const key = compositeKey(prepared.partitionIds[item], prepared.transactionIds[item]);
      item += 1;
      if (transactionId !== undefined && !prepared.stored.has(key) && !firstStoredBy.has(key)) {
        firstStoredBy.set(key, index);
      }
    }
  });
  const positions = new Set<number>();
  acks.forEach(({ index, command }, position) => {
    const storedBy = firstStoredBy.get(compositeKey(command.partitionId, command.transactionId));
    if (storedBy !== undefined && storedBy < index) positions.add(position);
  });
  return positions;
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
  requiredLeases: string[],
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
  // Named by its position: the value is the caller's, of any length.
  if (lost.length > 0) {
    return { reason: 'lease_lost', error: `requiredLeases[${requiredLeases.indexOf(lost[0])}]: ${INVALID_LEASE}` };
  }
  return { reason: misses[0].reason, error: misses[0].error };
}
