import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, QueryRunner } from 'typeorm';
import { PoolUnavailableError } from '../common/database-errors';
import { isoTimestamp } from '../common/sql-timestamp';

export interface LeaseRenewal {
  renewed: number;
  /** Earliest expiry among the renewed rows, already in the contract's format. */
  earliestExpiresAt: string | null;
}

/** The renewal statement failed after a connection was obtained. */
export class RenewalFailedError extends Error {
  constructor(readonly reason: string, cause: unknown) {
    super(`renew failed: ${reason}`, { cause });
    this.name = 'RenewalFailedError';
  }
}

/*
 * One statement. The CTE locks the lease's rows in primary-key order before
 * updating them: two concurrent extends of one multi-partition lease then
 * queue behind each other instead of deadlocking, which is what an UPDATE
 * that locks rows in scan order does. The UPDATE repeats the liveness test
 * because a row may have been released or re-leased while we waited.
 */
const RENEW_SQL = `
  WITH locked AS (
    SELECT partition_id, consumer_group
      FROM consumers
     WHERE tenant_id = $1 AND lease_id = $2 AND lease_expires_at > now()
     ORDER BY partition_id, consumer_group
       FOR UPDATE
  ), renewed AS (
    UPDATE consumers AS c
       SET lease_expires_at = GREATEST(c.lease_expires_at, now() + make_interval(secs => $3))
      FROM locked AS l
     WHERE c.tenant_id = $1
       AND c.partition_id = l.partition_id
       AND c.consumer_group = l.consumer_group
       AND c.lease_id = $2
       AND c.lease_expires_at > now()
    RETURNING c.lease_expires_at
  )
  SELECT count(*)::int AS renewed, ${isoTimestamp('min(lease_expires_at)')} AS earliest_expires_at
    FROM renewed`;

@Injectable()
export class LeaseRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /** Extends every live consumer row of this tenant held by `leaseId`; never shortens, never resurrects. */
  async renew(tenantId: string, leaseId: string, seconds: number): Promise<LeaseRenewal> {
    const runner = await this.acquire();
    try {
      const rows: Array<{ renewed: number; earliest_expires_at: string | null }> = await runner
        .query(RENEW_SQL, [tenantId, leaseId, seconds])
        .catch((error: unknown) => {
          throw new RenewalFailedError(reasonOf(error), error);
        });
      return { renewed: rows[0].renewed, earliestExpiresAt: rows[0].earliest_expires_at };
    } finally {
      await runner.release();
    }
  }

  private async acquire(): Promise<QueryRunner> {
    const runner = this.dataSource.createQueryRunner();
    try {
      await runner.connect();
      return runner;
    } catch (error) {
      await runner.release().catch(() => undefined);
      throw new PoolUnavailableError(error);
    }
  }
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
