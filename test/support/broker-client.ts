import { NestExpressApplication } from '@nestjs/platform-express';
import request from 'supertest';
import { TENANT_HEADER } from './test-app';

export type Query = Record<string, string | number | boolean>;

/** HTTP calls of one tenant against one broker instance. */
export class BrokerClient {
  constructor(
    private readonly app: NestExpressApplication,
    readonly tenant: string,
  ) {}

  private get http() {
    return request(this.app.getHttpServer());
  }

  push(items: unknown): request.Test {
    return this.post('/api/v1/push', { items });
  }

  /** A POST with exactly this JSON body, or none at all when it is undefined. */
  post(path: string, body?: unknown): request.Test {
    const call = this.http.post(path).set(TENANT_HEADER, this.tenant);
    return body === undefined ? call : call.send(body as object);
  }

  /** A POST of this JSON text, exactly as written. */
  postText(path: string, json: string): request.Test {
    return this.http.post(path).set(TENANT_HEADER, this.tenant).set('content-type', 'application/json').send(json);
  }

  /** Pushes count messages with payload {n} and transaction ids `${prefix}-${n}`; fails the test unless all are queued. */
  async pushMany(
    queue: string,
    count: number,
    partition?: string,
    prefix = `${queue}-${partition ?? 'Default'}`,
  ): Promise<string[]> {
    const items = Array.from({ length: count }, (_, n) => ({
      queue,
      partition,
      payload: { n },
      transactionId: `${prefix}-${n}`,
    }));
    const response = await this.push(items);
    if (response.status !== 201 || response.body.some((result: { status: string }) => result.status !== 'queued')) {
      throw new Error(`push failed: ${response.status} ${JSON.stringify(response.body)}`);
    }
    return items.map((item) => item.transactionId);
  }

  pop(queue: string, query: Query = {}, partition?: string): request.Test {
    const path = `/api/v1/pop/queue/${encodeURIComponent(queue)}${
      partition === undefined ? '' : `/partition/${encodeURIComponent(partition)}`
    }`;
    return this.http.get(path).set(TENANT_HEADER, this.tenant).query(query);
  }

  /** Pops under a lease; fails the test unless the pop answers 200. */
  async popLeased(queue: string, query: Query = {}, partition?: string): Promise<PopBody> {
    const response = await this.pop(queue, query, partition);
    expect(response.status).toBe(200);
    return response.body as PopBody;
  }

  /** Pushes count messages (see pushMany) and pops under a lease; fails the test unless the pop answers 200. */
  async pushAndPop(queue: string, count: number, query: Query = {}): Promise<PopBody> {
    await this.pushMany(queue, count);
    return this.popLeased(queue, query);
  }

  ack(body: unknown): request.Test {
    return this.post('/api/v1/ack', body);
  }

  ackBatch(body: unknown): request.Test {
    return this.post('/api/v1/ack/batch', body);
  }

  /** Acks every message of a pop response as completed, with its lease. */
  ackAll(popBody: PopBody, status = 'completed'): request.Test {
    return this.ackBatch({
      consumerGroup: popBody.consumerGroup,
      acknowledgments: popBody.messages.map((message) => ({
        transactionId: message.transactionId,
        partitionId: message.partitionId,
        leaseId: popBody.leaseId,
        status,
      })),
    });
  }

  extend(leaseId: string, seconds = 60): request.Test {
    return this.http.post(`/api/v1/lease/${leaseId}/extend`).set(TENANT_HEADER, this.tenant).send({ seconds });
  }

  configure(body: unknown): request.Test {
    return this.post('/api/v1/configure', body);
  }

  get(path: string, query: Query = {}): request.Test {
    return this.http.get(path).set(TENANT_HEADER, this.tenant).query(query);
  }

  delete(path: string): request.Test {
    return this.http.delete(path).set(TENANT_HEADER, this.tenant);
  }
}

export interface PopMessage {
  id: string;
  transactionId: string;
  traceId: string | null;
  data: unknown;
  producerSub: string | null;
  createdAt: string;
  partitionId: string;
  partition: string;
  leaseId: string | null;
  consumerGroup: string;
  deliveryAttempt: number;
  leaseEpoch: number;
}

export interface ClaimedPartition {
  partitionId: string;
  partition: string;
  leaseEpoch: number;
  messages: number;
}

export interface PopBody {
  success: boolean;
  queue: string;
  partition: string;
  partitionId: string;
  leaseId: string | null;
  consumerGroup: string;
  messages: PopMessage[];
  partitionsClaimed: number;
  claimedPartitions: ClaimedPartition[];
}
