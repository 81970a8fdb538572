import { Injectable, Logger, NotFoundException } from '@nestjs/common';
import { QueryFailedError } from '../database/query-failed-error';
import { StatementReader, TransactionRunner } from '../database/transaction-runner';
import { TenantQuotas } from '../limits/tenant-quotas';
import { PopRepository } from '../pop/pop.repository';
import { QueuesRepository } from '../queues/queues.repository';
import { UnitOfWork } from '../database/unit-of-work';
import { Writes } from '../wakeup/writes';
import { Redelivery } from '../wakeup/parked-polls';
import { pageKeys, pageToken, Page } from '../common/page-token';
import { isUuid } from '../common/uuid';
import {
  ConsumerGroupsRepository,
  GroupPartition,
  LAGGING_WALK,
  LaggingPosition,
  MovedCursor,
} from './consumer-groups.repository';
import {
  ConsumerGroupDetail,
  ConsumerGroupSummaryDto,
  DeleteConsumerGroupResponseDto,
  GroupPartitionDto,
  LaggingPartitionDto,
  SeekResponseDto,
  SubscriptionMode,
} from './dto/consumer-group-response.dto';

/** A group whose oldest unconsumed message is this old is Lagging (the lagging route's default threshold). */
export const LAGGING_SECONDS = 60;

export type SeekTarget = { toEnd: true } | { timestamp: string };

/** Moves end the group's leases on what they move and wake its parked polls, once committed. */
@Injectable()
export class ConsumerGroupsService {
  private readonly logger = new Logger('ConsumerGroups');

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly writes: Writes,
    private readonly groups: ConsumerGroupsRepository,
    private readonly queues: QueuesRepository,
    private readonly pops: PopRepository,
    private readonly quotas: TenantQuotas,
  ) {}

  /** A page of (group, queue) entries; `next` is the `after` of the following page. */
  list(
    tenantId: string,
    queue: string | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<Page<ConsumerGroupSummaryDto>> {
    const from = after === undefined ? undefined : (pageKeys(after, twoNames) as [string, string]);
    return this.transactions.read(tenantId, async (reader) => {
      if (queue !== undefined) await this.queueOrThrow(reader, tenantId, queue);
      const entries = await reader.run(this.groups.entries(tenantId, queue, from, limit));
      const page = entries.slice(0, limit);
      const queueIds = [...new Set(page.map((entry) => entry.queueId))];
      const totals = await this.groups.groupTotals(reader, tenantId, queueIds);
      const partitions = await this.groups.partitionCounts(reader, tenantId, queueIds);
      const last = page[page.length - 1];
      return {
        entries: page.map(({ queueId, subscriptionFrom, ...entry }) => {
          const sums = ConsumerGroupsRepository.totalsOf(totals, queueId, entry.name);
          return {
            ...entry,
            partitions: partitions.get(queueId) ?? 0,
            ...sums,
            subscriptionMode: modeOf(subscriptionFrom),
            subscriptionTimestamp: subscriptionFrom,
            state: sums.maxTimeLag >= LAGGING_SECONDS ? 'Lagging' : 'Stable',
          };
        }),
        next: entries.length > limit ? pageToken([last.queueName, last.name]) : null,
      };
    });
  }

  /**
   * Steps through ready cursors (and partitions groups still looking through have not reached) until `limit` lagging
   * ones are found or LAGGING_WALK_MAX of them were looked at; the page is sorted worst first.
   */
  lagging(
    tenantId: string,
    minLagSeconds: number,
    after: string | undefined,
    limit: number,
  ): Promise<Page<LaggingPartitionDto>> {
    let position = after === undefined ? undefined : laggingPosition(after);
    return this.transactions.read(tenantId, async (reader) => {
      const found: Array<GroupPartition & { position: LaggingPosition }> = [];
      let walked = 0;
      let more = true;
      while (found.length < limit && walked < LAGGING_WALK_MAX && more) {
        const step = await reader.run(this.groups.laggingStep(tenantId, minLagSeconds, position, LAGGING_WALK));
        walked += LAGGING_WALK;
        found.push(...step.found);
        position = step.next;
        more = step.next !== undefined;
      }
      const page = found.slice(0, limit);
      // Cut at the limit: the walk goes on from the last entry listed, not from the last cursor looked at.
      if (found.length > limit) position = page[page.length - 1].position;
      const next = found.length > limit || more ? pageToken(positionKeys(position!)) : null;
      return {
        entries: page.sort(worstFirst).map(({ position: _position, ...partition }) => partition),
        next,
      };
    });
  }

  /** Up to `limit` partitions in all, by queue then partition name, after (queue name, partition name). */
  detail(
    tenantId: string,
    group: string,
    queue: string | undefined,
    after: string | undefined,
    limit: number,
  ): Promise<Page<ConsumerGroupDetail>> {
    const from = after === undefined ? undefined : (pageKeys(after, twoNames) as [string, string]);
    return this.transactions.read(tenantId, async (reader) => {
      const queues = await reader.run(this.groups.queuesOf(tenantId, group, queue, from?.[0]));
      const counts = await this.groups.partitionCounts(
        reader,
        tenantId,
        queues.map((each) => each.queueId),
      );
      const detail: ConsumerGroupDetail = {};
      let left = limit;
      let next: string | null = null;
      for (const { queueId, queueName, subscriptionFrom } of queues) {
        const partitions =
          left > 0
            ? await reader.run(
                this.groups.partitionsOf(
                  tenantId,
                  group,
                  queueId,
                  from !== undefined && from[0] === queueName ? from[1] : undefined,
                  left + 1,
                ),
              )
            : [];
        if (partitions.length > left) {
          partitions.length = left;
          next = pageToken([queueName, partitions[partitions.length - 1].partition]);
        } else if (left === 0 && next === null) {
          next = pageToken([queueName, '']);
        }
        left -= partitions.length;
        detail[queueName] = {
          subscriptionMode: modeOf(subscriptionFrom),
          subscriptionTimestamp: subscriptionFrom,
          partitionCount: counts.get(queueId) ?? 0,
          partitions: partitions.map(partitionOnly),
        };
      }
      return { entries: [detail], next };
    });
  }

  async delete(tenantId: string, group: string, queue: string | undefined): Promise<DeleteConsumerGroupResponseDto> {
    const forgotten = await retriedWhileLocked(() =>
      this.writes.run(tenantId, async (unit) => {
        const { moved, partitions } = await this.groups.delete(unit, tenantId, group, queue);
        // A poll of the group starts afresh, whether or not the group had cursors.
        wake(unit, group, moved, queue !== undefined ? [queue] : [...new Set(moved.map((cursor) => cursor.queueName))]);
        unit.afterCommit(() => this.quotas.forget(tenantId));
        return partitions;
      }),
    );
    this.logger.log(
      `Consumer group ${JSON.stringify(group)} forgotten on ${queue === undefined ? 'every queue' : `queue ${JSON.stringify(queue)}`}` +
        ` of tenant ${tenantId}: ${forgotten} partitions`,
    );
    return {
      success: true,
      consumerGroup: group,
      ...(queue === undefined ? {} : { queueName: queue }),
      deletedPartitions: forgotten,
    };
  }

  async seek(
    tenantId: string,
    group: string,
    queueName: string,
    partitionName: string | undefined,
    target: SeekTarget,
  ): Promise<SeekResponseDto> {
    // Created in a transaction of its own: holding the queue row lock while waiting for cursors an ack holds (the ack
    // then waits for the queue row) would deadlock. Should the move then fail, the group exists at its start.
    await this.writes.run(tenantId, async (unit) => {
      const queue = await this.queueOrThrow(unit, tenantId, queueName);
      if (await unit.run(this.groups.groupExists(tenantId, queue.id, group))) return;
      const created = await this.pops.ensureGroup(unit, tenantId, queue.id, group, { newOnly: false, from: undefined });
      await this.quotas.admit(tenantId, 'consumerGroups', created ? 1 : 0, unit);
    });
    const moved = await this.writes.run(tenantId, async (unit) => {
      const queue = await this.queueOrThrow(unit, tenantId, queueName);
      let partitionId: string | undefined;
      if (partitionName !== undefined) {
        partitionId = await unit.run(this.queues.partitionId(tenantId, queue.id, partitionName));
        if (partitionId === undefined) throw new NotFoundException({ error: 'partition not found' });
      }
      const timestamp = 'timestamp' in target ? target.timestamp : undefined;
      const { moved: cursors, partitions } = await this.groups.seek(
        unit,
        tenantId,
        queue,
        group,
        partitionId,
        timestamp,
      );
      // Back in time over the whole queue, partitions without a cursor may have something again too.
      wake(unit, group, cursors, timestamp !== undefined && partitionId === undefined ? [queue.name] : []);
      return partitions;
    });
    this.logger.log(
      `Consumer group ${JSON.stringify(group)} sought to ${'toEnd' in target ? 'the end' : target.timestamp} on queue ` +
        `${JSON.stringify(queueName)}${partitionName === undefined ? '' : ` partition ${JSON.stringify(partitionName)}`}` +
        ` of tenant ${tenantId}: ${moved} partitions`,
    );
    return {
      success: true,
      consumerGroup: group,
      queueName,
      ...(partitionName === undefined ? {} : { partition: partitionName }),
      partitionsUpdated: moved,
    };
  }

  private async queueOrThrow(reader: StatementReader, tenantId: string, name: string) {
    const queue = await reader.run(this.queues.find(tenantId, name));
    if (!queue) throw new NotFoundException({ error: 'queue not found' });
    return queue;
  }
}

/**
 * A row it would not wait for was locked (55P03), or PostgreSQL broke a deadlock with it (40P01): a push holds its
 * queue's row while it marks cursors ready, and a delete holds the group's cursors while it waits for that row. The
 * unit of work retries a deadlock within its first attempt's bound, which waiting out deadlock_timeout under load
 * can spend; this one starts afresh.
 */
const RETRIED = new Set(['55P03', '40P01']);
const LOCKED_ATTEMPTS = 5;

/** Runs a unit of work again, a little later each time, while it finds a row locked or loses a deadlock. */
export async function retriedWhileLocked<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await work();
    } catch (error) {
      const code = error instanceof QueryFailedError ? (error.driverError as { code?: string }).code : undefined;
      if (code === undefined || !RETRIED.has(code) || attempt === LOCKED_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
    }
  }
}

function modeOf(subscriptionFrom: string | null): SubscriptionMode {
  return subscriptionFrom === null ? 'all' : 'new';
}

/**
 * Parked polls of the group wake for what its moved cursors can claim now; on `everywhere` queues, every poll of the
 * group that waits on the queue as a whole, for what its starting point now places in partitions without a cursor.
 */
function wake(unit: UnitOfWork, group: string, moved: MovedCursor[], everywhere: string[]): void {
  const byQueue = new Map<string, Redelivery>();
  const of = (queueName: string): Redelivery => {
    let redelivery = byQueue.get(queueName);
    if (!redelivery) {
      redelivery = { queue: queueName, consumerGroup: group, partitions: new Map() };
      byQueue.set(queueName, redelivery);
    }
    return redelivery;
  };
  for (const { queueName, partition, claimable } of moved) {
    if (claimable > 0) of(queueName).partitions.set(partition, claimable);
  }
  // No partition of that name: only the polls of the whole queue count it.
  for (const queueName of everywhere) of(queueName).partitions.set('', EVERY_POLL);
  for (const redelivery of byQueue.values()) unit.redeliver(redelivery);
}

/** More polls than a process parks for one group: POP_MAX_WAITING_PER_TENANT is at most 1,000,000. */
const EVERY_POLL = 1_000_000;

function partitionOnly({ consumerGroup: _group, queueName: _queue, ...partition }: GroupPartition): GroupPartitionDto {
  return partition;
}

/** Cursors and partitions one lagging page looks at, at most, over its steps. */
export const LAGGING_WALK_MAX = 5 * LAGGING_WALK;

const twoNames = (keys: unknown[]) => keys.length === 2 && keys.every((key) => typeof key === 'string');

function positionKeys(position: LaggingPosition): string[] {
  return position.walk === 'ready'
    ? ['r', position.queueId, position.group, position.movedAt, position.partitionId]
    : ['b', position.queueId, position.group, position.partition];
}

function laggingPosition(token: string): LaggingPosition {
  const keys = pageKeys(
    token,
    (keys) =>
      keys.every((key) => typeof key === 'string') &&
      ((keys[0] === 'r' && keys.length === 5 && isUuid(keys[1]) && isUuid(keys[4]) && isTimestamp(keys[3])) ||
        (keys[0] === 'b' && keys.length === 4 && isUuid(keys[1]))),
  ) as string[];
  return keys[0] === 'r'
    ? { walk: 'ready', queueId: keys[1], group: keys[2], movedAt: keys[3], partitionId: keys[4] }
    : { walk: 'backfill', queueId: keys[1], group: keys[2], partition: keys[3] };
}

function isTimestamp(value: unknown): boolean {
  return typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/.test(value);
}

/** The oldest unconsumed message first; ties by queue, group and partition name, as the listing used to. */
function worstFirst(a: GroupPartition, b: GroupPartition): number {
  const key = (entry: GroupPartition) => [
    entry.oldestUnconsumedAt ?? '',
    entry.queueName,
    entry.consumerGroup,
    entry.partition,
  ];
  const [left, right] = [key(a), key(b)];
  for (let n = 0; n < left.length; n += 1) {
    if (left[n] !== right[n]) return left[n] < right[n] ? -1 : 1;
  }
  return 0;
}
