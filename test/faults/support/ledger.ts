import { Client } from 'pg';

export interface DeliveredMessage {
  transactionId: string;
  partitionId: string;
  partition: string;
  deliveryAttempt: number;
}

interface Delivery {
  receivedAt: number;
  leaseId: string;
  messages: DeliveredMessage[];
}

interface StoredMessage {
  partitionId: string;
  partition: string;
  seq: number;
}

/**
 * What producers were told and what consumers saw, checked at the end
 * against the database: every message answered 201 is stored once, delivered
 * in order per partition, and consumed exactly once (acknowledged, or
 * dead-lettered when the run nacks), never delivered again after a
 * successful ack, and its partition's offsets stay whole.
 */
export class Ledger {
  /** transactionId → partition name, for every push answered 201 (queued or duplicate). */
  readonly accepted = new Map<string, string>();
  /** Per producer that sends one message at a time: its transaction ids, in the order it sent them. */
  readonly sent = new Map<string, string[]>();
  readonly deliveries: Delivery[] = [];
  /** transactionId → times a `completed` ack of it answered success. */
  readonly acked = new Map<string, number>();
  /** transactionId → when its first successful `completed` ack was answered. */
  private readonly ackedAt = new Map<string, number>();

  /** Only for senders that wait for each 201 before the next: their order is the one the partition must keep. */
  sending(producer: string, transactionId: string): void {
    const list = this.sent.get(producer) ?? [];
    if (!list.includes(transactionId)) list.push(transactionId);
    this.sent.set(producer, list);
  }

  pushAccepted(partition: string, transactionId: string): void {
    this.accepted.set(transactionId, partition);
  }

  delivered(leaseId: string, messages: DeliveredMessage[]): void {
    this.deliveries.push({ receivedAt: performance.now(), leaseId, messages });
  }

  ackSucceeded(transactionId: string): void {
    this.acked.set(transactionId, (this.acked.get(transactionId) ?? 0) + 1);
    if (!this.ackedAt.has(transactionId)) this.ackedAt.set(transactionId, performance.now());
  }

  /**
   * Every check, against the tenant's rows. Problems are returned as text, so
   * a failing run shows all of them at once.
   */
  async problems(db: Client, tenant: string, queue: string, consumerGroup = '__QUEUE_MODE__'): Promise<string[]> {
    const problems: string[] = [];
    const stored = await this.stored(db, tenant, queue);

    for (const [transactionId, partition] of this.accepted) {
      const rows = stored.get(transactionId) ?? [];
      if (rows.length !== 1) problems.push(`${transactionId} (201) stored ${rows.length} times`);
      else if (rows[0].partition !== partition) problems.push(`${transactionId} stored in ${rows[0].partition}`);
    }
    for (const transactionId of stored.keys()) {
      if (!this.accepted.has(transactionId)) problems.push(`${transactionId} stored but never answered 201`);
    }
    problems.push(...(await this.partitionProblems(db, tenant, queue, consumerGroup)));

    const seqOf = (id: string): number | undefined => stored.get(id)?.[0]?.seq;
    for (const [producer, ids] of this.sent) {
      const seqs = ids.filter((id) => this.accepted.has(id)).map(seqOf);
      if (seqs.some((seq, index) => index > 0 && (seq === undefined || seq <= seqs[index - 1]!))) {
        problems.push(`${producer}: stored out of the order it sent them in`);
      }
    }

    const firstDelivered = new Map<string, number>();
    for (const delivery of this.deliveries) {
      const byPartition = new Map<string, number[]>();
      for (const message of delivery.messages) {
        const seq = seqOf(message.transactionId);
        if (seq === undefined) {
          problems.push(`${message.transactionId} delivered but not stored`);
          continue;
        }
        byPartition.set(message.partitionId, [...(byPartition.get(message.partitionId) ?? []), seq]);
        if (!firstDelivered.has(message.transactionId)) firstDelivered.set(message.transactionId, delivery.receivedAt);
        const ackedAt = this.ackedAt.get(message.transactionId);
        if (ackedAt !== undefined && delivery.receivedAt > ackedAt) {
          problems.push(`${message.transactionId} delivered again after its ack succeeded`);
        }
      }
      for (const [partitionId, seqs] of byPartition) {
        if (seqs.some((seq, index) => index > 0 && seq !== seqs[index - 1] + 1)) {
          problems.push(
            `lease ${delivery.leaseId}: partition ${partitionId} delivered out of order: ${seqs.join(',')}`,
          );
        }
      }
    }
    const byPartition = new Map<string, Array<{ seq: number; at: number }>>();
    for (const [transactionId, at] of firstDelivered) {
      const [row] = stored.get(transactionId)!;
      byPartition.set(row.partitionId, [...(byPartition.get(row.partitionId) ?? []), { seq: row.seq, at }]);
    }
    for (const [partitionId, firsts] of byPartition) {
      firsts.sort((a, b) => a.seq - b.seq);
      if (firsts.some((first, index) => index > 0 && first.at < firsts[index - 1].at)) {
        problems.push(`partition ${partitionId}: a message was first delivered before an earlier one`);
      }
    }
    for (const transactionId of this.accepted.keys()) {
      if (!firstDelivered.has(transactionId)) problems.push(`${transactionId} (201) never delivered`);
      if ((this.acked.get(transactionId) ?? 0) > 1)
        problems.push(`${transactionId} acked ${this.acked.get(transactionId)} times`);
    }
    return problems;
  }

  private async stored(db: Client, tenant: string, queue: string): Promise<Map<string, StoredMessage[]>> {
    const { rows } = await db.query(
      `SELECT m.transaction_id, m.partition_id, p.name AS partition, m.seq
         FROM messages m
         JOIN partitions p ON p.tenant_id = m.tenant_id AND p.id = m.partition_id
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
        WHERE m.tenant_id = $1 AND q.name = $2`,
      [tenant, queue],
    );
    const stored = new Map<string, StoredMessage[]>();
    for (const row of rows) {
      const list = stored.get(row.transaction_id) ?? [];
      list.push({ partitionId: row.partition_id, partition: row.partition, seq: Number(row.seq) });
      stored.set(row.transaction_id, list);
    }
    return stored;
  }

  /** Offsets whole (1..last_offset, no gap, none past it), every message consumed, no lease left live. */
  private async partitionProblems(db: Client, tenant: string, queue: string, consumerGroup: string): Promise<string[]> {
    const { rows } = await db.query(
      `SELECT p.name, p.last_offset, count(m.seq)::int AS stored, coalesce(max(m.seq), 0) AS max_seq,
              c.committed_offset, coalesce(c.lease_expires_at > clock_timestamp(), false) AS lease_live
         FROM partitions p
         JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
         LEFT JOIN messages m ON m.tenant_id = p.tenant_id AND m.partition_id = p.id
         LEFT JOIN consumers c ON c.tenant_id = p.tenant_id AND c.partition_id = p.id AND c.consumer_group = $3
        WHERE p.tenant_id = $1 AND q.name = $2
        GROUP BY p.name, p.last_offset, c.committed_offset, c.lease_expires_at`,
      [tenant, queue, consumerGroup],
    );
    const problems: string[] = [];
    for (const row of rows) {
      const last = Number(row.last_offset);
      if (row.stored !== last || Number(row.max_seq) !== last) {
        problems.push(`${row.name}: last_offset ${last} but ${row.stored} messages up to seq ${row.max_seq}`);
      }
      if (Number(row.committed_offset ?? 0) !== last) {
        problems.push(`${row.name}: cursor at ${row.committed_offset} of ${last}`);
      }
      if (row.lease_live) problems.push(`${row.name}: a lease is still live`);
    }
    return problems;
  }
}

/** Whether the group's cursor has reached the end of every partition of the queue. */
export async function consumedAll(
  db: Client,
  tenant: string,
  queue: string,
  consumerGroup = '__QUEUE_MODE__',
): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT count(*)::int AS behind
       FROM partitions p
       JOIN queues q ON q.tenant_id = p.tenant_id AND q.id = p.queue_id
       LEFT JOIN consumers c ON c.tenant_id = p.tenant_id AND c.partition_id = p.id AND c.consumer_group = $3
      WHERE p.tenant_id = $1 AND q.name = $2 AND coalesce(c.committed_offset, 0) < p.last_offset`,
    [tenant, queue, consumerGroup],
  );
  return rows[0].behind === 0;
}

/**
 * Broker sessions idle inside a transaction for over a second: none may
 * outlive the request that opened it. (Between two statements of a live
 * transaction a session is idle in transaction for a moment.) Brokers
 * under test name themselves in their database URL, so other test files'
 * sessions do not count.
 */
export async function orphanedTransactions(db: Client, applicationName: string): Promise<number> {
  const { rows } = await db.query(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = $1
        AND state LIKE 'idle in transaction%' AND state_change < clock_timestamp() - interval '1 second'`,
    [applicationName],
  );
  return rows[0].n;
}
