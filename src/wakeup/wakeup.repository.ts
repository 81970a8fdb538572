import { Injectable } from '@nestjs/common';
import { escapeLiteral } from 'pg';
import { sql, Statement, statement } from '../database/statement';
import type { Notice } from './wakeup-channel';

export interface WaitingGroup {
  tenantId: string;
  queue: string;
  consumerGroup: string;
}

export interface EndingLease extends WaitingGroup {
  partition: string;
  messages: number;
  /** By the database clock; 0 when it already has. */
  dueInMs: number;
}

/** Payloads hold names, so they are written as escaped literals. */
export function notifyStatements(notices: Notice[]): string[] {
  return notices.map((notice) => `NOTIFY ${notice.channel}, ${escapeLiteral(notice.payload)}`);
}

interface EndingLeaseRow {
  tenant_id: string;
  queue: string;
  consumer_group: string;
  partition: string;
  messages: number;
  due_in_ms: number;
}

@Injectable()
export class WakeupRepository {
  /** Spans tenants, but every join is on the tenant. A lease with nothing past its cursor would make a poll spin. */
  endingLeases(groups: WaitingGroup[], withinMs: number, limit: number): Statement<EndingLease[]> {
    return statement(
      sql`SELECT w.tenant_id, w.queue, w.consumer_group, p.name AS partition,
              GREATEST(1, c.lease_end_offset - c.committed_offset)::int AS messages,
              GREATEST(0, ceil(extract(epoch FROM c.lease_expires_at - clock_timestamp()) * 1000))::int AS due_in_ms
         FROM unnest(${groups.map((group) => group.tenantId)}::uuid[], ${groups.map((group) => group.queue)}::text[], ${groups.map((group) => group.consumerGroup)}::text[]) AS w(tenant_id, queue, consumer_group)
         JOIN queues q ON q.tenant_id = w.tenant_id AND q.name = w.queue
         JOIN consumers c ON c.tenant_id = q.tenant_id AND c.queue_id = q.id AND c.consumer_group = w.consumer_group
         JOIN partitions p ON p.tenant_id = c.tenant_id AND p.id = c.partition_id
        WHERE c.lease_id IS NOT NULL
          AND p.last_offset > c.committed_offset
          AND c.lease_expires_at <= clock_timestamp() + make_interval(secs => ${withinMs}::double precision / 1000)
        ORDER BY c.lease_expires_at
        LIMIT ${limit}`,
      (rows: EndingLeaseRow[]) =>
        rows.map((row) => ({
          tenantId: row.tenant_id,
          queue: row.queue,
          consumerGroup: row.consumer_group,
          partition: row.partition,
          messages: row.messages,
          dueInMs: row.due_in_ms,
        })),
    );
  }
}
