import { Injectable } from '@nestjs/common';
import { compositeKey } from '../common/composite-key';

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
  queue: string;
  consumerGroup: string;
  partitionId: string;
  partition: string;
  leaseId: string;
  leaseEpoch: number;
  committedOffset: number;
  leaseEndOffset: number;
  /** Each message's offset by its transactionId. */
  offsets: Map<string, number>;
}

/** Messages remembered across all leases; the oldest leases are forgotten past it. */
export const HANDED_OUT_MESSAGES = 10_000;
/** A batch larger than this is not remembered: its ack locks its cursor as any other. */
export const HANDED_OUT_BATCH = 1_000;

/**
 * What this process's pops handed out, so that the ack of a batch can be decided before it reaches the database and
 * written in one statement that holds the cursor to what the claim left (AckService). A hint only: when the cursor has
 * moved on (another ack, an expiry, another process), that statement changes nothing and the ack locks the cursor.
 * Bounded by HANDED_OUT_MESSAGES; a lease is forgotten by the first ack that names it, whatever that ack finds.
 */
@Injectable()
export class HandedOutLeases {
  private readonly leases = new Map<string, HandedOutLease>();
  private messages = 0;

  /** After the claim committed; a batch spread over several partitions is not remembered. */
  handedOut(tenantId: string, queue: string, consumerGroup: string, claimed: readonly HandedOutMessage[]): void {
    const first = claimed[0];
    if (!first?.leaseId || claimed.length > HANDED_OUT_BATCH) return;
    const offsets = new Map<string, number>();
    for (const message of claimed) {
      if (message.partitionId !== first.partitionId) return;
      offsets.set(message.transactionId, message.seq);
    }
    const key = compositeKey(tenantId, first.leaseId);
    this.forgetKey(key);
    this.leases.set(key, {
      queue,
      consumerGroup,
      partitionId: first.partitionId,
      partition: first.partition,
      leaseId: first.leaseId,
      leaseEpoch: first.leaseEpoch,
      committedOffset: first.afterOffset,
      leaseEndOffset: first.throughOffset,
      offsets,
    });
    this.messages += offsets.size;
    for (const [oldest, lease] of this.leases) {
      if (this.messages <= HANDED_OUT_MESSAGES) break;
      this.leases.delete(oldest);
      this.messages -= lease.offsets.size;
    }
  }

  /** The lease, forgotten from now on. */
  take(tenantId: string, leaseId: string): HandedOutLease | undefined {
    const key = compositeKey(tenantId, leaseId);
    const lease = this.leases.get(key);
    this.forgetKey(key);
    return lease;
  }

  forget(tenantId: string, leaseId: string): void {
    if (this.leases.size > 0) this.forgetKey(compositeKey(tenantId, leaseId));
  }

  /** Messages remembered (for tests and the bound). */
  get size(): number {
    return this.messages;
  }

  private forgetKey(key: string): void {
    const lease = this.leases.get(key);
    if (!lease) return;
    this.leases.delete(key);
    this.messages -= lease.offsets.size;
  }
}
