import { BadRequestException, ForbiddenException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { levelAllows, PURGE_LEVEL } from '../auth/access-level';
import { Role } from '../auth/principal';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { TransactionRunner } from '../database/transaction-runner';
import { PayloadCipher } from '../encryption/payload-cipher';
import { TenantQuotas } from '../limits/tenant-quotas';
import { MetricsService } from '../metrics/metrics.service';
import { Writes } from '../wakeup/writes';
import {
  RetentionDefaults,
  retentionDefaultsOf,
  retentionOptionsInForce,
  retentionPolicy,
} from '../retention/retention-policy';
import { ConfigureCommand } from './dto/configure-request.dto';
import { LeaseListDto } from './dto/lease-list.dto';
import {
  ConfigureResponseDto,
  ConsumerGroupDto,
  DeleteQueueResponseDto,
  NamespacesDto,
  QueueDetailDto,
  QueueGroupDto,
  TasksDto,
  QueueListDto,
  QueueSummaryDto,
} from './dto/queue-response.dto';
import { QueueListQuery } from './queue-list-query.pipe';
import { shortenedRetentionProblem } from './shortened-retention';
import { ConsumerGroupTotals, ConsumerStats, QueuesRepository, QueueSummary } from './queues.repository';
import { listedOptions, optionsInForce } from './queue-options';

/** A queue's answer lists this many partitions at most, by name; its totals still cover them all. */

export const ENCRYPTION_WITHOUT_KEY =
  'options.encryptionEnabled needs an encryption key on the broker: set ENCRYPTION_KEYS (or QUEEN_ENCRYPTION_KEY)';

/** The listing's own keys, outside its queues. */
const LIST_ENVELOPE_BYTES = 1_024;

@Injectable()
export class QueuesService {
  private readonly answerBudget: number;
  private readonly retentionDefaults: RetentionDefaults;
  private readonly minRetentionSeconds: number;

  constructor(
    private readonly transactions: TransactionRunner,
    private readonly writes: Writes,
    private readonly queues: QueuesRepository,
    private readonly quotas: TenantQuotas,
    private readonly metrics: MetricsService,
    private readonly cipher: PayloadCipher,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.answerBudget = config.limits.responseMaxBytes - LIST_ENVELOPE_BYTES;
    this.retentionDefaults = retentionDefaultsOf(config);
    this.minRetentionSeconds = config.retention.minSeconds;
  }

  /**
   * Creates the queue when missing and sets the options sent; the answer echoes those, with the values in force.
   * Shortening what a queue keeps is a purge: it needs the role clearing it needs (docs/retention.md).
   */
  async configure(tenantId: string, roles: readonly Role[], command: ConfigureCommand): Promise<ConfigureResponseDto> {
    if (command.settings.options.encryptionEnabled === true && !this.cipher.enabled) {
      throw new BadRequestException({ error: ENCRYPTION_WITHOUT_KEY });
    }
    const queue = await this.writes.run(tenantId, async (unit) => {
      const { created, retention } = await unit.run(this.queues.upsert(tenantId, command.queue));
      await this.quotas.admit(tenantId, 'queues', created ? 1 : 0, unit);
      if (!levelAllows(PURGE_LEVEL, roles)) {
        const problem = shortenedRetentionProblem(
          created ? undefined : retention,
          command.settings.retention,
          command.sent,
          this.retentionDefaults,
          this.minRetentionSeconds,
          PURGE_LEVEL,
        );
        if (problem) throw new ForbiddenException({ error: problem });
      }
      const queue = await unit.run(this.queues.configure(tenantId, command.queue, command.settings));
      if (Object.keys(command.settings.retention).length > 0) {
        await unit.run(this.queues.recheckRetention(tenantId, command.queue));
      }
      return queue;
    });
    const inForce = optionsInForce(
      queue.options,
      retentionOptionsInForce(retentionPolicy(queue.retention, this.retentionDefaults)),
    );
    return {
      configured: true,
      queue: queue.name,
      options: Object.fromEntries(command.sent.map((name) => [name, inForce[name]])),
    };
  }

  /** Cut short where the answer would pass RESPONSE_MAX_BYTES; one queue always comes. */
  async list(tenantId: string, page: QueueListQuery): Promise<QueueListDto> {
    return this.transactions.read(tenantId, async (reader) => {
      const entries = await reader.run(this.queues.listPage(tenantId, page.after, page.limit + 1));
      const shown = entries
        .slice(0, page.limit)
        .filter((entry, index) => index === 0 || entry.answerBytes <= this.answerBudget);
      const summaries =
        shown.length === 0
          ? []
          : await this.queues.summaries(
              reader,
              tenantId,
              undefined,
              shown.map((entry) => entry.id),
            );
      const more = entries.length > shown.length;
      return {
        queues: summaries.map((summary) => toSummary(summary, this.retentionDefaults)),
        next: more ? shown[shown.length - 1].name : null,
        retentionLagSeconds: await reader.last(this.queues.retentionLagSeconds(tenantId)),
      };
    });
  }

  /** Read in one transaction: one snapshot, and one connection even on the embedded database. */
  async namespaces(tenantId: string): Promise<NamespacesDto> {
    const summaries = await this.transactions.read(tenantId, (reader) =>
      this.queues.summaries(reader, tenantId, undefined),
    );
    return { namespaces: groupedBy(summaries, 'namespace') };
  }

  async tasks(tenantId: string): Promise<TasksDto> {
    const summaries = await this.transactions.read(tenantId, (reader) =>
      this.queues.summaries(reader, tenantId, undefined),
    );
    return { tasks: groupedBy(summaries, 'task') };
  }

  /** A page of the queue's partitions by name, each group's position in each of them, and the queue's totals. */
  async detail(tenantId: string, name: string, after: string | undefined, limit: number): Promise<QueueDetailDto> {
    return this.transactions.read(tenantId, async (reader) => {
      const {
        summaries: [summary],
        groups,
      } = await this.queues.summariesWithGroups(reader, tenantId, name);
      if (!summary) {
        throw new NotFoundException({ error: 'queue not found' });
      }
      const page = await reader.run(this.queues.partitionStats(tenantId, summary.id, after, limit + 1));
      const partitions = page.slice(0, limit);
      const totals = await reader.run(this.queues.consumerGroupTotals(tenantId, summary.id, groups));
      const consumers = await reader.last(
        this.queues.consumerStats(
          tenantId,
          summary.id,
          partitions.map((partition) => partition.id),
        ),
      );
      return {
        ...toSummary(summary, this.retentionDefaults),
        partitions,
        partitionsTruncated: page.length > limit || after !== undefined,
        partitionsNext: page.length > limit ? partitions[partitions.length - 1].name : null,
        consumerGroups: groupsOf(totals, consumers),
      };
    });
  }

  async leases(tenantId: string, name: string, limit: number): Promise<LeaseListDto> {
    return this.transactions.read(tenantId, async (reader) => {
      const queue = await reader.run(this.queues.find(tenantId, name));
      if (!queue) {
        throw new NotFoundException({ error: 'queue not found' });
      }
      return reader.last(this.queues.liveLeases(tenantId, queue.id, limit));
    });
  }

  /** Idempotent: deleting a queue that does not exist (any more) is not an error. */
  async delete(tenantId: string, name: string): Promise<DeleteQueueResponseDto> {
    const existed = await this.writes.run(tenantId, async (unit) => {
      const freed = await this.queues.delete(unit, tenantId, name);
      if (!freed) return false;
      unit.stores({ bytes: -freed.bytes, messages: -freed.messages });
      unit.queueDeleted(name);
      unit.afterCommit(() => {
        this.quotas.forget(tenantId);
        this.metrics.queueDeleted(tenantId, name);
      });
      return true;
    });
    return { deleted: existed, queue: name, existed };
  }
}

/** Queues grouped by their namespace or task (those without one are left out), by name. */
function groupedBy(summaries: QueueSummary[], key: 'namespace' | 'task'): QueueGroupDto[] {
  const groups = new Map<string, QueueGroupDto>();
  for (const summary of summaries) {
    const name = summary[key];
    if (name === null) continue;
    const group = groups.get(name) ?? { name, queues: 0, partitions: 0, messages: { total: 0, pending: 0 } };
    group.queues += 1;
    group.partitions += summary.partitions;
    group.messages.total += summary.messages;
    group.messages.pending += summary.pending;
    groups.set(name, group);
  }
  return [...groups.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function toSummary(summary: QueueSummary, defaults: RetentionDefaults): QueueSummaryDto {
  const retention = retentionOptionsInForce(retentionPolicy(summary.retention, defaults));
  return {
    name: summary.name,
    options: listedOptions(summary.options, retention, summary.extraOptions),
    retention,
    namespace: summary.namespace,
    task: summary.task,
    partitionCount: summary.partitions,
    messages: summary.messages,
    pending: summary.pending,
    retained: summary.retained,
    deadLetters: summary.deadLetters,
    consumerGroupCount: summary.consumerGroups,
    createdAt: summary.createdAt,
    updatedAt: summary.updatedAt,
  };
}

function groupsOf(totals: ConsumerGroupTotals[], consumers: ConsumerStats[]): ConsumerGroupDto[] {
  const groups = new Map<string, ConsumerGroupDto>(
    totals.map((total) => [
      total.consumerGroup,
      {
        name: total.consumerGroup,
        subscriptionFrom: total.subscriptionFrom,
        lag: total.lag,
        liveLeases: total.liveLeases,
        partitions: [],
      },
    ]),
  );
  for (const { consumerGroup, subscriptionFrom: _from, ...partition } of consumers) {
    groups.get(consumerGroup)?.partitions.push(partition);
  }
  return [...groups.values()];
}
