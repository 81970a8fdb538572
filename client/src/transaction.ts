import type {
  AckStatus,
  Message,
  RequestOptions,
  TransactionAckOperation,
  TransactionFailureReason,
  TransactionOperation,
  TransactionRequest,
  TransactionResult,
} from './types';

export interface TransactionSender {
  sendTransaction(request: TransactionRequest, options?: RequestOptions): Promise<TransactionResult>;
}

export interface TransactionPushItem<T = unknown> {
  payload: T;
  // Give one to make the transaction safe to retry: a replay then finds it stored and answers
  // `duplicate` instead of storing the message again.
  transactionId?: string;
  traceId?: string;
}

export interface TransactionAckOptions {
  status?: AckStatus;
  error?: string;
}

/** A transaction the broker rolled back: nothing of it applied. */
export class TransactionFailedError extends Error {
  override readonly name = 'TransactionFailedError';

  constructor(
    // Undefined from a broker that gives none.
    readonly reason: TransactionFailureReason | undefined,
    readonly brokerError: string,
    readonly transactionId: string,
  ) {
    super(`transaction ${transactionId} rolled back (${reason ?? 'no reason given'}): ${brokerError}`);
  }
}

/**
 * Acks and pushes committed together or not at all: `client.transaction()`,
 * then `ack(message)` for inputs, `push(queue, items)` for outputs, `commit()`.
 * Each acked message's lease is required at commit, and its epoch sent, so a
 * worker whose lease ran out (and was re-claimed) cannot commit its output.
 */
export class Transaction {
  private readonly operations: TransactionOperation[] = [];
  private readonly leases = new Set<string>();

  constructor(private readonly sender: TransactionSender) {}

  get size(): number {
    return this.operations.length;
  }

  /** Whether an ack of this message is already in the transaction. */
  acks(message: Pick<Message, 'partitionId' | 'transactionId'>): boolean {
    return this.operations.some(
      (operation) =>
        operation.type === 'ack' &&
        operation.partitionId === message.partitionId &&
        operation.transactionId === message.transactionId,
    );
  }

  ack(message: Message, options: TransactionAckOptions = {}): this {
    const operation: TransactionAckOperation = {
      type: 'ack',
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      status: options.status ?? 'completed',
    };
    if (message.consumerGroup !== null && message.consumerGroup !== undefined) {
      operation.consumerGroup = message.consumerGroup;
    }
    if (message.leaseId) {
      operation.leaseId = message.leaseId;
      this.leases.add(message.leaseId);
    }
    if (typeof message.leaseEpoch === 'number') {
      operation.leaseEpoch = message.leaseEpoch;
    }
    if (options.error !== undefined) {
      operation.error = options.error;
    }
    this.operations.push(operation);
    return this;
  }

  push<T>(queue: string, items: TransactionPushItem<T>[], options: { partition?: string } = {}): this {
    this.operations.push({
      type: 'push',
      items: items.map((item) => ({
        queue,
        ...(options.partition === undefined ? {} : { partition: options.partition }),
        ...item,
      })),
    });
    return this;
  }

  /** A lease that must still be held at commit, though no ack of this transaction names it. */
  requireLease(leaseId: string): this {
    this.leases.add(leaseId);
    return this;
  }

  /**
   * Sends it. Resolves on commit, and on `duplicate` (an earlier attempt of this same
   * transaction committed); any other rollback rejects with a TransactionFailedError.
   */
  async commit(options?: RequestOptions): Promise<TransactionResult> {
    if (this.operations.length === 0) {
      throw new Error('the transaction has no operations to commit');
    }
    const result = await this.sender.sendTransaction(
      { operations: this.operations, requiredLeases: [...this.leases] },
      options,
    );
    if (!result.success && result.reason !== 'duplicate') {
      throw new TransactionFailedError(result.reason, result.error ?? '', result.transactionId);
    }
    return result;
  }
}
