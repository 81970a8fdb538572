import { Injectable, Logger } from '@nestjs/common';
import type { QueryConfig } from 'pg';
import { EntityManager } from 'typeorm';
import { NamedStatement } from '../database/database-engine';
import { UsageChange, UsageRecord } from '../limits/stored-usage.repository';
import { TenantQuotas } from '../limits/tenant-quotas';
import { OpenTransaction, TransactionRunner } from '../database/transaction-runner';
import { ParkedPolls, QueueWork, Redelivery } from './parked-polls';
import { WakeupChannel } from './wakeup-channel';
import { notifyStatements } from './wakeup.repository';
import { errorMessage } from '../common/error-message';

/** A unit's last statement that records, as well, what the unit stores (undefined: nothing changed). */
export type RecordingStatement = (usage: UsageRecord | undefined) => QueryConfig;

/** Nothing recorded here happens for a write that rolls back. */
export class UnitOfWork {
  readonly pushed = new Map<string, QueueWork>();
  readonly redelivered: Redelivery[] = [];
  /** Queues this write deleted, which other processes hear of to drop what they keep of them. */
  readonly deletedQueues: string[] = [];
  private readonly effects: Array<() => void> = [];
  private last?: QueryConfig | RecordingStatement;
  private change?: UsageChange & { held: boolean };

  constructor(
    readonly tenantId: string,
    readonly manager: EntityManager,
    private readonly transaction?: OpenTransaction,
  ) {}

  /** The statement and COMMIT in one round trip, with the NOTIFYs recorded so far; only reads may follow. */
  commitWith<R>(statement: NamedStatement): Promise<R[]> {
    if (!this.transaction) throw new Error('this unit of work runs in no transaction');
    return this.transaction.commitWith<R>(statement);
  }

  push(queue: string, partition: string, count = 1): void {
    const partitions = this.pushed.get(queue) ?? new Map<string, number>();
    partitions.set(partition, (partitions.get(partition) ?? 0) + count);
    this.pushed.set(queue, partitions);
  }

  redeliver(redelivery: Redelivery): void {
    this.redelivered.push(redelivery);
  }

  queueDeleted(queue: string): void {
    this.deletedQueues.push(queue);
  }

  /**
   * Sent with its COMMIT in one round trip; its result is not read. Built at commit, a recording statement also
   * records what the unit stores (usageCtes), which saves a statement of its own.
   */
  lastly(statement: QueryConfig | RecordingStatement): void {
    if (this.last) throw new Error('a unit of work has one last statement');
    this.last = statement;
  }

  get lastStatement(): QueryConfig | RecordingStatement | undefined {
    return this.last;
  }

  /**
   * Bytes and messages this write stores (negative: frees), recorded by the unit's very last statement; `held` when
   * the storage quotas apply to the write (it pushes), which that statement then refuses past a quota.
   */
  stores(change: UsageChange, held = false): void {
    if (change.bytes === 0 && change.messages === 0 && !held) return;
    this.change ??= { bytes: 0, messages: 0, held: false };
    this.change.bytes += change.bytes;
    this.change.messages += change.messages;
    this.change.held ||= held;
  }

  get storedChange(): (UsageChange & { held: boolean }) | undefined {
    return this.change;
  }

  afterCommit(effect: () => void): void {
    this.effects.push(effect);
  }

  runEffects(logger: Logger): void {
    for (const effect of this.effects) {
      try {
        effect();
      } catch (error) {
        logger.error(`An effect after commit failed: ${errorMessage(error)}`);
      }
    }
  }
}

/** Other processes hear of a write by NOTIFYs sent with its COMMIT; this one's parked polls are woken directly. */
@Injectable()
export class Writes {
  private readonly logger = new Logger('Writes');

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly polls: ParkedPolls,
    private readonly channel: WakeupChannel,
    private readonly quotas: TenantQuotas,
  ) {}

  async run<T>(tenantId: string, work: (unit: UnitOfWork) => Promise<T>): Promise<T> {
    let unit: UnitOfWork | undefined;
    let result: T;
    try {
      result = await this.transactions.run(
        tenantId,
        (manager, transaction) => work((unit = new UnitOfWork(tenantId, manager, transaction))),
        () => {
          const change = unit!.storedChange;
          const record = change && this.quotas.usageRecord(change, change.held);
          const last = unit!.lastStatement;
          const recording = typeof last === 'function';
          return {
            statement: recording ? last(record) : last,
            usage: record && !recording ? this.quotas.usageStatement(tenantId, record) : undefined,
            before: notifyStatements(
              this.channel.notices(tenantId, unit!.pushed, unit!.redelivered, unit!.deletedQueues),
            ),
          };
        },
      );
    } catch (error) {
      throw this.quotas.refusalOf(tenantId, error) ?? error;
    }
    const change = unit!.storedChange;
    if (change && (change.bytes < 0 || change.messages < 0)) this.quotas.forgetStored(tenantId);
    this.polls.pushed(tenantId, unit!.pushed);
    this.polls.redelivered(tenantId, unit!.redelivered);
    unit!.runEffects(this.logger);
    return result;
  }
}
