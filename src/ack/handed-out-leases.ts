import { Injectable } from '@nestjs/common';

/** A claimed message as the pop saw it: enough to tell the cursor the claim left behind. */
export interface HandedOutMessage {
  transactionId: string;
  partitionId: string;
  partition: string;
  leaseId: string | null;
  leaseEpoch: number;
  seq: number;
  /** The cursor's committed offset at the claim. */
  afterOffset: number;
  /** The last offset the claim leased. */
  throughOffset: number;
}

/** A lease this process handed out on one partition, and that cursor as its claim left it. */
export interface HandedOutLease {
  tenantId: string;
  queue: string;
  consumerGroup: string;
  partitionId: string;
  partition: string;
  leaseId: string;
  leaseEpoch: number;
  committedOffset: number;
  leaseEndOffset: number;
  /** The messages' transactionIds and, at the same index, their offsets (arrays: a Map costs more per lease). */
  transactionIds: string[];
  seqs: number[];
}

/** Leases and messages remembered at most; the oldest leases are forgotten past either (a lease costs ~600 bytes). */
export const HANDED_OUT_LEASES = 1_000;
export const HANDED_OUT_MESSAGES = 10_000;
/** A batch larger than this is not remembered: its ack locks its cursor as any other. */
export const HANDED_OUT_BATCH = 1_000;

/**
 * What this process's pops handed out, so that the ack of a batch can be decided before it reaches the database and
 * written in one statement that holds the cursor to what the claim left (AckService). A hint only: when the cursor has
 * moved on (another ack, an expiry, another process), that statement changes nothing and the ack locks the cursor.
 * Bounded (HANDED_OUT_LEASES, HANDED_OUT_MESSAGES); a lease is forgotten by the first ack that names it, whatever that
 * ack finds, and by a transaction that acks or requires it.
 */
@Injectable()
export class HandedOutLeases {
  private readonly leases = new Map<string, HandedOutLease>();
  private messages = 0;

  /** After the claim committed; a batch spread over several partitions is not remembered. */
  handedOut(tenantId: string, queue: string, consumerGroup: string, claimed: readonly HandedOutMessage[]): void {
    const first = claimed[0];
    if (!first?.leaseId || claimed.length > HANDED_OUT_BATCH) return;
    const transactionIds: string[] = [];
    const seqs: number[] = [];
    for (const message of claimed) {
      if (message.partitionId !== first.partitionId) return;
      transactionIds.push(message.transactionId);
      seqs.push(message.seq);
    }
    this.forgetLease(first.leaseId);
    this.leases.set(first.leaseId, {
      tenantId,
      queue,
      consumerGroup,
      partitionId: first.partitionId,
      partition: first.partition,
      leaseId: first.leaseId,
      leaseEpoch: first.leaseEpoch,
      committedOffset: first.afterOffset,
      leaseEndOffset: first.throughOffset,
      transactionIds,
      seqs,
    });
    this.messages += seqs.length;
    for (const [oldest, lease] of this.leases) {
      if (this.messages <= HANDED_OUT_MESSAGES && this.leases.size <= HANDED_OUT_LEASES) break;
      this.leases.delete(oldest);
      this.messages -= lease.seqs.length;
    }
  }

  /** The lease, forgotten from now on; another tenant's lease id finds nothing. */
  take(tenantId: string, leaseId: string): HandedOutLease | undefined {
    const lease = this.leases.get(leaseId);
    if (lease?.tenantId !== tenantId) return undefined;
    this.forgetLease(leaseId);
    return lease;
  }

  forget(tenantId: string, leaseId: string): void {
    if (this.leases.get(leaseId)?.tenantId === tenantId) this.forgetLease(leaseId);
  }

  /** Messages remembered (for tests and the bound). */
  get size(): number {
    return this.messages;
  }

  private forgetLease(leaseId: string): void {
    const lease = this.leases.get(leaseId);
    if (!lease) return;
    this.leases.delete(leaseId);
    this.messages -= lease.seqs.length;
  }
}
