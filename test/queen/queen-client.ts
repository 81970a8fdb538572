import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { TENANT_HEADER } from '../support/test-app';

/**
 * The requests Queen's JavaScript client (queen-mq) sends for the calls its
 * own test suite makes, replayed over HTTP: the package is not on the npm
 * registry this project installs from, and it needs Node 22. The shapes
 * follow the client's source: `config()` merges its QUEUE_DEFAULTS into the
 * options, `push` sends a generated transactionId and partition Default,
 * `pop` sends batch, wait and timeout.
 */
export const QUEEN_QUEUE_DEFAULTS = {
  leaseTime: 300,
  retryLimit: 3,
  priority: 0,
  delayedProcessing: 0,
  windowBuffer: 0,
  maxSize: 10000,
  retentionSeconds: 0,
  completedRetentionSeconds: 0,
  encryptionEnabled: false,
};

export class QueenClient {
  constructor(
    private readonly app: NestExpressApplication,
    private readonly tenant: string,
  ) {}

  private get http() {
    return request(this.app.getHttpServer());
  }

  /** `queue(name).config(options).create()` */
  async create(queue: string, options: Record<string, unknown>): Promise<{ configured?: boolean }> {
    const response = await this.http
      .post('/api/v1/configure')
      .set(TENANT_HEADER, this.tenant)
      .send({ queue, namespace: null, task: null, options: { ...QUEEN_QUEUE_DEFAULTS, ...options } });
    return response.body as { configured?: boolean };
  }

  /** `queue(name)[.partition(p)].push([{ data }, ...])` */
  async push(queue: string, payload: unknown, ...more: unknown[]): Promise<number> {
    return this.pushTo(queue, 'Default', payload, ...more);
  }

  async pushTo(queue: string, partition: string, ...payloads: unknown[]): Promise<number> {
    const items = payloads.map((payload) => ({ queue, partition, payload, transactionId: crypto.randomUUID() }));
    const response = await this.http.post('/api/v1/push').set(TENANT_HEADER, this.tenant).send({ items });
    return response.status;
  }

  /** `queue(name)[.partition(p)][.group(g)].batch(n).wait(w).pop()`: the messages, [] for a 204 */
  async pop(
    queue: string,
    batch: number,
    options: { partition?: string; group?: string; wait?: boolean } = {},
  ): Promise<QueenMessage[]> {
    const path = `/api/v1/pop/queue/${queue}${options.partition ? `/partition/${options.partition}` : ''}`;
    const response = await this.http
      .get(path)
      .set(TENANT_HEADER, this.tenant)
      .query({
        batch,
        wait: options.wait ?? false,
        timeout: 30000,
        ...(options.group ? { consumerGroup: options.group } : {}),
      });
    return response.status === 200 ? (response.body as { messages: QueenMessage[] }).messages : [];
  }

  /**
   * `queue(name).group(g)[.subscriptionMode(m)].concurrency(n).batch(1).wait(false).consume(handler)`:
   * n workers pop one message at a time and ack it (the client's auto-ack), each stopping at its first
   * empty answer, which is stricter than the client's idle window. Answers how many were handled.
   */
  async consume(queue: string, group: string, options: { concurrency: number; subscriptionMode?: string }) {
    let handled = 0;
    const worker = async () => {
      for (;;) {
        const response = await this.http
          .get(`/api/v1/pop/queue/${queue}`)
          .set(TENANT_HEADER, this.tenant)
          .query({ batch: 1, wait: false, consumerGroup: group, ...pick(options, 'subscriptionMode') });
        if (response.status !== 200) return;
        for (const message of (response.body as { messages: QueenMessage[] }).messages) {
          handled += 1;
          await this.http.post('/api/v1/ack').set(TENANT_HEADER, this.tenant).send({
            transactionId: message.transactionId,
            partitionId: message.partitionId,
            leaseId: message.leaseId,
            status: 'completed',
            consumerGroup: group,
          });
        }
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
    return handled;
  }

  /** `client.deleteConsumerGroup(group, deleteMetadata)` */
  async deleteConsumerGroup(group: string, deleteMetadata = true): Promise<request.Response> {
    return this.http
      .delete(`/api/v1/consumer-groups/${encodeURIComponent(group)}`)
      .set(TENANT_HEADER, this.tenant)
      .query({ deleteMetadata });
  }

  /** `client.admin.deleteConsumerGroupForQueue(group, queue, deleteMetadata)` */
  async deleteConsumerGroupForQueue(group: string, queue: string, deleteMetadata = true): Promise<request.Response> {
    return this.http
      .delete(`/api/v1/consumer-groups/${encodeURIComponent(group)}/queues/${encodeURIComponent(queue)}`)
      .set(TENANT_HEADER, this.tenant)
      .query({ deleteMetadata });
  }

  /** `client.admin.seekConsumerGroup(group, queue, { timestamp } | { toEnd: true })` */
  async seekConsumerGroup(group: string, queue: string, target: object): Promise<request.Response> {
    return this.http
      .post(`/api/v1/consumer-groups/${encodeURIComponent(group)}/queues/${encodeURIComponent(queue)}/seek`)
      .set(TENANT_HEADER, this.tenant)
      .send(target);
  }

  /** `client.transaction()` */
  transaction(): QueenTransaction {
    return new QueenTransaction(this.http, this.tenant);
  }
}

export interface QueenMessage {
  transactionId: string;
  partitionId: string;
  leaseId?: string | null;
  data: Record<string, any>;
}

/**
 * Queen's TransactionBuilder as it sends: push items with queue, payload and
 * partition only; acks with transactionId, partitionId, status (completed by
 * default) and consumerGroup when given, never a leaseId; every acked
 * message's leaseId in requiredLeases. A rolled-back answer throws its error.
 */
export class QueenTransaction {
  private readonly operations: Array<Record<string, unknown>> = [];
  private readonly leases = new Set<string>();
  private target: { queue: string; partition?: string } | undefined;

  constructor(
    private readonly http: ReturnType<typeof request>,
    private readonly tenant: string,
  ) {}

  queue(name: string, partition?: string): this {
    this.target = { queue: name, partition };
    return this;
  }

  push(items: Array<{ data: unknown }>): this {
    const { queue, partition } = this.target!;
    this.operations.push({
      type: 'push',
      items: items.map((item) => ({ queue, payload: item.data, ...(partition ? { partition } : {}) })),
    });
    return this;
  }

  ack(message: Partial<QueenMessage>, status = 'completed', context: { consumerGroup?: string } = {}): this {
    this.operations.push({
      type: 'ack',
      transactionId: message.transactionId,
      partitionId: message.partitionId,
      status,
      ...(context.consumerGroup ? { consumerGroup: context.consumerGroup } : {}),
    });
    if (message.leaseId) this.leases.add(message.leaseId);
    return this;
  }

  async commit(): Promise<{ success: boolean; results: unknown[] }> {
    if (this.operations.length === 0) throw new Error('Transaction has no operations to commit');
    const response = await this.http
      .post('/api/v1/transaction')
      .set(TENANT_HEADER, this.tenant)
      .send({ operations: this.operations, requiredLeases: [...this.leases] });
    const result = response.body as { success?: boolean; error?: string; results: unknown[] };
    if (response.status !== 200 || !result.success) throw new Error(result.error ?? `HTTP ${response.status}`);
    return result as { success: boolean; results: unknown[] };
  }
}

function pick<T extends object>(object: T, key: keyof T): Partial<T> {
  return object[key] === undefined ? {} : ({ [key]: object[key] } as Partial<T>);
}
