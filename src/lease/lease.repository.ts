import { Inject, Injectable } from '@nestjs/common';
import type { PoolClient } from 'pg';
import { databaseFailureOf, DatabaseTimeoutError, PoolUnavailableError } from '../common/database-errors';
import { isoTimestamp } from '../common/sql-timestamp';
import { APP_CONFIG, AppConfig } from '../config/app-config';
import { ConflictRetries } from '../database/conflict-retries';
import { DatabaseEngine } from '../database/database-engine';
import { acquireWithin, monotonicNow, withinBudget, workBudgetMs } from '../database/deadline';
import { Database } from '../database/database';
import { arrayLiteral } from '../database/array-literal';
import { Statement } from '../database/statement';
import { INT32_MAX } from '../common/input';

export interface RenewalRequest {
  tenantId: string;
  leaseId: string;
  seconds: number;
  /** Rows the lease renewed last time (1 when unknown): fewer renewed now is when skipped rows are looked for. */
  expectedRows?: number;
}

export interface LeaseRenewal {
  renewed: number;
  earliestExpiresAt: string | null;
  /** Seconds the lease had left when this renewal reached it (its tightest row). */
  slackSeconds?: number;
  remainingSeconds?: number;
  deadlineSeconds?: number;
  /** When nothing was renewed: whether a row still holds this lease id (so it expired). */
  held?: boolean;
  /** Live rows of the lease another transaction held locked, left as they were rather than waited for. */
  busy?: boolean;
}

export class RenewalFailedError extends Error {
  constructor(
    readonly reason: string,
    cause: unknown,
  ) {
    super(`renew failed: ${reason}`, { cause });
    this.name = 'RenewalFailedError';
  }
}

const RENEWAL_RECORD = `lease_renewals = c.lease_renewals + 1, lease_renewed_at = l.now,
           lease_renewal_slack_ms = LEAST(extract(epoch FROM l.old_expires_at - l.now) * 1000, ${INT32_MAX})::int`;

/*
 * Row locks in primary-key order, liveness re-checked after each lock. See docs/internals.md. A row another transaction
 * holds (an ack, a transaction of the lease) is skipped, never waited for: one statement renews many tenants' leases.
 */
const RENEW_SQL = `
  WITH requested AS (
    SELECT * FROM unnest($1::int[], $2::uuid[], $3::uuid[], $4::int[], $5::int[])
      AS r(idx, tenant_id, lease_id, seconds, expected_rows)
  ), wanted AS (
    SELECT tenant_id, lease_id, max(seconds) AS seconds FROM requested GROUP BY tenant_id, lease_id
  ), locked AS (
    SELECT c.tenant_id, c.partition_id, c.consumer_group, c.lease_id, c.lease_expires_at AS old_expires_at, w.seconds
      FROM consumers AS c
      JOIN wanted AS w ON c.tenant_id = w.tenant_id AND c.lease_id = w.lease_id
     WHERE c.lease_id IS NOT NULL AND c.lease_expires_at > clock_timestamp()
     ORDER BY c.tenant_id, c.partition_id, c.consumer_group
       FOR UPDATE OF c SKIP LOCKED
  ), clocked AS (
    SELECT l.*, clock_timestamp() AS now FROM locked AS l
  ), renewed AS (
    UPDATE consumers AS c
       SET lease_expires_at = GREATEST(c.lease_expires_at, LEAST(l.now + make_interval(secs => l.seconds), c.lease_deadline)),
           ${RENEWAL_RECORD}
      FROM clocked AS l
     WHERE c.tenant_id = l.tenant_id
       AND c.partition_id = l.partition_id
       AND c.consumer_group = l.consumer_group
       AND c.lease_id = l.lease_id
       AND c.lease_expires_at > l.now
    RETURNING c.tenant_id, c.lease_id, c.partition_id, c.consumer_group, c.lease_expires_at,
              l.old_expires_at - l.now AS slack, c.lease_expires_at - l.now AS remaining,
              c.lease_deadline - l.now AS deadline
  ), per_lease AS (
    SELECT tenant_id, lease_id, count(*)::int AS renewed, min(lease_expires_at) AS earliest, min(slack) AS slack,
           min(remaining) AS remaining, min(deadline) AS deadline
      FROM renewed GROUP BY tenant_id, lease_id
  )
  SELECT r.idx, coalesce(p.renewed, 0) AS renewed, ${isoTimestamp('p.earliest')} AS earliest_expires_at,
         extract(epoch FROM p.slack)::float8 AS slack_seconds, extract(epoch FROM p.remaining)::float8 AS remaining_seconds,
         extract(epoch FROM p.deadline)::float8 AS deadline_seconds,
         CASE WHEN p.renewed IS NULL
              THEN EXISTS (SELECT 1 FROM consumers AS c WHERE c.tenant_id = r.tenant_id AND c.lease_id = r.lease_id)
         END AS held,
         CASE WHEN coalesce(p.renewed, 0) < r.expected_rows
              THEN EXISTS (SELECT 1 FROM consumers AS c
                            WHERE c.tenant_id = r.tenant_id AND c.lease_id = r.lease_id
                              AND c.lease_expires_at > clock_timestamp()
                              AND NOT EXISTS (SELECT 1 FROM renewed AS n
                                               WHERE n.tenant_id = c.tenant_id AND n.partition_id = c.partition_id
                                                 AND n.consumer_group = c.consumer_group))
         END AS busy
    FROM requested AS r
    LEFT JOIN per_lease AS p ON p.tenant_id = r.tenant_id AND p.lease_id = r.lease_id`;

/* The common case when not under load: without unnest and grouping it plans and runs in about half the time. */
const RENEW_ONE_SQL = `
  WITH locked AS (
    SELECT partition_id, consumer_group, lease_expires_at AS old_expires_at
      FROM consumers
     WHERE tenant_id = $1 AND lease_id = $2 AND lease_id IS NOT NULL AND lease_expires_at > clock_timestamp()
     ORDER BY partition_id, consumer_group
       FOR UPDATE SKIP LOCKED
  ), clocked AS (
    SELECT l.*, clock_timestamp() AS now FROM locked AS l
  ), renewed AS (
    UPDATE consumers AS c
       SET lease_expires_at = GREATEST(c.lease_expires_at, LEAST(l.now + make_interval(secs => $3), c.lease_deadline)),
           ${RENEWAL_RECORD}
      FROM clocked AS l
     WHERE c.tenant_id = $1
       AND c.partition_id = l.partition_id
       AND c.consumer_group = l.consumer_group
       AND c.lease_id = $2
       AND c.lease_expires_at > l.now
    RETURNING c.partition_id, c.consumer_group, c.lease_expires_at, l.old_expires_at - l.now AS slack,
              c.lease_expires_at - l.now AS remaining, c.lease_deadline - l.now AS deadline
  )
  SELECT 0 AS idx, count(*)::int AS renewed, ${isoTimestamp('min(lease_expires_at)')} AS earliest_expires_at,
         extract(epoch FROM min(slack))::float8 AS slack_seconds, extract(epoch FROM min(remaining))::float8 AS remaining_seconds,
         extract(epoch FROM min(deadline))::float8 AS deadline_seconds,
         CASE WHEN count(*) = 0
              THEN EXISTS (SELECT 1 FROM consumers WHERE tenant_id = $1 AND lease_id = $2)
         END AS held,
         CASE WHEN count(*) < $4
              THEN EXISTS (SELECT 1 FROM consumers AS c
                            WHERE c.tenant_id = $1 AND c.lease_id = $2 AND c.lease_expires_at > clock_timestamp()
                              AND NOT EXISTS (SELECT 1 FROM renewed AS n
                                               WHERE n.partition_id = c.partition_id
                                                 AND n.consumer_group = c.consumer_group))
         END AS busy
    FROM renewed`;

interface RenewalRow {
  idx: number;
  renewed: number;
  earliest_expires_at: string | null;
  slack_seconds: number | null;
  remaining_seconds: number | null;
  deadline_seconds: number | null;
  held: boolean | null;
  busy: boolean | null;
}

/** On the pg pool, not a TypeORM query runner: pg's named prepared statements cut its cost by a third. */
@Injectable()
export class LeaseRepository {
  private readonly budgetMs: number;
  private readonly acquireTimeoutMs: number;

  constructor(
    private readonly database: Database,
    private readonly engine: DatabaseEngine,
    private readonly retries: ConflictRetries,
    @Inject(APP_CONFIG) config: AppConfig,
  ) {
    this.budgetMs = workBudgetMs(config.database);
    this.acquireTimeoutMs = config.database.acquireTimeoutMs;
  }

  /** Answers in request order, or fails by `deadline` (monotonicNow() time). */
  async renew(requests: readonly RenewalRequest[], deadline: number): Promise<LeaseRenewal[]> {
    const client = await acquireWithin(this.database.pool, Math.min(this.acquireTimeoutMs, deadline - monotonicNow()));
    try {
      const statement = this.renewal(requests);
      const rows = await this.execute(client, statement, deadline).catch((error: unknown) => {
        throw renewalError(error);
      });
      return statement.parse(rows);
    } finally {
      client.release();
    }
  }

  /** The statement is a unit of work of its own: one PostgreSQL gave up as a deadlock or a conflict runs again. */
  private async execute(
    client: PoolClient,
    statement: Statement<LeaseRenewal[]>,
    deadline: number,
  ): Promise<RenewalRow[]> {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const budget = Math.min(this.budgetMs, deadline - monotonicNow());
        return await withinBudget(
          client,
          budget,
          async () => (await this.engine.runWhole<RenewalRow>(client, statement)).rows,
        );
      } catch (error) {
        const pauseMs = this.retries.after(error, attempt, deadline);
        if (pauseMs === undefined) throw error;
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }
  }

  /**
   * Written out rather than with `sql`: the texts are fixed, and the route's hottest statement skips numbering them on
   * every request. Its rows answer the requests in request order.
   */
  private renewal(requests: readonly RenewalRequest[]): Statement<LeaseRenewal[]> {
    const parse = (rows: RenewalRow[]): LeaseRenewal[] => answersOf(rows, requests.length);
    if (requests.length === 1) {
      const [only] = requests;
      return {
        name: 'leasehold_renew_one',
        text: RENEW_ONE_SQL,
        values: [only.tenantId, only.leaseId, only.seconds, only.expectedRows ?? 1],
        parse,
      };
    }
    return {
      parse,
      name: 'leasehold_renew_many',
      text: RENEW_SQL,
      values: [
        arrayLiteral(requests.map((_request, index) => index)),
        arrayLiteral(requests.map((request) => request.tenantId)),
        arrayLiteral(requests.map((request) => request.leaseId)),
        arrayLiteral(requests.map((request) => request.seconds)),
        arrayLiteral(requests.map((request) => request.expectedRows ?? 1)),
      ],
    };
  }
}

function answersOf(rows: RenewalRow[], count: number): LeaseRenewal[] {
  const answers = new Array<LeaseRenewal>(count);
  for (const row of rows) {
    const answer: LeaseRenewal = { renewed: row.renewed, earliestExpiresAt: row.earliest_expires_at };
    if (row.slack_seconds !== null) answer.slackSeconds = row.slack_seconds;
    if (row.remaining_seconds !== null) answer.remainingSeconds = row.remaining_seconds;
    if (row.deadline_seconds !== null) answer.deadlineSeconds = row.deadline_seconds;
    if (row.held !== null) answer.held = row.held;
    if (row.busy) answer.busy = true;
    answers[row.idx] = answer;
  }
  return answers;
}

function renewalError(error: unknown): Error {
  const failure = databaseFailureOf(error);
  if (failure === 'unavailable') return new PoolUnavailableError(error);
  if (error instanceof DatabaseTimeoutError) return new RenewalFailedError('database timeout', error);
  // The server's own message goes to the log (with the cause), never to the caller.
  return new RenewalFailedError(failure === 'timeout' ? 'statement timeout' : 'database error', error);
}
