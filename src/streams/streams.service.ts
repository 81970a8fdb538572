import { HttpStatus, Injectable, Logger, NotFoundException } from '@nestjs/common';
import { AnswerException } from '../common/answer-exception';
import { AckService, INVALID_LEASE, TransactionAcks } from '../ack/ack.service';
import { refusedStatementOf } from '../common/database-errors';
import { TransactionRunner } from '../database/transaction-runner';
import { TenantQuotas } from '../limits/tenant-quotas';
import { TenantRates } from '../limits/tenant-rates';
import { MaintenanceService } from '../maintenance/maintenance.service';
import { MetricsService } from '../metrics/metrics.service';
import { PushService, QUEUE_FULL } from '../push/push.service';
import { QueuesRepository } from '../queues/queues.repository';
import { TransactionRepository } from '../transaction/transaction.repository';
import { UnitOfWork } from '../database/unit-of-work';
import { Writes } from '../wakeup/writes';
import { CycleCommand } from './cycle-request.pipe';
import { CycleRefusalDto, CycleResponseDto } from './dto/cycle.dto';
import { RegisterQueryDto, RegisterQueryResponseDto, StreamQueryListDto } from './dto/register-query.dto';
import { MAX_STATE_ROWS, StateGetDto, StateGetResponseDto } from './dto/state-get.dto';
import { StreamsRepository } from './streams.repository';

export const QUERY_NOT_FOUND = 'stream query not found';
export const DB_ERROR_TEXT = 'the database rolled the cycle back; nothing applied';

type Refusal = Pick<CycleRefusalDto, 'reason' | 'error'>;

/** Thrown inside the unit of work to roll it back with the answer's reason. */
class CycleRefused extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.error);
  }
}

/**
 * The server side of Queen's streaming SDK. A cycle is a transaction of one ack, its sink pushes and its state
 * writes, on the path the transaction route takes: the same locks in the same order, the same fencing of the source
 * lease by the database clock at commit, and one statement for the state.
 */
@Injectable()
export class StreamsService {
  private readonly logger = new Logger('Streams');

  constructor(
    private readonly maintenance: MaintenanceService,
    private readonly runner: TransactionRunner,
    private readonly writes: Writes,
    private readonly streams: StreamsRepository,
    private readonly queues: QueuesRepository,
    private readonly quotas: TenantQuotas,
    private readonly pushes: PushService,
    private readonly acks: AckService,
    private readonly leases: TransactionRepository,
    private readonly metrics: MetricsService,
    private readonly rates: TenantRates,
  ) {}

  /** Idempotent by name; another config_hash is refused (409) unless reset is asked, which deletes the state. */
  async register(tenantId: string, request: RegisterQueryDto): Promise<RegisterQueryResponseDto> {
    const sinkQueue = request.sink_queue ?? null;
    const reset = request.reset ?? false;
    return this.writes.run(tenantId, async (unit) => {
      let queueId = (await unit.run(this.queues.find(tenantId, request.source_queue)))?.id;
      if (queueId === undefined) {
        const source = await unit.run(this.queues.upsert(tenantId, request.source_queue));
        await this.quotas.admit(tenantId, 'queues', source.created ? 1 : 0, unit);
        queueId = source.id;
      }
      const { query, fresh } = await this.streams.registerByName(
        unit,
        tenantId,
        request.name,
        queueId,
        sinkQueue,
        request.config_hash,
      );
      const changed = !fresh && query.configHash !== request.config_hash;
      if (changed && !reset) {
        throw new AnswerException(HttpStatus.CONFLICT, {
          success: false,
          query_id: query.id,
          name: request.name,
          error:
            `config_hash mismatch: the operator chain of query '${request.name}' changed. Register with ` +
            'reset: true to delete its state, or use another name.',
        });
      }
      if (!fresh) {
        unit.stores(
          await this.streams.update(unit, tenantId, query.id, queueId, sinkQueue, request.config_hash, changed),
        );
      }
      return {
        success: true,
        query_id: query.id,
        name: request.name,
        config_hash: request.config_hash,
        fresh,
        reset: changed,
      };
    });
  }

  async list(tenantId: string): Promise<StreamQueryListDto> {
    return { queries: await this.runner.runOne(tenantId, this.streams.list(tenantId)) };
  }

  async delete(tenantId: string, name: string): Promise<void> {
    const deleted = await this.writes.run(tenantId, async (unit) => {
      const freed = await unit.run(this.streams.delete(tenantId, name));
      if (freed) unit.stores(freed);
      return freed !== undefined;
    });
    if (!deleted) throw new NotFoundException({ error: QUERY_NOT_FOUND });
  }

  async state(tenantId: string, request: StateGetDto): Promise<StateGetResponseDto> {
    const rows = await this.runner.runOne(
      tenantId,
      this.streams.stateRead(
        tenantId,
        request.query_id.toLowerCase(),
        request.partition_id.toLowerCase(),
        {
          keys: request.keys ?? [],
          keyPrefix: request.key_prefix || undefined,
          ripeAtOrBefore: request.ripe_at_or_before ?? undefined,
        },
        MAX_STATE_ROWS + 1,
      ),
    );
    if (rows === undefined) throw new NotFoundException({ success: false, error: QUERY_NOT_FOUND, rows: [] });
    return { success: true, rows: rows.slice(0, MAX_STATE_ROWS), truncated: rows.length > MAX_STATE_ROWS };
  }

  /** All or nothing; a refusal is a 409 with its reason (404 for an unknown query), and nothing changed. */
  async cycle(tenantId: string, producerSub: string | undefined, command: CycleCommand): Promise<CycleResponseDto> {
    if (command.pushItems.length > 0) this.maintenance.assertPushesAllowed(tenantId);
    if (command.ack) this.rates.charge(tenantId, 'consume', 1);
    try {
      const response = await this.writes.run(tenantId, (unit) => this.apply(unit, producerSub ?? null, command));
      this.metrics.streamCycles.inc({ outcome: 'committed' });
      return response;
    } catch (error) {
      const refusal = this.refusalOf(error, command);
      if (refusal === undefined) throw error;
      this.metrics.streamCycles.inc({ outcome: refusal.reason });
      throw new AnswerException(HttpStatus.CONFLICT, {
        success: false,
        query_id: command.queryId,
        partition_id: command.partitionId,
        ...refusal,
      });
    }
  }

  private refusalOf(error: unknown, command: CycleCommand): Refusal | undefined {
    if (error instanceof CycleRefused) return error.refusal;
    const refusedStatement = refusedStatementOf(error);
    if (refusedStatement !== undefined) {
      this.logger.warn(`Cycle of query ${command.queryId} rolled back by the database: ${refusedStatement}`);
      return { reason: 'db_error', error: DB_ERROR_TEXT };
    }
    return undefined;
  }

  /**
   * Locks as a transaction does (the lease's rows, then the query and its partition, the acked cursor, then the
   * pushes' partitions), applies the ack, the state and the pushes, and checks the source lease once more by the
   * database clock with the COMMIT. Two round trips, as a transaction of the same ack and pushes: the locks and the
   * query's read ride ahead of the ack's reads, the state write and the pushes' lock behind them (the state write does
   * nothing without the query, which is then refused, and rolled back), the pushed rows with the COMMIT.
   */
  private async apply(unit: UnitOfWork, producerSub: string | null, command: CycleCommand): Promise<CycleResponseDto> {
    const { tenantId } = unit;
    const { ack, queryId, partitionId } = command;
    const required = ack?.leaseId !== undefined ? [ack.leaseId] : [];
    const cursor = ack ? [{ partitionId, consumerGroup: command.consumerGroup }] : [];
    const lock = this.leases.lock(tenantId, required, cursor);
    const locked = lock ? unit.withNextRead(lock) : Promise.resolve(new Set<string>());
    const target = unit.withNextRead(this.streams.cycleTarget(tenantId, queryId, partitionId));
    void unit.withNextRead(this.streams.cycleLock(tenantId, queryId, partitionId));
    // State is stored like messages: growth is held to the storage quotas, as a push is.
    const applying = this.streams.applyState(tenantId, queryId, partitionId, command.stateOps);
    const stored = applying ? unit.readAfterNext(applying) : Promise.resolve({ bytes: 0, messages: 0 });
    const pushes = command.pushItems.length > 0;
    const pushLocks = pushes ? this.pushes.lockAfterNext(unit, command.pushItems) : undefined;

    // The acks' cursor update goes with the next round trip: the COMMIT's, or the pushes' when a queue or partition
    // of theirs is new.
    const acked = ack
      ? await this.acks.apply(unit, [ack], new TransactionAcks(new Set(required), undefined, true))
      : [];
    // Without an ack's reads to ride with, the locks and the reads go out on their own.
    if (!ack) await unit.runTogether([] as const);
    const found = await target;
    if (!found.query) throw new NotFoundException({ success: false, error: QUERY_NOT_FOUND });
    if (!found.partition) {
      throw new CycleRefused({
        reason: 'ack_rejected',
        error: `partition ${partitionId} is not a partition of the source queue ${found.sourceQueue}`,
      });
    }
    let ackResult: CycleResponseDto['ack_result'] = null;
    if (ack) {
      const [result] = acked;
      if (!result.success) {
        const lost = result.error === INVALID_LEASE;
        throw new CycleRefused({ reason: lost ? 'lease_lost' : 'ack_rejected', error: `ack: ${result.error}` });
      }
      ackResult = { success: true, count: command.ackCount, lease_released: result.leaseReleased, dlq: result.dlq };
    }

    const state = await stored;
    unit.stores(state, state.bytes > 0 || state.messages > 0);
    const prepared = pushes ? await this.pushes.prepare(unit, command.pushItems, await pushLocks) : undefined;
    const pushed = prepared ? await this.pushes.write(unit, producerSub, prepared, 'with-commit') : [];
    const full = pushed.find((item) => item.status === 'failed');
    if (full) {
      throw new CycleRefused({ reason: 'queue_full', error: `push_items[${full.index}]: ${full.error ?? QUEUE_FULL}` });
    }
    if (required.length > 0) {
      const liveAtStart = await locked;
      // Live when locked: held to the end by the check with the COMMIT; otherwise looked at now to say so.
      if (!liveAtStart.has(required[0])) {
        const lost = await this.leases.lost(unit, tenantId, required, liveAtStart);
        if (lost.length > 0) throw new CycleRefused({ reason: 'lease_lost', error: 'ack: invalid or expired lease' });
      } else {
        unit.checkAtCommit(this.leases.heldAtCommit(tenantId, required));
      }
    }
    return {
      success: true,
      query_id: command.queryId,
      partition_id: command.partitionId,
      state_ops_applied: command.stateOps.length,
      push_results: pushed,
      ack_result: ackResult,
    };
  }
}
