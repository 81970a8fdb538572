import { Injectable } from '@nestjs/common';
import type { QueryConfig } from 'pg';
import { numbered, raw, Shared, shared, Sql, sql, Statement, statement } from '../database/statement';

/** Bytes and messages a write adds to what its tenant stores (negative: what it frees). */
export interface UsageChange {
  bytes: number;
  messages: number;
}

export interface StoredUsage {
  bytes: number;
  messages: number;
}

/** Most bytes and messages a tenant may store after a write the quotas apply to; 0 turns one off. */
export interface StorageLimits {
  bytes: number;
  messages: number;
}

/** What a write's transaction records: its change, and the limits it is refused past (none: not held to them). */
export interface UsageRecord {
  change: UsageChange;
  limits: StorageLimits | undefined;
}

/** A tenant's usage is spread over this many rows: each transaction adds to the one its connection picks. */
export const USAGE_STRIPES = 16;

/** SQLSTATE of leasehold_storage_quota_exceeded() (migration StoredUsage). */
export const STORAGE_QUOTA_EXCEEDED = 'LQ001';

/** Counted for a stored message or dead letter, as the push measured its payload (older rows: measured now). */
export const storedBytes = (alias: string): string =>
  `COALESCE(${alias}.payload_bytes, octet_length(${alias}.payload::text), 0)`;

/** Serves one connection at a time, so a connection's transactions never wait for each other's stripe. */
const STRIPE = `(pg_backend_pid() % ${USAGE_STRIPES})::smallint`;

/**
 * A CTE adding `changes` (a relation of tenant_id, bytes, messages) to each tenant's usage, in tenant order, so two
 * statements that change several tenants take their rows in the same order. It reads the whole relation before its
 * first row: name only relations whose own locks are taken by then.
 */
export function usageChangeCte(name: string, changes: string): string {
  return `${name} AS (
    INSERT INTO tenant_usage AS u (tenant_id, stripe, stored_bytes, stored_messages)
    SELECT c.tenant_id, ${STRIPE}, sum(c.bytes), sum(c.messages) FROM (${changes}) c
     GROUP BY c.tenant_id
    HAVING sum(c.bytes) <> 0 OR sum(c.messages) <> 0
     ORDER BY c.tenant_id
    ON CONFLICT (tenant_id, stripe) DO UPDATE
       SET stored_bytes = u.stored_bytes + excluded.stored_bytes,
           stored_messages = u.stored_messages + excluded.stored_messages
  )`;
}

const usageTotal = (name: string, tenant: unknown): Sql => sql`${raw(name)} AS (
    SELECT COALESCE(sum(stored_bytes), 0)::bigint AS bytes, COALESCE(sum(stored_messages), 0)::bigint AS messages
      FROM tenant_usage WHERE tenant_id = ${tenant}
  )`;

/**
 * Adds the record's change to the stripe of this connection. Held to the limits, it refuses (SQLSTATE LQ001, the usage
 * before this write as DETAIL) a write after which the tenant would store more than a limit, as far as the
 * transactions committed when it starts show: only writes in flight at the same moment are not seen.
 */
const usageInsert = (total: string, tenant: unknown, { change, limits }: UsageRecord): Sql => {
  const [bytes, messages, maxBytes, maxMessages] = [
    change.bytes,
    change.messages,
    limits?.bytes ?? 0,
    limits?.messages ?? 0,
  ].map(shared);
  return sql`INSERT INTO tenant_usage AS u (tenant_id, stripe, stored_bytes, stored_messages)
    SELECT ${tenant}, ${raw(STRIPE)}, ${bytes}::bigint, ${messages}::bigint FROM ${raw(total)} t
     WHERE NOT ${limits !== undefined}::boolean
        OR (CASE WHEN ${maxBytes}::bigint > 0 AND t.bytes + ${bytes} > ${maxBytes}
                 THEN leasehold_storage_quota_exceeded('storedBytes', t.bytes) ELSE true END
            AND CASE WHEN ${maxMessages}::bigint > 0 AND t.messages + ${messages} > ${maxMessages}
                     THEN leasehold_storage_quota_exceeded('storedMessages', t.messages) ELSE true END)
    ON CONFLICT (tenant_id, stripe) DO UPDATE
       SET stored_bytes = u.stored_bytes + excluded.stored_bytes,
           stored_messages = u.stored_messages + excluded.stored_messages`;
};

/**
 * For a write whose own last statement records its usage, saving the statement of its own: CTEs to append to that
 * statement's WITH.
 */
export function usageCtes(tenant: Shared<string>, record: UsageRecord): Sql {
  return sql`${usageTotal('usage_total', tenant)}, usage_recorded AS (${usageInsert('usage_total', tenant, record)})`;
}

@Injectable()
export class StoredUsageRepository {
  /** The last statement of a write's transaction, unless the write's own last statement records it (usageCtes). */
  changeStatement(tenantId: string, record: UsageRecord): QueryConfig {
    const tenant = shared(tenantId);
    return numbered(sql`WITH ${usageTotal('total', tenant)} ${usageInsert('total', tenant, record)}`);
  }

  usage(tenantId: string): Statement<StoredUsage> {
    return statement(
      sql`SELECT COALESCE(sum(stored_bytes), 0) AS bytes, COALESCE(sum(stored_messages), 0) AS messages
         FROM tenant_usage WHERE tenant_id = ${tenantId}`,
      ([row]: Array<{ bytes: string; messages: string }>) => ({
        bytes: Number(row.bytes),
        messages: Number(row.messages),
      }),
    );
  }
}
