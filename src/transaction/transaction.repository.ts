import { Injectable } from '@nestjs/common';
import { CursorKey } from '../ack/ack.repository';
import { isUuid } from '../common/uuid';
import { prepared, rows as rowsOf, shared, sql, Statement, statement, unsized } from '../database/statement';
import type { StatementReader } from '../database/transaction-runner';

/** What leasehold_lease_lost raises (migration LeaseLostGuard), the lease in its detail. */
export const LEASE_LOST = 'LL001';

/** The locks and lease checks of a transaction; its pushes and acks are the push's and the ack's SQL. */
@Injectable()
export class TransactionRepository {
  /**
   * One statement, in primary-key order as acks and renewals lock, so that concurrent transactions queue instead of
   * deadlocking. Answers the required leases live by the database clock once the locks are held; undefined when there
   * is nothing to lock. Each lease's rows are read through the lease index (OFFSET 0 keeps the lateral a loop): as a
   * join, the generic plan read the tenant's every leased row while it had few.
   */
  lock(tenantId: string, requiredLeases: string[], acked: CursorKey[]): Statement<Set<string>> | undefined {
    const leases = requiredLeases.filter(isUuid);
    if (leases.length === 0 && acked.length === 0) return undefined;
    const tenant = shared(tenantId);
    return prepared(
      'leasehold_transaction_lock',
      sql`WITH wanted AS (
            SELECT c.partition_id, c.consumer_group
              FROM unnest(${unsized(leases, 'uuid[]')}) AS r(lease)
             CROSS JOIN LATERAL (
                   SELECT c.partition_id, c.consumer_group FROM consumers c
                    WHERE c.tenant_id = ${tenant} AND c.lease_id = r.lease
                   OFFSET 0
                 ) c
             UNION
            SELECT partition_id, consumer_group
              FROM unnest(${unsized(
                acked.map((key) => key.partitionId),
                'uuid[]',
              )}, ${unsized(
                acked.map((key) => key.consumerGroup),
                'text[]',
              )})
                AS t(partition_id, consumer_group)
          )
          SELECT c.lease_id, COALESCE(c.lease_expires_at > clock_timestamp(), false) AS live
            FROM (SELECT * FROM wanted ORDER BY partition_id, consumer_group) w
           CROSS JOIN LATERAL (
                 SELECT c.lease_id, c.lease_expires_at
                   FROM consumers c
                  WHERE c.tenant_id = ${tenant} AND c.partition_id = w.partition_id AND c.consumer_group = w.consumer_group
                    FOR UPDATE
               ) c`,
      (rows: Array<{ lease_id: string | null; live: boolean }>) => {
        const wanted = new Set(leases);
        return new Set(rows.filter((row) => row.live && wanted.has(row.lease_id!)).map((row) => row.lease_id!));
      },
    );
  }

  /**
   * The check at COMMIT for leases that were live when locked (UnitOfWork.checkAtCommit): raises LEASE_LOST, naming the
   * first in request order whose rows all ran out by the database clock since. A lease no row has any more was
   * released by an ack of this transaction (the rows were locked): held, as in lost(), and `live` is then null. An
   * aggregate in a lateral, not EXISTS: the planner cannot turn it into a join that reads the tenant's every lease.
   */
  heldAtCommit(tenantId: string, leases: string[]): Statement<void> {
    const tenant = shared(tenantId);
    return prepared(
      'leasehold_transaction_leases_held',
      sql`SELECT leasehold_lease_lost(x.lease) FROM (
            SELECT r.lease FROM unnest(${unsized(leases, 'uuid[]')}) WITH ORDINALITY AS r(lease, n)
             CROSS JOIN LATERAL (
                   SELECT bool_or(c.lease_expires_at > clock_timestamp()) AS live
                     FROM consumers c WHERE c.tenant_id = ${tenant} AND c.lease_id = r.lease
                 ) h
             WHERE NOT h.live
             ORDER BY r.n LIMIT 1) x`,
      () => undefined,
    );
  }

  /**
   * A lease is held if a row still has it, live by the database clock now, or if it was live when locked and no row has
   * it any more: the rows were locked, so only an ack of this transaction could have released it.
   */
  async lost(
    reader: StatementReader,
    tenantId: string,
    requiredLeases: string[],
    liveAtStart: Set<string>,
  ): Promise<string[]> {
    const leases = requiredLeases.filter(isUuid);
    const rows =
      leases.length === 0
        ? []
        : await reader.run(
            statement(
              sql`SELECT lease_id, bool_or(lease_expires_at > clock_timestamp()) AS live
               FROM consumers
              WHERE tenant_id = ${tenantId} AND lease_id = ANY(${leases}::uuid[])
              GROUP BY lease_id`,
              rowsOf<{ lease_id: string; live: boolean }>,
            ),
          );
    const now = new Map(rows.map((row) => [row.lease_id, row.live]));
    return requiredLeases.filter((lease) => (now.has(lease) ? !now.get(lease) : !liveAtStart.has(lease)));
  }
}
